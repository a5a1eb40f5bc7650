"""The failure projector (``exact_required``): verbatim lines only, chosen for what a model needs.

Stack traces and test-failure output are evidence: nothing here is summarised or rewritten. The
preview is made of whole lines of the body, each with its line number (a line longer than the
room is cut, and the cut is stated): the head, the lines that name failing tests (JUnit and
Defects4J ``--- a.b.C::test``, pytest ``FAILED``/``ERROR`` and ``___ test ___`` headers,
unittest ``FAIL:``/``ERROR:``, Go ``--- FAIL:``, Maven ``<<< FAILURE!``, TAP ``not ok``), the
exception lines (types and messages, ``Caused by:``, pytest ``E`` lines, and the line after an
exception line when it continues the message), the first frames of each trace, and the tail.
What is not shown is stated in bytes and lines.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import NamedTuple

import re2

from cargohold._re2 import byte_options
from cargohold._text import decode, utf8_len
from cargohold.projection._model import Builder, Detection
from cargohold.projection._text import head_tail

_TEST = re.compile(
    rb"^(?:--- [\w.$]+::[\w$\[\]-]+|(?:FAILED|ERROR) \S+::\S+|_{3,} \S.*? _{3,}\s*$"
    rb"|(?:FAIL|ERROR): \w+ \([\w.]+\)|\s*--- FAIL: \S+|.*<<< (?:FAILURE|ERROR)!"
    rb"|not ok \d+|\s*\xe2\x97\x8f .+)",
)
_EXCEPTION = re.compile(
    rb"^\s*(?:Caused by: |Exception in thread \"[^\"]*\" |E\s+)?[\w$]+(?:\.[\w$]+)*"
    rb"(?:Error|Exception|Failure|Throwable|Exit|Interrupt|Fault|Warning)\b(?::|\s*$)"
    rb"|^Traceback \(most recent call last\):|^panic: |^E\s{3}\S"
)
_FRAME = re.compile(
    rb"^\s+at [\w$.<>/\[\]-]+\(.*\)\s*$|^\s+at .+:\d+:\d+\)?\s*$|^\s+File \"[^\"]+\", line \d+"
    rb"|^\s+\.\.\. \d+ more\s*$|^[\w/.\\-]+\.py:\d+: |^\s+/\S+\.go:\d+"
)
_INDENT = (b"\t", b" ")
# Necessary conditions of the three patterns, checked first because they cost a fraction of a
# match: each pattern's alternatives start with one of these bytes (after leading whitespace for
# the test pattern's), or hold one of these words. A line failing a prefilter cannot match its
# pattern, so the classification is exactly the patterns' own.
_INDENT_BYTES = frozenset(b"\t ")
_TEST_STARTS = frozenset(b"-FE_n\xe2")
_EXCEPTION_STARTS = frozenset(b"ETp")
_EXCEPTION_WORD = re.compile(rb"Error|Exception|Failure|Throwable|Exit|Interrupt|Fault|Warning")
_SPACE = frozenset(b" \t\n\r\x0b\x0c")
_WS = rb"[ \t\r\x0b\x0c]"
_NON_WS = rb"[^ \t\n\r\x0b\x0c]"


def _re2(pattern: bytes) -> re2._Regexp[bytes]:
    options = byte_options(never_capture=True, max_mem=32 << 20)
    return re2.compile(pattern.replace(b"NS", _NON_WS).replace(b"WS", _WS), options)


# The three patterns for RE2, with whitespace spelled out (RE2's ``\s`` lacks the vertical tab,
# and over a whole body ``\s`` would cross a newline).
_TEST_RE2 = (
    rb"--- [\w.$]+::[\w$\[\]-]+|(?:FAILED|ERROR) NS+::NS+|_{3,} NS.*? _{3,}WS*$"
    rb"|(?:FAIL|ERROR): \w+ \([\w.]+\)|WS*--- FAIL: NS+|.*<<< (?:FAILURE|ERROR)!"
    rb"|not ok \d+|WS*\xe2\x97\x8f .+"
)
_EXCEPTION_RE2 = (
    rb"WS*(?:Caused by: |Exception in thread \"[^\"\n]*\" |EWS+)?[\w$]+(?:\.[\w$]+)*"
    rb"(?:Error|Exception|Failure|Throwable|Exit|Interrupt|Fault|Warning)\b(?::|WS*$)"
    rb"|Traceback \(most recent call last\):|panic: |EWS{3}NS"
)
_FRAME_RE2 = (
    rb"WS+(?:at [\w$.<>/\[\]-]+\(.*\)WS*$|at .+:\d+:\d+\)?WS*$|File \"[^\"\n]+\", line \d+"
    rb"|\.\.\. \d+ moreWS*$|/NS+\.go:\d+)|[\w/.\\-]+\.py:\d+: "
)
_KEY_LINES = _re2(rb"(?m)^(?:" + _TEST_RE2 + rb"|" + _EXCEPTION_RE2 + rb")")
""":data:`_TEST` or :data:`_EXCEPTION` over a whole body, for RE2: a match starts a line one of
them matches."""
_FRAMES_OR_KEY = _re2(
    rb"(?m)^(?:(?:(?:"
    + _FRAME_RE2
    + rb")[^\n]*(?:\n|\z))+|"
    + _TEST_RE2
    + rb"|"
    + _EXCEPTION_RE2
    + rb")"
)
"""The body's one pass (RE2 runs it as a DFA, in C): a match is a run of consecutive lines
:data:`_FRAME` matches, whole (the first alternative, so preferred where a run starts), or else
the start of a line :data:`_KEY_LINES` matches. A run of frames is one match, not one a line:
half of a trace's lines are frames, and a Python step for each was most of a large body's time
(Python's engine over the body, twice RE2's). A run ends with its newline (no other match
holds one) or at the body's end."""
_IN_FRAMES = b"<<< "
"""What a frame-shaped line must hold to be a failing-test or exception line as well: no other
alternative of :data:`_TEST` or :data:`_EXCEPTION` matches a line that starts as a frame does
(indented and then ``at ``, ``File "``, ``...`` or ``/``; or a path and ``.py:N: ``). A run
is searched for the key lines inside it only when it holds these bytes."""
_NEAR_LINES = 4
"""Lines after a failing-test or exception line classified one by one before RE2 searches."""
_HEAD_LINES = 40
_TAIL_LINES = 60
_KEY_MAX = 4000
_FRAMES_PER_TRACE = 3
_LINE_MAX = 400
"""A shown line keeps at most this many bytes; the rest of it is stated as cut."""


