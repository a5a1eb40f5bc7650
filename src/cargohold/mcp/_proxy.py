"""``cargohold proxy``: any MCP server, with its heavy tool results kept out of context.

The proxy is a server to its client and a client to its upstream server (a command it starts
over stdio, or a streamable HTTP URL). It forwards tools, resources, prompts, completions,
subscriptions, logging, list-changed and resource-updated notifications, progress and
cancellation; it adds the read tools of :data:`cargohold._toolspecs.SPECS` and answers
``resources/read`` of ``artifact://`` itself. On every tool result it offloads each heavy part
(:func:`cargohold.mcp.offload_result`) before the client sees it, and so on every upstream
resource read and prompt (:func:`cargohold.mcp.offload_resource`,
:func:`cargohold.mcp.offload_prompt`: a heavy item becomes its stub's text, under the same URI or
in the same message); in ``tools/list`` it widens (or drops) each output schema a stub would
violate. Tools named in ``ref_arguments`` get their
``artifact://`` arguments resolved to the exact bytes for that call.

Failures of the upstream server are the proxy's to contain: a request that hangs past
``upstream_timeout`` is cancelled upstream and answered with a ``upstream_timeout`` error; a
crash answers ``upstream_closed`` and the next request starts the server again; a result that is
not valid MCP answers ``upstream_malformed``. The proxy keeps serving through all of them, and
what it already stored stays readable.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self, TypeVar

import anyio
import anyio.abc
import anyio.to_thread
from mcp import Client, StdioServerParameters
from mcp.client import Transport
from mcp.client.context import ClientRequestContext
from mcp.client.session import IncomingMessage, MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.session import ServerSession
from mcp.shared._stream_protocols import ReadStream, WriteStream  # the Transport's own types
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    CallToolRequestParams,
    CallToolResult,
    ClientCapabilities,
    CompleteRequestParams,
    CompleteResult,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitationCapability,
    ElicitCompleteNotification,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    EmptyResult,
    GetPromptRequestParams,
    GetPromptResult,
    Implementation,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    PaginatedRequestParams,
    PromptListChangedNotification,
    ReadResourceRequestParams,
    ReadResourceResult,
    ResourceListChangedNotification,
    ResourceUpdatedNotification,
    SamplingCapability,
    ServerCapabilities,
    SetLevelRequest,
    SetLevelRequestParams,
    SubscribeRequest,
    SubscribeRequestParams,
    TextContent,
    Tool,
    ToolListChangedNotification,
    UnsubscribeRequest,
    UnsubscribeRequestParams,
)
from mcp_types.jsonrpc import ErrorData
from pydantic import BaseModel, ValidationError

from cargohold import __version__
from cargohold._errors import CargoholdError, UsageError
from cargohold._tokens import preload
from cargohold.mcp._arguments import Unresolved, resolve_arguments
from cargohold.mcp._content import (
    ResultPolicy,
    offload_prompt,
    offload_resource,
    offload_result,
    offload_sampling,
    rewrite_output_schema,
)
from cargohold.mcp._errors import (
    CONNECTION_CLOSED,
    REQUEST_TIMEOUT,
    RESOURCE_NOT_FOUND,
    UpstreamError,
    UpstreamFailure,
)
from cargohold.mcp._readtools import (
    ARTIFACT_TEMPLATE,
    RESOURCE_BOUND,
    call_read_tool,
    is_artifact_uri,
    read_artifact,
    read_tool_names,
    read_tools,
)
from cargohold.mcp._transport import Scoping, contained, serve, session_id_of, stdio_upstream

if TYPE_CHECKING:
    from cargohold._hold import Hold

_log = logging.getLogger("cargohold.mcp")
T = TypeVar("T")
R = TypeVar("R", bound=BaseModel)

_PEERS_KEPT: Final = 1024
_REF_NOTE: Final = (
    " [cargohold: any string argument may be an artifact://sha256/<hex> reference from a stub "
    "or from artifact_patch; the proxy passes the artifact's exact content in its place.]"
)
_INSTRUCTIONS: Final = (
    "Heavy tool results reach you as cargohold stubs naming an artifact://sha256/<hex> "
    "reference; read exact bytes back with artifact_read, artifact_read_lines, artifact_grep "
    "or artifact_query, in pages that fit your budget; find one by the words it holds with "
    "artifact_search. To change one without re-sending it, "
    "artifact_patch (JSON Patch, or line and byte edits) answers with a new reference, which "
    "tools that take artifact:// arguments accept."
)
_FORWARDED = (
    ToolListChangedNotification,
    ResourceListChangedNotification,
    PromptListChangedNotification,
    ResourceUpdatedNotification,
    LoggingMessageNotification,
    ElicitCompleteNotification,
)
_TRANSPORT_GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


@dataclass(frozen=True, slots=True)
class Upstream:
    """The server the proxy stands in front of: a command to start, or a streamable HTTP URL.

    Attributes:
        command: The command and its arguments (started with the proxy's environment).
        url: The streamable HTTP endpoint (``http://host:port/mcp``).
        cwd: The command's working directory.
    """

    command: Sequence[str] = field(default=(), repr=False)
    url: str | None = field(default=None, repr=False)
    cwd: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "command", tuple(self.command))
        if bool(self.command) == bool(self.url):
            raise UsageError("an upstream is a command to start or a URL, exactly one of them")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise UsageError("an upstream URL is http:// or https://")

    def __repr__(self) -> str:  # never the command line or the URL: they may hold secrets
        return f"Upstream({self.kind})"

    @property
    def kind(self) -> str:
        """``stdio`` or ``http``."""
        return "http" if self.url else "stdio"


class _Link:
    """The one connection to the upstream server: opened on demand, reopened after it is lost.

    A supervisor task owns the SDK client (its context must be entered and left in one task);
    requests ask :meth:`client` for the live one. A connection that is not up within the
    timeout is given up (the attempt is cancelled), and the next request tries again.
    """

    def __init__(
        self,
        upstream: Upstream,
        *,
        timeout: float,
        max_event_bytes: int,
        on_message: MessageHandlerFnT,
        callbacks: dict[str, Any] | None = None,
    ) -> None:
        self._upstream = upstream
        self._timeout = timeout
        self._max_event_bytes = max_event_bytes
        self._on_message = on_message
        self._callbacks = dict(callbacks or {})
        self._client: Client | None = None
        self._wanted = anyio.Event()
        self._attempt = anyio.Event()
        self._attempt.set()
        self._connecting = False
        self._lost = anyio.Event()
        self._ended = anyio.Event()

    def _new_client(self, ended: anyio.Event) -> Client:
        upstream = self._upstream
        inner: Transport
        if upstream.url is not None:
            inner = streamable_http_client(upstream.url, max_sse_event_size=self._max_event_bytes)
        else:
            command = upstream.command
            params = StdioServerParameters(
                command=command[0], args=list(command[1:]), env=dict(os.environ), cwd=upstream.cwd
            )
            inner = stdio_upstream(params)  # the SDK's, without its quadratic reads
        return Client(
            _Watched(inner, ended),
            mode="legacy",  # the handshake every server in the field speaks
            cache=None,  # a proxy forwards: it never answers from a cache
            message_handler=self._on_message,
            logging_callback=_ignore_log,  # forwarded through the message handler instead
            client_info=Implementation(name="cargohold-proxy", version=__version__),
            **self._callbacks,  # what the proxy forwards to its client (declared upstream)
        )

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Supervise connections until cancelled."""
        async with anyio.create_task_group() as tasks:
            task_status.started()
            while True:
                await self._wanted.wait()
                self._wanted = anyio.Event()
                attempt = self._attempt  # the waiters of this attempt, and only they, settle
                up = anyio.Event()
                # Set when the upstream's output ends. The connection is not torn down then
                # (an answer it sent last may still be on its way to its request): the next
                # request that asks for the client finds it ended and reconnects.
                ended = anyio.Event()
                with anyio.CancelScope() as scope:
                    tasks.start_soon(self._watchdog, scope, up)
                    try:
                        async with self._new_client(ended) as client:
                            up.set()
                            self._lost = anyio.Event()
                            self._ended = ended
                            self._client = client
                            self._settle(attempt)
                            await self._lost.wait()
                    except Exception as exc:  # a failed start or a crash: categorical log only
                        # A start that failed is the request's to report (one error, or the
                        # CLI's one line at start); a connection that was up and broke is told.
                        _log.log(
                            logging.WARNING if up.is_set() else logging.DEBUG,
                            "cargohold proxy: upstream (%s) connection ended (%s)",
                            self._upstream.kind,
                            type(exc).__name__,
                        )
                    finally:
                        self._client = None
                        up.set()
                        self._settle(attempt)

    async def _watchdog(self, attempt: anyio.CancelScope, up: anyio.Event) -> None:
        with anyio.move_on_after(self._timeout):
            await up.wait()
            return
        _log.warning(
            "cargohold proxy: upstream (%s) not up within %g s", self._upstream.kind, self._timeout
        )
        attempt.cancel()

    def _settle(self, attempt: anyio.Event) -> None:
        if attempt is self._attempt:
            self._connecting = False
        attempt.set()

    async def client(self) -> Client:
        """The live client, connecting first when there is none.

        A connection whose upstream went away while idle (a stdio server that exited: its
        output ended) is not used: the request that comes next starts the upstream again.

        Raises:
            UpstreamError: ``upstream_unavailable`` when no connection comes up in time.
        """
        if self._client is not None and self._ended.is_set():
            self.lost(self._client)  # gone while idle: this request starts it again
        if self._client is not None:
            return self._client
        if not self._connecting:
            self._connecting = True
            self._attempt = anyio.Event()
            self._wanted.set()
        attempt = self._attempt
        with anyio.move_on_after(self._timeout + 1):
            await attempt.wait()
        if self._client is None:
            raise UpstreamError(UpstreamFailure.UNAVAILABLE, timeout=self._timeout)
        return self._client

    def lost(self, client: Client) -> None:
        """Note that ``client``'s connection is gone (the next request reconnects)."""
        if self._client is client:
            self._client = None
            self._lost.set()


async def _ignore_log(params: LoggingMessageNotificationParams) -> None:
    return None


class _Watched:
    """A client transport whose end is told: ``ended`` is set once its read stream ends.

    An upstream that exits while nothing is asked of it (its stdout reaches its end) is
    noticed then, so the next request starts it again instead of being sent into a closed
    connection and failing with ``upstream_closed``.
    """

    def __init__(self, inner: Transport, ended: anyio.Event) -> None:
        self._inner = inner
        self._ended = ended

    async def __aenter__(
        self,
    ) -> tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]:
        read, write = await self._inner.__aenter__()
        return _WatchedRead(read, self._ended), write

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc_val, exc_tb)


