"""Store benchmarks: put, verified get, repeated put, scale and gc of the local backend.

Each section returns :class:`~bench._util.Row` values whose ratio divides a cargohold figure by a
baseline measured in the same run, interleaved with it:

- the *physical limit* of a durable put: SHA-256, a staged write, fsync, rename, directory fsync
  and one SQLite insert transaction (WAL, ``synchronous=NORMAL``), in a scratch directory on the
  store's filesystem: the least work any store that survives a crash must do;
- for reads, reading the very same blob file and hashing it (page cache hot);
- diskcache (``Cache.set`` / ``Cache.get``), which never fsyncs, at the same sizes, for context.
"""

from __future__ import annotations

import hashlib
import os
import random
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import diskcache

from bench._util import Case, KiB, MiB, Row, distinct, fsync_skipped, interleave
from cargohold import Limits, LocalStore, PutRequest, Ref, Scope, ScopedStore
from cargohold._records import CHUNK_SIZE
from cargohold.store._core import chunk_digests

SIZES = (1 * KiB, 64 * KiB, 1 * MiB, 16 * MiB)
TENANT = "bench"
UNLIMITED = Limits(
    max_artifact_bytes=16 * MiB,
    session_bytes=1 << 40,
    session_objects=1 << 30,
    store_bytes=1 << 40,
    store_objects=1 << 30,
)
"""The bench stores far more than the default quotas allow; every other limit is the default."""

PER_SESSION = 100
"""Artifacts per session when populating a large store, spread over ten users."""

_REQUEST = PutRequest()


