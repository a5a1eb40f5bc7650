"""The CSV/TSV projector: dialect, exact row count, typed columns, first and last rows.

The whole body is parsed once with the :mod:`csv` module (so quoted newlines and quoted
delimiters count right), streamed from the bytes: no decoded copy of the body is kept. The loop
over rows does only what must see every row (the count, the rows whose width differs, a strided
sample, the last rows); column facts are computed afterwards, column by column, from the sample,
which is all rows for small tables and otherwise a stated, evenly spaced subset.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
import re
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import re2

from cargohold._re2 import byte_options
from cargohold.projection._model import Builder, Detection, quote

if TYPE_CHECKING:
    from _csv import Reader

_SAMPLE_CELLS = 16_000
"""Cells looked at for column facts; tables up to this size are described over all rows."""
_MIN_SAMPLE_ROWS = 400
_MAX_COLUMNS = 60
_DISTINCT_SHOWN = 12
_DELIMITERS = (",", ";", "\t", "|")
_SNIFF = 16 * 1024

_INT = re.compile(r"[-+]?(?:0|[1-9]\d*)(?:\n[-+]?(?:0|[1-9]\d*))*+")
_NUM = r"[-+]?(?:(?:0|[1-9]\d*)(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_FLOAT = re.compile(rf"{_NUM}(?:\n{_NUM})*+")
_DIGITS = re.compile(r"\d+(?:\n\d+)*+")
"""All digits, some with leading zeros: codes (zip codes, dates as ``081109``), not numbers."""
_ONE_INT = re.compile(r"[-+]?(?:0|[1-9]\d*)")
_ONE_FLOAT = re.compile(_NUM)
_BOOLS = frozenset({"true", "false", "True", "False", "TRUE", "FALSE"})
_ISO_DATE = r"\d{4}-\d{2}-\d{2}"
_US_DATE = r"\d{1,2}/\d{1,2}/\d{4}"
_DATE = re.compile(rf"(?:{_ISO_DATE}|{_US_DATE})")
_DATETIME = re.compile(
    rf"(?:{_ISO_DATE}[T ]\d{{2}}:\d{{2}}(?::\d{{2}}(?:[.,]\d+)?)?(?:Z|[+-]\d{{2}}:?\d{{2}})?"
    rf"|{_US_DATE} \d{{1,2}}:\d{{2}}(?::\d{{2}})?(?: ?[AaPp][Mm])?)"
)
_US_PARTS = re.compile(r"(\d{1,2})/(\d{1,2})/(\d{4})(.*)")
_DATES = re.compile(rf"{_DATE.pattern}(?:\n{_DATE.pattern})*+")
_DATETIMES = re.compile(rf"{_DATETIME.pattern}(?:\n{_DATETIME.pattern})*+")
"""A column of dates or date-times joined by line breaks (no value holding one).

