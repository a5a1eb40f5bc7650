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
_FRAME_LINES = re.compile(
    rb"\n(?=[ \t\r\x0b\x0c]++(?:at [\w$.<>/\[\]-]+\(.*\)[ \t\r\x0b\x0c]*$"
    rb"|at .+:\d+:\d+\)?[ \t\r\x0b\x0c]*$|File \"[^\"\n]+\", line \d+"
    rb"|\.\.\. \d+ more[ \t\r\x0b\x0c]*$|/\S+\.go:\d+)|[\w/.\\-]+\.py:\d+: )",
    re.M,
)
""":data:`_FRAME` over a whole body: a match is the newline before a line ``_FRAME`` matches.
The same alternatives, with whitespace that never crosses a newline (``\\s`` does: run over
a whole body, a blank line and the frame after it would match as one), the leading run
possessive, for no alternative can start inside it. A lookahead, so that ``findall`` lists
one shared one-byte string per frame line, not a copy of each."""


_WS = rb"[ \t\r\x0b\x0c]"
_NON_WS = rb"[^ \t\n\r\x0b\x0c]"


def _key_lines() -> re2._Regexp[bytes]:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1  # type: ignore[attr-defined]  # stubs lack it
    options.never_capture = True
    options.max_mem = 32 << 20  # room for the DFA, so that it never falls back to the NFA
    test = (
        rb"--- [\w.$]+::[\w$\[\]-]+|(?:FAILED|ERROR) NS+::NS+|_{3,} NS.*? _{3,}WS*$"
        rb"|(?:FAIL|ERROR): \w+ \([\w.]+\)|WS*--- FAIL: NS+|.*<<< (?:FAILURE|ERROR)!"
        rb"|not ok \d+|WS*\xe2\x97\x8f .+"
    )
    exception = (
        rb"WS*(?:Caused by: |Exception in thread \"[^\"\n]*\" |EWS+)?[\w$]+(?:\.[\w$]+)*"
        rb"(?:Error|Exception|Failure|Throwable|Exit|Interrupt|Fault|Warning)\b(?::|WS*$)"
        rb"|Traceback \(most recent call last\):|panic: |EWS{3}NS"
    )
    pattern = rb"(?m)^(?:" + test + rb"|" + exception + rb")"
    return re2.compile(pattern.replace(b"NS", _NON_WS).replace(b"WS", _WS), options)


_KEY_LINES = _key_lines()
""":data:`_TEST` or :data:`_EXCEPTION` over a whole body, for RE2: a match starts a line one of
them matches. The same alternatives, with whitespace spelled out (RE2's ``\\s`` lacks the
vertical tab, and over a whole body ``\\s`` would cross a newline). RE2 runs it as a DFA, one
pass in C over the body, where a backtracking engine tries each alternative on every line."""
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


def _next_key(data: bytes, at: int) -> tuple[tuple[int, int, int] | None, int]:
    """The first failing-test or exception line from offset ``at`` (a line start) as
    ``(start, end, class)``, and where to look for the one after it."""
    size = len(data)
    # The next lines first, one by one: in a run of failing-test or exception lines (a flood of
    # one exception, a list of failed tests) a search per line costs more than the line.
    for _ in range(_NEAR_LINES):
        if at >= size:
            return None, size
        end = data.find(b"\n", at) + 1 or size
        kind = _classify(data[at:end])
        if kind in (_IS_TEST, _IS_ERROR):
            return (at, end, kind), end
        at = end
    while at < size and (found := _KEY_LINES.search(data, at)) is not None:
        hit = found.start()
        start = data.rfind(b"\n", 0, hit) + 1
        end = data.find(b"\n", hit) + 1 or size
        kind = _classify(data[start:end])
        if kind in (_IS_TEST, _IS_ERROR):
            return (start, end, kind), end
        at = end
    return None, size


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

    A Python loop over every line was most of an offload's time (12,000 lines a MiB). Instead:
    RE2 (a DFA, one pass in C) finds the few failing-test and exception lines
    (:data:`_KEY_LINES`), each classified exactly by
    :func:`_classify`; the frame lines, half of a trace's lines, are counted by one C pass of
    :data:`_FRAME_LINES` (the frame pattern over the whole body), which is also searched for the
    few frames shown after each failing-test or exception line. The classification, the counts
    and the lines kept are the per-line loop's exactly.
    """
    size = len(data)
    total_lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
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

    # Where each frame line from line 2 on starts: one C pass. The frames shown after a
    # failing-test or exception line are looked up in it, not searched for again.
    first_end = data.find(b"\n") + 1 or size
    frame_starts = [m.start() + 1 for m in _FRAME_LINES.finditer(data, first_end - 1)]
    line1 = _classify(data[:first_end])
    frame_lines = len(frame_starts) + (line1 == _IS_FRAME)
    tests: list[_Line] = []
    errors: list[_Line] = []
    frames: list[_Line] = []
    test_lines = error_lines = 0
    # The failing-test and exception lines in order (line 1 classified above, for the frame
    # pass starts at line 2), each with what follows it: the message line, the first frames.
    key = (0, first_end, line1) if line1 in (_IS_TEST, _IS_ERROR) else None
    at = first_end
    if key is None:
        key, at = _next_key(data, at)
    number, counted_to = 1, 0
    while key is not None:
        start, end, kind = key
        key, at = _next_key(data, at)
        number += data.count(b"\n", counted_to, start)
        counted_to = start
        if (
            start
            and (data[start] in _SPACE or data.find(b".py:", start, end) >= 0)
            and _FRAME.match(data[start:end])
        ):
            frame_lines -= 1  # a frame-shaped line that is a test or exception line
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
            follows = end < size and len(errors) < _KEY_MAX and (key is None or key[0] != end)
            follow_end = data.find(b"\n", end) + 1 or size if follows else end
            following = data[end:follow_end]
            if follows and _classify(following) == _NONE and following.strip():
                # The first line after an exception line, when it is not a frame: its message
                # continued (``AssertionFailedError:`` then ``Expected: ...``).
                error_lines += 1
                errors.append(_line_at(data, number + 1, end, follow_end))
        # The first frames of this trace: the frame lines before the next test or exception line.
        stop = size if key is None else key[0]
        first = bisect.bisect_left(frame_starts, end)
        if len(frames) < _KEY_MAX and first < len(frame_starts) and frame_starts[first] < stop:
            line_number, counted = number + 1, end
            shown = min(_FRAMES_PER_TRACE, _KEY_MAX - len(frames))
            for frame_start in frame_starts[first : first + shown]:
                if frame_start >= stop:
                    break
                line_number += data.count(b"\n", counted, frame_start)
                counted = frame_start
                frame_end = data.find(b"\n", frame_start) + 1 or size
                frames.append(_line_at(data, line_number, frame_start, frame_end))
    counts = {"tests": test_lines, "errors": error_lines, "frames": frame_lines}
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
