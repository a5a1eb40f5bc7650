"""Mode (b): the gateway adds the read tools and runs them itself, for clients that cannot add
tools. The official SDKs talk to the gateway; a scripted fake provider (tests/gateway_fixtures.py)
plays a model that greps the stub's artifact, then answers with what it read."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx
import openai
import pytest
from tests.gateway_fixtures import FakeProvider, serve

import cargohold
from cargohold.gateway import SESSION_HEADER, GatewayConfig, build_app

KEY = "sk-test-not-a-real-key"
REF = re.compile(r"artifact://sha256/[0-9a-f]{64}")
READ_TOOLS = {
    "artifact_read",
    "artifact_read_lines",
    "artifact_grep",
    "artifact_query",
    "artifact_info",
    "artifact_search",
}
NEEDLE = "worker 1234 failed: disk full"


def heavy_log() -> str:
    """About 170 KB of log lines with one line the model greps for."""
    lines = [f"2026-12-01T10:{i % 60:02d}:00Z INFO worker {i} done\n" for i in range(3000)]
    lines[1234] = f"2026-12-01T10:34:00Z ERROR {NEEDLE}\n"
    return "".join(lines)


@dataclass
class Rig:
    fake: FakeProvider
    hold: cargohold.Hold
    events: cargohold.ListSink
    url: str
    clients: list[Any] = field(default_factory=list)  # closed when the rig ends

    def anthropic(self) -> anthropic.Anthropic:
        client = anthropic.Anthropic(api_key=KEY, base_url=self.url, max_retries=0)
        self.clients.append(client)
        return client

    def openai(self) -> openai.OpenAI:
        client = openai.OpenAI(api_key=KEY, base_url=self.url + "/v1", max_retries=0)
        self.clients.append(client)
        return client

    def tool_names(self, index: int) -> set[str]:
        tools = self.fake.received[index].json().get("tools") or []
        return {t.get("name") or t.get("function", {}).get("name") for t in tools}


@contextmanager
def rig(*, rounds: int = 4, read_tools: bool = True) -> Iterator[Rig]:
    fake = FakeProvider()
    events = cargohold.ListSink()
    with (
        cargohold.open("memory://", tenant="t", user="u", session="gw", sinks=[events]) as hold,
        serve(fake.app()) as fake_url,
    ):
        config = GatewayConfig(upstream=fake_url, read_tools=read_tools, read_rounds=rounds)
        with serve(build_app(hold, config)) as url:
            value = Rig(fake, hold, events, url)
            try:
                yield value
            finally:
                for client in value.clients:
                    client.close()


@pytest.fixture
def gw() -> Iterator[Rig]:
    with rig() as value:
        yield value


def anthropic_history(result: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "why did the job fail?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"c": "x"}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}],
        },
    ]


def chat_history(result: str) -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    return [
        {"role": "user", "content": "why did the job fail?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": result},
    ]


def responses_input(result: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "why did the job fail?"},
        {"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": result},
    ]


def grep_arguments(payload: dict[str, Any]) -> str:
    """The model's grep of the artifact its history's stub names."""
    ref = REF.findall(json.dumps(payload))[0]
    return json.dumps({"ref": ref, "pattern": "ERROR"})


# The scripted model: with a read tool's result last in its history, it answers with that
# result's text (so the test sees exactly what the read returned); else it greps the artifact.


def anthropic_model(payload: dict[str, Any]) -> list[dict[str, Any]]:
    last = payload["messages"][-1]["content"]
    if isinstance(last, list) and last and last[0].get("tool_use_id") == "toolu_read":
        return [{"type": "text", "text": "READ:" + last[0]["content"]}]
    return [
        {"type": "text", "text": "Let me look. "},
        {
            "type": "tool_use",
            "id": "toolu_read",
            "name": "artifact_grep",
            "input": json.loads(grep_arguments(payload)),
        },
    ]


def chat_model(payload: dict[str, Any]) -> dict[str, Any]:
    last = payload["messages"][-1]
    if last.get("role") == "tool" and last.get("tool_call_id") == "call_read":
        return {"role": "assistant", "content": "READ:" + last["content"]}
    call = {
        "id": "call_read",
        "type": "function",
        "function": {"name": "artifact_grep", "arguments": grep_arguments(payload)},
    }
    return {"role": "assistant", "content": "Let me look. ", "tool_calls": [call]}


def responses_model(payload: dict[str, Any]) -> list[dict[str, Any]]:
    last = payload["input"][-1]
    if last.get("type") == "function_call_output" and last.get("call_id") == "call_read":
        return [_responses_message("READ:" + last["output"])]
    return [
        _responses_message("Let me look. "),
        {
            "type": "function_call",
            "id": "fc_read",
            "call_id": "call_read",
            "name": "artifact_grep",
            "arguments": grep_arguments(payload),
            "status": "completed",
        },
    ]


def _responses_message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_" + str(len(text)),
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def assert_read_the_exact_lines(text: str) -> None:
    """The final answer quotes the grep's answer: the one matching line, as stored."""
    assert text.startswith("Let me look. READ:")
    assert f"ERROR {NEEDLE}" in text
    assert "INFO worker" not in text  # a grep's answer, not the body