The joined patterns repeat possessively: no value can end in the middle of another, so a
backtrack would never find a match the first try missed, and Python's engine keeps no state
per value for one (a greedy repeat kept about 780 bytes a value: 1.8 MiB for a sampled column).
"""


def _reader(data: bytes, delimiter: str) -> Reader:
    stream = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8-sig", errors="replace", newline="")
    return csv.reader(stream, delimiter=delimiter, quotechar='"', doublequote=True, strict=False)


def _safe_rows(rows: Iterable[list[str]], limit: int) -> list[list[str]]:
    out: list[list[str]] = []
    try:
        for row in itertools.islice(rows, limit):
            out.append(row)
    except csv.Error:
        pass
    return out


def _delimiter(data: bytes, kind: str) -> str:
    """The delimiter that splits the first rows into the most consistent number of fields."""
    if kind == "tsv":
        return "\t"
    head = data[:_SNIFF]
    cut = head.rfind(b"\n")
    if len(data) > _SNIFF and cut > 0:
        head = head[:cut]
    best, best_score = ",", (0.0, 0)
    for delimiter in _DELIMITERS:
        widths = [len(row) for row in _safe_rows(_reader(head, delimiter), 30) if row]
        if not widths:
            continue
        mode, hits = Counter(widths).most_common(1)[0]
        if mode < 2:
            continue
        score = (hits / len(widths), mode)
        if score > best_score:
            best, best_score = delimiter, score
    return best


def _kind_of(value: str) -> str:
    if _ONE_INT.fullmatch(value):
        return "int"
    if _ONE_FLOAT.fullmatch(value):
        return "float"
    if value in _BOOLS:
        return "bool"
    if _DATETIME.fullmatch(value):
        return "datetime"
    if _DATE.fullmatch(value):
        return "date"
    return "str"


def _date_key(value: str) -> str:
    """A sortable form of an ISO or US (M/D/YYYY) date or date-time."""
    match = _US_PARTS.fullmatch(value)
    if match is None:
        return value
    month, day, year, rest = match.groups()
    return f"{year}-{int(month):02d}-{int(day):02d}{rest}"


def _digits_key(value: str) -> tuple[int, str]:
    significant = value.lstrip("0")
    return len(significant), significant


def _number(value: float) -> str:
    if isinstance(value, int):
        return f"{value:,}"
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.6g}" if abs(value) < 1e6 else f"{value:.6g}"


def _show(value: str, limit: int = 40) -> str:
    value = value.replace("\r", "").replace("\n", "\\n")
    if len(value) > limit:
        value = value[: limit - 3] + "..."
    return repr(value) if value.strip() != value or not value else value


def _column_type(values: list[str]) -> str:
    """The narrowest type every value has (checked on the joined column: one regex pass)."""
    joined = "\n".join(values)
    if _INT.fullmatch(joined):
        return "int"
    if _FLOAT.fullmatch(joined):
        return "float"
    if _DIGITS.fullmatch(joined):
        return "digits"
    if all(v in _BOOLS for v in values):
        return "bool"
    # The joined column in one regex pass, as for numbers, when no value holds a line break
    # (which the joined pattern would read as two values); else value by value.
    whole = joined.count("\n") == len(values) - 1
    if _DATETIMES.fullmatch(joined) if whole else all(_DATETIME.fullmatch(v) for v in values):
        return "datetime"
    if _DATES.fullmatch(joined) if whole else all(_DATE.fullmatch(v) for v in values):
        return "date"
    return "str"


def _share(count: int, total: int, exact: bool) -> str:
    if exact:
        return f"{count:,}"
    return f"{100 * count / max(1, total):.0f}%"


def _describe_column(name: str, index: int, values: list[str], exact: bool, *, rich: int) -> str:
    """One column's line: type, range or values, distinct and empty counts.

    Counts are exact over all rows when ``exact``; over a sample they are shares (``43%``) and
    distinct counts are marked ``~``. ``rich`` names how many top values a text column lists.
    """
    present = list(filter(None, map(str.strip, values)))
    total = len(values)
    empty = total - len(present)
    empty_text = f", empty {_share(empty, total, exact)}" if empty else ""
    label = f"  {index} {_show(name, 60)}:"
    if not present:
        return f"{label} always empty"
    kind = _column_type(present)
    counts = Counter(present)
    distinct = len(counts)
    about = "" if exact else "~"

    def top(limit: int) -> str:
        common = counts.most_common(limit)
        if not exact:  # a share that rounds to 0% says nothing; name how many are rarer
            common = [(v, n) for v, n in common if 200 * n >= total] or common[:1]
        listed = ", ".join(f"{_show(v)} {_share(n, total, exact)}" for v, n in common)
        rarer = distinct - len(common)
        return listed + (f", +{rarer} more" if rarer else "")

    if kind in ("int", "float"):
        small = kind == "int" and max(len(v) for v in present) <= 18
        numbers = [int(v) for v in present] if small else [float(v) for v in present]
        finite = [n for n in numbers if math.isfinite(n)]
        span = f" {_number(min(finite))}..{_number(max(finite))}" if finite else ""
        if distinct <= _DISTINCT_SHOWN:
            return f"{label} {kind}{span}, {distinct} distinct: {top(8)}{empty_text}"
        return f"{label} {kind}{span}, {about}{distinct:,} distinct{empty_text}"
    if kind == "digits":
        if distinct <= _DISTINCT_SHOWN:
            return f"{label} digits (leading zeros), {distinct} distinct: {top(8)}{empty_text}"
        low = min(present, key=_digits_key)
        high = max(present, key=_digits_key)
        span = f"{low}..{high}, {about}{distinct:,} distinct"
        return f"{label} digits (leading zeros) {span}{empty_text}"
    if kind in ("date", "datetime"):
        if "/" in "".join(present):  # a US date: ordered by its ISO form
            ordered = sorted(present, key=_date_key)
            low, high = ordered[0], ordered[-1]
        else:  # ISO dates order as text; equal keys are equal values, so min and max suffice
            low, high = min(present), max(present)
        return f"{label} {kind} {low}..{high}, {about}{distinct:,} distinct{empty_text}"
    if kind == "bool":
        return f"{label} bool ({top(2)}){empty_text}"
    kinds = Counter(_kind_of(v) for v in present[:200])
    mixed = ""
    if len(kinds) > 1:
        mixed = " (mixed: " + ", ".join(k for k, _ in kinds.most_common()) + ")"
    if distinct <= _DISTINCT_SHOWN and distinct < len(present):
        return f"{label} str{mixed}, {distinct} distinct ({top(6)}){empty_text}"
    longest = max(len(v) for v in present)
    unique = ", all unique" if distinct == len(present) and len(present) > 1 else ""
    common = ""
    best = counts.most_common(1)[0][1]
    if rich and not unique and distinct * 2 <= len(present) and best * 100 >= total and best > 1:
        common = f"; top: {top(rich)}".rsplit(", +", 1)[0]
    return (
        f"{label} str{mixed}, {about}{distinct:,} distinct{unique}, up to {longest:,} chars"
        f"{empty_text}{common}"
    )


def _looks_like_header(first: list[str], sample: list[list[str]]) -> bool:
    """A first row of distinct texts over typed columns, or over values it never repeats."""
    names = [v.strip() for v in first]
    if not names or any(not n or _kind_of(n) != "str" for n in names):
        return False
    columns = [
        [r[i].strip() for r in sample if len(r) > i and r[i].strip()] for i in range(len(names))
    ]
    if any(column and _column_type(column) != "str" for column in columns):
        return True
    return all(name not in set(column[:500]) for name, column in zip(names, columns, strict=True))


@dataclass(slots=True)
class _Scan:
    """What one pass over every record keeps: counts, widths, the first, sampled and last rows."""

    count: int = 0
    blank: int = 0
    widths: Counter[int] = field(default_factory=Counter)
    head: list[Row] = field(default_factory=list)
    sample: list[list[str]] = field(default_factory=list)
    tail: deque[Row] = field(default_factory=deque)
    error_at: int | None = None
    newlines: int = 0
    """The body's line feeds."""
    texts: dict[tuple[int, int], bytes] = field(default_factory=dict)
    """The body's own text of the first and last rows, by their ``(first line, last line)``."""