class _WatchedRead:
    """The read stream of :class:`_Watched`: every item passes; its end sets ``ended``."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], ended: anyio.Event) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item, when the inner stream keeps one."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended.set()
            raise

    async def aclose(self) -> None:
        self._ended.set()
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


class _Peers:
    """The downstream sessions, for notifications that are not answers to a request."""

    def __init__(self) -> None:
        self._sessions: OrderedDict[str, ServerSession] = OrderedDict()

    async def remember(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        key = session_id_of(ctx) or ""
        self._sessions[key] = ctx.session
        self._sessions.move_to_end(key)
        while len(self._sessions) > _PEERS_KEPT:
            self._sessions.popitem(last=False)
        return await call_next(ctx)

    async def broadcast(self, notification: Any) -> None:
        for key, session in list(self._sessions.items()):
            try:
                await session.send_notification(notification)
            except Exception as exc:  # a peer that went away: forget it, tell the log its class
                _log.debug("cargohold proxy: dropped a notification (%s)", type(exc).__name__)
                self._sessions.pop(key, None)


FORWARDABLE: Final = ("elicitation", "sampling")
"""Server-to-client requests the proxy can forward (``forward=``, ``cargohold proxy --forward``)."""


class _Asker:
    """Asks the upstream server's requests (elicitation, sampling) of the client whose request
    the server is answering: the one in flight. With requests of several clients in flight (one
    upstream behind HTTP sessions) it cannot tell which one, and says so."""

    def __init__(self) -> None:
        self._inflight: dict[int, ServerRequestContext[Any, Any]] = {}
        self._count = 0

    @contextlib.contextmanager
    def serving(self, ctx: ServerRequestContext[Any, Any]) -> Iterator[None]:
        """Mark ``ctx``'s request as in flight upstream while the block runs."""
        self._count += 1
        key = self._count
        self._inflight[key] = ctx
        try:
            yield
        finally:
            del self._inflight[key]

    async def ask(
        self,
        request: Any,
        result_type: type[R],
        capability: ClientCapabilities,
        what: str,
        prepare: Callable[[ServerRequestContext[Any, Any]], Awaitable[Any]] | None = None,
    ) -> R | ErrorData:
        """Ask ``request`` of the client in flight (``prepare`` makes it for that client)."""
        contexts = list(self._inflight.values())
        if not contexts:
            return ErrorData(
                code=INVALID_REQUEST, message=f"{what}: no client request is in flight to ask"
            )
        if len({session_id_of(ctx) or "" for ctx in contexts}) > 1:
            return ErrorData(
                code=INVALID_REQUEST,
                message=f"{what}: requests of several clients are in flight; the proxy cannot "
                "tell which one to ask",
            )
        target = contexts[-1]
        if not target.session.check_client_capability(capability):
            return ErrorData(code=METHOD_NOT_FOUND, message=f"the client does not support {what}")
        if prepare is not None:
            request = await prepare(target)
        metadata = ServerMessageMetadata(related_request_id=target.request_id)
        try:
            return await target.session.send_request(request, result_type, metadata=metadata)
        except MCPError as exc:  # the client's own answer (a refusal, no back-channel)
            return exc.error
        except (ValidationError, *_TRANSPORT_GONE) as exc:
            return ErrorData(
                code=INTERNAL_ERROR,
                message=f"{what}: the client's answer could not be had ({type(exc).__name__})",
            )


