"""CSV date columns: typed over the joined column in one regex pass, as each value would be.

The projector types a column of dates or date-times by matching the column joined with line
breaks, unless a value holds a line break itself (a quoted field spanning lines), when it
matches value by value. This property holds the stub's column types to the per-value rule over
generated tables of ISO and US dates, date-times, mixed values and quoted line breaks, with
CRLF or LF line ends.
"""

from __future__ import annotations

import csv
import io
import os
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cargohold.projection import Detection, ProjectionClass, project
from cargohold.projection._csv import _DATE, _DATETIME

CSV = Detection("csv", ProjectionClass.COMPRESSIBLE)
VALUES = [
    "2026-01-02",
    "2026-12-31",
    "1/2/2026",
    "12/31/2026",
    "2026-01-02T10:11:12Z",
    "2026-01-02 10:11",
    "1/2/2026 3:04 PM",
    '"2026-01-02\n2026-01-03"',
    '"2026-01-02T10:11\n"',
    "",
    "x",
]
SLOW = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _kind(values: list[str]) -> str:
    present = [v.strip() for v in values if v.strip()]
    if not present:
        return "always empty"
    if all(_DATETIME.fullmatch(v) for v in present):
        return "datetime"
    if all(_DATE.fullmatch(v) for v in present):
        return "date"
    return "str"


@SLOW
@given(
    columns=st.lists(
        st.lists(st.sampled_from(VALUES), min_size=30, max_size=30), min_size=2, max_size=4
    ),
    crlf=st.booleans(),
)
def test_a_date_column_is_typed_as_each_of_its_values(columns: list[list[str]], crlf: bool) -> None:
    end = "\r\n" if crlf else "\n"
    header = ",".join(f"when_{i}" for i in range(len(columns)))
    rows = [",".join(column[r] for column in columns) for r in range(30)]
    data = (end.join([header, *rows]) + end).encode()

    preview = project(data, media_type="text/csv", budget=16384, detection=CSV).preview

    parsed = list(csv.reader(io.StringIO(data.decode(), newline="")))
    for index in range(len(columns)):
        values = [row[index] for row in parsed[1:]]
        line = re.search(rf"^  {index + 1} when_{index}: (.*)$", preview, re.M)
        assert line is not None, preview
        described = line.group(1)
        kind = _kind(values)
        if kind in ("date", "datetime"):
            assert described.startswith(f"{kind} "), described
        else:
            assert not described.startswith(("date ", "datetime ")), described
