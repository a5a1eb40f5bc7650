"""cargohold for the OpenAI Agents SDK: offloading tools, read tools, and a guarded model input.

:class:`AgentsAdapter` binds a :class:`cargohold.Hold` to the SDK:

- :meth:`AgentsAdapter.wrap_tools`: function tools whose heavy results are offloaded at their
  seam (``FunctionTool.on_invoke_tool``), from the tool's own return value before the SDK turns
  it into text: a ``dict`` is stored as its compact JSON (Python's ``repr`` never reaches the
  model), inline images and files follow the attachment disposition. The model gets the stub.
- :meth:`AgentsAdapter.read_tools`: ``artifact_read``, ``artifact_grep``... as function tools,
  answering from the run's scope.
- :meth:`AgentsAdapter.run_config` (or :meth:`~AgentsAdapter.input_filter` for your own
  ``RunConfig``): a ``call_model_input_filter`` that, before every model call, offloads the heavy
  outputs the adapter could not wrap (MCP server tools, hosted tools, custom and shell tools)
  then compacts the input when given a policy (``compaction=``; off by default), and then
  runs the edge guard on what is about to be sent: a raw heavy part left (a function
  tool of the agent that was not wrapped) raises :class:`cargohold.ContextLeakError` before the
  model is called.

The run's scope: a hold the run context carries (``context=`` a :class:`~cargohold.Hold`, or an
object with a ``cargohold`` attribute or key holding one), else the session the run config was
built for (``run_config(session=...)``: the SDK session's ``session_id`` is the cargohold session,
``hold.for_session(session_id)``), else the adapter's hold. A session resumed later, by a new
agent and runner in a new process on the same store, reads the references its history holds.

Sub-agents: each agent of a run reports through its own derived hold. The first agent of a run is
a child of the run's hold (or the hold itself when its name is the hold's agent id); an agent
reached by a handoff, or run as a tool (``Agent.as_tool``), is a child of the agent that lists it
among its handoffs or tools (else of the agent that acted last). Events carry the agent (its
name, made a short identifier), its parent and the depth; the sequence stays one across the tree.

Needs the SDK: ``pip install 'cargohold[openai-agents]'``. Importing this module without it
raises :class:`cargohold.ConfigError` naming the extra.

Example::

    import cargohold
    from agents import Agent, Runner, SQLiteSession
    from cargohold.openai_agents import AgentsAdapter

    hold = cargohold.open(tenant="acme", user="ana", session="app")
    cargo = AgentsAdapter(hold)
    agent = Agent(name="analyst", tools=[*cargo.wrap_tools([fetch_orders]), *cargo.read_tools()])
    session = SQLiteSession("thread-42", "threads.db")
    await Runner.run(agent, "...", session=session, run_config=cargo.run_config(session))
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final

from cargohold._errors import ConfigError, UsageError

try:
    from agents import (
        AgentBase,
        FunctionTool,
        RunConfig,
        RunContextWrapper,
        Session,
        Tool,
        ToolOutputFileContent,
        ToolOutputImage,
        ToolOutputText,
    )
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool import ValidToolOutputPydanticModelsTypeAdapter
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the SDK
    if getattr(exc, "name", None) is None or str(exc.name).split(".")[0] != "agents":
        raise
    raise ConfigError(
        "cargohold.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'cargohold[openai-agents]'"
    ) from exc

from pydantic import BaseModel, ValidationError

from cargohold._hold import Hold
from cargohold._tokens import preload
from cargohold._toolspecs import SPECS
from cargohold.compact import CompactionPolicy
from cargohold.openai_agents._responses import ToolOutputs, offload_items

PrepareFilter = Callable[[CallModelData[Any]], "ModelInputData | Awaitable[ModelInputData]"]
"""A ``call_model_input_filter`` of yours, run before cargohold's (which runs the guard last)."""

_NOT_ID: Final = re.compile(r"[^A-Za-z0-9._:/-]+")


def agent_label(name: str) -> str:
    """An agent's name as the short identifier its events carry (``"Billing agent"`` ->
    ``"Billing-agent"``): runs of other characters become ``-``, at most 128 characters."""
    label = _NOT_ID.sub("-", name).strip("-._:/")[:128].rstrip("-._:/")
    return label or "agent"


