"""The failure projector's scan against the line-by-line rules it implements.

The projector finds its lines with passes over the whole body (RE2 for the failing-test and
exception lines, one frame pattern over the body for the frame lines) instead of a Python step
per line. These properties hold it to the per-line definition: each line classified by the
three patterns in order of precedence (an ``at`` frame, a failing test, an exception, any other
frame; the non-blank line after an exception line continues its message), over generated
bodies of the lines that make the whole-body passes hard: frames on line 1, CRLF endings,
vertical tabs (whitespace to the patterns, not to RE2's ``\\s``), blank and whitespace-only
lines, lines that match two patterns, and a last line without its newline.
"""

from __future__ import annotations

import io
import os
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cargohold.projection import Detection, ProjectionClass, project
from cargohold.projection._failure import _EXCEPTION, _FRAME, _TEST

FAILURE = Detection("failure", ProjectionClass.EXACT_REQUIRED)
LINES = [
    b"--- com.example.FooTest::testBar",
    b"FAILED tests/test_x.py::test_y - AssertionError",
    b"______ test_thing ______",
    b"_____ test_thing _____  \r",
    b"___ a ___\x0b",
    b"FAIL: test_a (pkg.mod.Case)",
    b"ERROR: test_b (pkg.Case)",
    b"    --- FAIL: TestX (0.00s)",
    b"  --- FAIL: Test\x0bZ",
    b"Tests run: 3, Failures: 1 <<< FAILURE!",
    b"not ok 3 - thing",
    b"  \xe2\x97\x8f Suite > test",
    b"java.lang.IllegalStateException: boom",
    b"Caused by: java.io.IOException: disk",
    b'Exception in thread "main" java.lang.Error',
    b'Exception in thread "ma\x0bin" java.lang.Error',
    b"E       AssertionError: assert 1 == 2",
    b"E\x0b\x0b\x0bx",
    b"Traceback (most recent call last):",
    b"panic: runtime error",
    b"ValueError   ",
    b"foo.bar.BazWarning",
    b"\tat com.example.Foo.bar(Foo.java:12)",
    b"\tat com.example.Foo.bar(Foo.java:12)  \r",
    b"\tat com.FooException.bar(Foo.java:1)",
    b"  at FooError: x(y)",
    b"\x0b\tat a.B(C.java:1)",
    b"\t\x0bat a.B(C.java:1)",
    b"  at Object.<anonymous> (/a/b.js:3:14)",
    b'  File "/a/b.py", line 3, in f',
    b'  File "/a/b.py", line x',
    b"\t... 12 more",
    b"\t... 12 more x",
    b"tests/test_a.py:12: AssertionError",
    b"\t/usr/go/src/x.go:33 +0x1",
    b"\tat notaframe",
    b"at com.x.Y(Y.java:1)",
    b"Expected: something",
    b"    NAME foo 1 [source_file: expected0]",
    b"\xff\xfe bad bytes Error: x",
    b"   ",
    b"\x0b",
    b"\r",
    b"",
    b"x" * 700,
]
KEYS = [line for line in LINES if _TEST.match(line) or _EXCEPTION.match(line)]
FRAMES = [line for line in LINES if _FRAME.match(line)]
OTHERS = [line for line in LINES if line not in KEYS and line not in FRAMES]
# A trace: a failing-test or exception line, perhaps a line or two of anything, then frames.
TRACE = st.tuples(
    st.sampled_from(KEYS),
    st.lists(st.sampled_from(OTHERS), max_size=2),
    st.lists(st.sampled_from(FRAMES), min_size=1, max_size=5),
).map(lambda parts: [parts[0], *parts[1], *parts[2]])
CHUNKS = st.lists(
    st.one_of(st.sampled_from(LINES).map(lambda line: [line]), TRACE), max_size=40
).map(lambda chunks: [line for chunk in chunks for line in chunk])
FILLER = [
    b"filler line %d of the failure output, long enough to pass the budget" % i for i in range(80)
]
SLOW = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _classes_line_by_line(data: bytes) -> list[str | None]:
    """Each line's class by the per-line rules: test, exception, frame, message or None."""
    classes: list[str | None] = []
    after_exception = False
    for raw in io.BytesIO(data):
        message_follows, after_exception = after_exception, False
        if raw[:1] in (b" ", b"\t") and raw.lstrip()[:3] == b"at " and _FRAME.match(raw):
            classes.append("frame")
        elif _TEST.match(raw):
            classes.append("test")
        elif _EXCEPTION.match(raw):
            classes.append("exception")
            after_exception = True
        elif _FRAME.match(raw):
            classes.append("frame")
        elif message_follows and raw.strip():
            classes.append("message")
        else:
            classes.append(None)
    return classes


def _shown_lines(preview: str, data: bytes) -> list[int]:
    """The numbers of the ``N: text`` lines, each checked to be line N verbatim."""
    body = data.split(b"\n")
    numbers = []
    for line in preview.split("\n")[1:]:
        match = re.match(r"(\d+): (.*)$", line, re.S)
        if match is None:
            continue
        number = int(match.group(1))
        raw = body[number - 1].rstrip(b"\r")
        excerpt = re.sub(r" \[\.\.\. line cut: [\d,]+ more bytes\]$", "", match.group(2))
        assert raw.decode("utf-8", "replace").startswith(excerpt)
        numbers.append(number)
    return numbers


@SLOW
@given(
    head=CHUNKS,
    tail=CHUNKS.filter(bool),
    crlf=st.booleans(),
    final_newline=st.booleans(),
)
def test_failure_counts_are_those_of_a_line_by_line_classification(
    head: list[bytes], tail: list[bytes], crlf: bool, final_newline: bool
) -> None:
    end = b"\r\n" if crlf else b"\n"
    data = end.join([*head, *FILLER, *tail]) + (end if final_newline else b"")

    preview = project(data, media_type="text/plain", budget=4096, detection=FAILURE).preview

    intro = preview.split("\n", 1)[0]
    found = re.search(
        r"\(([\d,]+) failing-test lines, ([\d,]+) exception lines, ([\d,]+) frame lines\)$", intro
    )
    assert found is not None, intro
    counts = tuple(int(group.replace(",", "")) for group in found.groups())
    classes = _classes_line_by_line(data)
    tests, frames = classes.count("test"), classes.count("frame")
    assert counts == (tests, classes.count("exception") + classes.count("message"), frames)
    total = len(classes)
    assert intro.startswith(f"failure output: {total:,} lines, {len(data):,} bytes;")
    # Between the head (40 lines) and the tail (60) a preview shows key lines only.
    for number in _shown_lines(preview, data):
        assert number <= 40 or number > total - 60 or classes[number - 1] is not None


def test_the_frames_after_a_failing_test_are_shown_with_their_line_numbers() -> None:
    trace = [
        b"--- com.example.FooTest::testBar",
        b"java.lang.IllegalStateException: boom",
        b"\tat com.example.Foo.first(Foo.java:1)",
        b"\tat com.example.Foo.second(Foo.java:2)",
        b"\tat com.example.Foo.third(Foo.java:3)",
        b"\tat com.example.Foo.fourth(Foo.java:4)",
    ]
    data = b"\n".join([*FILLER, *trace, *FILLER]) + b"\n"

    preview = project(data, media_type="text/plain", budget=4096, detection=FAILURE).preview

    first = len(FILLER) + 1
    for offset, line in enumerate(trace[:5]):
        assert f"\n{first + offset}: {line.decode()}\n" in preview
    assert "Foo.fourth" not in preview
    assert "(1 failing-test lines, 1 exception lines, 4 frame lines)" in preview
