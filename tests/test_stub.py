"""Stubs: one renderer, a stable marker, never over budget, same input gives the same stub."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cargohold import (
    Budget,
    MemoryStore,
    Offloader,
    ProjectionClass,
    ReadTools,
    Ref,
    Scope,
    ScopedStore,
    StoreUnavailableError,
    Stub,
    StubInfo,
    UsageError,
    parse_stub,
    render_stub,
)

CLOSING = "[cargohold] end of stub | budget "
PREVIEW_OPEN = "--- preview ---\n"
PREVIEW_CLOSE = "--- end of preview ---\n"


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _reseal(body: str, budget: Budget) -> str:
    """A stub's closing line over ``body``, as the stub format documents it (the check is the
    first 16 hex digits of the SHA-256 of everything before the closing line)."""
    check = hashlib.sha256(_utf8(body)).hexdigest()[:16]
    return f"{body}{CLOSING}{budget.label} | check {check}"


def _split(text: str) -> tuple[str, str]:
    """A stub's text before its closing line, and the closing line."""
    cut = text.rfind("\n") + 1
    return text[:cut], text[cut:]


def _stub(data: bytes, budget: Budget, **kwargs: Any) -> Stub:
    return render_stub(data, Ref.of(data), budget=budget, **kwargs)


# -- strategies -------------------------------------------------------------------------------

short_text = st.text(max_size=12)
bodies = st.one_of(
    st.binary(max_size=20_000),
    st.text(max_size=3000).map(_utf8),  # surrogates give invalid UTF-8
    st.tuples(st.text(min_size=1, max_size=8), st.integers(1, 5000)).map(
        lambda pair: _utf8(pair[0] * pair[1])  # one long line
    ),
    st.lists(short_text, max_size=3000).map(lambda lines: _utf8("\n".join(lines))),
    st.lists(st.one_of(short_text.map(_utf8), st.binary(max_size=4)), max_size=2000).map(
        b"\n".join  # text with stray invalid bytes
    ),
)
valid_text_bodies = st.one_of(
    st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=3000),
    st.tuples(st.text(min_size=1, max_size=8), st.integers(1, 5000)).map(
        lambda pair: pair[0] * pair[1]
    ),
    st.lists(short_text, max_size=3000).map("\n".join),
).filter(lambda text: "\x00" not in text and not any(0xD800 <= ord(c) <= 0xDFFF for c in text))
media_types = st.sampled_from(
    [
        "text/plain; charset=utf-8",
        "text/plain",
        "application/json",
        "text/csv",
        "application/octet-stream",
        "image/png",
    ]
)
tools = st.one_of(st.none(), st.from_regex(r"[a-z][a-z0-9_.-]{0,40}", fullmatch=True))
budgets = st.sampled_from(list(Budget))


