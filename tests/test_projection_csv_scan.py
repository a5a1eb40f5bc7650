"""The CSV projector's line scan, a window at a time, against a reading of every line.

A table whose records are its lines is read without a list of its lines: each window's
delimiters and line feeds (``translate``) give its lines' widths, a window of lines all alike
is counted without a split, the others are split and counted in C, and the sampled and end
rows are found by counting line feeds. These tests hold what it finds (the counts, the widths
in the order they first appear, the first, last and sampled rows and their text) to a split of
the whole body into lines, read line by line; windows of a few bytes put every kind of line
(blank, ragged, quoted, CRLF, a BOM, an unended last line) across window edges. The pieces it
is built of are held to their plain definitions too: the n-th line feed, the text of a span of
lines, records parsed a line at a time, the joined column patterns.
"""

from __future__ import annotations

import csv
import io
import os
import random
import re
import tracemalloc
from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cargohold.projection._csv as csv_projection
from cargohold.projection import detect, project
from cargohold.projection._csv import (
    _column_type,
    _each_parsed,
    _lines_scan,
    _nth_newline,
    _parse,
    _texts,
)

SLOW = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
BOM = b"\xef\xbb\xbf"
Found = tuple[object, ...]


def _split_parse(lines: list[bytes], delimiter: str) -> list[list[str]]:
    text = b"\n".join(lines).decode("utf-8", "replace")
    try:
        return list(csv.reader(io.StringIO(text), delimiter=delimiter, quotechar='"', strict=False))
    except csv.Error as exc:
        raise ValueError("not CSV") from exc


def _per_line(data: bytes, delimiter: str, stride: int, keep: int) -> Found | None:
    """What the scan must find, from a split of the body into lines read one by one."""
    quote = b'"'
    if quote in data and b"".join(data.split(quote)[1::2]).count(b"\n"):
        return None
    if b"\x00" in data or data.count(b"\r") != data.count(b"\r\n"):
        return None
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    if lines and lines[0].startswith(BOM):
        lines[0] = lines[0][3:]
    separator = delimiter.encode()
    blank = [not line or line == b"\r" for line in lines]
    widths: Counter[int] = Counter(line.count(separator) for line in lines)
    for line in lines:
        if quote in line:
            widths[line.count(separator)] -= 1
            widths[len(_split_parse([line], delimiter)[0]) - 1] += 1
    widths[0] -= sum(blank)
    fields = Counter({width + 1: n for width, n in widths.items() if n > 0})
    kept = [n for n in range(len(lines)) if not blank[n]]
    count = len(kept)
    head, tail = kept[: keep + 1], kept[-(keep + 1) :] if kept else []
    head_rows = _split_parse([lines[n] for n in head], delimiter)
    tail_rows = _split_parse([lines[n] for n in tail], delimiter)
    records = range(count - len(tail) + 1, count + 1)
    sampled = [lines[n] for n in range(0, len(lines), stride) if not blank[n]]
    return (
        count,
        sum(blank),
        list(fields.items()),
        [
            (r, n + 1, n + 1, row)
            for r, n, row in zip(range(1, len(head) + 1), head, head_rows, strict=True)
        ],
        [(r, n + 1, n + 1, row) for r, n, row in zip(records, tail, tail_rows, strict=True)],
        _split_parse(sampled, delimiter),
        data.count(b"\n"),
        {(n + 1, n + 1): lines[n] for n in head + tail},
    )


def _by_windows(data: bytes, delimiter: str, stride: int, keep: int) -> Found | None:
    scan = _lines_scan(data, delimiter, stride, keep)
    if scan is None:
        return None
    return (
        scan.count,
        scan.blank,
        list(scan.widths.items()),
        scan.head,
        list(scan.tail),
        scan.sample,
        scan.newlines,
        scan.texts,
    )


def _either(read: Callable[..., object], *args: object) -> object:
    """What a reading gives, or the error it raises (a record the csv module cannot read)."""
    try:
        return read(*args)
    except ValueError as exc:
        return type(exc)


CELLS = [b"1", b"22", b"", b"x y", b"3.5", b"\xc3\xa9", b'"q"', b'"a,b"', b'"a;b"', b"\xff"]
ODD_LINES = [
    b"",
    b"\r",
    b"a\rb",
    b"   ",
    b"only",
    b"a,b,c,d,e,f,g",
    BOM + b"a,b",
    b'x"y,"z',
    b'"',
    b"\t",
]