class _Line(NamedTuple):
    # A named tuple, not a frozen dataclass: made for every key line, at a third of the cost.
    number: int
    raw: bytes
    """The line's first bytes (enough for any excerpt)."""
    size: int
    """The line's full size in bytes (its newline included)."""
    length: int
    """The line's size without its line ending."""


def _render(line: _Line, limit: int) -> tuple[str, int]:
    """``N: text`` with the text verbatim, cut at ``limit`` bytes (stated); the bytes shown."""
    body = line.raw.rstrip(b"\r\n")
    if len(body) <= limit:
        return f"{line.number}: {decode(body)}", line.size
    cut = body[:limit]
    while cut and (cut[-1] & 0xC0) == 0x80:
        cut = cut[:-1]
    if cut and cut[-1] >= 0xC0:
        cut = cut[:-1]
    rest = line.length - len(cut)
    return f"{line.number}: {decode(cut)} [... line cut: {rest:,} more bytes]", len(cut)


def _line(number: int, raw: bytes) -> _Line:
    return _Line(number, raw[: _LINE_MAX + 8], len(raw), len(raw.rstrip(b"\r\n")))


def _line_at(data: bytes, number: int, start: int, end: int) -> _Line:
    """The :class:`_Line` of ``data[start:end]`` (``end`` past its newline), without copying a
    long line whole: only its first bytes and its last few are sliced."""
    if end - start <= _LINE_MAX + 72:
        return _line(number, data[start:end])
    ending = data[end - 64 : end]
    kept = ending.rstrip(b"\r\n")
    length = end - start - (len(ending) - len(kept))
    if not kept:  # a run of line-ending bytes longer than the slice: measure it whole
        length = len(data[start:end].rstrip(b"\r\n"))
    return _Line(number, data[start : start + _LINE_MAX + 8], end - start, length)


_NONE, _IS_FRAME, _IS_TEST, _IS_ERROR = range(4)


