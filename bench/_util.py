"""Timing, scratch directories and the result table shared by the benchmarks.

Every figure is a median over repeated runs, and every ratio divides it by a baseline measured in
the same run, interleaved with it, so that a busy neighbour on the machine slows both sides alike.
"""

from __future__ import annotations

import contextlib
import os
import platform
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

KiB = 1024
MiB = 1024 * KiB


def size_label(size: int | None) -> str:
    """``1 KiB``, ``64 KiB``, ``16 MiB`` (or an empty cell)."""
    if size is None:
        return ""
    if size >= MiB and size % MiB == 0:
        return f"{size // MiB} MiB"
    if size >= KiB and size % KiB == 0:
        return f"{size // KiB} KiB"
    return f"{size} B"


def ms(value: float) -> str:
    """A duration in milliseconds with three significant figures."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


@dataclass(slots=True)
class Case:
    """One timed operation. ``prepare(i)`` runs untimed before ``run(i)`` on iteration ``i``."""

    name: str
    run: Callable[[int], object]
    prepare: Callable[[int], None] | None = None
    samples: list[float] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples) * 1000.0


def interleave(cases: list[Case], repeat: int, warmup: int = 1) -> dict[str, float]:
    """Run every case ``repeat`` times, alternating them, and return median milliseconds.

    The order is shuffled each round (seeded, so runs are comparable) so that no case always runs
    right after the same other case, whose disk flush or cache footprint it would inherit.
    """
    rng = random.Random(len(cases) * 1_000_003 + repeat)
    order = list(cases)
    for round_ in range(warmup + repeat):
        rng.shuffle(order)
        for case in order:
            index = round_
            if case.prepare is not None:
                case.prepare(index)
            begin = time.perf_counter()
            case.run(index)
            elapsed = time.perf_counter() - begin
            if round_ >= warmup:
                case.samples.append(elapsed)
    return {case.name: case.median_ms for case in cases}


def time_once(func: Callable[[], object]) -> float:
    """Milliseconds one call takes."""
    begin = time.perf_counter()
    func()
    return (time.perf_counter() - begin) * 1000.0


def distinct(base: bytes, index: int, tag: int = 0) -> bytes:
    """``base`` with its first 16 bytes replaced by ``(tag, index)``: distinct bytes per call."""
    head = tag.to_bytes(8, "big") + index.to_bytes(8, "big")
    return head + base[len(head) :] if len(base) >= len(head) else head[: len(base)]


def scratch_parent() -> Path:
    """A directory on the same filesystem as the default store (the XDG cache directory).

    ``/tmp`` when it shares that filesystem, else the cache directory's nearest existing ancestor,
    so fsync and rename cost what they cost for the real store.
    """
    from cargohold.store import default_root

    probe = default_root()
    while not probe.exists():
        probe = probe.parent
    tmp = Path(tempfile.gettempdir())
    if os.stat(tmp).st_dev == os.stat(probe).st_dev:
        return tmp
    return probe


@contextlib.contextmanager
def scratch_dir() -> Iterator[Path]:
    """A private temporary directory, removed afterwards whatever happens."""
    path = Path(tempfile.mkdtemp(prefix="cargohold-bench-", dir=scratch_parent()))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def fsync_skipped() -> Iterator[None]:
    """Make ``os.fsync`` a no-op, for populating large stores quickly. Never used while timing.

    The populated files and index rows are exactly those the store writes; only the durability
    of the set-up itself is waived. Everything is flushed (``os.sync``) before returning, so that
    no timed fsync pays for the set-up's writes (ext4 commits them with the next journal commit).
    """
    real = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = real
        os.sync()


def filesystem_of(path: Path) -> str:
    """The filesystem type ``path`` lives on (from ``/proc/mounts``), or ``unknown``."""
    best, kind = "", "unknown"
    resolved = str(path.resolve())
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and resolved.startswith(parts[1]) and len(parts[1]) > len(best):
                best, kind = parts[1], parts[2]
    return kind


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    import diskcache

    cpu = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cores (nproc)": str(len(os.sched_getaffinity(0))),
        "cpu": cpu,
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "diskcache": diskcache.__version__,
        "filesystem": f"{filesystem_of(scratch_parent())} ({scratch_parent()})",
    }


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the result table.

    ``ratio`` is ``value_ms / baseline_ms``; ``target`` is the largest ratio the design accepts,
    ``None`` where the row is shown for context only.
    """

    section: str
    case: str
    size: int | None
    value_ms: float
    baseline: str
    baseline_ms: float
    target: float | None = None

    @property
    def ratio(self) -> float:
        return self.value_ms / self.baseline_ms if self.baseline_ms > 0 else float("inf")

    @property
    def verdict(self) -> str:
        if self.target is None:
            return ""
        return "met" if self.ratio <= self.target else "MISSED"


