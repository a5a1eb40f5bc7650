"""The gateway's ASGI app: parse, ask the hold, forward, stream back.

One catch-all route. A ``POST`` to a provider path (:mod:`._anthropic`, :mod:`._chat`,
:mod:`._responses`) is rewritten (:mod:`._rewrite`) before it is forwarded; every other request
(``/v1/models``, files, batches, anything) is forwarded as it came. Responses are relayed as
they arrive (httpx's ``aiter_raw``: the upstream's bytes, content encoding and all, nothing
buffered), with the upstream's status and headers.

Never logged, stored or put in an error: a header's value (API keys, ``authorization``), a body,
an exception's text.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import orjson
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from cargohold._errors import (
    CargoholdError,
    InvalidScopeError,
    StoreError,
    StoreUnavailableError,
    UsageError,
)
from cargohold._events import Reason, RequestOutcome
from cargohold._tokens import preload
from cargohold.gateway._anthropic import ANTHROPIC
from cargohold.gateway._chat import CHAT
from cargohold.gateway._loop import (
    APIS,
    READ_TOOLS,
    Api,
    Call,
    EventReader,
    EventTooLarge,
    Result,
    engages,
)
from cargohold.gateway._persisted import DEFAULT_FOLDER
from cargohold.gateway._provider import Provider
from cargohold.gateway._resent import long_digits
from cargohold.gateway._responses import RESPONSES
from cargohold.gateway._rewrite import RewriteCounts, Rewriter
from cargohold.guard import ContextLeakError, ContextWindowExceededError

if TYPE_CHECKING:
    from cargohold._hold import Hold

SESSION_HEADER = "x-cargohold-session"
"""The request header naming the conversation's session scope; stripped before forwarding."""

_PROVIDERS = (ANTHROPIC, CHAT, RESPONSES)
# Hop-by-hop headers (RFC 9110 7.6.1) and what httpx sets itself; never forwarded either way.
_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
_REQUEST_DROP = _HOP | {b"host", b"content-length", SESSION_HEADER.encode()}
_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """How a gateway forwards.

    Attributes:
        upstream: The base URL requests are forwarded to (``http://127.0.0.1:8080``,
            ``https://api.anthropic.com``); ``None``: each provider's own (Anthropic's for the
            Messages paths and for requests carrying ``anthropic-version``, OpenAI's for the
            rest).
        compact: Whether lossless compaction runs on each request (the hold's
            ``compaction_*`` settings).
        tool_results: The folder a client's ``<persisted-output>`` notices may name (Claude
            Code's ``~/.claude/projects`` by default); the file is offloaded and its stub
            replaces the notice. ``None``: notices are left as they are.
        timeout: Seconds to connect to the upstream, and the longest silence allowed while it
            answers (between two streamed chunks too).
        max_request_bytes: The largest request body accepted (413 in the provider's shape).
        max_response_bytes: The largest response relayed; a longer one is cut off (the client
            sees the connection end before the response does).
        read_tools: Whether the gateway adds the read tools to a request whose history holds
            a cargohold reference, and runs them itself when the model's answer calls only
            them (for clients that cannot add tools: :mod:`._loop`).
        read_rounds: The most rounds of read-tool calls the gateway runs for one request; the
            last is asked to answer (``tool_choice`` ``none``).
    """

    # Never in the repr: a URL may carry credentials, a folder is a path.
    upstream: str | None = field(default=None, repr=False)
    compact: bool = False
    tool_results: Path | None = field(default=DEFAULT_FOLDER, repr=False)
    timeout: float = 600.0
    max_request_bytes: int = 64 * 1024 * 1024
    max_response_bytes: int = 512 * 1024 * 1024
    read_tools: bool = False
    read_rounds: int = 4

    def __post_init__(self) -> None:
        if not 1 <= self.read_rounds <= 32:
            raise UsageError("read_rounds is 1 to 32")


class _TooLarge(Exception):
    """A body over its limit."""


class ResponseCut(CargoholdError):
    """The upstream's response broke off or went over ``max_response_bytes`` after its headers
    were sent: the gateway ends the connection so the client cannot take it as complete."""


