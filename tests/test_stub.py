"""Stubs: one renderer, a stable marker, never over budget, same input gives the same stub."""

from __future__ import annotations

import hashlib
import json
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


def _fills_the_preview_room_exactly(data: bytes, budget: Budget, **kwargs: Any) -> bool:
    """Whether ``data`` hits the reported off-by-one in ``render_stub``: a whole-body preview of
    exactly the preview room, without a final newline, gains one and the stub goes 1 byte over
    (see ``test_a_body_that_exactly_fills_the_preview_room_still_fits``). Delete with the fix.

    The room is the budget less the stub's fixed lines, measured on the same body's stub at
    another budget (only the closing line's label differs between budgets).
    """
    text = data.decode("utf-8", "replace")
    if "\x00" in text[:8192] or text.endswith("\n"):
        return False
    other = Budget.MAX if budget is not Budget.MAX else Budget.LIGHT
    lines = render_stub(data, Ref.of(data), budget=other, **kwargs).text.split("\n")
    fixed = sum(len(_utf8(line)) + 1 for line in (*lines[:3], lines[-2]))
    fixed += len(_utf8(f"{CLOSING}{budget.label} | check ")) + 16
    fixed += len(PREVIEW_OPEN) + len(PREVIEW_CLOSE)
    return len(_utf8(text)) == budget - fixed


def _stub(data: bytes, budget: Budget, **kwargs: Any) -> Stub | None:
    """The stub of ``data``, or ``None`` for the one reported bug (any other failure raises)."""
    try:
        return render_stub(data, Ref.of(data), budget=budget, **kwargs)
    except AssertionError:
        assert _fills_the_preview_room_exactly(data, budget, **kwargs)
        return None


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
    assume(stub is not None)
    assert stub is not None
    again = render_stub(bytes(data), Ref.of(data), budget=budget, **kwargs)

    assert len(_utf8(stub.text)) <= budget
    assert stub.size_bytes == len(_utf8(stub.text))
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

    stub = _stub(data, budget, media_type="text/plain")
    assume(stub is not None)
    assert stub is not None

    preview = stub.projection.preview
    assert preview.endswith(text[-40:])
    if len(data) > budget:
        assert "bytes omitted" in preview
    # the preview sits inside the stub, between its rules, unchanged
    assert PREVIEW_OPEN + preview in stub.text


@settings(max_examples=100, deadline=None)
@given(data=bodies, budget=budgets)
def test_a_text_body_that_does_not_fit_says_how_much_it_omits(data: bytes, budget: Budget) -> None:
    stub = _stub(data, budget, media_type="text/plain")
    assume(stub is not None)
    assert stub is not None

    if stub.projection.classification is ProjectionClass.UNSUPPORTED:
        assert stub.projection.kind == "binary"
        assert len(stub.projection.preview) < 120  # metadata and magic bytes only
    elif stub.projection.preview != data.decode("utf-8", "replace"):
        assert "bytes omitted" in stub.projection.preview


@settings(max_examples=200, deadline=None)
@given(data=bodies, budget=budgets, where=st.floats(0, 1, exclude_max=True), new=st.characters())
def test_a_stub_with_any_one_character_changed_is_refused(
    data: bytes, budget: Budget, where: float, new: str
) -> None:
    stub = _stub(data, budget, media_type="text/plain")
    assume(stub is not None)
    assert stub is not None
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


@pytest.mark.xfail(
    strict=True,
    reason="render_stub appends a newline to a preview that already fills its room exactly, "
    "so the stub is 1 byte over budget and raises AssertionError; reported",
)
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
    data = b'{"a": 1}' * 100
    names = ReadTools(read="cat_ref", lines="sed_ref", grep="grep_ref", query="jq_ref")

    stub = render_stub(data, Ref.of(data), media_type="application/json", read_tools=names)

    assert stub.text.splitlines()[-2] == (
        "read more: cat_ref(ref, offset, length) | sed_ref(ref, start_line, end_line) "
        "| grep_ref(ref, pattern) | jq_ref(ref, expression)"
    )


