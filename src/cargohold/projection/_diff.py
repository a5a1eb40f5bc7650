"""The diff projector: commits, files with +/- counts, hunk headers, totals, the last lines.

Reads unified diffs (``git diff``, ``diff -u``) and ``git log -p`` output in one pass over the
lines of the bytes. Hunks are followed by their header's line counts, so a removed line that
starts with ``---`` is counted as a removal, not taken for a file header; a hunk's lines are
counted by their first bytes in C, a few steps a hunk, and only the lines between hunks are read
one by one. Files touched by many
commits are added up across them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cargohold.projection._model import Builder, Detection, clip, last_lines, quote, stripped_end

_HUNK = re.compile(rb"^@@+ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@+(.*)")
_GIT = re.compile(rb"^diff --git (?:\"?a/)?(.*?)\"? (?:\"?b/)?(.*?)\"?$")
_CR = b"\r"
_NOT_HUNK = bytes(0 if byte in b"+- \\\r\n" else 1 for byte in range(256))
"""A ``bytes.translate`` table: 1 for a first byte no hunk line has, 0 for the rest."""
_WINDOW = 256 * 1024
"""Bytes of lines split at once (a split of the whole body held three times its size)."""
_HEADERS_KEPT = 3
_TAIL_LINES = 4


@dataclass(slots=True)
class _File:
    path: str
    added: int = 0
    removed: int = 0
    hunks: int = 0
    commits: int = 0
    headers: list[str] = field(default_factory=list)
    flags: set[str] = field(default_factory=set)


@dataclass(slots=True)
class _Commit:
    sha: str
    date: str = ""
    subject: str = ""


def _path(raw: bytes) -> str:
    text = raw.split(b"\t", 1)[0].rstrip(b"\r").decode("utf-8", "replace").strip().strip('"')
    if text.startswith(("a/", "b/")):
        text = text[2:]
    return text


class _Reader:
    """The state of one pass over a diff's lines."""

    def __init__(self) -> None:
        self.files: dict[str, _File] = {}
        self.commits: list[_Commit] = []
        self.file_diffs = 0
        self.hunks = 0
        self.current: _File | None = None
        self.git_header = False
        self.old_left = 0
        self.new_left = 0
        self.in_header = False  # between a commit line and its first diff
        self.last_path: str | None = None
        self.touched: set[str] = set()

    def file(self, path: str) -> _File:
        entry = self.files.get(path)
        if entry is None:
            entry = self.files[path] = _File(path)
        if path not in self.touched:
            self.touched.add(path)
            entry.commits += 1
        self.file_diffs += 1
        self.last_path = path
        return entry

    def line(self, raw: bytes) -> None:
        """Read one line outside a hunk (``raw`` with its line ending)."""
        first = raw[:1]
        if first == b"c" and raw.startswith(b"commit ") and len(raw) >= 14:
            sha = raw[7:].split()[0].decode("ascii", "replace") if raw[7:].split() else ""
            self.commits.append(_Commit(sha))
            self.touched = set()
            self.current = None
            self.in_header = True
            return
        if self.in_header and self.commits:
            commit = self.commits[-1]
            if raw.startswith(b"Date:"):
                commit.date = raw[5:].strip().decode("utf-8", "replace")
                return
            if raw.startswith(b"    ") and not commit.subject and raw.strip():
                commit.subject = raw.strip().decode("utf-8", "replace")
                return
        if first == b"d" and raw.startswith(b"diff --git "):
            self.in_header = False
            match = _GIT.match(raw.rstrip(b"\r\n"))
            path = _path(match.group(2)) if match else _path(raw[11:])
            self.current = self.file(path)
            self.git_header = True
            return
        if first == b"@":
            match = _HUNK.match(raw)
            if match is None:
                return
            if self.current is None:
                self.current = self.file(self.last_path or "(unnamed)")
            old = int(match.group(2)) if match.group(2) is not None else 1
            new = int(match.group(4)) if match.group(4) is not None else 1
            self.old_left, self.new_left = old, new
            self.hunks += 1
            self.current.hunks += 1
            if len(self.current.headers) < _HEADERS_KEPT:
                self.current.headers.append(clip(raw.rstrip().decode("utf-8", "replace"), 110))
            return
        if first == b"-" and raw.startswith(b"--- "):
            self.in_header = False
            if not self.git_header:
                self.last_path = _path(raw[4:])
                self.current = None
            elif raw[4:].startswith(b"/dev/null") and self.current is not None:
                self.current.flags.add("new")
            return
        if first == b"+" and raw.startswith(b"+++ "):
            path = _path(raw[4:])
            if raw[4:].startswith(b"/dev/null"):
                if self.current is not None:
                    self.current.flags.add("deleted")
                elif self.last_path:
                    self.current = self.file(self.last_path)
                    self.current.flags.add("deleted")
            elif not self.git_header or self.current is None:
                self.current = self.file(path)
            self.git_header = False
            return
        if self.current is not None:
            if raw.startswith(b"new file mode"):
                self.current.flags.add("new")
            elif raw.startswith(b"deleted file mode"):
                self.current.flags.add("deleted")
            elif raw.startswith(b"rename from "):
                self.current.flags.add("renamed from " + _path(raw[12:]))
            elif raw.startswith(b"Binary files ") or raw.startswith(b"GIT binary patch"):
                self.current.flags.add("binary")

    def hunk(self, firsts: bytes, index: int) -> int:
        """Read the lines of the open hunk from line ``index`` on, by their first bytes
        (``firsts``: one per line, a newline for an empty line); returns the index of the first
        line after the hunk.

        Each line takes one from the old side's count (``-``), the new side's (``+``) or both
        (context: a space, or an empty line), and ``\\`` (no newline at end of file) from
        neither; a line of any other kind ends the hunk early (its header said more lines than
        it had) and is read as an ordinary line. As no line takes more than one from a side,
        the next ``max(old_left, new_left)`` lines all belong to the hunk: they are counted in
        C (``bytes.count`` on their first bytes), a few steps a hunk instead of one per line.
        """
        current = self.current
        total = len(firsts)
        while (self.old_left > 0 or self.new_left > 0) and index < total:
            step = firsts[index : index + max(self.old_left, self.new_left)]
            other = step.translate(_NOT_HUNK).find(b"\x01")
            if other >= 0:
                step = step[:other]
            added, removed = step.count(b"+"), step.count(b"-")
            context = len(step) - added - removed - step.count(b"\\")
            self.old_left -= removed + context
            self.new_left -= added + context
            if current is not None:
                current.added += added
                current.removed += removed
            index += len(step)
            if other >= 0:  # the hunk said more lines than it had: resync on this line
                self.old_left = self.new_left = 0
        return index


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _describe_commit(commit: _Commit) -> str:
    date = f" {commit.date[:10]}" if commit.date else ""
    return f"{commit.sha[:10]}{date} {clip(commit.subject, 90)!r}"


