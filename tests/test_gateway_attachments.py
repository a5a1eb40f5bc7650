"""The gateway's attachments by disposition: heavy base64 images and documents, in a message or
inside a tool result, through the official SDKs to the scripted fake provider
(tests/gateway_fixtures.py)."""

from __future__ import annotations

import asyncio
import base64
import copy
import itertools
import json
import random
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.gateway_fixtures import FakeProvider, serve

import cargohold
from cargohold.gateway import SESSION_HEADER, GatewayConfig, Rewriter, build_app
from cargohold.gateway._anthropic import ANTHROPIC
from cargohold.guard import ContextLeakError

REF = re.compile(r"artifact://sha256/[0-9a-f]{64}")
MARKER = "[cargohold]"
KEY = "sk-ant-test-not-a-real-key"


def png(size: int = 40_000, seed: int = 1) -> bytes:
    """A PNG-headed payload of ``size`` bytes: its base64 is over the 32 KiB heavy threshold
    from about 24,600 bytes on."""
    return b"\x89PNG\r\n\x1a\n" + random.Random(seed).randbytes(size - 8)


def pdf(size: int = 40_000, seed: int = 2) -> bytes:
    return b"%PDF-1.7\n" + random.Random(seed).randbytes(size - 9)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def data_url(data: bytes, media_type: str) -> str:
    return f"data:{media_type};base64,{b64(data)}"


@dataclass
class Rig:
    fake: FakeProvider
    hold: cargohold.Hold
    events: cargohold.ListSink
    url: str
    app: Any

    def post(self, path: str, request: dict[str, Any]) -> tuple[bytes, httpx.Response]:
        """Send ``request`` as compact JSON; the bytes sent and the gateway's answer."""
        sent = json.dumps(request, separators=(",", ":")).encode()
        answer = httpx.post(
            self.url + path,
            content=sent,
            headers={"x-api-key": KEY, "content-type": "application/json"},
        )
        return sent, answer

    def offloads(self) -> list[cargohold.DecisionEvent]:
        return [e for e in self.events.events if e.operation == "offload"]

    def read_back(self, ref: str) -> bytes:
        """The artifact's exact bytes, through the reads (base64 pages for binary)."""
        out: list[bytes] = []
        offset = 0
        while True:
            page = self.hold.read(ref, offset=offset, length=256 * 1024, budget=1024 * 1024)
            assert page.outcome == "resolved", page.outcome
            assert page.content is not None
            assert page.end is not None
            assert page.size is not None
            assert page.encoding == "base64"
            out.append(base64.b64decode(page.content))
            if page.end >= page.size:
                return b"".join(out)
            offset = page.end


@contextmanager
def rig(config: str | None = None, tmp_path: Path | None = None) -> Iterator[Rig]:
    """The gateway in front of the fake provider, on a memory store; ``config`` is the text
    of a cargohold.toml (its dispositions)."""
    config_file = None
    if config is not None:
        assert tmp_path is not None
        config_file = tmp_path / "cargohold.toml"
        config_file.write_text(config)
    fake = FakeProvider()
    events = cargohold.ListSink()
    with (
        cargohold.open(
            "memory://",
            tenant="t",
            user="u",
            session="gw",
            sinks=[events],
            config_file=config_file,
        ) as hold,
        serve(fake.app()) as fake_url,
    ):
        app = build_app(hold, GatewayConfig(upstream=fake_url))
        with serve(app) as url:
            yield Rig(fake, hold, events, url, app)


@pytest.fixture
def gw() -> Iterator[Rig]:
    with rig() as value:
        yield value


def anthropic_image(data: bytes, media_type: str = "image/png") -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": media_type, "data": b64(data)},
    }


def screenshot_message(data: bytes) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "text", "text": "what is wrong here?"}, anthropic_image(data)],
    }


def tool_result_history(image: dict[str, Any], tool: str = "screenshot") -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "take a screenshot"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": tool, "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "the screen:"}, image],
                }
            ],
        },
    ]


