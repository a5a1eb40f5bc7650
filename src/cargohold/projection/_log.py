"""The log projector: line count, counts by level, time span, every distinct error and warning,
the most common messages, the tail.

Errors and warnings are quoted verbatim (their first occurrence, with line numbers), grouped when
they repeat with only numbers, ids or addresses changing, so a 20,000-line log with one real
failure shows that failure, and a log with a thousand identical timeouts shows one line and its
count.

Cost: a body of up to 4,096 lines is read line by line (every count exact; a few microseconds
a line, each line's level looked for in its first 160 characters). A longer one is read in
C-speed passes for what must be exact, without a ``split`` of the body: the line count
(``bytes.count``), and every line that names a severe level (``ERROR``, ``ERR``, ``WARN``,
``WARNING``, ``FATAL``, ``CRITICAL``, ``SEVERE``), found by one RE2 scan for those words and then
classified one by one, so severe counts and groups stay exact. The other levels' shares and the
most common message shapes come from a stated, evenly strided sample of lines.
"""

from __future__ import annotations

import io
import itertools
import re
from collections import Counter
from dataclasses import dataclass, field

import re2

from cargohold.projection._model import Builder, quote

_LEVEL = re.compile(r"\b(FATAL|CRITICAL|SEVERE|ERROR|ERR|WARNING|WARN|INFO|NOTICE|DEBUG|TRACE)\b")
_SEVERITY = {
    "FATAL": 0,
    "CRITICAL": 0,
    "SEVERE": 1,
    "ERROR": 1,
    "ERR": 1,
    "WARNING": 2,
    "WARN": 2,
}
_CANON = {"ERR": "ERROR", "WARNING": "WARN"}
_SEVERE_WORDS = re2.compile(rb"ERR|WARN|FATAL|CRIT|SEVERE")
"""Every severe level word contains one of these (``ERROR`` and ``ERR`` contain ``ERR``...)."""
_VARIABLE = re.compile(
    r"(?=[0-9a-fA-F-])(?:0x[0-9a-fA-F]+|[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}"
    r"|(?<![A-Za-z0-9])-?\d+(?:[.:/_-]\d+)*|\d+(?:[.:/_-]\d+)*|[0-9a-f]{12,})"
)
"""A number, an id or an address. The lookahead is the first byte every alternative needs:
checked first, it skips the other positions at a fraction of trying five alternatives
there (a third of a severe line's cost)."""
_STAMP = re.compile(
    r"^\s*\[?((?:\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?Z?)|(?:\d{6} \d{6})"
    r"|(?:\d{2}/\d{2}/\d{2,4} \d{2}:\d{2}:\d{2})|(?:[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2})"
    r"|(?:- \d{10}))"
)
_ISO = re.compile(r"(?<![\d-])(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?Z?)")
"""An ISO time anywhere near the start, for logs whose lines open with a file or host name."""
_GROUPS_MAX = 400
_EXACT_LINES = 4096
"""Bodies of up to this many lines are read line by line: every count is exact."""
_PREFIX = 1 << 20
_SAMPLE = 200
"""Lines sampled (evenly strided) for the other levels and the common messages."""
_SEVERE_MAX = 20_000
"""Severe lines classified one by one; past this many, the rest are left to grep (stated)."""
_COMMON_SHOWN = 8


def _stamp(line: str) -> str | None:
    match = _STAMP.match(line) or _ISO.search(line, 0, 120)
    return None if match is None else match.group(1)


@dataclass(slots=True)
class _Group:
    level: str
    first: int
    example: str
    lines: list[int] = field(default_factory=list)
    count: int = 0


@dataclass(slots=True)
class _Scan:
    """What the projector learnt of a log, and how (exactly, or over a sample)."""

    total: int = 0
    levels: Counter[str] = field(default_factory=Counter)
    """Lines by level: all levels when ``stride`` is 0, else the severe ones only."""
    sampled: Counter[str] = field(default_factory=Counter)
    """Lines by level in the sample (when ``stride`` > 0)."""
    sample_size: int = 0
    stride: int = 0
    groups: dict[tuple[str, str], _Group] = field(default_factory=dict)
    overflow: int = 0
    severe_until: int | None = None
    """The last line read for severe levels when the scan stopped early, else ``None``."""
    first_stamp: str | None = None
    last_stamp: str | None = None
    tail: list[tuple[int, str]] = field(default_factory=list)
    common: list[tuple[float, int, str]] = field(default_factory=list)
    common_scope: str = "all lines"


def _level(line: str) -> tuple[str, int] | None:
    match = _LEVEL.search(line, 0, 160)
    if match is None:
        return None
    return _CANON.get(match.group(1), match.group(1)), match.end()


