"""Serving a low-level MCP ``Server`` on stdio or streamable HTTP, and scoping its requests.

Both ``cargohold mcp`` and ``cargohold proxy`` serve through here. The scope of a request is the
hold's (configuration, ``CARGOHOLD_*``, the command line), or, with ``per_session``, a session of
its own for each MCP session of a streamable HTTP connection (named by a digest of the
``Mcp-Session-Id``, never the id itself), so two clients of one server cannot read each other's
artifacts.

The proxy's connection to a stdio upstream is here too (:func:`stdio_upstream`): the SDK's
stdio client, reading the server's output in time linear in a message's size.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import sys
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TextIO, TypeVar

import anyio
import anyio.lowlevel
import orjson
from mcp.client import stdio as sdk_stdio
from mcp.client._transport import TransportStreams
from mcp.client.stdio import StdioServerParameters
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.models import InitializationOptions
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import INTERNAL_ERROR, jsonrpc_message_adapter

from cargohold._errors import UsageError

if TYPE_CHECKING:
    from cargohold._hold import Hold

_SESSIONS_KEPT = 1024
WHOLE_ABOVE: Final = 256 * 1024
"""A streamable HTTP answer whose one SSE event carries more bytes than this goes as one
``application/json`` body instead (see :class:`WholeAnswers`)."""
_log = logging.getLogger("cargohold.mcp")
P = TypeVar("P")
R = TypeVar("R")


def contained(
    handler: Callable[[ServerRequestContext[Any, Any], P], Awaitable[R]],
) -> Callable[[ServerRequestContext[Any, Any], P], Awaitable[R]]:
    """``handler`` whose unexpected exceptions reach the client by class name only.

    The SDK would answer an exception it does not know with the exception's own text, which may
    hold a path or a body; an :class:`MCPError` (a deliberate answer) passes unchanged.
    """

    @functools.wraps(handler)
    async def run(ctx: ServerRequestContext[Any, Any], params: P) -> R:
        try:
            return await handler(ctx, params)
        except MCPError:
            raise
        except Exception as exc:
            name = type(exc).__name__
            _log.warning("cargohold mcp: %s failed (%s)", ctx.method, name)
            raise MCPError(
                code=INTERNAL_ERROR,
                message=f"cargohold: internal error ({name})",
                data={"reason": "internal_error"},
            ) from None

    return run


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a host and a port (0: any free port).

    Raises:
        UsageError: not of that form.
    """
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError("an HTTP address is HOST:PORT, e.g. 127.0.0.1:8765 (port 0: any free)")
    return host, int(port)


class Scoping:
    """Which hold answers a request: the configured scope, or one per MCP session.

    Args:
        hold: The hold of the configured scope.
        per_session: Give each MCP session (``Mcp-Session-Id``) a session scope of its own;
            requests without one (stdio) use ``hold``.
    """

    __slots__ = ("_hold", "_per_session", "_sessions")

    def __init__(self, hold: Hold, *, per_session: bool = False) -> None:
        self._hold = hold
        self._per_session = per_session
        self._sessions: OrderedDict[str, Hold] = OrderedDict()

    def __repr__(self) -> str:
        return f"Scoping(per_session={self._per_session})"

    @property
    def hold(self) -> Hold:
        """The hold of the configured scope."""
        return self._hold

    def hold_for(self, ctx: ServerRequestContext[Any, Any]) -> Hold:
        """The hold that answers the request ``ctx``."""
        if not self._per_session:
            return self._hold
        session_id = session_id_of(ctx)
        if session_id is None:
            return self._hold
        name = "mcp-" + hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:32]
        held = self._sessions.get(name)
        if held is None:
            held = self._hold.for_session(name)
            self._sessions[name] = held
            while len(self._sessions) > _SESSIONS_KEPT:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(name)
        return held


