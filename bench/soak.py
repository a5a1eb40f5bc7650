"""Soak: kill writers and gc with SIGKILL on the local store, and PostgreSQL under writers, and
count what was lost.

``python -m bench soak [--local-trials N] [--pg-kills N] [--tampered-ops N] [--quick] ...`` (also
``python -m bench.soak``). Prints lost / corrupt / partial counts and exits 1 when any is not
zero (or a worker died on its own), 0 otherwise. See ``docs/reliability.md``.

A local trial: ``--writers`` processes put and re-put short-TTL content (a pool of 16 bodies of
256 B to 256 KiB, four scopes of two tenants, TTLs of 20 to 200 ms, so re-puts land near expiry
all the time) and now and then run ``gc``, while one more process runs ``gc`` in a loop; all on
one store root. Each writer appends every put that returned to a log (scope, ref, the expiry the
put reported), fsynced, only after ``put`` returned. At a random moment every process is killed
with SIGKILL. Then a fresh handle, whose clock is frozen at the moment the last process died,
checks:

- every put any writer logged whose reported expiry is after that moment (since the root was
  made, over all trials so far) reads back resolved, exact bytes, with an expiry no earlier than
  reported; otherwise it is **lost** (missing, expired, or a shortened life);
- every row the store shows, live at that moment, reads back whole; otherwise **partial** (a row
  visible without all of its bytes); ``verify`` finding a row without its blob is partial too;
- every logged ref is the SHA-256 of the body put, every byte read is the body's, and ``verify``
  finds no corrupt or unknown entry; otherwise **corrupt**.

Leftovers of an interrupted write (staged files, orphan blobs) are housekeeping, counted but not
failures. A PostgreSQL kill: the same writers and gc loop against a throwaway durable cluster,
then ``kill -9`` of the whole server (postmaster and every child at once) or of one backend
(the postmaster then resets every session and recovers), a moment for the writers to run into
the outage, SIGKILL of the writers, a restart (or the automatic recovery), and the same checks.
While the server is down, puts must fail with ``store_unavailable`` and nothing else.

Tampered-index mode (``--tampered-ops N``): one process drives a local store through N random
operations (puts, reads, ranges, stats, touches, listings, usage, gc, verify, clock jumps), a
third of them an edit of the index behind the store's back that plants a bad row: a digest that
is ``../`` + the absolute path of a file outside the root, upper case, short or holding a
slash; text, a blob or a negative number where a size, a time or a count belongs; an unknown
sensitivity; a tenant that is not text; a chunk table that is not bytes; a record pointed at
another blob or resized. It counts **touched** (a file outside the root whose bytes, inode or
mtime changed, or a new file beside them), **untyped** (an exception that is not a
``CargoholdError``), **blocked** (``artifacts``, ``gc`` or ``verify`` raising at all: one bad
row must never stop a scope's listing or the housekeeping), and **hung** (no progress within
``WAIT`` seconds: the driver runs in a child process the parent kills).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import functools
import hashlib
import json
import math
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCOPES = tuple((tenant, "u-soak", session) for tenant in ("t-a", "t-b") for session in ("s0", "s1"))
POOL = 16
TTLS = (0.02, 0.05, 0.1, 0.2)
"""Seconds, all short: re-puts land near expiry all the time and gc always has work (one long
TTL in the mix would keep most rows alive and hide the race); the puts of the last 200 ms before
a kill are still alive after it, so there is always something to check."""
WRITER_GC_SHARE = 0.03
WAIT = 120.0
"""Bound on any wait for a child, a server start or a recovery; never reached when all is well."""
EXPECTED_ERRORS = {"local": frozenset(), "postgres": frozenset({"store_unavailable"})}
"""Typed errors a writer may meet: none on the local store; on PostgreSQL, the outage."""


@functools.lru_cache(maxsize=POOL)
def payload(key: int) -> bytes:
    """The body of pool key ``key``: seeded, 256 B to 256 KiB (log-uniform)."""
    rng = random.Random(f"soak:{key}")
    return rng.randbytes(int(math.exp(rng.uniform(math.log(256), math.log(256 * 1024)))))


def _limits() -> Any:
    from cargohold import Limits

    # The soak is about durability, not quotas.
    return Limits(
        session_bytes=1 << 40,
        session_objects=1 << 30,
        store_bytes=1 << 40,
        store_objects=1 << 30,
        max_ttl=60.0,
        default_ttl=5.0,
    )


@dataclass(slots=True)
class Tally:
    """What one backend's soak saw."""

    backend: str
    trials: int = 0
    puts: int = 0
    """Successful puts the writers logged."""
    checked: int = 0
    """Logged puts whose expiry was after a kill, checked after it."""
    rows: int = 0
    """Live rows read back whole after the kills."""
    lost: int = 0
    corrupt: int = 0
    partial: int = 0
    worker_errors: int = 0
    """Children that died on their own (an untranslated exception escaped the store)."""
    errors: Counter[str] = field(default_factory=Counter)
    """Typed errors the writers and gc met, by code."""
    housekeeping: Counter[str] = field(default_factory=Counter)
    """``verify`` findings that a crash may leave (staging, orphan), summed over the checks."""
    left_after_gc: Counter[str] = field(default_factory=Counter)
    """Housekeeping findings ``verify`` still reports after a ``gc`` that followed the check:
    a failure (gc removes every staged file and orphan a dead writer left)."""
    kills: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    details: list[str] = field(default_factory=list)
    """What each of the first failures was, for the report (no bodies: refs and times)."""

    def note(self, text: str) -> None:
        if len(self.details) < 50:
            self.details.append(f"kill {self.trials + 1}: {text}")

    @property
    def unexpected_errors(self) -> int:
        allowed = EXPECTED_ERRORS[self.backend]
        return sum(n for code, n in self.errors.items() if code not in allowed)

    @property
    def failed(self) -> bool:
        return _failures(self) > 0

    def summary(self) -> str:
        kills = ", ".join(f"{n} {kind}" for kind, n in sorted(self.kills.items()))
        errors = ", ".join(f"{code} {n}" for code, n in sorted(self.errors.items())) or "none"
        house = ", ".join(f"{k} {n}" for k, n in sorted(self.housekeeping.items())) or "none"
        return (
            f"{self.backend}: {self.trials} kills ({kills}) in {self.seconds:.0f} s;"
            f" {self.puts} puts logged, {self.checked} checked after a kill,"
            f" {self.rows} live rows read back\n"
            f"  lost {self.lost}, corrupt {self.corrupt}, partial {self.partial};"
            f" workers that died on their own {self.worker_errors};"
            f" typed errors met: {errors}; housekeeping findings: {house};"
            f" left after gc {sum(self.left_after_gc.values())}"
        )


