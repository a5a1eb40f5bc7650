"""The NDJSON projector's counts against a line-by-line parse.

The projector checks its lines in 64 KiB chunks with simdjson, which makes no Python value of
them, and makes Python values (orjson) of the sampled records only. simdjson refuses some lines
orjson reads (an integer past 64 bits): those chunks take the orjson path. These tests hold the
stub's record, blank and invalid-line figures to a parse of each line on its own with orjson,
over bodies of several chunks.
"""

from __future__ import annotations

import os
import re

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cargohold.projection import Detection, ProjectionClass, project

NDJSON = Detection("ndjson", ProjectionClass.COMPRESSIBLE)
PAD = "p" * 150
LINES = [
    b'{"id": 1, "status": "paid", "total": 1.5, "note": "%s"}' % PAD.encode(),
    b'{"id": 2, "status": "open", "total": 2, "note": "%s"}' % PAD.encode(),
    b'{"id": 3, "status": "void", "total": null}\r',
    b'{"big": 123456789012345678901234567890, "note": "%s"}' % PAD.encode(),
    b'{"small": -9223372036854775809}',
    b'{"tiny": 1e-400}',
    b'{"huge": 1e400}',
    b'{"lone": "\\ud800"}',
    b'{"bad": }',
    b'{"latin": "\xff"}',
    b"not json at all",
    b"[1, 2, 3]",
    b"42",
    b"",
    b"\r",
    b"   ",
    b"\t",
]
SLOW = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
HEADLINE = re.compile(
    r"ndjson: ([\d,]+) records on ([\d,]+) lines"
    r"(?: \((?:([\d,]+) blank)?(?:; )?(?:([\d,]+) lines not JSON: ([\d, .]+))?\))?$"
)


def _figures(preview: str) -> tuple[int, int, int, int, list[int]]:
    """(records, lines, blank, invalid, first invalid line numbers) from the stub's headline."""
    found = HEADLINE.match(preview.split("\n", 1)[0])
    assert found is not None, preview.split("\n", 1)[0]
    records, total, blank, invalid, where = found.groups()

    def number(text: str | None) -> int:
        return int(text.replace(",", "")) if text else 0

    named = [number(n) for n in (where or "").replace(", ...", "").split(", ") if n]
    return number(records), number(total), number(blank), number(invalid), named


def _parsed_line_by_line(data: bytes) -> tuple[int, int, int, int, list[int]]:
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    records = blank = 0
    invalid: list[int] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            blank += 1
            continue
        try:
            orjson.loads(line)
        except orjson.JSONDecodeError:
            invalid.append(number)
        else:
            records += 1
    return records, len(lines), blank, len(invalid), invalid[:5]


@SLOW
@given(
    lines=st.lists(
        st.one_of(st.sampled_from(LINES[:2]), st.sampled_from(LINES)), min_size=2, max_size=900
    ),
    final_newline=st.booleans(),
)
def test_ndjson_counts_are_those_of_parsing_each_line(
    lines: list[bytes], final_newline: bool
) -> None:
    data = b"\n".join(lines) + (b"\n" if final_newline else b"")

    preview = project(data, media_type="application/x-ndjson", budget=8192, detection=NDJSON)

    assert _figures(preview.preview) == _parsed_line_by_line(data)


def test_a_record_with_an_integer_past_64_bits_counts_as_a_record() -> None:
    records = [b'{"id": %d, "note": "%s"}' % (i, PAD.encode()) for i in range(2000)]
    records[1500] = b'{"id": 123456789012345678901234567890}'
    data = b"\n".join(records) + b"\n"

    preview = project(data, media_type="application/x-ndjson", budget=8192, detection=NDJSON)

    assert _figures(preview.preview) == (2000, 2000, 0, 0, [])
