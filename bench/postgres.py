"""PostgreSQL backend benchmark: ``python -m bench.postgres [--quick] [--url URL]``.

Put and verified get at 1 KiB, 64 KiB, 1 MiB and 16 MiB with 1, 4 and 8 concurrent clients,
against the local backend in the same run, on the same machine. A client is a thread with a
store handle of its own (its own SQLite connection, or its own connection pool), as separate
agent hosts would have; every put writes new bytes, every get is a whole, SHA-256-verified read.

Without ``--url`` a throwaway PostgreSQL cluster is started on loopback (as the tests do, with
``fsync`` and ``synchronous_commit`` on, since the local store fsyncs every put), and removed
afterwards. Figures are medians of per-operation latency, plus aggregate operations per second
over each phase; the ratio divides the PostgreSQL figure by the local one.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._util import KiB, MiB, distinct, machine, ms, scratch_dir, size_label
from cargohold import Limits, LocalStore, Ref, Scope, ScopedStore

SIZES = (1 * KiB, 64 * KiB, 1 * MiB, 16 * MiB)
CLIENTS = (1, 4, 8)
UNLIMITED = Limits(
    max_artifact_bytes=16 * MiB,
    session_bytes=1 << 40,
    session_objects=1 << 30,
    store_bytes=1 << 40,
    store_objects=1 << 30,
)
_TOTAL_OPS = {1 * KiB: 400, 64 * KiB: 400, 1 * MiB: 120, 16 * MiB: 32}
"""Operations per phase (split among the clients) in a full run; a quarter with --quick."""


@dataclass(frozen=True, slots=True)
class Phase:
    """One timed phase: every client's per-operation latencies and the phase's wall time."""

    latencies: list[float]
    wall: float

    @property
    def median_ms(self) -> float:
        return statistics.median(self.latencies) * 1000.0

    @property
    def ops_per_s(self) -> float:
        return len(self.latencies) / self.wall


@dataclass(frozen=True, slots=True)
class Result:
    size: int
    clients: int
    op: str
    local: Phase
    postgres: Phase

    @property
    def ratio(self) -> float:
        return self.postgres.median_ms / self.local.median_ms


def _run_clients(clients: int, work: Callable[[int], list[float]]) -> Phase:
    """Run ``work(client)`` in ``clients`` threads released together; gather their latencies."""
    start = threading.Barrier(clients + 1, timeout=600)
    results: list[list[float]] = [[] for _ in range(clients)]
    failures: list[BaseException] = []

    def body(client: int) -> None:
        try:
            start.wait()
            results[client] = work(client)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=body, args=(c,)) for c in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    if failures:
        raise failures[0]
    return Phase([lat for client in results for lat in client], wall)


def _bench(
    open_store: Callable[[], Any], size: int, clients: int, ops: int, tag: int
) -> tuple[Phase, Phase]:
    """Put then get phases for one backend: each client writes ``ops`` new artifacts."""
    base = random.Random(size).randbytes(size)
    stores = [open_store() for _ in range(clients)]
    refs: list[list[Ref]] = [[] for _ in range(clients)]
    try:
        scoped = [
            ScopedStore(store, Scope("bench", f"user-{c}", f"session-{tag}"))
            for c, store in enumerate(stores)
        ]
        for c in range(clients):  # warm up each handle (connections, statements, pages)
            scoped[c].read(scoped[c].put(distinct(base, 10**6 + c, tag)).ref)

        def put(client: int) -> list[float]:
            latencies = []
            for i in range(ops):
                data = distinct(base, client * ops + i, tag)
                began = time.perf_counter()
                ref = scoped[client].put(data).ref
                latencies.append(time.perf_counter() - began)
                refs[client].append(ref)
            return latencies

        def get(client: int) -> list[float]:
            latencies = []
            for ref in refs[client]:
                began = time.perf_counter()
                result = scoped[client].read(ref)
                latencies.append(time.perf_counter() - began)
                if result.data is None or len(result.data) != size:
                    raise RuntimeError("a verified get did not resolve")
            return latencies

        return _run_clients(clients, put), _run_clients(clients, get)
    finally:
        for store in stores:
            store.close()


def _load_cluster_module() -> Any:
    path = Path(__file__).resolve().parent.parent / "tests" / "pg_cluster.py"
    if str(path.parent) not in sys.path:  # pg_cluster imports its sibling tests/_require.py
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("cargohold_bench_pg_cluster", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def throwaway_cluster() -> Iterator[str]:
    """A durable PostgreSQL cluster on loopback for the run; yields a database URL."""
    pg_cluster = _load_cluster_module()
    bindir = pg_cluster._bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL server binaries not found; pass --url to use a server")
    run_as = None
    base = Path(tempfile.mkdtemp(prefix="cargohold-bench-pg-"))
    if os.geteuid() == 0:
        import pwd

        owner = pwd.getpwnam("postgres")
        os.chown(base, owner.pw_uid, owner.pw_gid)
        run_as = "postgres"
    cluster = pg_cluster.PgCluster(bindir, base, run_as)
    try:
        cluster.init(durable=True)
        cluster.start()
        try:
            yield cluster.create_database("bench")
        finally:
            cluster.stop("fast")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(url: str, root: Path, quick: bool) -> list[Result]:
    from cargohold.store._postgres import PostgresStore, upgrade_schema

    upgrade_schema(url)
    results = []
    tag = 0
    for size in SIZES:
        total = _TOTAL_OPS[size] // (4 if quick else 1)
        for clients in CLIENTS:
            ops = max(2, total // clients)
            tag += 1
            print(f"  {size_label(size)} x {clients} clients ...", flush=True)
            local = _bench(
                lambda: LocalStore(root / "local", limits=UNLIMITED), size, clients, ops, tag
            )
            postgres = _bench(
                lambda: PostgresStore(url, limits=UNLIMITED, min_size=1, max_size=2),
                size,
                clients,
                ops,
                tag,
            )
            results.append(Result(size, clients, "put", local[0], postgres[0]))
            results.append(Result(size, clients, "verified get", local[1], postgres[1]))
    return results


_HEADERS = (
    "op",
    "size",
    "clients",
    "local ms",
    "postgres ms",
    "ratio",
    "local ops/s",
    "postgres ops/s",
)


def _cells(result: Result) -> tuple[str, ...]:
    return (
        result.op,
        size_label(result.size),
        str(result.clients),
        ms(result.local.median_ms),
        ms(result.postgres.median_ms),
        f"{result.ratio:.2f}x",
        f"{result.local.ops_per_s:,.0f}",
        f"{result.postgres.ops_per_s:,.0f}",
    )


def table(results: list[Result], markdown: bool = False) -> str:
    """The results as an aligned text table, or as a markdown table."""
    rows = [_HEADERS, *(_cells(r) for r in sorted(results, key=lambda r: (r.op, r.size)))]
    if markdown:
        lines = ["| " + " | ".join(row) + " |" for row in rows]
        lines.insert(1, "| " + " | ".join(["---"] * 3 + ["---:"] * 5) + " |")
        return "\n".join(lines)
    widths = [max(len(row[col]) for row in rows) for col in range(len(_HEADERS))]
    lines = [
        "  ".join(
            cell.ljust(w) if col < 2 else cell.rjust(w)
            for col, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.postgres", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a quarter of the operations")
    parser.add_argument("--url", help="an existing, empty PostgreSQL database to use")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table too")
    args = parser.parse_args(argv)

    for key, value in machine().items():
        print(f"{key:>14}: {value}")
    began = time.perf_counter()
    with scratch_dir() as root:
        if args.url:
            results = run(args.url, root, args.quick)
        else:
            with throwaway_cluster() as url:
                results = run(url, root, args.quick)
    print()
    print(table(results))
    if args.markdown:
        print()
        print(table(results, markdown=True))
    print(f"\n{len(results)} rows in {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
