"""The read tools as data: specs every SDK accepts, exact paging, and a fix for every mistake.

Everything is driven through ``cargohold.open(...)`` and ``Hold.call_tool``, the way a model's
tool call reaches cargohold: arguments as the model sent them, answers as the model sees them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import hashlib
import json
import os
import re
import select
import struct
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example as case
from hypothesis import given, settings
from hypothesis import strategies as st

import cargohold
from _require import require, unavailable
from cargohold import Hold, MemoryStore, ReadOutcome, Ref, ToolAnswer, parse_segment
from cargohold.testing import FakeClock

TENANT, USER, SESSION = "tenant-acme", "user-ana", "session-1"
BUDGET = 16 * 1024  # the default read budget
CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
TOOL_NAMES = (
    "artifact_info",
    "artifact_read",
    "artifact_read_lines",
    "artifact_grep",
    "artifact_query",
    "artifact_search",
    "artifact_patch",
)
STRUCTURED_KEYS = {
    "tool",
    "outcome",
    "ref",
    "start",
    "end",
    "next_offset",
    "size",
    "sha256",
    "encoding",
}

ROWS = [
    {"id": index, "status": "refunded" if index % 5 == 0 else "paid", "city": "Zürich"}
    for index in range(1, 401)
]
DOC = json.dumps(ROWS, ensure_ascii=False, indent=1).encode()  # JSON, on many lines
LOG = "".join(
    f"2026-03-01T10:{index // 60:02d}:{index % 60:02d}Z {'ERROR' if index % 7 == 0 else 'INFO'} "
    f"request {index} served by café-{index % 3} in {index * 13 % 900} ms\n"
    for index in range(1, 2001)
).encode()
NEEDLE = "NEEDLE-7f3a9c"


def open_hold(store: Any = "memory://", *, tenant: str = TENANT, session: str = SESSION) -> Hold:
    return cargohold.open(store, tenant=tenant, user=USER, session=session)


@pytest.fixture
def hold() -> Iterator[Hold]:
    with open_hold() as opened:
        yield opened


def put(hold: Hold, data: bytes, media_type: str | None = None) -> str:
    return str(hold.store.put(data, media_type=media_type, tool="fixture").ref)


def corpus_file(name: str) -> bytes:
    path = CORPUS / name
    if not path.is_file():
        unavailable(f"the shared corpus file {name} is not at {CORPUS}")
    return path.read_bytes()


def utf8_len(text: str | None) -> int:
    return len((text or "").encode("utf-8", "surrogatepass"))


def minified_json(rows: int, needle_every: int) -> tuple[bytes, list[int]]:
    """One line of minified JSON (multi-byte characters before every needle, so characters and
    bytes disagree) and the byte offset of each needle in it."""
    document = [
        {"id": index, "city": "Zürich ☕", "tag": NEEDLE if index % needle_every == 7 else "plain"}
        for index in range(rows)
    ]
    body = json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
    offsets, at = [], body.find(NEEDLE.encode())
    while at >= 0:
        offsets.append(at)
        at = body.find(NEEDLE.encode(), at + 1)
    return body, offsets


# -- the specs, as each SDK's own types see them ---------------------------------------------


def test_the_read_tools_are_named_in_the_order_a_stub_names_them(hold: Hold) -> None:
    assert tuple(spec.name for spec in hold.tools.specs) == TOOL_NAMES
    assert [tool["function"]["name"] for tool in hold.tools.openai()] == list(TOOL_NAMES)
    assert [tool["name"] for tool in hold.tools.openai_responses()] == list(TOOL_NAMES)
    assert [tool["name"] for tool in hold.tools.anthropic()] == list(TOOL_NAMES)
    assert [tool["name"] for tool in hold.tools.mcp()] == list(TOOL_NAMES)


def test_each_spec_is_an_openai_chat_tool_as_the_sdk_types_it(hold: Hold) -> None:
    pydantic = require("pydantic", "openai")
    chat = require("openai.types.chat", "openai")
    for spec in hold.tools.specs:
        exported = spec.openai()
        for typed in (chat.ChatCompletionFunctionToolParam, chat.ChatCompletionToolParam):
            # validation drops keys the type does not declare: equality means none were dropped
            assert pydantic.TypeAdapter(typed).validate_python(exported, strict=True) == exported


def test_each_spec_is_an_openai_responses_tool_as_the_sdk_types_it(hold: Hold) -> None:
    pydantic = require("pydantic", "openai")
    responses = require("openai.types.responses", "openai")
    adapter = pydantic.TypeAdapter(responses.FunctionToolParam)
    for spec in hold.tools.specs:
        exported = spec.openai_responses()
        assert adapter.validate_python(exported, strict=True) == exported


def test_each_spec_is_an_anthropic_tool_as_the_sdk_types_it(hold: Hold) -> None:
    pydantic = require("pydantic", "anthropic")
    types = require("anthropic.types", "anthropic")
    adapter = pydantic.TypeAdapter(types.ToolParam)
    for spec in hold.tools.specs:
        exported = spec.anthropic()
        assert adapter.validate_python(exported, strict=True) == exported


def test_each_spec_is_an_idempotent_mcp_tool_read_only_but_the_patch_that_only_adds(
    hold: Hold,
) -> None:
    types = require("mcp.types", "mcp")
    for spec in hold.tools.specs:
        tool = types.Tool.model_validate(spec.mcp())
        assert tool.name == spec.name
        assert tool.input_schema == dict(spec.parameters)
        assert tool.annotations.read_only_hint is (spec.name != "artifact_patch")
        assert tool.annotations.destructive_hint in (None, False)
        assert tool.annotations.idempotent_hint is True
        assert tool.annotations.open_world_hint is False
        assert tool.model_dump(by_alias=True, exclude_none=True, mode="json") == spec.mcp()


VALID_ARGUMENTS: dict[str, list[dict[str, Any]]] = {
    "artifact_info": [{"ref": "REF"}],
    "artifact_read": [
        {"ref": "REF"},
        {"ref": "REF", "offset": 100, "length": 50},
        {"ref": "REF", "offset": 3.0, "length": 0, "budget": 1},  # a whole float is an integer
        {"ref": "REF", "budget": 1024 * 1024},
    ],
    "artifact_read_lines": [
        {"ref": "REF", "start_line": 1},
        {"ref": "REF", "start_line": 2, "end_line": 5, "budget": 4096},
    ],
    "artifact_grep": [
        {"ref": "REF", "pattern": "refunded"},
        {"ref": "REF", "pattern": "PAID", "ignore_case": True, "max_matches": 3, "budget": 512},
    ],
    "artifact_query": [
        {"ref": "REF", "expression": "length(@)"},
        {"ref": "REF", "expression": "[?status=='refunded'].id | [:5]", "budget": 256},
    ],
    "artifact_search": [
        {"query": "refunded"},
        {"query": "refunded paid", "limit": 3, "budget": 2048},
    ],
    "artifact_patch": [
        {"ref": "REF", "json_patch": [{"op": "test", "path": "/0/id", "value": 1}]},
        {"ref": "REF", "json_patch": [{"op": "replace", "path": "/4/status", "value": "void"}]},
        {"ref": "REF", "json_patch": [{"op": "move", "from": "/0", "path": "/-"}]},
        {"ref": "REF", "edits": [{"start_line": 2, "end_line": 1, "lines": []}]},
        {
            "ref": "REF",
            "edits": [{"offset": 0, "length": 1, "text": "["}, {"offset": 5, "text": ""}],
        },
    ],
}
REJECTED_ARGUMENTS: list[tuple[str, dict[str, Any]]] = [
    ("artifact_info", {}),
    ("artifact_info", {"ref": "REF", "offset": 1}),
    ("artifact_read", {"ref": "REF", "lenght": 5}),
    ("artifact_read", {"ref": "REF", "offset": "5"}),
    ("artifact_read", {"ref": "REF", "offset": -1}),
    ("artifact_read", {"ref": "REF", "length": True}),
    ("artifact_read", {"ref": "REF", "budget": 0}),
    ("artifact_read", {"ref": "REF", "budget": 1024 * 1024 + 1}),
    ("artifact_read", {"ref": 42}),
    ("artifact_read_lines", {"ref": "REF"}),
    ("artifact_read_lines", {"ref": "REF", "start_line": 0}),
    ("artifact_read_lines", {"ref": "REF", "start_line": 1.5}),
    ("artifact_grep", {"ref": "REF"}),
    ("artifact_grep", {"ref": "REF", "pattern": "x", "ignore_case": "yes"}),
    ("artifact_grep", {"ref": "REF", "pattern": "x", "max_matches": 0}),
    ("artifact_query", {"ref": "REF", "expression": "a", "budget": False}),
    ("artifact_search", {}),
    ("artifact_search", {"query": ""}),
    ("artifact_search", {"query": "x", "limit": 101}),
    ("artifact_search", {"query": "x", "ref": "REF"}),
    ("artifact_patch", {"ref": "REF", "json_patch": []}),
    ("artifact_patch", {"ref": "REF", "json_patch": [{"op": "frob", "path": "/0"}]}),
    ("artifact_patch", {"ref": "REF", "json_patch": [{"op": "add", "value": 1}]}),
    ("artifact_patch", {"ref": "REF", "edits": [{"offset": -1, "text": ""}]}),
    ("artifact_patch", {"ref": "REF", "edits": [{"start_line": 1, "lines": ["a"], "to": 2}]}),
    ("artifact_patch", {"ref": "REF", "edits": [{"start_line": 1, "lines": "a"}]}),
    ("artifact_patch", {"ref": "REF", "edits": [{"offset": 3}]}),
    ("artifact_patch", {"ref": "REF", "json_patch": [], "budget": 10}),
]


def with_ref(arguments: dict[str, Any], ref: str) -> dict[str, Any]:
    return {key: ref if value == "REF" else value for key, value in arguments.items()}


def test_each_parameters_object_is_json_schema_that_accepts_the_example_calls(hold: Hold) -> None:
    jsonschema = require("jsonschema", "mcp")
    ref = put(hold, DOC, "application/json")
    for spec in hold.tools.specs:
        jsonschema.Draft202012Validator.check_schema(spec.parameters)
        validator = jsonschema.Draft202012Validator(spec.parameters)
        for example in VALID_ARGUMENTS[spec.name]:
            arguments = with_ref(example, ref)
            validator.validate(arguments)
            answer = hold.call_tool(spec.name, arguments)
            assert answer.outcome in {"resolved", "over_budget"}, answer.text


@pytest.mark.parametrize(("name", "arguments"), REJECTED_ARGUMENTS)
def test_a_call_the_schema_rejects_is_answered_as_invalid_arguments(
    hold: Hold, name: str, arguments: dict[str, Any]
) -> None:
    jsonschema = require("jsonschema", "mcp")
    ref = put(hold, DOC, "application/json")
    arguments = with_ref(arguments, ref)
    spec = hold.tools.spec(name)
    assert not jsonschema.Draft202012Validator(spec.parameters).is_valid(arguments)
    assert hold.call_tool(name, arguments).outcome == "invalid_arguments"


# -- paging reassembles a body exactly -----------------------------------------------------


def page_through(hold: Hold, ref: str, *, length: int, budget: int, size: int) -> list[ToolAnswer]:
    """Read ``ref`` page by page, from ``next_offset`` to ``next_offset``, as a client would."""
    answers: list[ToolAnswer] = []
    offset: int | None = 0
    while offset is not None:
        assert len(answers) <= size, "paging did not end"  # each page but the last has bytes
        answer = hold.call_tool(
            "artifact_read", {"ref": ref, "offset": offset, "length": length, "budget": budget}
        )
        assert answer.outcome == "resolved", answer.text
        data = answer.data()
        assert data is not None
        assert (answer.start, answer.end, answer.size) == (offset, offset + len(data), size)
        assert answer.sha256 == hashlib.sha256(data).hexdigest()
        assert utf8_len(answer.content) <= budget
        answers.append(answer)
        offset = answer.next_offset
    return answers


@pytest.mark.parametrize("where", ["memory", "local"])
@pytest.mark.parametrize(
    ("name", "media_type", "encoding", "length"),
    [
        ("hdfs_2k.log", "text/plain", "utf-8", BUDGET),
        ("torus_render.png", "image/png", "base64", BUDGET // 4 * 3),  # base64: 4 bytes per 3
    ],
)
def test_paging_artifact_read_reassembles_a_corpus_file_exactly(
    tmp_path: Path, where: str, name: str, media_type: str, encoding: str, length: int
) -> None:
    body = corpus_file(name)
    store = "memory://" if where == "memory" else tmp_path / "store"
    with open_hold(store) as hold:
        offloaded = hold.offload(body, tool="fixture", media_type=media_type)
        assert offloaded.ref is not None
        answers = page_through(
            hold, str(offloaded.ref), length=length, budget=BUDGET, size=len(body)
        )
    assert b"".join(answer.data() or b"" for answer in answers) == body
    assert {answer.encoding for answer in answers} == {encoding}
    assert len(answers) == -(-len(body) // length)
    assert answers[-1].end == len(body)


@pytest.mark.parametrize(
    "body",
    [
        "naïve café ☕ ".encode() * 40 + "☕".encode()[:2],  # text cut inside its last character
        b"\x00\x01" + "☕".encode()[1:],  # binary, then bytes that only continue a character
    ],
    ids=["text-cut-mid-character", "binary-then-continuation-bytes"],
)
@pytest.mark.parametrize("length", [1, 4, 7, 64])
def test_paging_ends_and_returns_every_byte_when_a_page_is_only_part_of_a_character(
    hold: Hold, body: bytes, length: int
) -> None:
    ref = put(hold, body)
    answers = page_through(hold, ref, length=length, budget=BUDGET, size=len(body))
    assert b"".join(answer.data() or b"" for answer in answers) == body


def test_pages_shorter_than_a_character_leave_no_byte_unread(hold: Hold) -> None:
    body = "☕ ☕ ☕".encode()
    ref = put(hold, body)
    answers = page_through(hold, ref, length=2, budget=BUDGET, size=len(body))
    assert b"".join(answer.data() or b"" for answer in answers) == body


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=80),
    length=st.integers(4, 12),  # a page of 4 bytes always holds a whole character
)
def test_paging_any_utf8_text_reassembles_it_exactly(text: str, length: int) -> None:
    body = text.encode()
    with open_hold() as hold:
        answers = page_through(hold, put(hold, body), length=length, budget=64, size=len(body))
    assert b"".join(answer.data() or b"" for answer in answers) == body


# -- every mistake is an answer that names its fix -----------------------------------------

# (tool, arguments, what the text must name); REF is a stored JSON artifact, LOG_REF a text one
MISTAKES: list[tuple[str, Any, list[str]]] = [
    ("artifact_read", {"ref": "sha256:abc"}, ["artifact://sha256/", '"sha256:abc"']),
    ("artifact_read", {"ref": "artifact://sha256/" + "a" * 63}, ["artifact://sha256/", "64"]),
    ("artifact_read", {"ref": 42}, ["artifact://sha256/"]),
    ("artifact_reed", {"ref": "REF"}, ["'artifact_reed'", *TOOL_NAMES]),
    ("artifact_read", {"ref": "REF", "lenght": 5}, ["'lenght'", "ref, offset, length, budget"]),
    ("artifact_read", '{"ref": "artifact://sha256/', ["not valid JSON", "JSON object"]),
    ("artifact_read", "[1, 2]", ["one JSON object"]),
    ("artifact_read", None, ["ref is required"]),
    ("artifact_read", {"ref": "REF", "offset": "5"}, ["offset must be a whole number", '"5"']),
    ("artifact_read", {"ref": "REF", "length": True}, ["length must be a whole number", "true"]),
    ("artifact_read", {"ref": "REF", "offset": -1}, ["offset must be at least 0", "-1"]),
    ("artifact_read", {"ref": "REF", "budget": 2_000_000}, ["1048576"]),
    ("artifact_read_lines", {"ref": "REF"}, ["start_line is required"]),
    (
        "artifact_read_lines",
        {"ref": "REF", "start_line": 9, "end_line": 3},
        ["end_line (3)", "start_line (9)", "start_line=9 end_line=9"],
    ),
    ("artifact_grep", {"ref": "REF", "pattern": "(abc"}, ["RE2", "at character 1"]),
    ("artifact_grep", {"ref": "REF", "pattern": "ab(?<=x)y"}, ["at character 3", "lookaround"]),
    ("artifact_grep", {"ref": "REF", "pattern": r"(a)\1"}, ["at character 4", "backreferences"]),
    ("artifact_grep", {"ref": "REF", "pattern": "x", "ignore_case": "yes"}, ["ignore_case"]),
    ("artifact_grep", {"ref": "REF", "pattern": ""}, ["pattern must be a non-empty string"]),
    ("artifact_query", {"ref": "REF", "expression": "[?status=='paid'"}, ["at character 17"]),
    ("artifact_query", {"ref": "REF", "expression": "a..b"}, ["at character 3", "'.'"]),
    ("artifact_query", {"ref": "LOG_REF", "expression": "length(@)"}, ["artifact_grep"]),
    # runtime errors name the function and the types, never the value
    (
        "artifact_query",
        {"ref": "REF", "expression": "length([0].id)"},
        ["length() expects", "array|object|string, got number"],
    ),
    (
        "artifact_query",
        {"ref": "REF", "expression": "sort(@)"},
        ["sort() expects", "got an array holding object"],
    ),
    (
        "artifact_query",
        {"ref": "REF", "expression": "length(@, @)"},
        ["length() takes 1 argument, got 2"],
    ),
    (
        "artifact_query",
        {"ref": "REF", "expression": "lenght(@)"},
        ["no function lenght()", "length"],
    ),
]


@pytest.mark.parametrize(("name", "arguments", "named"), MISTAKES)
def test_a_mistaken_call_is_answered_with_its_fix_never_an_exception(
    hold: Hold, name: str, arguments: Any, named: list[str]
) -> None:
    refs = {"REF": put(hold, DOC, "application/json"), "LOG_REF": put(hold, LOG, "text/plain")}
    if isinstance(arguments, dict):
        arguments = {key: refs.get(value, value) for key, value in arguments.items()}
    answer = hold.call_tool(name, arguments)
    assert answer.outcome == "invalid_arguments"
    assert answer.is_error
    assert (answer.content, answer.data(), answer.ref) == (None, None, None)
    for fragment in named:
        assert fragment in answer.text


@pytest.mark.parametrize("spelled", [str.lower, str.upper, lambda digest: f"  {digest}\n"])
def test_a_bare_digest_is_taken_as_the_reference_it_names(hold: Hold, spelled: Any) -> None:
    ref = Ref.parse(put(hold, LOG, "text/plain"))
    answer = hold.call_tool("artifact_read", {"ref": spelled(ref.digest), "length": 10})
    assert answer.outcome == "resolved"
    assert answer.ref == ref
    assert answer.data() == LOG[:10]


@pytest.mark.parametrize(
    ("name", "media_type", "length"),
    [("hdfs_2k.log", "text/plain", BUDGET), ("torus_render.png", "image/png", BUDGET // 4 * 3)],
)
def test_an_over_budget_read_names_a_byte_range_that_resolves(
    hold: Hold, name: str, media_type: str, length: int
) -> None:
    body = corpus_file(name)
    ref = put(hold, body, media_type)
    answer = hold.call_tool("artifact_read", {"ref": ref, "offset": 1000})
    assert answer.outcome == "over_budget"
    assert answer.content is None
    assert answer.size == len(body)
    suggested = re.search(r"offset=(\d+) length=(\d+)", answer.text)
    assert suggested is not None, answer.text
    offset, suggested_length = int(suggested[1]), int(suggested[2])
    assert (offset, suggested_length) == (1000, length)
    assert f"continue from offset={offset + suggested_length}" in answer.text
    fixed = hold.call_tool("artifact_read", {"ref": ref, "offset": offset, "length": length})
    assert fixed.outcome == "resolved", fixed.text
    assert fixed.data() == body[offset : offset + length]


def test_an_over_budget_line_read_names_lines_that_resolve(hold: Hold) -> None:
    ref = put(hold, LOG, "text/plain")
    lines = LOG.decode().splitlines(keepends=True)
    answer = hold.call_tool("artifact_read_lines", {"ref": ref, "start_line": 101})
    assert answer.outcome == "over_budget"
    suggested = re.search(r"start_line=(\d+) end_line=(\d+)", answer.text)
    assert suggested is not None, answer.text
    first, last = int(suggested[1]), int(suggested[2])
    assert first == 101
    fixed = hold.call_tool(
        "artifact_read_lines", {"ref": ref, "start_line": first, "end_line": last}
    )
    assert fixed.outcome == "resolved", fixed.text
    assert fixed.data() == "".join(lines[first - 1 : last]).encode()
    assert utf8_len(fixed.content) <= BUDGET
    one_more = "".join(lines[first - 1 : last + 1]).encode()
    assert len(one_more) > BUDGET  # the most whole lines that fit, not merely some


def test_a_line_longer_than_the_budget_points_to_byte_reads_instead_of_lines(hold: Hold) -> None:
    ref = put(hold, b"short\n" + b"x" * 40_000 + b"\nend\n", "text/plain")
    answer = hold.call_tool("artifact_read_lines", {"ref": ref, "start_line": 2})
    assert answer.outcome == "over_budget"
    assert "artifact_read" in answer.text
    assert "start_line=" not in answer.text  # no line range fits, so none is suggested


def test_another_tenants_artifact_is_missing() -> None:
    backend = MemoryStore()
    try:
        with open_hold(backend) as owner, open_hold(backend, tenant="tenant-globex") as other:
            ref = put(owner, DOC, "application/json")
            for name, arguments in valid_calls(ref):
                answer = other.call_tool(name, arguments)
                assert answer.outcome == "missing", name
                assert (answer.content, answer.size) == (None, None)
    finally:
        backend.close()


def test_another_sessions_artifact_is_unauthorized(hold: Hold) -> None:
    ref = put(hold, DOC, "application/json")
    other = hold.derive(session="session-2")
    for name, arguments in valid_calls(ref):
        answer = other.call_tool(name, arguments)
        assert answer.outcome == "unauthorized", name
        assert answer.content is None
        assert answer.is_error
        # The size of another session's artifact is no answer of this one (an oracle).
        assert answer.structured()["size"] is None, name
        assert f"{len(DOC):,}" not in answer.text, name


def test_an_expired_artifact_is_expired_for_every_tool() -> None:
    clock = FakeClock()
    backend = MemoryStore(clock=clock)
    try:
        with open_hold(backend) as hold:
            ref = str(hold.store.put(DOC, media_type="application/json", ttl=60).ref)
            assert hold.call_tool("artifact_read", {"ref": ref, "length": 5}).ok
            clock.advance(61)
            for name, arguments in valid_calls(ref):
                answer = hold.call_tool(name, arguments)
                assert answer.outcome == "expired", name
                assert answer.content is None
                assert "Re-run" in answer.text
            assert hold.call_tool("artifact_info", {"ref": ref}).size == len(DOC)
    finally:
        backend.close()


def test_corrupted_bytes_are_stale_and_never_returned() -> None:
    backend = MemoryStore()
    try:
        with open_hold(backend) as hold:
            ref = put(hold, DOC, "application/json")
            backend.corrupt_for_tests(TENANT, Ref.parse(ref), offset=0)
            for name, arguments in valid_calls(ref):
                if name == "artifact_info":
                    continue  # reads no bytes, so cannot tell: see the info test
                answer = hold.call_tool(name, arguments)
                assert answer.outcome == "stale", name
                assert (answer.content, answer.sha256) == (None, None)
    finally:
        backend.close()


def valid_calls(ref: str) -> list[tuple[str, dict[str, Any]]]:
    """One well-formed call of each tool on a JSON artifact."""
    return [
        ("artifact_info", {"ref": ref}),
        ("artifact_read", {"ref": ref, "offset": 0, "length": 100}),
        ("artifact_read_lines", {"ref": ref, "start_line": 1, "end_line": 5}),
        ("artifact_grep", {"ref": ref, "pattern": "refunded"}),
        ("artifact_query", {"ref": ref, "expression": "length(@)"}),
        ("artifact_patch", {"ref": ref, "json_patch": [{"op": "remove", "path": "/0"}]}),
    ]


# -- grep on one very long line ------------------------------------------------------------


def test_grep_on_one_very_long_line_shows_excerpts_naming_each_matchs_byte_offset(
    hold: Hold,
) -> None:
    body, offsets = minified_json(45_000, needle_every=9_000)
    assert len(body) > 2 * 1024 * 1024
    assert b"\n" not in body
    assert len(offsets) == 5
    ref = put(hold, body, "application/json")
    answer = hold.call_tool("artifact_grep", {"ref": ref, "pattern": "NEEDLE-[0-9a-f]+"})
    assert answer.outcome == "resolved"
    assert utf8_len(answer.content) <= BUDGET
    excerpts = re.findall(
        r"^1: \[byte (\d+); line of ([\d,]+) chars\] \.\.\.(.*)\.\.\.$", answer.content or "", re.M
    )
    assert [int(at) for at, _, _ in excerpts] == offsets
    assert {chars for _, chars, _ in excerpts} == {f"{len(body.decode()):,}"}
    for _, _, window in excerpts:
        assert NEEDLE in window
        assert len(window) <= 400
    assert (answer.content or "").endswith("[1 matching line; 5 shown]")
    for offset in offsets:
        exact = hold.call_tool(
            "artifact_read", {"ref": ref, "offset": offset, "length": len(NEEDLE)}
        )
        assert exact.content == NEEDLE


@pytest.mark.parametrize(
    ("before", "match", "after"),
    [
        ("é" * 380, NEEDLE, "-" * 7),  # 400 characters (780 bytes): shown whole
        ("é" * 380, NEEDLE, "-" * 8),  # 401: an excerpt
        ("☕" * 50, NEEDLE, "x" * 2000),  # fewer than 100 characters before the match
        ("a" * 3000, NEEDLE, "é" * 3000),  # deep inside a long line
        ("a" * 700, NEEDLE + "Z" * 600, "b" * 50),  # a match longer than an excerpt
    ],
    ids=["400-chars", "401-chars", "near-start", "middle", "long-match"],
)
def test_grep_shows_lines_up_to_400_characters_whole_and_longer_ones_as_bounded_excerpts(
    hold: Hold, before: str, match: str, after: str
) -> None:
    line = before + match + after
    body = ("short first line\n" + line + "\n").encode()
    ref = put(hold, body, "text/plain")

    answer = hold.call_tool("artifact_grep", {"ref": ref, "pattern": NEEDLE + "Z*"})

    assert answer.outcome == "resolved"
    if len(line) <= 400:
        expected = f"2: {line}\n"
    else:  # up to 100 characters before the match, at least 200 and at most 400 in all
        first, last = len(before), len(before) + len(match)
        begin = max(0, first - 100)
        window = line[begin : max(last, begin + 200)][:400]
        offset = body.index(NEEDLE.encode())
        expected = f"2: [byte {offset}; line of {len(line):,} chars] ...{window}...\n"
    assert answer.content == expected + "[1 matching line; 1 shown]"


def test_grep_stops_showing_excerpts_at_the_budget_and_still_counts(hold: Hold) -> None:
    body, offsets = minified_json(20_000, needle_every=40)
    ref = put(hold, body, "application/json")
    answer = hold.call_tool(
        "artifact_grep",
        {"ref": ref, "pattern": NEEDLE, "max_matches": 1000, "budget": 4096},
    )
    assert answer.outcome == "resolved"
    assert utf8_len(answer.content) <= 4096
    shown = [int(at) for at in re.findall(r"\[byte (\d+);", answer.content or "")]
    assert 0 < len(shown) < len(offsets)
    assert shown == offsets[: len(shown)]
    assert (answer.content or "").endswith(f"[1 matching line; {len(shown)} shown]")


def test_a_query_on_json_nested_too_deep_names_the_depth_and_the_tools_that_read_it(
    hold: Hold,
) -> None:
    ref = put(hold, b"[" * 10_000 + b"]" * 10_000, "application/json")

    answer = hold.call_tool("artifact_query", {"ref": ref, "expression": "length(@)"})

    assert answer.outcome == "invalid_arguments"
    assert re.search(r"nests deeper than [\d,]+ levels", answer.text), answer.text
    assert "not JSON" not in answer.text.replace("JSON or not", "")
    assert "artifact_grep" in answer.text
    assert "artifact_read_lines" in answer.text


def test_grep_shows_invalid_utf8_replaced_with_exact_byte_offsets_that_read_back(
    hold: Hold,
) -> None:
    body, offsets = minified_json(3_000, needle_every=1_000)
    body = b"\xff\xc3(" + body[3:]  # invalid bytes before every needle
    ref = put(hold, body + b"\nshort \xe2\x82 line " + NEEDLE.encode() + b"\n")

    answer = hold.call_tool("artifact_grep", {"ref": ref, "pattern": NEEDLE})

    assert answer.outcome == "resolved"
    shown = [int(at) for at in re.findall(r"\[byte (\d+);", answer.content or "")]
    assert shown == offsets
    for offset in shown:
        exact = hold.call_tool(
            "artifact_read", {"ref": ref, "offset": offset, "length": len(NEEDLE)}
        )
        assert exact.content == NEEDLE
    assert f"2: short \ufffd line {NEEDLE}\n" in (answer.content or "")
    assert (answer.content or "").endswith(f"[2 matching lines; {len(offsets) + 1} shown]")


LONG_LINE, _ = minified_json(3_000, needle_every=50)


@settings(max_examples=80, deadline=None)
@given(
    budget=st.integers(1, 24_000),
    call=st.sampled_from(
        [
            ("LOG", "artifact_read", {}),
            ("LOG", "artifact_read", {"offset": 5_000, "length": 9_000}),
            ("LOG", "artifact_read_lines", {"start_line": 10, "end_line": 200}),
            ("LOG", "artifact_grep", {"pattern": "ERROR"}),
            ("LONG", "artifact_grep", {"pattern": "NEEDLE|Zürich", "max_matches": 500}),
            ("LONG", "artifact_read", {"offset": 3}),
            ("DOC", "artifact_query", {"expression": "[?status=='refunded']"}),
        ]
    ),
)
def test_no_answer_exceeds_its_budget(budget: int, call: tuple[str, str, dict[str, Any]]) -> None:
    which, name, arguments = call
    with open_hold() as hold:
        ref = put(hold, {"LOG": LOG, "LONG": LONG_LINE, "DOC": DOC}[which])
        answer = hold.call_tool(name, {"ref": ref, "budget": budget, **arguments})
    assert answer.outcome in {"resolved", "over_budget"}
    if answer.ok:
        assert utf8_len(answer.content) <= budget
        # a genuine segment (made under the store's key), its text within the budget
        segment = parse_segment(answer.text, key=hold.store.marker_key())
        assert segment is not None
        assert segment.budget == budget
    else:
        assert answer.content is None


def test_a_query_that_fails_on_the_document_says_how_to_fix_the_expression_not_to_grep(
    hold: Hold,
) -> None:
    ref = put(hold, DOC, "application/json")

    answer = hold.call_tool("artifact_query", {"ref": ref, "expression": "sum([*].city)"})

    assert answer.outcome == "invalid_arguments"
    assert "sum() expects array-number, got an array holding string" in answer.text
    assert "Zürich" not in answer.text  # the value itself is never shown
    assert "type(" in answer.text
    assert "artifact_grep" not in answer.text


# -- the recovered segment's framing: what a client strips is exactly one newline --------------

CLOSE = "[cargohold:end-recovered]"


def client_page(segment: str) -> str:
    """The page inside a segment, by the documented rule (docs/mcp.md, "Recovered segments"):
    everything after the opening line's newline, less the one newline before the closing line."""
    head, newline, rest = segment.partition("\n")
    assert newline
    assert head.startswith("[cargohold:recovered] ")
    assert rest.endswith("\n" + CLOSE)
    return rest[: -len(CLOSE) - 1]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("artifact_read_lines", {"start_line": 1, "end_line": 3}),  # ends with its newline
        ("artifact_read_lines", {"start_line": 2000}),  # the body's last line
        ("artifact_read", {"offset": 0, "length": 20}),  # ends inside a line
        ("artifact_read", {"offset": 0, "length": 0}),  # empty
        ("artifact_grep", {"pattern": "request 7 "}),
    ],
)
def test_a_client_that_strips_one_newline_before_the_end_marker_gets_the_page_exactly(
    hold: Hold, tool: str, arguments: dict[str, Any]
) -> None:
    ref = put(hold, LOG, "text/plain")

    answer = hold.call_tool(tool, {"ref": ref, **arguments})

    assert answer.outcome == "resolved"
    page = client_page(answer.text)
    assert page == answer.content
    assert hashlib.sha256(page.encode()).hexdigest() == answer.structured()["sha256"]
    if answer.start is not None and answer.end is not None:
        assert page.encode() == LOG[answer.start : answer.end]