def context_hold(context: object) -> Hold | None:
    """The hold a run context carries: the context itself, or its ``cargohold`` attribute or
    key; ``None`` when it carries none."""
    if isinstance(context, Hold):
        return context
    found = context.get("cargohold") if isinstance(context, Mapping) else None
    if found is None:
        found = getattr(context, "cargohold", None)
    return found if isinstance(found, Hold) else None


class _Tree:
    """The agents of one run under one base hold: each agent's derived hold, and who called whom.

    An agent met for the first time is a child of the known agent that can reach it (it lists
    the agent among its handoffs, or runs it as a tool), else of the agent that acted last (the
    run's hold for the first agent).
    """

    __slots__ = ("_agents", "_base", "_holds", "_last", "_lock", "function_tools")

    def __init__(self, base: Hold) -> None:
        self._base = base
        self._holds: dict[str, Hold] = {}
        self._agents: dict[str, AgentBase[Any]] = {}
        self._last: str | None = None
        self._lock = threading.Lock()
        self.function_tools: set[str] = set()

    def hold(self, agent: AgentBase[Any] | None) -> Hold:
        with self._lock:
            if agent is None:
                return self._base if self._last is None else self._holds[self._last]
            label = agent_label(agent.name)
            hold = self._holds.get(label)
            if hold is None:
                parent = self._caller_of(agent.name)
                if parent is not None:
                    hold = self._holds[parent].derive(agent=label)
                elif label == self._base.reporter.agent_id:
                    hold = self._base
                else:
                    hold = self._base.derive(agent=label)
                self._holds[label] = hold
                self._agents[label] = agent
            self._last = label
            return hold

    def _caller_of(self, name: str) -> str | None:
        """The known agent that hands off to, or runs as a tool, the agent ``name``; else the
        one that acted last. Checked latest first: the most recent caller wins."""
        for label in reversed(list(self._agents)):
            if _reaches(self._agents[label], name):
                return label
        return self._last

    def see_tools(self, agent: AgentBase[Any]) -> None:
        names = {
            tool.name for tool in getattr(agent, "tools", ()) if isinstance(tool, FunctionTool)
        }
        with self._lock:
            self.function_tools |= names


def _reaches(agent: AgentBase[Any], name: str) -> bool:
    """Whether ``agent`` lists the agent ``name`` among its handoffs or runs it as a tool."""
    for handoff in getattr(agent, "handoffs", ()):
        if getattr(handoff, "agent_name", getattr(handoff, "name", None)) == name:
            return True
    for tool in getattr(agent, "tools", ()):
        # Agent.as_tool() keeps the agent it runs (a private field of the SDK: read defensively).
        inner = getattr(tool, "_agent_instance", None)
        if inner is not None and getattr(inner, "name", None) == name:
            return True
    return False


