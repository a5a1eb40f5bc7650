"""Opaque reasoning is skipped exactly where the providers' schemas put it, and nowhere else.

Reasoning signatures and encrypted reasoning only the provider can read are neither counted nor
judged: OpenAI Responses ``reasoning`` (and ``compaction``) items' ``encrypted_content``,
Anthropic assistant ``thinking`` blocks' ``signature``, ``redacted_thinking`` blocks' ``data``,
and the same blocks in a LangChain AI message. A key of the same name anywhere else is content:
raw text under ``metadata.encrypted_content`` or ``metadata.signature`` is a leak.
"""

from __future__ import annotations

from typing import Any

import pytest

from _require import require
from cargohold.guard import ContextLeakError, Guard
from guard_fixtures import KiB, b64, raw

langchain_messages = require("langchain_core.messages", "langchain")

pytestmark = pytest.mark.usefixtures("configured_marker_key")

OPAQUE = b64(48 * KiB)
"""What a provider's signature or encrypted reasoning looks like: heavy base64."""


def _findings(request: Any, fmt: str) -> list[tuple[str, int | None, str]]:
    with pytest.raises(ContextLeakError) as caught:
        Guard().check(request, format=fmt)
    return [(f.path, f.message_index, f.where) for f in caught.value.findings]


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], **extra}


def _anthropic(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": list(messages), **extra}


def _responses(*items: dict[str, Any]) -> dict[str, Any]:
    return {"model": "gpt-4.1", "input": list(items)}


LEAKS = [
    pytest.param(
        _chat(metadata={"encrypted_content": raw()}),
        "openai-chat",
        ("metadata.encrypted_content", None, "other"),
        id="chat-metadata-encrypted-content",
    ),
    pytest.param(
        _chat(x={"y": {"encrypted_content": raw()}}),
        "openai-chat",
        ("x.y.encrypted_content", None, "other"),
        id="chat-nested-encrypted-content",
    ),
    pytest.param(
        _chat(
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "hi"},
                        {"type": "reasoning", "encrypted_content": raw()},
                    ],
                }
            ]
        ),
        "openai-chat",
        ("messages[0].content[1].encrypted_content", 0, "text"),
        id="chat-part-named-reasoning",
    ),
    pytest.param(
        _responses(
            {"type": "message", "role": "user", "content": "hi", "encrypted_content": raw()}
        ),
        "openai-responses",
        ("input[0].encrypted_content", 0, "text"),
        id="responses-message-encrypted-content",
    ),
    pytest.param(
        _responses(
            {"type": "function_call", "call_id": "fc_1", "name": "search", "arguments": "{}"},
            {
                "type": "function_call_output",
                "call_id": "fc_1",
                "output": [{"type": "reasoning", "encrypted_content": raw()}],
            },
        ),
        "openai-responses",
        ("input[1].output[0].encrypted_content", 1, "tool_result"),
        id="responses-tool-output-shaped-as-reasoning",
    ),
    pytest.param(
        _responses(
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": {"t": raw()}}
        ),
        "openai-responses",
        ("input[0].encrypted_content.t", 0, "text"),
        id="responses-reasoning-encrypted-content-not-a-string",
    ),
    pytest.param(
        _responses(
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "hi", "signature": raw()}],
            }
        ),
        "openai-responses",
        ("input[0].content[0].signature", 0, "text"),
        id="responses-text-part-signature",
    ),
    pytest.param(
        _anthropic({"role": "user", "content": "hi"}, metadata={"signature": raw()}),
        "anthropic",
        ("metadata.signature", None, "other"),
        id="anthropic-metadata-signature",
    ),
    pytest.param(
        _anthropic(
            {"role": "user", "content": [{"type": "text", "text": "hi", "signature": raw()}]}
        ),
        "anthropic",
        ("messages[0].content[0].signature", 0, "text"),
        id="anthropic-text-block-signature",
    ),
    pytest.param(
        _anthropic(
            {
                "role": "user",
                "content": [{"type": "thinking", "thinking": "x", "signature": raw()}],
            }
        ),
        "anthropic",
        ("messages[0].content[0].signature", 0, "text"),
        id="anthropic-thinking-block-in-a-user-message",
    ),
    pytest.param(
        _anthropic(
            {"role": "assistant", "content": [{"type": "redacted_thinking", "data": {"d": raw()}}]}
        ),
        "anthropic",
        ("messages[0].content[0].data.d", 0, "attachment"),
        id="anthropic-redacted-thinking-data-not-a-string",
    ),
    pytest.param(
        _anthropic(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "fetch", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "thinking", "thinking": "", "signature": raw()}],
                    }
                ],
            },
        ),
        "anthropic",
        ("messages[1].content[0].content[0].signature", 1, "tool_result"),
        id="anthropic-tool-result-shaped-as-thinking",
    ),
    pytest.param(
        _anthropic(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "ok", "metadata": {"signature": raw()}}],
            }
        ),
        "anthropic",
        ("messages[0].content[0].metadata.signature", 0, "text"),
        id="anthropic-nested-signature",
    ),
]


