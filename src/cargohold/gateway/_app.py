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

import json
import math
import re
from collections.abc import AsyncIterator, Mapping
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

from cargohold._errors import CargoholdError, InvalidScopeError
from cargohold._tokens import preload
from cargohold.gateway._anthropic import ANTHROPIC
from cargohold.gateway._chat import CHAT
from cargohold.gateway._persisted import DEFAULT_FOLDER
from cargohold.gateway._provider import Provider
from cargohold.gateway._responses import RESPONSES
from cargohold.gateway._rewrite import Rewriter
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
    """

    # Never in the repr: a URL may carry credentials, a folder is a path.
    upstream: str | None = field(default=None, repr=False)
    compact: bool = False
    tool_results: Path | None = field(default=DEFAULT_FOLDER, repr=False)
    timeout: float = 600.0
    max_request_bytes: int = 64 * 1024 * 1024
    max_response_bytes: int = 512 * 1024 * 1024


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
        if provider is not None:
            session = request.headers.get(SESSION_HEADER)
            rewritten = await _rewrite(hold, rewriter, provider, body, session)
            if isinstance(rewritten, Response):
                return rewritten
            body = rewritten
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
        upstream = client.build_request(request.method, url, headers=headers, content=body)
        try:
            answer = await client.send(upstream, stream=True)
        except httpx.TimeoutException:
            return _error(
                shaper,
                504,
                "upstream_timeout",
                f"the upstream did not answer within {config.timeout:g} s",
            )
        except httpx.HTTPError:
            return _error(
                shaper,
                502,
                "upstream_unavailable",
                "the upstream could not be reached or did not answer with HTTP",
            )
        try:
            response = _Relayed(
                answer, _relay(answer, config.max_response_bytes), status_code=answer.status_code
            )
            response.raw_headers = [
                (name, value) for name, value in answer.headers.raw if name.lower() not in _HOP
            ]
        except BaseException:
            await answer.aclose()  # the relay never starts: its connection is closed here
            raise
        return response

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


# A run of 19 or more digits: an integer orjson would read as a float once it is over 64 bits
# (or a fraction whose digits a float cannot keep); such a body is read and written by
# Python's json, which keeps integers exact.
_LONG_DIGITS = re.compile(rb"[0-9]{19,}")


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
    if _LONG_DIGITS.search(body) is None:
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


async def _rewrite(
    hold: Hold, rewriter: Rewriter, provider: Provider, body: bytes, session: str | None
) -> bytes | Response:
    """The body to forward, or the provider-shaped refusal to answer instead."""
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
        return _error(provider, 400, "malformed_request", "the request body is not a JSON object")
    try:
        scoped = hold if session is None else hold.for_session(session)
    except InvalidScopeError:
        return _error(
            provider, 400, "invalid_session", f"the {SESSION_HEADER} header is not a valid session"
        )
    try:
        forwarded, _counts = await scoped.arun(rewriter.rewrite, scoped, provider, parsed)
    except ContextLeakError as exc:
        # The guard's message names places and sizes, never content: fit for the client.
        return _error(provider, 400, "context_leak", str(exc))
    except ContextWindowExceededError as exc:
        return _error(provider, 400, "context_window_exceeded", str(exc))
    except CargoholdError as exc:
        # Anything else the hold refused (a compaction that does not read back, a store
        # failure the offloader did not absorb): the request is not forwarded, and only the
        # error's category reaches the client, not its text.
        return _error(
            provider, 500, "rewrite_failed", f"the request could not be rewritten ({exc.code})"
        )
    except Exception as exc:  # a bug must not answer plain text on every turn
        return _failed(provider, exc)
    if forwarded is parsed:
        return body  # nothing rewritten: the client's bytes, exactly
    try:
        return _dumps(forwarded, python)
    except Exception as exc:  # as above
        return _failed(provider, exc)


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
