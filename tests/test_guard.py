"""The edge guard's leak check: every place heavy content can hide, in every format."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from _require import require
from cargohold import ContentKind, GuardOutcome, Operation, Reason
from cargohold.guard import (
    ContextLeakError,
    Guard,
    RequestFormat,
    check_request,
)
from guard_fixtures import (
    CANARY,
    THRESHOLD,
    KiB,
    b64,
    data_url,
    raw,
    reporter,
    segment,
    stub,
)

langchain_messages = require("langchain_core.messages", "langchain")

CALL = {"id": "call_1", "type": "function", "function": {"name": "fetch_page", "arguments": "{}"}}

# A Guard() given no key reads the configured store's marker key: it holds the fixtures'.
pytestmark = pytest.mark.usefixtures("configured_marker_key")


def chat(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": list(messages), **extra}


def leak(request: Any, fmt: str, **kwargs: Any) -> ContextLeakError:
    with pytest.raises(ContextLeakError) as caught:
        Guard(**kwargs).check(request, format=fmt)
    return caught.value


# -- OpenAI Chat Completions ----------------------------------------------------------------------

CHAT_CASES = [
    pytest.param(
        chat({"role": "user", "content": raw()}), "messages[0].content", 0, None, "text", id="text"
    ),
    pytest.param(
        chat({"role": "user", "content": [{"type": "text", "text": raw()}]}),
        "messages[0].content[0].text",
        0,
        None,
        "text",
        id="text-part",
    ),
    pytest.param(
        chat(
            {"role": "system", "content": "be brief"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": data_url()}},
                ],
            },
        ),
        "messages[1].content[1].image_url.url",
        1,
        None,
        "attachment",
        id="image-data-url",
    ),
    pytest.param(
        chat(
            {
                "role": "user",
                "content": [
                    {"type": "file", "file": {"filename": "a.pdf", "file_data": data_url()}}
                ],
            }
        ),
        "messages[0].content[0].file.file_data",
        0,
        None,
        "attachment",
        id="file-data",
    ),
    pytest.param(
        chat(
            {
                "role": "user",
                "content": [
                    {"type": "input_audio", "input_audio": {"data": b64(), "format": "wav"}}
                ],
            }
        ),
        "messages[0].content[0].input_audio.data",
        0,
        None,
        "attachment",
        id="audio-base64",
    ),
    pytest.param(
        chat({"role": "system", "content": raw()}),
        "messages[0].content",
        0,
        None,
        "system",
        id="system",
    ),
    pytest.param(
        chat({"role": "developer", "content": [{"type": "text", "text": raw()}]}),
        "messages[0].content[0].text",
        0,
        None,
        "system",
        id="developer",
    ),
    pytest.param(
        chat(
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": raw()},
        ),
        "messages[1].content",
        1,
        "fetch_page",
        "tool_result",
        id="tool-result",
    ),
    pytest.param(
        chat(
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {
                "role": "tool",
                "tool_call_id": "call_1",
                "content": [{"type": "text", "text": raw()}],
            },
        ),
        "messages[1].content[0].text",
        1,
        "fetch_page",
        "tool_result",
        id="tool-result-part",
    ),
    pytest.param(
        chat(
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {
                "role": "tool",
                "tool_call_id": "call_1",
                "content": [{"type": "text", "text": raw(20 * KiB)} for _ in range(2)],
            },
        ),
        "messages[1].content",
        1,
        "fetch_page",
        "tool_result",
        id="tool-result-split-in-parts",
    ),
    pytest.param(
        chat(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_9",
                        "type": "function",
                        "function": {"name": "save_file", "arguments": json.dumps({"b": raw()})},
                    }
                ],
            }
        ),
        "messages[0].tool_calls[0].function.arguments",
        0,
        "save_file",
        "tool_arguments",
        id="tool-call-arguments",
    ),
    pytest.param(
        chat(
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "save_file", "arguments": json.dumps({"b": raw()})},
            }
        ),
        "messages[0].function_call.arguments",
        0,
        "save_file",
        "tool_arguments",
        id="legacy-function-call",
    ),
    pytest.param(
        chat({"role": "function", "name": "lookup", "content": raw()}),
        "messages[0].content",
        0,
        "lookup",
        "tool_result",
        id="legacy-function-result",
    ),
    pytest.param(
        chat({"role": "user", "content": "hi"}, metadata={"context": raw()}),
        "metadata.context",
        None,
        None,
        "other",
        id="injected-other-key",
    ),
    pytest.param(
        chat(
            {"role": "user", "content": "hi"},
            tools=[{"type": "function", "function": {"name": "f", "description": raw()}}],
        ),
        "tools[0].function.description",
        None,
        None,
        "tool_definitions",
        id="tool-definition",
    ),
]


@pytest.mark.parametrize(("request_", "path", "index", "tool", "where"), CHAT_CASES)
def test_openai_chat_leaks_are_found_where_they_hide(
    request_: dict[str, Any], path: str, index: int | None, tool: str | None, where: str
) -> None:
    error = leak(request_, "openai-chat")
    assert [(f.path, f.message_index, f.tool, f.where) for f in error.findings] == [
        (path, index, tool, where)
    ]
    assert error.findings[0].size >= THRESHOLD


def test_a_data_url_is_measured_by_its_full_length() -> None:
    url = data_url(40 * KiB)
    request = chat({"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]})
    assert leak(request, "openai-chat").findings[0].size == len(url)


def test_sizes_are_utf8_bytes_not_characters() -> None:
    text = "é" * (17 * KiB)  # 17 Ki characters, 34 KiB of UTF-8
    error = leak(chat({"role": "user", "content": text}), "openai-chat")
    assert error.findings[0].size == 34 * KiB
    Guard().check(chat({"role": "user", "content": "é" * (15 * KiB)}), format="openai-chat")


@pytest.mark.parametrize(
    ("content", "path"),
    [
        pytest.param(raw, "messages[0].content", id="string"),
        pytest.param(
            lambda size: [{"type": "text", "text": raw(size)}],
            "messages[0].content[0].text",
            id="text-part",
        ),
    ],
)
def test_a_part_just_below_the_threshold_passes_and_at_it_leaks(
    content: Callable[[int], Any], path: str
) -> None:
    Guard().check(chat({"role": "user", "content": content(THRESHOLD - 1)}), format="openai-chat")
    error = leak(chat({"role": "user", "content": content(THRESHOLD)}), "openai-chat")
    assert [(f.path, f.size) for f in error.findings] == [(path, THRESHOLD)]


def _tool_result_in_two_parts(total: int) -> dict[str, Any]:
    """A tool result of two text parts, each far below the threshold, whose leaf strings add up
    to ``total`` bytes (each part's ``"type": "text"`` is a leaf of the result too)."""
    texts = total - 2 * len("text")
    parts = [{"type": "text", "text": raw(size)} for size in (texts // 2, texts - texts // 2)]
    return chat(
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": parts},
    )


def test_a_tool_result_split_in_parts_just_below_the_threshold_passes_and_at_it_leaks() -> None:
    Guard().check(_tool_result_in_two_parts(THRESHOLD - 1), format="openai-chat")
    error = leak(_tool_result_in_two_parts(THRESHOLD), "openai-chat")
    assert [(f.path, f.size, f.tool, f.where) for f in error.findings] == [
        ("messages[1].content", THRESHOLD, "fetch_page", "tool_result")
    ]


def test_the_threshold_is_configurable() -> None:
    request = chat({"role": "user", "content": raw(10 * KiB)})
    Guard().check(request, format="openai-chat")
    assert leak(request, "openai-chat", threshold=8 * KiB).threshold == 8 * KiB


def test_every_leak_of_a_request_is_listed_in_request_order() -> None:
    request = chat(
        {"role": "system", "content": raw()},
        {"role": "user", "content": "fine"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_url()}}]},
    )
    paths = [f.path for f in leak(request, "openai-chat").findings]
    assert paths == ["messages[0].content", "messages[2].content[0].image_url.url"]


