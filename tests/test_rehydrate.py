"""Explicit rehydration: owner-checked, digest-verified, budgeted reads, one reference at a time."""

from __future__ import annotations

import base64
import json
import random
import re
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import re2
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cargohold import (
    DEFAULT_READ_BUDGET,
    ContentKind,
    Limits,
    ListSink,
    LocalStore,
    MemoryStore,
    Operation,
    ReadError,
    Reason,
    Ref,
    RehydrateOutcome,
    RehydrateResult,
    Rehydrator,
    Reporter,
    Scope,
    ScopedStore,
    StoreBackend,
    UsageError,
    parse_segment,
)
from cargohold.testing import FakeClock

OWNER = Scope("tenant-acme", "user-ana", "session-1")
SAME_TENANT_OTHER_SESSION = Scope("tenant-acme", "user-ana", "session-2")
OTHER_TENANT = Scope("tenant-globex", "user-ana", "session-1")
KiB = 1024
MiB = 1024 * KiB

LOG = "".join(
    f"2026-03-01T10:{index // 60:02d}:{index % 60:02d}Z {'ERROR' if index % 7 == 0 else 'INFO'} "
    f"request {index} served in {index * 13 % 900} ms\n"
    for index in range(1, 301)
).encode()
ROWS = [
    {"id": index, "status": "refunded" if index % 5 == 0 else "paid", "total": index * 1.5}
    for index in range(1, 201)
]
DOC = json.dumps(ROWS).encode()
SPAN = re.compile(r"bytes (\d+)-(\d+) of (\d+)")


