"""The diff projector's line count, made as its windows are split (no pass more over the body),
against a count of the body's newlines: with and without a final newline, over one window and
across many, and for a body that is all one line."""

from __future__ import annotations

import re

import pytest

from cargohold.projection import Detection, ProjectionClass, project

DIFF = Detection("diff", ProjectionClass.COMPRESSIBLE)
HUNK = b"diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,2 @@\n-old\n+new\n ctx\n"


def _stated_lines(data: bytes) -> int:
    preview = project(data, media_type="text/x-diff", budget=8192, detection=DIFF).preview
    found = re.search(r"file diffs, ([\d,]+) lines\)", preview)
    assert found is not None, preview
    return int(found.group(1).replace(",", ""))


@pytest.mark.parametrize("repeats", [1, 3, 20_000])
@pytest.mark.parametrize("ending", [b"", b"+unfinished", b"\n", b"\r\n", b"\n\n"])
def test_the_stated_line_count_is_the_bodys_lines(repeats: int, ending: bytes) -> None:
    data = HUNK * repeats + ending
    assert (len(data) > 256 * 1024) == (repeats > 3)  # the large body crosses windows

    lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)

    assert _stated_lines(data) == lines


def test_a_body_of_one_line_is_one_line() -> None:
    assert _stated_lines(b"@@ -1 +1 @@") == 1