Row = tuple[int, int, int, list[str]]
"""``(record number, first line, last line, fields)``."""

_BOM = b"\xef\xbb\xbf"
_WINDOW = 256 * 1024
"""Bytes of the body the scan holds a copy of at a time (and its lines, where it splits them)."""
_UNCOUNTED = {d: bytes(sorted(set(range(256)) - {ord(d), 10})) for d in _DELIMITERS}
"""Per delimiter, the bytes that are neither it nor a line feed (deleted to count both at once)."""
_FEW = 8
"""Line feeds few enough to step over with ``find`` rather than to count."""
_FIND_STRIDE = 32
"""A sample of one line in this many or more is found by counting line feeds; a denser one is
sliced from each window's lines (a split costs less than counting a few lines at a time)."""


_LONE_CR = re2.compile(rb"\r(?:[^\n]|\z)", byte_options(never_capture=True))
"""A carriage return not in a CRLF: found by one search (was a count of each, 24 ms a 16 MiB
body of CRLF lines)."""
_LINE_QUOTES = re2.compile(
    rb'[^"]*(?:"[^"\n]*"[^"]*)*(?:"[^"\n]*)?', byte_options(never_capture=True)
)
"""Matches a body whole when no stretch between an odd quote and the next holds a line feed.

The same test as joining the odd pieces of ``data.split(b'"')`` and looking for one, in one
DFA pass that keeps nothing.
"""