def read_tool_back(rig: Rig, ref: str, size: int) -> bytes:
    """The artifact's bytes as the model gets them: ``artifact_read``'s recovered segment,
    whose text between its marker lines is the base64 of the range."""
    from cargohold.mcp._readtools import call_read_tool

    read = {"ref": ref, "offset": 0, "length": size, "budget": 1024 * 1024}
    answer = asyncio.run(call_read_tool(rig.hold, "artifact_read", read))
    assert answer.structured_content is not None
    assert answer.structured_content["encoding"] == "base64"
    segment = answer.structured_content["text"]
    return base64.b64decode(segment.split("\n", 1)[1].rsplit("\n", 1)[0])


def assert_attachment_stub(rig: Rig, text: str, data: bytes, media_type: str) -> str:
    """``text`` is a stub of ``data`` as an attachment of ``media_type``; returns its ref."""
    assert text.startswith(MARKER)
    assert media_type in text
    assert f"{len(data):,} bytes" in text
    [ref] = set(REF.findall(text))
    assert rig.read_back(ref) == data
    info = rig.hold.info(ref)
    assert info.record is not None
    assert info.record.media_type == media_type
    return ref


# -- ref (the default): stored as their own bytes, a stub in their place -------------------------


def test_a_heavy_pasted_screenshot_is_forwarded_as_a_stub_that_reads_back_byte_exact(
    gw: Rig,
) -> None:
    data = png()
    client = anthropic.Anthropic(api_key=KEY, base_url=gw.url, max_retries=0)

    client.messages.create(model="claude-fake", max_tokens=64, messages=[screenshot_message(data)])
    client.close()

    content = gw.fake.received[-1].json()["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": "what is wrong here?"}
    assert content[1]["type"] == "text"
    ref = assert_attachment_stub(gw, content[1]["text"], data, "image/png")
    [event] = gw.offloads()
    assert (event.outcome, str(event.ref)) == ("offloaded", ref)
    assert b64(data).encode() not in gw.fake.received[-1].body
    assert read_tool_back(gw, ref, len(data)) == data


def test_a_heavy_image_inside_a_tool_result_is_stored_as_the_image_not_as_json(gw: Rig) -> None:
    data = png()
    client = anthropic.Anthropic(api_key=KEY, base_url=gw.url, max_retries=0)

    client.messages.create(
        model="claude-fake", max_tokens=64, messages=tool_result_history(anthropic_image(data))
    )
    client.close()

    result = gw.fake.received[-1].json()["messages"][2]["content"][0]
    assert result["type"] == "tool_result"
    assert result["content"][0] == {"type": "text", "text": "the screen:"}
    assert result["content"][1]["type"] == "text"
    assert_attachment_stub(gw, result["content"][1]["text"], data, "image/png")
    [event] = gw.offloads()
    assert event.tool == "screenshot"


def test_a_heavy_document_keeps_its_cache_breakpoint_on_the_stub(gw: Rig) -> None:
    data = pdf()
    document = {**anthropic_image(data, "application/pdf"), "type": "document"}
    document["cache_control"] = {"type": "ephemeral"}
    request = {
        "model": "claude-fake",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [document]}],
    }

    _, answer = gw.post("/v1/messages", request)

    assert answer.status_code == 200
    [block] = gw.fake.received[-1].json()["messages"][0]["content"]
    assert block["type"] == "text"
    assert block["cache_control"] == {"type": "ephemeral"}
    assert_attachment_stub(gw, block["text"], data, "application/pdf")


def test_openai_chat_image_and_file_parts_are_forwarded_as_stubs(gw: Rig) -> None:
    image, document = png(), pdf()
    content = [
        {"type": "text", "text": "compare these"},
        {"type": "image_url", "image_url": {"url": data_url(image, "image/png")}},
        {
            "type": "file",
            "file": {"filename": "spec.pdf", "file_data": data_url(document, "application/pdf")},
        },
    ]
    client = openai.OpenAI(api_key=KEY, base_url=gw.url + "/v1", max_retries=0)

    client.chat.completions.create(
        model="gpt-fake",
        messages=[{"role": "user", "content": content}],  # type: ignore[list-item,misc]
    )
    client.close()

    forwarded = gw.fake.received[-1].json()["messages"][0]["content"]
    assert forwarded[0] == content[0]
    assert [part["type"] for part in forwarded] == ["text", "text", "text"]
    assert_attachment_stub(gw, forwarded[1]["text"], image, "image/png")
    assert_attachment_stub(gw, forwarded[2]["text"], document, "application/pdf")