class InputFilter:
    """A ``RunConfig.call_model_input_filter``: offload what is heavy, then guard the request.

    Before each model call: runs ``prepare`` (a filter of yours) if given; offloads every heavy
    tool output in the input that the adapter could not wrap (MCP server tools, hosted tools,
    custom and shell tools, tools of agents not seen in this run); then runs the hold's edge
    guard on ``{"model", "instructions", "input"}`` in the ``openai-responses`` format. The agent's
    own function tools are not offloaded here: wrap them (:meth:`AgentsAdapter.wrap_tools`); a
    raw heavy result of one raises :class:`cargohold.ContextLeakError` before the model call.

    One filter per run: it keeps the run's agent tree (who handed off to whom). The SDK keeps
    the run's history unchanged (the session stores what the tools returned); the filter changes
    only what is sent, so each call offloads the same heavy items again, into the same reference.

    Args:
        hold: The run's hold (a session's, from :meth:`AgentsAdapter.input_filter`).
        model: The model name for the guard's window check; when omitted, the agent's model name
            (a string, or a model object's ``model`` attribute). With none, the guard makes the
            leak check and reports the window unchecked.
        prepare: A filter of yours that runs first (trimming, summarizing); the guard judges
            what it returns.
        check_window: ``False`` to make the leak check only (a scripted model has no window).
        compaction: A :class:`cargohold.CompactionPolicy`, or ``True`` for the configured one
            (the ``compaction_*`` settings): after the offload and before the guard, the input
            is compacted (:meth:`cargohold.Hold.compact`, format ``openai-responses``): past the
            policy's trigger, old tool outputs are stored and replaced by compact stubs that
            read back byte for byte. ``None`` or ``False`` (the default): no compaction.
    """

    __slots__ = (
        "_check_window",
        "_compaction",
        "_hold",
        "_lock",
        "_model",
        "_prepare",
        "_trees",
    )

    def __init__(
        self,
        hold: Hold,
        *,
        model: str | None = None,
        prepare: PrepareFilter | None = None,
        check_window: bool = True,
        compaction: CompactionPolicy | bool | None = None,
    ) -> None:
        if not isinstance(hold, Hold):
            raise UsageError("an InputFilter needs a cargohold.Hold")
        self._hold = hold
        self._model = model
        self._prepare = prepare
        self._check_window = check_window
        self._compaction = _compaction_policy(hold, compaction)
        self._trees: dict[int, tuple[Hold, _Tree]] = {}
        preload()  # in the background: the first request's token count never waits for it
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"InputFilter({self._hold!r})"

    @property
    def hold(self) -> Hold:
        """The run's hold (before any run context overrides it)."""
        return self._hold

    def _tree(self, context: object) -> _Tree:
        """The agent tree under the hold the run context carries, else under this filter's."""
        base = context_hold(context) or self._hold
        with self._lock:
            found = self._trees.get(id(base))
            if found is None or found[0] is not base:
                found = (base, _Tree(base))
                self._trees[id(base)] = found
            return found[1]

    def hold_for(self, context: object, agent: AgentBase[Any] | None) -> Hold:
        """The hold of ``agent`` in this run (see the module for the tree)."""
        return self._tree(context).hold(agent)

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        if self._prepare is not None:
            prepared = self._prepare(data)
            model_data = await prepared if inspect.isawaitable(prepared) else prepared
            if not isinstance(model_data, ModelInputData):
                raise UsageError("a prepare filter returns a ModelInputData")
        else:
            model_data = data.model_data
        tree = self._tree(data.context)
        hold = tree.hold(data.agent)
        tree.see_tools(data.agent)
        items = await offload_items(hold, model_data.input, skip_tools=tree.function_tools)
        model = self._model or _model_name(data.agent)
        request: dict[str, Any] = {"input": items}
        if model is not None:
            request["model"] = model
        if model_data.instructions is not None:
            request["instructions"] = model_data.instructions
        if self._compaction is not None:  # after the offload, before the guard
            request, _ = await hold.acompact(
                request, format="openai-responses", policy=self._compaction
            )
            items = request["input"]
        if self._check_window:
            await hold.aguard(request, format="openai-responses", model=model)
        else:
            check = functools.partial(
                hold.edge_guard.check,
                request,
                format="openai-responses",
                model=model,
                check_window=False,
            )
            await hold.arun(check)
        return ModelInputData(input=items, instructions=model_data.instructions)


def _compaction_policy(hold: Hold, given: object) -> CompactionPolicy | None:
    """The policy a ``compaction`` argument names: ``True`` the hold's configured one."""
    if given is None or given is False:
        return None
    if given is True:
        return CompactionPolicy.from_settings(hold.settings)
    if not isinstance(given, CompactionPolicy):
        raise UsageError("compaction is a cargohold.CompactionPolicy, True or None")
    return given