def _nth_newline(data: bytes, start: int, k: int, average: float) -> int:
    """The offset of the ``k``-th line feed at or after ``start`` (``k >= 1``), or -1.

    Counted, not stepped: a stretch of about ``k`` lines of ``average`` bytes is counted, then
    halved by counts until the line feed is a few ``find`` steps from either end.
    """
    find, rfind, count = data.find, data.rfind, data.count
    if k <= _FEW:
        at = start - 1
        for _ in range(k):
            at = find(b"\n", at + 1)
            if at < 0:
                return -1
        return at
    low, need, size = start, k, len(data)
    while True:
        high = min(size, low + int(need * average) + 64)
        found = count(b"\n", low, high)
        if found >= need:
            break
        if high == size:
            return -1
        low, need = high, need - found
    while need > _FEW and found - need >= _FEW:  # the need-th of the found in [low, high)
        middle = (low + high) // 2
        left = count(b"\n", low, middle)
        if left >= need:
            high, found = middle, left
        else:
            low, need, found = middle, need - left, found - left
    if need <= _FEW:
        at = low - 1
        for _ in range(need):
            at = find(b"\n", at + 1)
        return at
    at = high
    for _ in range(found - need + 1):
        at = rfind(b"\n", low, at)
    return at


def _line_starts(data: bytes, stride: int, average: float) -> Iterator[int]:
    """The offsets of the lines numbered 0, ``stride``, ``2 * stride``... (lines end at ``\\n``;
    an empty line after the last line feed is none)."""
    at = 0
    while at < len(data):
        yield at
        end = _nth_newline(data, at, stride, average)
        if end < 0:
            return
        average = max(1.0, (end + 1 - at) / stride)
        at = end + 1


def _line_at(data: bytes, at: int) -> tuple[bytes, int]:
    """The line starting at offset ``at`` (without its line feed, or a first line's BOM), and
    the offset of its end."""
    end = data.find(b"\n", at)
    end = len(data) if end < 0 else end
    return data[at:end].removeprefix(_BOM) if at == 0 else data[at:end], end


def _window_lines(window: bytes, start: int) -> list[bytes]:
    """A window's lines (a first line without its BOM), from the window at offset ``start``."""
    lines = window.split(b"\n")
    if window.endswith(b"\n"):
        lines.pop()
    if start == 0 and lines and lines[0].startswith(_BOM):
        lines[0] = lines[0][3:]
    return lines


def _is_blank(line: bytes) -> bool:
    return not line or line == b"\r"


def _each_parsed(lines: list[bytes], delimiter: str) -> list[list[str]]:
    """The fields of each line parsed alone, as ``_parse([line])[0]`` for each line.

    Parsed together first: with as many records as lines, no line ended inside quotes, so
    each was read from a record's start, as alone. Otherwise (a quote opened in a field's
    middle makes the csv module's quoting differ from the raw quotes') line by line.
    """
    try:
        rows = _parse(lines, delimiter)
    except ValueError:
        rows = []
    if len(rows) == len(lines):
        return rows
    return [_parse([line], delimiter)[0] for line in lines]