# -- one read round, then the final answer, for each API, whole and streamed -------------------


def test_anthropic_answer_calling_only_a_read_tool_is_run_and_only_the_final_answer_returns(
    gw: Rig,
) -> None:
    gw.fake.anthropic_reply = anthropic_model
    message = gw.anthropic().messages.create(
        model="claude-fake", max_tokens=100, messages=anthropic_history(heavy_log())
    )

    assert [block.type for block in message.content] == ["text", "text"]
    assert_read_the_exact_lines("".join(b.text for b in message.content if b.type == "text"))
    assert message.stop_reason == "end_turn"
    assert len(gw.fake.received) == 2
    assert gw.tool_names(0) >= READ_TOOLS
    follow_up = gw.fake.received[1].json()["messages"]
    assert follow_up[-2]["content"][-1]["name"] == "artifact_grep"
    assert follow_up[-1]["content"][0]["tool_use_id"] == "toolu_read"


def test_anthropic_stream_of_two_rounds_reaches_the_sdk_as_one_answer(gw: Rig) -> None:
    gw.fake.anthropic_reply = anthropic_model
    with gw.anthropic().messages.stream(
        model="claude-fake", max_tokens=100, messages=anthropic_history(heavy_log())
    ) as stream:
        message = stream.get_final_message()

    assert [block.type for block in message.content] == ["text", "text"]
    assert_read_the_exact_lines("".join(b.text for b in message.content if b.type == "text"))
    assert message.stop_reason == "end_turn"
    assert len(gw.fake.received) == 2


def test_chat_answer_calling_only_a_read_tool_is_run_and_only_the_final_answer_returns(
    gw: Rig,
) -> None:
    gw.fake.chat_reply = chat_model
    completion = gw.openai().chat.completions.create(
        model="gpt-fake", messages=chat_history(heavy_log())
    )

    choice = completion.choices[0]
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    assert_read_the_exact_lines(choice.message.content or "")
    assert len(gw.fake.received) == 2
    assert gw.tool_names(0) >= READ_TOOLS
    assert gw.fake.received[1].json()["messages"][-1]["tool_call_id"] == "call_read"


def test_chat_stream_of_two_rounds_reaches_the_async_sdk_as_one_answer(gw: Rig) -> None:
    gw.fake.chat_reply = chat_model

    async def run() -> tuple[str, list[str | None], int]:
        client = openai.AsyncOpenAI(api_key=KEY, base_url=gw.url + "/v1", max_retries=0)
        async with client:
            stream = await client.chat.completions.create(
                model="gpt-fake", messages=chat_history(heavy_log()), stream=True
            )
            text, reasons, calls = [], [], 0
            async for chunk in stream:
                delta = chunk.choices[0].delta
                text.append(delta.content or "")
                calls += len(delta.tool_calls or [])
                reasons.append(chunk.choices[0].finish_reason)
            return "".join(text), reasons, calls

    text, reasons, calls = asyncio.run(run())
    assert_read_the_exact_lines(text)
    assert calls == 0  # the read-tool call never reached the client
    assert [r for r in reasons if r is not None] == ["stop"]
    assert len(gw.fake.received) == 2