def test_a_binary_stub_shows_metadata_and_magic_bytes_only() -> None:
    data = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 40

    stub = render_stub(data, Ref.of(data), media_type="image/png", tool="screenshot")

    assert stub.text == (
        f"[cargohold] {Ref.of(data)}\n"
        "tool screenshot | image/png | 10,256 bytes | about 9,768 tokens | complete\n"
        "kept out of context | kind binary | class unsupported\n"
        "--- preview ---\n"
        "binary content, no preview; first bytes: 89 50 4e 47 0d 0a 1a 0a 00 00 00 0d 49 48 44 52\n"
        "--- end of preview ---\n"
        "read more: artifact_read(ref, offset, length) | artifact_read_lines(ref, start_line, "
        "end_line) | artifact_grep(ref, pattern)\n"
        f"[cargohold] end of stub | budget balanced | check {_split(stub.text)[1][-16:]}"
    )
    assert parse_stub(stub.text) == StubInfo(Ref.of(data), Budget.BALANCED)


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


EXPECTED_CI_STUB = (
    "[cargohold] artifact://sha256/260123e6102619f40e04bda7851177d3aef58cb9cd91a1919104aa95fe2bcd1b\n"
    "tool run_tests | text/plain; charset=utf-8 | 6,770 bytes | about 1,557 tokens | complete\n"
    "kept out of context | kind text | class exact_required\n"
    "--- preview ---\n"
    "$ python -m pytest -q tests/\n"
    "============================= test session starts ==============================\n"
    "platform linux -- Python 3.11.7, pytest-8.3.2\n"
    "collected 81 items\n"
    "\n"
    "tests/test_orders.py::test_order_001 PASSED                        [  1%]\n"
    "tests/test_orders.py::test_order_002 PASSED                        [  2%]\n"
    "tests/test_orders.py::test_order_003 PASSED                        [  3%]\n"
    + _passed(4, 28)
    + "tests/test_orders.py::test_order_029 PASSED                        [ 35%]\n"
    "[... 3,330 bytes omitted (lines 35-79 of 97, bytes 2,322-5,652) ...]\n"
    "tests/test_orders.py::test_order_075 PASSED                        [ 92%]\n"
    + _passed(76, 79)
    + "tests/test_orders.py::test_order_080 PASSED                        [ 98%]\n"
    "tests/test_orders.py::test_refund_rounding FAILED                        [100%]\n"
    "\n"
    "=================================== FAILURES ===================================\n"
    "___________________________ test_refund_rounding ____________________________\n"
    "    def test_refund_rounding():\n"
    ">       assert refund(Order(total=20.09), ratio=0.5) == 10.05\n"
    "E       AssertionError: assert 10.04 == 10.05\n"
    "\n"
    "tests/test_orders.py:212: AssertionError\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_orders.py::test_refund_rounding - AssertionError: assert 10.04 == 10.05\n"
    "========================= 1 failed, 80 passed in 4.21s =========================\n"
    "--- end of preview ---\n"
    "read more: artifact_read(ref, offset, length) | artifact_read_lines(ref, start_line, "
    "end_line) | artifact_grep(ref, pattern)\n"
    "[cargohold] end of stub | budget light | check 9d03a4ab39e8b958"
)


def test_a_failed_test_run_log_renders_its_head_and_failing_tail_within_a_light_budget() -> None:
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
    assert len(_utf8(stub.text)) == 3975


def test_a_small_log_fits_whole_in_its_preview() -> None:
    data = b"build started\ncompiling 3 files\nbuild ok in 1.2s\n"

    stub = render_stub(data, Ref.of(data), media_type="text/plain", tool="make")

    assert stub.text == (
        f"[cargohold] {Ref.of(data)}\n"
        "tool make | text/plain | 49 bytes | about 12 tokens | complete\n"
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