def test_openai_chat_input_audio_is_forwarded_as_a_stub_of_its_audio_type(gw: Rig) -> None:
    sound = b"RIFF" + random.Random(5).randbytes(40_000)
    part = {"type": "input_audio", "input_audio": {"data": b64(sound), "format": "wav"}}
    request = {"model": "gpt-fake", "messages": [{"role": "user", "content": [part]}]}

    _, answer = gw.post("/v1/chat/completions", request)

    assert answer.status_code == 200
    [forwarded] = gw.fake.received[-1].json()["messages"][0]["content"]
    assert forwarded["type"] == "text"
    assert_attachment_stub(gw, forwarded["text"], sound, "audio/wav")


def test_openai_responses_image_and_file_parts_are_forwarded_as_stubs(gw: Rig) -> None:
    image, document = png(), pdf()
    items: list[Any] = [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {"type": "input_image", "image_url": data_url(image, "image/png")},
            ],
        },
        {"type": "function_call", "call_id": "call_1", "name": "fetch_pdf", "arguments": "{}"},
        {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [
                {
                    "type": "input_file",
                    "filename": "a.pdf",
                    "file_data": data_url(document, "application/pdf"),
                }
            ],
        },
    ]
    client = openai.OpenAI(api_key=KEY, base_url=gw.url + "/v1", max_retries=0)

    client.responses.create(model="gpt-fake", input=items)
    client.close()

    forwarded = gw.fake.received[-1].json()["input"]
    assert forwarded[0]["content"][0] == {"type": "input_text", "text": "look"}
    assert forwarded[0]["content"][1]["type"] == "input_text"
    assert_attachment_stub(gw, forwarded[0]["content"][1]["text"], image, "image/png")
    [part] = forwarded[2]["output"]
    assert part["type"] == "input_text"
    assert_attachment_stub(gw, part["text"], document, "application/pdf")
    assert sorted(str(e.tool) for e in gw.offloads()) == ["None", "fetch_pdf"]


# -- what passes untouched -----------------------------------------------------------------------


def test_a_small_image_passes_byte_for_byte(gw: Rig) -> None:
    request = {
        "model": "claude-fake",
        "max_tokens": 64,
        "messages": [
            screenshot_message(png(4_000)),
            *tool_result_history(anthropic_image(png(3_000, 7))),
        ],
    }

    sent, answer = gw.post("/v1/messages", request)

    assert answer.status_code == 200
    assert gw.fake.received[-1].body == sent
    assert gw.offloads() == []


def test_an_image_by_url_passes_byte_for_byte(gw: Rig) -> None:
    parts = [
        {"type": "image_url", "image_url": {"url": "https://example.com/shot.png"}},
        {"type": "text", "text": "and this one"},
    ]
    request = {"model": "gpt-fake", "messages": [{"role": "user", "content": parts}]}

    sent, answer = gw.post("/v1/chat/completions", request)

    assert answer.status_code == 200
    assert gw.fake.received[-1].body == sent
    assert gw.offloads() == []


def test_a_heavy_image_by_url_is_the_guards_never_stored(gw: Rig) -> None:
    url = "https://example.com/" + "a" * 40_000 + ".png"  # long, but a URL: no bytes inline
    request = {
        "model": "gpt-fake",
        "messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}
        ],
    }

    _, answer = gw.post("/v1/chat/completions", request)

    # A heavy URL is the guard's to judge, never stored as an attachment.
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "context_leak"
    assert gw.offloads() == []


def test_a_screenshot_is_stored_in_the_session_the_request_names(gw: Rig) -> None:
    request = {"model": "claude-fake", "max_tokens": 8, "messages": [screenshot_message(png())]}

    answer = httpx.post(gw.url + "/v1/messages", json=request, headers={SESSION_HEADER: "conv-a"})

    assert answer.status_code == 200
    block = gw.fake.received[-1].json()["messages"][0]["content"][1]
    [ref] = set(REF.findall(block["text"]))
    assert gw.hold.for_session("conv-a").read(ref, length=10).outcome == "resolved"
    assert gw.hold.for_session("conv-b").read(ref, length=10).outcome == "unauthorized"