# -- the child side -------------------------------------------------------------------------------


def _child(mode: str, spec: dict[str, Any]) -> None:
    """A writer or a gc loop; runs until killed. ``mode`` is ``{local,postgres}-{writer,gc}``."""
    import cargohold

    backend, role = mode.split("-")
    store: Any
    if backend == "local":
        store = cargohold.LocalStore(spec["root"], limits=_limits())
    else:
        from cargohold.store import PostgresStore

        # A short pool timeout: during an outage a put fails fast and the writer tries again.
        store = PostgresStore(spec["url"], limits=_limits(), max_size=2, timeout=2.0)
    log = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("released without go")
    rng = random.Random(spec["seed"])

    def record(entry: dict[str, Any], *, sync: bool) -> None:
        os.write(log, (json.dumps(entry) + "\n").encode())
        if sync:
            os.fsync(log)

    while True:
        try:
            if role == "gc" or rng.random() < WRITER_GC_SHARE:
                store.gc()
                if role == "gc":
                    time.sleep(rng.uniform(0.0, 0.005))  # a loop, not a lock hog
                continue
            owner = rng.choice(SCOPES)
            key = rng.randrange(POOL)
            scoped = cargohold.ScopedStore(store, cargohold.Scope(*owner))
            result = scoped.put(payload(key), ttl=rng.choice(TTLS))
        except cargohold.CargoholdError as exc:
            record({"op": "error", "code": exc.code}, sync=False)
            time.sleep(0.01)  # the store is down: do not spin
            continue
        # Logged, and fsynced, only once put returned: each line is a promise the store made.
        record(
            {
                "op": "put",
                "owner": owner,
                "key": key,
                "ref": str(result.ref),
                "expires": result.record.expires,
            },
            sync=True,
        )


# -- the parent side ------------------------------------------------------------------------------

Promises = dict[tuple[tuple[str, str, str], str], tuple[float, int]]
"""(owner, digest) -> (the latest expiry a put reported, pool key)."""


