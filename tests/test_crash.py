"""Crash safety of the local store: a writer killed with SIGKILL leaves nothing half-visible.

The child (``tests/store_worker.py``) prints one line after each operation it completed. The
parent kills it after a seeded number of lines plus a seeded sliver of time, so kills land
between operations and inside them (while staging, renaming, committing, collecting). After each
kill the parent reopens the store and checks, through the public API, that every visible row
resolves to exact bytes, that ``verify`` finds no corrupt blob and no row without its bytes (what
a crash may leave, orphans and staged files, must be reported, not hidden), and that every write
the child reported as finished is still there.
"""

from __future__ import annotations

import hashlib
import importlib.util
import random
import signal
import stat
import time
from collections import Counter
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

SEED = 20260402
ROUNDS = 32
LINE_TIMEOUT = 60.0
"""Bound on any one wait for the child; generous for a loaded 2-core machine, never reached."""

ALLOWED_AFTER_CRASH = {"orphan", "staging"}


def _kill(proc: Any) -> int:
    proc.send_signal(signal.SIGKILL)
    return proc.wait(timeout=LINE_TIMEOUT)


def _next(reader: Any, stderr_path: Path) -> dict[str, Any]:
    """The child's next line; a child that died or hung fails the test with its stderr."""
    try:
        line: dict[str, Any] = reader.next(LINE_TIMEOUT)
    except (EOFError, TimeoutError) as exc:
        pytest.fail(f"worker {type(exc).__name__}:\n{stderr_path.read_text()}")
    return line


def _blob_files(root: Path) -> list[Path]:
    return [path for path in (root / "objects").rglob("*") if path.is_file()]


def _assert_private(root: Path) -> None:
    """Directories 0700, files 0600 and no symlinks in the trees a crash may leave things in."""
    for top in (root / "objects", root / "staging"):
        for path in [top, *top.rglob("*")]:
            info = path.lstat()
            assert not stat.S_ISLNK(info.st_mode)
            expected = 0o700 if stat.S_ISDIR(info.st_mode) else 0o600
            assert stat.S_IMODE(info.st_mode) == expected, path.relative_to(root)


def _assert_consistent(root: Path, finished: dict[tuple[str, str, str], int]) -> Counter[str]:
    """Check the store after a crash; returns the kinds of findings ``verify`` reported."""
    store = cargohold.LocalStore(root)
    try:
        now = time.time()
        blobs: dict[tuple[str, str], int] = {}
        for tenant in worker.CRASH_TENANTS:
            for session in worker.CRASH_SESSIONS:
                scoped = ScopedStore(store, Scope(tenant, worker.CRASH_USER, session))
                for record in scoped.artifacts():
                    got = scoped.read(record.ref)
                    if record.expires > now:
                        assert got.outcome is ReadOutcome.RESOLVED
                        assert got.data is not None
                        assert len(got.data) == record.size
                        assert hashlib.sha256(got.data).hexdigest() == record.ref.digest
                    else:
                        assert got.outcome is ReadOutcome.EXPIRED
                        assert got.data is None
                    blobs[(tenant, record.ref.digest)] = record.size

        # Every blob row is named by at least one artifact row and every artifact row has its
        # blob (puts and gc change both in one transaction), so the store's figures are exactly
        # the distinct contents the visible rows name, plus the staged leftovers of killed
        # writers, which count toward usage until gc removes them.
        leftovers = sum(p.lstat().st_size for p in (root / "staging").iterdir())
        assert store.store_usage() == Usage(len(blobs), sum(blobs.values()) + leftovers)

        findings = store.verify()
        kinds = Counter(finding.kind for finding in findings)
        assert set(kinds) <= ALLOWED_AFTER_CRASH, kinds
        assert len(_blob_files(root)) == len(blobs) + kinds["orphan"]
        assert len(list((root / "staging").iterdir())) == kinds["staging"]
        _assert_private(root)

        for (tenant, session, digest), key in finished.items():
            got = ScopedStore(store, Scope(tenant, worker.CRASH_USER, session)).read(Ref(digest))
            assert got.outcome is ReadOutcome.RESOLVED
            assert got.data == worker.crash_payload(key)
        return kinds
    finally:
        store.close()


