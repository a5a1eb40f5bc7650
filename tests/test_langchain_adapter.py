"""The LangChain v1 / LangGraph adapter, driven through real ``create_agent`` graphs.

The model is LangChain's own ``GenericFakeChatModel`` (scripted replies) with ``bind_tools``
returning itself (the fake has none) and a record of every message list it was sent: what the
model received is asserted, never a mock of the framework. References are known before the run
because they are the SHA-256 of the exact bytes stored, which is itself under test.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from _require import require

require("langchain.agents", "langchain")

import pytest  # noqa: E402 - after the extra's check
from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import ModelRequest, dynamic_prompt  # noqa: E402
from langchain.tools import ToolRuntime  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGenerationChunk  # noqa: E402
from langchain_core.runnables import RunnableConfig  # noqa: E402
from langchain_core.tools import BaseTool, tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode  # noqa: E402
from langgraph.types import Command  # noqa: E402
from pydantic import Field  # noqa: E402

import cargohold  # noqa: E402
import cargohold.langchain as adapter  # noqa: E402
from cargohold import ContextLeakError, ListSink  # noqa: E402
from cargohold._stub import parse_compact_stub  # noqa: E402
from cargohold.langchain import (  # noqa: E402
    CargoholdMiddleware,
    read_tools,
    run_hold,
)

ROOT = Path(__file__).resolve().parents[1]
STUB_BUDGET = 16 * 1024


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model, able to stand in an agent, remembering what it was sent."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def _stream(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        # The next reply as one chunk (the fake's own stream drops a reply with no text).
        reply = self._generate(messages, *args, **kwargs).generations[0].message
        calls = [
            {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
            for i, c in enumerate(reply.tool_calls)
        ]
        chunk = AIMessageChunk(content=reply.content, tool_call_chunks=calls)
        yield ChatGenerationChunk(message=chunk)


def scripted(*replies: AIMessage) -> ScriptedModel:
    return ScriptedModel(messages=iter(replies))


def call(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def orders(count: int = 20_000) -> list[dict[str, Any]]:
    return [
        {"id": i, "customer": f"c-{i % 97:05}", "total": i * 1.5, "status": "paid"}
        for i in range(count)
    ]


def compact(value: object) -> bytes:
    """What a tool's data is stored as: compact JSON, keys in the tool's order, UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def ref_of(data: bytes) -> str:
    return "artifact://sha256/" + hashlib.sha256(data).hexdigest()


