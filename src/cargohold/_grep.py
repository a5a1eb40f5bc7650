"""The grep engine of explicit reads: matching lines of a stored body at C speed.

RE2 scans the whole body; Python steps once per matching line, never per line. A line longer
than :data:`MAX_LINE_PREVIEW` characters (minified JSON, base64) is shown as bounded excerpts
around each match, each naming its byte offset so a byte read reaches it.
"""

from __future__ import annotations

import codecs
import contextlib
from collections.abc import Callable
from typing import cast

import re2

MAX_LINE_PREVIEW = 400
"""Characters of a matching line shown whole; a longer line is shown as excerpts."""

_EXCERPT = MAX_LINE_PREVIEW // 2
_LOCATE_GAP = 512
"""Past a gap of this many bytes between runs of matching lines, counting finds the next run
with the pattern alone (a memchr for a literal) and then extends it, two calls instead of one:
a run's own search crosses unmatched text at about 2 ns a byte, and a call costs about 1 us."""
_BEGIN_LINE = "(?m:^)"
_END_LINE = "(?m:$)"


def compile_pattern(pattern: str, ignore_case: bool, *, scan: bool = False) -> re2._Regexp[str]:
    """``pattern`` on RE2; with ``scan``, set up to run over a whole body (see
    :class:`MatchingLines`): no match holds a newline and groups capture nothing."""
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False
    if scan:
        options.never_nl = True
        options.never_capture = True
    return re2.compile(pattern, options)


def _line_pattern(pattern: str) -> str | None:
    r"""``pattern`` rewritten so that, run over a whole body, it matches where it matches a line on
    its own: ``^`` and ``\A`` become the start of a line, ``$`` and ``\z`` its end.

    ``None`` for a pattern that a body-wide scan cannot honour: ``\C`` (any byte) may match a
    newline even when the scan forbids them.
    """
    out: list[str] = []
    at, size = 0, len(pattern)
    while at < size:
        char = pattern[at]
        if char == "\\":
            escaped = pattern[at + 1 : at + 2]
            if escaped == "C":
                return None
            if escaped in ("A", "z"):
                out.append(_BEGIN_LINE if escaped == "A" else _END_LINE)
                at += 2
                continue
            if escaped == "Q":  # literal text up to \E: nothing in it is an anchor
                close = pattern.find("\\E", at + 2)
                stop = size if close < 0 else close + 2
            elif escaped in ("p", "P", "x") and pattern[at + 2 : at + 3] == "{":
                close = pattern.find("}", at + 3)  # \p{^Greek}: that ^ is no anchor
                stop = size if close < 0 else close + 1
            else:
                stop = at + 2
        elif char == "[":
            stop = _class_end(pattern, at)
        elif char in "^$":
            out.append(_BEGIN_LINE if char == "^" else _END_LINE)
            at += 1
            continue
        else:
            stop = at + 1
        out.append(pattern[at:stop])
        at = stop
    return "".join(out)


def _class_end(pattern: str, at: int) -> int:
    """The index just past the character class that opens at ``pattern[at]``."""
    at += 1
    if pattern[at : at + 1] == "^":
        at += 1
    if pattern[at : at + 1] == "]":  # a ] first in a class is itself
        at += 1
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            at += 2
        elif char == "[" and pattern[at + 1 : at + 2] == ":":  # [:alpha:], [:^space:]
            close = pattern.find(":]", at + 2)
            at = at + 1 if close < 0 else close + 2
        elif char == "]":
            return at + 1
        else:
            at += 1
    return len(pattern)


_RE2_PRIVATE = True
"""Whether :func:`_spans` may use google-re2's private ``Match`` (tests turn it off)."""


def _spans(
    regex: re2._Regexp[str], *, anchored: bool = False
) -> Callable[[bytes, int, int], tuple[int, int]]:
    """``(start, end)`` of the first match of ``regex`` in ``data[pos:endpos]`` (``(-1, -1)``
    when there is none), from RE2's own ``Match``; ``anchored``: a match starting at ``pos``.

    The wrapper's ``search`` builds a generator and a match object per call, which doubles the
    cost of a scan that calls it once per run of matching lines, and it cannot anchor at
    ``pos``; neither name used here is in its stubs.
    """
    match = getattr(getattr(regex, "_regexp", None), "Match", None)  # the compiled RE2
    anchors = getattr(re2, "_Anchor", None)
    if not _RE2_PRIVATE or match is None or anchors is None:
        # a google-re2 without these private names: its public API, about twice as slow
        find = regex.match if anchored else regex.search

        def public(data: bytes, pos: int, endpos: int) -> tuple[int, int]:
            found = find(data, pos, endpos)
            return (-1, -1) if found is None else found.span()

        return public
    anchor = anchors.ANCHOR_START if anchored else anchors.UNANCHORED

    def spans(data: bytes, pos: int, endpos: int) -> tuple[int, int]:
        found: tuple[int, int] = match(anchor, data, pos, endpos)[0]
        return found

    return spans