# -- OpenAI Responses -----------------------------------------------------------------------------

RESPONSES_CASES = [
    pytest.param({"input": raw()}, "input", 0, None, "text", id="input-string"),
    pytest.param(
        {"input": "hi", "instructions": raw()},
        "instructions",
        None,
        None,
        "system",
        id="instructions",
    ),
    pytest.param(
        {"input": [{"role": "user", "content": [{"type": "input_text", "text": raw()}]}]},
        "input[0].content[0].text",
        0,
        None,
        "text",
        id="input-text",
    ),
    pytest.param(
        {
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "describe"},
                        {"type": "input_image", "image_url": data_url()},
                    ],
                }
            ]
        },
        "input[0].content[1].image_url",
        0,
        None,
        "attachment",
        id="input-image",
    ),
    pytest.param(
        {
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_file", "filename": "r.pdf", "file_data": data_url()}
                    ],
                }
            ]
        },
        "input[0].content[0].file_data",
        0,
        None,
        "attachment",
        id="input-file",
    ),
    pytest.param(
        {"input": [{"role": "developer", "content": raw()}]},
        "input[0].content",
        0,
        None,
        "system",
        id="developer-message",
    ),
    pytest.param(
        {
            "input": [
                {
                    "type": "function_call",
                    "call_id": "fc_1",
                    "name": "save_file",
                    "arguments": json.dumps({"body": raw()}),
                }
            ]
        },
        "input[0].arguments",
        0,
        "save_file",
        "tool_arguments",
        id="function-call-arguments",
    ),
    pytest.param(
        {
            "input": [
                {"type": "function_call", "call_id": "fc_1", "name": "search", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "fc_1", "output": raw()},
            ]
        },
        "input[1].output",
        1,
        "search",
        "tool_result",
        id="function-call-output",
    ),
    pytest.param(
        {
            "input": [
                {"type": "function_call", "call_id": "fc_1", "name": "search", "arguments": "{}"},
                {
                    "type": "function_call_output",
                    "call_id": "fc_1",
                    "output": [{"type": "input_text", "text": raw()}],
                },
            ]
        },
        "input[1].output[0].text",
        1,
        "search",
        "tool_result",
        id="function-call-output-parts",
    ),
]