@pytest.fixture(params=["memory", "local"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> Iterator[StoreBackend]:
    store: StoreBackend
    if request.param == "memory":
        store = MemoryStore(clock=clock)
    else:
        store = LocalStore(tmp_path / "store", clock=clock)
    yield store
    store.close()


@pytest.fixture
def scoped(backend: StoreBackend) -> ScopedStore:
    return ScopedStore(backend, OWNER)


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


@pytest.fixture
def reader(scoped: ScopedStore, sink: ListSink) -> Rehydrator:
    return Rehydrator(scoped, reporter=Reporter([sink]))


Read = Callable[[Rehydrator, Ref, int | None], RehydrateResult]

READS: dict[str, Read] = {
    "read": lambda reader, ref, budget: reader.read(ref, budget=budget),
    "read-range": lambda reader, ref, budget: reader.read(
        ref, offset=10, length=200, budget=budget
    ),
    "read_lines": lambda reader, ref, budget: reader.read_lines(ref, 1, 3, budget=budget),
    "grep": lambda reader, ref, budget: reader.grep(ref, "1", budget=budget),
    "query": lambda reader, ref, budget: reader.query(ref, "[0].id", budget=budget),
}
"""Every kind of read, over a JSON body (which each of them can read)."""

every_read = pytest.mark.parametrize("read", list(READS.values()), ids=list(READS))


def _assert_refused(result: RehydrateResult, outcome: RehydrateOutcome, reason: Reason) -> None:
    """A read that did not resolve: its outcome, its reason, and no content anywhere."""
    assert result.outcome is outcome
    assert result.reason is reason
    assert not result.ok
    assert result.segment is None
    assert result.content is None
    assert result.span is None
    assert result.event.outcome is outcome
    assert result.event.reason is reason
    assert result.event.context_bytes == 0
    with pytest.raises(ReadError) as raised:
        result.raise_for_outcome()
    assert raised.value.outcome == outcome.value


# -- outcomes, for every kind of read ---------------------------------------------------------


@every_read
def test_a_read_of_an_artifact_the_owner_holds_resolves(
    scoped: ScopedStore, reader: Rehydrator, sink: ListSink, read: Read
) -> None:
    ref = scoped.put(DOC, media_type="application/json").ref

    result = read(reader, ref, None)

    assert result.outcome is RehydrateOutcome.RESOLVED
    assert result.reason is Reason.VERIFIED
    assert result.ok
    assert result.content is not None
    assert result.segment is not None
    assert result.raise_for_outcome() == result.content
    info = parse_segment(result.segment, key=scoped.marker_key())
    assert info is not None
    assert info.ref == ref
    assert info.budget == DEFAULT_READ_BUDGET
    assert result.segment.splitlines()[1:-1] == result.content.splitlines()
    assert result.answer_bytes == len(result.content.encode())
    assert result.event.ref == str(ref)
    assert result.event.operation is Operation.REHYDRATE
    assert result.event.content_kind is ContentKind.RECOVERED_CONTEXT
    assert result.event.observed_bytes == result.answer_bytes
    assert result.event.limit_bytes == DEFAULT_READ_BUDGET
    assert result.event.context_bytes == len(result.segment.encode())
    assert sink.events == [result.event]


@every_read
def test_a_reference_never_stored_is_missing(reader: Rehydrator, read: Read) -> None:
    result = read(reader, Ref.of(b"never stored"), None)

    _assert_refused(result, RehydrateOutcome.MISSING, Reason.NOT_FOUND)
    assert result.answer_bytes == 0


@every_read
def test_another_tenants_artifact_is_missing_not_unauthorized(
    backend: StoreBackend, reader: Rehydrator, read: Read
) -> None:
    ref = ScopedStore(backend, OTHER_TENANT).put(DOC).ref

    _assert_refused(read(reader, ref, None), RehydrateOutcome.MISSING, Reason.NOT_FOUND)


@every_read
def test_another_sessions_artifact_in_the_same_tenant_is_unauthorized(
    backend: StoreBackend, reader: Rehydrator, read: Read
) -> None:
    ref = ScopedStore(backend, SAME_TENANT_OTHER_SESSION).put(DOC).ref

    result = read(reader, ref, None)

    _assert_refused(result, RehydrateOutcome.UNAUTHORIZED, Reason.OWNER_MISMATCH)


@every_read
def test_bytes_that_no_longer_match_their_digest_are_stale(
    backend: StoreBackend, scoped: ScopedStore, reader: Rehydrator, read: Read
) -> None:
    ref = scoped.put(DOC).ref
    backend.corrupt_for_tests(OWNER.tenant, ref, offset=20)

    _assert_refused(read(reader, ref, None), RehydrateOutcome.STALE, Reason.DIGEST_MISMATCH)


@every_read
def test_an_artifact_past_its_ttl_is_expired(
    scoped: ScopedStore, reader: Rehydrator, clock: FakeClock, read: Read
) -> None:
    ref = scoped.put(DOC, ttl=60).ref
    assert read(reader, ref, None).ok
    clock.advance(61)

    _assert_refused(read(reader, ref, None), RehydrateOutcome.EXPIRED, Reason.TTL_ELAPSED)


OVER: dict[str, Read] = {
    "read": READS["read"],
    "read-range": READS["read-range"],
    "read_lines": READS["read_lines"],
    "query": lambda reader, ref, budget: reader.query(ref, "[*].id", budget=budget),
}


@pytest.mark.parametrize("read", list(OVER.values()), ids=list(OVER))
def test_an_answer_larger_than_the_budget_is_over_budget(
    scoped: ScopedStore, reader: Rehydrator, read: Read
) -> None:
    ref = scoped.put(DOC).ref

    result = read(reader, ref, 20)

    _assert_refused(result, RehydrateOutcome.OVER_BUDGET, Reason.BUDGET_EXCEEDED)
    assert result.budget == 20
    assert result.event.limit_bytes == 20
    assert result.answer_bytes > 20
    assert result.event.observed_bytes == result.answer_bytes


def test_a_read_states_how_large_the_refused_answer_would_have_been(
    scoped: ScopedStore, reader: Rehydrator
) -> None:
    ref = scoped.put(LOG).ref

    whole = reader.read(ref, budget=1000)
    part = reader.read(ref, offset=100, length=5000, budget=1000)
    tail = reader.read(ref, offset=len(LOG) - 1500, budget=1000)

    assert [r.outcome for r in (whole, part, tail)] == [RehydrateOutcome.OVER_BUDGET] * 3
    assert (whole.answer_bytes, part.answer_bytes, tail.answer_bytes) == (len(LOG), 5000, 1500)


# -- budgets --------------------------------------------------------------------------------


def test_the_default_read_budget_is_16_kib(scoped: ScopedStore, reader: Rehydrator) -> None:
    body = (LOG * 20)[: 16 * KiB + 1]
    ref = scoped.put(body).ref

    fits = reader.read(ref, length=16 * KiB)
    over = reader.read(ref)

    assert 16 * KiB == DEFAULT_READ_BUDGET
    assert fits.outcome is RehydrateOutcome.RESOLVED
    assert fits.budget == 16 * KiB
    assert over.outcome is RehydrateOutcome.OVER_BUDGET
    assert over.event.limit_bytes == 16 * KiB


def test_a_caller_may_ask_for_up_to_1_mib_explicitly(
    scoped: ScopedStore, reader: Rehydrator
) -> None:
    body = (LOG * 400)[:MiB]
    ref = scoped.put(body).ref

    result = reader.read(ref, budget=MiB)

    assert result.outcome is RehydrateOutcome.RESOLVED
    assert result.content is not None
    assert result.content.encode() == body


@pytest.mark.parametrize("budget", [0, -1, MiB + 1, True, 1.5, "16384"])
def test_a_budget_outside_1_byte_to_1_mib_is_a_usage_error(
    scoped: ScopedStore, reader: Rehydrator, sink: ListSink, budget: object
) -> None:
    ref = scoped.put(LOG).ref

    for call in (
        lambda: reader.read(ref, budget=budget),
        lambda: reader.read_lines(ref, budget=budget),
        lambda: reader.grep(ref, "INFO", budget=budget),
        lambda: reader.query(ref, "a", budget=budget),
    ):
        with pytest.raises(UsageError):
            call()
    with pytest.raises(UsageError):
        Rehydrator(scoped, default_budget=budget)
    assert sink.events == []


def test_a_rehydrator_needs_a_scoped_store() -> None:
    with pytest.raises(UsageError):
        Rehydrator(MemoryStore())


# -- byte ranges -----------------------------------------------------------------------------


def test_a_byte_range_on_multibyte_text_starts_where_asked_and_names_its_bytes(
    scoped: ScopedStore, reader: Rehydrator
) -> None:
    body = "naïve café — 𝄞 clef, ünïcödé façade; 日本語のテキスト; emoji 🚀🚀 end\n".encode()
    ref = scoped.put(body).ref

    for offset in range(len(body)):
        for length in (1, 2, 3, 4, 7, 13):
            result = reader.read(ref, offset=offset, length=length)
            assert result.outcome is RehydrateOutcome.RESOLVED
            assert result.content is not None
            assert result.start == offset  # never a skipped byte: pages reassemble exactly
            inside = (body[offset] & 0xC0) == 0x80
            piece = body[offset : offset + length]
            try:
                piece.decode("utf-8")
                partial = False
            except UnicodeDecodeError as exc:
                partial = exc.start == 0  # not even one whole character
            if inside or partial:  # such a page is base64, so no byte is ever skipped
                assert result.encoding == "base64"
                assert base64.b64decode(result.content) == piece
                continue
            assert result.encoding == "utf-8"
            match = SPAN.fullmatch(result.span or "")
            assert match is not None, result.span
            first, last, size = (int(group) for group in match.groups())
            assert size == len(body)
            assert first == offset
            assert offset <= last <= min(offset + length, len(body))
            assert min(offset + length, len(body)) - last <= 3
            assert body[first:last].decode() == result.content
            assert result.answer_bytes == last - first


def test_a_byte_range_that_ends_past_the_end_is_clipped_one_that_starts_past_it_is_refused(
    scoped: ScopedStore, reader: Rehydrator
) -> None:
    ref = scoped.put(b"0123456789").ref

    result = reader.read(ref, offset=6, length=100)
    beyond = reader.read(ref, offset=50, length=5)

    assert (result.content, result.span) == ("6789", "bytes 6-10 of 10")
    _assert_refused(beyond, RehydrateOutcome.OUT_OF_RANGE, Reason.PAST_END)
    assert (beyond.size, beyond.fit) == (10, (0, 10))


@pytest.mark.parametrize(("offset", "length"), [(-1, 10), (0, -1), (0, True)])
def test_a_negative_or_non_integer_range_is_a_usage_error(
    scoped: ScopedStore, reader: Rehydrator, offset: int, length: int
) -> None:
    ref = scoped.put(LOG).ref
    with pytest.raises(UsageError):
        reader.read(ref, offset=offset, length=length)


def test_binary_comes_back_base64_and_decodes_to_the_exact_bytes(
    scoped: ScopedStore, reader: Rehydrator
) -> None:
    body = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + random.Random(7).randbytes(6000)
    ref = scoped.put(body, media_type="image/png").ref

    whole = reader.read(ref)
    part = reader.read(ref, offset=0, length=1000)

    assert whole.content is not None
    assert part.content is not None
    assert base64.b64decode(whole.content, validate=True) == body
    assert base64.b64decode(part.content, validate=True) == body[:1000]
    assert whole.span == f"bytes 0-{len(body)} of {len(body)}, base64"
    assert whole.answer_bytes == len(whole.content)


def test_binary_whose_base64_form_exceeds_the_budget_is_over_budget(
    scoped: ScopedStore, reader: Rehydrator
) -> None:
    body = b"\x00" + random.Random(3).randbytes(2999)
    ref = scoped.put(body).ref

    result = reader.read(ref, budget=3500)  # the raw bytes fit, their base64 (4000) does not

    assert result.outcome is RehydrateOutcome.OVER_BUDGET
    assert result.answer_bytes == 4000
    assert result.content is None


def test_a_range_read_outside_a_corrupt_chunk_still_resolves(
    backend: StoreBackend, scoped: ScopedStore, reader: Rehydrator
) -> None:
    body = (LOG * 20)[: 200 * KiB]
    ref = scoped.put(body).ref
    backend.corrupt_for_tests(OWNER.tenant, ref, offset=150 * KiB)

    clean = reader.read(ref, offset=0, length=1000)
    damaged = reader.read(ref, offset=150 * KiB - 10, length=100)

    assert clean.outcome is RehydrateOutcome.RESOLVED
    assert clean.content == body[:1000].decode()
    assert damaged.outcome is RehydrateOutcome.STALE


# -- lines ----------------------------------------------------------------------------------


def test_a_line_range_returns_exactly_those_lines(scoped: ScopedStore, reader: Rehydrator) -> None:
    ref = scoped.put(LOG).ref
    lines = LOG.decode().splitlines(keepends=True)

    middle = reader.read_lines(ref, 10, 12)
    to_end = reader.read_lines(ref, 299)
    clipped = reader.read_lines(ref, 299, 5000)

    assert middle.content == "".join(lines[9:12])
    assert middle.span == "lines 10-12 of 300"
    assert to_end.content == "".join(lines[298:])
    assert clipped.content == to_end.content


@pytest.mark.parametrize(("start", "end"), [(0, 3), (-2, 3), (5, 4), (True, 3)])
def test_a_line_range_that_does_not_start_at_1_or_runs_backwards_is_a_usage_error(
    scoped: ScopedStore, reader: Rehydrator, start: int, end: int
) -> None:
    ref = scoped.put(LOG).ref
    with pytest.raises(UsageError):
        reader.read_lines(ref, start, end)


def test_lines_are_numbered_by_newlines_as_the_stub_counts_them(
    scoped: ScopedStore, reader: Rehydrator
) -> None:
    body = b"progress 10%\rprogress 100%\npage one\x0cpage two\nlast\n"
    ref = scoped.put(body).ref

    second = reader.read_lines(ref, 2, 2)
    found = reader.grep(ref, "last")

    assert second.content == "page one\x0cpage two\n"
    assert found.content is not None
    assert found.content.startswith("3: last\n")


# -- grep -----------------------------------------------------------------------------------


def _grep_lines(content: str | None) -> list[tuple[int, str]]:
    assert content is not None
    shown = []
    for line in content.splitlines():
        match = re.fullmatch(r"(\d+): (.*)", line)
        if match:
            shown.append((int(match.group(1)), match.group(2)))
    return shown


def _grep_total(content: str | None) -> int:
    assert content is not None
    match = re.search(r"\[(\d+) matching lines; (\d+) shown\]\Z", content)
    assert match is not None
    return int(match.group(1))


def test_grep_returns_matching_lines_with_their_numbers(
    scoped: ScopedStore, reader: Rehydrator
) -> None:
    ref = scoped.put(LOG).ref
    lines = LOG.decode().splitlines()
    expected = [(n, line) for n, line in enumerate(lines, 1) if " ERROR " in line]

    result = reader.grep(ref, r" ERROR ")

    assert result.outcome is RehydrateOutcome.RESOLVED
    assert _grep_lines(result.content) == expected
    assert _grep_total(result.content) == len(expected)


def test_grep_can_ignore_case(scoped: ScopedStore, reader: Rehydrator) -> None:
    ref = scoped.put(b"Alpha\nALPHA\nbeta\nalpha\n").ref

    sensitive = reader.grep(ref, "alpha")
    insensitive = reader.grep(ref, "alpha", ignore_case=True)

    assert [n for n, _ in _grep_lines(sensitive.content)] == [4]
    assert [n for n, _ in _grep_lines(insensitive.content)] == [1, 2, 4]


def test_grep_counts_every_match_even_when_it_shows_fewer(
    scoped: ScopedStore, reader: Rehydrator
) -> None:
    ref = scoped.put(LOG).ref

    capped = reader.grep(ref, "INFO", max_matches=5)
    budgeted = reader.grep(ref, "INFO", budget=1000)

    infos = LOG.count(b" INFO ")
    assert [n for n, _ in _grep_lines(capped.content)] == [1, 2, 3, 4, 5]
    assert _grep_total(capped.content) == infos
    assert budgeted.outcome is RehydrateOutcome.RESOLVED
    assert budgeted.content is not None
    assert len(budgeted.content.encode()) <= 1000
    assert 0 < len(_grep_lines(budgeted.content)) < infos
    assert _grep_total(budgeted.content) == infos


def test_a_grep_answer_never_exceeds_its_budget(scoped: ScopedStore, reader: Rehydrator) -> None:
    ref = scoped.put(LOG).ref

    too_small = reader.grep(ref, "INFO", budget=10)

    _assert_refused(too_small, RehydrateOutcome.OVER_BUDGET, Reason.BUDGET_EXCEEDED)
    for budget in range(1, 600, 7):
        result = reader.grep(ref, "INFO", budget=budget)
        if result.ok:
            assert result.content is not None
            assert len(result.content.encode()) <= budget
            assert parse_segment(result.segment or "", key=scoped.marker_key()) is not None
        else:
            assert result.outcome is RehydrateOutcome.OVER_BUDGET


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(a|aa)+$", r"(a*)*b$", r"(.*a){25}$"])
def test_grep_with_a_catastrophic_backtracking_pattern_completes(
    scoped: ScopedStore, reader: Rehydrator, pattern: str
) -> None:
    line = "a" * 200_000 + "c"
    ref = scoped.put(f"{line}\n{line}\n".encode()).ref

    result = reader.grep(ref, pattern)

    assert result.outcome is RehydrateOutcome.RESOLVED
    assert _grep_total(result.content) == 0


def test_grep_shows_a_very_long_line_as_a_bounded_window_around_the_match(
    scoped: ScopedStore, reader: Rehydrator
) -> None:
    line = "ab€" * 200_000 + "NEEDLE-42" + "cd" * 200_000
    ref = scoped.put(f"short line\n{line}\n".encode()).ref

    result = reader.grep(ref, "NEEDLE-[0-9]+", budget=MiB)

    assert result.content is not None
    assert len(result.content.encode()) < 4 * KiB
    shown = _grep_lines(result.content)
    assert [n for n, _ in shown] == [2]
    assert "NEEDLE-42" in shown[0][1]


@pytest.mark.parametrize("pattern", ["(", "a{2,1}", r"(a)\1", "", "x" * 1001])
def test_an_invalid_or_unsupported_pattern_is_a_usage_error_and_no_decision(
    scoped: ScopedStore, reader: Rehydrator, sink: ListSink, pattern: str
) -> None:
    ref = scoped.put(LOG).ref
    with pytest.raises(UsageError):
        reader.grep(ref, pattern)
    assert sink.events == []


def _reference_grep(body: bytes, pattern: str, max_matches: int, budget: int) -> str | None:
    """Grep as a model reads it, one line at a time: each line's bytes searched on their own,
    shown decoded with replacement, a long line as one window per match (positions counted in
    characters, offsets in bytes). ``None`` when the answer is over the budget."""
    regex = re2.compile(pattern)
    parts = body.split(b"\n")
    lines = parts[:-1] + ([parts[-1]] if parts[-1] else [])
    shown: list[str] = []
    used = matched = offset = 0
    for number, raw in enumerate(lines, 1):
        line_start, offset = offset, offset + len(raw) + 1
        if regex.search(raw) is None:
            continue
        matched += 1
        if len(shown) >= max_matches:
            continue
        text = raw.decode("utf-8", "replace")
        entries = []
        if len(text) <= 400:
            entries.append(f"{number}: {text}\n")
        else:
            at = 0
            while len(entries) < max_matches - len(shown) and at <= len(text):
                found = regex.search(text, at)
                if found is None:
                    break
                first, last = found.span()
                begin = max(0, first - 100)
                window = text[begin : max(last, begin + 200)][:400]
                where = line_start + len(text[:first].encode())
                entries.append(
                    f"{number}: [byte {where}; line of {len(text):,} chars] ...{window}...\n"
                )
                at = last if last > first else last + 1
        for entry in entries:
            if used + len(entry.encode()) + 120 > budget:
                max_matches = len(shown)
                break
            shown.append(entry)
            used += len(entry.encode())
    noun = "matching line" if matched == 1 else "matching lines"
    text = "".join(shown) + f"[{matched} {noun}; {len(shown)} shown]"
    return None if len(text.encode()) > budget else text


_PATTERN_PARTS = [
    "a",
    "b",
    "é",
    r"\d",
    ".",
    "(?s).",
    "^",
    "$",
    r"\A",
    r"\z",
    r"\b",
    r"\s",
    "[^a]",
    r"[a\n]",
    r"\n",
    "x*",
    "(a|b)",
    "|",
    "*",
    "+",
    "?",
    r"\Qa^$\E",
    r"\pL",
    r"\p{^L}",
    "[[:^alpha:]]",
    "[]a]",
    "[^]a]",
    "(?i)",
    r"\x{e9}",
    "(?m)",
    "(?-m:^a)",
    "[$^]",
    r"\C",
]
_LINES = ["", "a", "b", "ab", "é", "a b", "1\r", "ba\t", "xxa", "€ab", "a\xff", "\xe2\x82b"]


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.sampled_from(_PATTERN_PARTS), min_size=1, max_size=6),
    lines=st.lists(st.sampled_from(_LINES), max_size=12),
    long_at=st.none() | st.integers(0, 12),
    final_newline=st.booleans(),
    max_matches=st.integers(1, 6),
    budget=st.sampled_from([150, 400, 16 * KiB]),
)
def test_grep_answers_exactly_as_a_line_by_line_search(
    parts: list[str],
    lines: list[str],
    long_at: int | None,
    final_newline: bool,
    max_matches: int,
    budget: int,
) -> None:
    pattern = "".join(parts)
    quiet = re2.Options()
    quiet.log_errors = False
    try:
        re2.compile(pattern, quiet)
    except re2.error:
        assume(False)
    # \C matches single bytes, inside characters: the reference cannot window those by character
    assume(long_at is None or "\\C" not in pattern)
    raw = [
        line.encode("latin-1") if "\xff" in line or "\xe2" in line else line.encode()
        for line in lines
    ]
    if long_at is not None:  # a line of more than 400 characters, multi-byte ones among them
        raw.insert(min(long_at, len(raw)), ("ab€ x" * 90 + "é1 b" * 30).encode())
    body = b"\n".join(raw) + (b"\n" if final_newline and raw else b"")
    scoped = ScopedStore(MemoryStore(), OWNER)
    ref = scoped.put(body).ref if body else None
    expected = _reference_grep(body, pattern, max_matches, budget)

    if ref is None:
        return
    result = Rehydrator(scoped).grep(ref, pattern, max_matches=max_matches, budget=budget)

    assert result.content == expected