@pytest.mark.parametrize(("request_", "fmt", "finding"), LEAKS)
def test_an_opaque_name_outside_the_providers_reasoning_places_is_judged(
    request_: dict[str, Any], fmt: str, finding: tuple[str, int | None, str]
) -> None:
    assert _findings(request_, fmt) == [finding]


def test_langchain_opaque_names_outside_ai_reasoning_blocks_are_judged() -> None:
    history = [
        langchain_messages.HumanMessage(
            content=[{"type": "thinking", "thinking": "x", "signature": raw()}]
        ),
        langchain_messages.AIMessage(
            content="",
            tool_calls=[{"name": "fetch", "args": {}, "id": "c1"}],
            additional_kwargs={"metadata": {"encrypted_content": raw()}},
        ),
        langchain_messages.ToolMessage(
            content=[{"type": "reasoning", "encrypted_content": raw()}], tool_call_id="c1"
        ),
    ]
    assert _findings(history, "langchain") == [
        ("messages[0].content[0].signature", 0, "text"),
        ("messages[1].additional_kwargs.metadata.encrypted_content", 1, "text"),
        ("messages[2].content[0].encrypted_content", 2, "tool_result"),
    ]


def _without(value: Any, key: str) -> Any:
    """``value`` with every mapping's ``key`` removed (the request without its opaque parts)."""
    if isinstance(value, dict):
        return {k: _without(v, key) for k, v in value.items() if k != key}
    if isinstance(value, list):
        return [_without(v, key) for v in value]
    return value


PASSES = [
    pytest.param(
        _responses(
            {"role": "user", "content": "plan"},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "thought"}],
                "encrypted_content": OPAQUE,
            },
        ),
        "openai-responses",
        "encrypted_content",
        id="responses-reasoning-item",
    ),
    pytest.param(
        _responses({"type": "compaction", "id": "cmp_1", "encrypted_content": OPAQUE}),
        "openai-responses",
        "encrypted_content",
        id="responses-compaction-item",
    ),
    pytest.param(
        _anthropic(
            {"role": "user", "content": "plan"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "short", "signature": OPAQUE},
                    {"type": "text", "text": "done"},
                ],
            },
        ),
        "anthropic",
        "signature",
        id="anthropic-thinking-signature",
    ),
    pytest.param(
        _anthropic(
            {"role": "assistant", "content": [{"type": "redacted_thinking", "data": OPAQUE}]}
        ),
        "anthropic",
        "data",
        id="anthropic-redacted-thinking",
    ),
    pytest.param(
        _anthropic(
            {
                "role": "assistant",
                "content": [
                    {"type": "compaction", "content": "summary", "encrypted_content": OPAQUE}
                ],
            }
        ),
        "anthropic",
        "encrypted_content",
        id="anthropic-compaction-block",
    ),
]


@pytest.mark.parametrize(("request_", "fmt", "key"), PASSES)
def test_opaque_reasoning_where_the_schema_puts_it_is_neither_counted_nor_judged(
    request_: dict[str, Any], fmt: str, key: str
) -> None:
    report = Guard().check(request_, format=fmt)
    assert report.request_bytes == Guard().check(_without(request_, key), format=fmt).request_bytes


def test_sdk_reasoning_items_and_thinking_blocks_passed_back_are_opaque() -> None:
    responses = require("openai.types.responses", "openai")
    anthropic_types = require("anthropic.types", "anthropic")
    item = responses.ResponseReasoningItem(
        id="rs_1", type="reasoning", summary=[], encrypted_content=OPAQUE
    )
    assert Guard().check(_responses(item), format="openai-responses").request_bytes < 64
    block = anthropic_types.ThinkingBlock(type="thinking", thinking="t", signature=OPAQUE)
    redacted = anthropic_types.RedactedThinkingBlock(type="redacted_thinking", data=OPAQUE)
    request = _anthropic({"role": "assistant", "content": [block, redacted]})
    assert Guard().check(request, format="anthropic").request_bytes < 64


def test_langchain_ai_reasoning_blocks_are_opaque() -> None:
    plain = langchain_messages.AIMessage(content=[{"type": "text", "text": "done"}])
    reasoning = langchain_messages.AIMessage(
        content=[
            {"type": "thinking", "thinking": "", "signature": OPAQUE},
            {"type": "redacted_thinking", "data": OPAQUE},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": OPAQUE},
            {"type": "reasoning", "reasoning": "", "extras": {"signature": OPAQUE}},
            {"type": "text", "text": "done"},
        ],
        additional_kwargs={"reasoning": {"id": "rs_2", "summary": [], "encrypted_content": OPAQUE}},
    )
    measured = Guard().check([reasoning], format="langchain").request_bytes
    baseline = Guard().check([plain], format="langchain").request_bytes
    # what is left of the reasoning blocks once their opaque values are skipped: kinds and ids
    assert baseline < measured < baseline + 128