def _table(pick: random.Random, rows: int, delimiter: bytes) -> bytes:
    """A table of ``rows`` lines: mostly three cells, some ragged, blank, quoted or odd."""
    ending = pick.choice([b"\n", b"\r\n"])
    odd, quoted = pick.choice([0.0, 0.02, 0.3]), pick.choice([0.0, 0.05, 0.5])
    lines = [BOM + b"id,name,value" if pick.random() < 0.2 else b"id,name,value"]
    for _ in range(rows):
        if pick.random() < odd:
            lines.append(pick.choice(ODD_LINES))
            continue
        width = 3 if pick.random() > odd else pick.choice([1, 2, 4, 9])
        cells = [pick.choice(CELLS[:5] if pick.random() > quoted else CELLS) for _ in range(width)]
        lines.append(delimiter.join(cells))
    body = ending.join(lines).replace(b",", delimiter)
    return body + (ending if pick.random() < 0.7 else b"")


@pytest.fixture
def small_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows of a few dozen bytes, so that every kind of line meets a window's edge."""
    monkeypatch.setattr(csv_projection, "_WINDOW", 48)


@pytest.mark.parametrize("seed", range(40))
def test_the_windowed_scan_finds_what_a_reading_of_every_line_finds(
    seed: int, small_windows: None
) -> None:
    pick = random.Random(seed)
    delimiter = pick.choice([",", ";", "\t", "|"])
    data = _table(pick, pick.choice([0, 1, 5, 60, 700]), delimiter.encode())
    for stride, keep in ((1, 2), (3, 8), (pick.randint(32, 90), 4)):
        expected = _either(_per_line, data, delimiter, stride, keep)
        assert _either(_by_windows, data, delimiter, stride, keep) == expected


