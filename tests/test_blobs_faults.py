"""Faults of the object storage tier: the S3 server killed mid-upload, mid-read and during gc;
a bucket that is unreachable, silent or failing; and two hosts writing the same bytes while a
third runs gc.

The kills are SIGKILLs of a SeaweedFS server of the test's own, which keeps its data on disk and
is started again on the same ports. To land a kill inside a transfer, the test pauses the
transfer between two pieces (the body's parts on the way up, the pieces of a GET on the way
down) at the seam that feeds them to obstore, kills the server there, and lets the transfer go
on into the dead connection.
"""

from __future__ import annotations

import hashlib
import http.server
import random
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import cargohold
from cargohold import (
    ReadOutcome,
    Ref,
    Scope,
    ScopedStore,
    StoreUnavailableError,
)
from cargohold.store import _blobs
from cargohold.store._postgres import PostgresStore, upgrade_schema
from cargohold.testing import FakeClock

if TYPE_CHECKING:
    from pg_cluster import PgCluster
    from s3_server import S3Server

pytest_plugins = ["pg_cluster", "s3_server"]

KiB = 1024
MiB = 1024 * KiB
ALICE = Scope("tenant-acme", "user-ana", "session-1")
TIMEOUT = 120.0
"""Bound on any one wait; generous for a loaded 2-core machine, never reached."""


def body(size: int, seed: int = 0) -> bytes:
    return random.Random(f"{seed}:{size}").randbytes(size)


@pytest.fixture
def store_url(pg_url: str) -> str:
    upgrade_schema(pg_url)
    return pg_url