# -- properties ---------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    data=bodies,
    budget=budgets,
    media_type=media_types,
    tool=tools,
    complete=st.booleans(),
    failed=st.booleans(),
)
def test_a_stub_never_exceeds_its_budget_and_is_the_same_for_the_same_input(
    data: bytes, budget: Budget, media_type: str, tool: str | None, complete: bool, failed: bool
) -> None:
    kwargs = {"media_type": media_type, "tool": tool, "complete": complete, "failed": failed}
    stub = _stub(data, budget, **kwargs)
    again = render_stub(bytes(data), Ref.of(data), budget=budget, **kwargs)

    assert len(_utf8(stub.text)) <= budget
    assert stub.size_bytes == len(_utf8(stub.text))
    assert stub.size_bytes <= max(2048, len(data) // 10)
    assert stub.limit == min(int(budget), max(2048, len(data) // 10))
    assert again.text == stub.text
    assert stub.text.split("\n", 1)[0] == f"[cargohold] {Ref.of(data)}"
    assert parse_stub(stub.text) == StubInfo(Ref.of(data), budget)
    assert stub.size == len(data)
    if failed:
        assert stub.projection.classification is not ProjectionClass.COMPRESSIBLE


@settings(max_examples=150, deadline=None)
@given(text=valid_text_bodies, budget=budgets)
def test_the_end_of_a_text_body_is_always_in_its_preview(text: str, budget: Budget) -> None:
    data = text.encode()

    stub = render_stub(data, Ref.of(data), media_type="text/plain", budget=budget)

    found = stub.projection
    assert PREVIEW_OPEN + found.preview in stub.text  # the preview sits in the stub, unchanged
    if found.classification is ProjectionClass.UNSUPPORTED:
        assert found.kind in ("base64", "data_uri")  # encoded bytes: no preview
    elif found.kind == "text":  # the verbatim head and tail
        assert found.preview.endswith(text[-40:])
        if len(data) > budget:
            assert "bytes omitted" in found.preview
    else:
        last_line = text.rstrip().rsplit("\n", 1)[-1].strip()
        stated = re.search(r"\b(omitted|not shown)\b", found.preview) is not None
        assert last_line[-40:].strip() in found.preview or stated


@settings(max_examples=100, deadline=None)
@given(data=bodies, budget=budgets)
def test_a_verbatim_preview_that_does_not_hold_the_whole_body_says_how_much_it_omits(
    data: bytes, budget: Budget
) -> None:
    stub = _stub(data, budget, media_type="text/plain")

    found = stub.projection
    if found.classification is ProjectionClass.UNSUPPORTED:
        assert found.kind in ("binary", "base64", "data_uri")
    elif found.kind == "text" and found.preview != data.decode("utf-8", "replace"):
        assert "bytes omitted" in found.preview


@settings(max_examples=200, deadline=None)
@given(data=bodies, budget=budgets, where=st.floats(0, 1, exclude_max=True), new=st.characters())
def test_a_stub_with_any_one_character_changed_is_refused(
    data: bytes, budget: Budget, where: float, new: str
) -> None:
    stub = _stub(data, budget, media_type="text/plain")
    text = stub.text
    index = int(where * len(text))
    assume(text[index] != new)

    edited = text[:index] + new + text[index + 1 :]

    assert parse_stub(edited) is None


@settings(max_examples=100, deadline=None)
@given(data=bodies, budget=budgets, where=st.floats(0, 1, exclude_max=True))
def test_a_stub_edited_in_its_preview_is_refused(data: bytes, budget: Budget, where: float) -> None:
    stub = _stub(data, budget, media_type="text/plain")
    assume(stub is not None)
    assert stub is not None
    text = stub.text
    start = text.index(PREVIEW_OPEN) + len(PREVIEW_OPEN)
    end = text.rindex(PREVIEW_CLOSE)
    assume(end > start)
    index = start + int(where * (end - start))
    replacement = "X" if text[index] != "X" else "Y"

    edited = text[:index] + replacement + text[index + 1 :]

    assert parse_stub(edited) is None


@pytest.mark.parametrize("budget", list(Budget))
def test_a_stub_padded_over_its_budget_is_refused_even_when_resealed(budget: Budget) -> None:
    data = _utf8("".join(f"row {index}: value\n" for index in range(5000)))
    text = render_stub(data, Ref.of(data), media_type="text/plain", budget=budget).text
    body, _ = _split(text)
    room = budget - len(_utf8(text))
    cut = body.rindex(PREVIEW_CLOSE)

    within = _reseal(body[:cut] + "p" * room + body[cut:], budget)
    over = _reseal(body[:cut] + "p" * (room + 1) + body[cut:], budget)

    assert len(_utf8(within)) == budget
    assert parse_stub(within) == StubInfo(Ref.of(data), budget)  # the reseal itself is sound
    assert len(_utf8(over)) == budget + 1
    assert parse_stub(over) is None


@pytest.mark.parametrize("budget", list(Budget))
def test_a_body_that_exactly_fills_the_preview_room_still_fits(budget: Budget) -> None:
    failures = []
    for size in range(budget - 800, budget):
        data = b"x" * size  # one line, no final newline
        try:
            stub = render_stub(data, Ref.of(data), media_type="text/plain", budget=budget)
        except AssertionError:
            failures.append(size)
            continue
        assert len(_utf8(stub.text)) <= budget
    assert failures == []


def test_a_larger_stub_relabelled_with_a_smaller_budget_is_refused() -> None:
    data = _utf8("".join(f"row {index}: value\n" for index in range(5000)))
    text = render_stub(data, Ref.of(data), media_type="text/plain", budget=Budget.MAX).text
    body, _ = _split(text)

    relabelled = _reseal(body, Budget.LIGHT)

    assert len(_utf8(relabelled)) > Budget.LIGHT
    assert parse_stub(relabelled) is None


def test_a_forged_marker_and_closing_line_around_raw_text_are_refused() -> None:
    raw = "".join(f"2026-03-01 INFO raw line {index}\n" for index in range(40))
    ref = Ref.of(raw.encode())

    wrong_check = f"[cargohold] {ref}\n{raw}{CLOSING}balanced | check {'0' * 16}"
    no_check = f"[cargohold] {ref}\n{raw}{CLOSING}balanced"
    heavy = _reseal(f"[cargohold] {ref}\n{raw * 20}", Budget.MAX)

    assert parse_stub(wrong_check) is None
    assert parse_stub(no_check) is None
    assert len(_utf8(heavy)) > Budget.MAX
    assert parse_stub(heavy) is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[cargohold]",
        "plain tool output",
        f"[cargohold] {Ref.of(b'x')}",
        f" [cargohold] {Ref.of(b'x')}\n{CLOSING}light | check {'0' * 16}",
        f"[cargohold] artifact://sha256/{'A' * 64}\n{CLOSING}light | check {'0' * 16}",
    ],
)
def test_text_that_is_not_a_stub_is_refused(text: str) -> None:
    assert parse_stub(text) is None


# -- what a stub states ------------------------------------------------------------------------


def test_a_stub_states_the_facts_of_its_body() -> None:
    data = _utf8(json.dumps([{"id": index, "total": index * 1.5} for index in range(2000)]))

    stub = render_stub(
        data,
        Ref.of(data),
        media_type="application/json",
        tool="list_orders",
        complete=False,
        budget=Budget.STRONG,
    )

    first, facts = stub.text.split("\n")[:2]
    assert first == f"[cargohold] {Ref.of(data)}"
    assert facts.startswith(f"tool list_orders | application/json | {len(data):,} bytes | about ")
    assert facts.endswith(" | truncated by its producer")
    assert "artifact_query(ref, expression)" in stub.text
    assert stub.as_dict() == {
        "marker": "[cargohold]",
        "ref": str(Ref.of(data)),
        "tool": "list_orders",
        "media_type": "application/json",
        "size": len(data),
        "estimated_tokens": stub.estimated_tokens,
        "complete": False,
        "kind": "json",
        "classification": stub.projection.classification.value,
        "preview": stub.projection.preview,
        "read_tools": {
            "read": "artifact_read",
            "lines": "artifact_read_lines",
            "grep": "artifact_grep",
            "query": "artifact_query",
        },
        "budget": "strong",
        "text": stub.text,
    }
    assert json.loads(json.dumps(stub.as_dict())) == stub.as_dict()


def test_a_stub_names_exactly_the_read_tools_it_is_given() -> None:
    data = json.dumps([{"a": 1}] * 100).encode()
    names = ReadTools(read="cat_ref", lines="sed_ref", grep="grep_ref", query="jq_ref")

    stub = render_stub(data, Ref.of(data), media_type="application/json", read_tools=names)

    assert stub.text.splitlines()[-2] == (
        "read more: cat_ref(ref, offset, length) | sed_ref(ref, start_line, end_line) "
        "| grep_ref(ref, pattern) | jq_ref(ref, expression)"
    )


def test_a_binary_stub_describes_the_bytes_without_showing_them() -> None:
    pixels = random.Random(5).randbytes(10_000)
    data = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes.fromhex("00000280000001e0") + pixels

    stub = render_stub(data, Ref.of(data), media_type="image/png", tool="screenshot")

    lines = stub.text.splitlines()
    facts = f"{len(data):,} bytes | about {stub.estimated_tokens:,} tokens as an image | complete"
    assert lines[1] == f"tool screenshot | image/png | {facts}"
    assert stub.projection.kind == "binary"
    assert stub.projection.classification is ProjectionClass.UNSUPPORTED
    assert "png" in lines[2].lower()
    assert pixels[100:116].hex(" ") not in stub.text  # nothing from the middle of the body
    assert parse_stub(stub.text) == StubInfo(Ref.of(data), Budget.BALANCED)
    assert render_stub(data, Ref.of(data), media_type="image/png", tool="screenshot") == stub


def _just_over_the_threshold(kind: str) -> bytes:
    rnd = random.Random(kind)
    if kind == "json":
        rows = [{"id": i, "customer": f"c-{i:05d}", "total": i * 1.25} for i in range(640)]
        return json.dumps(rows).encode()
    if kind == "log":
        return "".join(
            f"2026-01-02 08:{i // 60:02d}:{i % 60:02d} ERROR "
            f"{rnd.choice(['disk', 'cache', 'queue', 'socket'])} {rnd.choice(['full', 'cold'])} "
            f"on {rnd.choice(['alpha', 'beta', 'gamma'])}: {rnd.choice(['retry', 'abort'])}\n"
            for i in range(640)
        ).encode()
    words = ["the", "store", "keeps", "exact", "bytes", "and", "a", "stub", "in", "context"]
    return "".join(
        f"{' '.join(rnd.choice(words) for _ in range(9))}.\n" for _ in range(720)
    ).encode()


@pytest.mark.parametrize("kind", ["text", "log", "json"])
@pytest.mark.parametrize("budget", list(Budget), ids=lambda b: b.label)
def test_a_stub_of_a_body_just_over_the_threshold_takes_at_most_a_tenth_of_it(
    budget: Budget, kind: str
) -> None:
    data = _just_over_the_threshold(kind)
    assert 32 * 1024 <= len(data) < 40_000

    stub = render_stub(data, Ref.of(data), media_type="text/plain", budget=budget)

    assert stub.projection.kind == kind
    assert stub.size_bytes <= len(data) // 10
    assert parse_stub(stub.text) == StubInfo(Ref.of(data), budget)
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[-1].decode()
    if kind != "json":
        assert last in stub.projection.preview  # the end of the body is still there


@pytest.mark.parametrize("budget", list(Budget), ids=lambda b: b.label)
def test_a_body_ten_times_its_budget_gets_the_whole_budget(budget: Budget) -> None:
    data = "".join(f"note {i}: the fox jumped {i * 7} times\n" for i in range(9000)).encode()
    assert len(data) >= 10 * budget

    stub = render_stub(data, Ref.of(data), media_type="text/plain", budget=budget)

    assert stub.limit == budget
    assert stub.size_bytes > budget - 1024  # the preview used the room it had


def test_a_small_body_under_a_lowered_threshold_still_gets_a_2_kib_stub() -> None:
    data = _utf8("".join(f"line {i}: some words of text\n" for i in range(200)))

    stub = render_stub(data, Ref.of(data), media_type="text/plain", budget=Budget.LIGHT)

    assert stub.limit == 2048
    assert 1024 < stub.size_bytes <= 2048


@pytest.mark.parametrize("media_type", ["text/plain", "application/json"])
def test_a_python_repr_of_rows_is_text_and_its_stub_offers_no_query(media_type: str) -> None:
    # What mcp-server-sqlite's read_query returns: a Python repr, not JSON.
    rows = [{"id": i, "name": f"user {i}", "email": None, "active": i % 3 == 0} for i in range(600)]
    data = repr(rows).encode()

    stub = render_stub(data, Ref.of(data), media_type=media_type)

    assert stub.projection.kind == "text"
    assert stub.projection.classification is ProjectionClass.EXACT_REQUIRED
    assert "artifact_query" not in stub.text
    assert "artifact_grep(ref, pattern)" in stub.text


def test_json_its_projector_cannot_read_offers_no_query() -> None:
    data = b'{"a": 1}' * 5000  # JSON's tokens, but not one document

    stub = render_stub(data, Ref.of(data), media_type="application/json")

    assert stub.projection.kind == "json"
    assert stub.projection.classification is ProjectionClass.EXACT_REQUIRED
    assert "artifact_query" not in stub.text


def test_a_json_stub_offers_the_query_tool() -> None:
    data = json.dumps([{"id": i, "status": "paid"} for i in range(3000)]).encode()

    stub = render_stub(data, Ref.of(data), media_type="text/plain")

    assert stub.projection.kind == "json"
    assert "artifact_query(ref, expression)" in stub.text


@pytest.mark.parametrize(
    "data",
    [
        b"\x89PNG\r\n\x1a\n" + random.Random(1).randbytes(40_000),
        b"%PDF-1.7\n" + random.Random(2).randbytes(40_000),
        b"\x1f\x8b\x08\x00" + random.Random(3).randbytes(40_000),
    ],
    ids=["png", "pdf", "gzip"],
)
def test_a_binary_stub_offers_only_the_byte_read(data: bytes) -> None:
    stub = render_stub(data, Ref.of(data), media_type="application/octet-stream")

    assert stub.projection.kind == "binary"
    assert (
        stub.text.splitlines()[-2] == "read more: artifact_read(ref, offset, length) (base64 pages)"
    )
    assert "artifact_read_lines" not in stub.text
    assert "artifact_grep" not in stub.text


def test_a_base64_text_stub_still_offers_the_line_tools() -> None:
    data = base64.encodebytes(random.Random(4).randbytes(30_000))

    stub = render_stub(data, Ref.of(data), media_type="text/plain")

    assert stub.projection.kind == "base64"
    assert "artifact_read_lines(ref, start_line, end_line)" in stub.text


@pytest.mark.parametrize(
    ("value", "budget"),
    [
        ("light", Budget.LIGHT),
        ("BALANCED", Budget.BALANCED),
        (" strong ", Budget.STRONG),
        ("max", Budget.MAX),
        (4096, Budget.LIGHT),
        (16384, Budget.MAX),
        (Budget.STRONG, Budget.STRONG),
    ],
)
def test_a_budget_is_named_or_given_as_its_exact_byte_count(value: object, budget: Budget) -> None:
    assert Budget.parse(value) is budget


@pytest.mark.parametrize("value", ["huge", "", 5000, 0, True, None, 4096.0])
def test_an_unknown_budget_is_a_usage_error(value: object) -> None:
    with pytest.raises(UsageError):
        Budget.parse(value)


def test_the_budgets_are_4_8_12_and_16_kib() -> None:
    assert [int(b) for b in Budget] == [4096, 8192, 12288, 16384]
    assert Budget.parse("balanced") is Budget.BALANCED


class UnavailableStore:
    def __init__(self) -> None:
        self._inner = MemoryStore()
        self.limits = self._inner.limits

    def put(self, *args: object) -> None:
        raise StoreUnavailableError("store I/O failed")

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


@pytest.mark.parametrize("outcome", ["failed", "rejected"])
def test_a_withheld_notice_is_bounded_and_is_not_a_stub(outcome: str) -> None:
    owner = Scope("tenant", "user", "session")
    backend = UnavailableStore() if outcome == "failed" else MemoryStore()
    offloader = Offloader(ScopedStore(backend, owner), threshold=1024)
    body = "x" * (1024 * 1024)

    result = offloader.offload(
        body,
        tool="t" * 128,
        media_type="application/vnd.a-very-long-vendor-media-type+json; charset=utf-8",
        sensitivity="internal" if outcome == "failed" else "credential",
    )

    assert result.outcome.value == outcome
    assert isinstance(result.content, str)
    assert len(_utf8(result.content)) < 1024
    assert result.content.startswith("[cargohold] ")
    assert "x" * 16 not in result.content
    assert parse_stub(result.content) is None


def _structured(kind: str) -> tuple[bytes, str, str]:
    """A large body of ``kind``, its media type, and its last line."""
    if kind == "log":
        lines = [
            f"2026-03-01T10:{i // 60 % 60:02d}:{i % 60:02d}Z {'ERROR' if i % 7 == 0 else 'INFO'} "
            f"request {i} served in {i * 13 % 900} ms"
            for i in range(1, 3001)
        ]
        media = "text/plain"
    elif kind == "csv":
        rows = (f"{i},{'paid' if i % 3 else 'refunded'},{i * 1.5}" for i in range(1, 5001))
        lines = ["id,status,total", *rows]
        media = "text/csv"
    else:
        lines = [json.dumps({"id": i, "status": "ok", "note": f"row {i}"}) for i in range(1, 3001)]
        media = "application/x-ndjson"
    return "".join(line + "\n" for line in lines).encode(), media, lines[-1]


@pytest.mark.parametrize("budget", [Budget.LIGHT, Budget.MAX])
@pytest.mark.parametrize("kind", ["log", "csv", "ndjson"])
def test_a_structured_preview_still_shows_the_last_record(kind: str, budget: Budget) -> None:
    data, media, last = _structured(kind)

    stub = render_stub(data, Ref.of(data), media_type=media, budget=budget)

    assert stub.projection.kind == kind
    assert stub.projection.classification is ProjectionClass.COMPRESSIBLE
    assert last in stub.text
    assert len(_utf8(stub.text)) <= budget


# -- whole-output snapshot ----------------------------------------------------------------------


def _ci_log() -> bytes:
    """A pytest run of 81 tests, one of which fails: 6,770 bytes in 97 lines."""
    lines = [
        "$ python -m pytest -q tests/",
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.7, pytest-8.3.2",
        "collected 81 items",
        "",
    ]
    lines += _passed(1, 80).splitlines()
    lines += [
        "tests/test_orders.py::test_refund_rounding FAILED                        [100%]",
        "",
        "=================================== FAILURES ===================================",
        "___________________________ test_refund_rounding ____________________________",
        "    def test_refund_rounding():",
        ">       assert refund(Order(total=20.09), ratio=0.5) == 10.05",
        "E       AssertionError: assert 10.04 == 10.05",
        "",
        "tests/test_orders.py:212: AssertionError",
        "=========================== short test summary info ============================",
        "FAILED tests/test_orders.py::test_refund_rounding - AssertionError: assert 10.04 == 10.05",
        "========================= 1 failed, 80 passed in 4.21s =========================",
        "",
    ]
    return "\n".join(lines).encode()


def _passed(first: int, last: int) -> str:
    return "".join(
        f"tests/test_orders.py::test_order_{index:03d} PASSED{' ' * 24}[{index * 100 // 81:3d}%]\n"
        for index in range(first, last + 1)
    )


def _numbered_passed(first: int, last: int) -> str:
    """The failure preview's lines for passed tests ``first``..``last`` (file line = test + 5)."""
    return "".join(
        f"{index + 5}: {line}\n"
        for index, line in enumerate(_passed(first, last).splitlines(), first)
    )


EXPECTED_CI_STUB = (
    "[cargohold] artifact://sha256/260123e6102619f40e04bda7851177d3aef58cb9cd91a1919104aa95fe2bcd1b\n"
    "tool run_tests | text/plain; charset=utf-8 | 6,770 bytes | about 1,553 tokens | complete\n"
    "kept out of context | kind failure | class exact_required\n"
    "--- preview ---\n"
    "failure output: 97 lines, 6,770 bytes; verbatim lines only, each as 'line number: text', "
    "gaps as '[... N lines ...]' (2 failing-test lines, 1 exception lines, 1 frame lines)\n"
    "1: $ python -m pytest -q tests/\n"
    "2: ============================= test session starts ==============================\n"
    "[... 80 lines ...]\n"
    + _numbered_passed(78, 79)
    + "85: tests/test_orders.py::test_order_080 PASSED                        [ 98%]\n"
    "86: tests/test_orders.py::test_refund_rounding FAILED                        [100%]\n"
    "87: \n"
    "88: =================================== FAILURES ===================================\n"
    "89: ___________________________ test_refund_rounding ____________________________\n"
    "90:     def test_refund_rounding():\n"
    "91: >       assert refund(Order(total=20.09), ratio=0.5) == 10.05\n"
    "92: E       AssertionError: assert 10.04 == 10.05\n"
    "93: \n"
    "94: tests/test_orders.py:212: AssertionError\n"
    "95: =========================== short test summary info ============================\n"
    "96: FAILED tests/test_orders.py::test_refund_rounding - AssertionError: "
    "assert 10.04 == 10.05\n"
    "97: ========================= 1 failed, 80 passed in 4.21s =========================\n"
    "[5,764 of 6,770 bytes not shown; read them with the line or grep tools]\n"
    "--- end of preview ---\n"
    "read more: artifact_read(ref, offset, length) | artifact_read_lines(ref, start_line, "
    "end_line) | artifact_grep(ref, pattern)\n"
    "[cargohold] end of stub | budget light | check aab0bfa8dca05775"
)


def test_a_failed_test_run_log_keeps_its_failure_lines_verbatim_within_a_light_budget() -> None:
    data = _ci_log()
    assert len(data) == 6770

    stub = render_stub(
        data,
        Ref.of(data),
        media_type="text/plain; charset=utf-8",
        tool="run_tests",
        budget=Budget.LIGHT,
        failed=True,
    )

    assert stub.text == EXPECTED_CI_STUB
    assert len(_utf8(stub.text)) == 1806  # a 2 KiB floor: the light budget is for larger bodies


def test_a_small_log_fits_whole_in_its_preview() -> None:
    data = b"build started\ncompiling 3 files\nbuild ok in 1.2s\n"

    stub = render_stub(data, Ref.of(data), media_type="text/plain", tool="make")

    assert stub.text == (
        f"[cargohold] {Ref.of(data)}\n"
        "tool make | text/plain | 49 bytes | about 18 tokens | complete\n"
        "kept out of context | kind text | class exact_required\n"
        "--- preview ---\n"
        "build started\n"
        "compiling 3 files\n"
        "build ok in 1.2s\n"
        "--- end of preview ---\n"
        "read more: artifact_read(ref, offset, length) | artifact_read_lines(ref, start_line, "
        "end_line) | artifact_grep(ref, pattern)\n"
        f"[cargohold] end of stub | budget balanced | check {_split(stub.text)[1][-16:]}"
    )


@pytest.mark.parametrize(
    "prose",
    [
        "Привет, мир! Это длинная строка русского текста без перевода строки. ",
        "Ελληνικό κείμενο σε μία γραμμή χωρίς αλλαγή γραμμής. ",
    ],
    ids=["russian", "greek"],
)
def test_a_single_line_of_non_ascii_prose_is_not_mistaken_for_base64(prose: str) -> None:
    data = (prose * 20).encode()

    stub = render_stub(data, Ref.of(data), media_type="text/plain")

    assert stub.projection.classification is not ProjectionClass.UNSUPPORTED
    assert prose.split()[0] in stub.projection.preview


def _png(width: int, height: int, extra: int) -> bytes:
    header = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR"
    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 6, 0, 0, 0])
    return header + ihdr + b"\x00" * 4 + random.Random(7).randbytes(extra)