class AgentsAdapter:
    """cargohold for the OpenAI Agents SDK, over one hold (see the module).

    Args:
        hold: Where the bytes go, and the scope of runs that name no session or hold of their own.
        model: The model name the guard's window check uses when an agent's model has none.
    """

    __slots__ = ("_hold", "_model")

    def __init__(self, hold: Hold, *, model: str | None = None) -> None:
        if not isinstance(hold, Hold):
            raise UsageError("an AgentsAdapter needs a cargohold.Hold (cargohold.open(...))")
        self._hold = hold
        self._model = model
        preload()  # in the background: the agent's first heavy result never waits for it

    def __repr__(self) -> str:
        return f"AgentsAdapter({self._hold!r})"

    @property
    def hold(self) -> Hold:
        """The adapter's hold."""
        return self._hold

    # -- the run's scope --------------------------------------------------------------------

    def hold_for(self, context: RunContextWrapper[Any]) -> Hold:
        """The hold of the agent running in ``context`` (a tool's ``ToolContext``): for code of
        yours that reads or offloads in the run's scope."""
        agent = getattr(context, "agent", None)
        run_config = getattr(context, "run_config", None)
        run_filter = getattr(run_config, "call_model_input_filter", None)
        if isinstance(run_filter, InputFilter):
            return run_filter.hold_for(context.context, agent)
        base = context_hold(context.context) or self._hold
        if agent is None:
            return base
        # No filter of ours keeps this run's tree: the agent is a child of the run's hold.
        label = agent_label(agent.name)
        return base if label == base.reporter.agent_id else base.derive(agent=label)

    # -- tools --------------------------------------------------------------------------------

    def wrap_tool(self, tool: FunctionTool) -> FunctionTool:
        """A copy of ``tool`` whose heavy results are offloaded; the same name, description,
        schema, approval policy, guardrails and failure handling.

        A declared output schema is not kept (a stub cannot satisfy it): the copy publishes
        none, and its results reach the model as text.
        """
        if not isinstance(tool, FunctionTool):
            raise UsageError(
                "wrap_tool takes an Agents SDK FunctionTool (wrap_tools passes others)"
            )
        wrapped = copy.copy(tool)  # the SDK's copy rebinds failure handling to the copy
        inner = wrapped.on_invoke_tool
        if isinstance(inner, _OffloadingInvoker):
            inner = inner.inner
        wrapped.on_invoke_tool = _OffloadingInvoker(self, inner, tool.name)
        wrapped.output_json_schema = None
        wrapped._output_type_adapter = None  # would refuse the stub as "not your output type"
        return wrapped

    def wrap_tools(self, tools: Iterable[Tool]) -> list[Tool]:
        """``tools`` with every function tool wrapped (:meth:`wrap_tool`). Hosted tools pass
        unchanged: their outputs arrive in the model input, where the input filter covers them."""
        return [self.wrap_tool(tool) if isinstance(tool, FunctionTool) else tool for tool in tools]

    def read_tools(self) -> list[FunctionTool]:
        """The read tools as function tools, answering from the calling agent's scope. Their
        answers are recovered segments (or what to fix in the call), never exceptions."""
        return [
            FunctionTool(
                name=spec.name,
                description=spec.description,
                params_json_schema=copy.deepcopy(dict(spec.parameters)),
                on_invoke_tool=_ReadInvoker(self, spec.name),
                strict_json_schema=False,  # optional arguments (offset, budget...) stay optional
            )
            for spec in SPECS
        ]

    # -- the model input ---------------------------------------------------------------------

    def input_filter(
        self,
        session: Session | str | None = None,
        *,
        model: str | None = None,
        prepare: PrepareFilter | None = None,
        check_window: bool = True,
        compaction: CompactionPolicy | bool | None = None,
    ) -> InputFilter:
        """The ``call_model_input_filter`` of one run (see :class:`InputFilter`).

        Args:
            session: The run's SDK session (or its id): the run's scope is that session's
                (``hold.for_session(session_id)``). ``None``: the adapter's hold.
            model: The model name for the guard's window check (the adapter's by default).
            prepare: A filter of yours that runs first.
            check_window: ``False`` to make the leak check only.
            compaction: Compact the input before the guard (a policy, or ``True`` for the
                configured one); off by default.
        """
        hold = self._hold
        if session is not None:
            session_id = session if isinstance(session, str) else session.session_id
            hold = hold.for_session(session_id)
        return InputFilter(
            hold,
            model=model or self._model,
            prepare=prepare,
            check_window=check_window,
            compaction=compaction,
        )

    def run_config(
        self,
        session: Session | str | None = None,
        *,
        model: str | None = None,
        prepare: PrepareFilter | None = None,
        check_window: bool = True,
        compaction: CompactionPolicy | bool | None = None,
        **options: Any,
    ) -> RunConfig:
        """A ``RunConfig`` for one run, with :meth:`input_filter` as its
        ``call_model_input_filter``; ``options`` are the other ``RunConfig`` fields.
        ``compaction`` (a policy, or ``True`` for the configured one; off by default) compacts
        the input before every model call, before the guard."""
        if "call_model_input_filter" in options:
            raise UsageError("pass your own input filter as prepare=: cargohold's runs last")
        run_filter = self.input_filter(
            session,
            model=model,
            prepare=prepare,
            check_window=check_window,
            compaction=compaction,
        )
        return RunConfig(call_model_input_filter=run_filter, **options)


