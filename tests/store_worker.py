"""A child process that drives one local store, for the crash and multi-process tests.

Run as a script, ``python tests/store_worker.py MODE SPEC_JSON``; it prints one JSON line after
each completed operation (so a line on the parent's side means "this finished before the kill"):

- ``crash``: endless seeded mix of live puts, already-expired puts and ``gc`` over a few scopes
  of two tenants, until the parent kills it with SIGKILL.
- ``gc-pause``: puts many expired blobs and a few live ones, then runs ``gc`` and pauses inside
  its first progress callback (after the commit that removed the rows, between unlink batches)
  until the parent writes a line on stdin, or kills it there.
- ``writer``: waits at a barrier (a line on stdin), then puts its planned share of a common
  payload pool, reads every reference back, and reports.
- ``churn``: waits at the barrier, then alternates expired puts of pool payloads (and of payloads
  of its own) with ``gc``, so collection races the writers.
- ``open-race``: for each index the parent writes on stdin, opens (creating) that store and
  reports whether the open succeeded.

The tests import this file by path for what both sides must agree on: the payloads (derived from
a key, so the parent can check exact bytes), the writers' plans, the scopes, and a bounded
line reader over a child's stdout.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

KiB = 1024
MiB = 1024 * KiB
DAY = 86400.0

# -- what the parent and the children agree on ------------------------------------------------

CRASH_TENANTS = ("t-alpha", "t-beta")
CRASH_USER = "u-crash"
CRASH_SESSIONS = ("s-0", "s-1", "s-2")
CRASH_POOL = 24
"""Keys below this repeat across rounds and scopes; others are fresh for each write."""

GC_TENANT = "t-alpha"
GC_EXPIRED_SCOPE = (GC_TENANT, "u-old", "s-old")
GC_LIVE_SCOPE = (GC_TENANT, "u-live", "s-live")
GC_LIVE_KEYS = tuple(range(900_000, 900_005))

POOL_SIZE = 40
CORE_KEYS = tuple(range(10))
"""Every writer puts every core payload (in its own sessions and in the shared scope)."""
MP_TENANTS = ("t-one", "t-two")
SHARED_SCOPE = ("t-one", "u-shared", "s-shared")
CHURN_SCOPES = (("t-one", "u-churn", "s-churn"), ("t-two", "u-churn", "s-churn"))
CHURN_POOL_KEYS = (*range(0, 5), *range(30, 40))
"""Pool payloads the churn process also writes (expired), so gc races their live writers."""
CHURN_OWN_KEYS = tuple(range(500, 508))
"""Payloads only the churn process writes: every gc must remove them."""


def _sized_payload(label: str, key: int, low: int, high: int) -> bytes:
    rng = random.Random(f"{label}:{key}")
    size = int(math.exp(rng.uniform(math.log(low), math.log(high))))
    return rng.randbytes(size)


def crash_payload(key: int) -> bytes:
    """The bytes of crash-test key ``key``: seeded, 1 KiB to 2 MiB (log-uniform)."""
    return _sized_payload("crash", key, KiB, 2 * MiB)


def small_payload(key: int) -> bytes:
    """The bytes of small key ``key``: 1 KiB to 4 KiB, so hundreds of puts stay quick."""
    return _sized_payload("small", key, KiB, 4 * KiB)


def pool_payload(key: int) -> bytes:
    """The bytes of multi-process pool key ``key``: 1 KiB to 1 MiB (log-uniform)."""
    return _sized_payload("pool", key, KiB, MiB)


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def writer_plan(worker: int, seed: int) -> list[tuple[str, str, str, int]]:
    """The ``(tenant, user, session, key)`` puts of writer ``worker``, in order.

    Every core key in one of the writer's two sessions and in the shared scope; a seeded sample
    of the rest of the pool; some keys again in the second tenant; some repeated in the same
    session (the repeat must come back ``existing``).
    """
    rng = random.Random(f"plan:{seed}:{worker}")
    rest = [key for key in range(POOL_SIZE) if key not in CORE_KEYS]
    keys = list(CORE_KEYS) + rng.sample(rest, 14)
    user = f"u-{worker}"
    sessions = (f"s-{worker}-a", f"s-{worker}-b")
    plan: list[tuple[str, str, str, int]] = []
    for key in keys:
        session = rng.choice(sessions)
        plan.append((MP_TENANTS[0], user, session, key))
        if rng.random() < 0.3:
            plan.append((MP_TENANTS[1], user, sessions[0], key))
        if rng.random() < 0.15:
            plan.append((MP_TENANTS[0], user, session, key))
    plan.extend((*SHARED_SCOPE, key) for key in CORE_KEYS)
    rng.shuffle(plan)
    return plan


def spawn(mode: str, spec: dict[str, Any], stderr_path: Any) -> subprocess.Popen[bytes]:
    """Start this file as a child in ``mode``; its stderr is appended to ``stderr_path``."""
    with open(stderr_path, "ab") as stderr:
        return subprocess.Popen(
            [sys.executable, __file__, mode, json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )


class LineReader:
    """Complete lines from a child's stdout, every wait bounded by a deadline."""

    def __init__(self, stream: Any) -> None:
        self._fd = stream.fileno()
        self._buffer = b""
        self.eof = False

    def _fill(self, timeout: float) -> bool:
        """Read what is available within ``timeout``; False when nothing came."""
        if self.eof:
            return False
        ready, _, _ = select.select([self._fd], [], [], max(timeout, 0.0))
        if not ready:
            return False
        chunk = os.read(self._fd, 65536)
        if not chunk:
            self.eof = True
            return False
        self._buffer += chunk
        return True

    def _pop(self) -> dict[str, Any] | None:
        line, sep, rest = self._buffer.partition(b"\n")
        if not sep:
            return None
        self._buffer = rest
        parsed: dict[str, Any] = json.loads(line)
        return parsed

    def next(self, timeout: float) -> dict[str, Any]:
        """The next complete line as JSON.

        Raises:
            TimeoutError: nothing complete within ``timeout`` seconds.
            EOFError: the child closed its stdout first.
        """
        deadline = time.monotonic() + timeout
        while True:
            line = self._pop()
            if line is not None:
                return line
            if self.eof:
                raise EOFError("the child closed its output")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no line from the child in time")
            self._fill(remaining)

    def wait_for_output(self, timeout: float) -> None:
        """Wait at most ``timeout`` seconds, returning early when output arrives."""
        if self._buffer.count(b"\n") == 0:
            self._fill(timeout)

    def rest(self, timeout: float) -> list[dict[str, Any]]:
        """Every complete line until end of output; a torn last line is dropped."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the child's output did not end in time")
            self._fill(remaining)
        lines = []
        while (line := self._pop()) is not None:
            lines.append(line)
        return lines


# -- the child side -----------------------------------------------------------------------------


def _emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def _big_limits() -> Any:
    from cargohold import Limits

    # The crash and gc tests pile up hundreds of artifacts in a handful of sessions; they are
    # about durability, not quotas.
    return Limits(
        session_bytes=4096 * MiB,
        session_objects=100_000,
        store_bytes=16_384 * MiB,
        store_objects=1_000_000,
    )


def _past_clock() -> float:
    """Two days ago: an artifact written with this clock and a one-hour TTL is already expired."""
    return time.time() - 2 * DAY


def _crash(spec: dict[str, Any]) -> None:
    import cargohold

    limits = _big_limits()
    store = cargohold.LocalStore(spec["root"], limits=limits)
    past = cargohold.LocalStore(spec["root"], limits=limits, clock=_past_clock)
    rng = random.Random(spec["seed"])
    fresh = 1_000_000 * (spec["round"] + 1)
    _emit(op="ready")
    for step in range(spec["max_ops"]):
        roll = rng.random()
        if roll < 0.12:
            report = store.gc()
            _emit(op="gc", artifacts=report.artifacts, blobs=report.blobs)
            continue
        live = roll >= 0.35
        scope = cargohold.Scope(rng.choice(CRASH_TENANTS), CRASH_USER, rng.choice(CRASH_SESSIONS))
        key = rng.randrange(CRASH_POOL) if rng.random() < 0.4 else fresh + step
        data = crash_payload(key)
        # A live write takes the store's default TTL; an expired one is written "two days ago"
        # with a one-hour TTL, which is how the test gives gc work without waiting.
        scoped = cargohold.ScopedStore(store if live else past, scope)
        result = scoped.put(data, kind="crash", ttl=None if live else 3600.0)
        _emit(
            op="put",
            live=live,
            tenant=scope.tenant,
            session=scope.session,
            key=key,
            ref=str(result.ref),
        )
    _emit(op="done")


def _gc_pause(spec: dict[str, Any]) -> None:
    import cargohold

    limits = _big_limits()
    store = cargohold.LocalStore(spec["root"], limits=limits)
    past = cargohold.LocalStore(spec["root"], limits=limits, clock=_past_clock)
    expired = cargohold.ScopedStore(past, cargohold.Scope(*GC_EXPIRED_SCOPE))
    for key in range(spec["expired"]):
        expired.put(small_payload(key), kind="old", ttl=3600.0)
    live = cargohold.ScopedStore(store, cargohold.Scope(*GC_LIVE_SCOPE))
    for key in GC_LIVE_KEYS:
        live.put(small_payload(key), kind="live")
    _emit(op="ready")
    paused = False

    def progress(done: int, total: int) -> None:
        nonlocal paused
        if not paused:
            paused = True
            _emit(op="gc-progress", done=done, total=total)
            sys.stdin.readline()

    report = store.gc(progress=progress)
    _emit(op="gc-done", artifacts=report.artifacts, blobs=report.blobs, paused=paused)


def next_line(reader: LineReader, stderr_path: Path, timeout: float) -> dict[str, Any]:
    """A child's next report line; a child that died or hung fails the test with its stderr."""
    import pytest

    try:
        return reader.next(timeout)
    except (EOFError, TimeoutError) as exc:
        pytest.fail(f"worker {type(exc).__name__}:\n{stderr_path.read_text()}")


