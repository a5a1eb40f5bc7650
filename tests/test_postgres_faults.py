"""Faults under a writer: connections killed mid-write, and the server crashing mid-write.

A child (``tests/pg_worker.py stream``) puts fresh payloads of 256 KiB to 2 MiB in a loop and
prints a line after each put: ``put`` when it succeeded (perhaps on a retry), ``error`` with the
cargohold error's code when it did not. Any other exception kills the child, which fails the test:
no psycopg exception may escape the store.

The parent picks a moment when the child's server process is executing a statement (a write in
flight) and kills it: ``pg_terminate_backend``, or ``pg_ctl stop -m immediate`` for the whole
server followed by a restart. Then it checks that the child carries on (the pool recovers), and
that the store holds nothing partial: every artifact resolves to bytes that hash to its
reference, every put reported done is there, every failed put is there whole or not at all, and
the quota counters agree with the blobs.
"""

from __future__ import annotations

import importlib.util
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from cargohold import ReadOutcome, Ref, Scope, ScopedStore, Usage
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

TIMEOUT = 60.0
"""Bound on any one wait; generous for a loaded 2-core machine, never reached."""
KILLS = 4
WORKER = 0
SCOPE = Scope(worker.STREAM_TENANT, worker.STREAM_USER, f"s-{WORKER}")


@pytest.fixture
def store_url(pg_url: str) -> str:
    upgrade_schema(pg_url)
    return pg_url


class Child:
    """The streaming writer, its lines, and the parent's bounded waits on them."""

    def __init__(self, url: str, tmp_path: Path, timeout: float) -> None:
        self.stderr_path = tmp_path / "worker.stderr"
        # As many retries as the test kills connections: a kill may land on the retry of the
        # put the one before killed (the parent cannot tell which put a backend is writing),
        # and two kills of one put's connections are the test's doing, not a store fault.
        spec = {"url": url, "worker": WORKER, "timeout": timeout, "retries": KILLS}
        self.proc = worker.spawn("stream", spec, self.stderr_path)
        self.reader = worker.shared.LineReader(self.proc.stdout)
        self.lines: list[dict[str, Any]] = []

    def next(self) -> dict[str, Any]:
        try:
            line: dict[str, Any] = self.reader.next(TIMEOUT)
        except (EOFError, TimeoutError) as exc:
            pytest.fail(f"worker {type(exc).__name__}:\n{self.stderr_path.read_text()}")
        self.lines.append(line)
        return line

    def wait_for(self, op: str) -> dict[str, Any]:
        """Read lines until one with ``op`` (bounded: every line comes within TIMEOUT)."""
        while (line := self.next())["op"] != op:
            pass
        return line

    def release(self) -> None:
        assert self.next()["op"] == "ready"
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def finish(self) -> None:
        self.proc.stdin.write(b"stop\n")
        self.proc.stdin.close()
        self.lines.extend(self.reader.rest(TIMEOUT))
        assert self.proc.wait(timeout=TIMEOUT) == 0, self.stderr_path.read_text()
        assert self.lines[-1]["op"] == "done"

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=TIMEOUT)
        self.proc.stdout.close()


def _dbname(url: str) -> str:
    return url.rsplit("/", 1)[1]


def _writing_backend(pg_cluster: PgCluster, url: str) -> int:
    """The pid of the child's server process while it executes a statement.

    Polls pg_stat_activity; the child writes without pause, so this returns within a few
    polls. Bounded by TIMEOUT.
    """
    deadline = time.monotonic() + TIMEOUT
    with pg_cluster.connect() as admin:  # type: ignore[attr-defined]
        while time.monotonic() < deadline:
            row = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s"
                " AND application_name = 'cargohold' AND state = 'active'"
                " AND query LIKE 'INSERT INTO%%blobs%%' LIMIT 1",
                (_dbname(url),),
            ).fetchone()
            if row is not None:
                return int(row[0])
    pytest.fail("the child never had a blob insert in flight")


def _assert_nothing_partial(pg_cluster: PgCluster, url: str, lines: list[dict[str, Any]]) -> int:
    """The store after the faults: whole artifacts only, every reported put present.

    Returns how many puts failed with a typed error.
    """
    puts = [line for line in lines if line["op"] == "put"]
    errors = [line for line in lines if line["op"] == "error"]
    attempts = lines[-1]["attempts"]
    assert {line["code"] for line in errors} <= {"store_unavailable"}
    payloads = {index: worker.stream_payload(WORKER, index) for index in range(attempts)}
    by_ref = {Ref.of(data): data for data in payloads.values()}
    store = PostgresStore(url)
    try:
        scoped = ScopedStore(store, SCOPE)
        records = scoped.artifacts()
        for record in records:
            assert record.ref in by_ref
            got = scoped.read(record.ref)
            assert got.outcome is ReadOutcome.RESOLVED
            assert got.data == by_ref[record.ref]
        stored = {record.ref for record in records}
        for line in puts:
            assert Ref.parse(line["ref"]) in stored
        for line in errors:
            got = scoped.read(Ref.of(payloads[line["index"]]))
            assert got.outcome in (ReadOutcome.RESOLVED, ReadOutcome.MISSING)
        held = Usage(len(records), sum(record.size for record in records))
        assert store.store_usage() == held
        assert store.verify() == []
    finally:
        store.close()
    with pg_cluster.connect(_dbname(url)) as conn:  # type: ignore[attr-defined]
        blobs = conn.execute(
            "SELECT count(*), coalesce(sum(octet_length(data)), 0) FROM cargohold.blobs"
        ).fetchone()
    assert Usage(int(blobs[0]), int(blobs[1])) == held
    return len(errors)


@pytest.mark.slow
def test_connections_killed_mid_write_leave_nothing_partial_and_the_writer_carries_on(
    tmp_path: Path, store_url: str, pg_cluster: PgCluster
) -> None:
    child = Child(store_url, tmp_path, timeout=10.0)
    try:
        child.release()
        child.wait_for("put")
        for _ in range(KILLS):
            pid = _writing_backend(pg_cluster, store_url)
            with pg_cluster.connect() as admin:  # type: ignore[attr-defined]
                killed = admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
            assert killed == (True,)
            # The pool replaced the killed connection: a later put succeeds.
            child.wait_for("put")
        child.finish()
    finally:
        child.kill()

    # Puts are idempotent by content: each one whose connection died was retried on a fresh
    # connection and succeeded.
    assert _assert_nothing_partial(pg_cluster, store_url, child.lines) == 0


@pytest.mark.slow
def test_a_server_crash_mid_write_leaves_nothing_partial_and_the_pool_recovers_after_restart(
    tmp_path: Path, store_url: str, pg_cluster: PgCluster
) -> None:
    child = Child(store_url, tmp_path, timeout=2.0)
    try:
        child.release()
        child.wait_for("put")
        _writing_backend(pg_cluster, store_url)
        pg_cluster.stop("immediate")
        # While the server is down, puts fail with a typed error (the child dies on any other).
        down = child.wait_for("error")
        pg_cluster.start()
        # After the restart the same store object writes again: its pool reconnected.
        up = child.wait_for("put")
        assert up["index"] > down["index"]
        child.finish()
    finally:
        child.kill()
        pg_cluster.ensure_running()

    assert _assert_nothing_partial(pg_cluster, store_url, child.lines) >= 1
