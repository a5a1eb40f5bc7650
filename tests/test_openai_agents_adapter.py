"""The OpenAI Agents SDK adapter, driven through real ``Runner.run`` calls.

The model is the SDK's own ``agents.testing.ScriptedModel``: scripted steps, some derived from
the call they answer (a step that reads the reference out of the stub the model was sent), and a
record of every call, whose input is asserted: what the model received, never a mock of the
framework. References are known before the run because they are the SHA-256 of the exact bytes
stored, which is itself under test.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _require import require

require("agents", "openai-agents")

import pytest  # noqa: E402
from agents import (  # noqa: E402
    Agent,
    FunctionTool,
    RunConfig,
    Runner,
    SQLiteSession,
    ToolOutputImage,
    ToolOutputText,
    WebSearchTool,
    function_tool,
)
from agents.run_config import CallModelData, ModelInputData  # noqa: E402
from agents.testing import (  # noqa: E402
    ModelCall,
    ModelStep,
    ScriptedModel,
    assistant_message,
    function_call,
)
from openai.types.responses.response_output_item import McpCall  # noqa: E402

import cargohold  # noqa: E402
import cargohold.openai_agents as adapter  # noqa: E402
from cargohold import ContextLeakError, ListSink, parse_segment, parse_stub  # noqa: E402
from cargohold._stub import parse_compact_stub  # noqa: E402
from cargohold.openai_agents import AgentsAdapter, InputFilter  # noqa: E402
from cargohold.openai_agents._responses import offload_items  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HEAVY_SERVER = ROOT / "tests" / "fixtures" / "mcp" / "heavy_server.py"
STUB_BUDGET = 8 * 1024
STATUSES = ("paid", "refunded", "open", "void")
ROWS = [
    {"id": i, "customer": f"c-{i % 97:05d}", "total": round(i * 1.25, 2), "status": STATUSES[i % 4]}
    for i in range(16_000)
]
BODY = json.dumps(ROWS, separators=(",", ":")).encode()
"""What a tool returning ROWS stores: the list's own compact JSON (over 1 MB)."""