def _classify(raw: bytes) -> int:
    """One line's class by the three patterns, in their order of precedence: a ``at`` frame
    line, a failing-test line, an exception line, any other frame line."""
    # A frame line (``\tat a.b.C(C.java:1)``), most of a trace, skips the test and exception
    # patterns: neither can match a line that opens with "at " and ends with its frame.
    first = raw[0] if raw else -1
    stripped = raw.lstrip() if first in _SPACE else raw
    if first in _INDENT_BYTES and stripped[:3] == b"at " and _FRAME.match(raw):
        return _IS_FRAME
    if (stripped[:1] == b"" or stripped[0] in _TEST_STARTS or b"<<< " in raw) and _TEST.match(raw):
        return _IS_TEST
    if (first in _EXCEPTION_STARTS or _EXCEPTION_WORD.search(raw)) and _EXCEPTION.match(raw):
        return _IS_ERROR
    if (first in _SPACE or b".py:" in raw) and _FRAME.match(raw):
        return _IS_FRAME
    return _NONE


class _Passes(NamedTuple):
    """What the one pass over the body finds (:func:`_passes`)."""

    keys: list[tuple[int, int, int, int]]
    """The failing-test and exception lines in order: ``(start, end, class, line number)``."""
    run_starts: list[int]
    """Where each run of consecutive frame lines starts, in order."""
    run_ends: list[int]
    """Where each run ends (past its last line's newline)."""
    run_lines: list[int]
    """The line number of each run's first line."""
    frame_lines: int
    """Frame lines that are not failing-test or exception lines."""
    total_lines: int


def _passes(data: bytes) -> _Passes:
    """The failing-test and exception lines, the runs of frame lines and the line counts, in
    one RE2 pass; the newlines are counted once, a stretch between two matches at a time.

    A frame line that is also a failing-test or exception line is a key line, not a frame
    (:func:`_classify`'s precedence), and is taken out of the frame count.
    """
    size = len(data)
    keys: list[tuple[int, int, int, int]] = []
    run_starts: list[int] = []
    run_ends: list[int] = []
    run_lines: list[int] = []
    frame_lines = 0
    at = newlines = 0  # the newlines before ``at``
    while at < size and (match := _FRAMES_OR_KEY.search(data, at)) is not None:
        start, stop = match.span()
        newlines += data.count(b"\n", at, start)
        end = data.find(b"\n", start) + 1 or size
        if data[stop - 1] == 10 or (stop == size and _FRAME.match(data[start:end])):
            # A run of frame lines (a key match never holds a newline; at the body's end, the
            # run is preferred where its first line is one).
            run_starts.append(start)
            run_ends.append(stop)
            run_lines.append(newlines + 1)
            inside = data.count(b"\n", start, stop)
            frame_lines += inside + (data[stop - 1] != 10)
            if data.find(_IN_FRAMES, start, stop) >= 0:
                inner, counted, number = start, start, newlines + 1
                while (hit := _KEY_LINES.search(data, inner, stop)) is not None:
                    line_start = hit.start()
                    line_end = data.find(b"\n", line_start) + 1 or size
                    kind = _classify(data[line_start:line_end])
                    if kind in (_IS_TEST, _IS_ERROR):
                        number += data.count(b"\n", counted, line_start)
                        counted = line_start
                        keys.append((line_start, line_end, kind, number))
                        frame_lines -= 1
                    inner = line_end
            newlines += inside
            at = stop
            continue
        kind = _classify(data[start:end])
        near = _NEAR_LINES
        while True:
            if kind in (_IS_TEST, _IS_ERROR):
                keys.append((start, end, kind, newlines + 1))
                near = _NEAR_LINES
            newlines += end < size or data[-1] == 10
            at = end
            if not near or at >= size:
                break
            # The next lines one by one: in a run of failing-test or exception lines (a flood
            # of one exception, a list of failed tests) a search per line costs more than the
            # line. A frame-shaped line is left to the search, which takes its run whole.
            near -= 1
            start, end = at, data.find(b"\n", at) + 1 or size
            line = data[start:end]
            kind = _classify(line)
            if kind == _IS_FRAME or (kind != _NONE and _IN_FRAMES in line):
                break
    newlines += data.count(b"\n", at) if at < size else 0
    total_lines = newlines + (0 if data.endswith(b"\n") or not data else 1)
    return _Passes(keys, run_starts, run_ends, run_lines, frame_lines, total_lines)