@SLOW
@given(
    lines=st.lists(st.sampled_from([*ODD_LINES, b"1,2,3", b"4,5,6", b'"7,8",9,x']), max_size=80),
    ended=st.booleans(),
    window=st.integers(1, 200),
    stride=st.sampled_from([1, 2, 7, 32, 33, 70]),
)
def test_the_scan_is_the_same_for_any_window_size(
    lines: list[bytes], ended: bool, window: int, stride: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b"\n".join(lines) + (b"\n" if ended and lines else b"")
    monkeypatch.setattr(csv_projection, "_WINDOW", window)
    expected = _either(_per_line, data, ",", stride, 3)
    assert _either(_by_windows, data, ",", stride, 3) == expected


def test_a_stub_is_the_same_whatever_the_window_size(monkeypatch: pytest.MonkeyPatch) -> None:
    pick = random.Random(7)
    lines = [b"id,name,value"]
    for n in range(60_000):  # a sample of 1 in 45 or so: found by counting line feeds
        odd = pick.random()
        lines.append(b"" if odd < 0.01 else b"%d,x,%d" % (n, n % 7) + b',"a,b"' * (odd > 0.99))
    data = b"\r\n".join(lines)
    found = detect(data, media_type="text/csv")
    whole = project(data, media_type="text/csv", budget=8192, detection=found).preview
    monkeypatch.setattr(csv_projection, "_WINDOW", 1000)
    assert project(data, media_type="text/csv", budget=8192, detection=found).preview == whole
    assert whole.startswith("csv: ")
    assert "blank lines" in whole
    assert "another width" in whole


def test_widths_a_quoted_delimiter_makes_are_named_in_the_order_they_first_appear() -> None:
    # Parsed, the two quoted lines have 4 fields and 1 field, widths no line has unparsed
    # (their raw delimiters say 5 and 6): equal counts are listed as the rows come.
    data = b"a,b,c\n" + b"1,2,3\n" * 10 + b'"a,b",c,d,e\n4,5,6\n"a,b,c,d,e,f"\n7,8,9\n'
    stub = project(data, media_type="text/csv", budget=8192).preview
    assert "note: 2 rows of another width (4 fields x1, 1 fields x1)" in stub


def test_a_quoted_line_break_leaves_the_table_to_the_csv_module() -> None:
    assert _lines_scan(b'a,b\n"one\ntwo",2\n', ",", 1, 2) is None
    assert _lines_scan(b'a,b\n"one two",2\n', ",", 1, 2) is not None


@SLOW
@given(
    data=st.lists(st.sampled_from([b"\n", b"a", b"bcd", b"\n\n", b"x" * 50]), max_size=60).map(
        b"".join
    ),
    start=st.integers(0, 400),
    k=st.integers(1, 60),
    average=st.sampled_from([0.01, 1.0, 3.0, 40.0, 10_000.0]),
)
def test_the_nth_line_feed_is_the_one_a_list_of_them_names(
    data: bytes, start: int, k: int, average: float
) -> None:
    feeds = [at for at, byte in enumerate(data) if byte == 10 and at >= start]
    assert _nth_newline(data, start, k, average) == (feeds[k - 1] if len(feeds) >= k else -1)


@SLOW
@given(
    lines=st.lists(st.sampled_from([b"", b"a", b"bc\r", b"d" * 30]), max_size=40),
    spans=st.lists(st.tuples(st.integers(1, 45), st.integers(0, 4)), max_size=6),
)
def test_a_span_of_lines_is_its_slice_of_a_split(
    lines: list[bytes], spans: list[tuple[int, int]]
) -> None:
    data = b"\n".join(lines)
    # Spans of records, as the csv module reports them: one after another, never overlapping.
    chosen, last = set(), 0
    for gap, length in spans:
        first = last + gap
        chosen.add((first, first + length))
        last = first + length
    split = data.split(b"\n")
    expected = {(f, t): b"\n".join(split[f - 1 : t]) for f, t in chosen}
    assert _texts(data, chosen, 2.0) == expected


LINES = [
    b"a,b",
    b'"a,b",c',
    b'x"y,"z',
    b'"open',
    b'"a""b",c',
    b"\xe2\x82",
    b"\xff,\xc3\xa9",
    b"c\r",
]


@SLOW
@given(lines=st.lists(st.sampled_from(LINES), max_size=12))
def test_lines_parse_as_the_csv_module_reads_them_joined(lines: list[bytes]) -> None:
    assert _either(_parse, lines, ",") == _either(_split_parse, lines, ",")


@SLOW
@given(lines=st.lists(st.sampled_from([line for line in LINES if b'"' in line]), max_size=12))
def test_lines_parsed_together_are_each_as_if_parsed_alone(lines: list[bytes]) -> None:
    alone = _either(lambda: [_split_parse([line], ",")[0] for line in lines])
    assert _either(_each_parsed, lines, ",") == alone


# Unicode digits too (Arabic-Indic three, fullwidth twelve): Python's \\d takes them.
VALUES = ["0", "12", "-3", "+4", "05", "1.5", ".5", "1e5", "1.e-3", "1e", "2024-01-02", "1/2/2024"]
VALUES += ["12/31/1999", "2024-01-02T10:00", "2024-01-02 10:00:00.5+05:30", "1/2/2024 1:05 PM"]
VALUES += [
    "2024-01-02T10:00Z",
    "true",
    "x",
    "",
    "\u0663",
    "\uff11\uff12",
    "1/2/2024 10:00PM",
    "2024-1-2",
]


@SLOW
@given(
    values=st.lists(
        st.one_of(
            st.sampled_from(VALUES),
            st.text(alphabet="0123456789+-.eE/:TZ PM", max_size=12),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_a_column_has_the_narrowest_type_each_of_its_values_has(values: list[str]) -> None:
    """The joined patterns (one pass over the column) agree with each value's own pattern."""
    one = {
        "int": re.compile(r"[-+]?(?:0|[1-9]\d*)"),
        "float": csv_projection._ONE_FLOAT,
        "digits": re.compile(r"\d+"),
    }
    expected = next(
        (kind for kind, pattern in one.items() if all(pattern.fullmatch(v) for v in values)),
        None,
    )
    if expected is None and all(v in csv_projection._BOOLS for v in values):
        expected = "bool"
    if expected is None:
        dated = (("datetime", csv_projection._DATETIME), ("date", csv_projection._DATE))
        kinds = (kind for kind, pattern in dated if all(pattern.fullmatch(v) for v in values))
        expected = next(kinds, "str")
    assert _column_type(values) == expected


def test_typing_a_long_column_keeps_no_state_per_value() -> None:
    values = [f"{n * 7 % 99991 / 100}" for n in range(20_000)]  # about 140 KB joined
    _column_type(values[:10])
    tracemalloc.start()
    try:
        assert _column_type(values) == "float"
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 600_000  # the joined column; a greedy repeat kept about 14 MB


def _bench_like(size: int) -> bytes:
    """A table like the bench's: six columns, about 60 bytes a row."""
    pick = random.Random(11)
    lines = ["id,customer,total,status,created_at,note"]
    for n in range(1, size // 60):
        lines.append(
            f"{n},c-{pick.randint(1, 99999):05d},{pick.randint(99, 99999) / 100},"
            f"{pick.choice(['paid', 'open', 'void'])},2026-11-{pick.randint(1, 28):02d},"
            f"note number {pick.randint(0, 10**12):012d}"
        )
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("size", [1 << 20, 4 << 20])
def test_a_csv_projection_peaks_under_twice_the_body(size: int) -> None:
    data = _bench_like(size)
    found = detect(data, media_type="text/csv")
    project(data[:65536], media_type="text/csv", budget=8192)  # imports and caches, unmeasured
    tracemalloc.start()
    try:
        project(data, media_type="text/csv", budget=8192, detection=found)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * len(data)  # a list of the lines alone was 1.7x; the stub's sample is ~1x