def test_responses_answer_calling_only_a_read_tool_is_run_and_only_the_final_answer_returns(
    gw: Rig,
) -> None:
    gw.fake.responses_reply = responses_model
    response = gw.openai().responses.create(model="gpt-fake", input=responses_input(heavy_log()))

    assert [item.type for item in response.output] == ["message", "message"]
    assert_read_the_exact_lines(response.output_text)
    assert len(gw.fake.received) == 2
    assert gw.tool_names(0) >= READ_TOOLS
    assert gw.fake.received[1].json()["input"][-1]["call_id"] == "call_read"


def test_responses_stream_of_two_rounds_is_renumbered_into_one_answer(gw: Rig) -> None:
    gw.fake.responses_reply = responses_model
    with gw.openai().responses.stream(
        model="gpt-fake", input=responses_input(heavy_log())
    ) as stream:
        seen = list(stream)
        response = stream.get_final_response()

    assert_read_the_exact_lines(response.output_text)
    assert [e.sequence_number for e in seen] == list(range(len(seen)))
    added = [e.output_index for e in seen if e.type == "response.output_item.added"]
    assert added == [0, 1]
    assert [e.type for e in seen].count("response.created") == 1
    assert all(getattr(e, "item", None) is None or e.item.type != "function_call" for e in seen)


# -- when it does not run ------------------------------------------------------------------------


def test_a_request_without_a_reference_is_forwarded_without_the_read_tools(gw: Rig) -> None:
    gw.fake.anthropic_reply = lambda payload: [{"type": "text", "text": "fine"}]
    gw.anthropic().messages.create(
        model="claude-fake", max_tokens=10, messages=anthropic_history("a small result")
    )

    assert "tools" not in gw.fake.received[0].json()


def test_a_client_defining_a_read_tool_itself_gets_the_model_answer_unchanged(gw: Rig) -> None:
    gw.fake.anthropic_reply = anthropic_model
    own = {"name": "artifact_grep", "description": "mine", "input_schema": {"type": "object"}}
    message = gw.anthropic().messages.create(
        model="claude-fake",
        max_tokens=100,
        messages=anthropic_history(heavy_log()),
        tools=[own],  # type: ignore[list-item]
    )

    assert message.content[-1].type == "tool_use"  # the client runs its own tool
    assert len(gw.fake.received) == 1
    assert gw.tool_names(0) == {"artifact_grep"}


def test_without_read_tools_configured_nothing_is_added() -> None:
    with rig(read_tools=False) as gw:
        gw.fake.anthropic_reply = anthropic_model
        message = gw.anthropic().messages.create(
            model="claude-fake", max_tokens=100, messages=anthropic_history(heavy_log())
        )

    assert message.content[-1].type == "tool_use"
    assert "tools" not in gw.fake.received[0].json()


def test_an_answer_calling_a_read_tool_and_a_client_tool_reaches_the_client_without_the_read(
    gw: Rig,
) -> None:
    def both(payload: dict[str, Any]) -> list[dict[str, Any]]:
        read = anthropic_model(payload)[1]
        own = {"type": "tool_use", "id": "toolu_own", "name": "bash", "input": {"c": "ls"}}
        return [read, own]

    gw.fake.anthropic_reply = both
    client_tools = [{"name": "bash", "description": "shell", "input_schema": {"type": "object"}}]
    message = gw.anthropic().messages.create(
        model="claude-fake",
        max_tokens=100,
        messages=anthropic_history(heavy_log()),
        tools=client_tools,  # type: ignore[arg-type]
    )

    assert [(b.type, getattr(b, "name", None)) for b in message.content] == [("tool_use", "bash")]
    assert message.stop_reason == "tool_use"
    assert len(gw.fake.received) == 1


