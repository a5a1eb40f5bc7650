"""Front-door benchmark: ``python -m bench.front_door [--quick] [--markdown FILE]``.

Also the ``front_door`` section of ``python -m bench``. Everything goes through
``cargohold.open()`` and the :class:`~cargohold.Hold` it returns.

- **throughput**: N offloads of distinct ~40 KiB logs (each one offloaded: over the 32 KiB heavy
  threshold), a synchronous loop of ``Hold.offload`` against ``asyncio.gather`` of
  ``Hold.aoffload`` with at most 64 in flight, on a local store and on ``memory://``. Each
  batch gets a fresh, empty store (untimed); the figure is the batch's wall time divided by N, so
  the ratio async/sync of the table is sync throughput over async throughput (below 1: async is
  faster). The standalone run also prints offloads per second.
- **stall**: during each async batch a ticker task sleeps 1 ms in a loop and records its worst
  lateness: the longest the event loop was kept from running. Baseline: the same ticker on an idle
  loop, for the same time, in the same run.
- **cold start**: in fresh processes (``memory://``, a ticker running), the first ``aoffload``
  of a cold process (it loads the tokenizer, about a second, on the worker pool) against the first
  ``aoffload`` after ``await hold.awarmup()``; with the worst stall of each, and what
  ``awarmup`` itself takes and stalls.

The async batch pays for its ticker (a wake-up per millisecond); the sync loop has none.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench._util import Case, KiB, Row, interleave, ms, report, scratch_dir

# Only the standard library and bench._util at module level: the cold-start child runs this module
# and must import cargohold itself, cold.
if TYPE_CHECKING:
    from bench.store import Config
    from cargohold import Hold

ROOT = Path(__file__).resolve().parents[1]
BODY = 40 * KiB
THRESHOLD = 32 * KiB
IN_FLIGHT = 64
TICK = 0.001
STALL_BOUND_MS = 50.0
"""The issue's bound on an event-loop stall (asyncio debug mode's slow-callback report)."""


class Ticker:
    """Sleeps ``TICK`` in a loop on the running event loop and keeps its worst lateness."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.ticks = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(TICK)
            late = time.perf_counter() - before - TICK
            self.ticks += 1
            self.worst = max(self.worst, late)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def reset(self) -> float:
        """The worst lateness so far in milliseconds; starts a new window."""
        worst, self.worst = self.worst, 0.0
        return worst * 1000.0

    async def stop(self) -> float:
        """Stop ticking; the worst lateness of the last window in milliseconds."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        return self.reset()


def _bodies(count: int, tag: str) -> list[str]:
    """``count`` distinct ~40 KiB logs: eight base logs, each body with a header of its own."""
    from bench.decisions import _log

    bases = [_log(BODY - 64, seed) for seed in range(8)]
    return [f"# batch {tag} call {i}\n" + bases[i % len(bases)] for i in range(count)]


def _open(kind: str, root: Path, session: str) -> Hold:
    """A hold on a fresh, empty store (quotas raised: a batch stores more than a session may)."""
    import cargohold
    from bench.store import UNLIMITED
    from cargohold.store import LocalStore, MemoryStore

    if kind == "local":
        shutil.rmtree(root, ignore_errors=True)
        backend: Any = LocalStore(root, limits=UNLIMITED)
    else:
        backend = MemoryStore(limits=UNLIMITED)
    # Explicit settings, so no CARGOHOLD_* variable or configuration file changes the work.
    return cargohold.open(
        backend,
        tenant="bench",
        user="u",
        session=session,
        threshold=THRESHOLD,
        tool_thresholds={},
        budget="balanced",
    )


def _close(hold: Hold) -> None:
    """Close the hold and the store it was given (a hold leaves a store it did not open open)."""
    hold.close()
    hold.store.store.close()


def _check(results: list[Any]) -> None:
    outcomes = {result.outcome.value for result in results}
    if outcomes != {"offloaded"}:
        raise RuntimeError(f"front_door: expected every body offloaded, got {outcomes}")


def _sync_batch(hold: Hold, bodies: list[str]) -> None:
    _check([hold.offload(body, tool="fetch_logs", media_type="text/plain") for body in bodies])


async def _async_batch(hold: Hold, bodies: list[str]) -> float:
    """Offload ``bodies`` with at most ``IN_FLIGHT`` awaiting; the worst stall in ms."""
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(body: str) -> Any:
        async with gate:
            return await hold.aoffload(body, tool="fetch_logs", media_type="text/plain")

    ticker = Ticker()
    ticker.start()
    try:
        results = await asyncio.gather(*(one(body) for body in bodies))
    finally:
        stall = await ticker.stop()
    _check(list(results))
    return stall


async def _idle(seconds: float) -> float:
    ticker = Ticker()
    ticker.start()
    await asyncio.sleep(seconds)
    return await ticker.stop()


def bench_throughput(root: Path, cfg: Config) -> list[Row]:
    """Sync against async offload throughput, and the worst stall of the async runs."""
    count = 100 if cfg.quick else 500
    repeat = 1 if cfg.quick else 5
    rows: list[Row] = []
    for kind in ("local", "memory"):
        holds: dict[str, Hold] = {}
        bodies: dict[str, list[str]] = {}
        stalls: list[tuple[int, float]] = []

        def prepare(
            index: int,
            mode: str,
            kind: str = kind,
            holds: dict[str, Hold] = holds,
            bodies: dict[str, list[str]] = bodies,
        ) -> None:
            old = holds.pop(mode, None)
            if old is not None:
                _close(old)
            holds[mode] = _open(kind, root / kind / mode, f"{mode}-{index}")
            bodies[mode] = _bodies(count, f"{kind}-{mode}-{index}")

        def run_sync(
            index: int, holds: dict[str, Hold] = holds, bodies: dict[str, list[str]] = bodies
        ) -> None:
            _sync_batch(holds["sync"], bodies["sync"])

        def run_async(
            index: int,
            holds: dict[str, Hold] = holds,
            bodies: dict[str, list[str]] = bodies,
            stalls: list[tuple[int, float]] = stalls,
        ) -> None:
            stalls.append((index, asyncio.run(_async_batch(holds["async"], bodies["async"]))))

        medians = interleave(
            [
                Case("sync", run_sync, functools.partial(prepare, mode="sync")),
                Case("async", run_async, functools.partial(prepare, mode="async")),
            ],
            repeat,
        )
        for hold in holds.values():
            _close(hold)
        shutil.rmtree(root / kind, ignore_errors=True)
        per_sync = medians["sync"] / count
        per_async = medians["async"] / count
        store = "local store" if kind == "local" else "memory://"
        rows.append(
            Row(
                "front_door",
                f"aoffload x{count}, {IN_FLIGHT} in flight, {store} (per offload)",
                BODY,
                per_async,
                "offload loop (per offload)",
                per_sync,
            )
        )
        # The warm-up round is not counted (it also loads the tokenizer).
        worst = max(stall for index, stall in stalls if index >= 1)
        idle = asyncio.run(_idle(min(medians["async"] / 1000.0, 5.0)))
        rows.append(
            Row(
                "front_door",
                f"worst event-loop stall during the aoffloads, {store}",
                None,
                worst,
                "worst lateness, idle loop",
                idle,
            )
        )
    return rows


# -- cold start, in fresh processes -----------------------------------------------------------


def _cold_child(mode: str) -> dict[str, float]:
    """In a fresh process: the first aoffload, cold or after awarmup, with a ticker running."""
    lines: list[str] = []
    size = n = 0
    while size < BODY:
        n += 1
        lines.append(
            f"2026-11-29T02:{n // 60 % 60:02d}:{n % 60:02d}Z INFO [worker-{n % 8}] "
            f"billing.charge invoice=INV-{n:07d} latency_ms={n * 37 % 900}\n"
        )
        size += len(lines[-1])
    body = "".join(lines)

    async def main() -> dict[str, float]:
        began = time.perf_counter()
        import cargohold

        hold = cargohold.open(
            "memory://", tenant="bench", user="u", session="cold", threshold=THRESHOLD
        )
        out = {"import_open_ms": (time.perf_counter() - began) * 1000.0}
        ticker = Ticker()
        ticker.start()
        await asyncio.sleep(0.05)  # the ticker's own start
        ticker.reset()
        if mode == "warm":
            began = time.perf_counter()
            await hold.awarmup()
            out["awarmup_ms"] = (time.perf_counter() - began) * 1000.0
            out["awarmup_stall_ms"] = ticker.reset()
        began = time.perf_counter()
        result = await hold.aoffload(body, tool="fetch_logs", media_type="text/plain")
        out["first_ms"] = (time.perf_counter() - began) * 1000.0
        out["first_stall_ms"] = await ticker.stop()
        if result.outcome.value != "offloaded":
            raise RuntimeError(f"front_door: cold offload was {result.outcome.value}")
        await hold.aclose()
        return out

    return asyncio.run(main())


def _spawn_cold(mode: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGOHOLD_")}
    done = subprocess.run(
        [sys.executable, "-m", "bench.front_door", "--cold-child", mode],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"front_door cold child exited {done.returncode}: {done.stderr[-600:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def bench_cold(root: Path, cfg: Config) -> list[Row]:
    """The first aoffload of a fresh process, cold or after awarmup, and their stalls."""
    del root
    repeat = 2 if cfg.quick else 7
    runs: dict[str, list[dict[str, float]]] = {"cold": [], "warm": []}
    for round_ in range(repeat):
        for mode in ("cold", "warm") if round_ % 2 == 0 else ("warm", "cold"):
            runs[mode].append(_spawn_cold(mode))

    def median(mode: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[mode])

    return [
        Row(
            "front_door",
            "first aoffload in a fresh process, cold",
            BODY,
            median("cold", "first_ms"),
            "first aoffload after awarmup",
            median("warm", "first_ms"),
        ),
        Row(
            "front_door",
            "worst stall during the first aoffload, cold",
            None,
            median("cold", "first_stall_ms"),
            "the same after awarmup",
            median("warm", "first_stall_ms"),
        ),
        Row(
            "front_door",
            "awarmup (loads the tokenizer)",
            None,
            median("warm", "awarmup_ms"),
            "first aoffload, cold",
            median("cold", "first_ms"),
        ),
        Row(
            "front_door",
            "worst stall during awarmup",
            None,
            median("warm", "awarmup_stall_ms"),
            "during the first aoffload, cold",
            median("cold", "first_stall_ms"),
        ),
    ]


def bench_front_door(root: Path, cfg: Config) -> list[Row]:
    """The ``front_door`` section: throughput and stalls, then the cold start."""
    return bench_throughput(root, cfg) + bench_cold(root, cfg)


SECTIONS: dict[str, Callable[[Path, Config], list[Row]]] = {"front_door": bench_front_door}


def _summary(rows: list[Row]) -> list[str]:
    """Offloads per second, and each stall against the issue's bound."""
    lines = []
    for row in rows:
        if row.case.startswith("aoffload x"):
            sync, async_ = 1000.0 / row.baseline_ms, 1000.0 / row.value_ms
            store = row.case.rsplit(", ", 1)[1].removesuffix(" (per offload)")
            lines.append(
                f"{store}: sync {sync:,.0f} offloads/s, async {async_:,.0f} offloads/s, "
                f"async/sync {async_ / sync:.2f}x"
            )
        elif "stall" in row.case and not row.case.endswith("awarmup"):
            verdict = "met" if row.value_ms <= STALL_BOUND_MS else "MISSED"
            lines.append(
                f"{row.case}: {ms(row.value_ms)} ms (bound {STALL_BOUND_MS:.0f} ms: {verdict})"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.front_door", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="100 offloads a batch, one round, two cold starts"
    )
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    parser.add_argument("--cold-child", choices=("cold", "warm"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.cold_child:
        print(json.dumps(_cold_child(args.cold_child)))
        return 0

    from bench._util import machine
    from bench.store import Config

    info = machine()
    for key, value in info.items():
        print(f"{key:>14}: {value}")
    print()
    began = time.perf_counter()
    with scratch_dir() as root:
        rows = bench_front_door(root / "front_door", Config(quick=args.quick))
    took = time.perf_counter() - began
    summary = _summary(rows)
    report(
        "python -m bench.front_door",
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