@pytest.mark.parametrize(("request_", "path", "index", "tool", "where"), RESPONSES_CASES)
def test_openai_responses_leaks_are_found_where_they_hide(
    request_: dict[str, Any], path: str, index: int | None, tool: str | None, where: str
) -> None:
    error = leak({"model": "gpt-4.1", **request_}, "openai-responses")
    assert [(f.path, f.message_index, f.tool, f.where) for f in error.findings] == [
        (path, index, tool, where)
    ]


def test_responses_items_passed_back_as_sdk_models_are_walked() -> None:
    types = require("openai.types.responses", "openai")
    item = types.ResponseFunctionToolCall(
        type="function_call", call_id="fc_1", name="save_file", arguments=json.dumps([raw()])
    )
    error = leak({"model": "gpt-4.1", "input": [item]}, "openai-responses")
    assert [(f.path, f.tool) for f in error.findings] == [("input[0].arguments", "save_file")]


# -- OpenAI legacy Completions -------------------------------------------------------------------


def test_a_legacy_prompt_of_token_ids_counts_one_token_per_id() -> None:
    guard = Guard(windows={"gpt-3.5-turbo-instruct": 16_000}, margin=0)

    def tokens(prompt: Any) -> int:
        request = {"model": "gpt-3.5-turbo-instruct", "prompt": prompt}
        return guard.check(request, format="openai-completions").estimated_tokens

    assert tokens(list(range(1_000))) - tokens([7]) == 999
    assert tokens([[1, 2, 3], [4, 5]]) - tokens([[1], [2]]) == 3


def test_legacy_completion_prompts_are_judged_each_alone() -> None:
    request = {"model": "gpt-3.5-turbo-instruct", "prompt": ["a", raw(), [1] * 10_000]}
    error = leak(request, "openai-completions")
    assert [(f.path, f.message_index, f.where) for f in error.findings] == [
        ("prompt[1]", 1, "text"),
        ("prompt[2]", 2, "text"),
    ]


# -- Anthropic Messages ---------------------------------------------------------------------------

TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "fetch_page", "input": {"url": "u"}}