@settings(max_examples=200, deadline=None)
@given(text=st.text(st.characters(blacklist_categories=["Cs"]), max_size=60), keyed=st.booleans())
def test_any_text_is_framed_so_one_rule_recovers_it_and_the_segment_stays_genuine(
    text: str, keyed: bool
) -> None:
    ref = Ref.parse("artifact://sha256/" + "a" * 64)
    key = bytes(range(32)) if keyed else None
    # texts that end with newlines or with the closing marker itself are the hard cases
    for variant in (text, text + "\n", text + "\n\n", text + "\n" + CLOSE, CLOSE + "\n" + text):
        segment = cargohold.render_segment(ref, "bytes 0-1 of 2", variant, 1 << 20, key=key)
        assert client_page(segment) == variant
        info = parse_segment(segment, key=key)
        assert info is not None
        assert info.text_bytes == utf8_len(variant)


def test_a_segment_framed_by_an_older_version_is_still_genuine() -> None:
    ref = Ref.parse("artifact://sha256/" + "b" * 64)
    key = bytes(range(32))
    text = "line 1\nline 2\n"
    segment = cargohold.render_segment(ref, "lines 1-2 of 9", text, 4096, key=key)
    older = segment.removesuffix("\n" + CLOSE) + CLOSE  # no newline of its own before the marker

    info = parse_segment(older, key=key)

    assert info is not None
    assert info.text_bytes == len(text)
    assert parse_segment(older.replace("line 2", "line 3"), key=key) is None


