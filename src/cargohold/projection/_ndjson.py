"""The NDJSON projector: line and record counts, the merged record shape, field facts, the ends.

Every line is parsed, so the record count and the invalid lines are exact, in C-speed steps: the
body is cut into chunks of about 64 KiB where a line ends (never split whole: its lines took more
memory than the body), and each chunk's lines are checked as one JSON array by ``simdjson``,
which makes no Python value of them; ``orjson`` makes the sampled records only (a chunk simdjson
refuses is parsed by ``orjson``, and line by line if that fails, to name its invalid lines).
Only an evenly strided sample of records is kept for the shape and the field facts, which say
when they cover a sample. The first and the last records are quoted as the body has them, with
their line numbers and byte offsets (so ``artifact_read`` reaches them on a body of very long
lines).
"""

from __future__ import annotations

from typing import Any

import orjson
import simdjson

from cargohold.projection._json import _STATS_ALL, _field_facts, _merge
from cargohold.projection._model import Builder, Detection, quote

_SAMPLE = _STATS_ALL
"""Records kept for the shape and field facts (as many as the JSON projector describes in full);
bodies with fewer are described in full."""
_CHUNK = 64 * 1024
"""Bytes of lines parsed at once (their records, as Python values, take ten to twenty times
their size: a mebibyte at once took eighteen times the body of a 1 MiB one)."""


def _blank(line: bytes) -> bool:
    return not line.strip()


class _Scan:
    """What one pass over the chunks of lines found: the counts, the sample, the longest line."""

    __slots__ = (
        "empty",
        "first_invalid",
        "invalid",
        "longest",
        "records",
        "sample",
        "spaces",
        "width",
    )

    def __init__(self) -> None:
        self.records = self.invalid = 0
        self.empty = 0
        """Lines empty or a lone carriage return."""
        self.spaces = 0
        """Other blank lines (spaces and tabs), found where the lines are parsed one by one."""
        self.first_invalid: list[int] = []
        self.sample: list[Any] = []
        self.width = -1
        self.longest = (0, 0)  # the longest line's number (from 0) and its first byte


def project_ndjson(data: bytes, detection: Detection, budget: int) -> str:
    """A preview of newline-delimited JSON within ``budget`` bytes."""
    total = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    # The sample's stride counts the lines neither empty nor a lone CR (the record estimate),
    # which the pass finds: it is made as if there were none, and again in the rare case that
    # those it found change the stride.
    stride = _stride(total, 0)
    scan = _scan(data, stride)
    if _stride(total, scan.empty) != stride:
        stride = _stride(total, scan.empty)
        scan = _scan(data, stride)
    records, sample = scan.records, scan.sample

    out = Builder(budget)
    first = _first_line(data)
    last = _last_line(data, total)
    tail: list[str] = []
    if last is not None:
        number, line, at = last
        text = quote(line.rstrip(b"\r"), 400)
        what = "record" if _parses(line) else "line, not JSON"
        tail.append(f"last {what} (line {number + 1:,}, byte {at:,}): {text}")
    reserve = sum(len(t.encode()) + 1 for t in tail)
    notes = []
    blank = scan.empty + scan.spaces
    if blank:
        notes.append(f"{blank:,} blank")
    if scan.invalid:
        where = ", ".join(f"{n:,}" for n in scan.first_invalid)
        more = ", ..." if scan.invalid > len(scan.first_invalid) else ""
        notes.append(f"{scan.invalid:,} lines not JSON: {where}{more}")
    extra = f" ({'; '.join(notes)})" if notes else ""
    out.add_cut(f"ndjson: {records:,} records on {total:,} lines{extra}", reserve=reserve)
    if total:
        longest, at = scan.longest
        end = data.find(b"\n", at)
        width = len(data[at : end if end >= 0 else len(data)].rstrip(bytes([13])))
        out.add(
            f"longest line is line {longest + 1:,} at byte {at:,}, {width:,} bytes",
            reserve=reserve,
        )
    if sample:
        out.add_cut(f"record shape: {_merge(sample, 0)}", reserve=reserve)
        dicts = [r for r in sample if isinstance(r, dict)]
        if dicts:
            facts, _, _ = _field_facts(dicts)
            scope = (
                f"all {records:,} records"
                if stride == 1
                else f"a sample of {len(sample):,} of {records:,} records (1 in {stride:,})"
            )
            out.add(f"fields over {scope}:", reserve=reserve)
            shown = out.add_all(facts, reserve=reserve + 400)
            if shown < len(facts):
                out.add(f"  ... {len(facts) - shown} more field lines", reserve=reserve + 400)
    if first is not None and last is not None and first[0] != last[0]:
        number, line, at = first
        text = quote(line.rstrip(b"\r"), 400)
        what = "record" if _parses(line) else "line, not JSON"
        out.add_cut(f"first {what} (line {number + 1:,}, byte {at:,}): {text}", reserve=reserve)
    out.add_all(tail)
    return out.text()