class _Relayed(StreamingResponse):
    """A relayed upstream response, whose upstream connection is closed however the relay
    ends: complete, broken off, or cancelled by a client that went away mid-stream."""

    def __init__(
        self, answer: httpx.Response, content: AsyncIterator[bytes], status_code: int
    ) -> None:
        super().__init__(content, status_code=status_code)
        self._answer = answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._answer.aclose()


def build_app(
    hold: Hold,
    config: GatewayConfig | None = None,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Starlette:
    """The gateway as an ASGI app, for uvicorn (``cargohold gateway``) or any ASGI server.

    Args:
        hold: The hold whose store, thresholds and policies rewrite requests; its scope is the
            default one, a request's ``x-cargohold-session`` header derives another session.
        config: Where and how to forward.
        transport: The httpx transport to the upstream (tests; the default opens connections).

    Returns:
        The app; ``app.state.rewriter`` is its :class:`Rewriter`, whose
        :attr:`Rewriter.totals` sum what every request kept out (bytes, estimated tokens).
    """
    config = config or GatewayConfig()
    preload()  # in the background: the first request's stubs and count never wait for it
    rewriter = Rewriter(compact=config.compact, tool_results=config.tool_results)
    timeout = httpx.Timeout(config.timeout)
    state: dict[str, httpx.AsyncClient] = {}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with httpx.AsyncClient(
            timeout=timeout, transport=transport, follow_redirects=False
        ) as client:
            state["client"] = client
            yield

    async def handle(request: Request) -> Response:
        provider = _provider_for(request)
        shaper = provider or _guess(request.headers)
        try:
            body = await _read(request, config.max_request_bytes)
        except _TooLarge:
            return _error(
                shaper,
                413,
                "request_too_large",
                f"the request is over the gateway's {config.max_request_bytes:,}-byte limit "
                "(max_request_bytes)",
            )
        except ClientDisconnect:
            return Response(status_code=499)
        base = config.upstream or shaper.default_upstream
        url = base.rstrip("/") + request.url.path
        if request.url.query:
            url += "?" + request.url.query
        # Raw bytes both ways: a header's value may be any octets (a UTF-8 user-agent), which
        # neither side has to decode; hop-by-hop names are matched on their bytes.
        headers = [
            (name, value)
            for name, value in request.headers.raw
            if name.lower() not in _REQUEST_DROP
        ]
        client = state["client"]
        if provider is not None:
            session = request.headers.get(SESSION_HEADER)
            rewritten = await _rewrite(hold, rewriter, provider, body, session)
            if isinstance(rewritten, Response):
                return rewritten
            body = rewritten.body
            if config.read_tools and rewritten.parsed is not None:
                api = APIS[provider.name]
                if engages(api, rewritten.parsed, body):
                    with_tools = api.with_tools(rewritten.parsed)
                    if request.url.path.rstrip("/").endswith("/count_tokens"):
                        body = _dumps(with_tools, rewritten.python)  # counts what is sent
                    else:
                        reads = _Reads(
                            hold=rewritten.hold,
                            rewriter=rewriter,
                            provider=provider,
                            api=api,
                            config=config,
                            client=client,
                            method=request.method,
                            url=url,
                            headers=_identity(headers),
                            python=rewritten.python,
                        )
                        return await reads.answer(with_tools)
        upstream = client.build_request(request.method, url, headers=headers, content=body)
        answer = await _send(client, upstream, shaper, config.timeout)
        if isinstance(answer, Response):
            return answer
        return await _relayed(answer, config.max_response_bytes)

    app = Starlette(
        routes=[Route("/{path:path}", handle, methods=_METHODS)],
        lifespan=lifespan,
    )
    app.state.rewriter = rewriter  # its totals: bytes and tokens kept out, per request summed
    return app


def _provider_for(request: Request) -> Provider | None:
    """The provider whose request this is, when it is one the gateway rewrites."""
    if request.method != "POST":
        return None
    path = request.url.path.rstrip("/")
    for provider in _PROVIDERS:
        if any(path.endswith(suffix) for suffix in provider.suffixes):
            return provider
    return None


def _guess(headers: Mapping[str, str]) -> Provider:
    """The provider whose shape an error of another request takes (and whose upstream it goes
    to when none is configured): Anthropic's clients send ``anthropic-version``."""
    return ANTHROPIC if "anthropic-version" in headers or "x-api-key" in headers else CHAT


async def _read(request: Request, limit: int) -> bytes:
    """The request body, refused as soon as it passes ``limit`` (never held whole beyond it)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


class _NotFinite(ValueError):
    """A body with NaN, Infinity or a number too large for a float: no JSON can carry it."""


def _constant(name: str) -> float:
    raise _NotFinite(name)


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _NotFinite(text)
    return number


def _loads(body: bytes) -> tuple[Any, bool]:
    """The JSON of a body, and whether it must be written back by Python's json.

    orjson reads what it reads exactly; a body with a long run of digits, or one orjson
    refuses (a lone surrogate escape, an integer beyond 64 bits), is read by Python's json.

    Raises:
        _NotFinite: The body holds NaN, Infinity or a number beyond a float's range.
        ValueError: The body is not JSON.
    """
    if not long_digits(body):
        try:
            return orjson.loads(body), False
        except orjson.JSONDecodeError:
            pass
    return json.loads(body, parse_constant=_constant, parse_float=_finite), True


def _dumps(value: Any, python: bool) -> bytes:
    """Compact JSON, key order kept: the same request gives the same bytes every turn.

    ``python``: written by Python's json (what it read), ASCII-escaped, so a lone surrogate
    goes back as the escape the client sent and every integer as its digits.
    """
    if not python:
        try:
            return orjson.dumps(value)
        except TypeError:  # a string orjson cannot write (a surrogate the rewrite produced)
            pass
    return json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


@dataclass(frozen=True, slots=True)
class _Rewritten:
    """A request ready to forward: its bytes, its JSON, how it is written, and the hold of
    its scope (the header's session, else the gateway's)."""

    body: bytes
    parsed: dict[str, Any] | None
    python: bool
    hold: Hold


async def _rewrite(
    hold: Hold, rewriter: Rewriter, provider: Provider, body: bytes, session: str | None
) -> _Rewritten | Response:
    """The request to forward, or the provider-shaped refusal to answer instead: read,
    rewritten, written and its event recorded in one call on the worker pool (each hop to the
    pool costs a few tenths of a millisecond)."""
    return await hold.arun(_rewrite_now, hold, rewriter, provider, body, session)


def _rewrite_now(
    hold: Hold, rewriter: Rewriter, provider: Provider, body: bytes, session: str | None
) -> _Rewritten | Response:
    """:func:`_rewrite`, on the worker pool.

    A request that resends its scope's previous messages byte for byte has only what follows
    them read (:meth:`Rewriter.rewrite_resent`); any other is read and rewritten whole.
    """
    try:
        scoped: Hold | None = hold if session is None else hold.for_session(session)
    except InvalidScopeError:
        scoped = None
    done: _Done | None = None
    python = False
    if scoped is not None:
        done = _run_rewrite(
            scoped, provider, functools.partial(rewriter.rewrite_resent, scoped, provider, body)
        )
    if done is None:
        try:
            parsed, python = _loads(body)
        except _NotFinite:
            return _error(
                provider,
                400,
                "malformed_request",
                "the request body holds NaN, Infinity or a number beyond a float's range, "
                "which JSON cannot carry",
            )
        except (ValueError, RecursionError):
            return _error(provider, 400, "malformed_request", "the request body is not JSON")
        if not isinstance(parsed, dict):
            return _error(
                provider, 400, "malformed_request", "the request body is not a JSON object"
            )
        if scoped is None:
            return _error(
                provider,
                400,
                "invalid_session",
                f"the {SESSION_HEADER} header is not a valid session",
            )
        done = _rewrite_parsed_now(
            scoped, rewriter, provider, parsed, body=None if python else body
        )
    assert scoped is not None  # an invalid session was answered above
    forwarded: bytes | None = None
    answer: _Rewritten | Response
    if done.refusal is not None:
        answer = done.refusal
    elif done.raw:
        forwarded = body
        answer = _Rewritten(body, done.request, python, scoped)  # the client's own bytes
    else:
        try:
            forwarded = _dumps(done.request, python)
            answer = _Rewritten(forwarded, done.request, python, scoped)
        except Exception as exc:  # a bug must not answer plain text on every turn
            done.outcome, done.reason = RequestOutcome.FAILED, Reason.REWRITE_ERROR
            answer = _failed(provider, exc)
    counts = done.counts
    scoped.record_request(
        api=provider.name,
        outcome=done.outcome,
        reason=done.reason,
        request_bytes=len(body),
        forwarded_bytes=0 if forwarded is None else len(forwarded),
        bytes_kept_out=counts.bytes_kept_out,
        tokens_kept_out=counts.tokens_kept_out,
        offloaded=counts.offloaded,
        reused=counts.reused,
        compacted=counts.compacted,
        screened=counts.screened,
    )
    return answer


@dataclass(slots=True)
class _Done:
    """One rewrite's end: the request to forward, or the refusal to answer instead, with
    what the rewrite did and the decision its request event records.

    ``raw``: nothing in the request was rewritten, so the client's own bytes go on.
    """

    request: Any
    refusal: Response | None
    counts: RewriteCounts
    outcome: RequestOutcome = RequestOutcome.FORWARDED
    reason: Reason | None = None
    raw: bool = False


async def _rewrite_parsed(
    scoped: Hold, rewriter: Rewriter, provider: Provider, parsed: dict[str, Any]
) -> _Done:
    """The rewritten request (``parsed`` itself when nothing changed), or the refusal, made
    on the worker pool."""
    return await scoped.arun(_rewrite_parsed_now, scoped, rewriter, provider, parsed)


def _rewrite_parsed_now(
    scoped: Hold,
    rewriter: Rewriter,
    provider: Provider,
    parsed: dict[str, Any],
    *,
    body: bytes | None = None,
) -> _Done:
    """:func:`_rewrite_parsed`, on the worker pool. ``body``: the bytes orjson read
    ``parsed`` from (their rewrite is kept for the next turn)."""

    def rewrite(counts: RewriteCounts) -> tuple[Any, bool, RewriteCounts]:
        forwarded, _ = rewriter.rewrite(scoped, provider, parsed, counts=counts, body=body)
        return forwarded, forwarded is parsed, counts

    done = _run_rewrite(scoped, provider, rewrite)
    assert done is not None  # a whole rewrite always answers
    return done


def _run_rewrite(
    scoped: Hold,
    provider: Provider,
    rewrite: Callable[..., tuple[Any, bool, RewriteCounts] | None],
) -> _Done | None:
    """``rewrite(counts=...)``: the request it gives and whether it is the client's own, or
    the refusal of what it raises; ``None`` when it gives none."""
    counts = RewriteCounts()
    try:
        done = rewrite(counts=counts)
    except ContextLeakError as exc:
        # The guard's message names places and sizes, never content: fit for the client.
        refusal = _error(provider, 400, "context_leak", str(exc))
        return _Done(None, refusal, counts, RequestOutcome.REFUSED, Reason(exc.event.reason))
    except ContextWindowExceededError as exc:
        refusal = _error(provider, 400, "context_window_exceeded", str(exc))
        return _Done(None, refusal, counts, RequestOutcome.REFUSED, Reason(exc.event.reason))
    except CargoholdError as exc:
        # Anything else the hold refused (a compaction that does not read back, a store
        # failure the offloader did not absorb): the request is not forwarded, and only the
        # error's category reaches the client, not its text.
        refusal = _error(
            provider, 500, "rewrite_failed", f"the request could not be rewritten ({exc.code})"
        )
        reason = (
            Reason.STORE_UNAVAILABLE
            if isinstance(exc, StoreUnavailableError)
            else Reason.STORE_ERROR
            if isinstance(exc, StoreError)
            else Reason.REWRITE_ERROR
        )
        return _Done(None, refusal, counts, RequestOutcome.FAILED, reason)
    except Exception as exc:  # a bug must not answer plain text on every turn
        return _Done(
            None, _failed(provider, exc), counts, RequestOutcome.FAILED, Reason.REWRITE_ERROR
        )
    if done is None:
        return None
    forwarded, raw, _ = done
    return _Done(forwarded, None, counts, raw=raw)


async def _send(
    client: httpx.AsyncClient, upstream: httpx.Request, shaper: Provider, timeout: float
) -> httpx.Response | Response:
    """The upstream's answer, its body not yet read, or the provider-shaped error for an
    upstream that is down, not HTTP, or silent past the timeout."""
    try:
        return await client.send(upstream, stream=True)
    except httpx.TimeoutException:
        return _error(
            shaper, 504, "upstream_timeout", f"the upstream did not answer within {timeout:g} s"
        )
    except httpx.HTTPError:
        return _error(
            shaper,
            502,
            "upstream_unavailable",
            "the upstream could not be reached or did not answer with HTTP",
        )


def _identity(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The headers of a request whose answer the gateway reads (to run the read tools): the
    answer must come uncompressed."""
    kept = [(name, value) for name, value in headers if name.lower() != b"accept-encoding"]
    return [*kept, (b"accept-encoding", b"identity")]


def _failed(provider: Provider, exc: Exception) -> Response:
    """The provider-shaped 500 for an unexpected failure of the rewrite: only the
    exception's type reaches the client, never its text."""
    return _error(
        provider,
        500,
        "rewrite_failed",
        f"the request could not be rewritten ({type(exc).__name__})",
    )


async def _relay(answer: httpx.Response, limit: int) -> AsyncIterator[bytes]:
    """The upstream's bytes as they arrive; a break or an overrun ends the connection."""
    sent = 0
    try:
        async for chunk in answer.aiter_raw():
            sent += len(chunk)
            if sent > limit:
                raise ResponseCut("the upstream's response is over max_response_bytes")
            yield chunk
    except httpx.HTTPError:
        raise ResponseCut("the upstream's response broke off") from None
    finally:
        await answer.aclose()


def _error(provider: Provider, status: int, code: str, message: str) -> Response:
    """An error answered by the gateway itself, in the provider's shape."""
    return Response(
        provider.error(status, code, message), status_code=status, media_type="application/json"
    )


@dataclass(slots=True)
class _Reads:
    """One client request the gateway answers with its own read-tool rounds (:mod:`._loop`)."""

    hold: Hold
    rewriter: Rewriter
    provider: Provider
    api: Api
    config: GatewayConfig
    client: httpx.AsyncClient
    method: str
    url: str
    headers: list[tuple[bytes, bytes]]
    python: bool

    async def answer(self, request: dict[str, Any]) -> Response:
        """The final answer to ``request`` (its history rewritten, the read tools added)."""
        try:
            return await self._answer(request)
        except Exception as exc:  # a bug must not answer plain text
            return _failed(self.provider, exc)

    async def _answer(self, request: dict[str, Any]) -> Response:
        first = await self._open(request)
        if isinstance(first, Response):
            return first
        if first.status_code != 200:
            return await _relayed(first, self.config.max_response_bytes)
        if request.get("stream") is True:
            response = _Relayed(first, self._stream(first, request), status_code=200)
            response.raw_headers = _answer_headers(first)
            return response
        try:
            return await self._whole(first, request)
        finally:
            await first.aclose()

    async def _open(self, request: dict[str, Any]) -> httpx.Response | Response:
        try:  # off the event loop: a long conversation takes milliseconds to write
            body = await self.hold.arun(_dumps, request, self.python)
        except Exception as exc:  # a bug must not answer plain text
            return _failed(self.provider, exc)
        upstream = self.client.build_request(
            self.method, self.url, headers=self.headers, content=body
        )
        return await _send(self.client, upstream, self.provider, self.config.timeout)

    async def _run(self, calls: list[Call]) -> list[Result] | Response:
        """The read tools' answers, run in the request's scope (budgets and events as the
        read tools' everywhere)."""

        def run() -> list[Result]:
            answers = []
            room = MAX_ROUND_BYTES
            for number, call in enumerate(calls):
                if number >= MAX_READ_CALLS or room <= 0:
                    answers.append(Result(call, _TOO_MANY, True))
                    continue
                budget = self.hold.settings.read_budget
                answer = self.hold.tools.call(call.name, _within(call, room, budget))
                room -= len(answer.text.encode("utf-8", "surrogatepass"))
                answers.append(Result(call, answer.text, answer.is_error))
            return answers

        try:
            return await self.hold.arun(run)
        except CargoholdError as exc:  # the store failed: not the model's to fix
            return _error(
                self.provider, 502, "read_failed", f"a read tool could not run ({exc.code})"
            )

    async def _next(
        self,
        request: dict[str, Any],
        turn: Any,
        answer_id: str | None,
        calls: list[Call],
        *,
        last: bool,
    ) -> dict[str, Any] | Response:
        """The next round's request: the answer and the read tools' results appended, the
        history rewritten and guarded as every forwarded request is."""
        results = await self._run(calls)
        if isinstance(results, Response):
            return results
        follow_up = self.api.follow_up(request, turn, answer_id, results)
        done = await _rewrite_parsed(self.hold, self.rewriter, self.provider, follow_up)
        if done.refusal is not None:
            return done.refusal
        rewritten: dict[str, Any] = done.request
        return self.api.last_round(rewritten) if last else rewritten

    async def _whole(self, answer: httpx.Response, request: dict[str, Any]) -> Response:
        """A non-streamed request's rounds: each answer read whole, the last returned."""
        earlier: list[Any] = []
        rounds = self.config.read_rounds
        for round_number in range(rounds + 1):
            try:
                data = await _read_answer(answer, self.config.max_response_bytes)
            except ResponseCut:
                return _error(
                    self.provider,
                    502,
                    "upstream_unavailable",
                    "the upstream's answer broke off or went over max_response_bytes",
                )
            finally:
                await answer.aclose()
            try:
                parsed = orjson.loads(data)
            except orjson.JSONDecodeError:
                parsed = None
            if answer.status_code != 200 or not isinstance(parsed, dict):
                return _bytes_answer(answer, data)  # an error or not JSON: as it came
            calls, theirs, turn, answer_id = self.api.split(parsed)
            if not calls or theirs or round_number == rounds:
                if not calls and not earlier:
                    return _bytes_answer(answer, data)  # the model's own answer, exactly
                return _bytes_answer(answer, orjson.dumps(self.api.merged(parsed, earlier)))
            earlier += self.api.visible(turn)
            request_or_error = await self._next(
                request, turn, answer_id, calls, last=round_number + 1 == rounds
            )
            if isinstance(request_or_error, Response):
                return request_or_error
            request = request_or_error
            opened = await self._open(request)
            if isinstance(opened, Response):
                return opened
            answer = opened
        raise AssertionError("unreachable: the last round returns")  # pragma: no cover

    async def _stream(
        self, answer: httpx.Response, request: dict[str, Any]
    ) -> AsyncIterator[bytes]:
        """A streamed request's rounds, spliced into one stream as they arrive."""
        splice = self.api.splice()
        rounds = self.config.read_rounds
        limit = self.config.max_response_bytes
        sent = 0
        for round_number in range(rounds + 1):
            reader = EventReader()
            try:
                # Decoded: the gateway asked for no encoding, and reads what it relays.
                async for chunk in answer.aiter_bytes():
                    sent += len(chunk)
                    if sent > limit:
                        raise ResponseCut("the upstream's response is over max_response_bytes")
                    for event in reader.feed(chunk):
                        for out in splice.feed(event):
                            yield out
                for event in reader.close():  # a last event without its blank line
                    for out in splice.feed(event):
                        yield out
            except httpx.HTTPError:
                raise ResponseCut("the upstream's response broke off") from None
            except EventTooLarge:
                raise ResponseCut("the upstream sent an event over the size read whole") from None
            finally:
                await answer.aclose()
            calls = splice.calls()
            if calls is None or round_number == rounds:
                for out in splice.finish():
                    yield out
                return
            following = await self._next(
                request, splice.turn(), splice.answer_id(), calls, last=round_number + 1 == rounds
            )
            if isinstance(following, Response):
                yield _stream_error(bytes(following.body))
                return
            request = following
            opened = await self._open(request)
            if isinstance(opened, Response):
                yield _stream_error(bytes(opened.body))
                return
            if opened.status_code != 200:
                try:
                    data = await _read_answer(opened, MAX_ERROR_BYTES)
                except ResponseCut:
                    data = b""
                finally:
                    await opened.aclose()
                yield _stream_error(self._upstream_error(opened.status_code, data))
                return
            answer = opened
            splice.next_round()

    def _upstream_error(self, status: int, data: bytes) -> bytes:
        """A later round's upstream error as an error body the SDKs read: the upstream's own
        when it is a JSON object, else one in the provider's shape."""
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return orjson.dumps(parsed)  # one line: no line break can cut the event
        return self.provider.error(
            status,
            "upstream_error",
            f"the upstream answered a read-tool round with HTTP {status}",
        )


def _stream_error(body: bytes) -> bytes:
    """An error body (one line of JSON) as a server-sent ``error`` event: both Anthropic's and
    OpenAI's SDKs raise it as an API error mid-stream."""
    return b"event: error\ndata: " + body + b"\n\n"


MAX_READ_CALLS = 8
"""The most read-tool calls the gateway runs for one answer; the rest are answered with an
error saying so (a hostile or confused model cannot make it read without end)."""

MAX_ROUND_BYTES = 256 * 1024
"""The most bytes the read-tool answers of one round return together: each call's budget is
cut to what is left, so a follow-up cannot outgrow the context by reads alone."""

MAX_ERROR_BYTES = 64 * 1024
"""The most of an upstream's error body read on a later round."""

_TOO_MANY = (
    f"not run: the gateway runs at most {MAX_READ_CALLS} read calls, and returns at most "
    f"{MAX_ROUND_BYTES:,} bytes of reads, for one answer. Read less at once (a line range, "
    "a grep, a query), then read on."
)


def _within(call: Call, room: int, default: int) -> Any:
    """``call``'s arguments, its budget (``default`` when it names none) cut to ``room``
    bytes when the tool takes one."""
    arguments = call.arguments
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return call.arguments  # the tool answers that the arguments are not JSON
    if not isinstance(arguments, dict) or call.name not in _BUDGETED:
        return arguments
    asked = arguments.get("budget")
    if asked is not None and (not isinstance(asked, int) or isinstance(asked, bool)):
        return arguments  # the tool answers that the budget is not an integer
    wanted = default if asked is None else asked
    if wanted <= room:
        return arguments
    return {**arguments, "budget": max(1, room)}


_BUDGETED = frozenset(
    spec.name for spec in READ_TOOLS if "budget" in spec.parameters.get("properties", {})
)


async def _read_answer(answer: httpx.Response, limit: int) -> bytes:
    """An upstream answer's whole body, decoded, refused past ``limit``."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in answer.aiter_bytes():
            size += len(chunk)
            if size > limit:
                raise ResponseCut("the upstream's response is over max_response_bytes")
            chunks.append(chunk)
    except httpx.HTTPError:
        raise ResponseCut("the upstream's response broke off") from None
    return b"".join(chunks)


def _answer_headers(answer: httpx.Response) -> list[tuple[bytes, bytes]]:
    """The upstream's headers, for an answer whose body the gateway writes itself."""
    drop = _HOP | {b"content-length", b"content-encoding"}
    return [(name, value) for name, value in answer.headers.raw if name.lower() not in drop]


def _bytes_answer(answer: httpx.Response, data: bytes) -> Response:
    response = Response(data, status_code=answer.status_code)
    response.raw_headers = [
        *_answer_headers(answer),
        (b"content-length", str(len(data)).encode()),
    ]
    return response


async def _relayed(answer: httpx.Response, limit: int) -> Response:
    """An upstream answer relayed as it comes (its status, headers and bytes)."""
    try:
        response = _Relayed(answer, _relay(answer, limit), status_code=answer.status_code)
        response.raw_headers = [
            (name, value) for name, value in answer.headers.raw if name.lower() not in _HOP
        ]
    except BaseException:
        await answer.aclose()  # the relay never starts: its connection is closed here
        raise
    return response