# -- binary artifacts: no lines, and the read that returns their bytes ------------------------


def png() -> bytes:
    """A real 64x64 RGB PNG: signature, header, compressed rows, end."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    rows = b"".join(
        b"\0" + bytes(v for x in range(64) for v in (x * 4, y * 4, (x ^ y) & 0xFF))
        for y in range(64)
    )
    header = struct.pack(">IIBBBBB", 64, 64, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


BINARIES = {
    "png": (png(), "image/png"),
    "pdf": (
        b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Length 200 /Filter /FlateDecode >>\nstream\n"
        + zlib.compress(LOG[:4000])
        + b"\nendstream\nendobj\n%%EOF\n",
        "application/pdf",
    ),
    "gzip": (gzip.compress(LOG, mtime=0), "application/gzip"),
}


@pytest.mark.parametrize("kind", list(BINARIES))
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("artifact_read_lines", {"start_line": 1, "end_line": 20}),
        ("artifact_grep", {"pattern": "a"}),
        ("artifact_query", {"expression": "length(@)"}),
    ],
)
def test_a_binary_artifact_has_no_lines_and_the_answer_names_the_read_that_returns_its_bytes(
    hold: Hold, kind: str, tool: str, arguments: dict[str, Any]
) -> None:
    body, media_type = BINARIES[kind]
    ref = put(hold, body, media_type)

    answer = hold.call_tool(tool, {"ref": ref, **arguments})

    assert answer.outcome == "unsupported"
    assert answer.is_error
    assert answer.event is not None
    assert answer.event.reason.value == "binary_content"
    assert (answer.content, answer.size) == (None, len(body))
    assert "binary" in answer.text
    assert "base64" in answer.text
    offset, length = (int(n) for n in re.findall(r"offset=(\d+) length=(\d+)", answer.text)[0])
    page = hold.call_tool("artifact_read", {"ref": ref, "offset": offset, "length": length})
    assert (page.outcome, page.encoding) == ("resolved", "base64")
    assert page.data() == body[offset : offset + length]


# -- past the end: the size, and the last range that reads -------------------------------------

NUMBERED = "".join(f"line {n}\n" for n in range(1, 5001)).encode()  # 5,000 lines


@pytest.mark.parametrize(
    ("tool", "arguments", "stated"),
    [
        ("artifact_read", {"offset": 10**9}, f"{len(NUMBERED):,} bytes"),
        ("artifact_read", {"offset": len(NUMBERED), "length": 10}, f"{len(NUMBERED):,} bytes"),
        ("artifact_read_lines", {"start_line": 6000, "end_line": 6005}, "5,000 lines"),
        ("artifact_read_lines", {"start_line": 5001}, "5,000 lines"),
    ],
)
def test_a_read_past_the_end_says_the_size_and_a_last_range_that_reads(
    hold: Hold, tool: str, arguments: dict[str, Any], stated: str
) -> None:
    ref = put(hold, NUMBERED, "text/plain")

    answer = hold.call_tool(tool, {"ref": ref, **arguments})

    assert answer.outcome == "out_of_range"
    assert answer.is_error
    assert answer.content is None
    assert answer.size == len(NUMBERED)
    assert answer.event is not None
    assert answer.event.reason.value == "past_end"
    assert stated in answer.text
    names = ("offset", "length") if tool == "artifact_read" else ("start_line", "end_line")
    found = re.search(rf"{names[0]}=(\d+) {names[1]}=(\d+)", answer.text)
    assert found, answer.text
    last = hold.call_tool(tool, {"ref": ref, names[0]: int(found[1]), names[1]: int(found[2])})
    assert last.outcome == "resolved"
    assert last.end == len(NUMBERED)  # it reaches the end of the body


def test_an_empty_artifact_reads_empty_and_anything_past_it_is_out_of_range(hold: Hold) -> None:
    ref = put(hold, b"", "text/plain")

    assert hold.call_tool("artifact_read", {"ref": ref}).outcome == "resolved"
    assert hold.call_tool("artifact_read_lines", {"ref": ref, "start_line": 1}).content == ""
    past = hold.call_tool("artifact_read", {"ref": ref, "offset": 3})
    assert past.outcome == "out_of_range"
    assert "empty" in past.text


# -- what a model may send: every call is an answer, within its bounds --------------------------


def test_a_lone_surrogate_pattern_is_answered_with_its_fix(hold: Hold) -> None:
    ref = put(hold, LOG, "text/plain")

    answer = hold.call_tool("artifact_grep", json.dumps({"ref": ref, "pattern": "\udcff"}))

    assert answer.outcome == "invalid_arguments"
    assert "\\udcff" in answer.text
    assert "character 1" in answer.text
    answer.text.encode("utf-8")  # sendable over any transport


def test_a_query_on_a_number_of_a_million_digits_is_answered_with_the_tools_that_read_it(
    hold: Hold,
) -> None:
    ref = put(hold, b'{"n": ' + b"9" * 1_000_000 + b"}", "application/json")

    answer = hold.call_tool("artifact_query", {"ref": ref, "expression": "n"})

    assert answer.outcome == "invalid_arguments"
    assert "digits" in answer.text
    assert "artifact_grep" in answer.text


def test_a_query_answer_holding_a_lone_surrogate_is_sent_escaped(hold: Hold) -> None:
    ref = put(hold, b'{"key": "a\\udcffb"}', "application/json")

    answer = hold.call_tool("artifact_query", {"ref": ref, "expression": "key"})

    assert answer.outcome == "resolved"
    assert answer.content == '"a\\udcffb"'
    assert json.loads(answer.content) == "a\udcffb"
    answer.text.encode("utf-8")


def test_an_unknown_tool_name_of_any_length_is_echoed_bounded(hold: Hold) -> None:
    answer = hold.call_tool("x" * 100_000 + "\udcff", {})

    assert answer.outcome == "invalid_arguments"
    assert len(answer.text) < 1_000
    assert len(json.dumps(answer.structured())) < 1_000
    assert "artifact_read" in answer.text
    answer.text.encode("utf-8")


_NAMES = [*TOOL_NAMES, "artifact_reed"]
_KEYS = ["ref", "offset", "length", "budget", "start_line", "end_line", "pattern"]
_KEYS += ["ignore_case", "max_matches", "expression", "edits", "json_patch"]
_TEXTS = st.text(max_size=20) | st.sampled_from(["\udcff", "a\udcffb", "(", "[*]", "x" * 3000])
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats() | _TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXTS, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(_NAMES), data=st.data())
def test_whatever_arguments_a_model_sends_the_call_is_answered_and_sendable(
    name: str, data: st.DataObject
) -> None:
    with open_hold() as hold:
        refs = [put(hold, DOC, "application/json"), put(hold, LOG), put(hold, b"\x89PNG\0\xff")]
        values = _VALUES | st.sampled_from(refs)
        arguments = data.draw(st.dictionaries(st.sampled_from(_KEYS) | _TEXTS, values, max_size=5))
        if data.draw(st.booleans()):
            arguments["ref"] = data.draw(st.sampled_from(refs))
        answer = hold.call_tool(name, arguments)
    assert isinstance(answer, ToolAnswer)
    answer.text.encode("utf-8")  # strict: no lone surrogate, so any transport can send it
    json.dumps(answer.structured()).encode("utf-8")
    asked = arguments.get("budget")
    if isinstance(asked, float) and asked.is_integer():
        asked = int(asked)
    valid = isinstance(asked, int) and not isinstance(asked, bool) and 0 < asked <= 1 << 20
    limit = asked if valid else BUDGET
    assert utf8_len(answer.text) <= limit + 400  # the budget, and the segment's marker lines


# -- artifact_query: bounded while it runs ----------------------------------------------------

# About 45 KB of JSON records, as in the audit that found the doubling expression.
QUERY_DOC = json.dumps(
    [
        {"id": i, "status": "refunded" if i % 5 == 0 else "paid", "city": "Zürich"}
        for i in range(900)
    ],
    ensure_ascii=False,
).encode()
DOUBLED = "@" + " | [@, @]" * 16  # the answer is 2**16 copies of the body: 3 GB of JSON

# Pieces that multiply what an expression works on (a shared copy, a real copy, a string, a
# comparison, a scan), composed at random below.
_GROWING = st.recursive(
    st.sampled_from(["@", "[*]", "[0]", "[:50]", "values(@[0])", "[*].id", "[?status=='paid']"]),
    lambda inner: st.one_of(
        st.builds("[{0}, {0}]".format, inner),
        st.builds("[{0}, {0}][]".format, inner),
        st.builds("{{a: {0}, b: {0}}}".format, inner),
        st.builds("to_string({0})".format, inner),
        st.builds("join(',', [to_string({0}), to_string({0})])".format, inner),
        st.builds("({0}) == ({0})".format, inner),
        st.builds("contains([{0}, {0}], {0})".format, inner),
        st.builds("{0} | [*].[*]".format, inner),
        st.builds("sort_by([{0}][], &to_string(@))".format, inner),
        st.builds("{0} | {1}".format, inner, inner),
    ),
    max_leaves=40,
).filter(lambda expression: len(expression) <= 2000)


# A child process that answers artifact_query calls on QUERY_DOC, one JSON line per expression:
# the harness bounds each call's time (WORKER_TIMEOUT) and the child's memory, so a query that
# does not stop fails the test instead of hanging it or exhausting the machine.
QUERY_WORKER = """
import contextlib, json, resource, sys
with contextlib.suppress(ValueError, OSError):  # where the platform allows it
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
import cargohold
document = sys.stdin.buffer.readline().rstrip(b"\\n")
with cargohold.open("memory://", tenant="t", user="u", session="s") as hold:
    ref = str(hold.store.put(document, media_type="application/json", tool="fixture").ref)
    for line in sys.stdin:
        arguments = {"ref": ref, "expression": json.loads(line), "budget": 16384}
        answer = hold.call_tool("artifact_query", arguments)
        print(json.dumps({
            "outcome": answer.outcome,
            "reason": None if answer.event is None else answer.event.reason.value,
            "text_bytes": len(answer.text.encode("utf-8", "surrogatepass")),
            "content": answer.content is not None,
            "text": answer.text,
        }), flush=True)