def _lines_scan(data: bytes, delimiter: str, stride: int, keep: int) -> _Scan | None:
    """The exact counts in C-speed passes, for a table whose records are its lines (no quoted
    field holds a line break); ``None`` when one does (the csv module must then read it all).

    The body is read a window at a time (no list of its lines): a window's delimiters and line
    feeds, kept alone by ``translate``, are its lines' widths; a window whose lines all have
    the same width (most of a table) is counted without a split. Other windows are split and
    counted line by line in C, lines holding a quote parsed by the csv module (which knows
    quoted delimiters). Only the sampled rows and the ends are parsed into fields, found by
    counting line feeds.
    """
    quote = b'"'
    if quote in data and not _LINE_QUOTES.fullmatch(data):
        return None
    if b"\x00" in data or (b"\r" in data and _LONE_CR.search(data)):
        return None  # a NUL, or a lone carriage return (a line end to the csv module)
    separator = delimiter.encode()
    uncounted = _UNCOUNTED[delimiter]
    scan = _Scan(tail=deque(maxlen=keep + 1))
    # Delimiters per line, in the order widths first appear (ties in most_common go by it);
    # lines holding a quote move from their delimiter count to their parsed width afterwards.
    widths: Counter[int] = Counter()
    unquoted: Counter[int] = Counter()
    parsed: Counter[int] = Counter()
    lines_seen = newlines = 0
    sampled: list[bytes] = []
    by_split = stride < _FIND_STRIDE
    start, size = 0, len(data)
    while start < size:
        end = data.rfind(b"\n", start, start + _WINDOW) + 1
        if end <= start:  # a line longer than the window
            end = data.find(b"\n", start + _WINDOW) + 1 or size
        window = data[start:end]
        marks = window.translate(None, uncounted)
        newlines += marks.count(b"\n")
        if not marks.endswith(b"\n"):  # the body's last line, unended
            marks += b"\n"
        first = marks[: marks.find(b"\n") + 1]
        lines: list[bytes] | None = None
        # Lines alike with a delimiter or more: no blank line and no quote among them.
        if len(first) > 1 and quote not in window and marks.count(first) * len(first) == len(marks):
            widths[len(first) - 1] += len(marks) // len(first)
        else:
            lines = _window_lines(window, start)
            scan.blank += lines.count(b"") + lines.count(b"\r")
            widths.update(map(bytes.count, lines, itertools.repeat(separator)))
            if quote in window:  # a quoted delimiter is not a field boundary
                quoted = [line for line in lines if quote in line]
                unquoted.update(map(bytes.count, quoted, itertools.repeat(separator)))
                parsed.update(len(row) - 1 for row in _each_parsed(quoted, delimiter))
        if by_split:
            lines = _window_lines(window, start) if lines is None else lines
            picked = lines[-lines_seen % stride :: stride]
            sampled.extend(line for line in picked if not _is_blank(line))
        lines_seen += marks.count(b"\n")
        start = end
    widths.subtract(unquoted)
    for width, n in parsed.items():
        widths[width] += n
    scan.count = lines_seen - scan.blank
    scan.newlines = newlines
    widths[0] -= scan.blank  # blank lines have no delimiter and no fields
    scan.widths = Counter({width + 1: n for width, n in widths.items() if n > 0})

    def rows(found: list[tuple[int, bytes]], records: list[int]) -> list[Row]:
        fields = _parse([line for _, line in found], delimiter)
        for n, line in found:
            scan.texts[(n + 1, n + 1)] = line
        return [
            (r, n + 1, n + 1, row) for r, (n, _), row in zip(records, found, fields, strict=True)
        ]

    head: list[tuple[int, bytes]] = []
    number = at = 0
    while len(head) <= keep and at < size:
        line, end = _line_at(data, at)
        if not _is_blank(line):
            head.append((number, line))
        number, at = number + 1, end + 1
    tail: list[tuple[int, bytes]] = []
    number, end = lines_seen - 1, size - 1 if data.endswith(b"\n") else size
    while len(tail) <= keep and number >= 0:
        at = data.rfind(b"\n", 0, end) + 1
        line = _line_at(data, at)[0]
        if not _is_blank(line):
            tail.insert(0, (number, line))
        number, end = number - 1, at - 1
    scan.head = rows(head, list(range(1, len(head) + 1)))
    scan.tail.extend(rows(tail, list(range(scan.count - len(tail) + 1, scan.count + 1))))
    if not by_split:
        head_text = data[: 4 * _SNIFF]
        average = len(head_text) / max(1, head_text.count(b"\n"))
        starts = _line_starts(data, stride, average)
        sampled = [line for line in (_line_at(data, at)[0] for at in starts) if not _is_blank(line)]
    scan.sample = _parse(sampled, delimiter)
    return scan


def _texts(
    data: bytes, spans: set[tuple[int, int]], average: float
) -> dict[tuple[int, int], bytes]:
    """``b"\\n".join(data.split(b"\\n")[first - 1 : last])`` for each ``(first, last)`` span,
    found by counting line feeds forward (no split of the body).

    The spans are records' lines, so no two overlap: each is counted on from the last.
    """
    texts: dict[tuple[int, int], bytes] = {}
    line = cursor = 0  # the offset where line number `line` (from 0) starts
    for first, last in sorted(spans):
        if first - 1 > line:
            at = _nth_newline(data, cursor, first - 1 - line, average)
            if at < 0:  # no such line: as the slice of a split, empty
                texts[(first, last)] = b""
                continue
            line, cursor = first - 1, at + 1
        end = _nth_newline(data, cursor, last - first + 1, average)
        texts[(first, last)] = data[cursor : len(data) if end < 0 else end]
        if end >= 0:
            line, cursor = last, end + 1
    return texts


