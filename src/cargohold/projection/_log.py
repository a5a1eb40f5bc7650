"""The log projector: counts by level, time span, every distinct error and warning, the tail.

Errors and warnings are shown verbatim (their first occurrence, with line numbers), grouped when
they repeat with only numbers, ids or addresses changing, so a 20,000-line log with one real
failure shows that failure, and a log with a thousand identical timeouts shows one line and its
count.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from cargohold.projection._model import Builder, clip

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
_VARIABLE = re.compile(
    r"0x[0-9a-fA-F]+|[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}"
    r"|(?<![A-Za-z0-9])-?\d+(?:[.:/_-]\d+)*|\d+(?:[.:/_-]\d+)*|[0-9a-f]{12,}"
)
_STAMP = re.compile(
    r"^\s*\[?((?:\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?Z?)|(?:\d{6} \d{6})"
    r"|(?:\d{2}/\d{2}/\d{2,4} \d{2}:\d{2}:\d{2})|(?:[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2})"
    r"|(?:- \d{10}))"
)
_ISO = re.compile(r"(?<![\d-])(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?Z?)")
"""An ISO time anywhere near the start, for logs whose lines open with a file or host name."""
_GROUPS_MAX = 400


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


def _level(line: str) -> str | None:
    match = _LEVEL.search(line, 0, 160)
    if match is None:
        return None
    return _CANON.get(match.group(1), match.group(1))


def project_log(text: str, budget: int) -> str:
    """A preview of a log within ``budget`` bytes."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    levels: Counter[str] = Counter()
    groups: dict[tuple[str, str], _Group] = {}
    overflow = 0
    first_stamp = last_stamp = None
    for number, line in enumerate(lines, 1):
        level = _level(line)
        if level is not None:
            levels[level] += 1
            if _SEVERITY.get(level, 9) <= 2:
                body = line[_LEVEL.search(line, 0, 160).end() :]  # type: ignore[union-attr]
                key = (level, _VARIABLE.sub("#", body)[:240])
                group = groups.get(key)
                if group is None:
                    if len(groups) >= _GROUPS_MAX:
                        overflow += 1
                        continue
                    group = groups[key] = _Group(level, number, line)
                group.count += 1
                if len(group.lines) < 4:
                    group.lines.append(number)
        if first_stamp is None:
            first_stamp = _stamp(line)
    for line in reversed(lines[-50:]):
        last_stamp = _stamp(line)
        if last_stamp:
            break

    out = Builder(budget)
    tail_lines = [
        f"{len(lines) - k + 1}: {clip(lines[-k], 200)}" for k in range(min(4, len(lines)), 0, -1)
    ]
    tail = ["tail:", *(f"  {t}" for t in tail_lines)]
    reserve = sum(len(t.encode()) + 1 for t in tail) + 120
    counted = ", ".join(f"{name} {n:,}" for name, n in levels.most_common())
    out.add_cut(f"log: {len(lines):,} lines; levels: {counted or 'none found'}", reserve=reserve)
    if first_stamp or last_stamp:
        out.add_cut(f"time: {first_stamp or '?'} .. {last_stamp or '?'}", reserve=reserve)
    ordered = sorted(groups.values(), key=lambda g: (_SEVERITY.get(g.level, 9), g.first))
    if ordered:
        out.add(
            f"errors and warnings: {sum(g.count for g in ordered):,} lines in {len(ordered):,} "
            f"distinct message{'s' if len(ordered) != 1 else ''} (first occurrence verbatim; "
            "# marks varying numbers):",
            reserve=reserve,
        )
    shown = 0
    for group in ordered:
        where = ", ".join(str(n) for n in group.lines)
        if group.count > len(group.lines):
            where += ", ..."
        times = f" x{group.count:,}" if group.count > 1 else ""
        entry = f"  {group.level}{times} line {where}: {clip(group.example, 220)}"
        if not out.add(entry, reserve=reserve):
            break
        shown += 1
    hidden = ordered[shown:]
    if hidden or overflow:
        by_level: Counter[str] = Counter()
        for group in hidden:
            by_level[group.level] += group.count
        summary = ", ".join(f"{name} {n:,} lines" for name, n in by_level.most_common())
        extra = f"; {overflow:,} more lines past {_GROUPS_MAX} groups" if overflow else ""
        out.add_cut(
            f"  ... {len(hidden):,} more distinct messages not shown ({summary}){extra}; "
            "use grep for them",
            reserve=sum(len(t.encode()) + 1 for t in tail),
        )
    common, looked_at = _common_messages(lines) if out.room > 600 else ([], 0)
    if common:
        reserve_tail = sum(len(t.encode()) + 1 for t in tail)
        sampled = looked_at < len(lines)
        scope = f"an even sample of {looked_at:,} lines" if sampled else "all lines"
        if out.add(
            f"most common messages ({scope}; share, first line, # marks varying numbers):",
            reserve=reserve_tail + 200,
        ):
            for share, first, example in common:
                entry = f"  {share:.0%} line {first}: {clip(example, 200)}"
                if not out.add(entry, reserve=reserve_tail):
                    break
    out.add_all(tail)
    return out.text()


_COMMON_SAMPLE = 1_000
_COMMON_SHOWN = 8


def _common_messages(lines: list[str]) -> tuple[list[tuple[float, int, str]], int]:
    """The most frequent message shapes, (share, first line number, that line), most first;
    and how many lines were looked at.

    A shape is the text after the level (or the whole line) with numbers, ids and addresses
    folded; counted over every line, or an even sample of 1,000 in longer logs (folding costs
    a few microseconds a line: a sample keeps a 16 MiB log's preview well under a second).
    """
    if not lines:
        return [], 0
    step = -(-len(lines) // _COMMON_SAMPLE)
    counts: Counter[str] = Counter()
    first: dict[str, int] = {}
    total = looked_at = 0
    for index in range(0, len(lines), step):
        looked_at += 1
        line = lines[index]
        match = _LEVEL.search(line, 0, 160)
        body = line[match.end() :] if match else line
        shape = _VARIABLE.sub("#", body)[:240]
        if not shape.strip("# "):
            continue
        total += 1
        counts[shape] += 1
        first.setdefault(shape, index + 1)
    picked = [(n / total, first[shape]) for shape, n in counts.most_common(_COMMON_SHOWN) if n > 1]
    return [(share, number, lines[number - 1]) for share, number in picked], looked_at