def run_together(
    spawn: Callable[[str, dict[str, Any], Path], subprocess.Popen[bytes]],
    children: list[tuple[str, dict[str, Any]]],
    stderr_path: Path,
    timeout: float,
) -> list[list[dict[str, Any]]]:
    """Start every child, release them at once (stdin ``go``), return each one's report lines.

    Every child must exit 0; one that does not fails the test with the children's stderr.
    """
    procs = [spawn(mode, spec, stderr_path) for mode, spec in children]
    try:
        readers = [LineReader(proc.stdout) for proc in procs]
        for reader in readers:
            assert next_line(reader, stderr_path, timeout)["op"] == "ready"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.close()
        reports = [reader.rest(timeout) for reader in readers]
        codes = [proc.wait(timeout=timeout) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=timeout)
            if proc.stdout is not None:
                proc.stdout.close()
    assert codes == [0] * len(procs), stderr_path.read_text()
    return reports


def _barrier() -> None:
    _emit(op="ready")
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("released without go")


def _writer(spec: dict[str, Any]) -> None:
    import cargohold

    _barrier()
    # Opened after the barrier on purpose: several processes opening one store at once is part
    # of what is tested.
    store = cargohold.LocalStore(spec["root"])
    write_plan(store, spec)
    store.close()


def write_plan(store: Any, spec: dict[str, Any]) -> None:
    """Put this writer's share of the pool into ``store``, reporting each put, then read every
    reference back and report how many came back exact. Shared by the PostgreSQL worker."""
    import cargohold

    done: list[tuple[cargohold.ScopedStore, str, int]] = []
    for tenant, user, session, key in writer_plan(spec["worker"], spec["seed"]):
        scoped = cargohold.ScopedStore(store, cargohold.Scope(tenant, user, session))
        result = scoped.put(pool_payload(key), media_type="application/octet-stream")
        done.append((scoped, str(result.ref), key))
        _emit(
            op="put",
            tenant=tenant,
            user=user,
            session=session,
            key=key,
            ref=str(result.ref),
            existing=result.existing,
            blob_written=result.blob_written,
        )
    exact = 0
    for scoped, ref, key in done:
        got = scoped.read(ref)
        exact += got.ok and got.data == pool_payload(key)
    _emit(op="readback", exact=exact, total=len(done))