def _group(scan: _Scan, level: str, end: int, line: str, number: int) -> None:
    key = (level, _VARIABLE.sub("#", line[end:])[:240])
    group = scan.groups.get(key)
    if group is None:
        if len(scan.groups) >= _GROUPS_MAX:
            scan.overflow += 1
            return
        group = scan.groups[key] = _Group(level, number, line)
    group.count += 1
    if len(group.lines) < 4:
        group.lines.append(number)


def _shape(line: str) -> tuple[str, str]:
    """A line's level (``""`` if none) and its message with numbers, ids and addresses as ``#``.

    The level is part of the key: the same words at ``ERROR`` and at ``INFO`` are two messages,
    and each group is quoted by a line of its own level (grouped as one, 20,000 INFO lines and
    5 ERROR lines read "100%" next to an ERROR line).
    """
    found = _level(line)
    if found is None:
        return "", _VARIABLE.sub("#", line)[:240]
    return found[0], _VARIABLE.sub("#", line[found[1] :])[:240]


def _common(scan: _Scan, numbered: list[tuple[int, str]]) -> None:
    """The most frequent message shapes over ``numbered`` lines: (share, first line, line)."""
    counts: Counter[tuple[str, str]] = Counter()
    first: dict[tuple[str, str], tuple[int, str]] = {}
    total = 0
    for number, line in numbered:
        key = _shape(line)
        if not key[1].strip("# "):
            continue
        total += 1
        counts[key] += 1
        first.setdefault(key, (number, line))
    scan.common = [
        (n / total, *first[key]) for key, n in counts.most_common(_COMMON_SHOWN) if n > 1
    ]