"""
WORKER_TIMEOUT = 60.0


class QueryWorker:
    """The parent's side of QUERY_WORKER."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.process = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        # the developer's configuration stays out, as the autouse fixture keeps it out in-process
        env = {k: v for k, v in os.environ.items() if not k.startswith("CARGOHOLD_")}
        env |= {"XDG_CACHE_HOME": str(self.home / "cache"), "XDG_STATE_HOME": str(self.home)}
        process = subprocess.Popen(
            [sys.executable, "-c", QUERY_WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=self.home,
            env=env,
        )
        assert process.stdin is not None
        process.stdin.write(QUERY_DOC + b"\n")
        process.stdin.flush()
        return process

    def ask(self, expression: str) -> dict[str, Any]:
        if self.process.poll() is not None:  # killed or died on an earlier call
            self.close()
            self.process = self._start()
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None
        assert stdout is not None
        stdin.write(json.dumps(expression).encode() + b"\n")
        stdin.flush()
        ready, _, _ = select.select([stdout], [], [], WORKER_TIMEOUT)
        if not ready:
            self.close()
            pytest.fail(f"no answer within {WORKER_TIMEOUT:.0f} s to {expression[:80]!r}")
        line = stdout.readline()
        if not line:
            self.close()
            pytest.fail(f"the query process died on {expression[:80]!r}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        self.process.kill()
        self.process.wait(timeout=WORKER_TIMEOUT)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture(scope="module")
def query_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QueryWorker]:
    worker = QueryWorker(tmp_path_factory.mktemp("query-worker"))
    yield worker
    worker.close()


@settings(max_examples=60, deadline=None)  # the worker's timeout bounds each call's time
@given(expression=_GROWING)
@case(expression=DOUBLED)
@case(expression="@" + " | [@, @]" * 10)
@case(expression="@" + " | [@, @]" * 300)
@case(expression="@" + " | [@, @][]" * 40)
@case(expression="to_string(@)" + " | to_string([@, @])" * 40)
@case(expression=f"({DOUBLED * 4}) == ({DOUBLED * 4})")
@case(expression="@" + " | [@, @]" * 40 + " | [*]" * 40)
def test_a_query_that_multiplies_its_work_is_answered_within_its_budget(
    query_worker: QueryWorker, expression: str
) -> None:
    answer = query_worker.ask(expression)
    assert answer["outcome"] in {"resolved", "over_budget", "invalid_arguments"}
    assert answer["text_bytes"] <= BUDGET + 400  # the segment's marker lines
    if answer["outcome"] == "over_budget":
        assert not answer["content"]
        assert "Narrow" in answer["text"]


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        (DOUBLED, "budget_exceeded"),  # stopped as the answer grew, never written out
        ("@" + " | [@, @][]" * 40, "evaluation_limit"),  # real copies: the work is bounded
        (f"({DOUBLED}) == ({DOUBLED})", "evaluation_limit"),  # 2**16 comparisons in C
        ("@" + " | [@, @]" * 150, "evaluation_limit"),  # nested deeper than a query may
    ],
)
def test_a_doubling_query_is_over_budget_with_the_fix(
    query_worker: QueryWorker, expression: str, reason: str
) -> None:
    answer = query_worker.ask(expression)

    assert answer["outcome"] == "over_budget"
    assert answer["reason"] == reason
    assert "Narrow" in answer["text"]
    if reason == "budget_exceeded":
        assert re.search(r"would be more than [\d,]+ bytes", answer["text"]), answer["text"]
    else:
        assert "A larger budget does not help" in answer["text"]