def project_diff(data: bytes, detection: Detection, budget: int) -> str:
    """A preview of a unified diff or ``git log -p`` output within ``budget`` bytes."""
    reader = _Reader()
    size = len(data)
    start = lines_total = 0  # the lines are counted as they are split, not in a pass more
    while start < size:
        # A window of whole lines at a time: its split copies a bounded part of the body.
        stop = data.find(b"\n", min(size, start + _WINDOW)) + 1 or size
        lines = data[start:stop].split(b"\n")
        if lines[-1] == b"":
            lines.pop()  # what follows the window's last newline: no line
        lines_total += len(lines)
        last = len(lines) - 1
        ends_open = stop == size and not data.endswith(b"\n")
        firsts = b"".join([line[:1] or b"\n" for line in lines])
        index = 0
        while index <= last:
            if reader.old_left > 0 or reader.new_left > 0:
                index = reader.hunk(firsts, index)
                continue
            line = lines[index]
            reader.line(line if index == last and ends_open else line + b"\n")
            index += 1
        start = stop
    files = sorted(reader.files.values(), key=lambda f: (-(f.added + f.removed), f.path))
    added = sum(f.added for f in files)
    removed = sum(f.removed for f in files)

    out = Builder(budget)
    tail_lines = last_lines(data, _TAIL_LINES, stripped_end(data, b"\n"))
    first_tail = max(1, lines_total - len(tail_lines) + 1)
    where = f"; last file {reader.last_path}" if reader.last_path else ""
    tail = [f"ends with (lines {first_tail:,}-{lines_total:,}{where}):"] + [
        f"  {first_tail + k:,}: {quote(raw.removesuffix(_CR), 160)}"
        for k, raw in enumerate(tail_lines)
    ]
    reserve = sum(len(t.encode()) + 1 for t in tail)

    if reader.commits:
        merges = sum(1 for c in reader.commits if not c.subject)
        out.add_cut(
            f"git log -p: {len(reader.commits):,} commits, in the order listed:", reserve=reserve
        )
        out.add_cut(f"  first {_describe_commit(reader.commits[0])}", reserve=reserve)
        if len(reader.commits) > 1:
            out.add_cut(f"  last  {_describe_commit(reader.commits[-1])}", reserve=reserve)
        if merges:
            out.add(f"  {merges:,} without a subject line", reserve=reserve)
    out.add_cut(
        f"diff: {len(files):,} files changed, +{added:,} -{removed:,} lines in "
        f"{reader.hunks:,} hunks ({reader.file_diffs:,} file diffs, {lines_total:,} lines)",
        reserve=reserve,
    )
    if not files:
        out.add("no file changes found (no diff headers or hunks)", reserve=reserve)

    def file_line(entry: _File) -> str:
        parts = [_plural(entry.hunks, "hunk")]
        if reader.commits:
            parts.append(_plural(entry.commits, "commit"))
        parts.extend(sorted(entry.flags)[:3])
        return f"  {entry.path} +{entry.added:,} -{entry.removed:,} ({', '.join(parts)})"

    entries = [clip(file_line(f), 200) for f in files]
    cost = sum(len(e.encode()) + 1 for e in entries)
    # The tail's line numbers (what makes its lines quotes an agent can grep and read by line)
    # come out of the room for hunk headers, not out of the list of files.
    numbers = sum(len(f"{first_tail + k:,}: ") for k in range(len(tail_lines)))
    header_room = max(0, min(out.room - reserve, 1400) // 2 - numbers) if files else 0
    if entries:
        out.add("files by churn (+added -removed):", reserve=reserve)
    if cost <= out.room - reserve - header_room:
        out.add_all(entries, reserve=reserve)
        shown = len(entries)
    else:
        shown = out.add_all(entries, reserve=reserve + header_room + 120)
        rest = files[shown:]
        out.add(
            f"  ... {len(rest):,} more files (+{sum(f.added for f in rest):,} "
            f"-{sum(f.removed for f in rest):,}); grep '^diff --git' to list them",
            reserve=reserve,
        )
    with_headers = [f for f in files[:shown] if f.headers]
    if with_headers and out.add("hunk headers (first of each file, by churn):", reserve=reserve):
        per_file = 2 if out.room - reserve > 2500 else 1
        for done, entry in enumerate(with_headers):
            block = [f"  {entry.path}:"] + [f"    {h}" for h in entry.headers[:per_file]]
            cost = sum(len(b.encode()) + 1 for b in block)
            # What does not fit is counted, not dropped in silence: room is kept for the line
            # that says so, unless this block is the last there is.
            untold = len(files) - done
            note = f"  ... hunk headers of {untold:,} more files; grep '^@@' to list them"
            last = done == len(with_headers) - 1 and shown == len(files)
            if cost + (0 if last else len(note.encode()) + 1) > out.room - reserve:
                out.add(note, reserve=reserve)
                break
            out.add_all(block, reserve=reserve)
    out.add_all(tail)
    return out.text()