def _no_match(data: bytes, pos: int, endpos: int) -> tuple[int, int]:
    return (-1, -1)


class MatchingLines:
    r"""The lines of a body that hold a match, found without splitting the body into lines.

    A line is the text between two newlines (``\n`` only, as stubs and ``grep -n`` count them);
    the pattern sees one line at a time, as if alone. The body is scanned as bytes by RE2, so
    memory stays the body's own and the Python loop runs once per matching line (once per run of
    consecutive matching lines when only counting), never once per line.

    The pattern is rewritten for the whole body (:func:`_line_pattern`) and compiled with
    ``never_nl``, so that no match crosses a line. Each line to be shown is confirmed by the
    pattern itself on that line alone. Counting extends each match into the run of consecutive
    matching lines around it with one leftmost-longest match, and counts the run's newlines.
    Invalid UTF-8 stays as it is: like GNU grep, ``.`` and classes match no invalid byte. Two
    cases go line by line instead, in linear time still: a pattern with ``\C`` (any byte, a
    newline too) for everything, and a body that is not UTF-8 for counting (a run cannot cross
    an invalid byte).
    """

    def __init__(self, data: bytes, pattern: str, regex: re2._Regexp[str], ignore_case: bool):
        self._data = data
        self._view = memoryview(data)
        self._regex = regex
        self._pos = 0  # the start of the next line to look at
        self._number = 1  # its line number
        self._find: Callable[[bytes, int, int], tuple[int, int]] | None = None
        self._run: Callable[[bytes, int, int], tuple[int, int]] | None = None
        self._run_here: Callable[[bytes, int, int], tuple[int, int]] = _no_match
        body_pattern = _line_pattern(pattern)
        if body_pattern is None:
            return
        try:
            self._find = _spans(compile_pattern(body_pattern, ignore_case, scan=True))
        except re2.error:  # a rewrite RE2 refuses: the pattern is tried on each line
            return
        run = f"(?:{_BEGIN_LINE}[^\\n]*?(?:{body_pattern})[^\\n]*?{_END_LINE}\\C?)+"
        with contextlib.suppress(re2.error):  # too big a program: count line by line
            compiled = _compile_longest(run, ignore_case)
            self._run, self._run_here = _spans(compiled), _spans(compiled, anchored=True)

    def _on_line(self, start: int, end: int) -> bool:
        line = cast(bytes, self._view[start:end])  # RE2 reads any buffer; no copy of the line
        return self._regex.search(line) is not None

    def _locate(self) -> tuple[int, int] | None:
        """The next line from the position that the body-wide pattern finds in: its start and its
        end (its newline, or the body's end). The position moves past it."""
        data, pos, size = self._data, self._pos, len(self._data)
        if pos >= size:
            return None
        if self._find is None:  # no body-wide pattern: every line is a candidate
            start, at = pos, pos
        else:
            at = self._find(data, pos, size)[0]
            if at < 0:
                self._pos = size
                return None
            start = data.rfind(b"\n", pos, at) + 1 or pos
            if start >= size:  # the empty end after a final newline is no line
                self._pos = size
                return None
        end = data.find(b"\n", at)
        end = size if end < 0 else end
        self._pos = end + 1
        return start, end

    def next(self) -> tuple[int, int, int] | None:
        """The next matching line: its number, and its bytes ``[start, end)`` without newline."""
        while True:
            pos = self._pos
            found = self._locate()
            if found is None:
                return None
            start, end = found
            number = self._number + self._data.count(b"\n", pos, start)
            self._number = number + 1  # the number of the line at the new position
            if self._on_line(start, end):
                return number, start, end

    def count_rest(self) -> int:
        """How many lines from the current position hold a match; the scan ends there."""
        if self._find is None or self._run is None or not _valid_utf8(self._data):
            # A run needs every byte of its lines to be a character: only \C matches an invalid
            # one, and \C matches newlines too. Such bodies are counted line by line.
            count = 0
            while self.next() is not None:
                count += 1
            return count
        data, size, pos, count = self._data, len(self._data), self._pos, 0
        locate = True
        while pos < size:
            if locate:  # the pattern alone skips unmatched text fastest (a memchr for a literal)
                self._pos = pos
                found = self._locate()
                if found is None:
                    break
                start, end = found
                first, last = self._run_here(data, start, size)
                if first < 0:  # the rewrite and the run disagree: count the line found alone
                    count += self._on_line(start, end)
                    pos = end + 1
                    continue
            else:  # runs close together: one call finds the next one and takes it in
                first, last = self._run(data, pos, size)
                if first < 0:
                    break
            locate = first - pos > _LOCATE_GAP
            lines = data.count(b"\n", first, last)
            if last > first and data[last - 1] != 0x0A:  # a last line without a newline
                lines += 1
                last += 1
            count += lines
            pos = last
        self._pos = size
        return count