def test_a_query_that_walks_a_large_document_still_answers(hold: Hold) -> None:
    rows = [{"id": i, "status": "refunded" if i % 5 == 0 else "paid"} for i in range(40_000)]
    ref = put(hold, json.dumps(rows).encode(), "application/json")
    expression = "[?status=='refunded'] | sort_by(@, &id) | [*].{id: id} | length(@)"

    answer = hold.call_tool("artifact_query", {"ref": ref, "expression": expression})

    assert (answer.outcome, answer.content) == ("resolved", "8000")


# -- artifact_info ----------------------------------------------------------------------------


class CountingStore(MemoryStore):
    """A memory store that counts the reads of bytes it serves."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def read(self, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        return super().read(*args, **kwargs)


def test_artifact_info_states_the_facts_and_reads_no_bytes() -> None:
    backend = CountingStore()
    try:
        with open_hold(backend) as hold:
            stored = hold.store.put(LOG, media_type="text/plain", tool="tail", kind="log")
            answer = hold.call_tool("artifact_info", {"ref": str(stored.ref)})
            assert backend.reads == 0
    finally:
        backend.close()
    assert answer.outcome == "resolved"
    assert (answer.size, answer.sha256, answer.ref) == (len(LOG), stored.ref.digest, stored.ref)
    assert (answer.content, answer.data(), answer.start, answer.end) == (None, None, None, None)
    facts = json.loads(answer.text)
    assert facts["ref"] == str(stored.ref)
    assert (facts["size"], facts["media_type"], facts["kind"]) == (len(LOG), "text/plain", "log")
    assert (facts["tool"], facts["complete"]) == ("tail", True)
    assert facts["expires_at"].endswith("+00:00")


def test_artifact_info_answers_from_the_record_even_when_the_bytes_are_stale() -> None:
    backend = MemoryStore()
    try:
        with open_hold(backend) as hold:
            ref = put(hold, LOG, "text/plain")
            backend.corrupt_for_tests(TENANT, Ref.parse(ref), offset=10)
            info = hold.call_tool("artifact_info", {"ref": ref})
            read = hold.call_tool("artifact_read", {"ref": ref, "length": 100})
    finally:
        backend.close()
    assert (info.outcome, info.size) == ("resolved", len(LOG))
    assert read.outcome == "stale"


# -- the structured part and the repr carry no content -----------------------------------


def test_the_structured_part_and_the_repr_never_carry_the_content(hold: Hold) -> None:
    body = (NEEDLE + " ").encode() * 100
    text_ref = put(hold, body, "text/plain")
    binary_ref = put(hold, b"\x00" + body, "application/octet-stream")
    json_ref = put(hold, json.dumps({"secret": NEEDLE}).encode(), "application/json")
    answers = [
        hold.call_tool("artifact_read", {"ref": text_ref}),
        hold.call_tool("artifact_read", {"ref": binary_ref}),
        hold.call_tool("artifact_read_lines", {"ref": text_ref, "start_line": 1}),
        hold.call_tool("artifact_grep", {"ref": text_ref, "pattern": NEEDLE}),
        hold.call_tool("artifact_query", {"ref": json_ref, "expression": "secret"}),
        hold.call_tool("artifact_info", {"ref": text_ref}),
        hold.call_tool("artifact_read", {"ref": text_ref, "budget": 10}),
        hold.call_tool("artifact_read", {"ref": NEEDLE}),
    ]
    assert [answer.outcome for answer in answers][-2:] == ["over_budget", "invalid_arguments"]
    for answer in answers:
        structured = answer.structured()
        assert set(structured) == STRUCTURED_KEYS
        carried = json.dumps(structured)
        assert NEEDLE not in carried
        assert NEEDLE not in repr(answer)
        if answer.content:
            assert answer.content not in carried


# -- async -----------------------------------------------------------------------------------


def test_the_async_call_answers_as_the_sync_call_does(hold: Hold) -> None:
    ref = put(hold, DOC, "application/json")
    calls: list[tuple[str, dict[str, Any] | str]] = [
        # artifact_patch stores: a second call finds its bytes already stored (tests/test_patch)
        *(call for call in valid_calls(ref) if call[0] != "artifact_patch"),
        ("artifact_grep", {"ref": ref, "pattern": "(abc"}),
        ("artifact_read", json.dumps({"ref": ref, "offset": 7, "length": 30})),  # as JSON text
    ]

    async def asynchronously() -> list[ToolAnswer]:
        return [await hold.acall_tool(name, arguments) for name, arguments in calls]

    answers = asyncio.run(asynchronously())
    for (name, arguments), answer in zip(calls, answers, strict=True):
        expected = hold.call_tool(name, arguments)
        assert answer.structured() == expected.structured()
        assert answer.text == expected.text


@pytest.mark.parametrize("expression", ["ceil(a[0])", "floor(a[0])", "a", "a[0]", "sum(b)"])
def test_a_query_meeting_a_number_past_a_doubles_range_fails_clearly_and_answers_no_infinity(
    hold: Hold, expression: str
) -> None:
    ref = put(hold, b'{"a": [1e400], "b": [1e308, 1e308]}', "application/json")

    answer = hold.call_tool("artifact_query", {"ref": ref, "expression": expression})

    assert answer.outcome == "invalid_arguments"
    assert answer.content is None
    assert "not finite" in answer.text
    assert "digits" not in answer.text


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_a_query_on_a_body_holding_nan_or_infinity_says_it_is_not_json(
    hold: Hold, constant: bytes
) -> None:
    ref = put(hold, b'{"a": [' + constant + b"]}", "application/json")

    answer = hold.call_tool("artifact_query", {"ref": ref, "expression": "ceil(a[0])"})

    assert answer.outcome == "invalid_arguments"
    assert "not JSON" in answer.text
    assert "digits" not in answer.text
    assert "artifact_grep" in answer.text


def test_a_line_read_of_bytes_that_are_not_utf8_says_it_is_not_exact_and_where_they_read(
    hold: Hold,
) -> None:
    body = b"first line\nsecond \xff\xc3( line\nthird line\n"
    ref = put(hold, body, "text/plain")

    answer = hold.call_tool("artifact_read_lines", {"ref": ref, "start_line": 2, "end_line": 3})
    facts = json.loads(json.dumps(answer.structured()))

    assert answer.outcome == "resolved"
    assert answer.content == "second \ufffd\ufffd( line\nthird line\n"
    assert facts["exact"] is False
    assert facts["sha256"] == hashlib.sha256(answer.content.encode()).hexdigest()  # what it is
    segment = parse_segment(answer.text, key=hold.store.marker_key())
    assert segment is not None  # still a genuine segment, its span saying so
    assert segment.span == "lines 2-3 of 3, not utf-8: replaced"
    assert (facts["start"], facts["end"]) == (11, len(body))
    exact_bytes = facts["exact_bytes"]
    exact = hold.call_tool("artifact_read", {"ref": ref, **exact_bytes})
    assert exact.data() == body[facts["start"] : facts["end"]]


def test_a_line_read_of_utf8_text_is_exact_and_says_nothing_of_it(hold: Hold) -> None:
    ref = put(hold, "première ligne\ndeuxième\n".encode(), "text/plain")

    answer = hold.call_tool("artifact_read_lines", {"ref": ref, "start_line": 1})

    assert answer.outcome == "resolved"
    assert "exact" not in answer.structured()
    assert "utf-8" not in answer.text.partition("\n")[0]
    assert answer.data() == "première ligne\ndeuxième\n".encode()


class _RecordOnRefusal(MemoryStore):
    """A backend that answers ``unauthorized`` with the owner's record attached (the seam
    allows a record on any outcome): the tools must not pass its size on."""

    def _lookup(self, scope: Any, ref: Ref) -> Any:
        found = super()._lookup(scope, ref)
        if found.outcome is not ReadOutcome.UNAUTHORIZED:
            return found
        owner = next(r for k, r in self._artifacts.items() if k[3] == ref.digest)
        return dataclasses.replace(found, record=owner)


def test_an_unauthorized_answer_never_gives_the_other_sessions_size() -> None:
    backend = _RecordOnRefusal()
    try:
        with open_hold(backend) as owner:
            ref = put(owner, DOC, "application/json")
            other = owner.derive(session="session-2")
            answers = {name: other.call_tool(name, args) for name, args in valid_calls(ref)}
    finally:
        backend.close()
    for name, answer in answers.items():
        assert answer.outcome == "unauthorized", name
        assert answer.structured()["size"] is None, name
        assert answer.event is None or answer.event.observed_bytes == 0, name