def _churn(spec: dict[str, Any]) -> None:
    import cargohold

    _barrier()
    store = cargohold.LocalStore(spec["root"])
    past = cargohold.LocalStore(spec["root"], clock=_past_clock)
    scopes = [cargohold.ScopedStore(past, cargohold.Scope(*scope)) for scope in CHURN_SCOPES]
    for turn in range(spec["turns"]):
        rows = 0
        for scoped in scopes:
            for key in CHURN_POOL_KEYS:
                scoped.put(pool_payload(key), ttl=3600.0)
                rows += 1
            for key in CHURN_OWN_KEYS:
                scoped.put(small_payload(key), ttl=3600.0)
                rows += 1
        report = store.gc()
        _emit(op="gc", turn=turn, rows=rows, artifacts=report.artifacts, blobs=report.blobs)
    store.close()
    past.close()


def _open_race(spec: dict[str, Any]) -> None:
    import cargohold

    _emit(op="ready")
    # Each line names a store that every child opens at once; the first open of a store
    # creates its index, so the children race to create it.
    for line in sys.stdin:
        if line.strip() == "stop":
            return
        index = int(line)
        try:
            cargohold.LocalStore(spec["roots"][index]).close()
        except cargohold.CargoholdError as exc:
            _emit(op="open", index=index, ok=False, code=exc.code)
        else:
            _emit(op="open", index=index, ok=True, code=None)


MODES = {
    "crash": _crash,
    "gc-pause": _gc_pause,
    "writer": _writer,
    "churn": _churn,
    "open-race": _open_race,
}


def main(argv: list[str]) -> int:
    mode, spec = argv[1], json.loads(argv[2])
    MODES[mode](spec)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
