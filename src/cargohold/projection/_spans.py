"""Where a JSON document's parts are in its bytes: byte spans of members and elements.

The JSON projector quotes records and small values as the body has them (grep-true) and names
their byte offsets, so ``artifact_read(ref, offset, length)`` reaches them even on a body of one
line. Parsing gives values, not positions; this module finds positions with C-speed steps only:

- the end of a value that starts at a known offset: ``orjson`` parses a bounded window from
  there and stops at the first byte after the value ("unexpected content after document"), whose
  position it reports;
- the members of an object, walked in order from its ``{`` (each key matched where the previous
  value ended) until a value is too large to parse in a window; then from its ``}`` backwards
  (each key found with ``rfind`` and confirmed by the value ending exactly where the next member
  begins) until the two walks meet;
- the first element of an array right after its ``[``; the last one before its ``]``, confirmed
  by its value ending there.

Whatever cannot be confirmed is left unlocated (``None``): an offset the preview names is always
the offset of that very part.
"""

from __future__ import annotations

import re

import orjson

WINDOW_MAX = 64 * 1024
"""The largest value whose end is found by parsing it (a window of the body)."""
_WALK_MAX = 256
"""Members walked from each end of an object."""
_TRIES = 64
_WS = b" \t\r\n"
_KEY = re.compile(rb'[ \t\r\n]*"((?:[^"\\]|\\.)*)"[ \t\r\n]*:[ \t\r\n]*', re.S)
_AFTER = "unexpected content after document"

Span = tuple[int, int]
"""``(start, end)``: the value is ``data[start:end]``."""