_HEADERS = ("section", "case", "size", "ms", "baseline", "baseline ms", "ratio", "target", "")


def _ratio(row: Row) -> str:
    """Two decimals, or three where two would hide which side of its target a ratio is on."""
    text = f"{row.ratio:.2f}"
    if row.target is not None and float(text) == row.target and row.ratio != row.target:
        text = f"{row.ratio:.3f}"
    return text + "x"


def _cells(row: Row) -> tuple[str, ...]:
    return (
        row.section,
        row.case,
        size_label(row.size),
        ms(row.value_ms),
        row.baseline,
        ms(row.baseline_ms),
        _ratio(row),
        "" if row.target is None else f"<= {row.target:.2f}x",
        row.verdict,
    )


def text_table(rows: list[Row]) -> str:
    """The rows as an aligned plain-text table."""
    cells = [_HEADERS, *(_cells(row) for row in rows)]
    widths = [max(len(line[col]) for line in cells) for col in range(len(_HEADERS))]
    numeric = {3, 5, 6}
    lines = []
    for index, line in enumerate(cells):
        lines.append(
            "  ".join(
                cell.rjust(width) if col in numeric else cell.ljust(width)
                for col, (cell, width) in enumerate(zip(line, widths, strict=True))
            ).rstrip()
        )
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)


def markdown_table(rows: list[Row]) -> str:
    """The rows as a GitHub markdown table."""
    align = ("---", "---", "---:", "---:", "---", "---:", "---:", "---:", "---")
    lines = ["| " + " | ".join(_HEADERS) + " |", "| " + " | ".join(align) + " |"]
    lines.extend("| " + " | ".join(_cells(row)) + " |" for row in rows)
    return "\n".join(lines)


def report(
    command: str,
    rows: list[Row],
    *,
    took: float,
    quick: bool,
    markdown: str | None,
    summary: list[str] | None = None,
    info: dict[str, str] | None = None,
) -> None:
    """Print a bench's table (and summary lines), and write it as markdown when asked.

    Args:
        command: The command that produced it, without ``--quick``.
        rows: The measured rows.
        took: Seconds the whole run took.
        quick: Whether ``--quick`` was given.
        markdown: A file to write the markdown to, ``"-"`` for stdout, ``None`` for none.
        summary: Verdict lines printed under the table.
        info: The machine's facts (``machine()`` when omitted).
    """
    lines = summary or []
    facts = machine() if info is None else info
    print(text_table(rows))
    if lines:
        print()
        print("\n".join(lines))
    print(f"\nmedians in milliseconds; whole run {took:.0f} s{' (--quick)' if quick else ''}")
    if not markdown:
        return
    command += " --quick" if quick else ""
    text = "\n".join(
        [
            f"Command: `{command}` ({took:.0f} s)",
            "",
            *(f"- {key}: {value}" for key, value in facts.items()),
            "",
            markdown_table(rows),
            "",
            *(f"- {line}" for line in lines),
            *([""] if lines else []),
        ]
    )
    if markdown == "-":
        print()
        print(text)
    else:
        Path(markdown).write_text(text, encoding="utf-8")
