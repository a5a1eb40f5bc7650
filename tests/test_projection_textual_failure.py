"""The failure projector's one RE2 pass against a line-by-line scan of the same rules.

The scan finds runs of frame lines as one match each (counted by their newlines) and the
failing-test and exception lines between them, and searches inside a run for key lines only
when the run holds ``<<< `` (the one way a frame-shaped line can also be a failing-test or
exception line). These tests hold the whole scan (the counts, the line numbers and every line
kept) to a scan that classifies every line on its own, over generated bodies made of the lines
that make the pass hard (frame runs on line 1 and at the end without a newline, key lines inside
runs, CRLF endings, vertical tabs) and over the bench's body of the corpus traces.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cargohold.projection import Detection, ProjectionClass, project
from cargohold.projection._failure import (
    _FRAME,
    _FRAMES_PER_TRACE,
    _HEAD_LINES,
    _IS_ERROR,
    _IS_FRAME,
    _IS_TEST,
    _KEY_MAX,
    _NONE,
    _TAIL_LINES,
    _classify,
    _line_at,
    _Scan,
    _scan,
)

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
FAILURE = Detection("failure", ProjectionClass.EXACT_REQUIRED)
FRAMES = [
    b"\tat com.example.Foo.bar(Foo.java:12)",
    b"\tat com.example.Foo.bar(Foo.java:12)  \r",
    b"  at Object.<anonymous> (/a/b.js:3:14)",
    b'  File "/a/b.py", line 3, in f',
    b"\t... 12 more",
    b"tests/test_a.py:12: AssertionError",
    b"\t/usr/go/src/x.go:33 +0x1",
    b"\x0b\tat a.B(C.java:1)",
    # Frame-shaped and a failing-test line: a key line inside a run of frames, but for the
    # ``at`` frame indented by a tab or a space, which is a frame first.
    b'  File "a<<< FAILURE!", line 3',
    b"tests/a.py:3: x <<< ERROR!",
    b"\t/x.go:1 <<< FAILURE!",
    b"\x0bat x <<< FAILURE! (a.js:1:2)",
    b"\tat x <<< FAILURE! (a.js:1:2)",
]
KEYS = [
    b"--- com.example.FooTest::testBar",
    b"FAILED tests/test_x.py::test_y - AssertionError",
    b"Tests run: 3, Failures: 1 <<< FAILURE!",
    b"java.lang.IllegalStateException: boom",
    b"Caused by: java.io.IOException: disk",
    b"E       AssertionError: assert 1 == 2",
    b"Traceback (most recent call last):",
    b"  \xe2\x97\x8f Suite > test",
    b"ValueError   ",
]
OTHERS = [
    b"Expected: something",
    b"    NAME foo 1 [source_file: expected0]",
    b"\tat notaframe",
    b"   ",
    b"\x0b",
    b"\r",
    b"",
    b"x" * 700,
]
LINES = st.sampled_from(FRAMES + KEYS + OTHERS)
TRACE = st.tuples(
    st.sampled_from(KEYS),
    st.lists(st.sampled_from(OTHERS), max_size=2),
    st.lists(st.sampled_from(FRAMES), min_size=1, max_size=6),
).map(lambda parts: [parts[0], *parts[1], *parts[2]])
CHUNKS = st.lists(st.one_of(LINES.map(lambda line: [line]), TRACE), max_size=60).map(
    lambda chunks: [line for chunk in chunks for line in chunk]
)
FILLER = [
    b"filler line %d of the failure output, long enough to pass the budget" % i for i in range(60)
]
SLOW = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "80")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _line_by_line(data: bytes) -> _Scan:
    """The projector's scan as a loop over every line, each classified on its own."""
    starts, ends, classes = [], [], []
    at = 0
    for raw in io.BytesIO(data):
        starts.append(at)
        at += len(raw)
        ends.append(at)
        classes.append(_classify(raw))
    total = len(classes)

    def line(index: int) -> object:
        return _line_at(data, index + 1, starts[index], ends[index])

    head = [line(i) for i in range(min(_HEAD_LINES, total))]
    tail = [line(i) for i in range(max(0, total - _TAIL_LINES), total)]
    keys = [i for i, kind in enumerate(classes) if kind in (_IS_TEST, _IS_ERROR)]
    tests: list[object] = []
    errors: list[object] = []
    frames: list[object] = []
    test_lines = error_lines = 0
    for position, index in enumerate(keys):
        following = keys[position + 1] if position + 1 < len(keys) else total
        if classes[index] == _IS_TEST:
            test_lines += 1
            if len(tests) < _KEY_MAX:
                tests.append(line(index))
        else:
            error_lines += 1
            if len(errors) < _KEY_MAX:
                errors.append(line(index))
            after = index + 1
            if (
                after < total
                and len(errors) < _KEY_MAX
                and classes[after] == _NONE
                and data[starts[after] : ends[after]].strip()
            ):
                error_lines += 1
                errors.append(line(after))
        if len(frames) < _KEY_MAX:
            shown = min(_FRAMES_PER_TRACE, _KEY_MAX - len(frames))
            for frame in range(index + 1, following):
                if shown and classes[frame] == _IS_FRAME:
                    frames.append(line(frame))
                    shown -= 1
    counts = {"tests": test_lines, "errors": error_lines, "frames": classes.count(_IS_FRAME)}
    return _Scan(total, head, tail, tests, errors, frames, counts)  # type: ignore[arg-type]