class _OffloadingInvoker:
    """A wrapped tool's ``on_invoke_tool``: the tool runs, then its value is offloaded."""

    __slots__ = ("_adapter", "_tool", "inner")

    def __init__(
        self,
        adapter: AgentsAdapter,
        inner: Callable[[ToolContext[Any], str], Awaitable[Any]],
        tool: str,
    ) -> None:
        self._adapter = adapter
        self.inner = inner
        self._tool = tool

    def __repr__(self) -> str:
        return f"offloading({self._tool})"

    async def __call__(self, ctx: ToolContext[Any], arguments: str) -> Any:
        value = await self.inner(ctx, arguments)
        outputs = ToolOutputs(self._adapter.hold_for(ctx), producer=True)
        return await _offload_value(outputs, value, self._tool)


class _ReadInvoker:
    """A read tool's ``on_invoke_tool``: the calling agent's hold answers."""

    __slots__ = ("_adapter", "_name")

    def __init__(self, adapter: AgentsAdapter, name: str) -> None:
        self._adapter = adapter
        self._name = name

    def __repr__(self) -> str:
        return f"read_tool({self._name})"

    async def __call__(self, ctx: ToolContext[Any], arguments: str) -> str:
        answer = await self._adapter.hold_for(ctx).acall_tool(self._name, arguments)
        return answer.text


async def _offload_value(outputs: ToolOutputs, value: Any, tool: str) -> Any:
    """What enters the conversation for a function tool's return value."""
    if isinstance(value, str):
        return await outputs.text(value, tool)
    parts = _as_parts(value)
    if parts is not None:
        replaced = await outputs.parts(parts, tool)
        return value if replaced is None else _from_parts(replaced)
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    try:
        return await outputs.data(value, tool)
    except UsageError:  # not JSON-serializable: the text the SDK would have sent, str(value)
        return await outputs.text(str(value), tool)


def _as_parts(value: object) -> list[dict[str, Any]] | None:
    """The SDK's structured tool outputs (``ToolOutputText``/``Image``/``FileContent``, their
    dict forms, or a list of them) as Responses content parts; ``None`` for anything else."""
    items = value if isinstance(value, list | tuple) else [value]
    if not items:
        return None
    parts: list[dict[str, Any]] = []
    for item in items:
        model = item
        if isinstance(item, dict) and "type" in item:
            try:
                model = ValidToolOutputPydanticModelsTypeAdapter.validate_python(item)
            except ValidationError:
                return None
        if isinstance(model, ToolOutputText):
            parts.append({"type": "input_text", "text": model.text})
        elif isinstance(model, ToolOutputImage):
            fields = model.model_dump(exclude={"type"}, exclude_none=True)
            parts.append({"type": "input_image", **fields})
        elif isinstance(model, ToolOutputFileContent):
            fields = model.model_dump(exclude={"type"}, exclude_none=True)
            parts.append({"type": "input_file", **fields})
        else:
            return None
    return parts


def _from_parts(parts: list[Any]) -> Any:
    """Responses content parts back as the SDK's structured outputs (one text part: its text)."""
    if len(parts) == 1 and parts[0].get("type") == "input_text":
        return str(parts[0]["text"])
    converted: list[ToolOutputText | ToolOutputImage | ToolOutputFileContent] = []
    for part in parts:
        fields = {key: value for key, value in part.items() if key != "type"}
        if part.get("type") == "input_text":
            converted.append(ToolOutputText(**fields))
        elif part.get("type") == "input_image":
            converted.append(ToolOutputImage(**fields))
        else:
            converted.append(ToolOutputFileContent(**fields))
    return converted


def _model_name(agent: AgentBase[Any]) -> str | None:
    model = getattr(agent, "model", None)
    if isinstance(model, str):
        return model
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else None


__all__ = ["AgentsAdapter", "InputFilter", "PrepareFilter", "agent_label", "context_hold"]