def _sha(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return "artifact://sha256/" + hashlib.sha256(raw).hexdigest()


def _outputs(call: ModelCall) -> list[Any]:
    """The tool outputs (``function_call_output``) of one model call's input, in order."""
    return [
        item["output"]
        for item in call.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


def _segment_content(text: str) -> str:
    """What a recovered segment carries between its marker lines."""
    return text.split("\n", 1)[1].rsplit("\n", 1)[0]


def _read_step(offset: int, length: int, call_id: str = "read-1") -> ModelStep:
    """A model step that reads ``length`` bytes at ``offset`` of the reference in the latest
    stub it was sent, as a model does: from the stub's first line."""

    def respond(call: ModelCall) -> list[Any]:
        stub = next(o for o in reversed(_outputs(call)) if str(o).startswith("[cargohold]"))
        ref = str(stub).split()[1]
        args = {"ref": ref, "offset": offset, "length": length}
        return [function_call("artifact_read", args, call_id=call_id)]

    return ModelStep.respond(respond)


def _run(agent: Agent[Any], text: str, **kwargs: Any) -> Any:
    return asyncio.run(Runner.run(agent, text, **kwargs))


@function_tool
def list_orders() -> list[dict[str, Any]]:
    """Every order."""
    return ROWS


@function_tool
def raw_log() -> str:
    """The service log, returned raw (this tool is given to agents unwrapped)."""
    return "2026-01-01 INFO served\n" * 50_000


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


@pytest.fixture
def hold(sink: ListSink) -> Iterator[cargohold.Hold]:
    with cargohold.open("memory://", tenant="acme", user="ana", session="base", sinks=[sink]) as h:
        yield h


@pytest.fixture
def cargo(hold: cargohold.Hold) -> AgentsAdapter:
    return AgentsAdapter(hold)


def _config(cargo: AgentsAdapter, session: Any = None, **kwargs: Any) -> Any:
    return cargo.run_config(session, check_window=False, tracing_disabled=True, **kwargs)


# -- a heavy result, its stub, and the exact slice --------------------------------------------


def test_a_megabyte_result_reaches_the_model_as_a_stub_and_a_read_returns_the_exact_slice(
    hold: cargohold.Hold, cargo: AgentsAdapter
) -> None:
    assert len(BODY) >= 1_000_000
    model = ScriptedModel(
        [
            [function_call("list_orders", {}, call_id="orders-1")],
            _read_step(offset=500_000, length=4096),
            [assistant_message("done")],
        ]
    )
    tools = [*cargo.wrap_tools([list_orders]), *cargo.read_tools()]
    agent = Agent(name="analyst", model=model, tools=tools)

    _run(agent, "Which orders were refunded?", run_config=_config(cargo))

    stub = _outputs(model.calls[1])[0]
    assert stub.startswith(f"[cargohold] {_sha(BODY)}\n")
    assert len(stub.encode()) <= STUB_BUDGET
    assert parse_stub(stub, key=hold.store.marker_key()) is not None
    sent = json.dumps(model.calls[1].input)
    assert len(sent) < 2 * STUB_BUDGET
    assert '"id":8000,' not in sent  # a middle row: never in the request
    segment = _outputs(model.calls[2])[1]
    assert parse_segment(segment, key=hold.store.marker_key()) is not None
    assert _segment_content(segment).encode() == BODY[500_000:504_096]


def _run_streamed(agent: Agent[Any], text: str, **kwargs: Any) -> Any:
    async def drain() -> Any:
        result = Runner.run_streamed(agent, text, **kwargs)
        async for _ in result.stream_events():
            pass
        return result

    return asyncio.run(drain())


def test_a_streamed_run_offloads_reads_and_guards_as_a_plain_run_does(
    hold: cargohold.Hold, cargo: AgentsAdapter
) -> None:
    model = ScriptedModel(
        [
            [function_call("list_orders", {}, call_id="orders-1")],
            _read_step(offset=500_000, length=4096),
            [function_call("raw_log", {}, call_id="log-1")],
            [assistant_message("never")],
        ]
    )
    tools = [*cargo.wrap_tools([list_orders]), raw_log, *cargo.read_tools()]
    agent = Agent(name="analyst", model=model, tools=tools)

    with pytest.raises(ContextLeakError):  # the unwrapped tool's raw log, before the 4th call
        _run_streamed(agent, "Which orders were refunded?", run_config=_config(cargo))

    assert len(model.calls) == 3
    stub = _outputs(model.calls[1])[0]
    assert stub.startswith(f"[cargohold] {_sha(BODY)}\n")
    assert len(json.dumps(model.calls[1].input)) < 2 * STUB_BUDGET
    segment = _outputs(model.calls[2])[1]
    assert parse_segment(segment, key=hold.store.marker_key()) is not None
    assert _segment_content(segment).encode() == BODY[500_000:504_096]


def test_a_dict_is_stored_as_its_own_json_and_answers_a_query(
    hold: cargohold.Hold, cargo: AgentsAdapter
) -> None:
    def query(call: ModelCall) -> list[Any]:
        ref = _outputs(call)[0].split()[1]
        args = {"ref": ref, "expression": "length([?status=='refunded'])"}
        return [function_call("artifact_query", args, call_id="q-1")]

    model = ScriptedModel(
        [
            [function_call("list_orders", {}, call_id="orders-1")],
            ModelStep.respond(query),
            [assistant_message("done")],
        ]
    )
    tools = [*cargo.wrap_tools([list_orders]), *cargo.read_tools()]

    _run(Agent(name="analyst", model=model, tools=tools), "count", run_config=_config(cargo))

    assert _outputs(model.calls[1])[0].split()[1] == _sha(BODY)  # not the SDK's str(list)
    assert _segment_content(_outputs(model.calls[2])[1]) == "4000"
    assert hold.info(_sha(BODY)).record.media_type == "application/json"  # type: ignore[union-attr]


def test_a_small_text_result_reaches_the_model_unchanged(
    cargo: AgentsAdapter, sink: ListSink
) -> None:
    @function_tool
    def greet(name: str) -> str:
        """Say hello."""
        return f"hello {name}"

    model = ScriptedModel(
        [[function_call("greet", {"name": "ana"}, call_id="g-1")], [assistant_message("ok")]]
    )

    _run(
        Agent(name="a", model=model, tools=cargo.wrap_tools([greet])),
        "hi",
        run_config=_config(cargo),
    )

    assert _outputs(model.calls[1]) == ["hello ana"]
    (event,) = [e for e in sink.events if e.operation == "offload"]
    assert (event.outcome, event.tool, event.ref) == ("inline", "greet", None)


def _fake_key_id(seed: int) -> str:
    """An AWS access key id shape from random letters (never a real key)."""
    import random
    import string

    return "AKIA" + "".join(random.Random(seed).choices(string.ascii_uppercase, k=16))


def test_a_small_result_holding_a_credential_reaches_the_model_redacted(
    cargo: AgentsAdapter, sink: ListSink
) -> None:
    key = _fake_key_id(1)

    @function_tool
    def show_env() -> str:
        """The environment."""
        return f"REGION=eu-west-1\nAWS_ACCESS_KEY_ID={key}\nDEBUG=0\n"

    model = ScriptedModel(
        [[function_call("show_env", {}, call_id="e-1")], [assistant_message("ok")]]
    )

    _run(
        Agent(name="a", model=model, tools=cargo.wrap_tools([show_env])),
        "?",
        run_config=_config(cargo),
    )

    assert _outputs(model.calls[1]) == [
        "REGION=eu-west-1\nAWS_ACCESS_KEY_ID=[REDACTED:aws_access_key_id]\nDEBUG=0\n"
        "[cargohold] credentials redacted from this result: aws_access_key_id (line 2)"
    ]
    assert key not in json.dumps(model.calls[1].input, default=str)
    (event,) = [e for e in sink.events if e.operation == "offload"]
    assert (event.outcome, event.reason) == ("inline", "credential_redacted")


def test_small_data_holding_a_credential_reaches_the_model_as_json_with_the_note_last(
    cargo: AgentsAdapter,
) -> None:
    key = _fake_key_id(4)

    @function_tool
    def sts() -> dict[str, Any]:
        """Temporary credentials."""
        return {"AccessKeyId": key, "Expiration": 3600}

    model = ScriptedModel([[function_call("sts", {}, call_id="s-1")], [assistant_message("ok")]])

    _run(
        Agent(name="a", model=model, tools=cargo.wrap_tools([sts])), "?", run_config=_config(cargo)
    )

    (output,) = _outputs(model.calls[1])
    data, note = output.split("\n")
    assert json.loads(data) == {"AccessKeyId": "[REDACTED:aws_access_key_id]", "Expiration": 3600}
    assert note == "[cargohold] credentials redacted from this result: aws_access_key_id (line 1)"
    assert key not in json.dumps(model.calls[1].input, default=str)


def test_a_small_credential_from_an_unwrapped_tool_is_redacted_by_the_input_filter(
    cargo: AgentsAdapter,
) -> None:
    key = _fake_key_id(3)

    @function_tool
    def show_env() -> str:
        """The environment (this tool is given to the agent unwrapped)."""
        return f"AWS_ACCESS_KEY_ID={key}\n"

    model = ScriptedModel(
        [[function_call("show_env", {}, call_id="e-1")], [assistant_message("ok")]]
    )

    _run(Agent(name="a", model=model, tools=[show_env]), "?", run_config=_config(cargo))

    assert _outputs(model.calls[1]) == [
        "AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key_id]\n"
        "[cargohold] credentials redacted from this result: aws_access_key_id (line 1)"
    ]
    assert key not in json.dumps(model.calls[1].input, default=str)


def test_a_small_credential_in_a_hosted_mcp_result_is_redacted_by_the_input_filter(
    cargo: AgentsAdapter,
) -> None:
    key = _fake_key_id(2)
    hosted = McpCall(
        id="mcp-1",
        type="mcp_call",
        name="read_env",
        server_label="ops",
        arguments="{}",
        output=f"AWS_ACCESS_KEY_ID={key}\n",
        status="completed",
    )

    @function_tool
    def note() -> str:
        """A note."""
        return "noted"

    model = ScriptedModel(
        [[hosted, function_call("note", {}, call_id="n-1")], [assistant_message("done")]]
    )

    _run(
        Agent(name="a", model=model, tools=cargo.wrap_tools([note])),
        "go",
        run_config=_config(cargo),
    )

    (mcp_item,) = [i for i in model.calls[1].input if i.get("type") == "mcp_call"]
    assert mcp_item["output"] == (
        "AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key_id]\n"
        "[cargohold] credentials redacted from this result: aws_access_key_id (line 1)"
    )
    assert key not in json.dumps(model.calls[1].input, default=str)


def test_a_small_dict_reaches_the_model_as_its_compact_json_not_its_repr(
    cargo: AgentsAdapter,
) -> None:
    @function_tool
    def order(order_id: int) -> dict[str, Any]:
        """One order."""
        return {"id": order_id, "status": "paid", "refunded": False}

    model = ScriptedModel(
        [[function_call("order", {"order_id": 7}, call_id="o-1")], [assistant_message("ok")]]
    )

    _run(
        Agent(name="a", model=model, tools=cargo.wrap_tools([order])),
        "?",
        run_config=_config(cargo),
    )

    assert _outputs(model.calls[1]) == ['{"id":7,"status":"paid","refunded":false}']


def test_an_image_a_tool_returns_is_stored_as_its_own_bytes_by_default(
    hold: cargohold.Hold, cargo: AgentsAdapter
) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40  # small: ref stores it all the same
    url = "data:image/png;base64," + base64.b64encode(png).decode()

    @function_tool
    def screenshot() -> ToolOutputImage:
        """The screen."""
        return ToolOutputImage(image_url=url)

    model = ScriptedModel(
        [[function_call("screenshot", {}, call_id="s-1")], [assistant_message("ok")]]
    )

    _run(
        Agent(name="a", model=model, tools=cargo.wrap_tools([screenshot])),
        "?",
        run_config=_config(cargo),
    )

    (output,) = _outputs(model.calls[1])
    assert output.startswith(f"[cargohold] {_sha(png)}\n")
    assert "image/png" in output.splitlines()[1]
    assert hold.store.read(_sha(png)).data == png


def test_text_parts_that_add_up_to_the_threshold_are_stored_as_one_text(
    cargo: AgentsAdapter,
) -> None:
    first, second = "a" * 20_000, "b" * 20_000  # each under 32 KiB, together over it

    @function_tool
    def report() -> list[ToolOutputText]:
        """A report in two parts."""
        return [ToolOutputText(text=first), ToolOutputText(text=second)]

    model = ScriptedModel([[function_call("report", {}, call_id="r-1")], [assistant_message("ok")]])

    _run(
        Agent(name="a", model=model, tools=cargo.wrap_tools([report])),
        "?",
        run_config=_config(cargo),
    )

    (output,) = _outputs(model.calls[1])
    assert output.startswith(f"[cargohold] {_sha(first + chr(10) + second)}\n")


def test_a_wrapped_tool_keeps_its_name_schema_and_policies_and_the_original_is_untouched(
    cargo: AgentsAdapter,
) -> None:
    original = function_tool(lambda day: day, name_override="orders_of", needs_approval=True)

    (wrapped,) = cargo.wrap_tools([original])

    assert isinstance(wrapped, FunctionTool)
    assert wrapped is not original
    assert (wrapped.name, wrapped.params_json_schema) == (
        original.name,
        original.params_json_schema,
    )
    assert wrapped.needs_approval is True
    assert wrapped.on_invoke_tool is not original.on_invoke_tool
    assert "offloading" not in repr(original.on_invoke_tool)
    hosted = WebSearchTool()
    assert cargo.wrap_tools([hosted]) == [hosted]  # hosted outputs are the input filter's


# -- the guard before every model call ---------------------------------------------------------


def test_a_tool_that_bypasses_the_adapter_is_stopped_by_the_guard_before_the_model_call(
    cargo: AgentsAdapter, sink: ListSink
) -> None:
    model = ScriptedModel(
        [[function_call("raw_log", {}, call_id="log-1")], [assistant_message("never")]]
    )
    agent = Agent(name="ops", model=model, tools=[raw_log, *cargo.read_tools()])

    with pytest.raises(ContextLeakError) as caught:
        _run(agent, "what failed?", run_config=_config(cargo))

    assert len(model.calls) == 1  # the request carrying the raw log never reached the model
    (finding,) = caught.value.findings
    assert (finding.tool, finding.where, finding.size) == ("raw_log", "tool_result", 1_150_000)
    assert caught.value.event in sink.events
    assert (caught.value.event.agent_id, caught.value.event.tool) == ("ops", "raw_log")


def test_a_filter_of_yours_runs_first_and_the_guard_judges_what_it_returns(
    cargo: AgentsAdapter,
) -> None:
    def pad(data: CallModelData[Any]) -> ModelInputData:
        extra = {"role": "user", "content": "z" * 40_000}  # raw content added by the filter
        return ModelInputData(input=[*data.model_data.input, extra], instructions=None)

    model = ScriptedModel([[assistant_message("never")]])
    config = cargo.run_config(prepare=pad, check_window=False, tracing_disabled=True)

    with pytest.raises(ContextLeakError):
        _run(Agent(name="a", model=model), "hi", run_config=config)

    assert model.calls == ()


def test_a_run_config_takes_one_input_filter_and_yours_goes_through_prepare(
    cargo: AgentsAdapter,
) -> None:
    with pytest.raises(cargohold.UsageError, match="prepare="):
        cargo.run_config(call_model_input_filter=lambda data: data.model_data)


def test_heavy_results_of_an_mcp_server_are_offloaded_by_the_input_filter(
    cargo: AgentsAdapter, sink: ListSink
) -> None:
    from agents.mcp import MCPServerStdio

    model = ScriptedModel(
        [
            [
                function_call("heavy_text", {"size": 300_000}, call_id="m-1"),
                function_call("image", {"size": 120_000}, call_id="m-2"),
                function_call("small", {}, call_id="m-3"),
            ],
            [assistant_message("done")],
        ]
    )
    params = {"command": sys.executable, "args": [str(HEAVY_SERVER)]}

    async def run() -> None:
        async with MCPServerStdio(params=params, client_session_timeout_seconds=60) as server:
            agent = Agent(name="a", model=model, mcp_servers=[server])
            await Runner.run(agent, "go", run_config=_config(cargo))

    asyncio.run(run())

    text, image, small = _outputs(model.calls[1])
    key = cargo.hold.store.marker_key()
    assert [part["type"] for part in text + image] == ["input_text", "input_text"]
    assert parse_stub(text[0]["text"], key=key) is not None
    assert text[0]["text"].splitlines()[1].startswith("tool heavy_text | text/plain")
    assert parse_stub(image[0]["text"], key=key) is not None
    assert image[0]["text"].splitlines()[1].startswith("tool image | image/png | 120,000 bytes")
    assert "[cargohold]" not in json.dumps(small)
    offloads = [(e.tool, e.outcome) for e in sink.events if e.operation == "offload"]
    assert offloads == [("heavy_text", "offloaded"), ("image", "offloaded")]


def test_a_hosted_mcp_result_in_the_input_is_offloaded_before_the_next_call(
    cargo: AgentsAdapter,
) -> None:
    docs = "ERROR nothing matched\n" + "doc line\n" * 20_000
    hosted = McpCall(
        id="mcp-1",
        type="mcp_call",
        name="search_docs",
        server_label="docs",
        arguments="{}",
        output=docs,
        status="completed",
    )

    @function_tool
    def note() -> str:
        """A note."""
        return "noted"

    model = ScriptedModel(
        [[hosted, function_call("note", {}, call_id="n-1")], [assistant_message("done")]]
    )

    _run(
        Agent(name="a", model=model, tools=cargo.wrap_tools([note])),
        "go",
        run_config=_config(cargo),
    )

    (mcp_item,) = [i for i in model.calls[1].input if i.get("type") == "mcp_call"]
    assert mcp_item["output"].startswith(f"[cargohold] {_sha(docs)}\n")
    assert mcp_item["name"] == "search_docs"


def test_hosted_tool_items_are_offloaded_where_heavy_and_screenshots_left_to_the_guard(
    hold: cargohold.Hold, sink: ListSink
) -> None:
    logs, hit = "step\n" * 10_000, "passage " * 6_000
    picture = b"\x89PNG\r\n\x1a\n" + b"\x01" * 60_000
    screenshot = {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}
    items = [
        {"type": "code_interpreter_call", "id": "ci", "outputs": [{"type": "logs", "logs": logs}]},
        {"type": "file_search_call", "id": "fs", "results": [{"text": hit}, {"text": "short"}]},
        {"type": "image_generation_call", "id": "ig", "result": base64.b64encode(picture).decode()},
        {"type": "shell_call", "call_id": "sh", "action": {"commands": ["cat log"]}},
        {"type": "shell_call_output", "call_id": "sh", "output": [{"stdout": logs, "stderr": ""}]},
        {"type": "computer_call_output", "call_id": "cc", "output": screenshot},
        {"role": "user", "content": "small"},
    ]

    out = asyncio.run(offload_items(hold, items))

    assert out[0]["outputs"][0]["logs"].startswith(f"[cargohold] {_sha(logs)}\n")
    assert out[1]["results"][0]["text"].startswith(f"[cargohold] {_sha(hit)}\n")
    assert out[1]["results"][1] == {"text": "short"}
    assert out[2]["result"].startswith(f"[cargohold] {_sha(picture)}\n")
    assert [out[3], out[5], out[6]] == [items[3], items[5], items[6]]
    assert all(out[i] is items[i] for i in (3, 5, 6))  # unchanged items: the same objects
    stored = json.dumps([{"stdout": logs, "stderr": ""}], separators=(",", ":"))
    assert out[4]["output"][0]["stdout"].startswith(f"[cargohold] {_sha(stored)}\n")
    assert len([e for e in sink.events if e.operation == "offload"]) == 4


def test_a_genuine_stub_in_the_input_is_not_offloaded_again(sink: ListSink) -> None:
    store = cargohold.MemoryStore()
    owner = {"tenant": "acme", "user": "ana", "session": "base", "sinks": [sink]}
    stub = cargohold.open(store, **owner).offload("q" * 50_000, tool="fetch").text
    low = cargohold.open(store, threshold=64, **owner)  # the stub itself is over this threshold
    items = [
        {"type": "function_call", "call_id": "f", "name": "fetch", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "f", "output": stub},
    ]

    out = asyncio.run(offload_items(low, items))

    assert out[1] is items[1]
    assert len(sink.events) == 1  # the offload that made it; nothing since


# -- the run's scope ----------------------------------------------------------------------------


def test_a_resumed_session_reads_its_old_references_from_a_new_agent_and_runner(
    tmp_path: Path,
) -> None:
    store, db = tmp_path / "store", tmp_path / "sessions.db"
    first = ScriptedModel(
        [[function_call("list_orders", {}, call_id="orders-1")], [assistant_message("stored")]]
    )
    with cargohold.open(store, tenant="acme", user="ana", session="app") as hold:
        cargo = AgentsAdapter(hold)
        agent = Agent(name="analyst", model=first, tools=cargo.wrap_tools([list_orders]))
        session = SQLiteSession("thread-7", db)
        _run(agent, "load the orders", session=session, run_config=_config(cargo, session))
        session.close()

    later = ScriptedModel([_read_step(offset=1_000_000, length=2048), [assistant_message("ok")]])
    # a new process's hold
    with cargohold.open(store, tenant="acme", user="ana", session="app") as hold:
        cargo = AgentsAdapter(hold)
        agent = Agent(name="analyst", model=later, tools=cargo.read_tools())
        session = SQLiteSession("thread-7", db)
        _run(agent, "show me more", session=session, run_config=_config(cargo, session))
        session.close()

    assert _outputs(later.calls[0])[0].startswith(f"[cargohold] {_sha(BODY)}")  # the history
    segment = _outputs(later.calls[1])[-1]
    assert _segment_content(segment).encode() == BODY[1_000_000:1_002_048]


def test_another_session_cannot_read_a_sessions_references(cargo: AgentsAdapter) -> None:
    ref = cargo.hold.for_session("thread-a").offload("x" * 40_000, tool="t").ref
    args = {"ref": str(ref), "offset": 0, "length": 10}
    model = ScriptedModel(
        [[function_call("artifact_read", args, call_id="r-1")], [assistant_message("ok")]]
    )
    agent = Agent(name="a", model=model, tools=cargo.read_tools())

    _run(agent, "read it", run_config=_config(cargo, "thread-b"))

    assert _outputs(model.calls[1])[0].startswith("artifact_read: unauthorized:")


@dataclass
class AppContext:
    """An application's own run context, carrying the hold of the run."""

    user_id: str
    cargohold: cargohold.Hold


def test_a_hold_the_run_context_carries_is_the_runs_scope(
    hold: cargohold.Hold, cargo: AgentsAdapter
) -> None:
    mine = hold.for_session("from-context")
    model = ScriptedModel(
        [[function_call("list_orders", {}, call_id="o-1")], [assistant_message("ok")]]
    )
    agent = Agent(name="analyst", model=model, tools=cargo.wrap_tools([list_orders]))

    _run(agent, "go", context=AppContext("u-1", mine), run_config=_config(cargo, "other"))

    assert mine.info(_sha(BODY)).outcome == "resolved"
    assert hold.info(_sha(BODY)).outcome == "unauthorized"


def test_a_handoff_makes_the_sub_agents_events_name_it_its_parent_and_its_depth(
    cargo: AgentsAdapter, sink: ListSink
) -> None:
    model = ScriptedModel(
        [
            [function_call("transfer_to_billing_agent", {}, call_id="h-1")],
            [function_call("list_orders", {}, call_id="o-1")],
            _read_step(offset=0, length=64),
            [assistant_message("done")],
        ]
    )
    tools = [*cargo.wrap_tools([list_orders]), *cargo.read_tools()]
    billing = Agent(name="Billing agent", model=model, tools=tools)
    triage = Agent(name="triage", model=model, handoffs=[billing])

    _run(triage, "refund order 7", run_config=cargo.run_config(tracing_disabled=True))

    seen = [(e.operation, e.agent_id, e.parent_agent_id, e.depth) for e in sink.events]
    assert ("offload", "Billing-agent", "triage", 2) in seen
    assert ("rehydrate", "Billing-agent", "triage", 2) in seen
    assert ("guard", "triage", "main", 1) in seen  # the window check of triage's call
    sequences = [e.sequence for e in sink.events]
    assert sequences == sorted(set(sequences))  # one sequence across the tree, no repeats


def test_an_agent_run_as_a_tool_reports_as_a_child_of_the_agent_that_called_it(
    cargo: AgentsAdapter, sink: ListSink
) -> None:
    model = ScriptedModel(
        [
            [function_call("researcher", {"input": "orders"}, call_id="t-1")],
            [function_call("list_orders", {}, call_id="o-1")],
            [assistant_message("found them")],
            [assistant_message("done")],
        ]
    )
    researcher = Agent(name="researcher", model=model, tools=cargo.wrap_tools([list_orders]))
    tool = researcher.as_tool(tool_name="researcher", tool_description="Looks things up.")
    lead = Agent(name="lead", model=model, tools=[tool])

    _run(lead, "find the orders", run_config=_config(cargo))

    (event,) = [e for e in sink.events if e.operation == "offload"]
    assert (event.agent_id, event.parent_agent_id, event.depth) == ("researcher", "lead", 2)


def test_agents_run_as_tools_in_parallel_each_report_as_a_child_of_their_caller(
    cargo: AgentsAdapter, sink: ListSink
) -> None:
    def researcher(name: str) -> Agent[Any]:
        model = ScriptedModel(
            [[function_call("list_orders", {}, call_id=f"{name}-o")], [assistant_message("ok")]]
        )
        return Agent(name=name, model=model, tools=cargo.wrap_tools([list_orders]))

    alpha, beta = researcher("alpha"), researcher("beta")
    lead_model = ScriptedModel(
        [
            [
                function_call("alpha", {"input": "a"}, call_id="t-a"),
                function_call("beta", {"input": "b"}, call_id="t-b"),
            ],
            [assistant_message("done")],
        ]
    )
    tools = [alpha.as_tool("alpha", "Looks up."), beta.as_tool("beta", "Looks up too.")]

    _run(Agent(name="lead", model=lead_model, tools=tools), "go", run_config=_config(cargo))

    offloads = {(e.agent_id, e.parent_agent_id, e.depth) for e in sink.events if e.tool}
    assert offloads == {("alpha", "lead", 2), ("beta", "lead", 2)}


def test_a_tools_hold_without_the_input_filter_is_a_child_of_the_adapters(
    cargo: AgentsAdapter, sink: ListSink
) -> None:
    model = ScriptedModel(
        [[function_call("list_orders", {}, call_id="o-1")], [assistant_message("ok")]]
    )
    agent = Agent(name="analyst", model=model, tools=cargo.wrap_tools([list_orders]))

    _run(agent, "go", run_config=RunConfig(tracing_disabled=True))

    (event,) = [e for e in sink.events if e.operation == "offload"]
    assert (event.agent_id, event.parent_agent_id, event.depth) == ("analyst", "main", 1)


# -- privacy, surface, extra, example -----------------------------------------------------------


def test_events_and_reprs_carry_no_body_no_owner_and_no_session_id(
    cargo: AgentsAdapter, sink: ListSink
) -> None:
    model = ScriptedModel(
        [[function_call("list_orders", {}, call_id="o-1")], [assistant_message("ok")]]
    )
    tools = [*cargo.wrap_tools([list_orders]), *cargo.read_tools()]
    run_filter = cargo.input_filter("secret-thread-id")
    config = cargo.run_config("secret-thread-id", tracing_disabled=True)

    _run(Agent(name="worker", model=model, tools=tools), "go", run_config=config)

    shown = [repr(e) + json.dumps(e.as_dict()) for e in sink.events]
    shown += [repr(cargo), repr(run_filter), *(repr(t.on_invoke_tool) for t in tools)]
    for text in shown:
        for secret in ("secret-thread-id", "acme", "ana", "c-00042", '"status":"paid"'):
            assert secret not in text


def test_the_adapter_and_filter_need_a_hold() -> None:
    with pytest.raises(cargohold.UsageError):
        AgentsAdapter("memory://")  # type: ignore[arg-type]
    with pytest.raises(cargohold.UsageError):
        InputFilter(None)  # type: ignore[arg-type]


def test_agent_names_become_short_identifiers() -> None:
    assert adapter.agent_label("Billing agent") == "Billing-agent"
    assert adapter.agent_label("  --Triage!! ") == "Triage"
    assert adapter.agent_label("日本") == "agent"
    assert len(adapter.agent_label("x" * 500)) == 128


def test_the_adapter_exports_its_names_sorted() -> None:
    assert adapter.__all__ == sorted(adapter.__all__, key=lambda n: (n[0].islower(), n))
    assert all(getattr(adapter, name) is not None for name in adapter.__all__)


def test_importing_the_adapter_without_the_sdk_raises_one_error_naming_the_extra() -> None:
    code = (
        "import sys; sys.modules['agents'] = None\n"
        "import cargohold\n"
        "try:\n    import cargohold.openai_agents\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)

    assert done.stdout.startswith("ConfigError ")
    assert "cargohold[openai-agents]" in done.stdout


def test_the_example_agent_runs_offline_and_answers_from_the_exact_rows(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CARGOHOLD_", "OPENAI_"))}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")

    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "openai_agents_agent.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert re.search(r"^\[cargohold\] artifact://sha256/\w{64}$", out, re.M)
    assert "application/json | 1,3" in out
    assert "[cargohold:recovered] artifact://sha256/" in out
    assert (
        "Refunded orders: [0,2500,5000,7500,10000,12500,15000,17500,20000,22500,25000,27500]" in out
    )
    assert "decisions: offload:offloaded 1, rehydrate:resolved 1" in out


# -- compaction before every model call -------------------------------------------------------


def _page(number: int) -> str:
    """A tool output under the heavy threshold (it stays inline), distinct per page."""
    return "".join(f"page {number} line {i}: status ok, latency {i % 89} ms\n" for i in range(180))


@function_tool
def read_page(number: int) -> str:
    """One page of the report."""
    return _page(number)


def _paging(cargo: AgentsAdapter) -> tuple[Agent[Any], ScriptedModel]:
    model = ScriptedModel(
        [
            *([function_call("read_page", {"number": n}, call_id=f"c{n}")] for n in range(1, 5)),
            [assistant_message("done")],
        ]
    )
    return Agent(name="pager", model=model, tools=cargo.wrap_tools([read_page])), model


@pytest.mark.parametrize("streamed", [False, True])
def test_compaction_clears_old_outputs_to_stubs_before_each_model_call_and_they_read_back(
    hold: cargohold.Hold, cargo: AgentsAdapter, streamed: bool
) -> None:
    assert len(_page(1).encode()) < 32 * 1024  # inline when the tool returns it
    policy = cargohold.CompactionPolicy(trigger_tokens=3_000, keep_last=1, clear_at_least=0)
    agent, model = _paging(cargo)

    run = _run_streamed if streamed else _run
    result = run(agent, "summarize", run_config=_config(cargo, "s-pages", compaction=policy))

    session = hold.for_session("s-pages")  # the run's scope: what it stored is there
    key = session.store.marker_key()
    last = _outputs(model.calls[-1])
    assert len(last) == 4
    assert last[-1] == _page(4)  # keep_last: the newest stays whole
    for number, output in enumerate(last[:3], start=1):
        info = parse_compact_stub(output, key=key)
        assert info is not None, output[:200]
        assert f"| call c{number} |" in output
        assert session.store.read(info.ref).raise_for_outcome() == _page(number).encode()
    assert _outputs(model.calls[1]) == [_page(1)]  # under the trigger: sent as it is
    # Only what is sent changes: the run's own items keep every output whole.
    kept = [i.raw_item["output"] for i in result.new_items if i.type == "tool_call_output_item"]
    assert kept == [_page(n) for n in range(1, 5)]


def test_without_compaction_every_output_reaches_the_model_whole(
    hold: cargohold.Hold, cargo: AgentsAdapter
) -> None:
    agent, model = _paging(cargo)

    _run(agent, "summarize", run_config=_config(cargo, "s-whole"))

    assert _outputs(model.calls[-1]) == [_page(n) for n in range(1, 5)]
    assert hold.for_session("s-whole").store.artifacts() == []


def test_a_compaction_argument_that_is_not_a_policy_is_a_usage_error(cargo: AgentsAdapter) -> None:
    with pytest.raises(cargohold.UsageError):
        cargo.run_config(compaction="on")
