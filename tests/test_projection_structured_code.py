"""The code outline's line numbers against the lines of a split.

The outline counts the lines before a definition only for the definitions it shows, from the
nearest line whose number it already knows (the body's start, its end, or an entry shown
before): these properties hold every number it names (an entry's, a nested definition's, and
the ends of the entries it leaves out) to the line that number has in a split of the body, over
generated Python and C bodies of thousands of definitions cut at small budgets.
"""

from __future__ import annotations

import os
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cargohold.projection import Detection, ProjectionClass, project

SLOW = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PYTHON_LINES = [
    b"def top(x):",
    b"class Top(Base):",
    b"async def fetch():",
    b"    def method(self):",
    b"\tdef tabbed():",
    b"        class Deep:",
    b"import os",
    b"from a.b import c",
    b"    return x",
    b"",
    b"# def commented():",
]
C_LINES = [
    b"int main(int argc, char **argv) {",
    b"static void helper(void)",
    b"{",
    b"}",
    b"struct point {",
    b"    if (x) {",
    b"    return 0;",
    b"#include <stdio.h>",
]
ENTRY = re.compile(r"^  +(\d+)( \([^)]*\))?: (.*)$", re.M)
BETWEEN = re.compile(r"^  \.\.\. ([\d,]+) more between lines (\d+) and (\d+)$", re.M)
NESTED = re.compile(r"(\w+) (\d+)")
DEFINITION = re.compile(rb"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+\w")


def _check(data: bytes, language: str, budget: int) -> str:
    detection = Detection("code", ProjectionClass.COMPRESSIBLE, language)
    preview = project(data, media_type="text/plain", budget=budget, detection=detection).preview
    split = data.split(b"\n")
    outline = preview.split("\nlast lines (", 1)[0]
    for number, note, text in ENTRY.findall(outline):
        line = split[int(number) - 1].decode("utf-8", "replace").rstrip()
        assert line.startswith(text.split(" [+")[0]), (number, text)
        if note.startswith(" (") and "nested " in note:
            for name, inner in NESTED.findall(note.split("nested ", 1)[1]):
                assert name.encode() in split[int(inner) - 1], (name, inner)
    return preview


def _check_between(data: bytes, preview: str) -> bool:
    """Whether the outline leaves entries out; if it does, that the lines it names them by are
    entries' and the count it gives is of the entries between them."""
    between = BETWEEN.search(preview)
    if between is None:
        return False
    hidden, first, last = (int(g.replace(",", "")) for g in between.groups())
    split = data.split(b"\n")
    defs = [n for n, line in enumerate(split, 1) if DEFINITION.match(line)]
    entries = defs
    if "top level only" in preview:  # the top level, and the first definition
        entries = [n for i, n in enumerate(defs) if i == 0 or not split[n - 1][:1].isspace()]
    assert first in entries
    assert last in entries
    assert len([n for n in entries if first <= n <= last]) == hidden
    return True


@SLOW
@given(
    unit=st.lists(st.sampled_from(PYTHON_LINES), min_size=1, max_size=40),
    times=st.integers(1, 400),
    rest=st.lists(st.sampled_from(PYTHON_LINES), max_size=40),
    budget=st.sampled_from([400, 900, 2000, 6000]),
)
def test_each_python_outline_number_is_the_line_of_its_definition(
    unit: list[bytes], times: int, rest: list[bytes], budget: int
) -> None:
    data = b"\n".join(unit * times + rest) + b"\n"

    preview = _check(data, "python", budget)

    _check_between(data, preview)


def test_a_cut_outline_names_the_lines_of_the_entries_it_leaves_out() -> None:
    nested = b"def top(x):\n    def method(self):\n        return x\n" * 3000
    flat = b"import os\ndef f():\n    return 1\n\n" * 3000 + b"class Last:\n"

    for data in (nested, flat, nested + flat, flat + nested):
        preview = _check(data, "python", 900)

        assert _check_between(data, preview), preview


@SLOW
@given(
    unit=st.lists(st.sampled_from(C_LINES), min_size=1, max_size=40),
    times=st.integers(1, 400),
    rest=st.lists(st.sampled_from(C_LINES), max_size=40),
    budget=st.sampled_from([400, 900, 2000, 6000]),
)
def test_each_c_outline_number_is_the_line_of_its_definition(
    unit: list[bytes], times: int, rest: list[bytes], budget: int
) -> None:
    data = b"\n".join(
        unit * times + rest
    )  # no newline at the end: the last line is counted all the same

    preview = _check(data, "c", budget)

    lines_total = data.count(b"\n") + 1
    assert f"code (c): {lines_total:,} lines" in preview
