"""cargohold for LangChain v1 agents and LangGraph: a middleware, the read tools, run binding.

- :class:`CargoholdMiddleware` (give it to ``create_agent(middleware=[...])``): offloads every
  heavy tool result from the tool's own value before LangChain turns it into a ``ToolMessage``,
  compacts every model request when given a policy (``compaction=``; off by default), runs the
  edge guard on it, and registers the read tools.
- :func:`read_tools`: the read tools (``artifact_read``, ``artifact_grep``...) as LangChain tools,
  for a graph built without the middleware.
- :func:`run_hold`: the hold of the run a ``RunnableConfig`` belongs to, for your own nodes.

The scope binds to the run, never to a global: a run's ``thread_id`` is its session
(``hold.for_session(thread_id)``), so a checkpointed thread resumed later, by a new agent in a
new process on the same store, reads the references its messages hold. A run without a
``thread_id`` uses the hold's own session. Each enclosing LangGraph subgraph level (the
``checkpoint_ns`` segments around the running node) is a sub-agent: its events carry that
segment as agent id, the enclosing level's as parent id, and the nesting as depth.

Needs LangChain: ``pip install 'cargohold[langchain]'``. Importing this module without it raises
:class:`cargohold.ConfigError` naming the extra.

Example::

    import cargohold
    from cargohold.langchain import CargoholdMiddleware
    from langchain.agents import create_agent

    hold = cargohold.open(tenant="acme", user="ana", session="app")
    agent = create_agent(model, tools=[fetch_log], middleware=[CargoholdMiddleware(hold)])
    agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "t-42"}})
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import copy
import dataclasses
import functools
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from cargohold._errors import ConfigError, UsageError

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
    from langchain_core.messages import BaseMessage, ToolMessage
    from langchain_core.messages.tool import ToolOutputMixin
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool, StructuredTool, Tool, ToolException
    from langchain_core.tools.base import TOOL_MESSAGE_BLOCK_TYPES
    from langgraph.config import get_config
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.types import Command
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without LangChain
    if (getattr(exc, "name", None) or "").split(".")[0] not in (
        "langchain",
        "langchain_core",
        "langgraph",
    ):
        raise
    raise ConfigError(
        "cargohold.langchain needs LangChain and LangGraph: pip install 'cargohold[langchain]'"
    ) from exc

from cargohold._events import OffloadOutcome
from cargohold._hold import Hold
from cargohold._offload import OffloadResult, with_note
from cargohold._tokens import preload
from cargohold._tools import ToolAnswer
from cargohold._toolspecs import SPECS, ToolSpec
from cargohold.compact import CompactionPolicy

__all__ = ["CargoholdMiddleware", "read_tools", "run_hold"]

_AGENT_ID_CHARS = re.compile(r"[^A-Za-z0-9._:/-]")
_UNCHANGED: Final = frozenset({OffloadOutcome.INLINE, OffloadOutcome.BYPASS})
_Result = ToolMessage | Command[Any]


class _Pass:
    """The tool's value is not one to decide on here (a message, a command, content blocks)."""


_PASS: Final = _Pass()


# -- binding to the run ------------------------------------------------------------------------


def run_hold(hold: Hold, config: RunnableConfig | None = None) -> Hold:
    """The hold of the run ``config`` belongs to (the current run's when omitted).

    Its session is the run's ``thread_id`` (the hold's own session when the run has none); each
    LangGraph subgraph level around the running node derives a sub-agent (see the module's
    docstring). Outside any run, with no ``config``, the hold itself.

    Raises:
        InvalidScopeError: a ``thread_id`` that cannot be a session (over 256 characters,
            control characters, surrounding whitespace).
    """
    if config is None:
        try:
            config = get_config()
        except RuntimeError:  # not inside a runnable: no run to bind to
            return hold
    configurable = config.get("configurable") or {}
    return _bound(hold, configurable.get("thread_id"), configurable.get("checkpoint_ns"))