@dataclass(slots=True)
class _Scan:
    """What the projector keeps of the body's lines."""

    total_lines: int
    head: list[_Line]
    tail: list[_Line]
    tests: list[_Line]
    errors: list[_Line]
    frames: list[_Line]
    counts: dict[str, int]


def _scan(data: bytes) -> _Scan:
    """Every line's class, found without a Python step per line.

    A Python loop over every line was most of an offload's time (12,000 lines a MiB). Instead
    one RE2 pass (:func:`_passes`, a DFA in C) finds the few failing-test and exception lines,
    each classified exactly by :func:`_classify`, and the runs of frame lines, counted by their
    newlines; the few frames shown after each failing-test or exception line are read from the
    runs. The classification, the counts and the lines kept are the per-line loop's exactly.
    """
    size = len(data)
    passes = _passes(data)
    total_lines = passes.total_lines
    head: list[_Line] = []
    start, number = 0, 0
    while start < size and number < _HEAD_LINES:
        end = data.find(b"\n", start) + 1 or size
        number += 1
        head.append(_line_at(data, number, start, end))
        start = end
    tail: list[_Line] = []
    end, number = size, total_lines
    while end > 0 and len(tail) < _TAIL_LINES:
        start = data.rfind(b"\n", 0, end - 1) + 1
        tail.append(_line_at(data, number, start, end))
        end, number = start, number - 1
    tail.reverse()

    keys, run_starts, run_ends, run_lines = (
        passes.keys,
        passes.run_starts,
        passes.run_ends,
        passes.run_lines,
    )
    tests: list[_Line] = []
    errors: list[_Line] = []
    frames: list[_Line] = []
    test_lines = error_lines = 0
    # The failing-test and exception lines in order, each with what follows it: the message
    # line, the first frames.
    for index, (start, end, kind, number) in enumerate(keys):
        following_key = keys[index + 1][0] if index + 1 < len(keys) else None
        if kind == _IS_TEST:
            test_lines += 1
            if len(tests) < _KEY_MAX:
                tests.append(_line_at(data, number, start, end))
        else:
            error_lines += 1
            if len(errors) < _KEY_MAX:
                errors.append(_line_at(data, number, start, end))
            # (A next test or exception line right after it is no message: not classified
            # again.)
            follows = end < size and len(errors) < _KEY_MAX and following_key != end
            follow_end = data.find(b"\n", end) + 1 or size if follows else end
            following = data[end:follow_end]
            if follows and _classify(following) == _NONE and following.strip():
                # The first line after an exception line, when it is not a frame: its message
                # continued (``AssertionFailedError:`` then ``Expected: ...``).
                error_lines += 1
                errors.append(_line_at(data, number + 1, end, follow_end))
        if len(frames) >= _KEY_MAX:
            continue
        # The first frames of this trace: the frame lines before the next test or exception
        # line, read from the runs that reach past this line.
        stop = size if following_key is None else following_key
        run = bisect.bisect_right(run_ends, end)
        shown = min(_FRAMES_PER_TRACE, _KEY_MAX - len(frames))
        while shown and run < len(run_starts) and run_starts[run] < stop:
            # A run starts after this line, or holds it (a frame-shaped key line).
            frame_start, line_number = run_starts[run], run_lines[run]
            if frame_start < end:
                frame_start, line_number = end, number + 1
            while shown and frame_start < min(run_ends[run], stop):
                frame_end = data.find(b"\n", frame_start) + 1 or size
                frames.append(_line_at(data, line_number, frame_start, frame_end))
                shown -= 1
                frame_start, line_number = frame_end, line_number + 1
            run += 1
    counts = {"tests": test_lines, "errors": error_lines, "frames": passes.frame_lines}
    return _Scan(total_lines, head, tail, tests, errors, frames, counts)


