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

import io
import re
from collections import deque
from dataclasses import dataclass

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
_HEAD_LINES = 40
_TAIL_LINES = 60
_KEY_MAX = 4000
_FRAMES_PER_TRACE = 3
_LINE_MAX = 400
"""A shown line keeps at most this many bytes; the rest of it is stated as cut."""


@dataclass(frozen=True, slots=True)
class _Line:
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


def project_failure(data: bytes, detection: Detection, budget: int) -> str:
    """Verbatim excerpts of test-failure or stack-trace output within ``budget`` bytes."""
    if len(data) < budget and utf8_len(decode(data)) < budget:
        return head_tail(data, budget)
    head: list[_Line] = []
    tail: deque[tuple[int, bytes]] = deque(maxlen=_TAIL_LINES)
    tests: list[_Line] = []
    errors: list[_Line] = []
    frames: list[_Line] = []
    counts = {"tests": 0, "errors": 0, "frames": 0}
    frames_in_trace = _FRAMES_PER_TRACE
    after_exception = False
    number = 0
    for number, raw in enumerate(io.BytesIO(data), 1):
        # A _Line is made only for a line kept (the head, the key lines, the tail at the end).
        if number <= _HEAD_LINES:
            head.append(_line(number, raw))
        tail.append((number, raw))
        message_follows, after_exception = after_exception, False
        # A frame line (``\tat a.b.C(C.java:1)``), most of a trace, skips the test and exception
        # patterns: neither can match a line that opens with "at " and ends with its frame.
        first = raw[0] if raw else -1
        stripped = raw.lstrip() if first in _SPACE else raw
        if first in _INDENT_BYTES and stripped[:3] == b"at " and _FRAME.match(raw):
            counts["frames"] += 1
            if frames_in_trace < _FRAMES_PER_TRACE and len(frames) < _KEY_MAX:
                frames.append(_line(number, raw))
            frames_in_trace += 1
        elif (stripped[:1] == b"" or stripped[0] in _TEST_STARTS or b"<<< " in raw) and _TEST.match(
            raw
        ):
            counts["tests"] += 1
            if len(tests) < _KEY_MAX:
                tests.append(_line(number, raw))
            frames_in_trace = 0
        elif (first in _EXCEPTION_STARTS or _EXCEPTION_WORD.search(raw)) and _EXCEPTION.match(raw):
            counts["errors"] += 1
            if len(errors) < _KEY_MAX:
                errors.append(_line(number, raw))
            frames_in_trace = 0
            after_exception = True
        elif (first in _SPACE or b".py:" in raw) and _FRAME.match(raw):
            counts["frames"] += 1
            if frames_in_trace < _FRAMES_PER_TRACE and len(frames) < _KEY_MAX:
                frames.append(_line(number, raw))
            frames_in_trace += 1
        elif message_follows and raw.strip() and len(errors) < _KEY_MAX:
            # The first line after an exception line, when it is not a frame: its message
            # continued (``AssertionFailedError:`` then ``Expected: ...``).
            counts["errors"] += 1
            errors.append(_line(number, raw))
    total_lines = number
    tail_lines = [_line(n, raw) for n, raw in tail]

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