def _bound(hold: Hold, thread_id: object, checkpoint_ns: object) -> Hold:
    run = hold if thread_id is None or thread_id == "" else hold.for_session(str(thread_id))
    if isinstance(checkpoint_ns, str):
        # "tools:<task>|model:<task>": the last segment is the node running now; each one
        # before it is a subgraph level that encloses it.
        for segment in checkpoint_ns.split("|")[:-1]:
            if segment:
                run = run.derive(agent=_agent_id(segment))
    return run


def _agent_id(segment: str) -> str:
    """A namespace segment (``node:task-id``, both made by the graph, never content) as an
    event agent id: letters, digits and ``._:/-``, at most 128 characters."""
    cleaned = _AGENT_ID_CHARS.sub("_", segment)[:128]
    return cleaned if cleaned[:1].isalnum() else f"n{cleaned[:127]}"


def _runtime_hold(hold: Hold, runtime: object) -> Hold:
    """The run's hold, from what LangGraph gives a node or a tool: its ``execution_info``
    (``thread_id``, ``checkpoint_ns``), else a tool runtime's config, else the current run's."""
    info = getattr(runtime, "execution_info", None)
    if info is not None:
        return _bound(hold, info.thread_id, info.checkpoint_ns)
    config: RunnableConfig | None = getattr(runtime, "config", None)
    return run_hold(hold, config)


# -- the middleware ---------------------------------------------------------------------------


class CargoholdMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Offload heavy tool results, guard every model request, and offer the read tools.

    Tool results: for tools made from functions (``@tool``, plain functions given to
    ``create_agent``, ``StructuredTool``, ``Tool``) the tool's own return value is offloaded
    before LangChain turns it into message content, so a ``dict`` is stored as compact JSON
    (``application/json``), ``bytes`` as themselves and ``str`` as its UTF-8, not LangChain's
    ``json.dumps``/``str()`` of them. What enters the message is cargohold's decision, small or
    heavy: the value unchanged when it is text under the threshold, compact JSON for small data,
    the stub for heavy ones. With ``response_format="content_and_artifact"`` the content is
    offloaded and the artifact left as it is (LangChain never sends it to a model). Any other
    result (another ``BaseTool`` subclass, content blocks, a ``ToolMessage`` or a ``Command``
    the tool returned, an error message, a value that is not text, bytes or JSON) is decided
    from the ``ToolMessage`` LangChain made: its text; a single text block's text; a single
    base64 image/file/audio block's decoded bytes with its MIME type; other block lists as
    their JSON. The tool messages in a ``Command``'s ``update["messages"]`` are decided the
    same way; nothing else in a ``Command`` is (the guard judges it).

    Model requests: the system message and the messages the model will get are checked by the
    hold's edge guard before the model is called; a raw heavy part raises
    :class:`cargohold.ContextLeakError` (and a request over the model's window
    :class:`cargohold.ContextWindowExceededError`). Put this middleware last in
    ``middleware=[...]`` (innermost), so that it checks what the other middlewares leave.

    Compaction (off by default): given ``compaction``, each model request is compacted before
    the guard checks it (:meth:`cargohold.Hold.compact`, format ``langchain``): once the
    request's estimated tokens reach the policy's trigger, old tool results are stored and
    replaced by compact stubs that keep the reference, the tool's name and the call's id, and
    the read tools return them byte for byte. Only what the model is sent changes; the
    agent's state keeps every message whole, and the same history compacts to the same bytes
    on every call (the provider's prompt cache keeps its prefix between compactions).

    Args:
        hold: The hold whose store, settings, tenant and user every run shares; each run gets
            its own session from its ``thread_id`` (see :func:`run_hold`).
        check_window: ``False`` to make the leak check only (no window check, no event for a
            model with no known window).
        compaction: A :class:`cargohold.CompactionPolicy`, or ``True`` for the configured one
            (the ``compaction_*`` settings); ``None`` or ``False``: no compaction.
    """

    def __init__(
        self,
        hold: Hold,
        *,
        check_window: bool = True,
        compaction: CompactionPolicy | bool | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(hold, Hold):
            raise UsageError("CargoholdMiddleware needs a cargohold.Hold: cargohold.open(...)")
        self._hold = hold
        self._check_window = check_window
        self._compaction = _compaction_policy(hold, compaction)
        self.tools = read_tools(hold)
        preload()  # in the background: the agent's first heavy result never waits for it

    def __repr__(self) -> str:
        compaction = "" if self._compaction is None else ", compaction=True"
        return f"CargoholdMiddleware(check_window={self._check_window}{compaction})"

    # -- tool calls -------------------------------------------------------------------------

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], _Result],
    ) -> _Result:
        """Run the tool with its value offloaded; then decide what it left in messages."""
        run = _runtime_hold(self._hold, request.runtime)
        decided: list[str] = []
        result = handler(_offloading(request, run, decided))
        settled: dict[int, ToolMessage] = {}
        for message, value, media_type in _pending(result, decided):
            decision = run.offload(
                value,
                tool=_tool_name(message, request),
                media_type=media_type,
                failed=message.status == "error",
            )
            _settle(settled, message, decision)
        return _replaced(result, settled)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[_Result]],
    ) -> _Result:
        """:meth:`wrap_tool_call` without blocking the event loop."""
        run = _runtime_hold(self._hold, request.runtime)
        decided: list[str] = []
        result = await handler(_offloading(request, run, decided))
        settled: dict[int, ToolMessage] = {}
        for message, value, media_type in _pending(result, decided):
            decision = await run.aoffload(
                value,
                tool=_tool_name(message, request),
                media_type=media_type,
                failed=message.status == "error",
            )
            _settle(settled, message, decision)
        return _replaced(result, settled)

    # -- model calls ------------------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Compact the request (when configured), check it, and call the model only if it
        passes."""
        run = _runtime_hold(self._hold, request.runtime)
        if self._compaction is not None:
            compacted, _ = run.compact(
                _outgoing(request), format="langchain", policy=self._compaction
            )
            request = _with_messages(request, compacted)
        run.edge_guard.check(
            _outgoing(request),
            format="langchain",
            model=_model_name(request.model),
            check_window=self._check_window,
        )
        return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """:meth:`wrap_model_call` without blocking the event loop."""
        run = _runtime_hold(self._hold, request.runtime)
        if self._compaction is not None:
            compacted, _ = await run.acompact(
                _outgoing(request), format="langchain", policy=self._compaction
            )
            request = _with_messages(request, compacted)
        if self._check_window:  # a request near the window may load the tokenizer: the pool
            await run.aguard(
                _outgoing(request), format="langchain", model=_model_name(request.model)
            )
        else:  # the leak check alone is one walk of the request, cheaper than a thread hop
            run.edge_guard.check(_outgoing(request), format="langchain", check_window=False)
        return await handler(request)


def _outgoing(request: ModelRequest[Any]) -> list[BaseMessage]:
    """The messages as the agent sends them to the model: the system message first."""
    if request.system_message is not None:
        return [request.system_message, *request.messages]
    return list(request.messages)


def _compaction_policy(hold: Hold, given: object) -> CompactionPolicy | None:
    """The policy a ``compaction`` argument names: ``True`` the hold's configured one."""
    if given is None or given is False:
        return None
    if given is True:
        return CompactionPolicy.from_settings(hold.settings)
    if not isinstance(given, CompactionPolicy):
        raise UsageError("compaction is a cargohold.CompactionPolicy, True or None")
    return given


def _with_messages(request: ModelRequest[Any], compacted: list[Any]) -> ModelRequest[Any]:
    """``request`` with the compacted messages (the system message, first, is never a tool
    result: compaction leaves it as it is); ``request`` itself when nothing was cleared."""
    messages = compacted[1:] if request.system_message is not None else compacted
    if len(messages) == len(request.messages) and all(
        new is old for new, old in zip(messages, request.messages, strict=True)
    ):
        return request
    return request.override(messages=messages)


def _model_name(model: object) -> str | None:
    """The model's name as chat model integrations keep it, for the guard's window table."""
    for attribute in ("model_name", "model", "model_id"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return None


# -- the tool's own value ---------------------------------------------------------------------


def _offloading(request: ToolCallRequest, run: Hold, decided: list[str]) -> ToolCallRequest:
    """The request with a copy of its tool whose function's value is offloaded as it returns.

    ``BaseTool.run`` turns a function's value into message content (``json.dumps`` or
    ``str()``, in ``langchain_core.tools.base._format_output``) before any middleware sees it,
    so the value is taken where the tool calls its function: the copy's ``func``/``coroutine``
    offload and return cargohold's text. The copy shares everything else with the tool.
    """
    tool = request.tool
    if not isinstance(tool, StructuredTool | Tool):
        return request
    name = request.tool_call["name"]
    pair = tool.response_format == "content_and_artifact"
    update: dict[str, Any] = {}
    if tool.func is not None:
        func = tool.func

        @functools.wraps(func)
        def offloading(*args: Any, **kwargs: Any) -> Any:
            value = func(*args, **kwargs)
            raw = _raw(value, pair=pair)
            if raw is _PASS:
                return value
            try:
                decision = run.offload(raw, tool=name)
            except UsageError:  # not text, bytes or JSON: decided from LangChain's message
                return value
            return _decided(decision, value, pair=pair, decided=decided)

        update["func"] = offloading
    if tool.coroutine is not None:
        coroutine = tool.coroutine

        @functools.wraps(coroutine)
        async def aoffloading(*args: Any, **kwargs: Any) -> Any:
            value = await coroutine(*args, **kwargs)
            raw = _raw(value, pair=pair)
            if raw is _PASS:
                return value
            try:
                decision = await run.aoffload(raw, tool=name)
            except UsageError:
                return value
            return _decided(decision, value, pair=pair, decided=decided)

        update["coroutine"] = aoffloading
    return request.override(tool=tool.model_copy(update=update))


def _raw(value: object, *, pair: bool) -> object:
    """The value to decide on, or :data:`_PASS` for what LangChain passes on as it is."""
    if pair:
        if not (isinstance(value, tuple) and len(value) == 2):
            return _PASS  # LangChain raises its own error for this
        value = value[0]
    if isinstance(value, ToolOutputMixin) or _blocks(value):
        return _PASS
    if isinstance(value, list) and value and all(isinstance(v, ToolOutputMixin) for v in value):
        return _PASS
    return value


def _blocks(value: object) -> bool:
    """Whether LangChain keeps ``value`` as message content blocks (its own test)."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(block, dict) and block.get("type") in TOOL_MESSAGE_BLOCK_TYPES
            for block in value
        )
    )


def _decided(decision: OffloadResult, value: object, *, pair: bool, decided: list[str]) -> object:
    text = decision.text
    if isinstance(decision.content, bytes):  # small bytes: as text when they are UTF-8
        with contextlib.suppress(UnicodeDecodeError):
            text = decision.content.decode("utf-8")
    text = with_note(text, decision.note)  # what was redacted, as the text's final line
    decided.append(text)
    if pair:
        assert isinstance(value, tuple)  # checked by _raw
        return (text, value[1])
    return text


# -- what LangChain made of it ----------------------------------------------------------------


def _pending(result: _Result, decided: list[str]) -> list[tuple[ToolMessage, object, str | None]]:
    """The tool messages of ``result`` not decided yet, with the value and media type to
    decide on."""
    pending: list[tuple[ToolMessage, object, str | None]] = []
    for message in _carried(result):
        content = message.content
        if isinstance(content, str):
            if content not in decided:
                pending.append((message, content, None))
        elif isinstance(content, list) and content:
            value, media_type = _blocks_value(content)
            pending.append((message, value, media_type))
    return pending


def _carried(result: _Result) -> list[ToolMessage]:
    if isinstance(result, ToolMessage):
        return [result]
    update = result.update
    if isinstance(update, dict) and isinstance(update.get("messages"), list):
        return [m for m in update["messages"] if isinstance(m, ToolMessage)]
    return []


def _blocks_value(content: list[Any]) -> tuple[object, str | None]:
    """The most faithful value of a message's content blocks: a lone text block's text, a lone
    base64 block's bytes and MIME type, else the blocks as JSON."""
    if len(content) == 1:
        block = content[0]
        if isinstance(block, str):
            return block, None
        if isinstance(block, Mapping):
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                return block["text"], None
            data = block.get("base64")
            if data is None and block.get("source_type") == "base64":
                data = block.get("data")  # the pre-v1 block shape
            mime_type = block.get("mime_type")
            if isinstance(data, str):
                try:
                    raw = base64.b64decode(data, validate=True)
                except (binascii.Error, ValueError):
                    raw = None
                if raw is not None:
                    return raw, mime_type if isinstance(mime_type, str) else None
    return content, None


def _tool_name(message: ToolMessage, request: ToolCallRequest) -> str:
    return message.name if isinstance(message.name, str) else request.tool_call["name"]


def _settle(settled: dict[int, ToolMessage], message: ToolMessage, decision: OffloadResult) -> None:
    # Inline and recovered content stay as LangChain made them, unless credentials were
    # redacted from it: then the redacted copy replaces the content (the text or, for blocks,
    # their JSON with the markers in place), the note of what was redacted as its final line.
    if decision.outcome not in _UNCHANGED or decision.redacted:
        settled[id(message)] = message.model_copy(update={"content": decision.model_text})


def _replaced(result: _Result, settled: dict[int, ToolMessage]) -> _Result:
    if not settled:
        return result
    if isinstance(result, ToolMessage):
        return settled.get(id(result), result)
    assert isinstance(result.update, dict)  # a dict holding a message list: see _carried
    update = {
        **result.update,
        "messages": [settled.get(id(m), m) for m in result.update["messages"]],
    }
    return dataclasses.replace(result, update=update)


# -- the read tools ---------------------------------------------------------------------------


def read_tools(hold: Hold) -> list[BaseTool]:
    """The read tools as LangChain tools, each answering in the scope of the run that calls it.

    Each tool takes the arguments of its :data:`cargohold.ToolSpec` schema and returns the
    answer's text (a recovered segment) as content and its structured part (span, size,
    SHA-256 of the returned bytes, next offset) as the message's ``artifact``. A call the model
    got wrong, and a reference that is missing, unauthorized, stale, expired or over budget,
    is an error message (``status="error"``) saying how to fix the call.
    """
    return [_read_tool(hold, spec) for spec in SPECS]


def _read_tool(hold: Hold, spec: ToolSpec) -> BaseTool:
    name = spec.name

    def call(config: RunnableConfig, **arguments: Any) -> tuple[str, dict[str, Any]]:
        return _answered(run_hold(hold, config).call_tool(name, arguments))

    async def acall(config: RunnableConfig, **arguments: Any) -> tuple[str, dict[str, Any]]:
        return _answered(await run_hold(hold, config).acall_tool(name, arguments))

    return StructuredTool.from_function(
        func=call,
        coroutine=acall,
        name=name,
        description=spec.description,
        args_schema=copy.deepcopy(dict(spec.parameters)),
        response_format="content_and_artifact",
        handle_tool_error=True,
    )


def _answered(answer: ToolAnswer) -> tuple[str, dict[str, Any]]:
    if answer.is_error:
        raise ToolException(answer.text)  # written for the model: what was wrong, how to fix it
    return answer.text, answer.structured()
