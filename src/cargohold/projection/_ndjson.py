"""The NDJSON projector: line and record counts, the merged record shape, field facts, the ends.

Every line is parsed, so the record count and the invalid lines are exact, in C-speed steps: the
lines are joined into JSON arrays of about 64 KiB each and checked by ``simdjson`` at once,
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


def project_ndjson(data: bytes, detection: Detection, budget: int) -> str:
    """A preview of newline-delimited JSON within ``budget`` bytes."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    size = len(data) + (0 if data.endswith(b"\n") else 1)  # as if the last line ended too
    total = len(lines)
    blank = lines.count(b"") + lines.count(b"\r")
    records_estimate = max(1, total - blank)
    stride = max(1, -(-records_estimate // _SAMPLE))
    sample: list[Any] = []
    parser = simdjson.Parser()
    records = invalid = 0
    first_invalid: list[int] = []
    start = 0
    while start < total:
        # A chunk of lines of about _CHUNK bytes, parsed as one array.
        end = start
        taken = 0  # not ``size``: the body's, which the byte offsets below are counted from
        while end < total and taken < _CHUNK:
            taken += len(lines[end]) + 1
            end += 1
        chunk = [line for line in lines[start:end] if line and line != b"\r"]
        offset = (-records) % stride
        picked = _sampled(parser, chunk, offset, stride)
        if picked is not None:
            records += len(chunk)
            sample.extend(picked)
            start = end
            continue
        try:
            values = orjson.loads(b"[" + b",".join(chunk) + b"]")
        except orjson.JSONDecodeError:
            values = []
            for number in range(start, end):
                line = lines[number]
                if _blank(line):
                    if line and line != b"\r":
                        blank += 1
                    continue
                try:
                    values.append(orjson.loads(line))
                except orjson.JSONDecodeError:
                    invalid += 1
                    if len(first_invalid) < 5:
                        first_invalid.append(number + 1)
        first_index = records
        records += len(values)
        offset = (-first_index) % stride
        sample.extend(values[offset::stride])
        start = end

    out = Builder(budget)
    first = _end_line(lines, range(total))
    last = _end_line(lines, range(total - 1, -1, -1))
    tail: list[str] = []
    if last is not None:
        number, at = last
        text = quote(lines[number].rstrip(b"\r"), 400)
        what = "record" if _parses(lines[number]) else "line, not JSON"
        tail.append(
            f"last {what} (line {number + 1:,}, byte {_offset(lines, number, at, size):,}): {text}"
        )
    reserve = sum(len(t.encode()) + 1 for t in tail)
    notes = []
    if blank:
        notes.append(f"{blank:,} blank")
    if invalid:
        where = ", ".join(f"{n:,}" for n in first_invalid)
        more = ", ..." if invalid > len(first_invalid) else ""
        notes.append(f"{invalid:,} lines not JSON: {where}{more}")
    extra = f" ({'; '.join(notes)})" if notes else ""
    out.add_cut(f"ndjson: {records:,} records on {total:,} lines{extra}", reserve=reserve)
    if total:
        widths = list(map(len, lines))
        longest = widths.index(max(widths))
        out.add(
            f"longest line is line {longest + 1:,} at byte {_offset(lines, longest, 0, size):,}, "
            f"{len(lines[longest].rstrip(bytes([13]))):,} bytes",
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
        number, at = first
        text = quote(lines[number].rstrip(b"\r"), 400)
        what = "record" if _parses(lines[number]) else "line, not JSON"
        offset = _offset(lines, number, at, size)
        out.add_cut(f"first {what} (line {number + 1:,}, byte {offset:,}): {text}", reserve=reserve)
    out.add_all(tail)
    return out.text()


def _sampled(
    parser: simdjson.Parser, chunk: list[bytes], offset: int, stride: int
) -> list[Any] | None:
    """The sampled records of ``chunk`` (lines, none blank): those at ``offset``, then every
    ``stride``-th, as Python values; ``None`` unless every line is exactly one JSON value.

    simdjson checks the chunk as one array without making a Python value of any record (its
    tape is C memory), and orjson makes only the sampled ones: making every record was most of
    the projection's time and memory. ``None`` sends the chunk to the orjson path, which gives
    the same answer where simdjson refuses a document orjson reads (an integer past 64 bits),
    and names the invalid lines.
    """
    try:
        array = parser.parse(b"[" + b",".join(chunk) + b"]")
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


def _end_line(lines: list[bytes], order: range) -> tuple[int, int] | None:
    """The first non-blank line in ``order``: its index, and its leading whitespace's length."""
    for number in order:
        line = lines[number]
        if not _blank(line):
            return number, len(line) - len(line.lstrip())
    return None


def _offset(lines: list[bytes], number: int, lead: int, size: int) -> int:
    """The byte offset of line ``number``'s text (after ``lead`` bytes of indentation), in a
    body of ``size`` bytes (counted from the nearer end)."""
    if number < len(lines) // 2:
        return sum(map(len, lines[:number])) + number + lead
    after = sum(map(len, lines[number:])) + len(lines) - number
    return size - after + lead


def _parses(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True