def session_id_of(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The ``Mcp-Session-Id`` of a streamable HTTP request; ``None`` on stdio."""
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return None
    value = headers.get("mcp-session-id")
    return value if isinstance(value, str) and value else None


async def serve(
    server: Server[Any],
    *,
    http: tuple[str, int] | None = None,
    init_options: InitializationOptions | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``server`` until its client goes away (stdio) or the process is stopped (HTTP).

    Args:
        server: The server.
        http: ``(host, port)`` to serve streamable HTTP on (``/mcp``); ``None`` for stdio.
        init_options: The stdio handshake's options (the server's own by default).
        on_ready: Called with the URL once an HTTP server listens (its port, when 0 was asked).
    """
    if http is None:
        async with stdio_server() as (read_stream, write_stream):
            options = init_options or server.create_initialization_options()
            await server.run(read_stream, write_stream, options)
        return
    import uvicorn

    host, port = http
    app = WholeAnswers(server.streamable_http_app(host=host))

    class _Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and on_ready is not None:
                bound = self.servers[0].sockets[0].getsockname()
                shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
                on_ready(f"http://{shown}:{bound[1]}/mcp")

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await _Server(config).serve()


class WholeAnswers:
    """ASGI middleware: a large answer to a POST goes as ``application/json``, not as an SSE event.

    The SDK's streamable HTTP client refuses an SSE event over 1 MiB (``max_sse_event_size``)
    and other clients may refuse less, yet a read answers up to 1 MiB of body, and its
    JSON-RPC message is larger still (the segment's framing, JSON escapes, the structured
    part). The transport lets a server answer each POST either way, so the SSE stream's start
    is held back until its first event: when that event is the request's own JSON-RPC response
    and it is over :data:`WHOLE_ABOVE`, it is sent as one JSON body (which a client reads
    whole); anything else (a notification or a server request first, a keep-alive ping, a
    small answer) lets the stream go on as it began. A response is held at most until the
    stream's first keep-alive ping.
    """

    def __init__(self, app: Any, *, above: int = WHOLE_ABOVE) -> None:
        self._app = app
        self._above = above

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "POST":
            await self._app(scope, receive, send)
            return
        held: dict[str, Any] | None = None
        decided = converted = False

        async def relay(message: dict[str, Any]) -> None:
            nonlocal held, decided, converted
            if converted:
                return  # the rest of a stream already answered: its end, pings
            if decided:
                await send(message)
                return
            kind = message.get("type")
            if kind == "http.response.start" and _is_event_stream(message):
                held = message
                return
            if held is None or kind != "http.response.body":
                decided = True
                await send(message)
                return
            decided = True
            data = _sole_response(message.get("body", b""), self._above)
            if data is None:
                await send(held)
                await send(message)
                return
            converted = True
            headers = [
                (name, value)
                for name, value in held.get("headers", [])
                if name.lower() not in _SSE_HEADERS
            ]
            headers += [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
            ]
            status = held.get("status", 200)
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": data, "more_body": False})

        await self._app(scope, receive, relay)
        if held is not None and not decided:  # a stream that ended before any event
            await send(held)
            await send({"type": "http.response.body", "body": b"", "more_body": False})


_SSE_HEADERS: Final = frozenset(
    {b"content-type", b"content-length", b"cache-control", b"connection"}
)


def _is_event_stream(start: dict[str, Any]) -> bool:
    for name, value in start.get("headers", []):
        if name.lower() == b"content-type":
            return bytes(value).lower().startswith(b"text/event-stream")
    return False


def _sole_response(chunk: bytes, above: int) -> bytes | None:
    """The JSON-RPC response that ``chunk`` (one whole SSE event) carries, when it is one and
    larger than ``above``; else ``None``."""
    if len(chunk) <= above:
        return None
    text = chunk.replace(b"\r\n", b"\n")
    if not text.endswith(b"\n\n") or b"\n\n" in text[:-2]:
        return None  # not exactly one event
    data: list[bytes] = []
    for line in text[:-2].split(b"\n"):
        field, _, value = line.partition(b":")
        value = value.removeprefix(b" ")
        if field == b"data":
            data.append(value)
        elif field == b"event":
            if value != b"message":
                return None
        elif field not in (b"id", b"retry", b""):
            return None
    body = b"\n".join(data)
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    is_response = (
        isinstance(parsed, dict) and "id" in parsed and ("result" in parsed or "error" in parsed)
    )
    return body if is_response else None


@contextlib.asynccontextmanager
async def stdio_upstream(
    server: StdioServerParameters, errlog: TextIO = sys.stderr
) -> AsyncIterator[TransportStreams]:
    """The SDK's ``stdio_client`` (its process start, message parsing and spec shutdown, all
    its own helpers), but reading the server's output in time linear in a message's size.

    The SDK joins its text buffer to each chunk read from the pipe (64 KiB at most) and splits
    the whole again, so a message of n bytes costs about n²/128 KiB of copying and scanning:
    20 ms for a 2 MB tool result, about 2 s for a 16 MB one (a busy 2-core machine), on every
    call through the proxy. Here
    the chunks are gathered as bytes and joined once, when one holds a line's end. A line's
    bytes are split at ``\n`` before they are decoded, which is exact for UTF-8 (no multibyte
    character holds that byte), the only encoding the proxy speaks to its upstream.

    Raises:
        OSError: the server process could not be started.
        UsageError: parameters naming an encoding other than UTF-8.
    """
    if server.encoding.lower().replace("-", "").replace("_", "") != "utf8":
        raise UsageError("the proxy speaks UTF-8 to its upstream")
    command = await sdk_stdio._get_executable_command(server.command)
    process = await sdk_stdio._create_platform_compatible_process(
        command=command,
        args=server.args,
        env=sdk_stdio.get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    # As the SDK's: the spawn succeeded, and no await comes before the task group is entered
    # (a cancellation in that gap would leak the live process).
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    errors = server.encoding_error_handler
    shutting_down = False
    writer_done = anyio.Event()

    async def stdout_reader() -> None:
        stdout = process.stdout
        assert stdout is not None, "the server process is spawned with pipes"
        try:
            async with read_writer:
                try:
                    pending: list[bytes] = []
                    async for chunk in stdout:
                        # Each byte is joined once: when a chunk holds a line's end, the bytes
                        # gathered before it and its own up to its last end are split; what
                        # follows waits for the next end (a last piece without one is dropped,
                        # as the SDK drops it).
                        end = chunk.rfind(b"\n")
                        if end < 0:
                            pending.append(chunk)
                            continue
                        pending.append(chunk[:end])
                        gathered = b"".join(pending)
                        # What came before this chunk holds no line's end, so the chunk's first
                        # end is its last when the gathered bytes are one line (a tool result
                        # of MiBs, as a rule): that line is not split, a copy of it the less.
                        one = chunk.find(b"\n") == end
                        lines = [gathered] if one else gathered.split(b"\n")
                        pending = [chunk[end + 1 :]]
                        for line in lines:
                            try:
                                await read_writer.send(_parse_line(line, errors))
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return  # the session is gone; only the drain below remains
                finally:
                    await sdk_stdio._drain_stdout(process)
        except anyio.ClosedResourceError:
            pass  # our own shutdown closed the stdout stream under the read
        except (anyio.BrokenResourceError, ConnectionError) as exc:
            if not shutting_down:
                _log.warning(
                    "cargohold proxy: reading the upstream failed (%s)", type(exc).__name__
                )

    async def stdin_writer() -> None:
        stdin = process.stdin
        assert stdin is not None, "the server process is spawned with pipes"
        try:
            async with write_reader:
                async for session_message in write_reader:
                    text = session_message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    await stdin.send((text + "\n").encode("utf-8", errors))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server may still be alive: close the read stream so the session sees the
            # connection end instead of a request hanging forever.
            await read_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()  # the reader drains, so a server stuck writing can read its stdin
        write_stream.close()
        with anyio.move_on_after(sdk_stdio._WRITER_FLUSH_TIMEOUT):
            await writer_done.wait()
        await sdk_stdio._stop_server_process(process)
        await sdk_stdio._aclose_all(read_stream, write_stream, read_writer, write_reader)
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(stdout_reader)
        tasks.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            with anyio.CancelScope(shield=True):  # every wait in it is bounded
                await shutdown()
            tasks.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()


def _parse_line(line: bytes, errors: str) -> SessionMessage | Exception:
    """One line of the upstream's output as the SDK parses it, a parse error returned as a value
    for the session to hand on (the proxy logs its class only: the SDK's own log line carries
    the error's text, which quotes the line). Bytes that are not UTF-8 under the ``strict``
    handler are such an error too, instead of ending the connection."""
    try:
        message = jsonrpc_message_adapter.validate_json(line.decode("utf-8", errors), by_name=False)
    except ValueError as exc:  # UnicodeDecodeError and pydantic's ValidationError among them
        return exc
    return SessionMessage(message)


def announce(url: str) -> None:
    """Tell whoever started the server where it listens (one line on stderr)."""
    print(f"cargohold: serving MCP on {url}", file=sys.stderr, flush=True)