class Spans:
    """Byte spans of the parts of one JSON document (see the module docstring)."""

    __slots__ = ("_data", "_lines")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._lines: list[tuple[int, int]] = [(0, 1)]

    def root(self) -> Span | None:
        """The whole document, its surrounding whitespace (and a UTF-8 BOM) left out."""
        data = self._data
        start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
        while start < len(data) and data[start] in _WS:
            start += 1
        end = len(data)
        while end > start and data[end - 1] in _WS:
            end -= 1
        return (start, end) if end > start else None

    def value_end(self, start: int) -> int | None:
        """The end of the JSON value that starts at ``start``, if it fits in a window."""
        data = self._data
        size = 512
        while True:
            window = data[start : start + size]
            whole = start + size >= len(data)
            try:
                orjson.loads(window)
            except orjson.JSONDecodeError as exc:
                if exc.msg.startswith(_AFTER):
                    at = exc.pos if window.isascii() else _byte_pos(window, exc.pos)
                    end = start + at
                    while end > start and data[end - 1] in _WS:
                        end -= 1
                    return end
                if whole or size >= WINDOW_MAX:
                    return None
            else:
                if whole:
                    end = len(data)
                    while end > start and data[end - 1] in _WS:
                        end -= 1
                    return end
                if size >= WINDOW_MAX:  # a window that parses may have cut a number short
                    return None
            size = min(WINDOW_MAX, size * 8)

    def members(self, span: Span, keys: list[str], *, ends: bool = False) -> dict[str, Span]:
        """The value spans of an object's members, for those that can be confirmed.

        Args:
            span: The object's span (from its ``{`` to after its ``}``).
            keys: Its keys in document order (as parsed).
            ends: Only the first and the last member are wanted (a map's first and last
                values): one step from each end.
        """
        data = self._data
        start, end = span
        found: dict[str, Span] = {}
        pos = start + 1
        done = 0
        open_start: int | None = None  # the value start of a member too large for a window
        while done < len(keys) and done < (1 if ends else _WALK_MAX):
            match = _KEY.match(data, pos, end)
            if match is None or _key_of(match.group(1)) != keys[done]:
                break
            value_start = match.end()
            value_end = self.value_end(value_start)
            if value_end is None:
                open_start = value_start
                break
            found[keys[done]] = (value_start, value_end)
            done += 1
            comma = _skip(data, value_end, end)
            if comma >= end or data[comma] != 0x2C:  # ','
                return found
            pos = comma + 1
        # Backwards from the closing brace, until the walks meet.
        value_end = _skip_back(data, end - 1, start)
        index = len(keys) - 1
        walked = 0
        while index >= done and walked < (1 if ends else _WALK_MAX):
            walked += 1
            key = keys[index]
            if index == done and open_start is not None:
                found[key] = (open_start, value_end)
                break
            located = self._find_member(key, start, value_end)
            if located is None:
                break
            key_at, value_start = located
            found[key] = (value_start, value_end)
            comma = _skip_back(data, key_at, start) - 1
            if comma <= start or data[comma] != 0x2C:
                break
            value_end = _skip_back(data, comma, start)
            index -= 1
        return found

    def _find_member(self, key: str, start: int, value_end: int) -> tuple[int, int] | None:
        """Where member ``key`` whose value ends at ``value_end`` starts: its key, its value.

        Confirmed by its value ending exactly at ``value_end``; a value too large for a window
        is confirmed instead by its key's text occurring once only in the object.
        """
        data = self._data
        needle = orjson.dumps(key)
        at = data.rfind(needle, start, value_end)
        tries = 0
        first = at
        while at > start and tries < _TRIES:
            tries += 1
            match = _KEY.match(data, at, value_end)
            if match is not None and match.start(1) == at + 1:
                value_start = match.end()
                if self.value_end(value_start) == value_end:
                    return at, value_start
            at = data.rfind(needle, start, at)
        if first > start and data.count(needle, start, value_end) == 1:
            match = _KEY.match(data, first, value_end)
            if match is not None and match.start(1) == first + 1:
                return first, match.end()
        return None

    def first(self, span: Span) -> Span | None:
        """The first element of an array."""
        data = self._data
        start = _skip(data, span[0] + 1, span[1])
        if start >= span[1] - 1:
            return None
        end = self.value_end(start)
        return None if end is None else (start, end)

    def last(self, span: Span, opener: bytes | None, compact: int) -> Span | None:
        """The last element of an array: ``opener`` is its first byte (``None`` for a number,
        ``true``, ``false`` or ``null``), ``compact`` its size as compact JSON."""
        data = self._data
        end = _skip_back(data, span[1] - 1, span[0])
        if end <= span[0] + 1:
            return None
        if opener is None:  # a scalar: it starts after the separator before it
            at = max(data.rfind(b",", span[0], end), data.rfind(b"[", span[0], end)) + 1
            at = _skip(data, at, end)
            return (at, end) if self.value_end(at) == end else None
        at = data.rfind(opener, span[0], max(span[0] + 1, end - compact + 1))
        tries = 0
        while at > span[0] and tries < _TRIES:
            tries += 1
            if self.value_end(at) == end:
                return (at, end)
            at = data.rfind(opener, span[0], at)
        return None

    def line(self, offset: int) -> int:
        """The 1-based line number of byte ``offset`` (counted from the nearest known one)."""
        base, number = max((p for p in self._lines if p[0] <= offset), default=(0, 1))
        number += self._data.count(b"\n", base, offset)
        self._lines.append((offset, number))
        return number


def _byte_pos(window: bytes, chars: int) -> int:
    return len(window.decode("utf-8", "ignore")[:chars].encode("utf-8"))


def _key_of(raw: bytes) -> str | None:
    try:
        key = orjson.loads(b'"' + raw + b'"')
    except orjson.JSONDecodeError:
        return None
    return key if isinstance(key, str) else None


def _skip(data: bytes, pos: int, end: int) -> int:
    while pos < end and data[pos] in _WS:
        pos += 1
    return pos


def _skip_back(data: bytes, pos: int, floor: int) -> int:
    """The end of the content before ``pos``, whitespace skipped."""
    while pos > floor and data[pos - 1] in _WS:
        pos -= 1
    return pos
