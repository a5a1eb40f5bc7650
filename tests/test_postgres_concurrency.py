"""Several processes on one PostgreSQL store: overlapping content, quotas at the edge, gc racing.

Children run ``tests/pg_worker.py``. Each opens its store, prints ``ready`` and blocks until the
parent has seen every child ready and writes ``go`` to all of them, so their writes race for
real. Each reports what it did line by line; the parent checks the reports against payloads it
derives itself, and then checks the store through the public API and the database directly.
"""

from __future__ import annotations

import importlib.util
from collections import Counter, defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cargohold import LimitExceededError, Limits, ReadOutcome, Ref, Scope, ScopedStore, Usage
from cargohold.store._postgres import PostgresStore, upgrade_schema

if TYPE_CHECKING:
    from pg_cluster import PgCluster

pytest_plugins = ["pg_cluster"]
"""The throwaway cluster's fixtures: ``pg_cluster`` and ``pg_url``."""

_WORKER_PATH = Path(__file__).with_name("pg_worker.py")
_spec = importlib.util.spec_from_file_location("cargohold_test_pg_worker", _WORKER_PATH)
assert _spec is not None
assert _spec.loader is not None
worker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(worker)
shared = worker.shared

SEED = 6161
WRITERS = 4
RACERS = 6
CHURN_TURNS = 4
TIMEOUT = 120.0
"""Bound on any one wait for the children; generous for a loaded 2-core machine, never reached."""

Put = tuple[str, str, str, int]


def _next(reader: Any, stderr_path: Path) -> dict[str, Any]:
    line: dict[str, Any] = shared.next_line(reader, stderr_path, TIMEOUT)
    return line


def _run_together(
    tmp_path: Path, children: list[tuple[str, dict[str, Any]]]
) -> list[list[dict[str, Any]]]:
    """Start every child, release them at once, and return each one's report lines."""
    reports: list[list[dict[str, Any]]] = shared.run_together(
        worker.spawn, children, tmp_path / "workers.stderr", TIMEOUT
    )
    return reports


@pytest.fixture
def store_url(pg_url: str) -> str:
    """A fresh database holding an upgraded, empty store."""
    upgrade_schema(pg_url)
    return pg_url


def _plans() -> list[list[Put]]:
    return [shared.writer_plan(i, SEED) for i in range(WRITERS)]


def _writers(url: str) -> list[tuple[str, dict[str, Any]]]:
    return [("writer", {"url": url, "worker": i, "seed": SEED}) for i in range(WRITERS)]