def test_an_image_stub_states_the_tokens_the_guard_counts_for_an_image_part() -> None:
    from cargohold._tokens import IMAGE_TOKENS
    from cargohold.guard import IMAGE_TOKENS as GUARD_IMAGE_TOKENS

    data = _png(1024, 1024, 300_000)

    for media_type in ("image/png", "application/octet-stream"):  # the bytes say PNG either way
        stub = render_stub(data, Ref.of(data), media_type=media_type)

        assert stub.estimated_tokens == IMAGE_TOKENS == GUARD_IMAGE_TOKENS
        assert f"| about {IMAGE_TOKENS:,} tokens as an image |" in stub.text


def test_other_binary_stubs_state_the_tokens_of_their_base64_encoding() -> None:
    from cargohold._tokens import Family, estimate_tokens

    data = b"%PDF-1.5\n" + random.Random(3).randbytes(200_000)

    stub = render_stub(data, Ref.of(data), media_type="application/pdf")

    base64_size = -(-len(data) // 3) * 4
    assert stub.estimated_tokens == estimate_tokens(len(data), Family.BINARY)
    assert abs(stub.estimated_tokens - estimate_tokens(base64_size, Family.BASE64)) <= 1
    assert f"| about {stub.estimated_tokens:,} tokens as base64 |" in stub.text