class _Children:
    """The writers and the gc loop of one trial: started, released together, killed together."""

    def __init__(self, mode: str, count: int, spec: dict[str, Any], workdir: Path, seed: int):
        self.logs = [workdir / f"child-{i}.log" for i in range(count + 1)]
        self.stderr = workdir / "children.stderr"
        self.procs: list[subprocess.Popen[bytes]] = []
        with open(self.stderr, "ab") as err:
            for i, log in enumerate(self.logs):
                role = "gc" if i == count else "writer"
                child = {**spec, "log": str(log), "seed": seed * 100 + i}
                self.procs.append(
                    subprocess.Popen(
                        [sys.executable, __file__, "--child", f"{mode}-{role}", json.dumps(child)],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=err,
                    )
                )

    def release(self) -> None:
        """Wait (bounded) for every child's ``ready``, then let them all go at once."""
        deadline = time.monotonic() + WAIT
        for proc in self.procs:
            assert proc.stdout is not None
            ready, _, _ = select.select(
                [proc.stdout], [], [], max(0.0, deadline - time.monotonic())
            )
            if not ready or proc.stdout.readline().strip() != b"ready":
                raise RuntimeError("a soak child did not start:\n" + self.tail())
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.flush()

    def run_for(self, seconds: float) -> None:
        """Let the children work for ``seconds``; returns early if one of them dies."""
        streams = [proc.stdout for proc in self.procs if proc.stdout is not None]
        select.select(streams, [], [], seconds)  # a child writes nothing more: readable = died

    def kill(self) -> int:
        """SIGKILL every child; the number that had died on their own before."""
        died = 0
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs:
            code = proc.wait(timeout=WAIT)
            died += code != -signal.SIGKILL
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        return died

    def tail(self) -> str:
        text = self.stderr.read_text(errors="replace") if self.stderr.exists() else ""
        return text[-4000:]

    def harvest(self, promises: Promises, tally: Tally) -> None:
        """Read the children's logs into ``promises``; a torn last line is not a promise."""
        for log in self.logs:
            if not log.exists():
                continue
            for line in log.read_bytes().split(b"\n"):
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # the torn line of a write the kill interrupted (or the final "")
                if entry["op"] == "error":
                    tally.errors[entry["code"]] += 1
                    continue
                tally.puts += 1
                owner, key = tuple(entry["owner"]), entry["key"]
                digest = entry["ref"].removeprefix("artifact://sha256/")
                if digest != hashlib.sha256(payload(key)).hexdigest():
                    tally.corrupt += 1  # the ref is not the SHA-256 of what was put
                    continue
                held = promises.get((owner, digest))
                if held is None or entry["expires"] > held[0]:
                    promises[(owner, digest)] = (entry["expires"], key)
            log.unlink()


def check(store: Any, promises: Promises, dead_at: float, tally: Tally) -> None:
    """Check ``store`` (a fresh handle whose clock reads ``dead_at``) against the promises.

    Drops the promises that expired by ``dead_at``: no later check can hold the store to them.
    """
    from cargohold import ReadOutcome, Ref, Scope, ScopedStore

    partial: set[str] = set()
    corrupt: set[str] = set()
    for (owner, digest), (expires, key) in sorted(promises.items()):
        if expires <= dead_at:
            del promises[(owner, digest)]
            continue
        tally.checked += 1
        got = ScopedStore(store, Scope(*owner)).read(Ref(digest))
        held = None if got.record is None else got.record.expires
        if got.outcome is ReadOutcome.STALE:
            partial.add(digest)
        elif got.outcome is not ReadOutcome.RESOLVED or held is None or held < expires:
            # Missing, expired, or its life cut short (the put's extension was lost).
            tally.lost += 1
            tally.note(
                f"lost: {'/'.join(owner)} {digest[:12]} reads {got.outcome.value}; the put"
                f" reported expiry {expires - dead_at:+.3f} s after the kill, the store holds"
                f" {'no record' if held is None else f'{held - dead_at:+.3f} s'}"
            )
        elif got.data != payload(key):
            corrupt.add(digest)
    bodies = {hashlib.sha256(payload(key)).hexdigest(): payload(key) for key in range(POOL)}
    for owner in SCOPES:
        scoped = ScopedStore(store, Scope(*owner))
        for record in scoped.artifacts():
            if record.expires <= dead_at:
                continue  # expired rows are not readable; verify checks their bytes below
            tally.rows += 1
            got = scoped.read(record.ref)
            body = bodies.get(record.ref.digest)
            if got.outcome is not ReadOutcome.RESOLVED or body is None:
                partial.add(record.ref.digest)
            elif got.data != body or record.size != len(body):
                corrupt.add(record.ref.digest)
    for finding in store.verify():
        if finding.kind in ("staging", "orphan"):
            tally.housekeeping[finding.kind] += 1
        elif finding.kind == "missing_blob":
            partial.add(finding.digest or "?")
        else:
            corrupt.add(finding.digest or "?")
    tally.partial += len(partial)
    tally.corrupt += len(corrupt)
    # Then what gc makes of the leftovers: every one removed (only what expired by the frozen
    # clock goes with them, so every promise still alive stays for the next check).
    store.gc()
    for finding in store.verify():
        if finding.kind in ("staging", "orphan"):
            tally.left_after_gc[finding.kind] += 1
            tally.note(f"{finding.kind} left after gc")