def _decoded(lines: list[bytes]) -> Iterator[str]:
    """The lines joined by line feeds and decoded, as ``io.StringIO`` yields them, a line at a
    time (a line feed ends every sequence, so each decodes as it would in the whole)."""
    for line in itertools.islice(lines, max(0, len(lines) - 1)):
        yield line.decode("utf-8", "replace") + "\n"
    if lines and lines[-1]:
        yield lines[-1].decode("utf-8", "replace")


def _parse(lines: list[bytes], delimiter: str) -> list[list[str]]:
    """The fields of whole records, one per line."""
    text = _decoded(lines)
    try:
        return list(csv.reader(text, delimiter=delimiter, quotechar='"', strict=False))
    except csv.Error as exc:  # the projection falls back to a verbatim excerpt
        raise ValueError("not CSV") from exc


def _scan(data: bytes, delimiter: str, stride: int, keep: int) -> _Scan:
    """One pass of the csv module over every record; the per-row work is a few operations."""
    scan = _Scan(tail=deque(maxlen=keep + 1))
    reader = _reader(data, delimiter)
    head, sample, tail, widths = scan.head, scan.sample, scan.tail, scan.widths
    count = line = blank = 0
    width = -1
    try:
        for row in reader:
            start = line + 1
            line = reader.line_num
            if len(row) != width:
                if not row:
                    blank += 1
                    continue
                if width < 0:
                    width = len(row)
            count += 1
            widths[len(row)] += 1
            if count <= keep + 1:
                head.append((count, start, line, row))
            if count % stride == 1 or stride == 1:
                sample.append(row)
            tail.append((count, start, line, row))
    except csv.Error:  # e.g. a NUL byte: what was read before it still stands
        scan.error_at = count + 1
    scan.count, scan.blank = count, blank
    scan.newlines = data.count(b"\n")
    head_text = data[: 4 * _SNIFF]
    average = len(head_text) / max(1, head_text.count(b"\n"))
    spans = {(first, last) for _, first, last, _ in itertools.chain(head, tail)}
    scan.texts = _texts(data, spans, average)
    return scan


def _where(first: int, last: int) -> str:
    return f"line {first:,}" if first == last else f"lines {first:,}-{last:,}"


def _estimated_rows(data: bytes) -> int:
    head = data[: 4 * _SNIFF]
    lines = head.count(b"\n") + 1
    return max(1, int(lines * len(data) / max(1, len(head))))