ANTHROPIC_CASES = [
    pytest.param({"system": raw()}, "system", None, None, "system", id="system-string"),
    pytest.param(
        {"system": [{"type": "text", "text": raw()}]},
        "system[0].text",
        None,
        None,
        "system",
        id="system-blocks",
    ),
    pytest.param(
        {"messages": [{"role": "user", "content": raw()}]},
        "messages[0].content",
        0,
        None,
        "text",
        id="text",
    ),
    pytest.param(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": raw()}]}]},
        "messages[0].content[0].text",
        0,
        None,
        "text",
        id="text-block",
    ),
    pytest.param(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what is it?"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": b64()},
                        },
                    ],
                }
            ]
        },
        "messages[0].content[1].source.data",
        0,
        None,
        "attachment",
        id="image-base64",
    ),
    pytest.param(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "document",
                            "source": {
                                "type": "base64",
                                "media_type": "application/pdf",
                                "data": b64(),
                            },
                        }
                    ],
                }
            ]
        },
        "messages[0].content[0].source.data",
        0,
        None,
        "attachment",
        id="document-base64",
    ),
    pytest.param(
        {
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "document",
                            "source": {"type": "text", "media_type": "text/plain", "data": raw()},
                        }
                    ],
                }
            ]
        },
        "messages[0].content[0].source.data",
        0,
        None,
        "text",
        id="document-text-source",
    ),
    pytest.param(
        {
            "messages": [
                {
                    "role": "assistant",
                    "content": [{**TOOL_USE, "input": {"rows": [f"row {i}" for i in range(6000)]}}],
                }
            ]
        },
        "messages[0].content[0].input",
        0,
        "fetch_page",
        "tool_arguments",
        id="tool-use-input-as-json",
    ),
    pytest.param(
        {"messages": [{"role": "assistant", "content": [{**TOOL_USE, "input": {"q": raw()}}]}]},
        "messages[0].content[0].input.q",
        0,
        "fetch_page",
        "tool_arguments",
        id="tool-use-input-leaf",
    ),
    pytest.param(
        {
            "messages": [
                {"role": "assistant", "content": [TOOL_USE]},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": raw()}
                    ],
                },
            ]
        },
        "messages[1].content[0].content",
        1,
        "fetch_page",
        "tool_result",
        id="tool-result-string",
    ),
    pytest.param(
        {
            "messages": [
                {"role": "assistant", "content": [TOOL_USE]},
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_1",
                            "content": [
                                {"type": "text", "text": "screenshot:"},
                                {
                                    "type": "image",
                                    "source": {
                                        "type": "base64",
                                        "media_type": "image/png",
                                        "data": b64(),
                                    },
                                },
                            ],
                        }
                    ],
                },
            ]
        },
        "messages[1].content[0].content[1].source.data",
        1,
        "fetch_page",
        "attachment",
        id="tool-result-image",
    ),
]


@pytest.mark.parametrize(("request_", "path", "index", "tool", "where"), ANTHROPIC_CASES)
def test_anthropic_leaks_are_found_where_they_hide(
    request_: dict[str, Any], path: str, index: int | None, tool: str | None, where: str
) -> None:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": [], **request_}
    error = leak(body, "anthropic")
    assert [(f.path, f.message_index, f.tool, f.where) for f in error.findings] == [
        (path, index, tool, where)
    ]


def test_reasoning_signatures_are_neither_counted_nor_judged() -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "short", "signature": b64(48 * KiB)},
                    {"type": "redacted_thinking", "data": b64(48 * KiB)},
                ],
            }
        ],
    }
    assert Guard().check(body, format="anthropic").request_bytes < 64


# -- LangChain ------------------------------------------------------------------------------------


def test_langchain_message_objects_are_walked() -> None:
    messages = [
        langchain_messages.SystemMessage(content="be brief"),
        langchain_messages.HumanMessage(
            content=[
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": data_url()}},
            ]
        ),
        langchain_messages.AIMessage(
            content="", tool_calls=[{"name": "search", "args": {"q": raw()}, "id": "c1"}]
        ),
        langchain_messages.ToolMessage(content=raw(), tool_call_id="c1"),
    ]
    error = leak(messages, "langchain")
    assert [(f.path, f.message_index, f.tool, f.where) for f in error.findings] == [
        ("messages[1].content[1].image_url.url", 1, None, "attachment"),
        ("messages[2].tool_calls[0].args.q", 2, "search", "tool_arguments"),
        ("messages[3].content", 3, "search", "tool_result"),
    ]


def test_langchain_system_message_is_a_system_place() -> None:
    error = leak([langchain_messages.SystemMessage(content=raw())], "langchain")
    assert [(f.path, f.where) for f in error.findings] == [("messages[0].content", "system")]


@pytest.mark.parametrize(
    "message",
    [
        pytest.param({"role": "user", "content": raw()}, id="role-dict"),
        pytest.param({"type": "human", "content": raw()}, id="type-dict"),
        pytest.param({"type": "human", "data": {"content": raw(), "id": None}}, id="to-dict"),
        pytest.param(("human", raw()), id="tuple"),
        pytest.param(raw(), id="string"),
    ],
)
def test_langchain_dict_forms_are_walked(message: Any) -> None:
    error = leak([{"role": "user", "content": "hi"}, message], "langchain")
    assert [(f.path, f.message_index) for f in error.findings] == [("messages[1].content", 1)]