def run_local(
    trials: int,
    *,
    workdir: Path,
    seed: int = 1,
    writers: int = 4,
    max_run: float = 1.0,
    trials_per_root: int = 50,
    report: Callable[[str], None] = print,
) -> Tally:
    """``trials`` SIGKILL trials of writers and gc against local stores under ``workdir``.

    A root serves ``trials_per_root`` trials in a row (each starts on the store the last one's
    kill left, and is held to every promise still alive), then a fresh root is made.
    """
    from cargohold import LocalStore
    from cargohold.testing import FakeClock

    tally = Tally("local")
    began = time.monotonic()
    rng = random.Random(f"local:{seed}")
    promises: Promises = {}
    root = workdir / "root-0"
    for trial in range(trials):
        if trial % trials_per_root == 0:
            shutil.rmtree(root, ignore_errors=True)
            root = workdir / f"root-{trial // trials_per_root}"
            promises.clear()
        children = _Children("local", writers, {"root": str(root)}, workdir, seed * 100_000 + trial)
        before = _failures(tally)
        try:
            children.release()
            children.run_for(rng.uniform(0.0, max_run))
        finally:
            tally.worker_errors += children.kill()
        # Every child is dead and reaped: nothing could collect a row after this moment.
        dead_at = time.time()
        tally.kills["SIGKILL"] += 1
        children.harvest(promises, tally)
        store = LocalStore(root, limits=_limits(), clock=FakeClock(dead_at))
        try:
            check(store, promises, dead_at, tally)
        finally:
            store.close()
        tally.trials += 1
        _progress(tally, trials, report, children, before)
    shutil.rmtree(root, ignore_errors=True)
    tally.seconds = time.monotonic() - began
    return tally


def _progress(
    tally: Tally, total: int, report: Callable[[str], None], children: _Children, before: int
) -> None:
    """A line every ten kills, and after any kill that found something (``before``: the count
    of failures before it); a worker's stderr when one died on its own."""
    if _failures(tally) > before or tally.trials % 10 == 0 or tally.trials == total:
        report(
            f"  {tally.backend} {tally.trials}/{total}: puts {tally.puts}, checked"
            f" {tally.checked}, lost {tally.lost}, corrupt {tally.corrupt}, partial"
            f" {tally.partial}, dead workers {tally.worker_errors}"
        )
    if tally.worker_errors and _failures(tally) > before:
        report(children.tail())


def _failures(tally: Tally) -> int:
    return (
        tally.lost
        + tally.corrupt
        + tally.partial
        + tally.worker_errors
        + tally.unexpected_errors
        + sum(tally.left_after_gc.values())
    )


# -- the tampered index ---------------------------------------------------------------------------

TAMPER_SHARE = 0.33
"""Of the tampered mode's operations, the share that plants a bad row."""
VICTIMS = 4
"""Files outside the root that planted digests point at."""


@dataclass(slots=True)
class TamperTally:
    """What the tampered-index mode saw."""

    ops: int = 0
    tampers: int = 0
    """Bad rows planted (an edit the schema refused is not counted)."""
    refused_by_schema: int = 0
    touched: int = 0
    untyped: int = 0
    blocked: int = 0
    hung: int = 0
    typed: Counter[str] = field(default_factory=Counter)
    """Typed errors met, by code: the answers to bad rows."""
    findings: Counter[str] = field(default_factory=Counter)
    """``verify`` findings over the run, by kind."""
    seconds: float = 0.0
    details: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if len(self.details) < 50:
            self.details.append(f"op {self.ops}: {text}")

    @property
    def failed(self) -> bool:
        return bool(self.touched or self.untyped or self.blocked or self.hung)

    def summary(self) -> str:
        typed = ", ".join(f"{code} {n}" for code, n in sorted(self.typed.items())) or "none"
        found = ", ".join(f"{kind} {n}" for kind, n in sorted(self.findings.items())) or "none"
        return (
            f"tampered index: {self.ops} operations, {self.tampers} bad rows planted"
            f" ({self.refused_by_schema} edits the schema refused) in {self.seconds:.0f} s\n"
            f"  touched outside the root {self.touched}, untyped errors {self.untyped},"
            f" blocked listings or housekeeping {self.blocked}, hung {self.hung};"
            f" typed errors met: {typed}; verify findings: {found}"
        )


def _is_digest(text: str) -> bool:
    return len(text) == 64 and set(text) <= set("0123456789abcdef")


def _victims(outside: Path) -> dict[str, tuple[bytes, int, int]]:
    """The files outside the root, as (bytes, inode, mtime in ns), by name."""
    found = {}
    for path in sorted(outside.iterdir()):
        info = path.lstat()
        found[path.name] = (path.read_bytes(), info.st_ino, info.st_mtime_ns)
    return found