def thread(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def tool_messages(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


@pytest.fixture
def hold(tmp_path: Path, sink: ListSink) -> Iterator[cargohold.Hold]:
    with cargohold.open(
        tmp_path / "store", tenant="acme", user="ana", session="app", sinks=[sink]
    ) as opened:
        yield opened


@tool
def list_orders() -> list[dict[str, Any]]:
    """Every order."""
    return orders()


BODY = compact(orders())
REF = ref_of(BODY)


# -- the stub, then the exact slice --------------------------------------------------------------


def _drive(agent: Any, request: dict[str, Any], config: Any, run: str) -> None:
    """Run the agent to its end by ``invoke``, ``stream`` or ``astream`` (streamed runs call the
    model and the tools through the same middleware)."""
    if run == "invoke":
        agent.invoke(request, config)
    elif run == "stream":
        for _ in agent.stream(request, config, stream_mode="updates"):
            pass
    else:

        async def drain() -> None:
            async for _ in agent.astream(request, config, stream_mode="messages"):
                pass

        asyncio.run(drain())


@pytest.mark.parametrize("run", ["invoke", "stream", "astream"])
def test_a_heavy_tool_result_reaches_the_model_as_a_stub_and_a_read_returns_the_exact_slice(
    hold: cargohold.Hold, run: str
) -> None:
    assert len(BODY) >= 1_000_000
    model = scripted(
        call("list_orders", "c1"),
        call("artifact_read", "c2", ref=REF, offset=500_000, length=300),
        AIMessage("done"),
    )
    agent = create_agent(model, tools=[list_orders], middleware=[CargoholdMiddleware(hold)])

    _drive(agent, {"messages": [HumanMessage("refunds?")]}, thread(f"t-orders-{run}"), run)

    second, third = model.received[1], model.received[2]
    stub = second[-1]
    assert isinstance(stub, ToolMessage)
    assert isinstance(stub.content, str)
    assert stub.content.startswith(f"[cargohold] {REF}\n")
    assert len(stub.content.encode()) <= STUB_BUDGET
    assert sum(len(str(m.content)) for m in second) < 20_000  # nothing else carries the body
    recovered = third[-1]
    assert isinstance(recovered, ToolMessage)
    assert isinstance(recovered.content, str)
    assert recovered.content.splitlines()[1] == BODY[500_000:500_300].decode()
    assert recovered.artifact["sha256"] == hashlib.sha256(BODY[500_000:500_300]).hexdigest()
    assert (recovered.artifact["start"], recovered.artifact["end"]) == (500_000, 500_300)


def test_a_dict_is_stored_as_the_tools_own_json_and_answers_a_query(
    hold: cargohold.Hold,
) -> None:
    model = scripted(
        call("list_orders", "c1"),
        call("artifact_query", "c2", ref=REF, expression="[?id==`19999`].customer"),
        AIMessage("done"),
    )
    agent = create_agent(model, tools=[list_orders], middleware=[CargoholdMiddleware(hold)])

    agent.invoke({"messages": [HumanMessage("who?")]}, thread("t-json"))

    info = hold.for_session("t-json").info(REF)
    assert info.record is not None
    assert (info.record.size, info.record.media_type) == (len(BODY), "application/json")
    answer = model.received[2][-1]
    assert isinstance(answer, ToolMessage)
    assert answer.status == "success"
    assert str(answer.content).splitlines()[1] == f'["c-{19_999 % 97:05}"]'


def test_the_async_agent_offloads_an_async_tools_value_and_reads_it_back(
    hold: cargohold.Hold,
) -> None:
    log = "\n".join(f"2026-01-01 00:00:{i % 60:02} INFO request {i} served" for i in range(30_000))
    data = log.encode()

    @tool
    async def read_log() -> str:
        """The service log."""
        return log

    model = scripted(
        call("read_log", "c1"),
        call("artifact_read_lines", "c2", ref=ref_of(data), start_line=20_000, end_line=20_002),
        AIMessage("done"),
    )
    agent = create_agent(model, tools=[read_log], middleware=[CargoholdMiddleware(hold)])

    asyncio.run(agent.ainvoke({"messages": [HumanMessage("errors?")]}, thread("t-async")))

    assert str(model.received[1][-1].content).startswith(f"[cargohold] {ref_of(data)}\n")
    lines = str(model.received[2][-1].content).splitlines()[1:4]
    assert lines == log.splitlines()[19_999:20_002]


def test_a_small_text_result_reaches_the_model_unchanged(
    hold: cargohold.Hold, sink: ListSink
) -> None:
    @tool
    def ping() -> str:
        """Is it up?"""
        return "pong: 3 hosts up"

    model = scripted(call("ping", "c1"), AIMessage("done"))
    agent = create_agent(model, tools=[ping], middleware=[CargoholdMiddleware(hold)])

    agent.invoke({"messages": [HumanMessage("up?")]}, thread("t-small"))

    assert model.received[1][-1].content == "pong: 3 hosts up"
    offloads = [e for e in sink.events if e.operation == "offload"]
    assert [(e.outcome, e.tool) for e in offloads] == [("inline", "ping")]


def test_a_result_of_a_tool_class_is_offloaded_from_the_message_langchain_made(
    hold: cargohold.Hold,
) -> None:
    report = "line of the nightly report\n" * 5_000

    class NightlyReport(BaseTool):
        name: str = "nightly_report"
        description: str = "The nightly report."

        def _run(self, *args: Any, **kwargs: Any) -> str:
            return report

    model = scripted(call("nightly_report", "c1"), AIMessage("done"))
    agent = create_agent(model, tools=[NightlyReport()], middleware=[CargoholdMiddleware(hold)])

    agent.invoke({"messages": [HumanMessage("report")]}, thread("t-class"))

    assert str(model.received[1][-1].content).startswith(f"[cargohold] {ref_of(report.encode())}")


def _fake_key_id(seed: int) -> str:
    """An AWS access key id shape from random letters (never a real key)."""
    import random
    import string

    return "AKIA" + "".join(random.Random(seed).choices(string.ascii_uppercase, k=16))


def test_a_small_result_holding_a_credential_reaches_the_model_redacted(
    hold: cargohold.Hold, sink: ListSink
) -> None:
    key = _fake_key_id(1)

    @tool
    def show_env() -> str:
        """The environment."""
        return f"REGION=eu-west-1\nAWS_ACCESS_KEY_ID={key}\n"

    model = scripted(call("show_env", "c1"), AIMessage("done"))
    agent = create_agent(model, tools=[show_env], middleware=[CargoholdMiddleware(hold)])

    agent.invoke({"messages": [HumanMessage("env?")]}, thread("t-env"))

    assert model.received[1][-1].content == (
        "REGION=eu-west-1\nAWS_ACCESS_KEY_ID=[REDACTED:aws_access_key_id]\n"
        "[cargohold] credentials redacted from this result: aws_access_key_id (line 2)"
    )
    offloads = [e for e in sink.events if e.operation == "offload"]
    assert [(e.outcome, e.reason) for e in offloads] == [("inline", "credential_redacted")]


def test_small_data_holding_a_credential_reaches_the_model_as_json_with_the_note_last(
    hold: cargohold.Hold,
) -> None:
    key = _fake_key_id(4)

    @tool
    def sts() -> dict[str, Any]:
        """Temporary credentials."""
        return {"AccessKeyId": key, "Expiration": 3600}

    model = scripted(call("sts", "c1"), AIMessage("done"))
    agent = create_agent(model, tools=[sts], middleware=[CargoholdMiddleware(hold)])

    agent.invoke({"messages": [HumanMessage("creds?")]}, thread("t-sts"))

    data, note = str(model.received[1][-1].content).split("\n")
    assert json.loads(data) == {"AccessKeyId": "[REDACTED:aws_access_key_id]", "Expiration": 3600}
    assert note == "[cargohold] credentials redacted from this result: aws_access_key_id (line 1)"


@pytest.mark.parametrize("shape", ["tool class", "command"])
def test_a_small_credential_in_a_message_langchain_made_reaches_the_model_redacted(
    hold: cargohold.Hold, shape: str
) -> None:
    key = _fake_key_id(2)
    text = f"deploying with AWS_ACCESS_KEY_ID={key}"

    class ShowEnv(BaseTool):
        name: str = "show_env"
        description: str = "The environment."

        def _run(self, *args: Any, **kwargs: Any) -> str:
            return text

    @tool("show_env")
    def show_env_command(runtime: ToolRuntime) -> Command[Any]:
        """The environment."""
        return Command(update={"messages": [ToolMessage(text, tool_call_id=runtime.tool_call_id)]})

    chosen: Any = ShowEnv() if shape == "tool class" else show_env_command
    model = scripted(call("show_env", "c1"), AIMessage("done"))
    agent = create_agent(model, tools=[chosen], middleware=[CargoholdMiddleware(hold)])

    agent.invoke({"messages": [HumanMessage("env?")]}, thread("t-env-" + shape[:4]))

    content = str(model.received[1][-1].content)
    assert content == (
        "deploying with AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key_id]\n"
        "[cargohold] credentials redacted from this result: aws_access_key_id (line 1)"
    )
    assert all(key not in str(m.content) for m in model.received[1])


def test_a_base64_image_block_is_stored_as_its_own_bytes(hold: cargohold.Hold) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 200

    @tool
    def screenshot() -> list[dict[str, Any]]:
        """A screenshot."""
        return [
            {"type": "image", "base64": base64.b64encode(png).decode(), "mime_type": "image/png"}
        ]

    model = scripted(call("screenshot", "c1"), AIMessage("done"))
    agent = create_agent(model, tools=[screenshot], middleware=[CargoholdMiddleware(hold)])

    agent.invoke({"messages": [HumanMessage("look")]}, thread("t-png"))

    assert str(model.received[1][-1].content).startswith(f"[cargohold] {ref_of(png)}")
    info = hold.for_session("t-png").info(ref_of(png))
    assert info.record is not None
    assert info.record.media_type == "image/png"


def test_a_content_and_artifact_tool_keeps_its_artifact_and_offloads_its_content(
    hold: cargohold.Hold,
) -> None:
    @tool(response_format="content_and_artifact")
    def export() -> tuple[dict[str, Any], dict[str, int]]:
        """Export the orders."""
        return {"rows": orders()}, {"rows": 20_000}

    model = scripted(call("export", "c1"), AIMessage("done"))
    agent = create_agent(model, tools=[export], middleware=[CargoholdMiddleware(hold)])

    state = agent.invoke({"messages": [HumanMessage("export")]}, thread("t-pair"))

    sent = str(model.received[1][-1].content)
    assert sent.startswith(f"[cargohold] {ref_of(compact({'rows': orders()}))}")
    assert [m.artifact for m in tool_messages(state["messages"])] == [{"rows": 20_000}]


def test_a_hand_built_langgraph_tool_node_offloads_through_the_same_wrapper(
    hold: cargohold.Hold,
) -> None:
    middleware = CargoholdMiddleware(hold)
    tools = ToolNode(
        [list_orders, *read_tools(hold)],
        wrap_tool_call=middleware.wrap_tool_call,
        awrap_tool_call=middleware.awrap_tool_call,
    )
    graph = StateGraph(MessagesState)
    graph.add_node("tools", tools)
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile(checkpointer=InMemorySaver())

    state = app.invoke({"messages": [call("list_orders", "c1")]}, thread("t-graph"))

    assert str(state["messages"][-1].content).startswith(f"[cargohold] {REF}")
    assert hold.for_session("t-graph").info(REF).outcome == "resolved"


# -- the guard before every model call -----------------------------------------------------------


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_a_tool_that_smuggles_raw_content_into_the_state_is_stopped_before_the_model_call(
    hold: cargohold.Hold, sink: ListSink, run: str
) -> None:
    smuggled = "SMUGGLED-" + "x" * 100_000

    @tool
    def sneaky(runtime: ToolRuntime) -> Command[Any]:
        """Files the answer."""
        note = ToolMessage("filed", tool_call_id=runtime.tool_call_id or "")
        return Command(update={"messages": [note, HumanMessage(smuggled)]})

    model = scripted(call("sneaky", "c1"), AIMessage("never sent"))
    agent = create_agent(model, tools=[sneaky], middleware=[CargoholdMiddleware(hold)])
    request = {"messages": [HumanMessage("go")]}

    def go() -> object:
        if run == "ainvoke":
            return asyncio.run(agent.ainvoke(request, thread("t-sneaky")))
        return agent.invoke(request, thread("t-sneaky"))

    with pytest.raises(ContextLeakError) as caught:
        go()

    assert len(model.received) == 1  # the leaking request never reached the model
    assert "SMUGGLED" not in str(caught.value)
    leaks = [e for e in sink.events if e.outcome == "llm.context_leak"]
    assert [(e.observed_bytes, e.reason) for e in leaks] == [(len(smuggled), "raw_heavy_content")]


def test_raw_content_put_in_the_system_prompt_is_stopped_before_the_model_call(
    hold: cargohold.Hold,
) -> None:
    @dynamic_prompt
    def pasted_manual(request: ModelRequest[Any]) -> str:
        return "You are helpful. The whole manual follows.\n" + "manual text " * 5_000

    model = scripted(AIMessage("never sent"))
    agent = create_agent(model, middleware=[pasted_manual, CargoholdMiddleware(hold)])

    with pytest.raises(ContextLeakError) as caught:
        agent.invoke({"messages": [HumanMessage("hi")]}, thread("t-prompt"))

    assert model.received == []
    assert [finding.where for finding in caught.value.findings] == ["system"]


def test_a_tool_message_inside_a_command_is_offloaded_too(hold: cargohold.Hold) -> None:
    @tool
    def filed(runtime: ToolRuntime) -> Command[Any]:
        """Files the orders."""
        raw = json.dumps(orders(2_000))
        return Command(update={"messages": [ToolMessage(raw, tool_call_id=runtime.tool_call_id)]})

    model = scripted(call("filed", "c1"), AIMessage("done"))
    agent = create_agent(model, tools=[filed], middleware=[CargoholdMiddleware(hold)])

    agent.invoke({"messages": [HumanMessage("go")]}, thread("t-command"))

    assert str(model.received[1][-1].content).startswith("[cargohold] artifact://sha256/")


# -- the scope is the run's ----------------------------------------------------------------------


def test_a_resumed_thread_reads_its_old_references_from_a_new_agent(
    tmp_path: Path,
) -> None:
    checkpointer = InMemorySaver()  # the thread's checkpoints outlive both agents
    with cargohold.open(tmp_path / "store", tenant="acme", user="ana", session="app") as first_hold:
        first = scripted(call("list_orders", "c1"), AIMessage("stored"))
        create_agent(
            first,
            tools=[list_orders],
            middleware=[CargoholdMiddleware(first_hold)],
            checkpointer=checkpointer,
        ).invoke({"messages": [HumanMessage("load")]}, thread("t-resume"))

    with cargohold.open(tmp_path / "store", tenant="acme", user="ana", session="app") as later_hold:
        later = scripted(
            call("artifact_read", "c2", ref=REF, offset=0, length=64), AIMessage("done")
        )
        create_agent(
            later,
            tools=[list_orders],
            middleware=[CargoholdMiddleware(later_hold)],
            checkpointer=checkpointer,
        ).invoke({"messages": [HumanMessage("first bytes?")]}, thread("t-resume"))

    history = later.received[1]
    assert str(tool_messages(history)[0].content).startswith(f"[cargohold] {REF}")  # the old stub
    answer = history[-1]
    assert isinstance(answer, ToolMessage)
    assert answer.status == "success"
    assert str(answer.content).splitlines()[1] == BODY[:64].decode()


def test_another_thread_cannot_read_a_threads_references(hold: cargohold.Hold) -> None:
    writer = scripted(call("list_orders", "c1"), AIMessage("stored"))
    create_agent(writer, tools=[list_orders], middleware=[CargoholdMiddleware(hold)]).invoke(
        {"messages": [HumanMessage("load")]}, thread("t-owner")
    )
    reader = scripted(call("artifact_read", "c2", ref=REF, length=64), AIMessage("done"))
    create_agent(reader, middleware=[CargoholdMiddleware(hold)]).invoke(
        {"messages": [HumanMessage("peek")]}, thread("t-other")
    )

    answer = reader.received[1][-1]
    assert isinstance(answer, ToolMessage)
    assert answer.status == "error"
    assert "unauthorized" in str(answer.content)
    assert hold.for_session("t-owner").info(REF).outcome == "resolved"


def test_the_read_tools_answer_in_the_scope_of_the_config_that_calls_them(
    hold: cargohold.Hold,
) -> None:
    stored = hold.for_session("t-direct").offload("z" * 40_000, tool="dump")
    read = {tool.name: tool for tool in read_tools(hold)}["artifact_read"]
    args = {"ref": str(stored.ref), "offset": 10, "length": 5}

    mine = read.invoke(
        {"name": "artifact_read", "args": args, "id": "r1", "type": "tool_call"},
        thread("t-direct"),
    )
    theirs = read.invoke(
        {"name": "artifact_read", "args": args, "id": "r2", "type": "tool_call"},
        thread("t-elsewhere"),
    )

    assert mine.status == "success"
    assert mine.content.splitlines()[1] == "zzzzz"
    assert theirs.status == "error"
    assert "unauthorized" in theirs.content


def test_run_hold_binds_the_thread_and_nests_subgraph_levels(hold: cargohold.Hold) -> None:
    config: RunnableConfig = {
        "configurable": {"thread_id": "t-9", "checkpoint_ns": "outer:1|tools:2|model:3"}
    }

    bound = run_hold(hold, config)

    assert bound.scope.session == "t-9"
    reporter = bound.reporter
    assert (reporter.agent_id, reporter.parent_agent_id, reporter.depth) == (
        "tools:2",
        "outer:1",
        2,
    )
    assert run_hold(hold) is hold  # outside any run: the hold itself


# -- sub-agents ----------------------------------------------------------------------------------


def test_a_sub_agents_events_name_it_its_parent_and_its_depth(
    hold: cargohold.Hold, sink: ListSink
) -> None:
    middleware = CargoholdMiddleware(hold)
    researcher = create_agent(
        scripted(call("list_orders", "s1"), AIMessage("19,999 orders, all paid")),
        tools=[list_orders],
        middleware=[middleware],
        name="researcher",
    )

    @tool
    def ask_researcher(question: str) -> str:
        """Delegate a question."""
        answer = researcher.invoke({"messages": [HumanMessage(question)]})
        return str(answer["messages"][-1].content)

    boss = scripted(call("ask_researcher", "m1", question="how many?"), AIMessage("done"))
    create_agent(boss, tools=[ask_researcher], middleware=[middleware]).invoke(
        {"messages": [HumanMessage("report")]}, thread("t-team")
    )

    offloads = {e.tool: e for e in sink.events if e.operation == "offload"}
    nested, delegated = offloads["list_orders"], offloads["ask_researcher"]
    assert (nested.outcome, nested.depth, nested.parent_agent_id) == ("offloaded", 1, "main")
    assert nested.agent_id.startswith("tools:")  # the parent's tools task that ran it
    assert (delegated.outcome, delegated.depth, delegated.agent_id) == ("inline", 0, "main")
    nested_guards = [e for e in sink.events if e.operation == "guard" and e.depth == 1]
    assert {e.agent_id for e in nested_guards} == {nested.agent_id}
    sequences = [e.sequence for e in sink.events]
    assert sequences == sorted(sequences)
    assert len(set(sequences)) == len(sequences)
    assert hold.for_session("t-team").info(REF).outcome == "resolved"  # one session, one thread


# -- privacy, surface, example -------------------------------------------------------------------


def test_events_carry_no_body_and_no_thread_id(hold: cargohold.Hold, sink: ListSink) -> None:
    model = scripted(
        call("list_orders", "c1"), call("artifact_read", "c2", ref=REF, length=200), AIMessage("ok")
    )
    agent = create_agent(model, tools=[list_orders], middleware=[CargoholdMiddleware(hold)])

    agent.invoke({"messages": [HumanMessage("go")]}, thread("ana-private-thread"))

    assert sink.events
    for event in sink.events:
        shown = repr(event) + str(event) + json.dumps(event.as_dict())
        assert "ana-private-thread" not in shown
        assert "acme" not in shown
        assert "c-00001" not in shown
        assert "customer" not in shown
    assert "ana" not in repr(CargoholdMiddleware(hold))


def test_the_middleware_needs_a_hold() -> None:
    with pytest.raises(cargohold.UsageError):
        CargoholdMiddleware("memory://")  # type: ignore[arg-type]


def test_the_adapter_exports_its_three_names_sorted() -> None:
    assert adapter.__all__ == ["CargoholdMiddleware", "read_tools", "run_hold"]
    assert all(getattr(adapter, name) is not None for name in adapter.__all__)


def test_importing_the_adapter_without_langchain_raises_one_error_naming_the_extra() -> None:
    code = (
        "import sys; sys.modules['langchain'] = None\n"
        "import cargohold\n"
        "try:\n    import cargohold.langchain\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)

    assert done.stdout.startswith("ConfigError ")
    assert "cargohold[langchain]" in done.stdout


def test_the_example_agent_runs_offline_and_answers_from_the_exact_rows(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("CARGOHOLD_STORE", None)

    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langchain_agent.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "\n[cargohold] artifact://sha256/" in out
    assert "application/json | 1,3" in out
    assert "[cargohold:recovered] artifact://sha256/" in out
    assert (
        "Refunded orders: [0,2500,5000,7500,10000,12500,15000,17500,20000,22500,25000,27500]" in out
    )
    assert "decisions: offload:bypass 1, offload:offloaded 1, rehydrate:resolved 1" in out


# -- compaction before every model call -------------------------------------------------------


def _page(number: int) -> str:
    """A tool result under the heavy threshold (it stays inline), distinct per page."""
    return "".join(f"page {number} line {i}: status ok, latency {i % 89} ms\n" for i in range(180))


@tool
def read_page(number: int) -> str:
    """One page of the report."""
    return _page(number)


def _paging_agent(hold: cargohold.Hold, **middleware: Any) -> tuple[Any, ScriptedModel]:
    model = scripted(
        *(call("read_page", f"c{n}", number=n) for n in range(1, 5)),
        AIMessage("done"),
    )
    agent = create_agent(
        model, tools=[read_page], middleware=[CargoholdMiddleware(hold, **middleware)]
    )
    return agent, model


@pytest.mark.parametrize("run", ["invoke", "astream"])
def test_compaction_clears_old_results_to_stubs_before_each_model_call_and_they_read_back(
    hold: cargohold.Hold, run: str
) -> None:
    assert len(_page(1).encode()) < 32 * 1024  # inline when the tool returns it
    policy = cargohold.CompactionPolicy(trigger_tokens=3_000, keep_last=1, clear_at_least=0)
    agent, model = _paging_agent(hold, compaction=policy)

    request, config = {"messages": [HumanMessage("summarize")]}, thread(f"t-pages-{run}")
    if run == "invoke":
        state = agent.invoke(request, config)
        # Only what the model is sent is compacted: the agent's state keeps every result whole.
        assert [m.content for m in tool_messages(state["messages"])] == [
            _page(n) for n in range(1, 5)
        ]
    else:
        _drive(agent, request, config, run)

    last = tool_messages(model.received[-1])
    thread_hold = hold.for_session(f"t-pages-{run}")  # the thread's session holds what it stored
    key = thread_hold.store.marker_key()
    assert [m.tool_call_id for m in last] == ["c1", "c2", "c3", "c4"]  # pairing kept
    assert last[-1].content == _page(4)  # keep_last: the newest stays whole
    for number, message in enumerate(last[:3], start=1):
        assert isinstance(message.content, str)
        info = parse_compact_stub(message.content, key=key)
        assert info is not None, message.content[:200]
        assert f"| call c{number} |" in message.content
        assert thread_hold.store.read(info.ref).raise_for_outcome() == _page(number).encode()
    # Under the trigger the request goes as it is.
    assert [m.content for m in tool_messages(model.received[1])] == [_page(1)]


def test_without_compaction_every_result_reaches_the_model_whole(hold: cargohold.Hold) -> None:
    agent, model = _paging_agent(hold)

    agent.invoke({"messages": [HumanMessage("summarize")]}, thread("t-pages-whole"))

    assert [m.content for m in tool_messages(model.received[-1])] == [_page(n) for n in range(1, 5)]
    assert hold.for_session("t-pages-whole").store.artifacts() == []


def test_a_compaction_argument_that_is_not_a_policy_is_a_usage_error(
    hold: cargohold.Hold,
) -> None:
    with pytest.raises(cargohold.UsageError):
        CargoholdMiddleware(hold, compaction="on")  # type: ignore[arg-type]