def _check_writer_reports(reports: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """Each writer reported exactly its plan, with the right refs, and read all of it back."""
    puts_by_writer = []
    for plan, lines in zip(_plans(), reports, strict=True):
        puts = [line for line in lines if line["op"] == "put"]
        assert [(p["tenant"], p["user"], p["session"], p["key"]) for p in puts] == plan
        for put in puts:
            assert put["ref"] == str(Ref.of(shared.pool_payload(put["key"])))
        assert [line for line in lines if line["op"] == "readback"] == [
            {"op": "readback", "exact": len(plan), "total": len(plan)}
        ]
        puts_by_writer.append(puts)
    return puts_by_writer


def _database_counts(pg_cluster: PgCluster, url: str) -> tuple[Usage, Usage]:
    """(the counters row, what the blobs table really holds), read with SQL."""
    dbname = url.rsplit("/", 1)[1]
    with pg_cluster.connect(dbname) as conn:  # type: ignore[attr-defined]
        counters = conn.execute("SELECT objects, bytes FROM cargohold.stats").fetchone()
        actual = conn.execute(
            "SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM cargohold.blobs"
        ).fetchone()
    return Usage(int(counters[0]), int(counters[1])), Usage(int(actual[0]), int(actual[1]))


def _assert_store_holds_exactly(pg_cluster: PgCluster, url: str, plans: list[list[Put]]) -> None:
    """Every planned put reads back exact; each distinct content is stored once per tenant."""
    pairs = {(tenant, key) for plan in plans for tenant, _, _, key in plan}
    expected = Usage(len(pairs), sum(len(shared.pool_payload(key)) for _, key in pairs))
    store = PostgresStore(url)
    try:
        for plan in plans:
            for tenant, user, session, key in plan:
                data = shared.pool_payload(key)
                got = ScopedStore(store, Scope(tenant, user, session)).read(Ref.of(data))
                assert got.outcome is ReadOutcome.RESOLVED
                assert got.data == data
        assert store.store_usage() == expected
        assert store.verify() == []
    finally:
        store.close()
    assert _database_counts(pg_cluster, url) == (expected, expected)


@pytest.mark.slow
def test_four_processes_writing_overlapping_content_store_each_content_once_per_tenant(
    tmp_path: Path,
    store_url: str,
    pg_cluster: PgCluster,
) -> None:
    plans = _plans()
    assert all({key for _, _, _, key in plan} >= set(shared.CORE_KEYS) for plan in plans)
    assert any(tenant == shared.MP_TENANTS[1] for plan in plans for tenant, *_ in plan)

    puts_by_writer = _check_writer_reports(_run_together(tmp_path, _writers(store_url)))
    _assert_store_holds_exactly(pg_cluster, store_url, plans)

    # Racing writers of the same bytes all succeeded, and exactly one of them wrote the blob.
    writes: Counter[tuple[str, int]] = Counter()
    for puts in puts_by_writer:
        for put in puts:
            writes[(put["tenant"], put["key"])] += put["blob_written"]
    assert set(writes.values()) == {1}

    # In the scope all four share, each core payload is new for exactly one of them.
    fresh_in_shared: Counter[int] = Counter()
    for puts in puts_by_writer:
        for put in puts:
            if (put["tenant"], put["user"], put["session"]) == shared.SHARED_SCOPE:
                fresh_in_shared[put["key"]] += not put["existing"]
    assert fresh_in_shared == Counter(dict.fromkeys(shared.CORE_KEYS, 1))


QUOTA_LIMIT = 10
PUTS_EACH = 4


@pytest.mark.slow
@pytest.mark.parametrize("quota", ["session_objects", "store_objects"])
def test_writers_racing_for_the_last_slots_fill_the_quota_exactly(
    tmp_path: Path,
    store_url: str,
    pg_cluster: PgCluster,
    quota: str,
) -> None:
    # Six processes, four distinct puts each, ten slots: session quota with every process in
    # one session, store quota with every process in a session of its own.
    limits = {quota: QUOTA_LIMIT}
    shared_session = ("t-quota", "u-quota", "s-shared")
    children = [
        (
            "quota",
            {
                "url": store_url,
                "worker": i,
                "puts": PUTS_EACH,
                "limits": limits,
                "scopes": [shared_session if quota == "session_objects" else ("t-q", "u", f"{i}")],
            },
        )
        for i in range(RACERS)
    ]

    reports = _run_together(tmp_path, children)

    lines = [line for report in reports for line in report]
    stored = [line for line in lines if line["op"] == "stored"]
    refused = [line for line in lines if line["op"] == "refused"]
    assert len(stored) == QUOTA_LIMIT
    assert len(refused) == RACERS * PUTS_EACH - QUOTA_LIMIT
    assert {line["reason"] for line in refused} == {quota}
    held = Usage(QUOTA_LIMIT, sum(line["size"] for line in stored))
    store = PostgresStore(store_url, limits=Limits(**limits))
    try:
        assert store.store_usage() == held
        if quota == "session_objects":
            assert store.usage(Scope(*shared_session)) == held
        # Full means full: one more distinct write is refused, and refused for this quota.
        with pytest.raises(LimitExceededError) as raised:
            ScopedStore(store, Scope(*shared_session)).put(b"one too many")
        assert raised.value.reason == quota
        assert store.verify() == []
    finally:
        store.close()
    assert _database_counts(pg_cluster, store_url) == (held, held)


@pytest.mark.slow
def test_gc_running_beside_four_writers_never_takes_the_bytes_of_a_live_artifact(
    tmp_path: Path,
    store_url: str,
    pg_cluster: PgCluster,
) -> None:
    churn = ("churn", {"url": store_url, "turns": CHURN_TURNS})
    reports = _run_together(tmp_path, [*_writers(store_url), churn])
    puts_by_writer = _check_writer_reports(reports[:WRITERS])

    # Every gc turn removed exactly the expired rows the churn process wrote (nobody else
    # writes expired rows), and at least the blobs of the payloads only it ever wrote.
    own_pairs = len(shared.CHURN_SCOPES) * len(shared.CHURN_OWN_KEYS)
    turns = [line for line in reports[WRITERS] if line["op"] == "gc"]
    assert [line["turn"] for line in turns] == list(range(CHURN_TURNS))
    for line in turns:
        assert line["artifacts"] == line["rows"]
        assert line["blobs"] >= own_pairs

    # Its last act was a gc, so only the writers' live artifacts remain, each with its bytes.
    _assert_store_holds_exactly(pg_cluster, store_url, _plans())

    # A writer never wrote a blob another writer had already written; pairs the churn process
    # never touched were written exactly once.
    churned = {
        (tenant, key) for tenant, _, _ in shared.CHURN_SCOPES for key in shared.CHURN_POOL_KEYS
    }
    writes: defaultdict[tuple[str, int], int] = defaultdict(int)
    for puts in puts_by_writer:
        for put in puts:
            writes[(put["tenant"], put["key"])] += put["blob_written"]
    assert all(count <= 1 for count in writes.values())
    assert all(count == 1 for pair, count in writes.items() if pair not in churned)
