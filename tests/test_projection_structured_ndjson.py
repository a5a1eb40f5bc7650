"""The NDJSON projector's sample stride and line positions against a split of the body.

The projector cuts the body into chunks where a line ends (no split of the whole body): the
longest line, the first and the last records are found by their bytes, and the sample's stride,
which counts the lines that are neither empty nor a lone carriage return, is set before the
pass and set again when the pass finds such lines. These tests hold the stub's line numbers,
byte offsets, widths and stride to a split of the body.
"""

from __future__ import annotations

import os
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cargohold.projection import Detection, ProjectionClass, project

NDJSON = Detection("ndjson", ProjectionClass.COMPRESSIBLE)
SLOW = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
RECORD = b'{"id": 7, "status": "paid"}'
LINES = [
    RECORD,
    b'{"id": 8, "note": "%s"}' % (b"n" * 900),
    b'  {"id": 9}',
    b'{"id": 10}\r',
    b"",
    b"\r",
    b"   ",
    b"not json",
]
LONGEST = re.compile(r"^longest line is line ([\d,]+) at byte ([\d,]+), ([\d,]+) bytes$", re.M)
END = re.compile(r"^(first|last) (?:record|line, not JSON) \(line ([\d,]+), byte ([\d,]+)\)", re.M)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _preview(data: bytes) -> str:
    return project(data, media_type="application/x-ndjson", budget=8192, detection=NDJSON).preview


@SLOW
@given(
    unit=st.lists(st.sampled_from(LINES), min_size=1, max_size=30),
    times=st.integers(1, 300),
    rest=st.lists(st.sampled_from(LINES), max_size=30),
    final_newline=st.booleans(),
)
def test_the_longest_first_and_last_lines_are_named_at_their_own_line_and_byte(
    unit: list[bytes], times: int, rest: list[bytes], final_newline: bool
) -> None:
    lines = unit * times + rest
    data = b"\n".join(lines) + (b"\n" if final_newline else b"")

    preview = _preview(data)

    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    widths = [len(line) for line in lines]
    longest = LONGEST.search(preview)
    if not data:  # no line at all
        assert longest is None
        return
    assert longest is not None
    number, at, width = map(_number, longest.groups())
    assert number == widths.index(max(widths)) + 1
    assert at == starts[number - 1]
    assert width == len(lines[number - 1].rstrip(b"\r"))
    solid = [n for n, line in enumerate(lines) if line.strip()]
    named = {which: (_number(n), _number(b)) for which, n, b in END.findall(preview)}
    if solid:
        last = lines[solid[-1]]
        assert named["last"] == (solid[-1] + 1, starts[solid[-1]] + len(last) - len(last.lstrip()))
    if len(solid) > 1:
        first = lines[solid[0]]
        assert named["first"] == (solid[0] + 1, starts[solid[0]] + len(first) - len(first.lstrip()))


def test_the_sample_stride_counts_the_lines_that_are_not_empty() -> None:
    # 998 records and 5 empty lines: 1,003 lines, but all 998 records are described (a stride
    # made of the line count alone would be 2, and the stub would say "1 in 2").
    lines = [RECORD] * 998
    for at in (10, 200, 400, 600, 800):
        lines.insert(at, b"")
    data = b"\n".join(lines) + b"\n"

    preview = _preview(data)

    assert "ndjson: 998 records on 1,003 lines (5 blank)" in preview
    assert "fields over all 998 records:" in preview
    assert "id: int 7..7" in preview


def test_a_chunk_whose_only_other_line_is_spaces_counts_that_line_blank() -> None:
    # A stub change: the filtered chunk ``[b"   "]`` read as the JSON array "[   ]" (empty), so
    # the line of spaces was counted neither blank nor invalid ("2 lines (1 blank)"); every
    # blank line is counted now, as a parse of each line on its own counts it.
    preview = _preview(b"\n   ")

    assert preview.split("\n", 1)[0] == "ndjson: 0 records on 2 lines (2 blank)"
