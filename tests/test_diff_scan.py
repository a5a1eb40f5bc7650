"""The diff projector's counts over generated diffs.

The projector counts a hunk's lines by their first bytes, several lines a step, and splits the
body a window at a time. These tests hold its file, hunk, added and removed figures to the diffs
they generate: context lines that are empty or end in CR, "no newline" markers, removed lines
that look like file headers, hunk headers that promise more lines than follow (the hunk ends at
the next header), and hunks that cross a window's edge.
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cargohold.projection import Detection, ProjectionClass, project

DIFF = Detection("diff", ProjectionClass.COMPRESSIBLE)
SLOW = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
ADDED = [b"+x = 1", b"+++ not a header", b"+", b"+\r"]
REMOVED = [b"-y = 2", b"--- a/not/a/header", b"-", b"-\r"]
CONTEXT = [b" z = 3", b"", b"\r", b" "]


@dataclass
class _Totals:
    files: int = 0
    hunks: int = 0
    added: int = 0
    removed: int = 0


def _hunk(kinds: list[str], pick: random.Random, extra: int, totals: _Totals) -> list[bytes]:
    """A hunk of ``kinds`` (``+``, ``-``, space, backslash) whose header promises ``extra``
    more lines on each side than it has."""
    old = sum(kind in "- " for kind in kinds) + extra
    new = sum(kind in "+ " for kind in kinds) + extra
    lines = [b"@@ -1,%d +1,%d @@ def f():" % (old, new)]
    for kind in kinds:
        if kind == "+":
            lines.append(pick.choice(ADDED))
        elif kind == "-":
            lines.append(pick.choice(REMOVED))
        elif kind == " ":
            lines.append(pick.choice(CONTEXT))
        else:
            lines.append(b"\\ No newline at end of file")
    totals.hunks += 1
    totals.added += kinds.count("+")
    totals.removed += kinds.count("-")
    return lines


def _diff(files: list[list[tuple[list[str], int]]], seed: int) -> tuple[bytes, _Totals]:
    pick = random.Random(seed)
    totals = _Totals()
    lines: list[bytes] = []
    for number, hunks in enumerate(files):
        path = b"src/file_%d.py" % number
        lines += [b"diff --git a/" + path + b" b/" + path, b"index 0000001..0000002 100644"]
        lines += [b"--- a/" + path, b"+++ b/" + path]
        totals.files += 1
        for kinds, extra in hunks:
            lines += _hunk(kinds, pick, extra, totals)
    return b"\n".join(lines) + b"\n", totals


def _figures(preview: str) -> _Totals:
    found = re.search(
        r"diff: ([\d,]+) files changed, \+([\d,]+) -([\d,]+) lines in ([\d,]+) hunks", preview
    )
    assert found is not None, preview
    files, added, removed, hunks = (int(g.replace(",", "")) for g in found.groups())
    return _Totals(files, hunks, added, removed)


HUNKS = st.lists(
    st.tuples(
        st.lists(st.sampled_from(["+", "-", " ", "\\"]), min_size=1, max_size=40),
        st.sampled_from([0, 0, 0, 1, 3]),
    ),
    min_size=1,
    max_size=6,
)


@SLOW
@given(files=st.lists(HUNKS, min_size=1, max_size=12), seed=st.integers(0, 2**16))
def test_a_diff_stub_counts_every_added_and_removed_line(
    files: list[list[tuple[list[str], int]]], seed: int
) -> None:
    data, totals = _diff(files, seed)

    preview = project(data, media_type="text/x-diff", budget=8192, detection=DIFF).preview

    figures = _figures(preview)
    # A file with no change still has a file diff, and is listed: every file is "changed".
    assert figures == totals


def test_hunks_across_the_split_windows_of_a_large_diff_are_counted_whole() -> None:
    pick = random.Random(3)
    files = [
        [([pick.choice("+- ") for _ in range(pick.randint(200, 3000))], 0) for _ in range(3)]
        for _ in range(60)
    ]
    data, totals = _diff(files, 5)
    assert len(data) > 1024 * 1024

    preview = project(data, media_type="text/x-diff", budget=8192, detection=DIFF).preview

    assert _figures(preview) == totals
