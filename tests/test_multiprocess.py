"""Several processes on one local store at once: overlapping writers, and gc racing them.

Children run ``tests/store_worker.py``. They start together: each prints ``ready`` and blocks on
stdin until the parent has seen every child ready and writes ``go`` to all of them; only then do
they open the store and write. Each reports the references it got, line by line; the parent
checks them against payloads it derives itself. Creating a new store from several processes at
once is a test of its own.
"""

from __future__ import annotations

import importlib.util
import signal
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

import cargohold
from cargohold import ReadOutcome, Ref, Scope, ScopedStore, Usage

_WORKER_PATH = Path(__file__).with_name("store_worker.py")
_spec = importlib.util.spec_from_file_location("cargohold_test_store_worker", _WORKER_PATH)
assert _spec is not None
assert _spec.loader is not None
worker = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(worker)

SEED = 4242
WRITERS = 4
CHURN_TURNS = 6
TIMEOUT = 120.0
"""Bound on any one wait for the children; generous for a loaded 2-core machine, never reached."""

Put = tuple[str, str, str, int]


def _next(reader: Any, stderr_path: Path) -> dict[str, Any]:
    line: dict[str, Any] = worker.next_line(reader, stderr_path, TIMEOUT)
    return line


def _run_together(
    tmp_path: Path, children: list[tuple[str, dict[str, Any]]]
) -> list[list[dict[str, Any]]]:
    """Start every child, release them at once, and return each one's report lines."""
    # The store exists before the children open it; racing its creation is tested on its own.
    cargohold.LocalStore(tmp_path / "store").close()
    reports: list[list[dict[str, Any]]] = worker.run_together(
        worker.spawn, children, tmp_path / "workers.stderr", TIMEOUT
    )
    return reports


def _writers(root: Path) -> list[tuple[str, dict[str, Any]]]:
    return [("writer", {"root": str(root), "worker": i, "seed": SEED}) for i in range(WRITERS)]


def _plans() -> list[list[Put]]:
    return [worker.writer_plan(i, SEED) for i in range(WRITERS)]


def _blob_files(root: Path) -> list[Path]:
    return [path for path in (root / "objects").rglob("*") if path.is_file()]