def test_the_rounds_are_bounded_and_the_last_is_asked_to_answer() -> None:
    def always_reads(payload: dict[str, Any]) -> list[dict[str, Any]]:
        if payload.get("tool_choice") == {"type": "none"}:
            return [{"type": "text", "text": "giving up"}]
        block = anthropic_model({"messages": anthropic_history(json.dumps(payload))})[1]
        return [{**block, "id": f"toolu_{len(payload['messages'])}"}]

    with rig(rounds=2) as gw:
        gw.fake.anthropic_reply = always_reads
        message = gw.anthropic().messages.create(
            model="claude-fake", max_tokens=100, messages=anthropic_history(heavy_log())
        )

    assert [b.type for b in message.content] == ["text"]
    assert len(gw.fake.received) == 3
    choices = [r.json().get("tool_choice") for r in gw.fake.received]
    assert choices == [None, None, {"type": "none"}]


def test_a_read_runs_in_the_sessions_scope_and_cannot_reach_another_sessions_artifact(
    gw: Rig,
) -> None:
    # Session a's artifact, read from session b: the read answers that it is not b's.
    first = gw.anthropic().with_options(default_headers={SESSION_HEADER: "a"})
    gw.fake.anthropic_reply = lambda payload: [{"type": "text", "text": "ok"}]
    first.messages.create(
        model="claude-fake", max_tokens=10, messages=anthropic_history(heavy_log())
    )
    ref = REF.findall(gw.fake.received[0].body.decode())[0]

    def read_a(payload: dict[str, Any]) -> list[dict[str, Any]]:
        last = payload["messages"][-1]["content"]
        if isinstance(last, list) and last and last[0].get("tool_use_id") == "toolu_read":
            return [{"type": "text", "text": "READ:" + last[0]["content"]}]
        call = {"ref": ref, "pattern": "ERROR"}
        return [{"type": "tool_use", "id": "toolu_read", "name": "artifact_grep", "input": call}]

    gw.fake.anthropic_reply = read_a
    second = gw.anthropic().with_options(default_headers={SESSION_HEADER: "b"})
    other = heavy_log().replace("INFO", "DEBUG")
    message = second.messages.create(
        model="claude-fake", max_tokens=10, messages=anthropic_history(other)
    )

    text = "".join(b.text for b in message.content if b.type == "text")
    assert text.startswith("READ:")
    assert NEEDLE not in text
    reads = [e for e in gw.events.events if e.operation == "rehydrate"]
    assert [e.outcome for e in reads] == ["unauthorized"]


def test_count_tokens_counts_the_request_with_the_read_tools(gw: Rig) -> None:
    gw.anthropic().messages.count_tokens(
        model="claude-fake", messages=anthropic_history(heavy_log())
    )

    assert gw.tool_names(0) >= READ_TOOLS
    assert len(gw.fake.received) == 1


def test_an_upstream_error_on_a_later_round_reaches_the_client_in_the_provider_shape(
    gw: Rig,
) -> None:
    def fail_second(payload: dict[str, Any]) -> list[dict[str, Any]]:
        gw.fake.fail_with = 529  # the next request, the follow-up, is answered with an error
        return anthropic_model(payload)

    gw.fake.anthropic_reply = fail_second
    with pytest.raises(anthropic.APIStatusError) as caught:
        gw.anthropic().messages.create(
            model="claude-fake", max_tokens=100, messages=anthropic_history(heavy_log())
        )

    assert caught.value.status_code == 529
    gw.fake.fail_with = None
    gw.fake.anthropic_reply = lambda payload: [{"type": "text", "text": "next"}]
    after = gw.anthropic().messages.create(
        model="claude-fake", max_tokens=10, messages=anthropic_history(heavy_log())
    )
    assert after.content[0].type == "text"


def test_an_upstream_error_mid_stream_raises_in_the_sdk(gw: Rig) -> None:
    def fail_second(payload: dict[str, Any]) -> list[dict[str, Any]]:
        gw.fake.fail_with = 500
        return anthropic_model(payload)

    gw.fake.anthropic_reply = fail_second
    with (
        pytest.raises(anthropic.APIStatusError),
        gw.anthropic().messages.stream(
            model="claude-fake", max_tokens=100, messages=anthropic_history(heavy_log())
        ) as stream,
    ):
        stream.get_final_message()


