"""The Python outline's definitions and imports against a line-by-line match.

The code projector finds a Python body's definition and import lines with one pass of a
pattern over the whole body (no split into lines), then matches only those lines. This
property holds the stub's counts and quoted lines to the definition and import patterns
matched on every line of a split, over generated bodies of the lines that make a whole-body
pass hard: a definition on line 1, tabs and mixed indentation, form feeds and vertical tabs
(whitespace to ``lstrip``, not to the patterns), CRLF endings, and words that only start like
the keywords.
"""

from __future__ import annotations

import os
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cargohold.projection import Detection, ProjectionClass, project
from cargohold.projection._code import _IMPORTS, _PY_DEF

PYTHON = Detection("code", ProjectionClass.COMPRESSIBLE, "python")
LINES = [
    b"def f(x):",
    b"    def g(self):",
    b"\tdef h():",
    b"  \tdef mixed():",
    b"async def a():",
    b"    async  def b():",
    b"async\tdef c():",
    b"class C:",
    b"class D(Base):",
    b"\x0cdef formfeed():",
    b"\x0bclass vertical_tab:",
    b"def\tt():",
    b"import os",
    b"import os.path as p",
    b"from x.y import z",
    b"    from . import a",
    b"from\tq\timport r",
    b"  import\tsys",
    b"import",
    b"from x",
    b"    return 1",
    b"x = 1",
    b"",
    b"# def not_a_definition():",
    b"defx = 1",
    b"classy = 2",
    b"async = 3",
    b"def f():\r",
    b"import json\r",
    b"    def \xff\xfebad():",
]
SLOW = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@SLOW
@given(lines=st.lists(st.sampled_from(LINES), min_size=1, max_size=400), crlf=st.booleans())
def test_python_definitions_and_imports_are_those_of_each_line(
    lines: list[bytes], crlf: bool
) -> None:
    data = (b"\r\n" if crlf else b"\n").join(lines) + b"\n"

    preview = project(data, media_type="text/x-python", budget=16384, detection=PYTHON).preview

    split = data.split(b"\n")
    defs = [n for n, line in enumerate(split, 1) if _PY_DEF.match(line)]
    top = [n for n in defs if not re.match(rb"[ \t]", split[n - 1])]
    found = re.search(r"; ([\d,]+) definitions \(([\d,]+) at top level\)", preview)
    assert found is not None, preview
    assert (int(found.group(1).replace(",", "")), int(found.group(2).replace(",", ""))) == (
        len(defs),
        len(top),
    )
    imports: dict[str, None] = {}
    for line in split:
        if not _PY_DEF.match(line) and (match := _IMPORTS["python"].match(line)):
            imports.setdefault((match.group(1) or match.group(2)).decode(), None)
    listed = re.search(r"^imports \(([\d,]+)\): (.*)$", preview, re.M)
    if imports:
        assert listed is not None
        assert listed.group(1) == f"{len(imports):,}"
        assert listed.group(2).startswith(", ".join(list(imports)[:40]))
    else:
        assert listed is None
    # Every outline entry quotes its definition's own line, with its number.
    for number, text in re.findall(r"^  +(\d+)(?: \([^)]*\))?: (.*)$", preview, re.M):
        line = split[int(number) - 1].decode("utf-8", "replace").rstrip()
        assert int(number) in defs or int(number) > len(split) - 7
        assert line.startswith(text.removesuffix("...").split(" [+")[0])