def _stride(total: int, blank: int) -> int:
    """One record in how many is sampled, of ``total`` lines of which ``blank`` are empty or a
    lone carriage return."""
    return max(1, -(-max(1, total - blank) // _SAMPLE))


def _scan(data: bytes, stride: int) -> _Scan:
    """The records, blank and invalid lines, the sample (the records whose index is a multiple
    of ``stride``) and the longest line, in one pass over chunks of about :data:`_CHUNK` bytes
    of whole lines.

    A chunk is cut from the body where its line ends (no split of the whole body: its lines
    took more memory than the body), split into its lines, and checked as one JSON array of
    them by simdjson. A chunk that simdjson refuses as that array (a blank line makes two
    commas in a row) takes the path that sorts its lines one by one.
    """
    scan = _Scan()
    parser = simdjson.Parser()
    size = len(data)
    start = 0
    number = 0  # the chunk's first line, from 0
    while start < size:
        # The first line end at or past _CHUNK bytes from the chunk's start: where the lines
        # counted one by one would have reached _CHUNK bytes.
        end = data.find(b"\n", start + _CHUNK - 1)
        end = size if end < 0 else end + 1
        piece = data[start : end - 1] if data[end - 1] == 10 else data[start:end]
        lines = piece.split(b"\n")
        widest = max(map(len, lines))
        if widest > scan.width:
            widths = list(map(len, lines))
            at = widths.index(widest)
            scan.width = widest
            scan.longest = (number + at, start + sum(widths[:at]) + at)
        offset = (-scan.records) % stride
        picked = _sampled(parser, b"[" + piece.replace(b"\n", b",") + b"]", lines, offset, stride)
        if picked is not None:
            scan.records += len(lines)
            scan.sample.extend(picked)
        else:
            _sort_lines(scan, parser, lines, number, stride)
        number += len(lines)
        start = end
    return scan


def _sort_lines(
    scan: _Scan, parser: simdjson.Parser, lines: list[bytes], number: int, stride: int
) -> None:
    """The records, blank and invalid lines and sampled records of one chunk of ``lines``
    (the first of them line ``number``, from 0), whatever they hold."""
    chunk = [line for line in lines if line and line != b"\r"]
    scan.empty += len(lines) - len(chunk)
    offset = (-scan.records) % stride
    # A line of spaces alone reads as no element ("[   ]" is an empty array): such a chunk is
    # sorted line by line, which counts that line blank.
    spaced = any(map(_blank, chunk))
    text = b"[" + b",".join(chunk) + b"]"
    picked = None if spaced else _sampled(parser, text, chunk, offset, stride)
    if picked is not None:
        scan.records += len(chunk)
        scan.sample.extend(picked)
        return
    values: list[Any] | None = None
    if not spaced:
        try:
            values = orjson.loads(text)
        except orjson.JSONDecodeError:
            values = None
    if values is None:
        values = []
        for index, line in enumerate(lines, number):
            if _blank(line):
                if line and line != b"\r":
                    scan.spaces += 1
                continue
            try:
                values.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                scan.invalid += 1
                if len(scan.first_invalid) < 5:
                    scan.first_invalid.append(index + 1)
    first_index = scan.records
    scan.records += len(values)
    offset = (-first_index) % stride
    scan.sample.extend(values[offset::stride])


def _first_line(data: bytes) -> tuple[int, bytes, int] | None:
    """The first non-blank line: its number (from 0), its bytes, and the byte offset of its
    text (after its indentation)."""
    start = number = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        line = data[start:end]
        if not _blank(line):
            return number, line, start + len(line) - len(line.lstrip())
        number += 1
        start = end + 1
    return None


def _last_line(data: bytes, total: int) -> tuple[int, bytes, int] | None:
    """The last non-blank line of the ``total``: its number (from 0), its bytes, and the byte
    offset of its text (after its indentation)."""
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    number = total - 1
    while number >= 0:
        start = data.rfind(b"\n", 0, end) + 1
        line = data[start:end]
        if not _blank(line):
            return number, line, start + len(line) - len(line.lstrip())
        number -= 1
        end = start - 1
    return None


def _sampled(
    parser: simdjson.Parser, text: bytes, chunk: list[bytes], offset: int, stride: int
) -> list[Any] | None:
    """The sampled records of ``chunk`` (lines, none blank, ``text`` the JSON array of them):
    those at ``offset``, then every ``stride``-th, as Python values; ``None`` unless every line
    is exactly one JSON value.

    simdjson checks the chunk as one array without making a Python value of any record (its
    tape is C memory), and orjson makes only the sampled ones: making every record was most of
    the projection's time and memory. ``None`` sends the chunk to the orjson path, which gives
    the same answer where simdjson refuses a document orjson reads (an integer past 64 bits),
    and names the invalid lines.
    """
    try:
        array = parser.parse(text)
    except (ValueError, RuntimeError):
        return None
    assert isinstance(array, simdjson.Array)  # the text is an array, or parse raised
    elements = len(array)
    del array  # the parser is parsed with again: no proxy may outlive this document
    if elements != len(chunk):  # a line holding two values ("1, 2"): counted as orjson does
        return None
    picked = chunk[offset::stride]
    try:
        values: list[Any] = orjson.loads(b"[" + b",".join(picked) + b"]")
    except orjson.JSONDecodeError:
        return None
    return values


def _parses(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True
