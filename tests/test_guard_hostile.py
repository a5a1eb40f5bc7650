"""The hostile tool suite: what a tool or an SDK feature can do to slip raw content past the guard.

Each way in is refused before anything is sent, and neither the error nor its event carries any
of the content. Forged stubs and segments are the segment binding's suite (issue 18); this one
covers payloads the SDKs encode themselves, text split into parts, and keys used as payloads.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import io
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _require import require
from cargohold import ConfigError, ContentKind, UsageError
from cargohold.guard import (
    ContextLeakError,
    ContextWindowExceededError,
    ContextWindowUnknownError,
    Guard,
    guard_anthropic,
    guard_openai,
)
from guard_fixtures import CANARY, THRESHOLD, KiB, raw, reporter, stub
from test_guard_clients import Recorder, anthropic_client, openai_client

langchain_messages = require("langchain_core.messages", "langchain")

MODEL = "claude-sonnet-5-5"
SECRET = "api_key=sk-live-XYZ"

# A Guard() given no key reads the configured store's marker key: it holds the fixtures'.
pytestmark = pytest.mark.usefixtures("configured_marker_key")


def encoded(size: int) -> int:
    """What ``size`` bytes weigh on the wire once the SDK has base64-encoded them."""
    return 4 * math.ceil(size / 3)


def pdf_bytes(size: int) -> bytes:
    head = b"%PDF-1.7\n" + CANARY.encode() + b"\n"
    return (head + b"0123456789abcdef" * (size // 16 + 1))[:size]


def document(data: Any) -> dict[str, Any]:
    source = {"type": "base64", "media_type": "application/pdf", "data": data}
    return {"type": "document", "source": source}


def anthropic_request(*blocks: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "read it"}, *blocks]}],
        **extra,
    }


def refused(request: Any, fmt: str, **kwargs: Any) -> ContextLeakError:
    rep, sink = reporter()
    with pytest.raises(ContextLeakError) as caught:
        Guard(reporter=rep, **kwargs).check(request, format=fmt)
    error = caught.value
    texts = [str(error), repr(error.findings), json.dumps(sink.events[0].as_dict())]
    for text in texts:
        assert CANARY not in text
        assert "sk-live" not in text
        assert "api_key" not in text
    return error


# -- payloads the SDK encodes itself ----------------------------------------------------------


def test_a_two_megabyte_pdf_passed_as_a_path_is_refused_before_anything_is_sent(
    tmp_path: Path,
) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(pdf_bytes(2 * 1024 * KiB))
    handler = Recorder()
    rep, sink = reporter()
    client = guard_anthropic(anthropic_client(handler), reporter=rep)
    with pytest.raises(ContextLeakError) as caught:
        client.messages.create(**anthropic_request(document(path)))
    assert handler.requests == []
    finding = caught.value.findings[0]
    assert (finding.path, finding.where) == ("messages[0].content[1].source.data", "attachment")
    assert finding.size == encoded(2 * 1024 * KiB)
    assert sink.events[0].content_kind is ContentKind.ATTACHMENT
    assert CANARY not in str(caught.value)


def test_an_open_binary_file_is_refused_by_an_async_client_and_left_where_it_was(
    tmp_path: Path,
) -> None:
    path = tmp_path / "scan.pdf"
    path.write_bytes(pdf_bytes(100 * KiB))
    handler = Recorder()
    client = guard_anthropic(anthropic_client(handler, asynchronous=True))

    async def scenario(stream: io.BufferedReader) -> None:
        with pytest.raises(ContextLeakError) as caught:
            await client.messages.create(**anthropic_request(document(stream)))
        assert caught.value.findings[0].size == encoded(100 * KiB - 10)

    with path.open("rb") as stream:
        stream.seek(10)
        asyncio.run(scenario(stream))
        assert stream.tell() == 10
    assert handler.requests == []


def test_a_small_file_is_counted_as_what_the_sdk_sends_and_still_sent_whole(
    tmp_path: Path,
) -> None:
    body = pdf_bytes(6 * KiB + 1)
    path = tmp_path / "small.pdf"
    path.write_bytes(body)
    empty = Guard().check(anthropic_request(document("")), format="anthropic")
    for data in (path, io.BytesIO(body), body, bytearray(body), memoryview(body)):
        report = Guard().check(anthropic_request(document(data)), format="anthropic")
        assert report.request_bytes - empty.request_bytes == encoded(len(body))
        assert report.estimated_tokens > empty.estimated_tokens + encoded(len(body)) // 2
    handler = Recorder()
    client = guard_anthropic(anthropic_client(handler))
    stream = io.BytesIO(body)
    client.messages.create(**anthropic_request(document(stream)))
    sent = handler.bodies[0]["messages"][0]["content"][1]["source"]["data"]
    assert len(sent) == encoded(len(body))
    assert base64.b64decode(sent) == body


@pytest.mark.parametrize("kind", ["bytes", "path", "stream"])
def test_a_payload_just_below_the_threshold_once_encoded_passes_and_at_it_leaks(
    kind: str, tmp_path: Path
) -> None:
    def request(size: int) -> dict[str, Any]:
        body = pdf_bytes(size)
        data: Any = body
        if kind == "path":
            data = tmp_path / f"{size}.png"
            data.write_bytes(body)
        elif kind == "stream":
            data = io.BytesIO(body)
        source = {"type": "base64", "media_type": "image/png", "data": data}
        message = {"role": "user", "content": [{"type": "image", "source": source}]}
        return {"model": MODEL, "max_tokens": 64, "messages": [message]}

    at = THRESHOLD // 4 * 3 - 2  # the fewest bytes whose base64 is THRESHOLD bytes long
    assert (encoded(at - 1), encoded(at)) == (THRESHOLD - 4, THRESHOLD)
    Guard().check(request(at - 1), format="anthropic")
    error = refused(request(at), "anthropic")
    assert [(f.path, f.size) for f in error.findings] == [
        ("messages[0].content[0].source.data", THRESHOLD)
    ]


def test_a_file_payload_counts_toward_the_window(tmp_path: Path) -> None:
    path = tmp_path / "big.pdf"
    path.write_bytes(pdf_bytes(300 * KiB))
    # The highest threshold there is (1 MiB): the 400 KiB of base64 is no leak, yet it counts.
    guard = Guard(threshold=1024 * KiB, windows={MODEL: 50_000}, margin=0)
    with pytest.raises(ContextWindowExceededError):
        guard.check(anthropic_request(document(path)), format="anthropic")


@pytest.mark.parametrize("threshold", [1024 * KiB + 1, 10**15])
def test_a_guard_threshold_above_the_largest_read_is_a_config_error_and_no_off_switch(
    threshold: int,
) -> None:
    # 64 MiB was accepted: a guard that let every raw result of the providers' sizes through.
    with pytest.raises(ConfigError) as raised:
        Guard(threshold=threshold)
    assert "heavy_threshold: must be at most 1048576 bytes" in str(raised.value)
    with pytest.raises(ConfigError) as raised:
        Guard(tool_thresholds={"dump": threshold})
    assert "tool_thresholds.dump: must be at most 1048576 bytes" in str(raised.value)


@pytest.mark.parametrize("threshold", [0, -1, True, 1.5])
def test_a_guard_threshold_that_is_not_a_positive_byte_count_is_a_usage_error(
    threshold: Any,
) -> None:
    with pytest.raises(UsageError):
        Guard(threshold=threshold)
    with pytest.raises(UsageError):
        Guard(tool_thresholds={"dump": threshold})


def test_a_payload_whose_size_cannot_be_known_without_reading_it_is_refused(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # opening it would block until a writer came: never opened
    refused(anthropic_request(document(fifo)), "anthropic")
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as stream, os.fdopen(write_end, "wb"):
        refused(anthropic_request(document(stream)), "anthropic")


def test_a_missing_or_closed_payload_sends_nothing_and_is_not_a_leak(tmp_path: Path) -> None:
    Guard().check(anthropic_request(document(tmp_path / "absent.pdf")), format="anthropic")
    stream = io.BytesIO(pdf_bytes(100 * KiB))
    stream.close()
    Guard().check(anthropic_request(document(stream)), format="anthropic")


def test_an_image_payload_costs_a_flat_amount_but_is_still_judged(tmp_path: Path) -> None:
    path = tmp_path / "shot.png"
    path.write_bytes(b"\x89PNG" + pdf_bytes(40 * KiB))
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png"}}
    image["source"]["data"] = path
    error = refused(anthropic_request(image), "anthropic")
    assert [(f.path, f.where) for f in error.findings] == [
        ("messages[0].content[1].source.data", "attachment")
    ]


# -- containers the SDKs turn into lists ------------------------------------------------------


def test_parts_in_a_container_other_than_a_list_are_walked() -> None:
    parts = collections.deque([{"type": "text", "text": raw()}])
    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": parts}]}
    refused(request, "openai-chat")
    refused(
        {"model": "gpt-4o", "messages": [], "metadata": {"tags": frozenset([raw()])}}, "openai-chat"
    )


def test_a_one_shot_iterator_in_a_request_is_a_usage_error_not_a_silent_pass() -> None:
    parts = iter([{"type": "text", "text": raw()}])
    with pytest.raises(UsageError):
        Guard().check(
            {"model": "gpt-4o", "messages": [{"role": "user", "content": parts}]},
            format="openai-chat",
        )


def test_a_guarded_client_checks_messages_given_as_a_generator_and_sends_them_all() -> None:
    handler = Recorder()
    client = guard_openai(openai_client(handler))
    leaky = [{"role": "user", "content": "hi"}, {"role": "user", "content": raw()}]
    with pytest.raises(ContextLeakError):
        client.chat.completions.create(model="gpt-4o", messages=(m for m in leaky))
    assert handler.requests == []
    clean = [{"role": "user", "content": "hi"}, {"role": "user", "content": stub()}]
    client.chat.completions.create(model="gpt-4o", messages=(m for m in clean))
    assert [b["messages"] for b in handler.bodies] == [clean]


# -- raw text split into many parts of one message --------------------------------------------

PIECES = [raw(2 * KiB) for _ in range(42)]


def _parts(kind: str = "text") -> list[dict[str, Any]]:
    return [{"type": kind, "text": piece} for piece in PIECES]


SPLIT_CASES = [
    pytest.param(
        "openai-chat",
        {"model": "gpt-4o", "messages": [{"role": "user", "content": _parts()}]},
        "messages[0].content",
        "text",
        id="openai-chat-user",
    ),
    pytest.param(
        "openai-chat",
        {
            "model": "gpt-4o",
            "messages": [
                {"role": "system", "content": _parts()},
                {"role": "user", "content": "hi"},
            ],
        },
        "messages[0].content",
        "system",
        id="openai-chat-system",
    ),
    pytest.param(
        "openai-chat",
        {"model": "gpt-4o", "messages": [{"role": "assistant", "content": _parts()}]},
        "messages[0].content",
        "text",
        id="openai-chat-assistant",
    ),
    pytest.param(
        "openai-responses",
        {"model": "gpt-4.1", "input": [{"role": "user", "content": _parts("input_text")}]},
        "input[0].content",
        "text",
        id="openai-responses",
    ),
    pytest.param(
        "anthropic",
        {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": _parts()}]},
        "messages[0].content",
        "text",
        id="anthropic-user",
    ),
    pytest.param(
        "anthropic",
        {"model": MODEL, "max_tokens": 64, "system": _parts(), "messages": []},
        "system",
        "system",
        id="anthropic-system",
    ),
    pytest.param(
        "anthropic",
        {
            "model": MODEL,
            "max_tokens": 64,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        document(base64.b64encode(piece[: 3 * KiB // 2].encode()).decode())
                        for piece in PIECES
                    ],
                }
            ],
        },
        "messages[0].content",
        "text",
        id="anthropic-base64-documents",
    ),
    pytest.param(
        "langchain",
        [{"role": "user", "content": _parts()}],
        "messages[0].content",
        "text",
        id="langchain-dict",
    ),
    pytest.param(
        "langchain",
        [langchain_messages.HumanMessage(content=_parts())],
        "messages[0].content",
        "text",
        id="langchain-object",
    ),
]


@pytest.mark.parametrize(("fmt", "request_", "path", "where"), SPLIT_CASES)
def test_raw_text_split_into_many_parts_of_one_message_is_refused(
    fmt: str, request_: Any, path: str, where: str
) -> None:
    error = refused(request_, fmt)
    assert [(f.path, f.where) for f in error.findings] == [(path, where)]
    assert error.findings[0].size >= sum(len(p) for p in PIECES)


def _message_in_two_parts(total: int) -> dict[str, Any]:
    """A user message of two text parts whose texts add up to ``total`` bytes (the parts'
    ``type`` is not text the model reads, and is not counted)."""
    parts = [{"type": "text", "text": raw(size)} for size in (total // 2, total - total // 2)]
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": parts}]}


def test_a_message_split_in_parts_just_below_the_threshold_passes_and_at_it_leaks() -> None:
    Guard().check(_message_in_two_parts(THRESHOLD - 1), format="openai-chat")
    error = refused(_message_in_two_parts(THRESHOLD), "openai-chat")
    assert [(f.path, f.size, f.message_index) for f in error.findings] == [
        ("messages[0].content", THRESHOLD, 0)
    ]


def test_a_guarded_client_refuses_split_text_before_sending_it() -> None:
    handler = Recorder()
    client = guard_anthropic(anthropic_client(handler))
    with pytest.raises(ContextLeakError):
        client.messages.create(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": _parts()}]
        )
    assert handler.requests == []


def test_genuine_stubs_and_small_inline_images_in_one_message_do_not_add_up() -> None:
    parts: list[dict[str, Any]] = [
        {"type": "text", "text": stub(f"{i}\n" + raw(), budget="strong")} for i in range(5)
    ]
    total = sum(len(p["text"].encode()) for p in parts)
    Guard(threshold=total - 1).check(
        {"model": "gpt-4o", "messages": [{"role": "user", "content": parts}]},
        format="openai-chat",
    )
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 24 * KiB}}
    message = {"role": "user", "content": [{"type": "text", "text": raw(20 * KiB)}, image, image]}
    Guard().check({"model": "gpt-4o", "messages": [message]}, format="openai-chat")


def test_separate_tool_results_in_one_message_are_judged_each_on_its_own() -> None:
    blocks = [
        {"type": "tool_result", "tool_use_id": f"t{i}", "content": raw(20 * KiB)} for i in range(3)
    ]
    request = {"model": MODEL, "messages": [{"role": "user", "content": blocks}]}
    Guard().check(request, format="anthropic")


# -- keys used as payloads ---------------------------------------------------------------------


def test_a_request_key_never_appears_in_the_error() -> None:
    request = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "hi"}],
        "metadata": {"run": "r1", "tag": "t", "note": "n", SECRET: raw()},
    }
    error = refused(request, "openai-chat")
    assert [f.path for f in error.findings] == ["metadata.<key 3: str, 19 chars>"]


def test_a_tool_arguments_key_never_appears_in_the_error() -> None:
    block = {"type": "tool_use", "id": "t1", "name": "save", "input": {SECRET: raw()}}
    request = {"model": MODEL, "messages": [{"role": "assistant", "content": [block]}]}
    error = refused(request, "anthropic")
    assert [(f.path, f.tool) for f in error.findings] == [
        ("messages[0].content[0].input.<key 0: str, 19 chars>", "save")
    ]


@pytest.mark.parametrize(
    ("fmt", "request_", "path"),
    [
        pytest.param(
            "openai-chat",
            {"model": "gpt-4o", "messages": [], "metadata": {raw(): "x"}},
            "metadata.<key 0: str, 40,960 chars>",
            id="metadata",
        ),
        pytest.param(
            "openai-chat",
            {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi", raw(): "x"}]},
            "messages[0].<key 2: str, 40,960 chars>",
            id="chat-message-string-value",
        ),
        pytest.param(
            "openai-chat",
            {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi", raw(): None}]},
            "messages[0].<key 2: str, 40,960 chars>",
            id="chat-message-null-value",
        ),
        pytest.param(
            "openai-chat",
            {
                "model": "gpt-4o",
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "a", raw(): 1}]}
                ],
            },
            "messages[0].content[0].<key 2: str, 40,960 chars>",
            id="chat-text-part",
        ),
        pytest.param(
            "anthropic",
            {
                "model": MODEL,
                "messages": [
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "tool_use", "id": "t1", "name": "f", "input": {raw(): 1}}
                        ],
                    }
                ],
            },
            "messages[0].content[0].input.<key 0: str, 40,960 chars>",
            id="anthropic-tool-input",
        ),
        pytest.param(
            "langchain",
            [{"role": "user", "content": "hi", "additional_kwargs": {raw(): 1}}],
            "messages[0].additional_kwargs.<key 0: str, 40,960 chars>",
            id="langchain-kwargs",
        ),
    ],
)
def test_a_heavy_string_used_as_a_key_is_raw_content(fmt: str, request_: Any, path: str) -> None:
    error = refused(request_, fmt)
    assert [f.path for f in error.findings] == [path]
    assert error.findings[0].size == 40 * KiB


def test_identifier_keys_are_named_and_other_keys_only_described() -> None:
    request = {
        "model": "gpt-4o",
        "messages": [],
        "metadata": {"user_id": raw(), 7: raw(), "x" * 42: raw()},
    }
    error = refused(request, "openai-chat")
    assert [f.path for f in error.findings] == [
        "metadata.user_id",
        "metadata.<key 1: int>",
        "metadata.<key 2: str, 42 chars>",
    ]


def test_a_model_name_that_is_not_a_name_is_not_echoed() -> None:
    body = {"messages": [{"role": "user", "content": raw(20 * KiB)}]}
    with pytest.raises(ContextWindowExceededError) as caught:
        Guard(windows={"gpt-4o": 100}, margin=0).check(
            {"model": f"gpt-4o-{SECRET}", **body}, format="openai-chat"
        )
    assert "sk-live" not in str(caught.value)
    assert "api_key" not in str(caught.value)
    assert "<model: str, 26 chars>" in str(caught.value)


def test_a_strict_guard_does_not_echo_a_model_name_that_is_not_a_name() -> None:
    body = {"model": SECRET, "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(ContextWindowUnknownError) as caught:
        Guard(strict_window=True).check(body, format="openai-chat")
    assert "sk-live" not in str(caught.value)
    assert "api_key" not in str(caught.value)


def test_a_chat_message_with_a_key_that_is_not_a_string_is_a_usage_error() -> None:
    message = {"role": "user", "content": "hi", 5: "x"}
    with pytest.raises(UsageError):
        Guard().check({"model": "gpt-4o", "messages": [message]}, format="openai-chat")


# -- nesting: no depth gets past the guard, and none escapes as a RecursionError --------------


def _nest(depth: int, kind: str, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


def _deep_request(place: str, value: Any) -> tuple[dict[str, Any], str]:
    if place == "metadata":
        return {"model": "gpt-4o", "messages": [], "metadata": value}, "openai-chat"
    if place == "tool_result":
        messages = [{"role": "tool", "tool_call_id": "c1", "content": [value]}]
        return {"model": "gpt-4o", "messages": messages}, "openai-chat"
    if place == "tool_input":
        block = {"type": "tool_use", "id": "t1", "name": "save", "input": {"body": value}}
        return anthropic_request(block), "anthropic"
    return {"model": "gpt-4.1", "input": [{"role": "user", "content": [value]}]}, "openai-responses"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    depth=st.one_of(st.integers(1, 1_200), st.integers(1, 100_000)),
    kind=st.sampled_from(("list", "dict")),
    place=st.sampled_from(("metadata", "tool_result", "tool_input", "responses")),
)
def test_raw_content_at_any_depth_is_refused_and_never_a_recursion_error(
    depth: int, kind: str, place: str
) -> None:
    request, fmt = _deep_request(place, _nest(depth, kind, raw()))
    with pytest.raises((ContextLeakError, UsageError)):  # found, or too deep to check: not sent
        Guard().check(request, format=fmt)
    request, fmt = _deep_request(place, _nest(depth, kind, "small"))
    try:
        report = Guard().check(request, format=fmt, check_window=False)
    except UsageError:
        return  # too deep to check: refused, typed
    assert report.request_bytes >= len("small")


@pytest.mark.parametrize(
    ("request_", "fmt"),
    [
        (
            {"model": "m", "input": [{"type": {}, "role": "user", "content": raw()}]},
            "openai-responses",
        ),
        (
            {
                "model": "m",
                "messages": [{"role": "user", "content": [{"type": {}, "text": raw()}]}],
            },
            "openai-chat",
        ),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": [], "t": raw()}]}]},
            "anthropic",
        ),
        (
            anthropic_request(
                {
                    "type": "tool_use",
                    "id": "t",
                    "name": "n",
                    "input": {"type": ["image"], "q": raw()},
                }
            ),
            "anthropic",
        ),
    ],
)
def test_a_block_whose_type_is_not_a_string_is_judged_not_a_type_error(
    request_: dict[str, Any], fmt: str
) -> None:
    with pytest.raises(ContextLeakError):
        Guard().check(request_, format=fmt)
