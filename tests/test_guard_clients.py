"""Client wrappers, offline against the SDKs' own transports (httpx2.MockTransport).

openai 3.x and anthropic 2.x build on HTTPX2: a test client is the real SDK client with
``http_client=httpx2.Client(transport=httpx2.MockTransport(handler))``. A guarded call that leaks
must never reach the handler; a clean one must.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from _require import require
from cargohold import GuardOutcome, UsageError
from cargohold.guard import (
    ContextLeakError,
    ContextWindowExceededError,
    ContextWindowUnknownError,
    guard_anthropic,
    guard_openai,
)
from guard_fixtures import raw, reporter, stub

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
        elif path.endswith("/responses"):
            body = RESPONSE_REPLY
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