# -- the other dispositions -----------------------------------------------------------------------


def test_inline_disposition_leaves_a_heavy_screenshot_for_the_guard_to_refuse(
    tmp_path: Path,
) -> None:
    with rig('attachment_disposition = "inline"\n', tmp_path) as gw:
        client = openai.OpenAI(api_key=KEY, base_url=gw.url + "/v1", max_retries=0)
        part = {"type": "image_url", "image_url": {"url": data_url(png(), "image/png")}}
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(
                model="gpt-fake",
                messages=[{"role": "user", "content": [part]}],  # type: ignore[list-item,misc]
            )
        client.close()

        assert caught.value.code == "context_leak"
        # The refusal names the setting that left it there: the message is the behaviour.
        assert "attachment_disposition" in caught.value.message
        assert "inline" in caught.value.message
        assert gw.fake.received == []
        assert gw.offloads() == []


def test_provider_native_disposition_leaves_a_heavy_image_for_the_guard(tmp_path: Path) -> None:
    with rig('attachment_disposition = "provider_native"\n', tmp_path) as gw:
        request = {
            "model": "claude-fake",
            "max_tokens": 64,
            "messages": [screenshot_message(png())],
        }

        _, answer = gw.post("/v1/messages", request)

        assert answer.status_code == 400
        message = answer.json()["error"]["message"]
        assert "context_leak" in message
        assert "provider_native" in message
        assert gw.fake.received == []


def test_a_small_image_under_inline_passes_byte_for_byte(tmp_path: Path) -> None:
    with rig('attachment_disposition = "inline"\n', tmp_path) as gw:
        request = {
            "model": "claude-fake",
            "max_tokens": 64,
            "messages": [screenshot_message(png(4_000))],
        }

        sent, answer = gw.post("/v1/messages", request)

        assert answer.status_code == 200
        assert gw.fake.received[-1].body == sent


def test_a_tools_own_disposition_wins_over_the_default(tmp_path: Path) -> None:
    config = 'attachment_disposition = "inline"\ntool_dispositions = { screenshot = "ref" }\n'
    data = png()
    with rig(config, tmp_path) as gw:
        request = {
            "model": "claude-fake",
            "max_tokens": 64,
            "messages": tool_result_history(anthropic_image(data)),
        }

        _, answer = gw.post("/v1/messages", request)

        assert answer.status_code == 200
        result = gw.fake.received[-1].json()["messages"][2]["content"][0]
        assert_attachment_stub(gw, result["content"][1]["text"], data, "image/png")


def test_a_tool_disposition_stores_the_bytes_and_forwards_the_routing_notice(
    tmp_path: Path,
) -> None:
    data = png()
    with rig('tool_dispositions = { screenshot = "tool:vision" }\n', tmp_path) as gw:
        request = {
            "model": "claude-fake",
            "max_tokens": 64,
            "messages": tool_result_history(anthropic_image(data)),
        }

        _, answer = gw.post("/v1/messages", request)

        assert answer.status_code == 200
        result = gw.fake.received[-1].json()["messages"][2]["content"][0]
        notice = result["content"][1]["text"]
        assert notice.startswith(MARKER + " attachment ")
        assert "tool vision" in notice
        [ref] = REF.findall(notice)
        assert gw.read_back(ref) == data


# -- stable across turns, and never crashing -----------------------------------------------------


def test_the_second_turn_extends_the_first_byte_for_byte_and_stores_nothing_again(
    gw: Rig,
) -> None:
    messages: list[dict[str, Any]] = [screenshot_message(png())]
    bodies: list[bytes] = []
    for turn in range(3):
        request = {"model": "claude-fake", "max_tokens": 64, "messages": messages}
        _, answer = gw.post("/v1/messages", request)
        assert answer.status_code == 200
        bodies.append(gw.fake.received[-1].body)
        messages = [
            *messages,
            {"role": "assistant", "content": [{"type": "text", "text": f"answer {turn}"}]},
            {"role": "user", "content": f"and now {turn}?"},
        ]

    for before, after in itertools.pairwise(bodies):
        assert before.endswith(b"]}")
        assert after.startswith(before[:-2] + b",")
    [event] = gw.offloads()
    totals = gw.app.state.rewriter.totals
    assert (totals.counts.offloaded, totals.counts.reused) == (1, 2)
    assert totals.counts.bytes_kept_out == 3 * len(b64(png()))
    assert totals.counts.tokens_kept_out == 3 * event.estimated_tokens