def test_with_read_tools_each_turns_request_extends_the_previous_byte_for_byte(gw: Rig) -> None:
    # The tools join the request once its history holds a reference (turn 0 here), just
    # before the conversation, so every later turn's forwarded body extends the one before.
    gw.fake.anthropic_reply = lambda payload: [{"type": "text", "text": "ok"}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    bodies: list[bytes] = []
    for turn in range(12):
        call = {"type": "tool_use", "id": f"toolu_{turn}", "name": "bash", "input": {"n": turn}}
        messages.append({"role": "assistant", "content": [call]})
        result = heavy_log().replace("done", f"done-{turn}") if turn % 3 == 0 else f"ok {turn}"
        block = {"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": result}
        messages.append({"role": "user", "content": [block]})
        request = {"model": "claude-fake", "max_tokens": 64, "messages": messages}
        answer = httpx.post(
            gw.url + "/v1/messages",
            content=json.dumps(request, separators=(",", ":")),
            headers={"x-api-key": KEY, "content-type": "application/json"},
        )
        assert answer.status_code == 200
        bodies.append(gw.fake.received[-1].body)

    assert all(gw.tool_names(i) >= READ_TOOLS for i in range(len(bodies)))
    for before, after in itertools.pairwise(bodies):
        assert before.endswith(b"]}")
        assert after.startswith(before[:-2] + b",")


@pytest.mark.parametrize("stream", [False, True])
def test_a_thinking_block_goes_back_upstream_with_its_signature_and_reaches_the_client(
    gw: Rig, stream: bool
) -> None:
    thinking = {"type": "thinking", "thinking": "I should grep.", "signature": "sig-abc123"}

    def model(payload: dict[str, Any]) -> list[dict[str, Any]]:
        answer = anthropic_model(payload)
        return answer if answer[0]["text"].startswith("READ:") else [thinking, answer[1]]

    gw.fake.anthropic_reply = model
    client = gw.anthropic()
    request: dict[str, Any] = {
        "model": "claude-fake",
        "max_tokens": 100,
        "messages": anthropic_history(heavy_log()),
    }
    if stream:
        with client.messages.stream(**request) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**request)

    assert [b.type for b in message.content] == ["thinking", "text"]
    sent_back = gw.fake.received[1].json()["messages"][-2]["content"]
    assert sent_back[0] == thinking
    assert sent_back[1]["name"] == "artifact_grep"
    assert sent_back[1]["input"]["pattern"] == "ERROR"


# -- review: bounded reads, odd upstream answers on a later round, the splice's edges -----------


def test_an_answer_of_many_read_calls_runs_at_most_eight_within_the_rounds_byte_budget(
    gw: Rig,
) -> None:
    def many(payload: dict[str, Any]) -> list[dict[str, Any]]:
        last = payload["messages"][-1]["content"]
        if isinstance(last, list) and last and str(last[0].get("tool_use_id")).startswith("r"):
            return [{"type": "text", "text": "done"}]
        ref = REF.findall(json.dumps(payload))[0]
        read = {"ref": ref, "offset": 0, "length": 1024 * 1024, "budget": 1024 * 1024}
        return [
            {"type": "tool_use", "id": f"r{i}", "name": "artifact_read", "input": read}
            for i in range(12)
        ]

    gw.fake.anthropic_reply = many
    gw.anthropic().messages.create(
        model="claude-fake", max_tokens=10, messages=anthropic_history(heavy_log() * 4)
    )

    results = gw.fake.received[1].json()["messages"][-1]["content"]
    assert len(results) == 12
    texts = [r["content"] for r in results]
    assert sum(len(t.encode()) for t in texts) <= 256 * 1024 + 12 * 512  # answers' own lines
    refused = [r for r in results if r.get("is_error") and r["content"].startswith("not run")]
    assert len(refused) >= 4