def _bad_edit(rng: random.Random, outside: Path, digests: list[str]) -> tuple[str, tuple[Any, ...]]:
    """One random edit of the index that plants a bad row: SQL and its parameters."""
    victim = str(outside / f"victim-{rng.randrange(VICTIMS)}")
    target = rng.choice(digests) if digests else "0" * 64
    other = rng.choice(digests) if digests else "f" * 64
    bad_digest = rng.choice(
        [
            "../" + victim,
            ".." + victim,
            "../../../../../.." + victim,
            target.upper(),
            target[:40],
            target[:30] + "/" + target[31:],
            target + "0",
            "",
        ]
    )
    bad_value = rng.choice(["big", "", "NaN", b"\x00\x01", -5, 1 << 62, 1.5])
    edits: list[tuple[str, tuple[Any, ...]]] = [
        ("UPDATE blobs SET digest = ? WHERE digest = ?", (bad_digest, target)),
        ("UPDATE artifacts SET digest = ? WHERE digest = ?", (bad_digest, target)),
        ("UPDATE artifacts SET digest = ? WHERE digest = ?", (other, target)),
        ("UPDATE artifacts SET size = ? WHERE digest = ?", (bad_value, target)),
        ("UPDATE artifacts SET size = size + 1 WHERE digest = ?", (target,)),
        ("UPDATE artifacts SET expires = ? WHERE digest = ?", (bad_value, target)),
        ("UPDATE artifacts SET created = ? WHERE digest = ?", (bad_value, target)),
        ("UPDATE artifacts SET sensitivity = ? WHERE digest = ?", ("secret-ish", target)),
        ("UPDATE artifacts SET complete = ? WHERE digest = ?", (bad_value, target)),
        ("UPDATE artifacts SET tenant = ? WHERE digest = ?", (b"\xff", target)),
        ("UPDATE artifacts SET media_type = ? WHERE digest = ?", (b"\x00", target)),
        ("UPDATE blobs SET size = ? WHERE digest = ?", (bad_value, target)),
        ("UPDATE blobs SET chunks = ? WHERE digest = ?", (rng.choice(["text", b"", b"x"]), target)),
        ("UPDATE blobs SET chunk_size = ? WHERE digest = ?", (rng.choice([0, -1, "x"]), target)),
        ("UPDATE blobs SET tenant = ? WHERE digest = ?", (b"\x00", target)),
        (
            "INSERT INTO artifacts (tenant, user, session, digest, size, media_type, created,"
            " expires, sensitivity, complete) VALUES (?, ?, ?, ?, ?, 'x/y', 0, ?, 'internal', 1)",
            (rng.choice(SCOPES)[0], "u-soak", "s0", bad_digest, bad_value, rng.choice([0, 1e12])),
        ),
        (
            "INSERT INTO blobs (tenant, digest, size, chunk_size, chunks, created)"
            " VALUES (?, ?, ?, 65536, x'00', 0)",
            (rng.choice(SCOPES)[0], bad_digest, bad_value),
        ),
    ]
    if rng.random() < 0.05:  # rarely: the counters (every new blob then meets a typed error)
        edits.append(("UPDATE stats SET bytes = ? WHERE id = 1", (bad_value,)))
    return rng.choice(edits)


