"""The gateway end to end: the official SDKs through ``cargohold.gateway`` to a scripted fake
provider on loopback (tests/gateway_fixtures.py), in one store and scope with the read tools."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from tests.gateway_fixtures import (
    MODELS_BODY,
    FakeProvider,
    free_port_url,
    raw_server,
    serve,
)

import cargohold
from cargohold.gateway import SESSION_HEADER, GatewayConfig, build_app

REF = re.compile(r"artifact://sha256/[0-9a-f]{64}")
MARKER = "[cargohold]"
KEY = "sk-ant-test-not-a-real-key"


def heavy_log(lines: int = 3000, tag: str = "") -> str:
    """About 170 KB of log lines: over the 32 KiB heavy threshold."""
    return "".join(
        f"2026-12-01T10:{i % 60:02d}:00Z INFO worker {i}{tag} done in {i % 97} ms\n"
        for i in range(lines)
    )


@dataclass
class Rig:
    fake: FakeProvider
    hold: cargohold.Hold
    events: cargohold.ListSink
    url: str  # the gateway's base URL
    clients: list[Any] = field(default_factory=list)

    def anthropic(self, **kwargs: Any) -> anthropic.Anthropic:
        client = anthropic.Anthropic(api_key=KEY, base_url=self.url, max_retries=0, **kwargs)
        self.clients.append(client)
        return client

    def openai(self, **kwargs: Any) -> openai.OpenAI:
        client = openai.OpenAI(api_key=KEY, base_url=self.url + "/v1", max_retries=0, **kwargs)
        self.clients.append(client)
        return client

    def read_back(self, ref: str) -> str:
        """The artifact's whole text through the read tools' reads, page by page."""
        out: list[str] = []
        offset = 0
        while True:
            page = self.hold.read(ref, offset=offset, length=512 * 1024, budget=1024 * 1024)
            assert page.outcome == "resolved", page.outcome
            assert page.content is not None
            assert page.end is not None
            assert page.size is not None
            out.append(page.content)
            if page.end >= page.size:
                return "".join(out)
            offset = page.end


@contextmanager
def rig(config: GatewayConfig | None = None, upstream: str | None = None) -> Iterator[Rig]:
    fake = FakeProvider()
    events = cargohold.ListSink()
    with (
        cargohold.open("memory://", tenant="t", user="u", session="gw", sinks=[events]) as hold,
        serve(fake.app()) as fake_url,
    ):
        config = config or GatewayConfig()
        config = GatewayConfig(
            upstream=upstream or fake_url,
            compact=config.compact,
            timeout=config.timeout,
            max_request_bytes=config.max_request_bytes,
            max_response_bytes=config.max_response_bytes,
        )
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


def anthropic_history(result: str, tool: str = "bash") -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "look at the log"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": tool, "input": {"c": "x"}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": result}],
        },
    ]


def chat_history(result: str) -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    return [
        {"role": "user", "content": "look at the log"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": result},
    ]


def responses_input(result: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "look at the log"},
        {"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": result},
    ]


def forwarded_result_anthropic(rig: Rig) -> str:
    content: str = rig.fake.received[-1].json()["messages"][2]["content"][0]["content"]
    return content


def offloads(rig: Rig) -> list[cargohold.DecisionEvent]:
    return [e for e in rig.events.events if e.operation == "offload"]


def assert_stub_reads_back(rig: Rig, stub: str, body: str) -> None:
    assert stub.startswith(MARKER)
    assert len(stub) < len(body) // 4
    refs = REF.findall(stub)
    assert refs
    assert rig.read_back(refs[0]) == body


# -- the SDKs: heavy results arrive as stubs that read back byte for byte -----------------------


def test_anthropic_sdk_heavy_tool_result_reaches_provider_as_stub_that_reads_back(gw: Rig) -> None:
    body = heavy_log()

    message = gw.anthropic().messages.create(
        model="claude-fake", max_tokens=64, messages=anthropic_history(body)
    )

    assert message.content[0].type == "tool_use"
    assert_stub_reads_back(gw, forwarded_result_anthropic(gw), body)


def test_anthropic_sdk_stream_relays_every_event_and_forwards_the_stub(gw: Rig) -> None:
    body = heavy_log()

    with gw.anthropic().messages.stream(
        model="claude-fake", max_tokens=64, messages=anthropic_history(body)
    ) as stream:
        final = stream.get_final_message()

    assert final.stop_reason == "tool_use"
    assert final.content[0].type == "tool_use"
    assert final.content[0].input == {"cmd": "cat big.log"}
    assert_stub_reads_back(gw, forwarded_result_anthropic(gw), body)


def test_anthropic_async_sdk_through_the_gateway_forwards_the_stub(gw: Rig) -> None:
    body = heavy_log()

    async def run() -> str:
        client = anthropic.AsyncAnthropic(api_key=KEY, base_url=gw.url, max_retries=0)
        async with client:
            stream = await client.messages.create(
                model="claude-fake", max_tokens=64, messages=anthropic_history(body), stream=True
            )
            kinds = [event.type async for event in stream]
        return kinds[-1]

    assert asyncio.run(run()) == "message_stop"
    assert_stub_reads_back(gw, forwarded_result_anthropic(gw), body)


def test_anthropic_count_tokens_counts_the_rewritten_request(gw: Rig) -> None:
    body = heavy_log()

    counted = gw.anthropic().messages.count_tokens(
        model="claude-fake", messages=anthropic_history(body)
    )

    assert gw.fake.received[-1].path == "/v1/messages/count_tokens"
    assert counted.input_tokens < len(body) // 8
    assert_stub_reads_back(gw, forwarded_result_anthropic(gw), body)


def test_openai_chat_sdk_heavy_tool_result_reaches_provider_as_stub(gw: Rig) -> None:
    body = heavy_log()

    completion = gw.openai().chat.completions.create(model="gpt-fake", messages=chat_history(body))

    assert completion.choices[0].message.tool_calls is not None
    stub = gw.fake.received[-1].json()["messages"][2]["content"]
    assert_stub_reads_back(gw, stub, body)


def test_openai_async_chat_stream_relays_chunks_and_forwards_the_stub(gw: Rig) -> None:
    body = heavy_log()

    async def run() -> list[str | None]:
        client = openai.AsyncOpenAI(api_key=KEY, base_url=gw.url + "/v1", max_retries=0)
        async with client:
            stream = await client.chat.completions.create(
                model="gpt-fake", messages=chat_history(body), stream=True
            )
            return [chunk.choices[0].finish_reason async for chunk in stream]

    reasons = asyncio.run(run())
    assert len(reasons) > 2  # every chunk relayed: the role, the call's name, its arguments
    assert reasons[-1] == "tool_calls"
    assert set(reasons[:-1]) == {None}
    stub = gw.fake.received[-1].json()["messages"][2]["content"]
    assert_stub_reads_back(gw, stub, body)


def test_openai_responses_sdk_sync_and_stream_forward_the_stub(gw: Rig) -> None:
    body = heavy_log()
    client = gw.openai()

    response = client.responses.create(model="gpt-fake", input=responses_input(body))
    events = [
        e.type
        for e in client.responses.create(model="gpt-fake", input=responses_input(body), stream=True)
    ]

    assert response.output[0].type == "function_call"
    assert events == [
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    first, second = (r.json()["input"][2]["output"] for r in gw.fake.received[-2:])
    assert first == second
    assert_stub_reads_back(gw, first, body)


def test_heavy_tool_call_input_is_replaced_by_an_object_holding_its_stub(gw: Rig) -> None:
    big = heavy_log()
    history = anthropic_history("ok")
    history[1]["content"][0]["input"] = {"script": big}

    gw.anthropic().messages.create(model="claude-fake", max_tokens=64, messages=history)

    forwarded = gw.fake.received[-1].json()["messages"][1]["content"][0]["input"]
    assert list(forwarded) == ["cargohold"]
    ref = REF.findall(forwarded["cargohold"])[0]
    assert json.loads(gw.read_back(ref)) == {"script": big}


# -- passthrough ----------------------------------------------------------------------------


def test_a_request_without_heavy_parts_is_forwarded_byte_for_byte(gw: Rig) -> None:
    raw = (
        b'{"model": "claude-fake",  "max_tokens": 9, "zz_unknown": {"b": 1.50, "a": [1e3]},\n'
        b' "messages": [{"role": "user", "content": "hi"}]}'
    )
    headers = {
        "x-api-key": KEY,
        "anthropic-beta": "some-beta-2026",
        "anthropic-version": "2023-06-01",
        SESSION_HEADER: "conv-1",
    }

    answer = httpx.post(gw.url + "/v1/messages?beta=true", content=raw, headers=headers)

    assert answer.status_code == 200
    got = gw.fake.received[-1]
    assert got.body == raw
    assert got.path == "/v1/messages"
    assert got.headers["x-api-key"] == KEY
    assert got.headers["anthropic-beta"] == "some-beta-2026"
    assert SESSION_HEADER not in got.headers


def test_other_endpoints_pass_through_byte_for_byte(gw: Rig) -> None:
    answer = httpx.get(gw.url + "/v1/models", headers={"authorization": f"Bearer {KEY}"})

    assert answer.status_code == 200
    assert answer.content == MODELS_BODY
    assert answer.headers["x-fake"] == "1"
    assert gw.fake.received[-1].headers["authorization"] == f"Bearer {KEY}"


def test_a_small_tool_result_is_forwarded_unchanged(gw: Rig) -> None:
    history = anthropic_history("exit 0\n" * 100)

    gw.anthropic().messages.create(model="claude-fake", max_tokens=64, messages=history)

    assert gw.fake.received[-1].json()["messages"] == history
    assert offloads(gw) == []


# -- the rewrite is stable and cheap across turns --------------------------------------------


def test_a_result_seen_on_an_earlier_turn_is_not_offloaded_again(gw: Rig) -> None:
    client = gw.anthropic()
    history = anthropic_history(heavy_log())

    client.messages.create(model="claude-fake", max_tokens=64, messages=history)
    decisions = len(offloads(gw))
    client.messages.create(model="claude-fake", max_tokens=64, messages=history)

    assert decisions == 1
    assert len(offloads(gw)) == decisions
    first, second = (r.body for r in gw.fake.received[-2:])
    assert first == second


def test_fifty_turn_replay_each_forwarded_request_extends_the_previous_byte_for_byte(
    gw: Rig,
) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    bodies: list[bytes] = []
    for turn in range(50):
        call = {"type": "tool_use", "id": f"toolu_{turn}", "name": "bash", "input": {"n": turn}}
        messages.append({"role": "assistant", "content": [call]})
        result = heavy_log(700 + turn, tag=f"-t{turn}") if turn % 3 == 0 else f"ok {turn}"
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

    for before, after in itertools.pairwise(bodies):
        assert before.endswith(b"]}")
        assert after.startswith(before[:-2] + b",")
    assert all(len(body) < 200_000 for body in bodies)


def test_two_sessions_get_artifacts_in_their_own_scope(gw: Rig) -> None:
    body = heavy_log()
    request = {"model": "claude-fake", "max_tokens": 64, "messages": anthropic_history(body)}

    httpx.post(gw.url + "/v1/messages", json=request, headers={SESSION_HEADER: "conv-a"})
    ref = REF.findall(forwarded_result_anthropic(gw))[0]

    assert gw.hold.for_session("conv-a").read(ref, length=100).outcome == "resolved"
    assert gw.hold.for_session("conv-b").read(ref, length=100).outcome == "unauthorized"
    assert gw.hold.read(ref, length=100).outcome == "unauthorized"


# -- refusals and faults ---------------------------------------------------------------------


def test_a_leak_the_gateway_cannot_fix_is_refused_in_the_anthropic_shape(gw: Rig) -> None:
    messages = [{"role": "user", "content": heavy_log()}]

    with pytest.raises(anthropic.BadRequestError) as caught:
        gw.anthropic().messages.create(model="claude-fake", max_tokens=64, messages=messages)

    assert caught.value.status_code == 400
    assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    assert gw.fake.received == []


def test_a_leak_is_refused_in_the_openai_shape_with_its_code(gw: Rig) -> None:
    messages = [{"role": "user", "content": heavy_log()}]

    with pytest.raises(openai.BadRequestError) as caught:
        gw.openai().chat.completions.create(model="gpt-fake", messages=messages)

    assert caught.value.code == "context_leak"
    assert gw.fake.received == []


def test_a_credential_in_a_heavy_result_is_never_forwarded_raw(gw: Rig) -> None:
    secret = "AKIA" + "ABCDEFGHIJKLMNOP"
    body = heavy_log() + f"aws_access_key_id = {secret}\n" + heavy_log(200)

    gw.anthropic().messages.create(
        model="claude-fake", max_tokens=64, messages=anthropic_history(body)
    )

    forwarded = gw.fake.received[-1].body
    assert secret.encode() not in forwarded
    stub = forwarded_result_anthropic(gw)
    assert secret not in gw.read_back(REF.findall(stub)[0])


GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def test_a_credential_in_a_small_result_is_forwarded_redacted_the_same_on_every_turn(
    gw: Rig,
) -> None:
    client = gw.anthropic()
    history = anthropic_history(f"cloned\ntoken: {GITHUB_TOKEN}\ndone\n")

    client.messages.create(model="claude-fake", max_tokens=64, messages=history)
    client.messages.create(model="claude-fake", max_tokens=64, messages=history)

    first, second = (r.body for r in gw.fake.received[-2:])
    assert GITHUB_TOKEN.encode() not in first
    assert first == second
    forwarded = forwarded_result_anthropic(gw)
    assert "[REDACTED:github_token]" in forwarded
    assert forwarded.startswith("cloned\n")
    assert forwarded.endswith(
        "done\n" + MARKER + " credentials redacted from this result: github_token (line 2)"
    )
    assert offloads(gw) == []


def test_a_credential_in_a_small_tool_input_is_forwarded_redacted(gw: Rig) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    call["function"]["arguments"] = json.dumps({"env": f"GITHUB_TOKEN={GITHUB_TOKEN}"})
    history = chat_history("ok")
    history[1]["tool_calls"] = [call]

    gw.openai().chat.completions.create(model="gpt-fake", messages=history)

    forwarded = gw.fake.received[-1].body
    assert GITHUB_TOKEN.encode() not in forwarded
    assert b"[REDACTED:github_token]" in forwarded


def test_a_small_result_of_a_tool_whose_policy_is_reject_is_withheld(tmp_path: Path) -> None:
    config_file = tmp_path / "cargohold.toml"
    config_file.write_text('secrets_policy = { bash = "reject" }\n')
    fake = FakeProvider()
    with (
        cargohold.open(
            "memory://", tenant="t", user="u", session="gw", config_file=config_file
        ) as hold,
        serve(fake.app()) as fake_url,
        serve(build_app(hold, GatewayConfig(upstream=fake_url))) as url,
    ):
        client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
        history = anthropic_history(f"token: {GITHUB_TOKEN}\n")
        client.messages.create(model="claude-fake", max_tokens=64, messages=history)
        client.close()

    assert GITHUB_TOKEN.encode() not in fake.received[-1].body
    forwarded = fake.received[-1].json()["messages"][2]["content"][0]["content"]
    assert forwarded.startswith(MARKER + " withheld (rejected: credential_detected)")


def test_the_gateways_totals_count_what_each_request_kept_out_reused_turns_included() -> None:
    fake = FakeProvider()
    events = cargohold.ListSink()
    body = heavy_log()
    with (
        cargohold.open("memory://", tenant="t", user="u", session="gw", sinks=[events]) as hold,
        serve(fake.app()) as fake_url,
    ):
        app = build_app(hold, GatewayConfig(upstream=fake_url))
        with serve(app) as url:
            client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
            for _ in range(3):
                client.messages.create(
                    model="claude-fake", max_tokens=64, messages=anthropic_history(body)
                )
            client.messages.create(
                model="claude-fake", max_tokens=64, messages=anthropic_history("ok")
            )
            client.close()
        totals = app.state.rewriter.totals

    [offload] = [e for e in events.events if e.operation == "offload"]
    assert offload.estimated_tokens > 0
    assert (totals.requests, totals.changed) == (4, 3)
    assert (totals.counts.offloaded, totals.counts.reused) == (1, 2)
    assert totals.counts.bytes_kept_out == 3 * len(body.encode())
    assert totals.counts.tokens_kept_out == 3 * offload.estimated_tokens


def test_each_request_reports_one_request_event_and_the_run_summary_sums_them() -> None:
    fake = FakeProvider()
    summary = cargohold.RunSummary()
    events = cargohold.ListSink()
    body = heavy_log()
    with (
        cargohold.open(
            "memory://", tenant="t", user="u", session="gw", sinks=[events, summary]
        ) as hold,
        serve(fake.app()) as fake_url,
        serve(build_app(hold, GatewayConfig(upstream=fake_url))) as url,
    ):
        client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
        for _ in range(2):
            client.messages.create(
                model="claude-fake", max_tokens=64, messages=anthropic_history(body)
            )
        with pytest.raises(anthropic.BadRequestError):
            client.messages.create(
                model="claude-fake", max_tokens=64, messages=[{"role": "user", "content": body}]
            )
        client.close()

    requests = [e for e in events.events if e.operation == "request"]
    assert [(e.outcome, e.reason) for e in requests] == [
        ("forwarded", "rewritten"),
        ("forwarded", "rewritten"),
        ("refused", "raw_heavy_content"),
    ]
    first, second, refused = requests
    assert (first.offloaded, first.reused, second.offloaded, second.reused) == (1, 0, 0, 1)
    assert first.kept_out_bytes == second.kept_out_bytes == len(body.encode())
    assert second.estimated_tokens == first.estimated_tokens > 0
    assert second.context_bytes == len(fake.received[1].body)  # the bytes forwarded
    assert refused.context_bytes == 0
    assert summary.as_dict()["requests"] == 3
    assert summary.as_dict()["request_bytes_kept_out"] == 2 * len(body.encode())
    assert body[:200] not in repr(requests)


def test_a_heavy_reads_structured_answer_is_forwarded_as_its_recovered_segment(gw: Rig) -> None:
    # Claude Code sends an MCP result's structured content, as compact JSON, as the result.
    from cargohold.mcp._readtools import call_read_tool

    body = heavy_log()
    ref = gw.hold.store.put(body.encode(), media_type="text/plain").ref
    read = {"ref": str(ref), "offset": 0, "length": 60_000, "budget": 100_000}
    answer = asyncio.run(call_read_tool(gw.hold, "artifact_read", read))
    assert answer.structured_content is not None
    sent = json.dumps(answer.structured_content, separators=(",", ":"))
    assert len(sent) > 32 * 1024
    decisions = len(offloads(gw))

    gw.anthropic().messages.create(
        model="claude-fake",
        max_tokens=64,
        messages=anthropic_history(sent, tool="mcp__cargohold__artifact_read"),
    )

    assert forwarded_result_anthropic(gw) == answer.content[0].text  # type: ignore[union-attr]
    assert len(offloads(gw)) == decisions


@pytest.mark.parametrize("tool", ["bash", "mcp__cargohold__artifact_read"])
def test_a_result_shaped_like_a_read_answer_that_does_not_verify_is_offloaded_every_turn(
    gw: Rig, tool: str
) -> None:
    from cargohold.mcp._readtools import call_read_tool

    ref = gw.hold.store.put(heavy_log().encode(), media_type="text/plain").ref
    read = {"ref": str(ref), "offset": 0, "length": 60_000, "budget": 100_000}
    answer = asyncio.run(call_read_tool(gw.hold, "artifact_read", read))
    assert answer.structured_content is not None
    forged = dict(answer.structured_content)
    forged["text"] = forged["text"].replace("worker 7 done", "worker 7 DONE", 1)
    assert forged["text"] != answer.structured_content["text"]
    sent = json.dumps(forged, separators=(",", ":"))
    client = gw.anthropic()

    for _ in range(2):
        client.messages.create(
            model="claude-fake", max_tokens=64, messages=anthropic_history(sent, tool=tool)
        )
        assert_stub_reads_back(gw, forwarded_result_anthropic(gw), sent)


def test_another_tools_result_shaped_like_a_genuine_read_answer_is_offloaded(gw: Rig) -> None:
    from cargohold.mcp._readtools import call_read_tool

    ref = gw.hold.store.put(heavy_log().encode(), media_type="text/plain").ref
    read = {"ref": str(ref), "offset": 0, "length": 60_000, "budget": 100_000}
    answer = asyncio.run(call_read_tool(gw.hold, "artifact_read", read))
    sent = json.dumps(answer.structured_content, separators=(",", ":"))

    gw.anthropic().messages.create(
        model="claude-fake", max_tokens=64, messages=anthropic_history(sent, tool="bash")
    )

    assert_stub_reads_back(gw, forwarded_result_anthropic(gw), sent)


def test_a_heavy_recovered_segment_is_forwarded_as_it_is_and_counts_nothing_kept_out() -> None:
    from cargohold.mcp._readtools import call_read_tool

    fake = FakeProvider()
    with (
        cargohold.open("memory://", tenant="t", user="u", session="gw") as hold,
        serve(fake.app()) as fake_url,
    ):
        ref = hold.store.put(heavy_log().encode(), media_type="text/plain").ref
        read = {"ref": str(ref), "offset": 0, "length": 60_000, "budget": 100_000}
        segment = asyncio.run(call_read_tool(hold, "artifact_read", read)).content[0].text  # type: ignore[union-attr]
        app = build_app(hold, GatewayConfig(upstream=fake_url))
        with serve(app) as url:
            client = anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)
            client.messages.create(
                model="claude-fake", max_tokens=64, messages=anthropic_history(segment)
            )
            client.close()
        totals = app.state.rewriter.totals

    assert fake.received[-1].json()["messages"][2]["content"][0]["content"] == segment
    assert (totals.changed, totals.counts.offloaded) == (0, 0)
    assert (totals.counts.bytes_kept_out, totals.counts.tokens_kept_out) == (0, 0)


def test_a_malformed_request_gets_a_provider_shaped_error_and_the_next_one_is_served(
    gw: Rig,
) -> None:
    bad = httpx.post(gw.url + "/v1/chat/completions", content=b"{not json")
    good = gw.openai().chat.completions.create(model="gpt-fake", messages=chat_history("ok"))

    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "malformed_request"
    assert good.choices[0].finish_reason == "tool_calls"
    assert len(gw.fake.received) == 1


def test_an_upstream_500_reaches_the_client_unchanged_and_the_next_request_is_served(
    gw: Rig,
) -> None:
    client = gw.anthropic()
    gw.fake.fail_with = 500
    with pytest.raises(anthropic.InternalServerError) as caught:
        client.messages.create(model="claude-fake", max_tokens=64, messages=anthropic_history("x"))
    gw.fake.fail_with = None

    message = client.messages.create(
        model="claude-fake", max_tokens=64, messages=anthropic_history("x")
    )

    assert caught.value.status_code == 500
    assert message.stop_reason == "tool_use"


def test_an_upstream_that_is_down_gives_a_502_in_the_provider_shape() -> None:
    with rig(upstream=free_port_url()) as down:
        with pytest.raises(anthropic.APIStatusError) as caught:
            down.anthropic().messages.create(
                model="claude-fake", max_tokens=64, messages=anthropic_history("x")
            )
        with pytest.raises(openai.APIStatusError) as again:
            down.openai().chat.completions.create(model="gpt-fake", messages=chat_history("x"))

    assert caught.value.status_code == 502
    assert caught.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    assert again.value.code == "upstream_unavailable"


def test_an_upstream_answering_garbage_gives_a_502_and_the_gateway_keeps_serving() -> None:
    with raw_server(b"this is not HTTP at all\r\n\r\n") as garbage, rig(upstream=garbage) as gw:
        client = gw.openai()
        for _ in range(2):
            with pytest.raises(openai.APIStatusError) as caught:
                client.chat.completions.create(model="gpt-fake", messages=chat_history("x"))
            assert caught.value.status_code == 502
            assert caught.value.code == "upstream_unavailable"


def test_a_hanging_upstream_gives_a_504_within_the_timeout() -> None:
    with (
        raw_server(None) as hanging,
        rig(GatewayConfig(timeout=0.5), upstream=hanging) as gw,
        pytest.raises(anthropic.APIStatusError) as caught,
    ):
        gw.anthropic(timeout=30).messages.create(
            model="claude-fake", max_tokens=64, messages=anthropic_history("x")
        )

    assert caught.value.status_code == 504


def test_a_client_disconnecting_mid_stream_leaves_the_gateway_serving(gw: Rig) -> None:
    gw.fake.stream_chunks = 2000
    request = {"model": "gpt-fake", "messages": chat_history("x"), "stream": True}
    with httpx.stream("POST", gw.url + "/v1/chat/completions", json=request) as answer:
        first = next(answer.iter_raw())
    gw.fake.stream_chunks = 1

    completion = gw.openai().chat.completions.create(model="gpt-fake", messages=chat_history("x"))

    assert first
    assert completion.choices[0].finish_reason == "tool_calls"


def test_a_request_over_the_size_limit_is_refused_with_413_before_it_is_forwarded() -> None:
    with rig(GatewayConfig(max_request_bytes=1000)) as gw:
        answer = httpx.post(
            gw.url + "/v1/messages",
            json={"messages": anthropic_history("x" * 2000)},
            headers={"anthropic-version": "2023-06-01"},
        )
        received = list(gw.fake.received)

    assert answer.status_code == 413
    assert answer.json()["error"]["type"] == "request_too_large"
    assert received == []


def test_an_invalid_session_header_is_refused_and_not_forwarded(gw: Rig) -> None:
    answer = httpx.post(
        gw.url + "/v1/messages",
        json={"messages": anthropic_history("x")},
        headers={SESSION_HEADER: ""},
    )

    assert answer.status_code == 400
    assert answer.json()["error"]["message"].count("invalid_session") == 1
    assert gw.fake.received == []


def test_a_restarted_gateway_on_the_same_store_forwards_the_same_bytes() -> None:
    fake = FakeProvider()
    request = {"model": "claude-fake", "max_tokens": 8, "messages": anthropic_history(heavy_log())}
    with (
        cargohold.open("memory://", tenant="t", user="u", session="gw") as hold,
        serve(fake.app()) as upstream,
    ):
        for _ in range(2):  # each a new gateway: its map of stubs starts empty
            with serve(build_app(hold, GatewayConfig(upstream=upstream))) as url:
                assert httpx.post(url + "/v1/messages", json=request).status_code == 200

    first, second = (r.body for r in fake.received)
    assert first == second
    assert REF.search(first.decode())


# -- exact JSON and raw headers -----------------------------------------------------------------


def heavy_anthropic_body(extra: str) -> bytes:
    """A Messages request with a heavy result, and ``extra`` (raw JSON text) beside it."""
    request = {"model": "claude-fake", "max_tokens": 8, "messages": anthropic_history(heavy_log())}
    text = json.dumps(request)
    return (text[:-1] + ', "metadata": ' + extra + "}").encode()


def post_messages(rig: Rig, body: bytes, **headers: str) -> httpx.Response:
    return httpx.post(
        rig.url + "/v1/messages",
        content=body,
        headers={"anthropic-version": "2023-06-01", "content-type": "application/json", **headers},
    )


def test_a_rewritten_request_forwards_an_integer_beyond_64_bits_digit_for_digit(gw: Rig) -> None:
    answer = post_messages(gw, heavy_anthropic_body('{"account": 12345678901234567890123}'))

    forwarded = gw.fake.received[-1].body
    assert answer.status_code == 200
    assert b'"account":12345678901234567890123' in forwarded
    assert REF.search(forwarded.decode())


def test_nan_beside_a_heavy_result_is_refused_in_the_provider_shape_and_not_forwarded(
    gw: Rig,
) -> None:
    answers = [
        post_messages(gw, heavy_anthropic_body('{"score": ' + value + "}"))
        for value in ("NaN", "-Infinity", "1e400")
    ]

    assert [a.status_code for a in answers] == [400, 400, 400]
    assert {a.json()["error"]["type"] for a in answers} == {"invalid_request_error"}
    assert all(a.json()["error"]["message"].count("(malformed_request)") == 1 for a in answers)
    assert gw.fake.received == []


def test_a_lone_surrogate_escape_beside_a_heavy_result_is_forwarded_as_the_escape_sent(
    gw: Rig,
) -> None:
    body = heavy_anthropic_body('{"note": "a\\ud800b"}')

    answers = [post_messages(gw, body) for _ in range(2)]

    forwarded = gw.fake.received[-1].body
    assert [a.status_code for a in answers] == [200, 200]
    assert b'"note":"a\\ud800b"' in forwarded
    assert REF.search(forwarded.decode())
    assert gw.fake.received[0].body == forwarded


def test_a_non_ascii_request_header_is_forwarded_as_its_bytes(gw: Rig) -> None:
    sent = "café-app".encode()
    answer = httpx.post(
        gw.url + "/v1/messages",
        content=heavy_anthropic_body("{}"),
        headers=[(b"anthropic-version", b"2023-06-01"), (b"user-agent", sent)],
    )

    assert answer.status_code == 200
    assert gw.fake.received[-1].headers["user-agent"].encode("latin-1") == sent


def test_a_non_latin1_upstream_response_header_is_relayed_as_its_bytes() -> None:
    value = "日本".encode()
    reply = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-name: " + value + b"\r\n"
        b"content-length: 2\r\nconnection: close\r\n\r\n{}"
    )
    with raw_server(reply) as upstream, rig(upstream=upstream) as gw:
        answers = [httpx.get(gw.url + "/v1/models") for _ in range(2)]

    assert [a.status_code for a in answers] == [200, 200]
    assert [a.headers.raw.count((b"x-name", value)) for a in answers] == [1, 1]
    assert [a.content for a in answers] == [b"{}", b"{}"]