def test_langchain_tool_message_names_its_tool_from_the_call() -> None:
    messages = [
        {"type": "ai", "content": "", "tool_calls": [{"name": "grep", "args": {}, "id": "c7"}]},
        {"type": "tool", "tool_call_id": "c7", "content": [{"type": "text", "text": raw()}]},
    ]
    error = leak(messages, "langchain")
    assert [(f.path, f.tool) for f in error.findings] == [("messages[1].content[0].text", "grep")]


def test_a_langchain_tool_artifact_never_sent_to_the_model_is_not_judged() -> None:
    message = langchain_messages.ToolMessage(
        content="summary", tool_call_id="c1", artifact={"rows": raw()}
    )
    Guard().check([message], format="langchain")


# -- genuine stubs and segments -------------------------------------------------------------------


def test_a_genuine_stub_passes_even_above_the_threshold() -> None:
    text = stub()
    threshold = len(text.encode()) - 1
    request = chat(
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": text},
    )
    Guard(threshold=threshold).check(request, format="openai-chat")


@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic", "langchain"])
def test_a_genuine_recovered_segment_passes_at_the_default_threshold(fmt: str) -> None:
    text = segment(48 * KiB)
    assert len(text.encode()) > THRESHOLD
    request: Any = (
        [{"role": "user", "content": text}]
        if fmt == "langchain"
        else {"model": "gpt-4o", "messages": [{"role": "user", "content": text}]}
    )
    Guard().check(request, format=fmt, check_window=False)


def test_several_stubs_in_one_tool_result_are_not_a_split_leak() -> None:
    parts = [{"type": "text", "text": stub(f"{i}\n" + raw(), budget="strong")} for i in range(5)]
    request = chat(
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": parts},
    )
    total = sum(len(p["text"].encode()) for p in parts)
    threshold = total - 1  # the parts add up past it, each is a genuine stub
    Guard(threshold=threshold).check(request, format="openai-chat")


def test_a_stub_edited_to_carry_more_than_its_budget_does_not_pass() -> None:
    genuine = stub(budget="light")
    head, _, rest = genuine.partition("--- end of preview ---")
    edited = head + raw(5 * KiB) + "\n--- end of preview ---" + rest
    request = chat({"role": "user", "content": edited})
    error = leak(request, "openai-chat", threshold=4 * KiB)
    assert [f.path for f in error.findings] == ["messages[0].content"]


def test_a_stub_edited_within_its_size_does_not_pass() -> None:
    genuine = stub()
    edited = genuine.replace("booking", "b00king", 1)
    assert edited != genuine
    threshold = len(genuine.encode()) - 1
    Guard(threshold=threshold).check(
        chat({"role": "user", "content": genuine}), format="openai-chat"
    )
    assert leak(chat({"role": "user", "content": edited}), "openai-chat", threshold=threshold)


def test_a_stub_marker_forged_around_raw_content_does_not_pass() -> None:
    genuine = stub()
    first_line = genuine.split("\n", 1)[0]
    last_line = genuine.rsplit("\n", 1)[1]
    forged = f"{first_line}\n{raw()}\n{last_line}"
    assert leak(chat({"role": "user", "content": forged}), "openai-chat").findings


def test_a_segment_marker_forged_around_raw_content_does_not_pass() -> None:
    genuine = segment(40 * KiB)
    header = genuine.split("\n", 1)[0]
    forged = f"{header}\n{raw(40 * KiB)}\n[cargohold:end-recovered]"
    Guard().check(chat({"role": "user", "content": genuine}), format="openai-chat")
    assert leak(chat({"role": "user", "content": forged}), "openai-chat").findings


# -- events, privacy, purity ----------------------------------------------------------------------


def test_one_failure_reports_exactly_one_context_leak_event() -> None:
    rep, sink = reporter()
    request = chat(
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": raw(50 * KiB)},
        {"role": "user", "content": raw()},
    )
    with pytest.raises(ContextLeakError) as caught:
        Guard(reporter=rep).check(request, format="openai-chat")
    assert len(caught.value.findings) == 2
    assert sink.events == [caught.value.event]
    event = sink.events[0]
    assert event.operation is Operation.GUARD
    assert event.outcome is GuardOutcome.CONTEXT_LEAK
    assert event.outcome.value == "llm.context_leak"
    assert event.reason is Reason.RAW_HEAVY_CONTENT
    assert (event.observed_bytes, event.limit_bytes) == (50 * KiB, THRESHOLD)
    assert event.ref is None
    assert event.tool == "fetch_page"
    assert event.agent_id == "guard-test"