@pytest.mark.parametrize(
    ("pattern", "numbers"),
    [("^b", [2, 3, 4]), ("a$", [1, 3]), (r"\Ab", [2, 3, 4]), (r"a\z", [1, 3]), ("^$", [5])],
)
def test_grep_anchors_hold_at_the_edges_of_every_line(
    scoped: ScopedStore, reader: Rehydrator, pattern: str, numbers: list[int]
) -> None:
    ref = scoped.put(b"a\nb\nba\nb\n\nc").ref

    result = reader.grep(ref, pattern)

    assert [n for n, _ in _grep_lines(result.content)] == numbers


@pytest.mark.parametrize("pattern", [r"a\sb", "a[^x]b", r"a\nb", "(?s)a.b", r"a\C*b"])
def test_no_grep_match_spans_two_lines(
    scoped: ScopedStore, reader: Rehydrator, pattern: str
) -> None:
    ref = scoped.put(b"xa\nbx\n" * 3).ref

    result = reader.grep(ref, pattern)

    assert result.content == "[0 matching lines; 0 shown]"


def test_grep_shows_invalid_utf8_replaced_and_names_exact_byte_offsets_after_it(
    scoped: ScopedStore, reader: Rehydrator
) -> None:
    long_line = b"\xff\xfe" * 300 + b"NEEDLE" + b"-" * 300
    body = b"ok \xc3 bad\n" + long_line + b"\n"
    ref = scoped.put(body).ref

    short = reader.grep(ref, "bad")
    long = reader.grep(ref, "NEEDLE")

    assert short.content == "1: ok \ufffd bad\n[1 matching line; 1 shown]"
    assert long.content is not None
    offsets = [int(at) for at in re.findall(r"\[byte (\d+);", long.content)]
    assert offsets == [body.index(b"NEEDLE")]
    assert "line of 906 chars" in long.content
    assert "\ufffd" * 100 + "NEEDLE" + "-" * 94 + "..." in long.content
    back = reader.read(ref, offset=offsets[0], length=6)
    assert back.content == "NEEDLE"