@pytest.fixture
def killable(fresh_s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """A server of this test's own, with the environment pointing at it."""
    from s3_server import use_server

    use_server(monkeypatch, fresh_s3_server)
    return fresh_s3_server


@pytest.fixture
def stores(store_url: str, clock: FakeClock) -> Iterator[Any]:
    opened: list[PostgresStore] = []

    def opener(blobs: str, **options: Any) -> PostgresStore:
        settings = {"clock": clock, "max_size": 2, "blobs_timeout": 3.0, "retries": 1}
        store = PostgresStore(store_url, blobs=blobs, **{**settings, **options})
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.close()


class Pause:
    """Holds a transfer between two of its pieces until the test has killed the server."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.resume = threading.Event()

    def wrap(self, pieces: Iterator[Any]) -> Iterator[Any]:
        for index, piece in enumerate(pieces):
            if index == 1:
                self.reached.set()
                assert self.resume.wait(TIMEOUT)
            yield piece


def in_thread(work: Any) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_the_store_killed_mid_upload_fails_the_put_typed_and_leaves_no_record(
    killable: S3Server, stores: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pause = Pause()
    real_parts = _blobs._parts
    monkeypatch.setattr(_blobs, "_parts", lambda data: pause.wrap(real_parts(data)))
    store = stores(killable.url("upload"))
    data = body(16 * MiB)  # two parts of a multipart upload
    ref = Ref(hashlib.sha256(data).hexdigest())

    thread, outcome = in_thread(lambda: ScopedStore(store, ALICE).put(data))
    assert pause.reached.wait(TIMEOUT)  # the first part is on its way
    killable.kill()
    pause.resume.set()
    thread.join(TIMEOUT)

    assert isinstance(outcome.get("error"), StoreUnavailableError)
    assert ScopedStore(store, ALICE).stat(ref).outcome is ReadOutcome.MISSING
    killable.start()
    assert {finding.kind for finding in store.verify()} <= {"staging"}
    store.gc()
    assert store.verify() == []
    monkeypatch.setattr(_blobs, "_parts", real_parts)
    ScopedStore(store, ALICE).put(data)
    assert ScopedStore(store, ALICE).read(ref).data == data


def test_the_store_killed_mid_read_fails_the_read_typed_with_no_bytes_and_it_reads_after(
    killable: S3Server, stores: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = stores(killable.url("read"))
    data = body(16 * MiB)
    ref = ScopedStore(store, ALICE).put(data).ref
    pause = Pause()
    real_stream = _blobs._stream
    monkeypatch.setattr(_blobs, "_stream", lambda result: pause.wrap(real_stream(result)))

    thread, outcome = in_thread(lambda: ScopedStore(store, ALICE).read(ref))
    assert pause.reached.wait(TIMEOUT)  # the first megabyte is in
    killable.kill()
    pause.resume.set()
    thread.join(TIMEOUT)

    assert "value" not in outcome
    assert isinstance(outcome["error"], StoreUnavailableError)
    with pytest.raises(StoreUnavailableError):
        ScopedStore(store, ALICE).read(ref, start=5 * MiB, end=5 * MiB + 100)
    assert ScopedStore(store, ALICE).stat(ref).outcome is ReadOutcome.RESOLVED  # rows only
    killable.start()
    monkeypatch.setattr(_blobs, "_stream", real_stream)
    assert ScopedStore(store, ALICE).read(ref).data == data
    assert store.verify() == []


def test_the_store_killed_during_gc_loses_no_live_body_and_the_next_gc_finishes(
    killable: S3Server, stores: Any, clock: FakeClock
) -> None:
    store = stores(killable.url("gc"))
    scoped = ScopedStore(store, ALICE)
    expired = [scoped.put(body(80 * KiB, seed), ttl=60).ref for seed in range(8)]
    live = {scoped.put(body(80 * KiB, 100 + seed), ttl=3600).ref: 100 + seed for seed in range(3)}
    tier = store._tier
    real_delete = tier.delete

    def killed_then_delete(objects: Any) -> None:
        killable.kill()  # after the rows' removal committed, before any object is deleted
        real_delete(objects)

    tier.delete = killed_then_delete
    clock.advance(120)
    with pytest.raises(StoreUnavailableError):
        store.gc()
    assert all(scoped.stat(ref).outcome is ReadOutcome.MISSING for ref in expired)

    killable.start()
    tier.delete = real_delete
    findings = store.verify()
    assert sorted(f.kind for f in findings) == ["staging"] * len(expired)
    store.gc()
    assert store.verify() == []
    for ref, seed in live.items():
        assert scoped.read(ref).data == body(80 * KiB, seed)


def test_an_unreachable_bucket_fails_puts_typed_and_the_offload_seam_gives_its_degraded_stub(
    store_url: str, s3_env: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    from s3_server import unused_endpoint

    blobs = s3_env.url("unreachable")
    PostgresStore(store_url, blobs=blobs).close()
    monkeypatch.setenv("AWS_ENDPOINT_URL", unused_endpoint())
    store = PostgresStore(store_url, blobs=blobs, blobs_timeout=2.0, retries=1)
    try:
        with pytest.raises(StoreUnavailableError):
            ScopedStore(store, ALICE).put(body(100 * KiB))
        assert ScopedStore(store, ALICE).artifacts() == []

        text = "\n".join(f"2026-01-01 INFO request {i} served" for i in range(4000))
        with cargohold.open(store, tenant="acme", user="ana", session="s") as hold:
            result = hold.offload(text, tool="read_log")
        assert (result.outcome.value, result.reason.value) == ("failed", "store_unavailable")
        assert result.ref is None
        assert "request 17 served" not in result.text
        assert len(result.text.encode()) < 4096
    finally:
        store.close()


class _Silent:
    """A loopback server that accepts connections and never answers."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.endpoint = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._held.append(conn)

    def close(self) -> None:
        self._sock.close()
        for conn in self._held:
            conn.close()


def test_a_bucket_that_never_answers_fails_reads_and_puts_within_the_timeout(
    store_url: str, s3_env: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    blobs = s3_env.url("silent")
    writer = PostgresStore(store_url, blobs=blobs)
    try:
        data = body(200 * KiB)
        ref = ScopedStore(writer, ALICE).put(data).ref
    finally:
        writer.close()
    silent = _Silent()
    monkeypatch.setenv("AWS_ENDPOINT_URL", silent.endpoint)
    store = PostgresStore(store_url, blobs=blobs, blobs_timeout=0.5, retries=1)
    try:
        with pytest.raises(StoreUnavailableError):
            ScopedStore(store, ALICE).read(ref)  # never "stale": the body may well be fine
        with pytest.raises(StoreUnavailableError):
            ScopedStore(store, ALICE).read(ref, start=10, end=20)
        with pytest.raises(StoreUnavailableError):
            ScopedStore(store, Scope("tenant-acme", "user-bob", "s")).put(data)  # its HEAD
        assert ScopedStore(store, ALICE).stat(ref).outcome is ReadOutcome.RESOLVED
    finally:
        store.close()
        silent.close()


def test_server_errors_are_retried_then_reported_as_store_unavailable(
    store_url: str, s3_env: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests: list[str] = []

    class Failing(http.server.BaseHTTPRequestHandler):
        def _fail(self) -> None:
            requests.append(self.command)
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _fail

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    blobs = s3_env.url("failing")
    PostgresStore(store_url, blobs=blobs).close()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
    store = PostgresStore(store_url, blobs=blobs, blobs_timeout=5.0, retries=2)
    try:
        with pytest.raises(StoreUnavailableError):
            ScopedStore(store, ALICE).put(body(100 * KiB))
        assert requests.count("PUT") == 3  # the first try and two retries
    finally:
        store.close()
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_two_hosts_writing_the_same_bytes_while_a_third_runs_gc_lose_no_body(
    store_url: str, s3_env: S3Server, tmp_path: Path, pg_cluster: PgCluster
) -> None:
    import blobs_worker

    blobs = s3_env.url("hosts")
    PostgresStore(store_url, blobs=blobs).close()
    spec = {"url": store_url, "blobs": blobs, "seconds": 3.0, "ttl": 0.5}
    stderr = tmp_path / "hosts.stderr"
    writers = [blobs_worker.spawn("writer", {**spec, "worker": i}, stderr) for i in range(2)]
    collector = blobs_worker.spawn("gc", spec, stderr)
    procs = [*writers, collector]
    lines: list[list[dict[str, Any]]] = [[] for _ in procs]
    try:
        readers = [blobs_worker.shared.LineReader(proc.stdout) for proc in procs]

        def next_line(index: int) -> dict[str, Any]:
            try:
                line: dict[str, Any] = readers[index].next(TIMEOUT)
            except (EOFError, TimeoutError) as exc:
                pytest.fail(f"host {index}: {type(exc).__name__}\n{stderr.read_text()}")
            lines[index].append(line)
            return line

        for index in range(len(procs)):
            assert next_line(index)["op"] == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        for index in range(len(writers)):
            while next_line(index)["op"] != "done":
                pass
        assert collector.stdin is not None
        collector.stdin.write(b"stop\n")
        collector.stdin.flush()
        while next_line(len(writers))["op"] != "done":
            pass
        for proc in procs:
            assert proc.wait(timeout=TIMEOUT) == 0, stderr.read_text()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=TIMEOUT)
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()

    puts = [
        {**line, "worker": worker}
        for worker, host in enumerate(lines[: len(writers)])
        for line in host
        if line["op"] == "put"
    ]
    expired_puts = [line for host in lines for line in host if line["op"] == "expired-put"]
    assert len(puts) >= 2 * blobs_worker.POOL
    # Every put that returned read back, at once, to its exact bytes (a read that came only
    # after the short TTL had passed may say expired, or missing once gc took the record).
    for line in puts:
        assert (line["read"] == "resolved" and line["exact"]) or (
            line["late"] and line["read"] in ("expired", "missing")
        ), line
    # The race was run: gc took blobs the hosts then had to upload again (each payload is
    # written once at first, by whichever host wins).
    collected = sum(line["blobs"] for line in lines[-1] if line["op"] == "gc")
    assert collected > 0
    written = sum(line["blob_written"] for line in puts + expired_puts)
    assert written > blobs_worker.POOL

    now = time.time()
    checker = PostgresStore(store_url, blobs=blobs, clock=lambda: now)
    try:
        # No record without its body: every record still live reads back exact...
        for line in puts:
            if line["expires"] > now:
                scope = Scope(blobs_worker.TENANT, f"u-{line['worker']}", f"s-{line['turn']}")
                read = ScopedStore(checker, scope).read(Ref.parse(line["ref"]))
                assert read.data == blobs_worker.payload(line["key"])
        # ...and once gc has run, every blob row has its object and nothing else is left.
        checker.gc()
        assert checker.verify() == []
    finally:
        checker.close()