@SLOW
@given(
    head=CHUNKS,
    middle=CHUNKS,
    tail=CHUNKS,
    crlf=st.booleans(),
    final_newline=st.booleans(),
    filler=st.booleans(),
)
def test_the_one_pass_scan_keeps_what_a_line_by_line_scan_keeps(
    head: list[bytes],
    middle: list[bytes],
    tail: list[bytes],
    crlf: bool,
    final_newline: bool,
    filler: bool,
) -> None:
    end = b"\r\n" if crlf else b"\n"
    lines = [*head, *(FILLER if filler else []), *middle, *tail]
    data = end.join(lines) + (end if final_newline and lines else b"")

    assert _scan(data) == _line_by_line(data)


def test_a_run_of_frames_holding_failing_test_lines_counts_them_as_failing_tests() -> None:
    trace = [
        b"java.lang.IllegalStateException: boom",
        b"\tat com.example.Foo.first(Foo.java:1)",
        b'  File "a<<< FAILURE!", line 3',
        b"\tat com.example.Foo.second(Foo.java:2)",
        b"\tat x <<< FAILURE! (a.js:1:2)",
    ]
    data = b"\n".join([*FILLER, *trace, *FILLER]) + b"\n"

    preview = project(data, media_type="text/plain", budget=4096, detection=FAILURE).preview

    # The ``File`` line is a failing-test line (not a frame); the tab-indented ``at`` line
    # with the same marker is a frame first.
    assert "(1 failing-test lines, 1 exception lines, 3 frame lines)" in preview
    number = len(FILLER) + 3
    assert f"\n{number}: {trace[2].decode()}\n" in preview
    assert f"\n{number + 1}: {trace[3].decode()}\n" in preview
    assert _scan(data) == _line_by_line(data)


def test_frames_from_line_one_and_to_the_last_byte_are_counted() -> None:
    frame = b"\tat com.example.Foo.bar(Foo.java:12)"
    data = b"\n".join([frame, frame, *FILLER, b"java.lang.IllegalStateException: x", frame, frame])

    scan = _scan(data)

    assert scan.counts == {"tests": 0, "errors": 1, "frames": 4}
    assert [line.number for line in scan.frames] == [len(FILLER) + 4, len(FILLER) + 5]
    assert scan == _line_by_line(data)


def test_the_bench_body_of_corpus_traces_scans_as_line_by_line() -> None:
    source = (CORPUS / "defects4j_closure_failing_tests.txt").read_bytes()
    mockito = (CORPUS / "defects4j_mockito_failing_tests.txt").read_bytes()
    data = (source + mockito) * 4

    scan = _scan(data)

    assert scan == _line_by_line(data)
    assert scan.counts["frames"] > 1000
    assert _FRAME.match(scan.frames[0].raw)