def _odd_upstream(second: bytes, status: int = 200, media: str = "application/json") -> Any:
    """An upstream whose first answer calls artifact_grep (Chat) and whose second is
    ``second`` as it is."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    seen: list[dict[str, Any]] = []

    async def handle(request: Request) -> Response:
        payload = json.loads(await request.body())
        seen.append(payload)
        if len(seen) > 1:
            return Response(second, status_code=status, media_type=media)
        message = chat_model(payload)
        if payload.get("stream"):
            chunk = {
                "id": "c1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "role": "assistant",
                            "tool_calls": [{"index": 0, **message["tool_calls"][0]}],
                        },
                        "finish_reason": None,
                    }
                ],
            }
            end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}

            async def events() -> Any:
                for data in (chunk, end):
                    yield f"data: {json.dumps(data)}\n\n".encode()
                yield b"data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")
        completion = {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        }
        return Response(json.dumps(completion), media_type="application/json")

    return Starlette(routes=[Route("/{path:path}", handle, methods=["POST"])])


@contextmanager
def odd_rig(second: bytes, status: int = 200, media: str = "application/json") -> Iterator[str]:
    with (
        cargohold.open("memory://", tenant="t", user="u", session="gw") as hold,
        serve(_odd_upstream(second, status, media)) as upstream,
        serve(build_app(hold, GatewayConfig(upstream=upstream, read_tools=True))) as url,
    ):
        yield url


def test_a_later_rounds_answer_without_a_choice_reaches_the_client_as_it_came() -> None:
    with odd_rig(b'{"choices":[]}') as url:
        client = openai.OpenAI(api_key=KEY, base_url=url + "/v1", max_retries=0)
        answer = client.chat.completions.with_raw_response.create(
            model="m", messages=chat_history(heavy_log())
        )
        client.close()

    assert answer.status_code == 200
    assert json.loads(answer.content) == {"choices": []}


def test_a_later_rounds_html_error_mid_stream_is_an_api_error_in_the_sdk() -> None:
    page = b"<html><body>502 Bad Gateway\r\n</body></html>"
    with odd_rig(page, status=502, media="text/html") as url:
        client = openai.OpenAI(api_key=KEY, base_url=url + "/v1", max_retries=0)
        with pytest.raises(openai.APIError) as caught:
            for _ in client.chat.completions.create(
                model="m", messages=chat_history(heavy_log()), stream=True
            ):
                pass
        client.close()

    assert "502" in str(caught.value)


def test_a_responses_answer_with_a_client_run_computer_call_goes_to_the_client(gw: Rig) -> None:
    def with_computer(payload: dict[str, Any]) -> list[dict[str, Any]]:
        read = responses_model(payload)[1]
        computer = {
            "type": "computer_call",
            "id": "cu_1",
            "call_id": "call_cu",
            "action": {"type": "screenshot"},
            "pending_safety_checks": [],
            "status": "completed",
        }
        return [read, computer]

    gw.fake.responses_reply = with_computer
    response = gw.openai().responses.create(model="gpt-fake", input=responses_input(heavy_log()))

    assert [item.type for item in response.output] == ["computer_call"]
    assert len(gw.fake.received) == 1


def test_the_event_reader_reads_the_same_events_however_the_stream_is_cut() -> None:
    from cargohold.gateway._loop import EventReader, EventTooLarge

    stream = b": hi\n\nevent: a\ndata: 1\n\ndata: 2\r\n\r\ndata: 3\n\r\ndata: [DONE]\n"
    whole = EventReader()
    expected = [*whole.feed(stream), *whole.close()]
    cut = EventReader()
    got = [e for i in range(len(stream)) for e in cut.feed(stream[i : i + 1])]
    got += list(cut.close())

    assert [(e.name, e.data) for e in got] == [(e.name, e.data) for e in expected]
    assert [e.data for e in got] == ["", "1", "2", "3", "[DONE]"]
    with pytest.raises(EventTooLarge):
        list(EventReader(limit=100).feed(b"x" * 101))


def test_a_streamed_round_that_ends_without_its_stop_is_not_continued() -> None:
    from cargohold.gateway._loop import APIS, Event

    splice = APIS["anthropic"].splice()
    start = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": "t", "name": "artifact_read", "input": {}},
    }
    for data in (start, {"type": "content_block_stop", "index": 0}):
        splice.feed(Event(None, json.dumps(data), b""))
    assert splice.calls() is None  # broken off before message_stop: the round is the last
    splice.feed(Event(None, json.dumps({"type": "message_stop"}), b""))
    assert splice.calls() is not None