def test_grep_of_eight_million_short_lines_stays_within_twice_the_body(
    scoped: ScopedStore, reader: Rehydrator
) -> None:
    lines = 8 * MiB
    body = bytearray(b"\n" * (2 * lines))
    body[0::2] = (b"0123456789" * (lines // 10 + 1))[:lines]
    body[2 * 999 :: 2 * 1000] = b"E" * len(body[2 * 999 :: 2 * 1000])  # line 1000, 2000...
    data = bytes(body)
    del body
    ref = scoped.put(data).ref
    errors = lines // 1000

    tracemalloc.start()
    try:
        sparse = reader.grep(ref, "E", max_matches=3)
        dense = reader.grep(ref, "[0-9]", max_matches=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert len(data) == 16 * MiB
    assert peak < 2 * len(data)
    assert sparse.content == (
        f"1000: E\n2000: E\n3000: E\n[{errors:,} matching lines; 3 shown]".replace(",", "")
    )
    assert dense.content == f"1: 0\n2: 1\n[{lines - errors} matching lines; 2 shown]"


# -- query ----------------------------------------------------------------------------------


def test_a_jmespath_query_answers_from_a_json_artifact(
    scoped: ScopedStore, reader: Rehydrator
) -> None:
    ref = scoped.put(DOC, media_type="application/json").ref

    count = reader.query(ref, "length([?status=='refunded'])")
    ids = reader.query(ref, "[?total > `295`].id")

    assert count.content == "40"
    assert json.loads(ids.content or "null") == [197, 198, 199, 200]


@pytest.mark.parametrize("expression", ["[?status==", "", "foo[", "x" * 2001])
def test_an_invalid_jmespath_expression_is_a_usage_error(
    scoped: ScopedStore, reader: Rehydrator, sink: ListSink, expression: str
) -> None:
    ref = scoped.put(DOC).ref
    with pytest.raises(UsageError):
        reader.query(ref, expression)
    assert sink.events == []


@pytest.mark.parametrize("body", [LOG, b"\xff\xfe not utf-8", b"{truncated"], ids=repr)
def test_a_query_on_an_artifact_that_is_not_json_is_a_usage_error(
    scoped: ScopedStore, reader: Rehydrator, body: bytes
) -> None:
    ref = scoped.put(body).ref
    with pytest.raises(UsageError):
        reader.query(ref, "length(@)")  # (a binary one is unsupported: see the binary tests)


@pytest.mark.parametrize("depth", [5_000, 200_000])
def test_a_query_on_json_nested_too_deep_says_so_rather_than_not_json(
    scoped: ScopedStore, reader: Rehydrator, sink: ListSink, depth: int
) -> None:
    ref = scoped.put(("[" * depth + "]" * depth).encode(), media_type="application/json").ref
    shallow = scoped.put(("[" * 50 + "]" * 50).encode(), media_type="application/json").ref

    with pytest.raises(UsageError) as raised:
        reader.query(ref, "length(@)")
    answered = reader.query(shallow, "length(@)")

    message = str(raised.value)
    limit = re.search(r"nests deeper than ([\d,]+) levels", message)
    assert limit is not None, message
    assert 50 < int(limit.group(1).replace(",", "")) < depth
    assert "not JSON" not in message
    assert "grep" in message
    assert answered.content == "1"


# -- passing references to tools ---------------------------------------------------------------


def test_references_in_tool_arguments_are_replaced_by_their_verified_bytes(
    scoped: ScopedStore, reader: Rehydrator, sink: ListSink
) -> None:
    text_ref = scoped.put(b"SELECT 1;\n").ref
    binary = b"\x00\x01\x02\xff"
    binary_ref = scoped.put(binary).ref
    mention = f"see {text_ref} for details"
    arguments = {
        "sql": str(text_ref),
        "files": [str(binary_ref), {"nested": [str(text_ref)]}],
        "pair": (1, str(text_ref)),
        "note": mention,
        str(text_ref): "keys stay as they are",
        "count": 3,
    }

    resolved = reader.resolve_arguments(arguments)

    assert resolved == {
        "sql": "SELECT 1;\n",
        "files": [binary, {"nested": ["SELECT 1;\n"]}],
        "pair": [1, "SELECT 1;\n"],
        "note": mention,
        str(text_ref): "keys stay as they are",
        "count": 3,
    }
    assert arguments["sql"] == str(text_ref)  # the caller's arguments are not changed
    assert len(sink.events) == 4
    assert {event.outcome for event in sink.events} == {RehydrateOutcome.RESOLVED}
    assert [event.ref for event in sink.events] == [
        str(text_ref),
        str(binary_ref),
        str(text_ref),
        str(text_ref),
    ]


def test_an_argument_reference_that_does_not_resolve_raises_read_error_with_its_outcome(
    backend: StoreBackend, scoped: ScopedStore, reader: Rehydrator, sink: ListSink
) -> None:
    foreign = ScopedStore(backend, SAME_TENANT_OTHER_SESSION).put(b"not yours").ref
    big = scoped.put(LOG).ref
    corrupt = scoped.put(b"will rot").ref
    backend.corrupt_for_tests(OWNER.tenant, corrupt)

    cases = [
        ({"a": [str(Ref.of(b"nothing"))]}, None, "missing"),
        ({"a": {"b": str(foreign)}}, None, "unauthorized"),
        ({"a": str(corrupt)}, None, "stale"),
        ({"a": str(big)}, 100, "over_budget"),
    ]
    for arguments, budget, outcome in cases:
        with pytest.raises(ReadError) as raised:
            reader.resolve_arguments(arguments, budget=budget)
        assert raised.value.outcome == outcome
    assert [event.outcome.value for event in sink.events] == [c[2] for c in cases]


def test_arguments_without_references_pass_unchanged_and_read_nothing(
    reader: Rehydrator, sink: ListSink
) -> None:
    arguments = {"path": "/tmp/x", "n": [1, 2.5, None, True], "ref": "artifact://sha256/abc"}

    assert reader.resolve_arguments(arguments) == arguments
    assert sink.events == []


def test_the_argument_budget_defaults_to_the_stores_artifact_limit(tmp_path: Path) -> None:
    scoped = ScopedStore(MemoryStore(limits=Limits(max_artifact_bytes=64 * KiB)), OWNER)
    body = (LOG * 10)[: 40 * KiB]
    ref = scoped.put(body).ref
    reader = Rehydrator(scoped)

    assert reader.resolve_arguments([str(ref)]) == [body.decode()]
    with pytest.raises(UsageError):
        reader.resolve_arguments([str(ref)], budget=0)


@pytest.mark.parametrize("pattern", ["b", "^a", r"\d+$", "é", "x|ab"])
def test_grep_gives_the_same_answer_without_the_private_re2_names(
    pattern: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = "\n".join(["a1", "ab", "é2", "xx", "bab 33", "", "a"] * 40).encode()
    scoped = ScopedStore(MemoryStore(), OWNER)
    ref = scoped.put(body).ref
    fast = Rehydrator(scoped).grep(ref, pattern, max_matches=7, budget=400)

    import cargohold._grep

    monkeypatch.setattr(cargohold._grep, "_RE2_PRIVATE", False)  # as without those names
    slow = Rehydrator(scoped).grep(ref, pattern, max_matches=7, budget=400)

    assert fast.outcome is RehydrateOutcome.RESOLVED
    assert slow.content == fast.content


# -- binary bodies: no lines ------------------------------------------------------------------

PNG_HEAD = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8


@pytest.mark.parametrize(
    "read",
    [
        lambda reader, ref: reader.read_lines(ref, 1, 10),
        lambda reader, ref: reader.grep(ref, "IHDR"),
        lambda reader, ref: reader.query(ref, "length(@)"),
    ],
    ids=["read_lines", "grep", "query"],
)
def test_lines_or_grep_of_a_binary_body_is_unsupported_with_the_base64_page_that_fits(
    reader: Rehydrator,
    scoped: ScopedStore,
    sink: ListSink,
    read: Callable[[Rehydrator, Ref], RehydrateResult],
) -> None:
    ref = scoped.put(PNG_HEAD, media_type="image/png").ref

    result = read(reader, ref)

    _assert_refused(result, RehydrateOutcome.UNSUPPORTED, Reason.BINARY_CONTENT)
    assert result.size == len(PNG_HEAD)
    assert result.fit == (0, len(PNG_HEAD))  # all of it fits the default budget as base64
    assert sink.events[-1] is result.event
    page = reader.read(ref, offset=result.fit[0], length=result.fit[1])
    assert (page.outcome, page.encoding) == (RehydrateOutcome.RESOLVED, "base64")
    assert base64.b64decode(page.content or "") == PNG_HEAD


def test_a_log_with_a_stray_invalid_byte_still_has_lines(
    reader: Rehydrator, scoped: ScopedStore
) -> None:
    ref = scoped.put(b"caf\xe9 opened\n" + LOG).ref

    result = reader.read_lines(ref, 1, 2)

    assert result.outcome is RehydrateOutcome.RESOLVED
    assert (result.content or "").startswith("caf\ufffd opened\n")


# -- past the end -------------------------------------------------------------------------------


def test_a_range_past_the_end_is_out_of_range_with_the_size_and_the_last_range_that_fits(
    reader: Rehydrator, scoped: ScopedStore, sink: ListSink
) -> None:
    ref = scoped.put(LOG).ref
    count = LOG.count(b"\n")

    by_bytes = reader.read(ref, offset=10**9, budget=1000)
    by_lines = reader.read_lines(ref, count + 1, count + 5, budget=1000)
    assert sink.events[-2:] == [by_bytes.event, by_lines.event]

    for result in (by_bytes, by_lines):
        _assert_refused(result, RehydrateOutcome.OUT_OF_RANGE, Reason.PAST_END)
        assert result.size == len(LOG)
    assert by_lines.lines == count
    assert by_bytes.fit is not None
    assert by_lines.fit is not None
    offset, length = by_bytes.fit
    assert offset + length == len(LOG)
    assert reader.read(ref, offset=offset, length=length, budget=1000).ok
    first, last = by_lines.fit
    assert last == count
    tail = reader.read_lines(ref, first, last, budget=1000)
    assert tail.ok
    assert tail.end == len(LOG)


def test_a_line_read_states_the_line_count(reader: Rehydrator, scoped: ScopedStore) -> None:
    ref = scoped.put(b"a\nb\nc").ref

    assert reader.read_lines(ref, 2, 2).lines == 3


def test_a_query_that_fails_on_the_document_is_a_typed_error_naming_function_and_types(
    reader: Rehydrator, scoped: ScopedStore
) -> None:
    ref = scoped.put(DOC, media_type="application/json").ref

    with pytest.raises(UsageError) as raised:
        reader.query(ref, "length([0].total)")

    assert raised.value.code == "query_failed"
    assert "length() expects array|object|string, got number" in str(raised.value)