class Proxy:
    """An MCP proxy in front of ``upstream`` that keeps heavy results out of context.

    Args:
        hold: The scope's hold: the store, thresholds, budgets and event sinks.
        upstream: The server to stand in front of.
        policy: How images, audio and blobs are disposed (configured when omitted).
        ref_arguments: Upstream tools whose ``artifact://`` arguments are resolved
            (``ref_arguments`` of the configuration when omitted).
        timeout: Seconds an upstream request (or start) may take (``upstream_timeout``).
        per_session: Over streamable HTTP, give each MCP session a session scope of its own.
        resource_bound: The most bytes one ``resources/read`` of an artifact returns.
        forward: Server-to-client requests to forward (:data:`FORWARDABLE`: ``elicitation``,
            ``sampling``). Each one named is declared to the upstream server and asked of the
            client whose request is in flight; a client that did not declare it answers
            "not supported". None by default: the upstream sees a client without them.
    """

    def __init__(
        self,
        hold: Hold,
        upstream: Upstream,
        *,
        policy: ResultPolicy | None = None,
        ref_arguments: Sequence[str] | None = None,
        timeout: float | None = None,
        per_session: bool = False,
        resource_bound: int = RESOURCE_BOUND,
        forward: Sequence[str] = (),
    ) -> None:
        settings = hold.settings
        unknown = sorted(set(forward) - set(FORWARDABLE))
        if isinstance(forward, str) or unknown:
            raise UsageError(f"forward names requests of: {', '.join(FORWARDABLE)}")
        self._scoping = Scoping(hold, per_session=per_session)
        self._upstream = upstream
        self._policy = policy or ResultPolicy.from_settings(hold)
        names = settings.ref_arguments if ref_arguments is None else ref_arguments
        self._ref_arguments = frozenset(names)
        self._timeout = settings.upstream_timeout if timeout is None else float(timeout)
        if not self._timeout > 0:
            raise UsageError("the upstream timeout is a positive number of seconds")
        self._resource_bound = resource_bound
        self._peers = _Peers()
        self._asker = _Asker()
        self._tools: dict[str, Tool] = {}
        self._told_garbage = False
        callbacks: dict[str, Any] = {}
        if "sampling" in forward:
            callbacks["sampling_callback"] = self._sampling
        if "elicitation" in forward:
            callbacks["elicitation_callback"] = self._elicitation
        self._link = _Link(
            upstream,
            timeout=self._timeout,
            # a result the store would refuse anyway need not be buffered past that
            max_event_bytes=max(4 * settings.limits.max_artifact_bytes, 16 * 1024 * 1024),
            on_message=self._on_upstream_message,
            callbacks=callbacks,
        )

    def __repr__(self) -> str:
        return f"Proxy({self._upstream!r}, timeout={self._timeout:g})"

    async def run(
        self, *, http: tuple[str, int] | None = None, on_ready: Callable[[str], None] | None = None
    ) -> None:
        """Start the upstream, then serve the client (stdio, or streamable HTTP on ``http``)
        until it goes away; the upstream is stopped on the way out.

        Raises:
            UpstreamError: the upstream server could not be started (``upstream_unavailable``).
        """
        preload()  # the tokenizer loads while the upstream starts: no first stub waits for it
        failure: UpstreamError | None = None
        async with anyio.create_task_group() as tasks:
            await tasks.start(self._link.run)
            try:
                client = await self._link.client()
            except UpstreamError:  # raised below, not wrapped in the task group's group
                failure = UpstreamError(
                    UpstreamFailure.UNAVAILABLE, timeout=self._timeout, starting=True
                )
            else:
                capabilities = client.server_capabilities
                server = self.build_server(capabilities, client.server_info, client.instructions)
                options = server.create_initialization_options(_notification_options(capabilities))
                await serve(server, http=http, init_options=options, on_ready=on_ready)
            tasks.cancel_scope.cancel()
        if failure is not None:
            raise failure

    # -- the downstream server ----------------------------------------------------------------

    def build_server(
        self,
        capabilities: ServerCapabilities,
        info: Implementation | None = None,
        instructions: str | None = None,
    ) -> Server[Any]:
        """The downstream server, mirroring the upstream's ``capabilities``."""
        handlers: dict[str, Any] = {
            "on_list_tools": contained(self._list_tools),
            "on_call_tool": contained(self._call_tool),
            "on_list_resources": contained(self._list_resources),
            "on_list_resource_templates": contained(self._list_resource_templates),
            "on_read_resource": contained(self._read_resource),
        }
        resources = capabilities.resources
        if resources is not None and resources.subscribe:
            handlers["on_subscribe_resource"] = contained(self._subscribe)
            handlers["on_unsubscribe_resource"] = contained(self._unsubscribe)
        if capabilities.prompts is not None:
            handlers["on_list_prompts"] = contained(self._list_prompts)
            handlers["on_get_prompt"] = contained(self._get_prompt)
        if capabilities.completions is not None:
            handlers["on_completion"] = contained(self._complete)
        name = info.name if info is not None and info.name else "cargohold-proxy"
        server: Server[Any] = Server(
            name,
            version=info.version if info is not None and info.version else __version__,
            title=f"{name} (via cargohold)",
            instructions=f"{instructions}\n\n{_INSTRUCTIONS}" if instructions else _INSTRUCTIONS,
            **handlers,
        )
        if capabilities.logging is not None:
            # Registered directly: the constructor's on_set_logging_level warns (deprecated in
            # 2026-07-28), yet handshake-era clients still send logging/setLevel.
            server.add_request_handler(
                "logging/setLevel", SetLevelRequestParams, contained(self._set_level)
            )
        server.middleware.append(self._peers.remember)
        return server

    # -- forwarding ---------------------------------------------------------------------------

    async def _forward(self, call: Callable[[Client], Awaitable[T]]) -> T:
        """``call`` on the upstream client, every failure turned into an :class:`UpstreamError`."""
        connected = False
        try:
            with anyio.fail_after(self._timeout):
                client = await self._link.client()
                connected = True
                try:
                    return await call(client)
                except MCPError as exc:
                    if exc.code == CONNECTION_CLOSED:
                        self._link.lost(client)
                        raise UpstreamError(UpstreamFailure.CLOSED, timeout=self._timeout) from None
                    if exc.code == REQUEST_TIMEOUT:
                        raise UpstreamError(
                            UpstreamFailure.TIMEOUT, timeout=self._timeout
                        ) from None
                    raise  # the upstream's own error answer: the client would have seen it too
                except _TRANSPORT_GONE:
                    self._link.lost(client)
                    raise UpstreamError(UpstreamFailure.CLOSED, timeout=self._timeout) from None
                except (ValidationError, RuntimeError, ValueError, TypeError, KeyError):
                    # pydantic on a result that is not MCP; the SDK's RuntimeError on structured
                    # content that breaks the tool's own output schema.
                    raise UpstreamError(UpstreamFailure.MALFORMED, timeout=self._timeout) from None
        except TimeoutError:
            reason = UpstreamFailure.TIMEOUT if connected else UpstreamFailure.UNAVAILABLE
            raise UpstreamError(reason, timeout=self._timeout) from None

    async def _on_upstream_message(self, message: IncomingMessage) -> None:
        if isinstance(message, Exception):  # a transport fault: a line that was not JSON-RPC...
            level = logging.DEBUG if self._told_garbage else logging.WARNING
            self._told_garbage = True  # once: a chatty server would fill the log otherwise
            _log.log(
                level,
                "cargohold proxy: the upstream wrote output that is not MCP (JSON-RPC); it was "
                "ignored (a server logs to stderr, never to stdout) (%s)",
                type(message).__name__,
            )
            return
        if isinstance(message, ToolListChangedNotification):
            self._tools.clear()
        if isinstance(message, _FORWARDED):
            await self._peers.broadcast(message)

    async def _sampling(
        self, context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | CreateMessageResultWithTools | ErrorData:
        result_type: type[CreateMessageResult | CreateMessageResultWithTools] = (
            CreateMessageResultWithTools if params.tools else CreateMessageResult
        )
        capability = ClientCapabilities(sampling=SamplingCapability())

        async def prepare(ctx: ServerRequestContext[Any, Any]) -> CreateMessageRequest:
            # What the server sends goes to the client's model: heavy parts become stubs.
            hold = self._scoping.hold_for(ctx)
            kept = functools.partial(offload_sampling, hold, params, policy=self._policy)
            return CreateMessageRequest(params=await anyio.to_thread.run_sync(kept))

        return await self._asker.ask(None, result_type, capability, "sampling", prepare)

    async def _elicitation(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        request = ElicitRequest(params=params)
        capability = ClientCapabilities(elicitation=ElicitationCapability())
        return await self._asker.ask(request, ElicitResult, capability, "elicitation")

    # -- handlers -----------------------------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        cursor = params.cursor if params is not None else None

        async def call(client: Client) -> ListToolsResult:
            return await client.list_tools(cursor=cursor, cache_mode="bypass")

        listed = await _answer(self._forward(call))
        ours = read_tool_names()
        tools = [self._present(tool) for tool in listed.tools if tool.name not in ours]
        if cursor is None:
            tools.extend(read_tools())
        return ListToolsResult(tools=tools, next_cursor=listed.next_cursor)

    def _present(self, tool: Tool) -> Tool:
        self._tools[tool.name] = tool
        update: dict[str, Any] = {"output_schema": rewrite_output_schema(tool.output_schema)}
        if tool.name in self._ref_arguments:
            update["description"] = (tool.description or "") + _REF_NOTE
        return tool.model_copy(update=update)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult:
        hold = self._scoping.hold_for(ctx)
        name = params.name
        if name in read_tool_names():
            return await call_read_tool(hold, name, params.arguments)
        arguments = params.arguments
        if arguments and name in self._ref_arguments:
            schema = self._tools[name].input_schema if name in self._tools else None
            resolve = functools.partial(
                resolve_arguments, hold, arguments, tool=name, input_schema=schema
            )
            try:
                arguments = await anyio.to_thread.run_sync(resolve)
            except Unresolved as exc:
                return CallToolResult(content=[TextContent(text=str(exc))], is_error=True)

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            await ctx.session.report_progress(progress, total, message)

        async def call(client: Client) -> CallToolResult:
            return await client.call_tool(name, arguments, progress_callback=progress)

        with self._asker.serving(ctx):
            result = await _answer(self._forward(call))
        offload = functools.partial(offload_result, hold, result, tool=name, policy=self._policy)
        return await anyio.to_thread.run_sync(offload)

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        cursor = params.cursor if params is not None else None

        async def call(client: Client) -> ListResourcesResult:
            if client.server_capabilities.resources is None:
                return ListResourcesResult(resources=[])
            return await client.list_resources(cursor=cursor, cache_mode="bypass")

        return await _answer(self._forward(call))

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        cursor = params.cursor if params is not None else None

        async def call(client: Client) -> ListResourceTemplatesResult:
            if client.server_capabilities.resources is None:
                return ListResourceTemplatesResult(resource_templates=[])
            return await client.list_resource_templates(cursor=cursor, cache_mode="bypass")

        listed = await _answer(self._forward(call))
        if cursor is None:
            listed = listed.model_copy(
                update={"resource_templates": [*listed.resource_templates, ARTIFACT_TEMPLATE]}
            )
        return listed

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        if is_artifact_uri(params.uri):
            hold = self._scoping.hold_for(ctx)
            return await read_artifact(hold, params.uri, bound=self._resource_bound)

        async def call(client: Client) -> ReadResourceResult:
            if client.server_capabilities.resources is None:
                raise MCPError(code=RESOURCE_NOT_FOUND, message="no such resource")
            return await client.read_resource(params.uri, cache_mode="bypass")

        with self._asker.serving(ctx):
            result = await _answer(self._forward(call))
        hold = self._scoping.hold_for(ctx)
        offload = functools.partial(offload_resource, hold, result, policy=self._policy)
        return await anyio.to_thread.run_sync(offload)

    async def _subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        request = SubscribeRequest(params=SubscribeRequestParams(uri=params.uri))

        async def call(client: Client) -> EmptyResult:
            return await client.session.send_request(request, EmptyResult)

        return await _answer(self._forward(call))

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        request = UnsubscribeRequest(params=UnsubscribeRequestParams(uri=params.uri))

        async def call(client: Client) -> EmptyResult:
            return await client.session.send_request(request, EmptyResult)

        return await _answer(self._forward(call))

    async def _set_level(
        self, ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams
    ) -> EmptyResult:
        request = SetLevelRequest(params=SetLevelRequestParams(level=params.level))

        async def call(client: Client) -> EmptyResult:
            return await client.session.send_request(request, EmptyResult)

        return await _answer(self._forward(call))

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListPromptsResult:
        cursor = params.cursor if params is not None else None

        async def call(client: Client) -> ListPromptsResult:
            return await client.list_prompts(cursor=cursor, cache_mode="bypass")

        return await _answer(self._forward(call))

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: GetPromptRequestParams
    ) -> GetPromptResult:
        async def call(client: Client) -> GetPromptResult:
            return await client.get_prompt(params.name, params.arguments)

        with self._asker.serving(ctx):
            result = await _answer(self._forward(call))
        hold = self._scoping.hold_for(ctx)
        offload = functools.partial(offload_prompt, hold, result, policy=self._policy)
        return await anyio.to_thread.run_sync(offload)

    async def _complete(
        self, ctx: ServerRequestContext[Any, Any], params: CompleteRequestParams
    ) -> CompleteResult:
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context is not None else None

        async def call(client: Client) -> CompleteResult:
            return await client.complete(params.ref, argument, context)

        return await _answer(self._forward(call))


async def _answer(pending: Awaitable[T]) -> T:
    """The forwarded answer, or the JSON-RPC error the client should get instead.

    The one place an exception becomes a client-visible error: an upstream failure by its
    stable reason, a cargohold error by its code, anything else by its class name only.
    """
    try:
        return await pending
    except UpstreamError as exc:
        _log.warning("cargohold proxy: %s", exc.reason.value)
        raise exc.to_mcp() from None
    except MCPError:
        raise
    except CargoholdError as exc:
        _log.warning("cargohold proxy: request failed (%s)", exc.code)
        raise MCPError(
            code=INTERNAL_ERROR, message=f"cargohold proxy: {exc.code}", data={"reason": exc.code}
        ) from None


def _notification_options(capabilities: ServerCapabilities) -> NotificationOptions:
    tools, resources, prompts = capabilities.tools, capabilities.resources, capabilities.prompts
    return NotificationOptions(
        prompts_changed=bool(prompts is not None and prompts.list_changed),
        resources_changed=bool(resources is not None and resources.list_changed),
        tools_changed=bool(tools is not None and tools.list_changed),
    )


def upstream_from(command: Sequence[str], url: str | None, cwd: str | None = None) -> Upstream:
    """The :class:`Upstream` the command line names (a command after ``--``, or ``--url``)."""
    return Upstream(command=tuple(command), url=url, cwd=cwd)


__all__ = ["Proxy", "Upstream", "upstream_from"]