def project_failure(data: bytes, detection: Detection, budget: int) -> str:
    """Verbatim excerpts of test-failure or stack-trace output within ``budget`` bytes."""
    if len(data) < budget and utf8_len(decode(data)) < budget:
        return head_tail(data, budget)
    scan = _scan(data)
    total_lines, head, tail_lines = scan.total_lines, scan.head, scan.tail
    tests, errors, frames, counts = scan.tests, scan.errors, scan.frames, scan.counts

    out = Builder(budget)
    intro = (
        f"failure output: {total_lines:,} lines, {len(data):,} bytes; verbatim lines only, "
        f"each as 'line number: text', gaps as '[... N lines ...]' "
        f"({counts['tests']:,} failing-test lines, "
        f"{counts['errors']:,} exception lines, {counts['frames']:,} frame lines)"
    )
    closing_room = 200
    room = budget - utf8_len(intro) - 1 - closing_room
    if room < 240:
        return head_tail(data, budget)
    limit = max(120, min(_LINE_MAX, room // 12))

    # The tail first (it must be there), then the head, then the key lines by priority.
    shown: dict[int, tuple[str, int, int]] = {}  # number -> (rendered, bytes shown, priority)
    tail_room = max(room // 6, min(room, 400))
    spent = 0
    tail_start = total_lines + 1
    for line in reversed(tail_lines):
        rendered, size = _render(line, limit)
        cost = utf8_len(rendered) + 1
        if spent + cost > tail_room and spent:
            break
        shown[line.number] = (rendered, size, 0)
        spent += cost
        tail_start = line.number
    head_spent = 0
    for line in head:
        if line.number >= tail_start:
            break
        rendered, size = _render(line, limit)
        cost = utf8_len(rendered) + 1
        if head_spent + cost > room // 8:
            break
        shown[line.number] = (rendered, size, 1)
        head_spent += cost
    spent += head_spent
    left_out = {"tests": 0, "errors": 0, "frames": 0}
    for priority, (kind, lines) in enumerate(
        (("tests", tests), ("errors", errors), ("frames", frames)), 2
    ):
        for line in lines:
            if line.number in shown or line.number >= tail_start:
                continue
            rendered, size = _render(line, limit)
            cost = utf8_len(rendered) + 1 + 24  # a gap marker may precede it
            if spent + cost > room:
                left_out[kind] += 1
                continue
            shown[line.number] = (rendered, size, priority)
            spent += cost
        left_out[kind] += counts[kind] - len(lines)

    # Room left over goes to more of the tail, then more of the head.
    for line in [*reversed(tail_lines), *head]:
        if line.number in shown:
            continue
        rendered, size = _render(line, limit)
        cost = utf8_len(rendered) + 1
        if spent + cost + 24 > room:
            break
        shown[line.number] = (rendered, size, 0 if line.number >= tail_start else 1)
        spent += cost

    kinds = ("", "", "tests", "errors", "frames")
    while True:
        lines_out = _assemble(intro, shown, total_lines, len(data), left_out)
        if sum(utf8_len(x) + 1 for x in lines_out) <= budget or not shown:
            break
        # Over the room (markers cost more than estimated): drop the least needed line.
        victim = max(shown, key=lambda n: (shown[n][2], n if shown[n][2] else -n))
        if shown[victim][2] >= 2:
            left_out[kinds[shown[victim][2]]] += 1
        del shown[victim]
    out.add_all(lines_out)
    return out.text()


def _assemble(
    intro: str,
    shown: dict[int, tuple[str, int, int]],
    total_lines: int,
    total_bytes: int,
    left_out: dict[str, int],
) -> list[str]:
    lines = [intro]
    previous = 0
    shown_bytes = 0
    for line_number in sorted(shown):
        if line_number > previous + 1:
            lines.append(f"[... {line_number - previous - 1:,} lines ...]")
        rendered, size, _ = shown[line_number]
        lines.append(rendered)
        shown_bytes += size
        previous = line_number
    if previous < total_lines:
        lines.append(f"[... {total_lines - previous:,} lines not shown ...]")
    names = {"tests": "failing-test", "errors": "exception", "frames": "frame"}
    missed = ", ".join(f"{n:,} {names[k]} lines" for k, n in left_out.items() if n > 0)
    note = f"[{total_bytes - shown_bytes:,} of {total_bytes:,} bytes not shown"
    note += f"; not shown for room: {missed}" if missed else ""
    lines.append(note + "; read them with the line or grep tools]")
    return lines
