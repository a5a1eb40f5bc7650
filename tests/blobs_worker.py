"""A child process driving one PostgreSQL store with its object storage tier: a "host".

Run as a script, ``python tests/blobs_worker.py MODE SPEC_JSON``, with the AWS variables of the
test server in its environment; it prints one JSON line after each completed operation. Every
mode opens its store, prints ``ready`` and waits for ``go`` on stdin, so the parent releases all
children at once and they really race.

- ``writer``: rounds over a pool of payloads every writer shares (so identical bytes race),
  for ``seconds``: each payload is put already expired (a record gc may collect at once), and
  every third round also live for a short TTL, then read back at once; the line says whether
  the read resolved to the exact bytes, or came after the expiry (``late``).
- ``gc``: runs ``gc`` in a loop until stdin says ``stop``.
- ``crash-after-upload``: puts one payload and dies (``os._exit``) the moment its body is in the
  bucket, before the put's transaction: what a host killed mid-put leaves.
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
TENANT = "t-hosts"
POOL = 6
DAY = 86400.0


def payload(key: int) -> bytes:
    """The shared pool: 70 KiB to about 600 KiB, over the tier's threshold, derived from a key."""
    rng = random.Random(f"blobs-pool:{key}")
    return rng.randbytes(70 * KiB + key * 100 * KiB + rng.randrange(4096))


def spawn(mode: str, spec: dict[str, Any], stderr_path: Any) -> subprocess.Popen[bytes]:
    """Start this file as a child in ``mode``; its stderr is appended to ``stderr_path``."""
    with open(stderr_path, "ab") as stderr:
        return subprocess.Popen(
            [sys.executable, __file__, mode, json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )


def _emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def _barrier() -> None:
    _emit(op="ready")
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("released without go")


def _open(spec: dict[str, Any], clock: Any = time.time) -> Any:
    from cargohold import Limits
    from cargohold.store._postgres import PostgresStore

    return PostgresStore(
        spec["url"],
        clock=clock,
        limits=Limits(
            session_bytes=1 << 40,
            session_objects=1 << 20,
            store_bytes=1 << 40,
            store_objects=1 << 20,
        ),
        max_size=2,
        blobs=spec["blobs"],
        blobs_timeout=spec.get("timeout", 30.0),
    )


def _writer(spec: dict[str, Any]) -> None:
    from cargohold import ReadOutcome, Scope, ScopedStore

    now = _open(spec)
    past = _open(spec, clock=lambda: time.time() - 2 * DAY)
    worker = spec["worker"]
    old = ScopedStore(past, Scope(TENANT, "u-old", f"s-{worker}"))
    _barrier()
    deadline = time.monotonic() + spec["seconds"]
    turn = 0
    while time.monotonic() < deadline:
        live = ScopedStore(now, Scope(TENANT, f"u-{worker}", f"s-{turn}"))
        for key in range(POOL):
            data = payload(key)
            expired = old.put(data, ttl=3600.0)
            if (key + turn + worker) % 3:
                # Between its live puts a payload is named by expired records only: gc may
                # collect its blob while the other host is about to put it again.
                _emit(op="expired-put", key=key, blob_written=expired.blob_written)
                continue
            put = live.put(data, ttl=spec["ttl"])
            read = live.read(put.ref)
            _emit(
                op="put",
                turn=turn,
                key=key,
                ref=str(put.ref),
                expires=put.record.expires,
                blob_written=put.blob_written + expired.blob_written,
                read=read.outcome.value,
                exact=read.outcome is ReadOutcome.RESOLVED and read.data == data,
                late=time.time() >= put.record.expires,
            )
        turn += 1
    now.close()
    past.close()
    _emit(op="done", turns=turn)


def _stop_requested() -> bool:
    ready, _, _ = select.select([0], [], [], 0)
    if not ready:
        return False
    os.read(0, 4096)
    return True


def _gc(spec: dict[str, Any]) -> None:
    store = _open(spec)
    _barrier()
    turn = 0
    while not _stop_requested():
        report = store.gc()
        _emit(op="gc", turn=turn, artifacts=report.artifacts, blobs=report.blobs)
        turn += 1
    store.close()
    _emit(op="done", turns=turn)


def _crash_after_upload(spec: dict[str, Any]) -> None:
    from cargohold import Scope, ScopedStore

    store = _open(spec)
    tier = store._tier
    real = tier.upload

    def upload_then_die(digest: str, nonce: str, data: bytes) -> None:
        real(digest, nonce, data)
        _emit(op="uploaded", digest=digest)
        os._exit(9)  # killed between the upload and the put's transaction

    tier.upload = upload_then_die
    _barrier()
    ScopedStore(store, Scope(TENANT, "u-crash", "s-crash")).put(payload(spec["key"]))
    _emit(op="committed")  # never reached


MODES = {"writer": _writer, "gc": _gc, "crash-after-upload": _crash_after_upload}


def main(argv: list[str]) -> int:
    mode, spec = argv[1], json.loads(argv[2])
    MODES[mode](spec)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