def _tampered_child(spec: dict[str, Any]) -> None:
    """The tampered-index driver: prints ``progress <n>`` every 50 operations, then its tally
    as one JSON line. Runs in a child so the parent can bound it in time."""
    import sqlite3

    import cargohold
    from cargohold.testing import FakeClock

    root, outside = Path(spec["root"]), Path(spec["outside"])
    rng = random.Random(spec["seed"])
    clock = FakeClock(1_800_000_000.0)
    tally = TamperTally()
    store = cargohold.LocalStore(root, limits=_limits(), clock=clock)
    before = _victims(outside)
    digests: list[str] = []

    def attempt(name: str, call: Callable[[], Any], *, must_answer: bool = False) -> Any:
        try:
            return call()
        except cargohold.CargoholdError as exc:
            tally.typed[exc.code] += 1
            if must_answer:
                tally.blocked += 1
                tally.note(f"{name} raised {exc.code}")
        except Exception as exc:  # the failure counted: anything untyped
            tally.untyped += 1
            where = traceback.extract_tb(exc.__traceback__)[-1]
            place = f"{Path(where.filename).name}:{where.lineno}"
            tally.note(f"{name}: untyped {type(exc).__name__} at {place}")
        return None

    for op in range(spec["ops"]):
        tally.ops = op + 1
        if op % 50 == 0:
            sys.stdout.write(f"progress {op}\n")
            sys.stdout.flush()
        if rng.random() < TAMPER_SHARE:
            sql, params = _bad_edit(rng, outside, digests)
            db = sqlite3.connect(root / "index.sqlite3", isolation_level=None, timeout=30)
            try:
                db.execute(sql, params)
                tally.tampers += 1
            except sqlite3.IntegrityError:
                tally.refused_by_schema += 1
            finally:
                db.close()
            continue
        owner = cargohold.Scope(*rng.choice(SCOPES))
        scoped = cargohold.ScopedStore(store, owner)
        ref = cargohold.Ref(rng.choice(digests)) if digests else None
        verb = rng.choice(
            [
                "put",
                "put",
                "put",
                "read",
                "range",
                "stat",
                "touch",
                "ls",
                "usage",
                "gc",
                "verify",
                "clock",
            ]
        )
        if verb == "put" or ref is None:
            body = payload(rng.randrange(POOL))
            done = attempt("put", functools.partial(scoped.put, body, ttl=rng.choice([1, 5, 30])))
            if done is not None and done.ref.digest not in digests:
                digests.append(done.ref.digest)
        elif verb == "read":
            attempt("read", functools.partial(scoped.read, ref))
        elif verb == "range":
            start, end = rng.randrange(300), rng.randrange(300, 70_000)
            attempt("range", functools.partial(scoped.read, ref, start=start, end=end))
        elif verb == "stat":
            attempt("stat", functools.partial(scoped.stat, ref))
        elif verb == "touch":
            attempt("touch", functools.partial(scoped.touch, ref, ttl=rng.choice([1, 10])))
        elif verb == "ls":
            attempt("artifacts", scoped.artifacts, must_answer=True)
        elif verb == "usage":
            attempt("usage", scoped.usage)
            attempt("tenant_usage", functools.partial(store.tenant_usage, owner))
            attempt("store_usage", store.store_usage)
        elif verb == "gc":
            attempt("gc", functools.partial(store.gc, dry_run=rng.random() < 0.3), must_answer=True)
        elif verb == "verify":
            found = attempt("verify", store.verify, must_answer=True)
            for finding in found or []:
                tally.findings[finding.kind] += 1
                if finding.digest is not None and not _is_digest(finding.digest):
                    tally.untyped += 1  # a finding that quotes a malformed digest
                    tally.note("a verify finding quotes a malformed digest")
        else:
            clock.advance(rng.choice([0.5, 2, 10, 40]))
    store.close()
    after = _victims(outside)
    if after != before:
        tally.touched += len(set(before.items()) ^ set(after.items())) or 1
        tally.note("files outside the root changed")
    fields = {f.name: getattr(tally, f.name) for f in dataclasses.fields(tally)}
    fields["typed"], fields["findings"] = dict(tally.typed), dict(tally.findings)
    sys.stdout.write(json.dumps({"tally": fields}) + "\n")
    sys.stdout.flush()


def run_tampered(
    ops: int,
    *,
    workdir: Path,
    seed: int = 1,
    report: Callable[[str], None] = print,
) -> TamperTally:
    """``ops`` operations of the tampered-index mode on a fresh local store under ``workdir``,
    driven by a child process that must show progress within ``WAIT`` seconds."""
    root, outside = workdir / "tampered-root", workdir / "outside"
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(outside, ignore_errors=True)
    outside.mkdir(parents=True)
    for index in range(VICTIMS):
        (outside / f"victim-{index}").write_bytes(f"not the store's, {index}\n".encode())
    spec = {"root": str(root), "outside": str(outside), "seed": seed, "ops": ops}
    began = time.monotonic()
    stderr = workdir / "tampered.stderr"
    with open(stderr, "ab") as err:
        child = subprocess.Popen(
            [sys.executable, __file__, "--child", "tampered", json.dumps(spec)],
            stdout=subprocess.PIPE,
            stderr=err,
        )
    assert child.stdout is not None
    tally: TamperTally | None = None
    try:
        while True:
            ready, _, _ = select.select([child.stdout], [], [], WAIT)
            if not ready:
                break  # no progress within WAIT: hung
            line = child.stdout.readline()
            if not line:
                break  # the child died
            if line.startswith(b"progress "):
                done = int(line.split()[1])
                if done and done % 500 == 0:
                    report(f"  tampered {done}/{ops}")
                continue
            fields = json.loads(line)["tally"]
            tally = TamperTally(
                **{
                    **fields,
                    "typed": Counter(fields["typed"]),
                    "findings": Counter(fields["findings"]),
                }
            )
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=WAIT)
        child.stdout.close()
    if tally is None:
        tally = TamperTally(hung=1)
        tally.note("the driver hung or died: " + stderr.read_text(errors="replace")[-2000:])
    tally.seconds = time.monotonic() - began
    shutil.rmtree(root, ignore_errors=True)
    return tally