def _check_writer_reports(reports: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """Each writer reported exactly its plan, with the right refs, and read all of it back."""
    puts_by_writer = []
    for plan, lines in zip(_plans(), reports, strict=True):
        puts = [line for line in lines if line["op"] == "put"]
        assert [(p["tenant"], p["user"], p["session"], p["key"]) for p in puts] == plan
        for put in puts:
            assert put["ref"] == str(Ref.of(worker.pool_payload(put["key"])))
        assert [line for line in lines if line["op"] == "readback"] == [
            {"op": "readback", "exact": len(plan), "total": len(plan)}
        ]
        puts_by_writer.append(puts)
    return puts_by_writer


def _assert_store_holds_exactly(root: Path, plans: list[list[Put]]) -> None:
    """Every planned put reads back exact; each distinct content is stored once per tenant."""
    pairs = {(tenant, key) for plan in plans for tenant, _, _, key in plan}
    expected = Usage(len(pairs), sum(len(worker.pool_payload(key)) for _, key in pairs))
    store = cargohold.LocalStore(root)
    try:
        for plan in plans:
            for tenant, user, session, key in plan:
                data = worker.pool_payload(key)
                got = ScopedStore(store, Scope(tenant, user, session)).read(Ref.of(data))
                assert got.outcome is ReadOutcome.RESOLVED
                assert got.data == data
        assert store.store_usage() == expected
        files = _blob_files(root)
        assert len(files) == expected.objects
        assert sum(path.stat().st_size for path in files) == expected.bytes
        assert list((root / "staging").iterdir()) == []
        assert store.verify() == []
    finally:
        store.close()


@pytest.mark.slow
def test_four_processes_writing_overlapping_content_store_each_content_once_per_tenant(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    plans = _plans()
    # The plans overlap as the test needs: every writer puts the core, and some of the pool
    # goes to the second tenant too.
    assert all({key for _, _, _, key in plan} >= set(worker.CORE_KEYS) for plan in plans)
    assert any(tenant == worker.MP_TENANTS[1] for plan in plans for tenant, *_ in plan)

    puts_by_writer = _check_writer_reports(_run_together(tmp_path, _writers(root)))
    _assert_store_holds_exactly(root, plans)

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
            if (put["tenant"], put["user"], put["session"]) == worker.SHARED_SCOPE:
                fresh_in_shared[put["key"]] += not put["existing"]
    assert fresh_in_shared == Counter(dict.fromkeys(worker.CORE_KEYS, 1))

    # In a writer's own scopes, the first put of some bytes is new and a repeat is existing.
    for puts in puts_by_writer:
        seen: set[tuple[str, str, str, int]] = set()
        for put in puts:
            where = (put["tenant"], put["user"], put["session"], put["key"])
            if where[:3] != worker.SHARED_SCOPE:
                assert put["existing"] is (where in seen)
                seen.add(where)


@pytest.mark.slow
def test_gc_running_beside_four_writers_never_takes_the_bytes_of_a_live_artifact(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    churn = ("churn", {"root": str(root), "turns": CHURN_TURNS})
    reports = _run_together(tmp_path, [*_writers(root), churn])
    puts_by_writer = _check_writer_reports(reports[:WRITERS])

    # Every gc turn removed exactly the expired rows the churn process wrote (nobody else
    # writes expired rows), and at least the blobs of the payloads only it ever wrote.
    own_pairs = len(worker.CHURN_SCOPES) * len(worker.CHURN_OWN_KEYS)
    turns = [line for line in reports[WRITERS] if line["op"] == "gc"]
    assert [line["turn"] for line in turns] == list(range(CHURN_TURNS))
    for line in turns:
        assert line["artifacts"] == line["rows"]
        assert line["blobs"] >= own_pairs

    # Its last act was a gc, so only the writers' live artifacts remain, each with its bytes.
    _assert_store_holds_exactly(root, _plans())

    # A writer never wrote a blob another writer had already written; pairs the churn process
    # never touched were written exactly once.
    churned = {
        (tenant, key) for tenant, _, _ in worker.CHURN_SCOPES for key in worker.CHURN_POOL_KEYS
    }
    writes: defaultdict[tuple[str, int], int] = defaultdict(int)
    for puts in puts_by_writer:
        for put in puts:
            writes[(put["tenant"], put["key"])] += put["blob_written"]
    assert all(count <= 1 for count in writes.values())
    assert all(count == 1 for pair, count in writes.items() if pair not in churned)


@pytest.mark.slow
def test_bytes_re_added_while_gc_is_unlinking_them_stay_readable(tmp_path: Path) -> None:
    root = tmp_path / "store"
    stderr_path = tmp_path / "worker.stderr"
    expired = 300  # more than one unlink batch, so gc reports progress before it is done
    proc = worker.spawn("gc-pause", {"root": str(root), "expired": expired}, stderr_path)
    reader = worker.LineReader(proc.stdout)
    store = None
    try:
        assert _next(reader, stderr_path)["op"] == "ready"
        paused = _next(reader, stderr_path)
        assert paused["op"] == "gc-progress"
        assert 0 < paused["done"] < paused["total"] == expired

        # The collector is parked between unlink batches: its rows are gone (committed), some
        # of its files too. Another process now writes two of those contents again: one whose
        # file gc has already unlinked, one whose file it has yet to reach.
        on_disk = {path.parent.name + path.name for path in _blob_files(root)}
        by_digest = {worker.digest_of(worker.small_payload(k)): k for k in range(expired)}
        pending = sorted(k for d, k in by_digest.items() if d in on_disk)
        unlinked = sorted(k for d, k in by_digest.items() if d not in on_disk)
        assert len(pending) == expired - paused["done"]
        again = [worker.small_payload(pending[0]), worker.small_payload(unlinked[0])]
        store = cargohold.LocalStore(root)
        scoped = ScopedStore(store, Scope(worker.GC_TENANT, "u-new", "s-new"))
        refs = [scoped.put(data).ref for data in again]

        proc.stdin.write(b"go\n")
        proc.stdin.close()
        done = _next(reader, stderr_path)
        assert done == {"op": "gc-done", "artifacts": expired, "blobs": expired, "paused": True}
        assert proc.wait(timeout=TIMEOUT) == 0

        for ref, data in zip(refs, again, strict=True):
            got = scoped.read(ref)
            assert got.outcome is ReadOutcome.RESOLVED
            assert got.data == data
        live = [worker.small_payload(key) for key in worker.GC_LIVE_KEYS] + again
        assert store.store_usage() == Usage(len(live), sum(len(data) for data in live))
        assert store.verify() == []
        assert {p.parent.name + p.name for p in _blob_files(root)} == {
            worker.digest_of(data) for data in live
        }
    finally:
        if store is not None:
            store.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=TIMEOUT)
        proc.stdout.close()


CREATION_ROUNDS = 250


@pytest.mark.slow
def test_processes_creating_one_store_at_once_all_open_it(tmp_path: Path) -> None:
    # The race is narrow (about one open in a hundred here), so it is run many times over: four
    # children open each of many fresh stores at the same moment.
    stderr_path = tmp_path / "workers.stderr"
    roots = [str(tmp_path / f"store-{index}") for index in range(CREATION_ROUNDS)]
    procs = [worker.spawn("open-race", {"roots": roots}, stderr_path) for _ in range(WRITERS)]
    codes: Counter[str | None] = Counter()
    try:
        readers = [worker.LineReader(proc.stdout) for proc in procs]
        for reader in readers:
            assert _next(reader, stderr_path)["op"] == "ready"
        for index in range(CREATION_ROUNDS):
            for proc in procs:
                proc.stdin.write(f"{index}\n".encode())
                proc.stdin.flush()
            for reader in readers:
                line = _next(reader, stderr_path)
                assert line["index"] == index
                codes[line["code"]] += 1
        for proc in procs:
            proc.stdin.write(b"stop\n")
            proc.stdin.close()
        assert [proc.wait(timeout=TIMEOUT) for proc in procs] == [0] * WRITERS
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=TIMEOUT)
            proc.stdout.close()
    assert codes == Counter({None: WRITERS * CREATION_ROUNDS})
    for root in roots:
        store = cargohold.LocalStore(root)
        try:
            assert store.verify() == []
        finally:
            store.close()