@dataclass(frozen=True, slots=True)
class Config:
    """How much to run. ``quick`` trades precision for a run well under a minute."""

    quick: bool = False

    def repeat(self, size: int) -> int:
        """Timed iterations per case at ``size`` (each case's figure is their median)."""
        full = {1 * KiB: 200, 64 * KiB: 200, 1 * MiB: 80, 16 * MiB: 15}[size]
        return max(5, full // 4) if self.quick else full

    @property
    def scale(self) -> tuple[int, int]:
        """Artifacts stored for the small and the large scale run."""
        return (1_000, 10_000) if self.quick else (1_000, 100_000)

    @property
    def scale_repeat(self) -> int:
        return 60 if self.quick else 400

    @property
    def gc_live(self) -> tuple[int, int]:
        """Unexpired artifacts in the small and the large gc store."""
        return (900, 4_900) if self.quick else (900, 19_900)

    @property
    def gc_repeat(self) -> int:
        return 3 if self.quick else 7


class PhysicalLimit:
    """The least a crash-safe content-addressed put can do, written as plainly as possible."""

    def __init__(self, root: Path) -> None:
        self._staging = root / "staging"
        self._objects = root / "objects"
        self._staging.mkdir(mode=0o700, parents=True)
        self._objects.mkdir(mode=0o700)
        self._db = sqlite3.connect(root / "index.sqlite3", isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE blobs (digest TEXT PRIMARY KEY, size INTEGER, created REAL) WITHOUT ROWID"
        )
        self._serial = 0

    def put(self, data: bytes, chunks: Callable[[bytes], bytes] | None = None) -> str:
        """Store ``data`` durably; with ``chunks``, also compute them serially after the fsync."""
        digest = hashlib.sha256(data).hexdigest()
        self._serial += 1
        staged = self._staging / str(self._serial)
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if chunks is not None:
            chunks(data)
        os.rename(staged, self._objects / digest)
        dir_fd = os.open(self._objects, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._db.execute("BEGIN IMMEDIATE")
        self._db.execute("INSERT INTO blobs VALUES (?, ?, 0)", (digest, len(data)))
        self._db.execute("COMMIT")
        return digest

    def close(self) -> None:
        self._db.close()


def read_and_hash(path: Path, size: int, digest: str) -> bytes:
    """The read baseline: open the blob, read it whole, check its SHA-256."""
    fd = os.open(path, os.O_RDONLY)
    try:
        body = os.pread(fd, size, 0)
    finally:
        os.close(fd)
    if hashlib.sha256(body).hexdigest() != digest:
        raise AssertionError("baseline read a changed blob")
    return body


def _scoped(root: Path, name: str, session: str = "s") -> tuple[LocalStore, ScopedStore]:
    store = LocalStore(root / name, limits=UNLIMITED)
    return store, ScopedStore(store, Scope(TENANT, "u", session))


def _resolved(store: ScopedStore, ref: Ref, **kwargs: int) -> bytes:
    result = store.read(ref, **kwargs)
    return result.raise_for_outcome()


# -- put ------------------------------------------------------------------------------------


WARM_ARTIFACTS = 2_000
"""Artifacts a put store holds before timing: a store in use, whose fan-out directories exist."""


def _put_at(size: int, cfg: Config, root: Path, scoped: Callable[[int], ScopedStore]) -> list[Row]:
    base = os.urandom(size)
    physical = PhysicalLimit(root / f"physical-{size}")
    cache = diskcache.Cache(str(root / f"diskcache-{size}"), size_limit=1 << 40)
    current: dict[str, bytes] = {}

    def prep(tag: int, key: str) -> Callable[[int], None]:
        def prepare(index: int) -> None:
            current[key] = distinct(base, index, tag)

        return prepare

    def put(index: int) -> None:
        if not scoped(index).put(current["put"]).blob_written:
            raise AssertionError("the bench's put did not write a new blob")

    cases = [
        Case("physical", lambda i: physical.put(current["physical"]), prep(1, "physical")),
        Case("put", put, prep(2, "put")),
        Case("diskcache", lambda i: cache.set(i, current["diskcache"]), prep(3, "diskcache")),
    ]
    if size > CHUNK_SIZE:
        cases.append(
            Case(
                "serial",
                lambda i: physical.put(current["serial"], chunk_digests),
                prep(4, "serial"),
            )
        )
    medians = interleave(cases, cfg.repeat(size))
    cache.close()
    physical.close()
    target = 1.25 if size >= 64 * KiB else None
    rows = [Row("put", "put", size, medians["put"], "physical limit", medians["physical"], target)]
    if "serial" in medians:
        rows.append(
            Row(
                "put",
                "physical + serial chunk digests",
                size,
                medians["serial"],
                "physical limit",
                medians["physical"],
            )
        )
    rows.append(Row("put", "put", size, medians["put"], "diskcache set", medians["diskcache"]))
    return rows


def bench_put(root: Path, cfg: Config) -> list[Row]:
    """Put of distinct bytes vs. the physical limit and vs. diskcache ``Cache.set``.

    The store is warmed first with artifacts of other sessions, and the timed puts move to a new
    session every :data:`PER_SESSION` artifacts, as sessions under their quota do.
    """
    warm = Populated(root / "store", WARM_ARTIFACTS, tag=0)
    sessions = iter(range(1 << 30))
    current: list[ScopedStore] = []

    def scoped(index: int) -> ScopedStore:
        if index % PER_SESSION == 0 or not current:
            scope = Scope(TENANT, "u", f"put-{next(sessions)}")
            current[:] = [ScopedStore(warm.store, scope)]
        return current[0]

    rows: list[Row] = []
    for size in SIZES:
        rows.extend(_put_at(size, cfg, root, scoped))
    warm.store.close()
    return rows


# -- get ------------------------------------------------------------------------------------


def _get_at(size: int, cfg: Config, store: LocalStore, cache: diskcache.Cache) -> list[Row]:
    scoped = ScopedStore(store, Scope(TENANT, "u", "get"))
    data = os.urandom(size)
    ref = scoped.put(data).ref
    cache.set(size, data)
    path = store.blob_path_for_tests(TENANT, ref)
    if _resolved(scoped, ref) != data or cache.get(size) != data:
        raise AssertionError("a store returned other bytes")
    cases = [
        Case("baseline", lambda i: read_and_hash(path, size, ref.digest)),
        Case("get", lambda i: _resolved(scoped, ref)),
        Case("diskcache", lambda i: cache.get(size)),
    ]
    inside = size // 2 + 1000  # 4 KiB within one 64 KiB chunk
    across = size // 2 - 2 * KiB  # 4 KiB straddling two chunks
    if size >= 1 * MiB:
        cases += [
            Case("inside", lambda i: _resolved(scoped, ref, start=inside, end=inside + 4 * KiB)),
            Case("across", lambda i: _resolved(scoped, ref, start=across, end=across + 4 * KiB)),
        ]
    medians = interleave(cases, cfg.repeat(size) * 2)
    rows = [
        Row("get", "verified get", size, medians["get"], "read + sha256", medians["baseline"], 1.2),
        Row("get", "verified get", size, medians["get"], "diskcache get", medians["diskcache"]),
    ]
    if size == SIZES[-1]:
        rows += [
            Row(
                "get",
                "4 KiB range, 1 chunk",
                size,
                medians["inside"],
                "verified get",
                medians["get"],
            ),
            Row(
                "get",
                "4 KiB range, 2 chunks",
                size,
                medians["across"],
                "verified get",
                medians["get"],
            ),
        ]
    return rows


def bench_get(root: Path, cfg: Config) -> list[Row]:
    """Verified whole get vs. read + SHA-256 of the same file; a 4 KiB range vs. the whole get."""
    store = LocalStore(root / "store", limits=UNLIMITED)
    cache = diskcache.Cache(str(root / "diskcache"), size_limit=1 << 40)
    rows: list[Row] = []
    for size in SIZES:
        rows.extend(_get_at(size, cfg, store, cache))
    cache.close()
    store.close()
    return rows


# -- repeated put ---------------------------------------------------------------------------


def bench_repeat(root: Path, cfg: Config) -> list[Row]:
    """A put of bytes this scope already holds vs. hashing those bytes."""
    rows: list[Row] = []
    store, scoped = _scoped(root, "repeat")
    for size in SIZES:
        data = os.urandom(size)
        scoped.put(data)

        def again(index: int, d: bytes = data) -> None:
            if not scoped.put(d).existing:
                raise AssertionError("a repeated put was not recognised")

        cases = [
            Case("sha256", lambda i, d=data: hashlib.sha256(d).digest()),
            Case("repeat", again),
        ]
        medians = interleave(cases, cfg.repeat(size) * 2)
        target = 1.2 if size >= 64 * KiB else None
        rows.append(
            Row(
                "repeat put",
                "put of held bytes",
                size,
                medians["repeat"],
                "sha256",
                medians["sha256"],
                target,
            )
        )
    store.close()
    return rows


# -- scale ----------------------------------------------------------------------------------


class Populated:
    """A local store filled with ``count`` distinct 1 KiB artifacts over many sessions."""

    def __init__(self, root: Path, count: int, tag: int) -> None:
        self.store = LocalStore(root, limits=UNLIMITED)
        self.refs: list[tuple[Scope, Ref]] = []
        self._base = os.urandom(1 * KiB)
        self._tag = tag
        self.grow(count)

    def grow(self, count: int) -> None:
        with fsync_skipped():
            for index in range(len(self.refs), count):
                session = index // PER_SESSION
                scope = Scope(TENANT, f"user-{session % 10}", f"session-{session}")
                ref = self.store.put(scope, distinct(self._base, index, self._tag), _REQUEST).ref
                self.refs.append((scope, ref))


def bench_scale(root: Path, cfg: Config) -> list[Row]:
    """Put and get of 1 KiB with many artifacts stored vs. with few."""
    small_n, large_n = cfg.scale
    small = Populated(root / "scale-small", small_n, tag=10)
    large = Populated(root / "scale-large", large_n, tag=11)
    fresh = os.urandom(1 * KiB)
    rng = random.Random(20260509)
    picks: dict[str, tuple[Scope, Ref]] = {}

    def putter(pop: Populated, tag: int) -> Callable[[int], None]:
        def run(index: int) -> None:
            scope = Scope(TENANT, "user-fresh", f"session-{index // PER_SESSION}")
            pop.store.put(scope, distinct(fresh, index, tag), _REQUEST)

        return run

    def picker(pop: Populated, key: str) -> Callable[[int], None]:
        def prepare(index: int) -> None:
            picks[key] = pop.refs[rng.randrange(len(pop.refs))]

        return prepare

    def getter(pop: Populated, key: str) -> Callable[[int], None]:
        def run(index: int) -> None:
            scope, ref = picks[key]
            pop.store.read(scope, ref).raise_for_outcome()

        return run

    cases = [
        Case("put-small", putter(small, 20)),
        Case("put-large", putter(large, 21)),
        Case("get-small", getter(small, "small"), picker(small, "small")),
        Case("get-large", getter(large, "large"), picker(large, "large")),
    ]
    medians = interleave(cases, cfg.scale_repeat, warmup=5)
    small.store.close()
    large.store.close()
    at = f"at {large_n:,}"
    base = f"at {small_n:,}"
    return [
        Row(
            "scale",
            f"put {at}",
            1 * KiB,
            medians["put-large"],
            f"put {base}",
            medians["put-small"],
            1.2,
        ),
        Row(
            "scale",
            f"get {at}",
            1 * KiB,
            medians["get-large"],
            f"get {base}",
            medians["get-small"],
            1.2,
        ),
    ]


# -- gc -------------------------------------------------------------------------------------


class GcStore:
    """A store with ``live`` unexpired artifacts; each round adds expired ones for gc to remove."""

    def __init__(self, root: Path, live: int, tag: int) -> None:
        self.now = 1_800_000_000.0
        self.store = LocalStore(root, limits=UNLIMITED, clock=lambda: self.now)
        self.live = live
        self._base = os.urandom(1 * KiB)
        self._tag = tag
        self._serial = 0
        self._add(live, None)

    def _add(self, count: int, ttl: float | None) -> None:
        with fsync_skipped():
            for _ in range(count):
                index = self._serial
                self._serial += 1
                session = index // PER_SESSION
                scope = Scope(TENANT, f"user-{session % 10}", f"session-{session}")
                data = distinct(self._base, index, self._tag)
                self.store.put(scope, data, PutRequest(ttl=ttl))

    def expire(self, count: int) -> None:
        """Add ``count`` artifacts that expire, then move the clock past their expiry."""
        self._add(count, 60.0)
        self.now += 120.0

    def collect(self, expected: int) -> None:
        report = self.store.gc()
        if report.artifacts != expected or report.blobs != expected:
            raise AssertionError("gc removed other than the expired artifacts")


def bench_gc(root: Path, cfg: Config) -> list[Row]:
    """gc time with E expired of N total: it should follow E, not N."""
    small_live, large_live = cfg.gc_live
    small = GcStore(root / "gc-small", small_live, tag=30)
    large = GcStore(root / "gc-large", large_live, tag=31)
    plan = [(small, 100), (large, 100), (small, 1_000), (large, 1_000)]
    cases = [
        Case(
            f"{id(gc_store)}-{expired}",
            lambda i, s=gc_store, e=expired: s.collect(e),
            lambda i, s=gc_store, e=expired: s.expire(e),
        )
        for gc_store, expired in plan
    ]
    medians = interleave(cases, cfg.gc_repeat)

    def label(gc_store: GcStore, expired: int) -> str:
        return f"gc N={gc_store.live + expired:,} E={expired:,}"

    base_name = f"{id(small)}-100"
    rows = []
    for gc_store, expired in plan[1:]:
        name = f"{id(gc_store)}-{expired}"
        target = 1.2 if expired == 100 else None
        rows.append(
            Row(
                "gc",
                label(gc_store, expired),
                None,
                medians[name],
                label(small, 100),
                medians[base_name],
                target,
            )
        )
    small.store.close()
    large.store.close()
    return rows


SECTIONS: dict[str, Callable[[Path, Config], list[Row]]] = {
    "put": bench_put,
    "get": bench_get,
    "repeat": bench_repeat,
    "scale": bench_scale,
    "gc": bench_gc,
}
