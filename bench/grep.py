"""Grep on a big artifact: ``python -m bench.grep [--quick] [--markdown FILE]``.

The case the audit of issue 15 found: a 16 MiB artifact of 8,388,608 lines (one character and a
newline each: digits, and an ``E`` on every 1,000th line). Before the fix, ``Rehydrator.grep``
decoded the whole body and split it into a list of lines, then searched each line from Python: 13
to 32 s and 741 MB (46x the body) on that case. Now RE2 scans the body's bytes and Python runs
once per matching line shown, and once per run of consecutive matching lines counted.

Each pattern is timed as a whole ``Rehydrator.grep`` on a memory store (verified read, scan,
answer) against the same verified read followed by the plainest re2 scan of its bytes:
``finditer`` over them, counting the matches (for a pattern that matches nothing, one pass of RE2
in C). Their ratio is what stays comparable across machines; the design asks for a few times at
most. A first row shows what the read alone costs (SHA-256 of 16 MiB) against one such pass. The
patterns go from no line to every other line, the worst case for runs (one run per matching line).

Peak memory is the resident-set growth of a fresh process during one grep (so RE2's own native
memory counts), as a multiple of the body: the design asks for at most twice the body.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import re2

from bench._util import Case, MiB, Row, interleave, report, scratch_dir
from bench.store import Config
from cargohold import MemoryStore, Ref, Rehydrator, Scope, ScopedStore

LINES = 8 * MiB
"""Lines of the artifact: 8,388,608 of two bytes each, 16 MiB."""

PATTERNS = (
    ("x", "no line"),
    ("E", "1 line in 1,000"),
    ("7", "1 line in 10"),
    ("[0-9]", "999 lines in 1,000"),
    ("[02468]", "every other line"),
)
QUICK = ("x", "E", "7", "[0-9]")
TIME_TARGET = 3.0
MEMORY_TARGET = 2.0
BEFORE = "13-32 s and 741 MB (46x the body), measured by the audit of issue 15"


def body() -> bytes:
    """The artifact: a digit per line, an ``E`` on lines 1,000, 2,000, ..."""
    data = bytearray(b"\n" * (2 * LINES))
    data[0::2] = (b"0123456789" * (LINES // 10 + 1))[:LINES]
    every = data[2 * 999 :: 2 * 1000]
    data[2 * 999 :: 2 * 1000] = b"E" * len(every)
    return bytes(data)


def _regex(pattern: str) -> re2._Regexp[str]:
    options = re2.Options()
    options.log_errors = False
    return re2.compile(pattern, options)


def re2_count(regex: re2._Regexp[str], data: bytes) -> int:
    """The baseline: every match of ``regex`` in ``data``, counted."""
    return sum(1 for _ in regex.finditer(data))


def _matching_lines(answer: str | None) -> int:
    footer = (answer or "").rsplit("[", 1)[-1]
    return int(footer.split()[0])


def _reader(data: bytes) -> tuple[Rehydrator, ScopedStore, Ref]:
    scoped = ScopedStore(MemoryStore(), Scope("bench", "grep", "8m-lines"))
    return Rehydrator(scoped), scoped, scoped.put(data, media_type="text/plain").ref


def _peak_child(pattern: str) -> int:
    """In a fresh process: the resident-set growth during one grep (``--peak``)."""
    data = body()
    reader, _, ref = _reader(data)
    gc.collect()
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # reset the peak (VmHWM) to the current resident size
    before = _status("VmRSS")
    reader.grep(ref, pattern)
    return _status("VmHWM") - before


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _peak(pattern: str) -> int:
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-m", "bench.grep", "--peak", pattern],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        cwd=root,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])},
    )
    return int(json.loads(done.stdout)["peak"])


def bench_grep(root: Path, cfg: Config) -> list[Row]:
    """The ``grep`` section: time against a re2 scan, and peak memory against the body."""
    del root  # a memory store: nothing touches the disk
    data = body()
    reader, scoped, ref = _reader(data)
    chosen = [(p, label) for p, label in PATTERNS if not cfg.quick or p in QUICK]
    cases = [Case("read", lambda _: scoped.read(ref)), Case("re2 x", _re2_run(_regex("x"), data))]
    for pattern, _ in chosen:
        regex = _regex(pattern)
        expected = re2_count(regex, data)  # one character a line: matches are matching lines
        got = _matching_lines(reader.grep(ref, pattern).content)
        if got != expected:
            raise SystemExit(f"bench.grep: {pattern!r} counted {got} lines, re2 {expected}")
        cases.append(Case(f"grep {pattern}", _grep_run(reader, ref, pattern)))
        cases.append(Case(f"read+re2 {pattern}", _read_re2_run(scoped, ref, regex)))
    times = interleave(cases, repeat=1 if cfg.quick else 3, warmup=0 if cfg.quick else 1)
    rows = [
        Row(
            "grep",
            "verified read of the artifact (part of every grep)",
            len(data),
            times["read"],
            "re2 finditer 'x' (one pass)",
            times["re2 x"],
        )
    ]
    for pattern, label in chosen:
        rows.append(
            Row(
                "grep",
                f"grep {pattern!r} on 8M lines ({label})",
                len(data),
                times[f"grep {pattern}"],
                "read + re2 finditer, count",
                times[f"read+re2 {pattern}"],
                TIME_TARGET,
            )
        )
    for pattern, label in chosen:
        # value and baseline in the same unit (MB): a ratio to the body, as for projections
        rows.append(
            Row(
                "grep",
                f"peak memory, grep {pattern!r} ({label})",
                len(data),
                _peak(pattern) / 1e6,
                "body size (MB)",
                len(data) / 1e6,
                MEMORY_TARGET,
            )
        )
    return rows


def _grep_run(reader: Rehydrator, ref: Ref, pattern: str) -> Callable[[int], object]:
    return lambda _: reader.grep(ref, pattern)


def _re2_run(regex: re2._Regexp[str], data: bytes) -> Callable[[int], object]:
    return lambda _: re2_count(regex, data)


def _read_re2_run(
    scoped: ScopedStore, ref: Ref, regex: re2._Regexp[str]
) -> Callable[[int], object]:
    def run(_: int) -> int:
        data = scoped.read(ref).data
        assert data is not None
        return re2_count(regex, data)

    return run


SECTIONS: dict[str, Callable[[Path, Config], list[Row]]] = {"grep": bench_grep}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.grep", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="one timed run each, without the worst case"
    )
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    parser.add_argument("--peak", metavar="PATTERN", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.peak:
        print(json.dumps({"peak": _peak_child(args.peak)}))
        return 0

    from bench._util import machine

    info = machine()
    info["load average"] = " ".join(f"{load:.2f}" for load in os.getloadavg())
    for key, value in info.items():
        print(f"{key:>14}: {value}")
    print()
    began = time.perf_counter()
    with scratch_dir() as root:
        rows = bench_grep(root / "grep", Config(quick=args.quick))
    took = time.perf_counter() - began
    after = " ".join(f"{load:.2f}" for load in os.getloadavg())
    summary = [
        f"before the fix: {BEFORE}",
        f"load average at the end: {after}",
    ]
    report(
        "python -m bench.grep",
        rows,
        took=took,
        quick=args.quick,
        markdown=args.markdown,
        summary=summary,
        info=info,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
