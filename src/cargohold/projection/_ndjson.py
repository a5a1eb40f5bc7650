"""The NDJSON projector: line and record counts, the merged record shape, field facts, the ends.

Every line is parsed (so the record count and the invalid lines are exact); only an evenly
strided sample of records is kept for the shape and the field facts, which say when they cover a
sample. The first and the last records are shown verbatim, with their line numbers.
"""

from __future__ import annotations

import io
from typing import Any

import orjson

from cargohold.projection._json import _STATS_ALL, _field_facts, _merge
from cargohold.projection._model import Builder, Detection, clip

_SAMPLE = _STATS_ALL
"""Records kept for the shape and field facts (as many as the JSON projector describes in full);
bodies with fewer are described in full."""


def _estimated_lines(data: bytes) -> int:
    head = data[: 256 * 1024]
    return max(1, int((head.count(b"\n") + 1) * len(data) / max(1, len(head))))


def project_ndjson(data: bytes, detection: Detection, budget: int) -> str:
    """A preview of newline-delimited JSON within ``budget`` bytes."""
    stride = max(1, -(-_estimated_lines(data) // _SAMPLE))
    sample: list[Any] = []
    records = blank = invalid = lines = 0
    first_invalid: list[int] = []
    first: tuple[int, bytes] | None = None
    last: tuple[int, bytes] | None = None
    last_line = b""
    loads = orjson.loads
    for lines, raw in enumerate(io.BytesIO(data), 1):
        line = raw.strip()
        if not line:
            blank += 1
            continue
        last_line = line
        try:
            value = loads(line)
        except orjson.JSONDecodeError:
            invalid += 1
            if len(first_invalid) < 5:
                first_invalid.append(lines)
            continue
        records += 1
        if first is None:
            first = (lines, line)
        last = (lines, line)
        if records % stride == 1 or stride == 1:
            sample.append(value)

    out = Builder(budget)
    tail: list[str] = []
    if last is not None:
        tail.append(f"last record (line {last[0]:,}): {clip(_text(last[1]), 400)}")
    if last_line and (last is None or last_line is not last[1]):
        tail.append(f"the body ends with an invalid line: {clip(_text(last_line), 200)}")
    reserve = sum(len(t.encode()) + 1 for t in tail)
    kinds = f"{records:,} records on {lines:,} lines"
    notes = []
    if blank:
        notes.append(f"{blank:,} blank")
    if invalid:
        where = ", ".join(f"{n:,}" for n in first_invalid)
        more = ", ..." if invalid > len(first_invalid) else ""
        notes.append(f"{invalid:,} lines not JSON: {where}{more}")
    extra = f" ({'; '.join(notes)})" if notes else ""
    out.add_cut(f"ndjson: {kinds}{extra}", reserve=reserve)
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
        out.add_cut(
            f"first record (line {first[0]:,}): {clip(_text(first[1]), 400)}", reserve=reserve
        )
    out.add_all(tail)
    return out.text()


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")