# -- PostgreSQL -----------------------------------------------------------------------------------

_PR_SET_CHILD_SUBREAPER = 36


def _set_subreaper(on: bool) -> None:
    """Adopt orphaned descendants (Linux), so a killed server's processes are ours to reap.

    Without it a postmaster killed with SIGKILL is reparented to PID 1, which in a container may
    never reap it: its pid then stays "alive" as a zombie and ``pg_ctl start`` refuses to start
    over what it takes for a running server.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _reap(pids: list[int]) -> None:
    """Wait (bounded) for each of ``pids`` to be gone, reaping those that are our children."""
    deadline = time.monotonic() + WAIT
    pending = list(pids)
    while pending:
        for pid in list(pending):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid if _parent_of(pid) is None else 0  # not ours: wait until it is gone
            if done:
                pending.remove(pid)
        if pending:
            if time.monotonic() > deadline:
                raise RuntimeError(f"server processes {pending} did not exit")
            time.sleep(0.01)


def _load_pg_cluster() -> Any:
    """``tests/pg_cluster.py``, the tests' throwaway cluster (it imports ``tests/_require``)."""
    tests = str(Path(__file__).resolve().parent.parent / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import pg_cluster

    return pg_cluster


@contextlib.contextmanager
def _throwaway_cluster() -> Iterator[Any]:
    """A durable cluster (fsync on) on loopback, owned by this process, removed afterwards.

    In the system's temporary directory, as the tests' cluster is: the server's user must be
    able to enter it (pytest's ``tmp_path`` is root-only).
    """
    pg_cluster = _load_pg_cluster()
    bindir = pg_cluster._bindir()
    if bindir is None:
        raise RuntimeError(pg_cluster._MISSING_HINT)
    run_as = None
    base = Path(tempfile.mkdtemp(prefix="cargohold-soak-pg-"))
    if os.geteuid() == 0:
        import pwd

        owner = pwd.getpwnam("postgres")
        os.chown(base, owner.pw_uid, owner.pw_gid)
        run_as = "postgres"
    cluster = pg_cluster.PgCluster(bindir, base, run_as)
    _set_subreaper(True)
    try:
        cluster.init(durable=True)
        cluster.start()
        try:
            yield cluster
        finally:
            pid = _postmaster(cluster)
            if cluster.running():
                cluster.stop("fast")
            if pid is not None:
                _reap([pid])
    finally:
        _set_subreaper(False)
        shutil.rmtree(base, ignore_errors=True)


def _postmaster(cluster: Any) -> int | None:
    try:
        return int((cluster.data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _kill_server(cluster: Any) -> None:
    """``kill -9`` of the whole server: the postmaster and every process it started, at once."""
    postmaster = _postmaster(cluster)
    if postmaster is None:
        raise RuntimeError("no postmaster.pid")
    os.kill(postmaster, signal.SIGSTOP)  # it can fork no new backend while we list its children
    children = [
        int(p) for p in os.listdir("/proc") if p.isdigit() and _parent_of(int(p)) == postmaster
    ]
    for pid in [*children, postmaster]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _reap([postmaster, *children])


def _kill_backend(cluster: Any, dbname: str, rng: random.Random) -> bool:
    """``kill -9`` of one of the writers' backends, one in a statement when there is one."""
    with cluster.connect() as admin:
        rows = admin.execute(
            "SELECT pid, state = 'active' FROM pg_stat_activity"
            " WHERE datname = %s AND application_name = 'cargohold'",
            (dbname,),
        ).fetchall()
    if not rows:
        return False
    busy = [pid for pid, active in rows if active]
    victim = rng.choice(busy or [pid for pid, _ in rows])
    with contextlib.suppress(ProcessLookupError):
        os.kill(victim, signal.SIGKILL)
    return True


def _wait_until_accepting(cluster: Any) -> None:
    """After a backend's crash the postmaster resets and recovers by itself: wait (bounded)."""
    import psycopg

    deadline = time.monotonic() + WAIT
    while True:
        try:
            with cluster.connect() as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.Error:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _kill_under_writers(
    cluster: Any, dbname: str, children: _Children, rng: random.Random, max_run: float
) -> float | None:
    """Release the writers, then ``kill -9`` the whole server (half the time) or one backend.

    Returns, for a whole-server kill, the moment every server process was dead (then nothing
    can run against the store until the restart, which comes after the writers are dead);
    ``None`` for a backend kill, after which the postmaster resets every session and recovers
    by itself and the writers carry on for a moment.
    """
    whole_server = rng.random() < 0.5
    children.release()
    children.run_for(rng.uniform(0.1, max_run))
    if not whole_server and _kill_backend(cluster, dbname, rng):
        _wait_until_accepting(cluster)
        children.run_for(rng.uniform(0.1, 0.4))  # the pools reconnect and write again
        return None
    _kill_server(cluster)
    dead_at = time.time()
    children.run_for(rng.uniform(0.0, 0.3))  # the writers meet the outage
    return dead_at


def run_postgres(
    kills: int,
    *,
    workdir: Path,
    seed: int = 1,
    writers: int = 4,
    max_run: float = 1.0,
    report: Callable[[str], None] = print,
) -> Tally:
    """``kills`` server or backend kills with SIGKILL under writers and gc, on a throwaway
    durable cluster (``tests/pg_cluster.py``) this process starts, owns and removes."""
    from cargohold.store import PostgresStore, upgrade_schema
    from cargohold.testing import FakeClock

    tally = Tally("postgres")
    began = time.monotonic()
    rng = random.Random(f"postgres:{seed}")
    promises: Promises = {}
    with _throwaway_cluster() as cluster:
        url = cluster.create_database("soak")
        upgrade_schema(url)
        dbname = url.rsplit("/", 1)[1]
        for trial in range(kills):
            children = _Children("postgres", writers, {"url": url}, workdir, seed * 100_000 + trial)
            before = _failures(tally)
            try:
                server_dead_at = _kill_under_writers(cluster, dbname, children, rng, max_run)
            finally:
                tally.worker_errors += children.kill()
            if server_dead_at is None:
                tally.kills["backend"] += 1
                dead_at = time.time()  # the writers, and their gc, are dead and reaped
            else:
                tally.kills["server"] += 1
                dead_at = server_dead_at
                cluster.start()
            children.harvest(promises, tally)
            store = PostgresStore(url, limits=_limits(), clock=FakeClock(dead_at), max_size=2)
            try:
                check(store, promises, dead_at, tally)
            finally:
                store.close()
            tally.trials += 1
            _progress(tally, kills, report, children, before)
    tally.seconds = time.monotonic() - began
    return tally


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        if argv[1] == "tampered":
            _tampered_child(json.loads(argv[2]))
        else:
            _child(argv[1], json.loads(argv[2]))
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m bench soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--local-trials", type=int, default=1000, metavar="N")
    parser.add_argument("--pg-kills", type=int, default=100, metavar="N")
    parser.add_argument(
        "--tampered-ops",
        type=int,
        default=1000,
        metavar="N",
        help="operations of the tampered-index mode on the local store (0: skip)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="CI's short run: 20 local trials, 3 PostgreSQL kills (tampered ops unchanged)",
    )
    parser.add_argument("--writers", type=int, default=4, help="writer processes (plus one gc)")
    parser.add_argument(
        "--max-run", type=float, default=1.0, metavar="S", help="most seconds before a kill"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, help="where the stores live (a temporary dir)")
    args = parser.parse_args(argv)
    if args.quick:
        args.local_trials, args.pg_kills = 20, 3
    began = time.monotonic()
    tallies = []
    tampered: TamperTally | None = None
    with _workdir(args.workdir) as workdir:
        if args.local_trials > 0:
            print(
                f"local: {args.local_trials} SIGKILL trials, {args.writers} writers + gc",
                flush=True,
            )
            tallies.append(
                run_local(
                    args.local_trials,
                    workdir=workdir,
                    seed=args.seed,
                    writers=args.writers,
                    max_run=args.max_run,
                    report=lambda line: print(line, flush=True),
                )
            )
        if args.tampered_ops > 0:
            print(f"tampered index: {args.tampered_ops} operations, local store", flush=True)
            tampered = run_tampered(
                args.tampered_ops,
                workdir=workdir,
                seed=args.seed,
                report=lambda line: print(line, flush=True),
            )
        if args.pg_kills > 0:
            print(f"postgres: {args.pg_kills} kills, {args.writers} writers + gc", flush=True)
            tallies.append(
                run_postgres(
                    args.pg_kills,
                    workdir=workdir,
                    seed=args.seed,
                    writers=args.writers,
                    max_run=args.max_run,
                    report=lambda line: print(line, flush=True),
                )
            )
    print()
    for tally in tallies:
        print(tally.summary())
        for line in tally.details:
            print(f"  {line}")
    if tampered is not None:
        print(tampered.summary())
        for line in tampered.details:
            print(f"  {line}")
    failed = any(tally.failed for tally in tallies) or (tampered is not None and tampered.failed)
    print(f"{'FAILED' if failed else 'ok'} in {time.monotonic() - began:.0f} s")
    return 1 if failed else 0


@contextlib.contextmanager
def _workdir(named: Path | None) -> Iterator[Path]:
    if named is not None:
        named.mkdir(parents=True, exist_ok=True)
        yield named
        return
    path = Path(tempfile.mkdtemp(prefix="cargohold-soak-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
