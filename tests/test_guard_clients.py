"""Client wrappers, offline against the SDKs' own transports (httpx2.MockTransport).

openai 3.x and anthropic 2.x build on HTTPX2: a test client is the real SDK client with
``http_client=httpx2.Client(transport=httpx2.MockTransport(handler))``. A guarded call that leaks
must never reach the handler; a clean one must.
"""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from _require import require
from cargohold import GuardOutcome, Operation, Reason, Reporter, UsageError
from cargohold.cli._context import default_events_path
from cargohold.guard import (
    ContextLeakError,
    ContextWindowExceededError,
    ContextWindowUnknownError,
    guard_anthropic,
    guard_openai,
)
from cargohold.guard import _log as guard_log
from guard_fixtures import CANARY, raw, reporter, stub

openai = require("openai", "openai")
anthropic = require("anthropic", "anthropic")
httpx2 = require("httpx2", "openai")  # the HTTP client openai 3.x and anthropic 2.x build on

CHAT_REPLY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "ok"},
            "finish_reason": "stop",
        }
    ],
}
RESPONSE_REPLY = {
    "id": "resp_1",
    "object": "response",
    "created_at": 0,
    "model": "gpt-4.1",
    "status": "completed",
    "output": [],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
}
MESSAGE_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-5-5",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}