def _exact(data: bytes) -> _Scan:
    """Every line read: every count exact."""
    scan = _Scan()
    lines = data.decode("utf-8", "replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    scan.total = len(lines)
    for number, line in enumerate(lines, 1):
        found = _level(line)
        if found is not None:
            level, end = found
            scan.levels[level] += 1
            if _SEVERITY.get(level, 9) <= 2:
                _group(scan, level, end, line, number)
        if scan.first_stamp is None:
            scan.first_stamp = _stamp(line)
    _ends(scan, lines, 0)
    step = -(-len(lines) // 1000) or 1
    numbered = [(n + 1, lines[n]) for n in range(0, len(lines), step)]
    _common(scan, numbered)
    scan.common_scope = "all lines" if step == 1 else f"an even sample of {len(numbered):,} lines"
    return scan


def _fast(data: bytes) -> _Scan:
    """C-speed passes for what must be exact; a stated sample for the rest.

    The body is never split into lines: the severe scan counts the newlines before each hit
    (and the rest after the last), the sampled lines come from one strided ``islice`` over the
    body's lines (C, one line object at a time) and the last lines from ``rfind``.
    """
    scan = _Scan()
    # Every line naming a severe level: one RE2 scan, each hit's line classified exactly.
    pos = last = 0
    number = 1
    seen = 0
    while True:
        match = _SEVERE_WORDS.search(data, pos)
        if match is None:
            break
        start = data.rfind(b"\n", 0, match.start()) + 1
        end = data.find(b"\n", match.start())
        end = len(data) if end < 0 else end
        number += data.count(b"\n", last, start)
        last = start
        seen += 1
        if seen > _SEVERE_MAX:
            scan.severe_until = number - 1
            break
        line = data[start:end].decode("utf-8", "replace").removesuffix("\r")
        found = _level(line)
        if found is not None and _SEVERITY.get(found[0], 9) <= 2:
            scan.levels[found[0]] += 1
            _group(scan, found[0], found[1], line, number)
        pos = end + 1
        if pos >= len(data):
            break
    newlines = number - 1 + data.count(b"\n", last)
    scan.total = total = newlines + (0 if data.endswith(b"\n") or not data else 1)
    stride = max(1, -(-total // _SAMPLE))
    # The lines the body's ``split`` would give (``\r`` kept, the newline not), every
    # ``stride``-th from the first.
    sampled = itertools.islice(io.BytesIO(data), 0, None, stride)
    sample = [
        (n * stride + 1, line.removesuffix(b"\n").decode("utf-8", "replace"))
        for n, line in enumerate(sampled)
    ]
    head = [
        line.removesuffix(b"\n").decode("utf-8", "replace")
        for line in itertools.islice(io.BytesIO(data), 50)
    ]
    tail_start = max(0, total - 50)
    tail: list[str] = []
    end = len(data) - 1 if data.endswith(b"\n") else len(data)
    for _ in range(total - tail_start):
        start = data.rfind(b"\n", 0, end) + 1
        tail.append(data[start:end].decode("utf-8", "replace"))
        end = start - 1
    tail.reverse()
    scan.stride, scan.sample_size = stride, len(sample)
    for _, line in sample:
        found = _level(line)
        if found is not None:
            scan.sampled[found[0]] += 1
    _common(scan, sample)
    scan.common_scope = (
        "all lines" if stride == 1 else f"an even sample of {len(sample):,} lines, 1 in {stride:,}"
    )
    for line in head:
        scan.first_stamp = _stamp(line)
        if scan.first_stamp:
            break
    _ends(scan, tail, tail_start)
    return scan


def _ends(scan: _Scan, tail: list[str], offset: int) -> None:
    """The last time stamp among the last lines, and the last four lines."""
    for line in reversed(tail[-50:]):
        scan.last_stamp = _stamp(line)
        if scan.last_stamp:
            break
    count = min(4, len(tail))
    scan.tail = [(offset + len(tail) - k + 1, tail[-k]) for k in range(count, 0, -1)]


def project_log(data: bytes, budget: int) -> str:
    """A preview of a log within ``budget`` bytes."""
    # The first MiB's newlines settle most bodies: a long log is not counted twice.
    newlines = data.count(b"\n", 0, _PREFIX)
    if newlines < _EXACT_LINES and len(data) > _PREFIX:
        newlines += data.count(b"\n", _PREFIX)
    scan = _exact(data) if newlines < _EXACT_LINES else _fast(data)
    out = Builder(budget)
    tail = ["tail:", *(f"  {n}: {quote(t.removesuffix(chr(13)), 200)}" for n, t in scan.tail)]
    reserve = sum(len(t.encode()) + 1 for t in tail) + 120
    out.add_cut(f"log: {scan.total:,} lines; levels: {_levels(scan)}", reserve=reserve)
    if scan.first_stamp or scan.last_stamp:
        out.add_cut(f"time: {scan.first_stamp or '?'} .. {scan.last_stamp or '?'}", reserve=reserve)
    ordered = sorted(scan.groups.values(), key=lambda g: (_SEVERITY.get(g.level, 9), g.first))
    if ordered:
        out.add(
            f"errors and warnings: {sum(g.count for g in ordered):,} lines in {len(ordered):,} "
            f"distinct message{'s' if len(ordered) != 1 else ''} (first occurrence verbatim; "
            "repeats differ only in numbers):",
            reserve=reserve,
        )
    if scan.severe_until is not None:
        out.add_cut(
            f"  (severe lines read up to line {scan.severe_until:,}: the first "
            f"{_SEVERE_MAX:,}; grep for the rest)",
            reserve=reserve,
        )
    shown = 0
    for group in ordered:
        where = ", ".join(str(n) for n in group.lines)
        if group.count > len(group.lines):
            where += ", ..."
        times = f" x{group.count:,}" if group.count > 1 else ""
        example = quote(group.example.removesuffix("\r"), 220)
        entry = f"  {group.level}{times} line {where}: {example}"
        if not out.add(entry, reserve=reserve):
            break
        shown += 1
    hidden = ordered[shown:]
    if hidden or scan.overflow:
        by_level: Counter[str] = Counter()
        for group in hidden:
            by_level[group.level] += group.count
        summary = ", ".join(f"{name} {n:,} lines" for name, n in by_level.most_common())
        extra = f"; {scan.overflow:,} more lines past {_GROUPS_MAX} groups" if scan.overflow else ""
        out.add_cut(
            f"  ... {len(hidden):,} more distinct messages not shown ({summary}){extra}; "
            "use grep for them",
            reserve=sum(len(t.encode()) + 1 for t in tail),
        )
    if scan.common and out.room > 600:
        reserve_tail = sum(len(t.encode()) + 1 for t in tail)
        if out.add(
            f"most common messages ({scan.common_scope}; share, first line; numbers vary):",
            reserve=reserve_tail + 200,
        ):
            for share, first, example in scan.common:
                entry = (
                    f"  {_share(share)} line {first}: {quote(example.removesuffix(chr(13)), 200)}"
                )
                if not out.add(entry, reserve=reserve_tail):
                    break
    out.add_all(tail)
    return out.text()


def _share(share: float) -> str:
    """A share in whole percent that never rounds a part to all or to nothing."""
    if 0 < share < 0.005:
        return "<1%"
    if 0.995 <= share < 1:
        return ">99%"
    return f"{share:.0%}"


def _levels(scan: _Scan) -> str:
    """``INFO 1,998, ERROR 2``; over a sample: the severe counts exact, the rest as shares."""
    if not scan.stride:
        counted = ", ".join(f"{name} {n:,}" for name, n in scan.levels.most_common())
        return counted or "none found"
    severe = ", ".join(f"{name} {n:,}" for name, n in scan.levels.most_common())
    others = [(name, n) for name, n in scan.sampled.most_common() if _SEVERITY.get(name, 9) > 2]
    shares = ", ".join(f"{name} ~{100 * n / scan.sample_size:.0f}%" for name, n in others)
    parts = [f"{severe or 'no ERROR, WARN, FATAL, CRITICAL or SEVERE'} (every line read)"]
    if shares:
        parts.append(
            f"{shares} (of an even sample of {scan.sample_size:,} lines: every "
            f"{scan.stride:,}th from line 1)"
        )
    return "; ".join(parts)