def test_a_restarted_gateway_on_the_same_store_forwards_the_same_attachment_stub() -> None:
    fake = FakeProvider()
    request = {"model": "claude-fake", "max_tokens": 8, "messages": [screenshot_message(png())]}
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


def test_an_attachment_at_the_threshold_is_stored_and_one_byte_of_base64_under_it_passes(
    gw: Rig,
) -> None:
    at = png(24_576)  # 32,768 characters of base64: the 32 KiB threshold exactly
    under = anthropic_image(png(24_576, seed=3))
    under["source"]["data"] = under["source"]["data"][:-4]  # 32,764 characters: valid, lighter
    assert len(b64(at)) == 32_768
    request = {
        "model": "claude-fake",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [anthropic_image(at), under]}],
    }

    _, answer = gw.post("/v1/messages", request)

    assert answer.status_code == 200
    stored, passed = gw.fake.received[-1].json()["messages"][0]["content"]
    assert_attachment_stub(gw, stored["text"], at, "image/png")
    assert passed == under


def test_a_heavy_attachment_that_is_not_base64_is_left_for_the_guard(gw: Rig) -> None:
    broken = anthropic_image(png())
    broken["source"]["data"] = "!" + broken["source"]["data"][1:]
    request = {
        "model": "claude-fake",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [broken]}],
    }

    _, answer = gw.post("/v1/messages", request)

    assert answer.status_code == 400  # the guard's refusal, not a failed rewrite
    assert "context_leak" in answer.json()["error"]["message"]
    assert "base64" in answer.json()["error"]["message"]
    assert gw.fake.received == []
    assert gw.offloads() == []


# -- properties: any parts, never a crash; the same request, the same rewrite --------------------

_PARTS = st.one_of(
    st.builds(
        lambda n, seed: anthropic_image(png(n, seed)),
        st.sampled_from([100, 30_000]),
        st.integers(0, 3),
    ),
    st.builds(
        lambda n: {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "%" * n},
        },
        st.sampled_from([10, 40_000]),
    ),
    st.builds(
        lambda url: {"type": "image", "source": {"type": "url", "url": url}},
        st.just("https://example.com/a.png"),
    ),
    st.builds(lambda text: {"type": "text", "text": text}, st.text(max_size=20)),
    st.dictionaries(
        st.sampled_from(["type", "source", "data"]),
        st.one_of(st.none(), st.integers(), st.text(max_size=5)),
    ),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(_PARTS, max_size=4), in_result=st.booleans())
def test_any_attachment_parts_rewrite_the_same_every_time_or_are_refused_by_the_guard(
    parts: list[Any], in_result: bool
) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": parts}]
    if in_result:
        messages = tool_result_history({"type": "text", "text": "x"})
        messages[2]["content"][0]["content"] = parts
    request = {"model": "claude-fake", "max_tokens": 8, "messages": messages}
    with cargohold.open("memory://", tenant="t", user="u", session="p") as hold:
        rewriter = Rewriter()
        outcomes = []
        for _ in range(2):
            try:
                forwarded, _counts = rewriter.rewrite(hold, ANTHROPIC, copy.deepcopy(request))
            except ContextLeakError as leak:  # only a payload that is not base64, never a crash
                places = {finding.where for finding in leak.findings}
                outcomes.append(("refused", f"{places} {leak}"))
            else:
                outcomes.append(("forwarded", json.dumps(forwarded)))
    assert outcomes[0] == outcomes[1]
    if outcomes[0][0] == "refused":
        assert outcomes[0][1].startswith("{'attachment'}")
        assert "not valid base64" in outcomes[0][1]
    else:
        assert "%" * 40_000 not in outcomes[0][1]
        light = [p for p in parts if len(json.dumps(p)) < 32_768]
        sent = json.loads(outcomes[0][1])["messages"][-1]["content"]
        if in_result:
            sent = sent[0]["content"]
        if isinstance(sent, list):
            assert all(part in sent for part in light)