def _crash_round(
    root: Path, round_no: int, rng: random.Random, stderr_path: Path
) -> list[dict[str, Any]]:
    """Run one seeded writer, kill it with SIGKILL mid-work; its completed operations."""
    spec = {"root": str(root), "seed": SEED * 1000 + round_no, "round": round_no, "max_ops": 10_000}
    proc = worker.spawn("crash", spec, stderr_path)
    assert proc.stdout is not None
    assert proc.stdin is not None
    reader = worker.LineReader(proc.stdout)
    try:
        lines = [_next(reader, stderr_path)]
        assert lines[0]["op"] == "ready"
        for _ in range(rng.randint(0, 8)):
            lines.append(_next(reader, stderr_path))
        # A seeded sliver of time (a few milliseconds at most, ending early if the child speaks)
        # so the kill lands inside an operation (staging, renaming, committing, collecting) as
        # often as between two.
        reader.wait_for_output(rng.uniform(0.0, 0.006))
    finally:
        returncode = _kill(proc)
        proc.stdin.close()
    lines.extend(reader.rest(LINE_TIMEOUT))
    proc.stdout.close()
    assert returncode == -signal.SIGKILL, stderr_path.read_text()
    assert all(line["op"] != "done" for line in lines)
    return lines


def _finished_live_puts(lines: list[dict[str, Any]]) -> dict[tuple[str, str, str], int]:
    return {
        (line["tenant"], line["session"], Ref.parse(line["ref"]).digest): line["key"]
        for line in lines
        if line["op"] == "put" and line["live"]
    }


@pytest.mark.slow
def test_a_writer_killed_at_random_points_leaves_no_partial_artifact_and_no_row_without_bytes(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    stderr_path = tmp_path / "worker.stderr"
    rng = random.Random(SEED)
    finished: dict[tuple[str, str, str], int] = {}
    for round_no in range(ROUNDS):
        finished.update(_finished_live_puts(_crash_round(root, round_no, rng, stderr_path)))
        _assert_consistent(root, finished)
    assert finished

    # After all the crashes, an explicit gc still works: it removes every expired row, keeps
    # every finished write, and leaves what the crashes left reported.
    store = cargohold.LocalStore(root)
    try:
        store.gc()
        for tenant in worker.CRASH_TENANTS:
            for session in worker.CRASH_SESSIONS:
                records = store.artifacts(Scope(tenant, worker.CRASH_USER, session))
                assert all(record.expires > time.time() for record in records)
    finally:
        store.close()
    _assert_consistent(root, finished)


@pytest.mark.slow
def test_a_gc_killed_between_its_commit_and_its_unlinks_leaves_orphans_reported_not_lost_rows(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    stderr_path = tmp_path / "worker.stderr"
    expired = 300  # more than one unlink batch, so gc reports progress before it is done
    proc = worker.spawn("gc-pause", {"root": str(root), "expired": expired}, stderr_path)
    assert proc.stdout is not None
    assert proc.stdin is not None
    reader = worker.LineReader(proc.stdout)
    try:
        ready = _next(reader, stderr_path)
        assert ready["op"] == "ready", stderr_path.read_text()
        paused = _next(reader, stderr_path)
        assert paused["op"] == "gc-progress", stderr_path.read_text()
        assert 0 < paused["done"] < paused["total"] == expired
        # The child is parked in gc's progress callback: its rows are gone (committed), part of
        # its files are unlinked. That is the moment the crash happens.
        left_on_disk = {path.parent.name + path.name for path in _blob_files(root)}
    finally:
        returncode = _kill(proc)
    proc.stdout.close()
    proc.stdin.close()
    assert returncode == -signal.SIGKILL

    expired_digests = {worker.digest_of(worker.small_payload(key)) for key in range(expired)}
    live_digests = {worker.digest_of(worker.small_payload(key)) for key in worker.GC_LIVE_KEYS}
    assert left_on_disk == live_digests | (left_on_disk & expired_digests)
    stranded = left_on_disk & expired_digests
    assert len(stranded) == expired - paused["done"]

    store = cargohold.LocalStore(root)
    try:
        findings = store.verify()
        assert {f.kind for f in findings} == {"orphan"}
        assert {f.digest for f in findings} == stranded
        old = ScopedStore(store, Scope(*worker.GC_EXPIRED_SCOPE))
        assert old.artifacts() == []
        for key in range(expired):
            assert old.read(Ref.of(worker.small_payload(key))).outcome is ReadOutcome.MISSING
        live = ScopedStore(store, Scope(*worker.GC_LIVE_SCOPE))
        for key in worker.GC_LIVE_KEYS:
            got = live.read(Ref.of(worker.small_payload(key)))
            assert got.outcome is ReadOutcome.RESOLVED
            assert got.data == worker.small_payload(key)
        sizes = sum(len(worker.small_payload(key)) for key in worker.GC_LIVE_KEYS)
        assert store.store_usage() == Usage(len(worker.GC_LIVE_KEYS), sizes)

        # A second gc removes the stranded files (no row names them) and nothing else.
        report = store.gc()
        assert (report.artifacts, report.blobs) == (0, len(stranded))
        assert store.verify() == []
        assert {path.parent.name + path.name for path in _blob_files(root)} == (
            left_on_disk - stranded
        )
        assert store.store_usage() == Usage(len(worker.GC_LIVE_KEYS), sizes)
    finally:
        store.close()
