"""The search-results projector: match count, files with counts, first matches per file, the last.

Reads ``grep -n`` / ``rg -n`` output (``path:line:text``, also ``path:line:column:text`` and the
context lines ``path-line-text`` of ``-C``), and ``rg``'s heading form (a path on its own line,
then ``line:text`` lines). Lines that are neither are counted as other lines and kept out of the
match counts.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

from cargohold.projection._model import Builder, Detection, clip, quote, stripped_end

_MATCH = re.compile(rb"^([^\n:]{1,1000}?):(\d+):(?:(\d+):)?(.*)$", re.S)
_CONTEXT = re.compile(rb"^([^\n:]{1,1000}?)-(\d+)-(.*)$", re.S)
_HEADED = re.compile(rb"^(\d+)[:-](?:(\d+):)?(.*)$", re.S)
_KEEP_PER_FILE = 3
_CR = b"\r"


@dataclass(slots=True)
class _File:
    path: str
    count: int = 0
    first_line: int = 0
    last_line: int = 0
    matches: list[tuple[int, str]] = field(default_factory=list)


def _text(raw: bytes) -> str:
    return raw.rstrip(b"\r\n").decode("utf-8", "replace")


Quoted = tuple[int, bytes]
"""A line of the body: its number, its bytes."""


_GROUP = re.compile(rb"([^:\n]*):([0-9]+):[^\n]*(?:\n\1:([0-9]+):[^\n]*)*+")
"""A file's run of ``path:line:text`` lines: the first line's path and number, and the last
line's number (``None`` for a run of one line). The repeat is possessive: it keeps no state to
backtrack into, so a run of any length is matched in constant memory."""
_WINDOW = 256 * 1024
"""Bytes a match reads at most (to the next line end): a long run is matched a window at a
time, and no single call holds the interpreter for long (a put may run beside it)."""
_PATH_SAMPLES = 64
_PATH_BYTES = 1000


def _plain(data: bytes) -> tuple[dict[bytes, _File], int, Quoted, bytes] | None:
    """Plain ``path:line:text`` output (every line so), read a file's run of lines at a time:
    one match of :data:`_GROUP` a run (grep writes a file's matches together; a path seen
    again, or a run cut at a window's end, continues its file's entry), its lines counted by
    their newlines, and only the lines a file's entry quotes split; ``None`` for any other
    form.

    A line's path is what precedes its first colon, its line number the digits up to the
    second; the path of an even sample of lines (one in ``total // 64``) is held to 1,000
    bytes, as the line-by-line reading did (a run's lines share a path: a run is sampled when
    a sampled line falls in it). A match that does not start where the last one ended (a line
    of another form) or a line that is empty ends the fast reading."""
    # The lines are those of ``data.split(b"\n")`` less one empty last line (the final break).
    if not data:
        return None
    stop = len(data) - 1 if data.endswith(b"\n") else len(data)
    files: dict[bytes, _File] = {}
    long_runs: list[tuple[int, int]] = []  # (first line, lines) of runs of a long path
    match = _GROUP.match
    index = pos = 0  # the run's first line and first byte
    while True:
        bound = data.find(b"\n", pos + _WINDOW, stop)
        run = match(data, pos, stop if bound < 0 else bound)
        if run is None:
            return None
        path, first, last = run.group(1, 2, 3)
        end = run.end()
        lines = 1 if last is None else data.count(b"\n", pos, end) + 1
        if len(path) > _PATH_BYTES:
            long_runs.append((index, lines))
        entry = files.get(path)
        if entry is None:
            entry = files[path] = _File(_text(path), first_line=int(first[:18]))
        entry.count += lines
        entry.last_line = int((first if last is None else last)[:18])
        at = pos
        for _ in range(min(lines, _KEEP_PER_FILE - len(entry.matches))):
            line_end = data.find(b"\n", at, end)
            line_end = end if line_end < 0 else line_end
            _, number, text = data[at:line_end].split(b":", 2)
            entry.matches.append((int(number[:18]), quote(text, 160, strip=True)))
            at = line_end + 1
        index += lines
        if end == stop:
            break
        pos = end + 1  # past the newline that ends the run (or the window)
    stride = max(1, index // _PATH_SAMPLES)
    if any((-first_line) % stride < lines for first_line, lines in long_runs):
        return None
    ending = data[data.rfind(b"\n", 0, stop) + 1 : stop].rstrip(_CR)
    return files, index, (index, ending), ending


def project_search(data: bytes, detection: Detection, budget: int) -> str:
    """A preview of grep-style search results within ``budget`` bytes."""
    plain = _plain(data)
    if plain is not None:
        end = data.find(b"\n")  # not a split: that would copy all the rest
        head = (1, data[: end if end >= 0 else len(data)].rstrip(_CR))
        return _render(data, budget, plain[0], plain[1], 0, 0, head, plain[2], plain[3])
    files: dict[bytes, _File] = {}
    matches = context = other = 0
    last: Quoted | None = None
    first: Quoted | None = None
    last_raw = b""
    heading: bytes | None = None
    for body_line, raw in enumerate(io.BytesIO(data), 1):
        line = raw.rstrip(b"\r\n")
        if not line or line == b"--":
            heading = None if not line else heading
            continue
        found = _MATCH.match(line)
        if found is not None:
            path, number, text = found.group(1), found.group(2), found.group(4)
        else:
            headed = _HEADED.match(line) if heading is not None else None
            if headed is not None and heading is not None:
                if line[len(headed.group(1)) : len(headed.group(1)) + 1] == b"-":
                    context += 1
                    continue
                path, number, text = heading, headed.group(1), headed.group(3)
            elif _CONTEXT.match(line):
                context += 1
                continue
            else:
                if b":" not in line and b" " not in line.strip():
                    heading = line  # rg --heading: the path on its own line
                else:
                    other += 1
                continue
        matches += 1
        entry = files.get(path)
        if entry is None:
            entry = files[path] = _File(_text(path))
        entry.count += 1
        line_number = int(number[:18])
        if not entry.first_line:
            entry.first_line = line_number
        entry.last_line = line_number
        if len(entry.matches) < _KEEP_PER_FILE:
            entry.matches.append((line_number, quote(text, 160, strip=True)))
        last = (body_line, line)
        last_raw = line
        if first is None:
            first = last
    return _render(data, budget, files, matches, context, other, first, last, last_raw)


def _render(
    data: bytes,
    budget: int,
    files: dict[bytes, _File],
    matches: int,
    context: int,
    other: int,
    first: Quoted | None,
    last: Quoted | None,
    last_raw: bytes,
) -> str:
    out = Builder(budget)
    tail: list[str] = []
    if last is not None:
        tail.append(f"last match (line {last[0]:,}): {quote(last[1], 240)}")
    # Offsets into the body, not ``rstrip``/``rsplit`` copies of it (twice its size).
    stripped = stripped_end(data)
    ending = data[data.rfind(b"\n", 0, stripped) + 1 : stripped]
    if last is None or ending != last_raw:
        number = data.count(b"\n", 0, stripped) + 1
        tail.append(f"ends with (line {number:,}): {quote(ending.rstrip(_CR), 200)}")
    reserve = sum(len(t.encode()) + 1 for t in tail)

    extras = []
    if context:
        extras.append(f"{context:,} context lines")
    if other:
        extras.append(f"{other:,} other lines")
    extra = f" (+ {', '.join(extras)})" if extras else ""
    out.add_cut(
        f"search results: {matches:,} matches in {len(files):,} files{extra}", reserve=reserve
    )
    if first is not None:
        out.add_cut(f"first match (line {first[0]:,}): {quote(first[1], 200)}", reserve=reserve)
    ordered = sorted(files.values(), key=lambda f: (-f.count, f.path))
    if ordered:
        out.add("files by matches (count, line span):", reserve=reserve)
        room = (out.room - reserve) // 2
        spent = shown = 0
        for entry in ordered:
            span = (
                f"line {entry.first_line:,}"
                if entry.count == 1
                else f"lines {entry.first_line:,}-{entry.last_line:,}"
            )
            listed = f"  {clip(entry.path, 160)} {entry.count:,} ({span})"
            cost = len(listed.encode()) + 1
            if spent + cost > room or not out.add(listed, reserve=reserve + 60):
                break
            spent += cost
            shown += 1
        if shown < len(ordered):
            rest = ordered[shown:]
            out.add(
                f"  ... {len(rest):,} more files with {sum(f.count for f in rest):,} matches",
                reserve=reserve,
            )
        out.add("first matches per file (line: text):", reserve=reserve)
        per_file = 2 if len(ordered) > 3 else _KEEP_PER_FILE
        for entry in ordered:
            block = [f"  {clip(entry.path, 160)}:"] + [
                f"    {number}: {text}" for number, text in entry.matches[:per_file]
            ]
            if sum(len(b.encode()) + 1 for b in block) > out.room - reserve:
                break
            out.add_all(block, reserve=reserve)
    out.add_all(tail)
    return out.text()