def _compile_longest(pattern: str, ignore_case: bool) -> re2._Regexp[str]:
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False
    options.never_nl = True
    options.never_capture = True
    options.longest_match = True  # a run takes in every consecutive matching line
    return re2.compile(pattern, options)


def _valid_utf8(data: bytes) -> bool:
    """Whether ``data`` is UTF-8, checked a mebibyte at a time (bounded memory)."""
    if data.isascii():
        return True
    decoder = codecs.getincrementaldecoder("utf-8")()
    view, step = memoryview(data), 1 << 20
    try:
        for at in range(0, len(data), step):
            decoder.decode(view[at : at + step])
        decoder.decode(b"", True)
    except UnicodeDecodeError:
        return False
    return True


def _decode(data: bytes | memoryview) -> str:
    return codecs.utf_8_decode(data, "replace", True)[0]


def _chars(line: memoryview) -> int:
    """Characters of ``line`` decoded with replacement, a mebibyte at a time (bounded memory)."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    step = 1 << 20
    total = sum(len(decoder.decode(line[at : at + step])) for at in range(0, len(line), step))
    return total + len(decoder.decode(b"", True))


def entries(
    regex: re2._Regexp[str], data: bytes, number: int, start: int, end: int, most: int
) -> list[str]:
    """What a matching line shows: the line itself, or, when it is longer than
    :data:`MAX_LINE_PREVIEW` characters (minified JSON, base64), one bounded excerpt per match,
    each naming its exact byte offset in the body so ``artifact_read(ref, offset, length)``
    reaches the match itself."""
    line = memoryview(data)[start:end]
    size = len(line)
    if size <= 4 * MAX_LINE_PREVIEW:  # it may have at most MAX_LINE_PREVIEW characters
        text = _decode(line)
        if len(text) <= MAX_LINE_PREVIEW:
            return [f"{number}: {text}\n"]
    chars = _chars(line)
    entries: list[str] = []
    at = 0
    while len(entries) < most and at <= size:
        found = regex.search(cast(bytes, line), at)  # RE2 reads any buffer
        if found is None:
            break
        first, last = found.span()
        entries.append(
            f"{number}: [byte {start + first}; line of {chars:,} chars] "
            f"...{_window(line, first, last)}...\n"
        )
        at = last
        if last == first:  # an empty match: go on from the next character
            at += 1
            while at < size and (line[at] & 0xC0) == 0x80:
                at += 1
    return entries


def _window(line: memoryview, first: int, last: int) -> str:
    """The characters shown around the match at bytes ``[first, last)`` of a long line: from up
    to :data:`_EXCERPT` // 2 characters before it, at least :data:`_EXCERPT` and at most
    :data:`MAX_LINE_PREVIEW` characters, decoded from a few hundred bytes around it only.

    A character takes at most four bytes, so ``4 * n`` bytes hold ``n`` whole characters.
    """
    begin = max(0, first - 4 * (_EXCERPT // 2) - 4)
    for _ in range(3):  # start on a character's first byte
        if 0 < begin < first and (line[begin] & 0xC0) == 0x80:
            begin += 1
    head = _decode(line[begin:first])[-(_EXCERPT // 2) :]
    matched = len(_decode(line[first : min(last, first + 4 * MAX_LINE_PREVIEW + 4)]))
    wanted = min(MAX_LINE_PREVIEW, max(len(head) + matched, _EXCERPT)) - len(head)
    tail = _decode(line[first : first + 4 * wanted])[:wanted]
    return head + tail