def project_csv(data: bytes, detection: Detection, budget: int) -> str:
    """A preview of a CSV or TSV table within ``budget`` bytes."""
    delimiter = _delimiter(data, detection.kind)
    probe = _safe_rows(_reader(data[:_SNIFF], delimiter), 50)
    width_guess = max(1, max((len(r) for r in probe), default=1))
    sample_rows = max(_MIN_SAMPLE_ROWS, _SAMPLE_CELLS // width_guess)
    estimated = _estimated_rows(data)
    stride = 1 if estimated <= sample_rows else -(-estimated // sample_rows)
    keep = max(2, min(8, budget // 1500))
    scan = _lines_scan(data, delimiter, stride, keep) or _scan(data, delimiter, stride, keep)

    def raw(first: int, last: int) -> bytes:
        """The body's own text of a record (its lines, for a record that spans several)."""
        return scan.texts[(first, last)].removeprefix(_BOM)

    out = Builder(budget)
    if scan.count == 0:
        out.add(f"{detection.kind}: no rows")
        return out.text()
    width = scan.widths.most_common(1)[0][0]
    has_header = _looks_like_header(scan.head[0][3], scan.sample[1:200])
    names = scan.head[0][3] if has_header else [f"col{i + 1}" for i in range(width)]
    offset = 1 if has_header else 0
    data_rows = scan.count - offset
    # The first and last rows join the sample, so ranges reach the table's ends.
    ends = [r for n, _, _, r in scan.head[offset:]] + [r for n, _, _, r in scan.tail if n > offset]
    exact = stride == 1
    body_sample = scan.sample[offset:] if exact else ends + scan.sample[offset:]

    row_limit = max(60, min(400, budget // 12))
    tail_rows = [t for t in scan.tail if t[0] > offset][-keep:]

    def rows_block(title: str, rows: list[Row], limit: int) -> list[str]:
        return [title] + [
            f"  row {n - offset:,} ({_where(start, end)}): {quote(raw(start, end), limit)}"
            for n, start, end, _ in rows
        ]

    tail_lines = rows_block("last rows:", tail_rows, row_limit)
    while sum(len(t.encode()) + 1 for t in tail_lines) > budget // 3 and len(tail_rows) > 1:
        if row_limit > 120:
            row_limit //= 2
        else:
            tail_rows = tail_rows[1:]
        tail_lines = rows_block("last rows:", tail_rows, row_limit)
    if not tail_rows:
        tail_lines = ["last rows: none (the header is the only row)"]
    if scan.error_at is not None:
        tail_lines.append(
            f"parsing stopped at record {scan.error_at:,} (not CSV past that point); "
            "the counts cover the records before it"
        )
    reserve = sum(len(t.encode()) + 1 for t in tail_lines)

    name = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}.get(delimiter, delimiter)
    quoted = 'some fields quoted with "' if b'"' in data else "no quoting"
    crlf = ", CRLF line ends" if b"\r\n" in data[:_SNIFF] else ""
    header_text = "after 1 header row" if has_header else "no header row"
    out.add_cut(
        f"{detection.kind}: {data_rows:,} data rows (exact count, {header_text}), "
        f"{width} columns; delimiter {name}, {quoted}{crlf}",
        reserve=reserve,
    )
    physical = scan.newlines + (0 if data.endswith(b"\n") else 1)
    notes = []
    if physical != scan.count + scan.blank:
        notes.append(f"{physical:,} lines (quoted fields span lines)")
    if scan.blank:
        notes.append(f"{scan.blank:,} blank lines")
    odd = scan.count - scan.widths[width]
    if odd:
        others = ", ".join(
            f"{w} fields x{n:,}" for w, n in scan.widths.most_common(6) if w != width
        )
        notes.append(f"{odd:,} rows of another width ({others})")
    if notes:
        out.add_cut("note: " + "; ".join(notes), reserve=reserve)
    if has_header:
        first, last = scan.head[0][1], scan.head[0][2]
        out.add_cut(
            f"header ({_where(first, last)}): {quote(raw(first, last), 600)}", reserve=reserve
        )
    scope = (
        f"all {len(body_sample):,} data rows"
        if exact
        else f"a sample of {len(body_sample):,} rows: 1 in {stride:,}, the first and the last; "
        "counts as shares, ~ marks distinct counts in the sample"
    )
    out.add(f"columns (over {scope}):", reserve=reserve)
    shown_columns = min(width, _MAX_COLUMNS)
    columns = [[r[i] if i < len(r) else "" for r in body_sample] for i in range(shown_columns)]
    titles = [names[i] if i < len(names) else f"col{i + 1}" for i in range(shown_columns)]
    first_rows = [t for t in scan.head if offset < t[0] < (tail_rows[0][0] if tail_rows else 0)]
    first_lines = rows_block("first rows:", first_rows[:keep], row_limit) if first_rows else []
    first_cost = sum(len(t.encode()) + 1 for t in first_lines[:3])
    lines: list[str] = []
    for rich in (5 if budget >= 6000 else 3, 0):
        lines = [
            _describe_column(t, i + 1, c, exact, rich=rich)
            for i, (t, c) in enumerate(zip(titles, columns, strict=True))
        ]
        if sum(len(x.encode()) + 1 for x in lines) + first_cost + reserve <= out.room:
            break
    if width > _MAX_COLUMNS:
        lines.append(f"  ... +{width - _MAX_COLUMNS} more columns")
    shown = 0
    for entry in lines:
        if not out.add_cut(entry, reserve=reserve + 60):
            break
        shown += 1
    if shown < len(lines):
        rest = ", ".join(_show(n, 30) for n in names[shown:width])
        out.add_cut(f"  ... {len(lines) - shown} more columns: {rest}", reserve=reserve)
    if first_lines and out.add(first_lines[0], reserve=reserve + 40):
        for entry in first_lines[1:]:
            if not out.add_cut(entry, reserve=reserve):
                break
    out.add_all(tail_lines)
    return out.text()
