"""A child process that drives one PostgreSQL store, for the multi-process and fault tests.

Run as a script, ``python tests/pg_worker.py MODE SPEC_JSON``; it prints one JSON line after each
completed operation, so a line on the parent's side means "this finished". Every mode opens its
store first, prints ``ready`` and waits for ``go`` on stdin, so the parent releases all children
at once and their writes really race.

- ``writer``: puts its plan (overlapping payloads, see ``store_worker.writer_plan``), reads every
  reference back, and reports.
- ``quota``: puts its share of distinct payloads into the scopes the spec names, against tight
  limits; reports each put as stored or refused (with the refusal's reason).
- ``churn``: alternates already-expired puts of pool payloads (and of its own) with ``gc``, so
  collection races the writers re-referencing the same bytes.
- ``stream``: puts fresh payloads until stdin says ``stop``, reporting each success and each
  typed error; the fault tests kill connections or the server under it.

The payloads, plans, scopes and the bounded line reader come from ``store_worker.py``, which the
local store's multi-process tests use: both backends race over the same workload.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_STORE_WORKER = Path(__file__).with_name("store_worker.py")
_spec = importlib.util.spec_from_file_location("cargohold_test_store_worker", _STORE_WORKER)
assert _spec is not None
assert _spec.loader is not None
shared = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shared)

KiB = 1024
MiB = 1024 * KiB
DAY = 86400.0

STREAM_TENANT = "t-stream"
STREAM_USER = "u-stream"


def quota_payload(worker: int, index: int) -> bytes:
    """Distinct bytes for each (worker, index): every quota put is a new artifact and blob."""
    return random.Random(f"quota:{worker}:{index}").randbytes(2 * KiB + index)


def stream_payload(worker: int, index: int) -> bytes:
    """Distinct bytes of 256 KiB to 2 MiB: big enough that a kill often lands mid-write."""
    rng = random.Random(f"stream:{worker}:{index}")
    return rng.randbytes(rng.randrange(256 * KiB, 2 * MiB))


def spawn(mode: str, spec: dict[str, Any], stderr_path: Any) -> subprocess.Popen[bytes]:
    """Start this file as a child in ``mode``; its stderr is appended to ``stderr_path``."""
    with open(stderr_path, "ab") as stderr:
        return subprocess.Popen(
            [sys.executable, __file__, mode, json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )


# -- the child side -----------------------------------------------------------------------------


def _emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def _barrier() -> None:
    _emit(op="ready")
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("released without go")


def _open(spec: dict[str, Any], clock: Any = time.time, limits: Any = None) -> Any:
    from cargohold.store._postgres import PostgresStore

    return PostgresStore(
        spec["url"],
        clock=clock,
        limits=limits or shared._big_limits(),
        timeout=spec.get("timeout", 30.0),
        retries=spec.get("retries", 2),
    )


def _writer(spec: dict[str, Any]) -> None:
    store = _open(spec)
    _barrier()
    shared.write_plan(store, spec)
    store.close()


def _quota(spec: dict[str, Any]) -> None:
    import cargohold

    store = _open(spec, limits=cargohold.Limits(**spec["limits"]))
    scopes = [cargohold.Scope(*scope) for scope in spec["scopes"]]
    _barrier()
    for index in range(spec["puts"]):
        scope = scopes[index % len(scopes)]
        data = quota_payload(spec["worker"], index)
        try:
            cargohold.ScopedStore(store, scope).put(data)
        except cargohold.LimitExceededError as exc:
            _emit(op="refused", index=index, reason=exc.reason, session=scope.session)
        else:
            _emit(op="stored", index=index, size=len(data), session=scope.session)
    store.close()


def _churn(spec: dict[str, Any]) -> None:
    import cargohold

    store = _open(spec)
    past = _open(spec, clock=shared._past_clock)
    scopes = [cargohold.ScopedStore(past, cargohold.Scope(*scope)) for scope in shared.CHURN_SCOPES]
    _barrier()
    for turn in range(spec["turns"]):
        rows = 0
        for scoped in scopes:
            for key in shared.CHURN_POOL_KEYS:
                scoped.put(shared.pool_payload(key), ttl=3600.0)
                rows += 1
            for key in shared.CHURN_OWN_KEYS:
                scoped.put(shared.small_payload(key), ttl=3600.0)
                rows += 1
        report = store.gc()
        _emit(op="gc", turn=turn, rows=rows, artifacts=report.artifacts, blobs=report.blobs)
    store.close()
    past.close()


def _stop_requested() -> bool:
    """Whether the parent wrote anything more (``stop``) or closed stdin."""
    ready, _, _ = select.select([0], [], [], 0)
    if not ready:
        return False
    os.read(0, 4096)
    return True


def _stream(spec: dict[str, Any]) -> None:
    import cargohold

    store = _open(spec)
    scoped = cargohold.ScopedStore(
        store, cargohold.Scope(STREAM_TENANT, STREAM_USER, f"s-{spec['worker']}")
    )
    _barrier()
    index = 0
    while not _stop_requested():
        data = stream_payload(spec["worker"], index)
        try:
            result = scoped.put(data)
        except cargohold.CargoholdError as exc:
            _emit(op="error", index=index, code=exc.code, type=type(exc).__name__)
        else:
            _emit(op="put", index=index, ref=str(result.ref), existing=result.existing)
        index += 1
    store.close()
    _emit(op="done", attempts=index)


MODES = {"writer": _writer, "quota": _quota, "churn": _churn, "stream": _stream}


def main(argv: list[str]) -> int:
    mode, spec = argv[1], json.loads(argv[2])
    MODES[mode](spec)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