COMPLETION_REPLY = {
    "id": "cmpl-1",
    "object": "text_completion",
    "created": 0,
    "model": "gpt-3.5-turbo-instruct",
    "choices": [{"index": 0, "text": "ok", "finish_reason": "stop", "logprobs": None}],
}
COUNT_REPLY = {"input_tokens": 12}
BATCH_REPLY = {
    "id": "msgbatch_1",
    "type": "message_batch",
    "processing_status": "in_progress",
    "request_counts": {"processing": 1, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
    "created_at": "2026-12-01T00:00:00Z",
    "expires_at": "2026-12-02T00:00:00Z",
    "ended_at": None,
    "cancel_initiated_at": None,
    "archived_at": None,
    "results_url": None,
}

# A Guard() given no key reads the configured store's marker key: it holds the fixtures'.
pytestmark = pytest.mark.usefixtures("configured_marker_key")


class Recorder:
    """A MockTransport handler that records every request it receives."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        path = request.url.path
        if path.endswith("/chat/completions"):
            body = CHAT_REPLY
        elif path.endswith("/completions"):
            body = COMPLETION_REPLY
        elif path.endswith("/responses"):
            body = RESPONSE_REPLY
        elif path.endswith("/count_tokens"):
            body = COUNT_REPLY
        elif path.endswith("/batches"):
            body = BATCH_REPLY
        else:
            body = MESSAGE_REPLY
        return httpx2.Response(200, json=body)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


def openai_client(handler: Recorder, *, asynchronous: bool = False) -> Any:
    if asynchronous:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
        return openai.AsyncOpenAI(api_key="test-key", http_client=http, max_retries=0)
    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    return openai.OpenAI(api_key="test-key", http_client=http, max_retries=0)


def anthropic_client(handler: Recorder, *, asynchronous: bool = False) -> Any:
    if asynchronous:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
        return anthropic.AsyncAnthropic(api_key="test-key", http_client=http, max_retries=0)
    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    return anthropic.Anthropic(api_key="test-key", http_client=http, max_retries=0)


LEAKY_CHAT = [
    {"role": "user", "content": "summarize the log"},
    {"role": "user", "content": raw()},
]
CLEAN_CHAT = [{"role": "user", "content": "summarize"}, {"role": "user", "content": stub()}]


def test_a_guarded_openai_chat_call_that_leaks_never_reaches_the_transport() -> None:
    handler = Recorder()
    rep, sink = reporter()
    client = guard_openai(openai_client(handler), reporter=rep)
    with pytest.raises(ContextLeakError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=LEAKY_CHAT)
    assert handler.requests == []
    assert [f.path for f in caught.value.findings] == ["messages[1].content"]
    assert [e.outcome for e in sink.events] == [GuardOutcome.CONTEXT_LEAK]


def test_a_clean_guarded_openai_chat_call_is_sent_unchanged() -> None:
    handler = Recorder()
    client = guard_openai(openai_client(handler))
    reply = client.chat.completions.create(model="gpt-4o", messages=CLEAN_CHAT)
    assert reply.choices[0].message.content == "ok"
    assert [b["messages"] for b in handler.bodies] == [CLEAN_CHAT]


def test_openai_responses_create_is_guarded() -> None:
    handler = Recorder()
    client = guard_openai(openai_client(handler))
    with pytest.raises(ContextLeakError):
        client.responses.create(model="gpt-4.1", input=raw())
    assert handler.requests == []
    client.responses.create(model="gpt-4.1", input="hello")
    assert [b["input"] for b in handler.bodies] == ["hello"]


def test_a_window_overflow_is_refused_before_it_is_sent() -> None:
    handler = Recorder()
    client = guard_openai(openai_client(handler), windows={"gpt-4o": 2000}, margin=0)
    messages = [{"role": "user", "content": raw(30 * 1024)} for _ in range(3)]
    with pytest.raises(ContextWindowExceededError):
        client.chat.completions.create(model="gpt-4o", messages=messages)
    assert handler.requests == []


def test_async_openai_calls_are_guarded() -> None:
    handler = Recorder()
    client = guard_openai(openai_client(handler, asynchronous=True))

    async def scenario() -> None:
        with pytest.raises(ContextLeakError):
            await client.chat.completions.create(model="gpt-4o", messages=LEAKY_CHAT)
        with pytest.raises(ContextLeakError):
            await client.responses.create(model="gpt-4.1", input=raw())
        assert handler.requests == []
        reply = await client.chat.completions.create(model="gpt-4o", messages=CLEAN_CHAT)
        assert reply.choices[0].message.content == "ok"
        await client.responses.create(model="gpt-4.1", input="hello")

    asyncio.run(scenario())
    assert len(handler.requests) == 2


def test_copies_made_with_options_stay_guarded() -> None:
    handler = Recorder()
    client = guard_openai(openai_client(handler))
    with pytest.raises(ContextLeakError):
        client.with_options(timeout=5).chat.completions.create(model="gpt-4o", messages=LEAKY_CHAT)
    with pytest.raises(ContextLeakError):
        client.copy().responses.create(model="gpt-4.1", input=raw())
    assert handler.requests == []


def test_raw_response_views_made_after_guarding_are_guarded() -> None:
    handler = Recorder()
    client = guard_openai(openai_client(handler))
    with pytest.raises(ContextLeakError):
        client.chat.completions.with_raw_response.create(model="gpt-4o", messages=LEAKY_CHAT)
    assert handler.requests == []


def test_guarding_twice_checks_once() -> None:
    handler = Recorder()
    rep, sink = reporter()
    client = guard_openai(guard_openai(openai_client(handler), reporter=rep), reporter=rep)
    with pytest.raises(ContextLeakError):
        client.chat.completions.create(model="gpt-4o", messages=LEAKY_CHAT)
    assert len(sink.events) == 1


LEAKY_MESSAGES = [
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "cat", "input": {}}],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": raw()}],
    },
]


def test_a_guarded_anthropic_call_that_leaks_never_reaches_the_transport() -> None:
    handler = Recorder()
    client = guard_anthropic(anthropic_client(handler))
    with pytest.raises(ContextLeakError) as caught:
        client.messages.create(model="claude-sonnet-5-5", max_tokens=64, messages=LEAKY_MESSAGES)
    assert handler.requests == []
    assert [(f.path, f.tool) for f in caught.value.findings] == [
        ("messages[1].content[0].content", "cat")
    ]
    with pytest.raises(ContextLeakError):
        client.messages.create(model="claude-sonnet-5-5", max_tokens=64, system=raw(), messages=[])
    assert handler.requests == []


def test_a_clean_guarded_anthropic_call_is_sent() -> None:
    handler = Recorder()
    client = guard_anthropic(anthropic_client(handler))
    messages = [{"role": "user", "content": stub()}]
    reply = client.messages.create(model="claude-sonnet-5-5", max_tokens=64, messages=messages)
    assert reply.content[0].text == "ok"
    assert [b["messages"] for b in handler.bodies] == [messages]


def test_async_anthropic_calls_are_guarded() -> None:
    handler = Recorder()
    client = guard_anthropic(anthropic_client(handler, asynchronous=True))

    async def scenario() -> None:
        with pytest.raises(ContextLeakError):
            await client.messages.create(
                model="claude-sonnet-5-5", max_tokens=64, messages=LEAKY_MESSAGES
            )
        assert handler.requests == []
        reply = await client.messages.create(
            model="claude-sonnet-5-5", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
        )
        assert reply.content[0].text == "ok"

    asyncio.run(scenario())
    assert len(handler.requests) == 1


def test_anthropic_beta_messages_are_guarded_too() -> None:
    handler = Recorder()
    client = guard_anthropic(anthropic_client(handler))
    with pytest.raises(ContextLeakError):
        client.beta.messages.create(
            model="claude-sonnet-5-5", max_tokens=64, messages=LEAKY_MESSAGES
        )
    assert handler.requests == []


def test_a_client_of_the_wrong_kind_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        guard_openai(object())
    with pytest.raises(UsageError):
        guard_anthropic(object())


def test_a_strict_guarded_client_refuses_a_model_without_a_window_before_sending() -> None:
    handler = Recorder()
    client = guard_openai(openai_client(handler), strict_window=True)
    with pytest.raises(ContextWindowUnknownError):
        client.chat.completions.create(model="my-local-llama", messages=CLEAN_CHAT)
    assert handler.requests == []
    client = guard_anthropic(
        anthropic_client(handler), windows={"my-llama": 8000}, strict_window=True
    )
    client.messages.create(
        model="my-llama", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert len(handler.requests) == 1


# -- every call that sends a conversation: legacy completions, count_tokens, batches ---------

INSTRUCT = "gpt-3.5-turbo-instruct"


def test_openai_legacy_completions_are_guarded() -> None:
    handler = Recorder()
    rep, sink = reporter()
    client = guard_openai(openai_client(handler), reporter=rep)
    with pytest.raises(ContextLeakError) as caught:
        client.completions.create(model=INSTRUCT, prompt=raw())
    assert [(f.path, f.where) for f in caught.value.findings] == [("prompt", "text")]
    with pytest.raises(ContextLeakError) as caught:
        client.completions.create(model=INSTRUCT, prompt=["short", raw()])
    assert [(f.path, f.message_index) for f in caught.value.findings] == [("prompt[1]", 1)]
    with pytest.raises(ContextLeakError):  # 40,000 token ids: about 170 KB of text
        client.completions.create(model=INSTRUCT, prompt=list(range(40_000)))
    with pytest.raises(ContextLeakError):
        client.completions.create(model=INSTRUCT, prompt="write", suffix=raw())
    assert handler.requests == []
    assert [e.outcome for e in sink.events] == [GuardOutcome.CONTEXT_LEAK] * 4
    reply = client.completions.create(model=INSTRUCT, prompt="hello")
    assert reply.choices[0].text == "ok"
    assert [b["prompt"] for b in handler.bodies] == ["hello"]


def test_async_openai_legacy_completions_are_guarded() -> None:
    handler = Recorder()
    client = guard_openai(openai_client(handler, asynchronous=True))

    async def scenario() -> None:
        with pytest.raises(ContextLeakError):
            await client.completions.create(model=INSTRUCT, prompt=raw())
        assert handler.requests == []
        await client.completions.create(model=INSTRUCT, prompt="hello")

    asyncio.run(scenario())
    assert len(handler.requests) == 1


def test_each_legacy_prompt_is_checked_against_the_window_as_its_own_completion() -> None:
    handler = Recorder()
    client = guard_openai(openai_client(handler), windows={INSTRUCT: 2_000}, margin=0)
    prompts = ["word " * 800] * 5  # each about 900 tokens: each fits, together they would not
    client.completions.create(model=INSTRUCT, prompt=prompts)
    assert len(handler.requests) == 1
    with pytest.raises(ContextWindowExceededError) as caught:
        client.completions.create(model=INSTRUCT, prompt=["hi", "word " * 4_000])
    assert any("prompt[1]" in note for note in caught.value.__notes__)
    assert len(handler.requests) == 1


def test_anthropic_count_tokens_is_guarded() -> None:
    handler = Recorder()
    client = guard_anthropic(anthropic_client(handler))
    for messages in (client.messages, client.beta.messages):
        with pytest.raises(ContextLeakError):
            messages.count_tokens(model="claude-sonnet-5-5", messages=LEAKY_MESSAGES)
    assert handler.requests == []
    counted = client.messages.count_tokens(
        model="claude-sonnet-5-5", messages=[{"role": "user", "content": "hi"}]
    )
    assert counted.input_tokens == 12


def _batch(*messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "custom_id": f"r{index}",
            "params": {"model": "claude-sonnet-5-5", "max_tokens": 64, "messages": chat},
        }
        for index, chat in enumerate(messages)
    ]


CLEAN_MESSAGES = [{"role": "user", "content": "hi"}]


def test_anthropic_message_batches_are_guarded_request_by_request() -> None:
    handler = Recorder()
    rep, sink = reporter()
    client = guard_anthropic(anthropic_client(handler), reporter=rep)
    for batches in (client.messages.batches, client.beta.messages.batches):
        with pytest.raises(ContextLeakError) as caught:
            batches.create(requests=_batch(CLEAN_MESSAGES, LEAKY_MESSAGES))
        assert [(f.path, f.message_index, f.tool) for f in caught.value.findings] == [
            ("requests[1].params.messages[1].content[0].content", 1, "cat")
        ]
    with pytest.raises(ContextLeakError) as caught:
        client.messages.batches.create(requests=[{"custom_id": raw(), "params": {}}])
    assert [f.path for f in caught.value.findings] == ["requests[0].custom_id"]
    assert handler.requests == []
    assert [e.outcome for e in sink.events] == [GuardOutcome.CONTEXT_LEAK] * 3
    batch = client.messages.batches.create(requests=_batch(CLEAN_MESSAGES, CLEAN_MESSAGES))
    assert batch.id == "msgbatch_1"
    assert [len(b["requests"]) for b in handler.bodies] == [2]


def test_each_batch_request_is_checked_against_the_window() -> None:
    handler = Recorder()
    client = guard_anthropic(
        anthropic_client(handler), windows={"claude-sonnet-5-5": 2_000}, margin=0
    )
    fits = [{"role": "user", "content": "word " * 800}]
    client.messages.batches.create(requests=_batch(fits, fits, fits))
    assert len(handler.requests) == 1
    over = [{"role": "user", "content": "word " * 4_000}]
    with pytest.raises(ContextWindowExceededError) as caught:
        client.messages.batches.create(requests=_batch(fits, over))
    assert any("requests[1]" in note for note in caught.value.__notes__)
    assert len(handler.requests) == 1


def test_async_anthropic_batches_and_count_tokens_are_guarded() -> None:
    handler = Recorder()
    client = guard_anthropic(anthropic_client(handler, asynchronous=True))

    async def scenario() -> None:
        with pytest.raises(ContextLeakError):
            await client.messages.batches.create(requests=_batch(LEAKY_MESSAGES))
        with pytest.raises(ContextLeakError):
            await client.messages.count_tokens(model="claude-sonnet-5-5", messages=LEAKY_MESSAGES)
        assert handler.requests == []
        await client.messages.batches.create(requests=_batch(CLEAN_MESSAGES))

    asyncio.run(scenario())
    assert len(handler.requests) == 1


# -- a bare wrapper reports to the configured events log ---------------------------------------


def _logged(path: Path) -> list[tuple[object, object, object]]:
    events = [json.loads(line) for line in path.read_text().splitlines()]
    return [(e["operation"], e["outcome"], e["reason"]) for e in events]


LEAK_LOGGED = (
    Operation.GUARD.value,
    GuardOutcome.CONTEXT_LEAK.value,
    Reason.RAW_HEAVY_CONTENT.value,
)


def test_a_leak_stopped_by_a_bare_guarded_client_goes_to_the_configured_events_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "logs" / "events.jsonl"
    monkeypatch.setenv("CARGOHOLD_EVENTS_LOG", str(log))
    handler = Recorder()
    client = guard_openai(openai_client(handler))
    with pytest.raises(ContextLeakError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=LEAKY_CHAT)
    assert handler.requests == []
    assert _logged(log) == [LEAK_LOGGED]
    assert json.loads(log.read_text())["sequence"] == caught.value.event.sequence
    assert CANARY not in log.read_text()
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_a_bare_guard_logs_to_the_default_events_log_when_none_is_configured() -> None:
    handler = Recorder()
    client = guard_anthropic(anthropic_client(handler))
    with pytest.raises(ContextLeakError):
        client.messages.create(model="claude-sonnet-5-5", max_tokens=64, messages=LEAKY_MESSAGES)
    assert _logged(default_events_path()) == [LEAK_LOGGED]


def test_the_guards_default_events_log_is_the_clis() -> None:
    assert guard_log.default_events_path() == default_events_path()


def test_a_guard_given_a_reporter_without_sinks_logs_nothing() -> None:
    handler = Recorder()
    client = guard_openai(openai_client(handler), reporter=Reporter())
    with pytest.raises(ContextLeakError):
        client.chat.completions.create(model="gpt-4o", messages=LEAKY_CHAT)
    assert not default_events_path().exists()


def test_openai_responses_compact_and_token_counts_are_guarded() -> None:
    handler = Recorder()
    client = guard_openai(openai_client(handler))
    calls = (
        client.responses.compact,
        client.responses.input_tokens.count,
        client.beta.responses.create,
        client.beta.responses.compact,
        client.beta.responses.input_tokens.count,
    )
    for call in calls:
        with pytest.raises(ContextLeakError) as caught:
            call(model="gpt-4.1", input=[{"role": "user", "content": raw()}])
        assert [f.path for f in caught.value.findings] == ["input[0].content"]
    assert handler.requests == []
    client.responses.input_tokens.count(model="gpt-4.1", input="hello")
    assert [b["input"] for b in handler.bodies] == ["hello"]


def test_openai_conversation_items_are_guarded_before_they_are_stored() -> None:
    handler = Recorder()
    client = guard_openai(openai_client(handler))
    leaky = [{"type": "message", "role": "user", "content": raw()}]
    with pytest.raises(ContextLeakError) as caught:
        client.conversations.create(items=leaky)
    assert [f.path for f in caught.value.findings] == ["items[0].content"]
    with pytest.raises(ContextLeakError) as caught:
        client.conversations.items.create("conv_1", items=leaky)  # the id by position, as typed
    assert [f.path for f in caught.value.findings] == ["items[0].content"]
    assert handler.requests == []
    clean = [{"type": "message", "role": "user", "content": "hello"}]
    client.conversations.items.create("conv_1", items=clean)
    assert [r.url.path for r in handler.requests] == ["/v1/conversations/conv_1/items"]


def test_async_openai_conversation_items_are_guarded() -> None:
    handler = Recorder()
    client = guard_openai(openai_client(handler, asynchronous=True))

    async def scenario() -> None:
        with pytest.raises(ContextLeakError):
            await client.conversations.items.create(
                "conv_1", items=[{"role": "user", "content": raw()}]
            )
        with pytest.raises(ContextLeakError):
            await client.responses.compact(model="gpt-4.1", input=raw())

    asyncio.run(scenario())
    assert handler.requests == []