def test_a_passing_request_reports_nothing() -> None:
    rep, sink = reporter()
    Guard(reporter=rep).check(chat({"role": "user", "content": stub()}), format="openai-chat")
    assert sink.events == []


def test_a_leak_names_places_never_content() -> None:
    rep, sink = reporter()
    request = chat(
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": raw()},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_url()}}]},
    )
    with pytest.raises(ContextLeakError) as caught:
        check_request(request, format="openai-chat", reporter=rep)
    error = caught.value
    texts = [str(error), repr(error), repr(error.findings), repr(sink.events[0])]
    texts += [json.dumps(sink.events[0].as_dict()), *(f.describe() for f in error.findings)]
    for text in texts:
        assert CANARY not in text
        assert "booking" not in text
        assert "iVBOR" not in text
        assert "PNG" not in text
    assert "messages[1].content" in str(error)


def test_the_guard_never_modifies_the_request() -> None:
    request = chat(
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": raw()},
    )
    before = copy.deepcopy(request)
    with pytest.raises(ContextLeakError):
        Guard().check(request, format="openai-chat")
    assert request == before
    passing = chat({"role": "user", "content": stub()})
    before = copy.deepcopy(passing)
    Guard().check(passing, format="openai-chat")
    assert passing == before


def test_an_unknown_format_is_a_usage_error() -> None:
    from cargohold import UsageError

    with pytest.raises(UsageError):
        Guard().check(chat(), format="gemini")
    with pytest.raises(UsageError):
        Guard().check([], format=RequestFormat.OPENAI_CHAT)


def test_importing_cargohold_and_its_guard_imports_no_sdk() -> None:
    code = (
        "import sys, cargohold, cargohold.guard, cargohold.cli\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('openai', 'anthropic', 'langchain_core', 'httpx', 'httpx2')]\n"
        "print(','.join(bad))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == ""


@pytest.mark.parametrize(
    ("request_", "kind"),
    [
        pytest.param(chat({"role": "system", "content": raw()}), "system_prompt", id="system"),
        pytest.param(
            chat(
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": data_url()}}],
                }
            ),
            "attachment",
            id="attachment",
        ),
        pytest.param(chat({"role": "user", "content": raw()}), "message_text", id="text"),
        pytest.param(
            chat(
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "tool", "tool_call_id": "call_1", "content": raw()},
            ),
            "tool_result",
            id="tool-result",
        ),
        pytest.param(
            chat(
                {
                    "role": "assistant",
                    "content": None,
                    "function_call": {"name": "save_file", "arguments": json.dumps([raw()])},
                }
            ),
            "tool_arguments",
            id="tool-arguments",
        ),
        pytest.param(
            chat(tools=[{"type": "function", "function": {"name": "f", "description": raw()}}]),
            "tool_definitions",
            id="tool-definitions",
        ),
        pytest.param(chat(metadata={"context": raw()}), "request", id="other-key"),
    ],
)
def test_a_leak_event_names_the_kind_of_content_that_leaked(
    request_: dict[str, Any], kind: str
) -> None:
    rep, sink = reporter()
    with pytest.raises(ContextLeakError):
        Guard(reporter=rep).check(request_, format="openai-chat")
    assert sink.events[0].content_kind is ContentKind(kind)
    assert sink.events[0].limit_tokens is None


def test_check_request_given_no_guard_arguments_reads_the_configuration_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import cargohold._config
    from cargohold.guard import _guard

    real = cargohold._config.load_settings
    calls: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(cargohold._config, "load_settings", counted)
    _guard._default_guard.cache_clear()
    try:
        for _ in range(3):
            check_request(chat({"role": "user", "content": "hi"}), format="openai-chat")
        with pytest.raises(ContextLeakError):
            check_request(chat({"role": "user", "content": raw()}), format="openai-chat")
        check_request(chat({"role": "user", "content": "hi"}), format="openai-chat", margin=10)
    finally:
        _guard._default_guard.cache_clear()
    assert len(calls) == 2  # the reused default guard once, the guard given a margin once
