"""The local backend, cargohold's embedded default: blob files plus a SQLite index.

Layout under the managed root (directories 0700, files 0600)::

    index.sqlite3                       the index (WAL); its rows decide what is visible
    marker.key                          the store's marker key (32 random bytes; see _marks)
    staging/                            private, uniquely named files of writes in progress
    objects/<tenant key>/<ab>/<cd...>   one file per distinct blob of a tenant, named by digest

The tenant key is a hash of the tenant name, so no owner identity appears in a path.

Write order: hash; stage the bytes (write, fsync); then, holding SQLite's write lock, rename the
staged file into place, fsync its directory and commit the index row. A crash at any point leaves at
worst a staged file or an orphan blob, both of which ``verify`` reports (as housekeeping, not
damage) and ``gc`` removes; never a row without its bytes. Renaming under the write lock is what
lets ``gc`` unlink safely: it removes the rows, commits, then unlinks only blobs that no row names
*while holding the same lock*, so a writer that re-adds the same bytes in between either sees gc's
unlink or is seen by it. An orphan is removed the same way: found by a walk, then unlinked only
if, under the lock, still no row names it.

A writer holds an exclusive ``flock`` on its staged file from creation until the file is renamed
or removed. The kernel drops that lock when the writer dies, however it dies, so a staged file
nobody holds is provably a leftover: it counts toward :meth:`LocalStore.store_usage` and the
store quota, and ``gc`` removes it at once (no age threshold, no pid that a container or a reused
pid could fool).

Nothing under the root is opened in a way that can block: files are opened with ``O_NONBLOCK``
and ``O_NOFOLLOW`` and checked with ``fstat`` before any read, so a FIFO, socket, device or
directory where a blob should be reads as ``stale`` and is a ``corrupt`` finding of ``verify``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import functools
import hashlib
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from cargohold._errors import (
    CargoholdError,
    SchemaError,
    StoreError,
    StoreUnavailableError,
    UsageError,
)
from cargohold._marks import KEY_BYTES, new_key
from cargohold._records import (
    CHUNK_SIZE,
    ArtifactRecord,
    Finding,
    GcReport,
    Limits,
    MiB,
    PutRequest,
    PutResult,
    ReadOutcome,
    ReadResult,
    Sensitivity,
    Usage,
)
from cargohold._ref import Ref
from cargohold._scope import Scope
from cargohold.store._core import (
    MALFORMED,
    RECORD_COLUMNS,
    MalformedRowError,
    PreparedWrite,
    check_store,
    check_tenant,
    chunk_digests,
    clip_range,
    higher_sensitivity,
    is_digest,
    is_row_int,
    needs_refresh,
    prepare_write,
    record_findings,
    record_from_row,
    row_int,
    sound_records,
    tenant_quota,
    verify_range,
)
from cargohold.store._protocol import Clock, Progress
from cargohold.store._search import (
    INDEX_BYTES,
    SearchHit,
    index_utf8,
    match_expression,
    ranked,
    score,
    search_terms,
)

_STAGE_ATTEMPTS = 8
"""A staged file gc took between its creation and its lock is made again under a new name."""
_PROBE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
"""How anything under the root is opened to be looked at: never through a link, never blocking
(opening a FIFO for reading would wait for a writer forever)."""

_HEX = frozenset("0123456789abcdef")
_INDEX_FILES = ("index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm")
_KEY_FILE = "marker.key"
_PROC_FD = "/proc/self/fd/"
_HAS_O_PATH = hasattr(os, "O_PATH") and os.path.isdir(_PROC_FD)
"""Linux: check a blob's directory by the path the kernel resolved, not by walking it."""

_SCHEMA = """
CREATE TABLE blobs (
    tenant TEXT NOT NULL,
    digest TEXT NOT NULL,
    size INTEGER NOT NULL,
    chunk_size INTEGER NOT NULL,
    chunks BLOB NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (tenant, digest)
) WITHOUT ROWID;
CREATE TABLE artifacts (
    tenant TEXT NOT NULL,
    user TEXT NOT NULL,
    session TEXT NOT NULL,
    digest TEXT NOT NULL,
    size INTEGER NOT NULL,
    media_type TEXT NOT NULL,
    kind TEXT,
    tool TEXT,
    created REAL NOT NULL,
    expires REAL NOT NULL,
    sensitivity TEXT NOT NULL,
    complete INTEGER NOT NULL,
    classification TEXT,
    task TEXT,
    worker TEXT,
    agent TEXT,
    PRIMARY KEY (tenant, user, session, digest),
    FOREIGN KEY (tenant, digest) REFERENCES blobs (tenant, digest)
) WITHOUT ROWID;
CREATE INDEX artifacts_by_digest ON artifacts (tenant, digest);
CREATE INDEX artifacts_by_expiry ON artifacts (expires);
CREATE TABLE stats (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    objects INTEGER NOT NULL,
    bytes INTEGER NOT NULL
);
INSERT INTO stats (id, objects, bytes) VALUES (1, 0, 0);
"""
"""Version 1 of the index, as the first cargohold made it; later versions are migrations."""

_MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        2,
        (
            # The artifact a record was derived from, as its canonical reference (NULL for
            # bytes a tool produced). Adding a nullable column rewrites no row.
            "ALTER TABLE artifacts ADD COLUMN parent TEXT CHECK (parent IS NULL OR"
            " (length(parent) = 82 AND parent GLOB 'artifact://sha256/*'"
            " AND substr(parent, 19) NOT GLOB '*[^0-9a-f]*'))",
        ),
    ),
    (
        3,
        (
            # The search index: one document per (owner, digest) of a text body, filled in the
            # put's transaction and removed with the record. The FTS5 table keeps the indexed
            # text (the first INDEX_BYTES, masked when restricted), which scores a hit from its
            # own text: FTS5's bm25 would count every tenant's documents.
            "CREATE TABLE search_docs (id INTEGER PRIMARY KEY, tenant TEXT NOT NULL,"
            " user TEXT NOT NULL, session TEXT NOT NULL, digest TEXT NOT NULL,"
            " UNIQUE (tenant, user, session, digest))",
            "CREATE VIRTUAL TABLE search_text USING fts5(body,"
            " tokenize = 'unicode61 remove_diacritics 0')",
        ),
    ),
    (
        4,
        (
            # When this index began to name every blob it keeps (system time, as file times
            # are; set by _migrate): a blob file older than it may be one a lost index named,
            # so gc keeps it (verify reports it); only a younger one is provably a leftover.
            "ALTER TABLE stats ADD COLUMN since REAL",
        ),
    ),
    (
        5,
        (
            # A text record whose search row is still to be written: the put's transaction adds
            # it (a small row) and the indexer writes the search row after the put returned
            # (see LocalStore._index_later). The id is never reused (AUTOINCREMENT), so a job
            # queued for a row that went names no later row.
            "CREATE TABLE search_pending (id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " tenant TEXT NOT NULL, user TEXT NOT NULL, session TEXT NOT NULL,"
            " digest TEXT NOT NULL, UNIQUE (tenant, user, session, digest))",
        ),
    ),
)
"""Each step of the index after version 1: its version and the statements that reach it.

Version 3 adds the search index empty: artifacts written before it are found by search once
put again (``verify`` names each one as ``unindexed``)."""

SCHEMA_VERSION = _MIGRATIONS[-1][0]
"""The index version this cargohold reads and writes."""

_MTIME_SLACK = 1.0
"""Seconds by which a file's time may precede the index's ``since`` and still count as younger."""

_RECORD_COLUMNS = RECORD_COLUMNS
_UNINDEX_TEXT = (
    "DELETE FROM search_text WHERE rowid IN (SELECT id FROM search_docs"
    " WHERE tenant = ? AND user = ? AND session = ? AND digest = ?)"
)
_UNINDEX_DOC = (
    "DELETE FROM search_docs WHERE tenant = ? AND user = ? AND session = ? AND digest = ?"
)
_UNINDEX_PENDING = (
    "DELETE FROM search_pending WHERE tenant = ? AND user = ? AND session = ? AND digest = ?"
)
_INDEXED = (
    "SELECT 1 FROM search_docs WHERE tenant = ?1 AND user = ?2 AND session = ?3 AND digest = ?4"
    " UNION ALL SELECT 1 FROM search_pending"
    " WHERE tenant = ?1 AND user = ?2 AND session = ?3 AND digest = ?4"
)
"""Whether a record has its search row, written or still to be written."""
_PENDING_OF = (
    "SELECT id FROM search_pending WHERE tenant = ? AND user = ? AND session = ? ORDER BY id"
)
_QUEUE_BYTES = 32 * MiB
"""The most text the indexer holds queued: a put past it writes its search row itself."""
_OWNED = " WHERE tenant = ? AND user = ? AND session = ?"
# The column list is a constant of this module; every value is bound as a parameter.
_SELECT_ONE = f"SELECT {_RECORD_COLUMNS} FROM artifacts{_OWNED} AND digest = ?"  # noqa: S608
_SELECT_ALL = f"SELECT {_RECORD_COLUMNS} FROM artifacts{_OWNED} ORDER BY created, digest"  # noqa: S608
_SELECT_READ = (
    "SELECT "  # noqa: S608
    + ", ".join("a." + c.strip() for c in _RECORD_COLUMNS.split(","))
    + ", b.chunks FROM artifacts a JOIN blobs b ON a.tenant = b.tenant AND a.digest = b.digest"
    " WHERE a.tenant = ? AND a.user = ? AND a.session = ? AND a.digest = ?"
)


_TENANT_USAGE = "SELECT count(*), coalesce(sum(size), 0) FROM blobs WHERE tenant = ?"
"""A tenant's distinct blobs and bytes (the blobs' primary key starts with the tenant)."""


class StoreRootError(StoreUnavailableError):
    """The local store's root cannot be made or opened; the message says why.

    Attributes:
        path: The root as it was given. Never in the message (no message names a store path);
            the command line shows it beside the message, since the person who typed the path
            may see it.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


_ROOT_CAUSES = {
    errno.ENOENT: "a directory on its path does not exist and cannot be made there",
    errno.EACCES: "permission denied",
    errno.EPERM: "the operation is not permitted there",
    errno.EROFS: "the file system is read-only",
    errno.ENOTDIR: "a part of its path is a file, not a directory",
    errno.ENOSPC: "no space is left on the device",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.ELOOP: "its path holds a symlink loop or a symlink where none is allowed",
    errno.ENAMETOOLONG: "its path is too long",
}


def _root_cause(exc: OSError) -> str:
    """Why the root cannot be used, in words of this module (an OSError's text names paths)."""
    why = _ROOT_CAUSES.get(exc.errno or 0) or (
        os.strerror(exc.errno) if exc.errno else "an I/O error"
    )
    return f"the local store's directory cannot be made or opened: {why}"


def default_root() -> Path:
    """The embedded default store's root: ``cargohold`` under the user's XDG cache directory."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("cargohold", appauthor=False))


@functools.lru_cache(maxsize=1024)
def tenant_key(tenant: str) -> str:
    """The directory name of a tenant: a hash, so no owner identity appears in a path."""
    return hashlib.sha256(b"cargohold-tenant\0" + tenant.encode()).hexdigest()[:32]


def _mkdir_private(path: Path) -> None:
    """Create ``path`` (and parents) as 0700 directories; refuse a symlink in its place."""
    try:
        # Nearly every put finds its directory already there: one lstat, not a failing mkdir.
        info = os.lstat(path)
    except FileNotFoundError:
        # Each missing ancestor is made 0700 too: mkdir(parents=True) would give them the
        # umask's mode (0755), leaving a tenant directory readable by others.
        missing = [path]
        while not missing[-1].parent.exists() and missing[-1].parent != missing[-1]:
            missing.append(missing[-1].parent)
        for folder in reversed(missing):
            try:
                folder.mkdir(mode=0o700)
            except FileExistsError:
                pass  # a concurrent writer made it
            else:
                # A new directory's entry is durable only once its parent is synced; without
                # this a crash could keep a committed row and lose the way to its bytes.
                _fsync_dir(folder.parent)
            if os.lstat(folder).st_mode & 0o077:
                os.chmod(folder, 0o700, follow_symlinks=False)
        info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise StoreError("a store directory is a symlink or not a directory")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)


def _fsync_dir(path: Path | str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    """Translate lower-level failures at the seam, without their text (it may hold paths)."""
    try:
        yield
    except CargoholdError:
        raise
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise StoreUnavailableError("the store stayed busy past its timeout") from exc
        raise StoreUnavailableError("the store index could not be used") from exc
    except sqlite3.DatabaseError as exc:
        raise StoreError("the store index is damaged or unreadable") from exc
    except OSError as exc:
        raise StoreUnavailableError("store I/O failed") from exc


_FTS_DAMAGE = frozenset({11, 19})
"""SQLite's primary result codes FTS5 answers a damaged table with: SQLITE_CORRUPT (11, as
SQLITE_CORRUPT_VTAB) and SQLITE_CONSTRAINT (19, when it writes a damaged segment)."""


class _SearchDamaged(Exception):
    """The search table refused a change: the write transaction is run again without it."""


@dataclasses.dataclass(frozen=True, slots=True)
class _IndexJob:
    """A search row to write: its ``search_pending`` row, the text (``index_utf8`` of the body,
    masked as ``sensitivity`` asks) and that sensitivity."""

    pending: int
    text: bytes
    sensitivity: Sensitivity


class LocalStore:
    """Blob files plus a SQLite index under one managed root; safe for several processes at once.

    Args:
        root: The managed root; ``None`` takes :func:`default_root`.
        limits: Store limits; the defaults of :class:`~cargohold.Limits` when omitted.
        clock: Source of "now" for TTLs; injected in tests.
        busy_timeout: Seconds to wait for another process's write before giving up.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        limits: Limits | None = None,
        clock: Clock = time.time,
        busy_timeout: float = 30.0,
    ) -> None:
        self.limits = limits or Limits()
        self._clock = clock
        self._lock = threading.RLock()
        root_path = Path(default_root() if root is None else root).expanduser()
        try:
            _mkdir_private(root_path)
            self._root = Path(os.path.realpath(root_path))
            self._objects = self._root / "objects"
            self._objects_str = str(self._objects)
            self._staging = self._root / "staging"
            _mkdir_private(self._objects)
            _mkdir_private(self._staging)
            index = self._root / "index.sqlite3"
            # SQLite gives its -wal and -shm files the database file's mode: create it 0600 first.
            os.close(os.open(index, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600))
        except OSError as exc:
            raise StoreRootError(_root_cause(exc), path=str(root_path)) from exc
        except StoreError as exc:
            raise StoreRootError(str(exc), path=str(root_path)) from exc
        with _translated():
            self._db = sqlite3.connect(
                index, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            self._closed = False
            self._search_damaged = False  # set when the search table refuses a change
            self._writer = threading.Lock()  # one write transaction of this handle at a time
            self._jobs: list[_IndexJob] = []  # search rows to write, oldest first
            self._queued = 0  # their text's bytes
            self._wake = threading.Condition(threading.Lock())
            self._indexer: threading.Thread | None = None
            self._indexer_db: sqlite3.Connection | None = None
            self._busy_timeout = busy_timeout
            self._pid = os.getpid()  # a forked child has no indexer thread: see _forked
            self._marker_key: bytes | None = None
            self._enable_wal(busy_timeout)
            self._index.execute("PRAGMA synchronous=NORMAL")
            self._index.execute("PRAGMA foreign_keys=ON")
            self._migrate()

    def __repr__(self) -> str:
        return "LocalStore()"

    def _enable_wal(self, timeout: float) -> None:
        """Switch the index to WAL, waiting out another process doing the same.

        The switch takes an exclusive lock, and SQLite answers SQLITE_BUSY at once (its busy
        handler does not run for it) when another connection is switching too: processes that
        create one store together must retry, within the busy timeout.
        """
        deadline = time.monotonic() + timeout
        delay = 0.001
        while True:
            try:
                (mode,) = self._index.execute("PRAGMA journal_mode=WAL").fetchone()
                if str(mode).lower() == "wal":
                    return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
            if time.monotonic() >= deadline:
                raise StoreUnavailableError("the store stayed busy past its timeout")
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    @property
    def _index(self) -> sqlite3.Connection:
        """The index connection; using a closed store is the caller's mistake, not damage."""
        if self._closed:
            raise UsageError("the store is closed")
        return self._db

    # -- schema ---------------------------------------------------------------------------

    def _migrate(self) -> None:
        with self._write() as db:
            (version,) = db.execute("PRAGMA user_version").fetchone()
            if version == SCHEMA_VERSION:
                return
            if version > SCHEMA_VERSION:
                raise SchemaError(
                    f"the store's schema is version {version}; this cargohold knows up to "
                    f"{SCHEMA_VERSION}: upgrade cargohold"
                )
            # The embedded store is one user's: it upgrades itself when opened, inside the write
            # transaction, so two processes opening an old index at once migrate it once.
            if version == 0:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        db.execute(statement)
                version = 1
            for step, statements in _MIGRATIONS:
                if step > version:
                    for statement in statements:
                        db.execute(statement)
            if version < 3:
                self._index_existing(db)
            if version < 4:
                # An upgraded index keeps every file older than now: not provably garbage.
                db.execute("UPDATE stats SET since = ? WHERE id = 1", (time.time(),))
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _index_existing(self, db: sqlite3.Connection) -> None:
        """Fill the new search index with every record's text body (the upgrade to version 3,
        inside its transaction): each blob's first :data:`INDEX_BYTES` are read once. A
        malformed row or a blob that is not there is left unindexed (``verify`` reports it)."""
        rows = db.execute(
            "SELECT tenant, user, session, digest, size, media_type, sensitivity FROM artifacts"
        ).fetchall()
        for tenant, user, session, digest, size, media_type, sensitivity in rows:
            if not all(isinstance(part, str) for part in (user, session, media_type)):
                continue
            text = self._head_text(tenant, digest, size, media_type, sensitivity)
            if isinstance(text, bytes):
                self._add_doc(db, (tenant, user, session), digest, text)

    def _head_text(
        self, tenant: object, digest: object, size: object, media_type: str, sensitivity: object
    ) -> bytes | bool | None:
        """The search text of a stored blob (:func:`index_utf8` of its first bytes): ``None``
        for a binary body, ``False`` when the blob cannot be opened as a write leaves it."""
        if not isinstance(tenant, str) or not is_digest(digest) or not is_row_int(size):
            return False
        assert isinstance(digest, str)
        assert isinstance(size, int)
        fd = self._open_blob(tenant, digest, size)
        if fd is None:
            return False
        label = sensitivity if isinstance(sensitivity, str) else Sensitivity.RESTRICTED
        # A restricted body is read whole: it is masked before the cut (see index_utf8).
        wanted = size if label == Sensitivity.RESTRICTED else min(size, INDEX_BYTES)
        try:
            head = os.pread(fd, wanted, 0)
        except OSError:
            return False
        finally:
            os.close(fd)
        return index_utf8(head, media_type, label)

    def _search_change(self, db: sqlite3.Connection, change: Callable[[bool], None]) -> None:
        """Change the search rows inside the caller's write transaction.

        ``change(fts)`` makes the change; ``fts`` false: only its ``search_docs`` part (a
        plain table, which search joins on), never the FTS5 table's.

        FTS5 answers a damaged table with SQLITE_CORRUPT (or SQLITE_CONSTRAINT, when it
        writes what it buffered at the savepoint's release), which would roll back the whole
        transaction: every text put, and gc's removal of expired records, would fail until
        the table is rebuilt. So such an error becomes :class:`_SearchDamaged`: the caller
        runs its transaction again with the FTS5 table left alone for this store's life
        (:attr:`_search_damaged`). A search row's ``search_docs`` part is still removed with
        its record (a text left in FTS5 is then unreachable: search joins on the docs), and
        a new record gets no search row (``verify`` reports the damage as ``unindexed``;
        search misses what it cannot index; no byte is lost). Any other error (a full disk,
        an I/O error, a locked database) raises as itself.
        """
        if self._search_damaged:
            change(False)
            return
        db.execute("SAVEPOINT search_change")
        try:
            change(True)
            db.execute("RELEASE search_change")  # where FTS5 writes what it buffered
        except sqlite3.DatabaseError as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF not in _FTS_DAMAGE:
                raise
            raise _SearchDamaged from exc

    @staticmethod
    def _unindex(
        db: sqlite3.Connection, owner: tuple[str, str, str], digest: str, fts: bool
    ) -> None:
        """Remove the search rows of ``(owner, digest)``, in the caller's transaction."""
        if fts:
            db.execute(_UNINDEX_TEXT, (*owner, digest))
        db.execute(_UNINDEX_DOC, (*owner, digest))
        db.execute(_UNINDEX_PENDING, (*owner, digest))

    @classmethod
    def _add_doc_if(
        cls,
        db: sqlite3.Connection,
        owner: tuple[str, str, str],
        digest: str,
        text: bytes,
        fts: bool,
    ) -> None:
        """:meth:`_add_doc` when ``fts`` (a :meth:`_search_change` change)."""
        if fts:
            cls._add_doc(db, owner, digest, text)

    @staticmethod
    def _add_doc(
        db: sqlite3.Connection, owner: tuple[str, str, str], digest: str, text: bytes
    ) -> None:
        """One search document for ``(owner, digest)``, in the caller's transaction.

        A text FTS5 may still hold under the new document's id (one whose document went while
        the table was damaged: ids are reused) is removed first, so no document is ever found
        by another body's words."""
        (doc,) = db.execute(
            "INSERT INTO search_docs (tenant, user, session, digest) VALUES (?, ?, ?, ?)"
            " RETURNING id",
            (*owner, digest),
        ).fetchone()
        db.execute("DELETE FROM search_text WHERE rowid = ?", (doc,))
        # The UTF-8 bytes stored as text (index_utf8 made them valid): no Python str of them.
        db.execute("INSERT INTO search_text (rowid, body) VALUES (?, CAST(? AS TEXT))", (doc, text))

    # -- the search rows written after the put ----------------------------------------------

    def _can_queue(self, size: int) -> bool:
        """Whether a put may leave its search row to the indexer (its queue has room)."""
        return not self._search_damaged and self._queued + size <= _QUEUE_BYTES

    def _forked(self) -> None:
        """In a child forked with this handle: the parent's queue is the parent's (its pending
        rows are written by it, or by a search); this process starts its own indexer."""
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._writer = threading.Lock()  # a thread of the parent may have held it
            self._wake = threading.Condition(threading.Lock())
            self._jobs, self._queued, self._indexer, self._indexer_db = [], 0, None, None

    def _queue(self, job: _IndexJob) -> None:
        """Hand ``job`` to the indexer thread, starting it on first use."""
        self._forked()
        with self._wake:
            if self._closed:
                return  # the pending row stays: the next search of its owner writes it
            self._jobs.append(job)
            self._queued += len(job.text)
            if self._indexer is None:
                self._indexer = threading.Thread(
                    target=self._index_later, name="cargohold-search-index", daemon=True
                )
                self._indexer.start()
            self._wake.notify_all()

    def _index_later(self) -> None:
        """The indexer thread: writes each queued search row in its own transaction, on its own
        connection (a read of this store is not held up meanwhile), until the store closes.

        A job that fails (a locked database past its timeout, a full disk) leaves its pending
        row: the next search of its owner writes it (:meth:`_catch_up`) and raises the error if
        it persists (``verify`` counts a pending row as no gap). No error leaves this thread:
        its caller has returned."""
        while True:
            with self._wake:
                while not self._jobs and not self._closed:
                    self._wake.wait()
                if not self._jobs:
                    return  # closed and drained
                job = self._jobs[0]
            try:
                db = self._indexer_db
                if db is None:
                    db = self._indexer_db = sqlite3.connect(
                        self._root / "index.sqlite3",
                        timeout=self._busy_timeout,
                        isolation_level=None,
                        check_same_thread=False,
                    )
                    db.execute("PRAGMA synchronous=NORMAL")
                self._write_pending(db, job.pending, job)
            except (sqlite3.Error, OSError, StoreError):
                pass  # the pending row stays: see above
            finally:
                with self._wake:
                    self._jobs.pop(0)
                    self._queued -= len(job.text)
                    self._wake.notify_all()

    def _write_pending(self, db: sqlite3.Connection, pending: int, job: _IndexJob | None) -> None:
        """Write the search row of ``search_pending`` row ``pending`` on connection ``db``, in
        one write transaction that also removes the pending row; nothing when it is gone (its
        record went, or another writer took it). ``job`` carries the text; without it, or when
        the record's sensitivity has been raised since, the text is read from the blob."""
        for fts in (not self._search_damaged, False):
            with self._writer:
                db.execute("BEGIN IMMEDIATE")
                try:
                    row = db.execute(
                        "SELECT p.tenant, p.user, p.session, p.digest, a.size, a.media_type,"
                        " a.sensitivity FROM search_pending p JOIN artifacts a"
                        " ON a.tenant = p.tenant AND a.user = p.user AND a.session = p.session"
                        " AND a.digest = p.digest WHERE p.id = ?",
                        (pending,),
                    ).fetchone()
                    db.execute("DELETE FROM search_pending WHERE id = ?", (pending,))
                    if row is not None and fts:
                        tenant, user, session, digest, size, media_type, sensitivity = row
                        text: bytes | bool | None
                        if job is not None and sensitivity == job.sensitivity.value:
                            text = job.text
                        elif isinstance(media_type, str):
                            text = self._head_text(tenant, digest, size, media_type, sensitivity)
                        else:
                            text = None
                        if isinstance(text, bytes):
                            indexed = text
                            owner = (tenant, user, session)

                            self._search_change(
                                db, functools.partial(self._add_doc_if, db, owner, digest, indexed)
                            )
                except _SearchDamaged:
                    db.execute("ROLLBACK")
                    self._search_damaged = True  # again: the pending row goes, no search row
                    continue
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
                return

    def _drain(self) -> None:
        """Wait until the indexer has written every search row queued so far."""
        self._forked()
        with self._wake:
            while self._jobs:
                self._wake.wait()

    def _catch_up(self, scope: Scope) -> None:
        """Before a search: the queued search rows written, and the scope's pending rows this
        handle holds no job for (another process's, or one a crash left) written here, so a
        search after a put, in any process, finds it."""
        self._drain()
        with self._lock:
            rows = self._index.execute(_PENDING_OF, scope.owner).fetchall()
        for (pending,) in rows:
            with self._lock:
                self._write_pending(self._index, pending, None)

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction holding SQLite's write lock across processes."""
        self._forked()
        with self._lock, self._writer:
            if self._closed:
                raise UsageError("the store is closed")
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # -- paths ----------------------------------------------------------------------------

    def _blob_path(self, tenant: str, digest: str) -> Path:
        """Where the blob of ``digest`` lives: always under ``objects``, never elsewhere.

        The digest comes from an index row, which a damaged or tampered index may fill with
        anything (``../`` and an absolute path): only a digest of 64 lowercase hex is ever
        made into a path, so no unlink, open or rename can leave the managed root.

        Raises:
            MalformedRowError: the tenant or the digest is not one a write of this store makes.
        """
        if not isinstance(tenant, str) or not is_digest(digest):
            raise MalformedRowError(MALFORMED)
        return self._objects / tenant_key(tenant) / digest[:2] / digest[2:]

    def _open_blob(self, tenant: str, digest: str, size: int) -> int | None:
        """Open a blob for reading, refusing symlinks, escapes, foreign owners and wrong sizes.

        ``O_NONBLOCK``: whatever lies at the blob's path (a FIFO, a device) must not make the
        open wait; its type is checked on the descriptor before anything is read. On a regular
        file the flag changes nothing.
        """
        if not isinstance(tenant, str) or not is_digest(digest):
            return None  # a malformed row's digest is never made into a path
        parent = os.path.join(self._objects_str, tenant_key(tenant), digest[:2])
        try:
            if _HAS_O_PATH:
                # The kernel's resolution of the directory equals its path exactly when no
                # component is a symlink (what ``realpath`` checks, without walking in Python);
                # the blob is then opened inside that very directory.
                dir_fd = os.open(parent, os.O_PATH | os.O_DIRECTORY)
                try:
                    if os.readlink(_PROC_FD + str(dir_fd)) != parent:
                        return None
                    fd = os.open(digest[2:], _PROBE_FLAGS, dir_fd=dir_fd)
                finally:
                    os.close(dir_fd)
            else:
                if os.path.realpath(parent) != parent:
                    return None
                fd = os.open(os.path.join(parent, digest[2:]), _PROBE_FLAGS)
        except OSError:
            return None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_size != size:
            os.close(fd)
            return None
        return fd

    def _blob_sound(self, tenant: str, digest: str, size: int) -> bool:
        """Whether the blob's file is there as a write leaves it: a plain file of this user,
        of ``size`` bytes, inside the root (its bytes are checked by reads and ``verify``)."""
        fd = self._open_blob(tenant, digest, size)
        if fd is None:
            return False
        os.close(fd)
        return True

    # -- writes ---------------------------------------------------------------------------

    def _stage(self, write: PreparedWrite, held: list[int]) -> tuple[str, bytes]:
        """Write the body to a private staging file and fsync it; its path and chunk digests.

        The staged file's descriptor, holding an exclusive ``flock`` that says "a live writer
        owns this file", is appended to ``held``: the caller closes it once the file is renamed
        into place or removed, never before (gc removes any staged file it can lock).

        The chunk digests are the write's own (:func:`prepare_write` makes them in the pass
        that makes the reference): the body is not hashed again here.
        """
        staged, fd = self._create_staged()
        held.append(fd)
        try:
            view = memoryview(write.data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(staged)
            held.remove(fd)
            os.close(fd)  # after the unlink: gc must never find the file unlocked
            raise
        return staged, write.chunks

    def _create_staged(self) -> tuple[str, int]:
        """A new, empty staging file, locked by this writer; its path and descriptor."""
        for _ in range(_STAGE_ATTEMPTS):
            name = f"{os.getpid()}-{threading.get_ident()}-{os.urandom(8).hex()}"
            staged = str(self._staging / name)
            fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                # Blocking: a gc probing the file holds its lock for microseconds. Between the
                # create and this lock gc may have found the file unlocked and removed it; the
                # link count says so, and the write starts over under a new name.
                fcntl.flock(fd, fcntl.LOCK_EX)
                if os.fstat(fd).st_nlink > 0:
                    return staged, fd
            except BaseException:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(staged)
                raise
            os.close(fd)
        raise StoreUnavailableError("the store stayed busy: staged files kept disappearing")

    def put(
        self, scope: Scope, data: bytes | bytearray | memoryview, request: PutRequest
    ) -> PutResult:
        """Store ``data`` for ``scope``; see :meth:`StoreBackend.put`.

        A put that returns has left a readable artifact: every decision that depends on a row
        (does this scope hold the bytes, is the blob there, is there room) is taken again inside
        the write transaction that acts on it, so a ``gc`` in another process cannot slip
        between a lookup and the write that relies on it.
        """
        write = prepare_write(data, request, self.limits)
        # The text search indexes (None: binary, never indexed), made before any lock is taken.
        text = index_utf8(write.data, write.media_type, write.sensitivity)
        with _translated():
            fast = self._put_existing(scope, write, indexed=text is None)
            if fast is not None:
                return fast
            jobs: list[_IndexJob] = []
            try:
                result = self._put_new(scope, write, text, jobs)
            except _SearchDamaged:
                self._search_damaged = True  # rolled back whole: again, without search rows
                jobs.clear()
                result = self._put_new(scope, write, text, jobs)
        for job in jobs:  # only after the commit that wrote its pending row
            self._queue(job)
        return result

    def _put_existing(
        self, scope: Scope, write: PreparedWrite, *, indexed: bool
    ) -> PutResult | None:
        """The cheap path: this owner already holds these bytes, alive for a while yet.

        One lookup and no write. It answers only when the record needs no extension: gc
        removes only records expired by its clock, and this one outlives "now" by at least half
        the TTL asked for. A record to extend (or expired, or absent) takes :meth:`_put_new`,
        which looks again and extends inside its write transaction. Extending here, after a
        lookup outside that transaction, lost writes: a gc could delete the row in between,
        the UPDATE matched nothing, and the put still reported success. A record without its
        search row (``indexed`` false: the body is text and the row may be missing) takes the
        write path too, which indexes it again.
        """
        with self._lock:
            row = self._index.execute(
                _SELECT_ONE,
                (*scope.owner, write.ref.digest),
            ).fetchone()
            if not indexed and row is not None:
                indexed = (
                    self._index.execute(_INDEXED, (*scope.owner, write.ref.digest)).fetchone()
                    is not None
                )
        if row is None or not indexed:
            return None
        record = record_from_row(row)
        now = self._clock()
        if record.expires <= now or needs_refresh(record.expires, now, write.ttl):
            return None
        if higher_sensitivity(record.sensitivity, write.sensitivity) is not record.sensitivity:
            return None  # the write path raises it, and indexes the masked copy
        # A row is a promise only with its bytes behind it: a blob lost since (deleted,
        # resized, replaced by something that is not a plain file) takes the write path, which
        # stages the bytes again. One open and fstat, never a read.
        fd = self._open_blob(scope.tenant, write.ref.digest, len(write.data))
        if fd is None:
            return None
        os.close(fd)
        return PutResult(write.ref, record, existing=True, blob_written=False)

    def _put_new(
        self, scope: Scope, write: PreparedWrite, text: bytes | None, jobs: list[_IndexJob]
    ) -> PutResult:
        """Write (or extend) the scope's record of these bytes in one write transaction.

        Inside it: the scope's record is looked up again (a live one is extended, never
        counted twice against the quota; one gone since an earlier lookup is written afresh),
        the blob row and file are checked again (bytes gc removed meanwhile are staged anew),
        and the quotas are counted, staging leftovers included.
        """
        digest = write.ref.digest
        size = len(write.data)
        with self._lock:
            known = self._index.execute(
                "SELECT 1 FROM blobs WHERE tenant = ? AND digest = ?", (scope.tenant, digest)
            ).fetchone()
        staged: str | None = None
        locks: list[int] = []
        chunks = b""
        if known is None:
            staged, chunks = self._stage(write, locks)
        try:
            with self._write() as db:
                now = self._clock()
                row = db.execute(_SELECT_ONE, (*scope.owner, digest)).fetchone()
                old = None if row is None else record_from_row(row)
                existing = old is not None and old.expires > now
                sensitivity = write.sensitivity
                if old is not None and existing:
                    sensitivity = higher_sensitivity(old.sensitivity, write.sensitivity)
                    if sensitivity is not write.sensitivity and text is not None:
                        # Indexed as the record's sensitivity, not this put's lower one.
                        text = index_utf8(write.data, write.media_type, sensitivity)
                if not existing:
                    objects, held = db.execute(
                        "SELECT count(*), coalesce(sum(size), 0) FROM artifacts"
                        " WHERE tenant = ? AND user = ? AND session = ? AND expires > ?",
                        (*scope.owner, now),
                    ).fetchone()
                    self.limits.check_session(objects, held, size)
                blob = db.execute(
                    "SELECT 1 FROM blobs WHERE tenant = ? AND digest = ?", (scope.tenant, digest)
                ).fetchone()
                path = self._blob_path(scope.tenant, digest)
                blob_written = blob is None or not self._blob_sound(scope.tenant, digest, size)
                if blob_written:
                    if staged is None:  # gc removed the blob since we looked: stage it now
                        staged, chunks = self._stage(write, locks)
                    if blob is None:
                        if tenant_quota(self.limits) != (None, None):
                            objects, held = db.execute(_TENANT_USAGE, (scope.tenant,)).fetchone()
                            check_tenant(self.limits, int(objects), int(held), size)
                        objects, held = db.execute(
                            "SELECT objects, bytes FROM stats WHERE id = 1"
                        ).fetchone()
                        check_store(
                            self.limits,
                            row_int(objects),
                            row_int(held) + self._leftover_bytes(),
                            size,
                        )
                    _mkdir_private(path.parent)
                    os.rename(staged, path)
                    staged = None
                    _fsync_dir(path.parent)
                    if blob is None:
                        db.execute(
                            "INSERT INTO blobs (tenant, digest, size, chunk_size, chunks, created)"
                            " VALUES (?, ?, ?, ?, ?, ?)",
                            (scope.tenant, digest, size, CHUNK_SIZE, chunks, now),
                        )
                        db.execute(
                            "UPDATE stats SET objects = objects + 1, bytes = bytes + ?"
                            " WHERE id = 1",
                            (size,),
                        )
                expires = now + write.ttl
                if old is not None and not existing:
                    # An expired record of the same bytes: this write starts a fresh one.
                    db.execute(
                        "DELETE FROM artifacts"
                        " WHERE tenant = ? AND user = ? AND session = ? AND digest = ?",
                        (*scope.owner, digest),
                    )
                    self._search_change(db, lambda fts: self._unindex(db, scope.owner, digest, fts))
                if old is not None and existing and sensitivity is not old.sensitivity:
                    # Raised to restricted: the search row is written again from the masked copy.
                    self._search_change(db, lambda fts: self._unindex(db, scope.owner, digest, fts))
                indexed = db.execute(_INDEXED, (*scope.owner, digest)).fetchone() is not None
                if text is not None and not indexed and self._can_queue(len(text)):
                    # The search row is written after the put returns (:meth:`_index_later`):
                    # its pending row commits with the record (and a re-put writes a lost one
                    # again), and a search of this owner writes what is still pending first.
                    (pending,) = db.execute(
                        "INSERT INTO search_pending (tenant, user, session, digest)"
                        " VALUES (?, ?, ?, ?) RETURNING id",
                        (*scope.owner, digest),
                    ).fetchone()
                    jobs.append(_IndexJob(pending, text, sensitivity))
                elif text is not None and not indexed:
                    # The indexer's queue is full: indexed in the put's transaction, a record
                    # and its search row committing together (with a damaged table, none:
                    # unindexed, verify says).
                    self._search_change(
                        db, functools.partial(self._add_doc_if, db, scope.owner, digest, text)
                    )
                db.execute(
                    "INSERT INTO artifacts (tenant, user, session, digest, size, media_type, kind,"
                    " tool, created, expires, sensitivity, complete, classification, task, worker,"
                    " agent, parent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (tenant, user, session, digest) DO UPDATE SET"
                    " expires = max(artifacts.expires, excluded.expires),"
                    " sensitivity = excluded.sensitivity",
                    (
                        *scope.owner,
                        digest,
                        size,
                        write.media_type,
                        write.kind,
                        write.tool,
                        now,
                        expires,
                        sensitivity.value,  # on a conflict: the higher of the two
                        int(write.complete),
                        write.classification,
                        scope.task,
                        scope.worker,
                        scope.agent,
                        None if write.parent is None else str(write.parent),
                    ),
                )
        finally:
            if staged is not None:
                with contextlib.suppress(OSError):
                    os.unlink(staged)
            for fd in locks:  # only now: a staged file must stay locked until it is gone
                os.close(fd)
        # The row as the upsert left it, without reading it back: a conflict only raised expires.
        if old is not None and existing:
            record = dataclasses.replace(
                old, expires=max(old.expires, expires), sensitivity=sensitivity
            )
        else:
            record = ArtifactRecord(
                ref=write.ref,
                size=size,
                media_type=write.media_type,
                kind=write.kind,
                tool=write.tool,
                created=float(now),
                expires=float(expires),
                sensitivity=write.sensitivity,
                complete=write.complete,
                classification=write.classification,
                task=scope.task,
                worker=scope.worker,
                agent=scope.agent,
                parent=write.parent,
            )
        return PutResult(write.ref, record, existing=existing, blob_written=blob_written)

    # -- reads ----------------------------------------------------------------------------

    def _lookup(self, scope: Scope, ref: Ref) -> tuple[ReadResult, bytes]:
        with self._lock:
            if self._closed:
                raise UsageError("the store is closed")
            row = self._index.execute(
                _SELECT_READ,
                (*scope.owner, ref.digest),
            ).fetchone()
            if row is None:
                return _absent(self._index, scope, ref), b""
        record = record_from_row(row[:-1])
        if not isinstance(row[-1], bytes):
            raise MalformedRowError(MALFORMED)
        if record.expires <= self._clock():
            return ReadResult(ReadOutcome.EXPIRED, ref, record=record), b""
        return ReadResult(ReadOutcome.RESOLVED, ref, record=record), row[-1]

    def stat(self, scope: Scope, ref: Ref) -> ReadResult:
        """The record of ``ref`` for ``scope`` from the index, without opening the blob; see
        :meth:`StoreBackend.stat`.

        Raises:
            StoreError: the index is damaged, or the scope's row of ``ref`` is malformed.
            StoreUnavailableError: the index is busy past its timeout or cannot be used.
        """
        with _translated():
            return self._lookup(scope, ref)[0]

    def touch(self, scope: Scope, ref: Ref, ttl: float | None = None) -> ReadResult:
        """Extend ``ref``'s life to ``max(expires, now + ttl)`` in one write transaction; see
        :meth:`StoreBackend.touch`.

        Raises:
            UsageError: a TTL out of range, or a closed store.
            StoreError: the index is damaged, or the scope's row of ``ref`` is malformed.
        """
        extend = self.limits.check_ttl(ttl)
        with _translated():
            return self._touch(scope, ref, extend)

    def _touch(self, scope: Scope, ref: Ref, extend: float) -> ReadResult:
        # Lookup and update share one write transaction, so nothing (gc above all) can come
        # between them; the UPDATE still repeats the liveness test and its row count is
        # checked, so the answer stays right even if the two are ever split.
        with self._write() as db:
            now = self._clock()
            row = db.execute(_SELECT_ONE, (*scope.owner, ref.digest)).fetchone()
            if row is None:
                return _absent(db, scope, ref)
            record = record_from_row(row)
            if record.expires <= now:
                return ReadResult(ReadOutcome.EXPIRED, ref, record=record)
            expires = now + extend
            if expires <= record.expires:
                return ReadResult(ReadOutcome.RESOLVED, ref, record=record)  # never shortens
            updated = db.execute(
                "UPDATE artifacts SET expires = ?"
                " WHERE tenant = ? AND user = ? AND session = ? AND digest = ? AND expires > ?",
                (expires, *scope.owner, ref.digest, now),
            )
            if updated.rowcount != 1:
                # Gone (or expired) since the lookup: answer as stat now would, never resolved.
                row = db.execute(_SELECT_ONE, (*scope.owner, ref.digest)).fetchone()
                if row is None:
                    return _absent(db, scope, ref)
                return ReadResult(ReadOutcome.EXPIRED, ref, record=record_from_row(row))
        return ReadResult(
            ReadOutcome.RESOLVED, ref, record=dataclasses.replace(record, expires=expires)
        )

    def read(
        self,
        scope: Scope,
        ref: Ref,
        *,
        start: int = 0,
        end: int | None = None,
        max_bytes: int | None = None,
    ) -> ReadResult:
        """Verified bytes ``[start, end)`` of ``ref``; see :meth:`StoreBackend.read`.

        The blob is opened without following links and checked (a plain file of this user, of
        the record's size, inside the root) before a byte is read; a whole read re-hashes the
        body, a range only the chunks it touches. Anything else reads ``stale``.

        Raises:
            UsageError: a malformed range, or a closed store.
            StoreError: the index is damaged, or the scope's row of ``ref`` is malformed.
        """
        with _translated():
            found, chunks = self._lookup(scope, ref)
            record = found.record
            if found.outcome is not ReadOutcome.RESOLVED or record is None:
                return found
            begin, stop = clip_range(record.size, start, end)
            if max_bytes is not None and stop - begin > max_bytes:
                return ReadResult(ReadOutcome.OVER_BUDGET, ref, record=record, start=begin)
            stale = ReadResult(ReadOutcome.STALE, ref, record=record, start=begin)
            fd = self._open_blob(scope.tenant, ref.digest, record.size)
            if fd is None:
                # A gc may have collected the artifact since the lookup (it expired meanwhile):
                # answer as a lookup now would, and call it stale only if it still resolves.
                again = self._lookup(scope, ref)[0]
                return stale if again.outcome is ReadOutcome.RESOLVED else again
            try:
                if begin == 0 and stop == record.size:
                    body = _read_exact(fd, 0, record.size)
                    if hashlib.sha256(body).hexdigest() != ref.digest:
                        return stale
                    return ReadResult(ReadOutcome.RESOLVED, ref, body, record, begin)
                part = verify_range(
                    lambda offset, length: _read_exact(fd, offset, length),
                    chunks,
                    record.size,
                    begin,
                    stop,
                )
            finally:
                os.close(fd)
            if part is None:
                return stale
            return ReadResult(ReadOutcome.RESOLVED, ref, part, record, begin)

    def artifacts(self, scope: Scope) -> list[ArtifactRecord]:
        """Every record of the scope's owner, oldest first; see :meth:`StoreBackend.artifacts`.

        A malformed row (see :class:`MalformedRowError`) is left out, so one damaged row never
        hides the rest of a scope; ``verify`` reports it.
        """
        with _translated(), self._lock:
            rows = self._index.execute(
                _SELECT_ALL,
                scope.owner,
            ).fetchall()
        return sound_records(rows)

    def search(self, scope: Scope, query: str, *, limit: int) -> list[SearchHit]:
        """Ranked full-text search over the scope's own live text artifacts; see
        :meth:`StoreBackend.search`.

        Raises:
            UsageError: a blank query, a ``limit`` outside 1..100, or a closed store.
            StoreError: the index is damaged.
        """
        terms = search_terms(query, limit)
        if not terms:
            return []
        with _translated():
            self._catch_up(scope)
        with _translated(), self._lock:
            rows = self._index.execute(
                "SELECT d.digest, f.body FROM search_text f"
                " JOIN search_docs d ON d.id = f.rowid"
                " JOIN artifacts a ON a.tenant = d.tenant AND a.user = d.user"
                " AND a.session = d.session AND a.digest = d.digest"
                " WHERE search_text MATCH ? AND d.tenant = ? AND d.user = ? AND d.session = ?"
                " AND a.expires > ?",
                (match_expression(query), *scope.owner, self._clock()),
            ).fetchall()
        found: list[SearchHit] = []
        for digest, text in rows:
            # FTS5 finds the candidates; the shared scorer decides (the memory backend's answer;
            # PostgreSQL ranks with ts_rank) from the row's own text. A malformed row is never
            # followed.
            points = score(text, terms) if is_digest(digest) and isinstance(text, str) else None
            if points is not None:
                found.append(SearchHit(Ref(digest), points))
        return ranked(found, limit)

    def usage(self, scope: Scope) -> Usage:
        """The session's unexpired artifacts and their bytes (its quota's count)."""
        with _translated(), self._lock:
            objects, held = self._index.execute(
                "SELECT count(*), coalesce(sum(size), 0) FROM artifacts"
                " WHERE tenant = ? AND user = ? AND session = ? AND expires > ?",
                (*scope.owner, self._clock()),
            ).fetchone()
        return Usage(int(objects), int(held))  # count and sum: SQLite's own numbers

    def tenant_usage(self, scope: Scope) -> Usage:
        """The distinct blobs and bytes of the scope's tenant; see
        :meth:`StoreBackend.tenant_usage`. Staging leftovers are no tenant's (a staged file's
        name says nothing of its owner): they count toward the store's figure only."""
        with _translated(), self._lock:
            objects, held = self._index.execute(_TENANT_USAGE, (scope.tenant,)).fetchone()
        return Usage(int(objects), int(held))  # count and sum: SQLite's own numbers

    def store_usage(self) -> Usage:
        """Distinct blobs and their bytes, plus the bytes of staging leftovers.

        A leftover (a staged file whose writer died) takes disk space like a blob until ``gc``
        removes it, so its bytes count here and toward the store quota; it is not an object.
        """
        with _translated():
            with self._lock:
                objects, held = self._index.execute(
                    "SELECT objects, bytes FROM stats WHERE id = 1"
                ).fetchone()
            return Usage(row_int(objects), row_int(held) + self._leftover_bytes())

    def _leftover_bytes(self) -> int:
        """Bytes of the staged files no live writer holds."""
        total = 0
        with os.scandir(self._staging) as entries:
            for entry in entries:
                state, info = _staged_state(entry.path)
                if state == "leftover" and info is not None:
                    total += info.st_size
        return total

    # -- maintenance ----------------------------------------------------------------------

    def gc(self, *, dry_run: bool = False, progress: Progress | None = None) -> GcReport:
        """Remove expired artifacts and unnamed blobs; see :meth:`StoreBackend.gc`.

        A real run also removes every staging leftover: a staged file no live writer holds
        (its writer died; the kernel released its lock). A write in progress is never touched,
        however long it takes. The report counts expired artifacts and blobs only.
        """
        with _translated():
            try:
                return self._gc(dry_run, progress)
            except _SearchDamaged:
                self._search_damaged = True  # rolled back whole: again, keeping search rows
                return self._gc(dry_run, progress)

    def _gc(self, dry_run: bool, progress: Progress | None) -> GcReport:
        # Walked before the write lock is taken (writers wait for no walk); each orphan is
        # checked again under the lock before it goes.
        orphans = self._orphans()
        with self._write() as db:
            now = self._clock()
            # gc's cost must follow the expired count, not the store's size: the indexes are named
            # because SQLite's planner, without statistics, would rather scan a whole index than
            # sort the few expired rows, and check a digest's live rows through a tenant-wide
            # scan. Sorting in Python keeps the order deterministic (str order is UTF-8 order).
            # A malformed row (a digest that is not 64 hex, an owner that is not text) is never
            # followed: neither it nor any file is touched on its account; verify reports it.
            expired = sorted(
                (
                    row
                    for row in db.execute(
                        "SELECT tenant, user, session, digest FROM artifacts"
                        " INDEXED BY artifacts_by_expiry WHERE expires <= ?",
                        (now,),
                    ).fetchall()
                    if all(isinstance(part, str) for part in row[:3]) and is_digest(row[3])
                ),
                key=lambda row: (row[0], row[3], row[1], row[2]),
            )
            candidates = sorted({(tenant, digest) for tenant, _, _, digest in expired})
            doomed: list[tuple[str, str, int]] = []
            for tenant, digest in candidates:
                live = db.execute(
                    "SELECT 1 FROM artifacts INDEXED BY artifacts_by_digest"
                    " WHERE tenant = ? AND digest = ? AND expires > ? LIMIT 1",
                    (tenant, digest, now),
                ).fetchone()
                if live is None:
                    blob = db.execute(
                        "SELECT size FROM blobs WHERE tenant = ? AND digest = ?", (tenant, digest)
                    ).fetchone()
                    size = None if blob is None else blob[0]
                    if isinstance(size, int) and is_row_int(size):
                        doomed.append((tenant, digest, size))
                    # else no blob row (nothing to remove) or a malformed one (kept, reported)
            freed = sum(size for _, _, size in doomed)
            # Orphans are reported with the blobs removed; the counters never counted them.
            report = GcReport(
                len(expired),
                len(doomed) + len(orphans),
                freed + sum(size for _, _, size in orphans),
                dry_run,
            )
            if dry_run:
                return report
            db.executemany(
                "DELETE FROM artifacts"
                " WHERE tenant = ? AND user = ? AND session = ? AND digest = ?",
                [tuple(row) for row in expired],
            )
            # Their search rows go with them, in the same transaction (with a damaged search
            # table, only their search_docs rows: the text left in FTS5 is then unreachable).
            rows = [tuple(row) for row in expired]

            def unindex(fts: bool) -> None:
                if fts:
                    db.executemany(_UNINDEX_TEXT, rows)
                db.executemany(_UNINDEX_DOC, rows)
                db.executemany(_UNINDEX_PENDING, rows)

            self._search_change(db, unindex)
            db.executemany(
                "DELETE FROM blobs WHERE tenant = ? AND digest = ?",
                [(tenant, digest) for tenant, digest, _ in doomed],
            )
            db.execute(
                "UPDATE stats SET objects = objects - ?, bytes = bytes - ? WHERE id = 1",
                (len(doomed), freed),
            )
        # Files go only after the commit that removed their rows, and under the write lock, so
        # a writer re-adding the same bytes meanwhile is seen (its row is back) and kept.
        total = len(doomed)
        for start in range(0, total, 256):
            batch = doomed[start : start + 256]
            with self._write() as db:
                for tenant, digest, _ in batch:
                    back = db.execute(
                        "SELECT 1 FROM blobs WHERE tenant = ? AND digest = ?", (tenant, digest)
                    ).fetchone()
                    if back is None:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(self._blob_path(tenant, digest))
            if progress is not None:
                progress(min(start + 256, total), total)
        self._remove_orphans(orphans)
        self._remove_dead_staging()
        return report

    def _orphans(self) -> list[tuple[str, str, int]]:
        """Blob files no blob row names: ``(tenant key, digest, size)``, in path order.

        Only a plain file whose path has the shape the store gives a blob
        (``objects/<tenant key>/<ab>/<62 hex>``) is one; anything else under ``objects`` is an
        unknown entry, kept. The rows are read before the walk: a blob renamed into place
        after them may be listed, and :meth:`_remove_orphans` sees its row then.

        "No row names it" proves a file garbage only while the index is whole, so none is
        listed (``verify`` still reports each) when a blob row is malformed (its file may be
        the one the row meant), or for a file older than the index's ``since`` (a lost index,
        made anew, empty or written to since): such a file may hold bytes a record named, and
        is never swept. An index that names no blob is not in doubt by itself: every blob may
        have expired and gone, and a writer killed after that leaves a file younger than it.
        """
        named: dict[str, set[str]] = {}
        with self._lock:
            rows = self._index.execute("SELECT tenant, digest, size FROM blobs").fetchall()
            (since,) = self._index.execute("SELECT since FROM stats WHERE id = 1").fetchone()
        if not isinstance(since, float):
            return []
        for tenant, digest, size in rows:
            if not isinstance(tenant, str) or not is_digest(digest) or not is_row_int(size):
                return []
            named.setdefault(tenant_key(tenant), set()).add(digest)
        # File times come from the kernel's coarse clock, which may lag time.time() by a tick:
        # a leftover written just after the index was made must not look older than it.
        since -= _MTIME_SLACK
        try:
            top = os.lstat(self._objects)
        except FileNotFoundError:
            return []
        if not stat.S_ISDIR(top.st_mode):
            return []  # never walk through a link: a verify finding, not gc's business
        found: list[tuple[str, str, int]] = []
        for key in sorted(_listdir(self._objects_str)):
            key_dir = os.path.join(self._objects_str, key)
            if not _is_plain_dir(key_dir):
                continue
            for prefix in sorted(_listdir(key_dir)):
                prefix_dir = os.path.join(key_dir, prefix)
                if len(prefix) != 2 or not _is_plain_dir(prefix_dir):
                    continue
                for rest in sorted(_listdir(prefix_dir)):
                    digest = prefix + rest
                    if not is_digest(digest) or digest in named.get(key, ()):
                        continue
                    with contextlib.suppress(FileNotFoundError):
                        info = os.lstat(os.path.join(prefix_dir, rest))
                        if stat.S_ISREG(info.st_mode) and info.st_mtime >= since:
                            found.append((key, digest, info.st_size))
        return found

    def _remove_orphans(self, orphans: list[tuple[str, str, int]]) -> None:
        """Unlink orphan blob files, each checked again under the write lock (a put may have
        named the same bytes since the walk: it renames and commits under that lock)."""
        for start in range(0, len(orphans), 256):
            with self._write() as db:
                for key, digest, _ in orphans[start : start + 256]:
                    tenants = db.execute(
                        "SELECT tenant FROM blobs WHERE digest = ?", (digest,)
                    ).fetchall()
                    if any(tenant_key(t) == key for (t,) in tenants if isinstance(t, str)):
                        continue
                    path = os.path.join(self._objects_str, key, digest[:2], digest[2:])
                    with contextlib.suppress(FileNotFoundError):
                        if stat.S_ISREG(os.lstat(path).st_mode):
                            os.unlink(path)

    def _remove_dead_staging(self) -> None:
        with os.scandir(self._staging) as entries:
            for entry in entries:
                _staged_state(entry.path, remove=True)

    def verify(self, *, progress: Progress | None = None) -> list[Finding]:
        """Re-hash every blob and look over the managed root; see :meth:`StoreBackend.verify`.

        Beyond the blobs: a file that is not 0600 or a directory that is not 0700 is a
        ``permissions`` finding, a staged file no live writer holds a ``staging`` one (a write
        in progress is not reported), and anything that is not a plain file where a blob or a
        staged file should be is ``corrupt`` or ``unknown``; nothing is ever opened in a way
        that can block. A blob that looks missing or unnamed is looked at again under the
        write lock, so a ``gc`` or a put running meanwhile is not reported as damage.
        """
        self._drain()  # the search rows this handle queued are written before they are checked
        with _translated():
            return self._verify(progress)

    def _verify(self, progress: Progress | None) -> list[Finding]:
        findings: list[Finding] = []
        with self._lock:
            blobs = self._index.execute(
                "SELECT tenant, digest, size, chunk_size, chunks FROM blobs"
            ).fetchall()
            # Every record, with the size of the blob it names (NULL: no blob row).
            records = self._index.execute(
                "SELECT "  # noqa: S608 - the column list is a constant of this module
                + ", ".join("a." + c.strip() for c in _RECORD_COLUMNS.split(","))
                + ", a.tenant, a.user, a.session, b.digest IS NOT NULL, b.size"
                " FROM artifacts a LEFT JOIN blobs b ON a.tenant = b.tenant AND a.digest = b.digest"
            ).fetchall()
        findings.extend(record_findings(records))
        sound = []
        for row in blobs:
            tenant, digest, size, chunk_size, chunks = row
            if (
                not isinstance(tenant, str)
                or not is_digest(digest)
                or not is_row_int(size)
                or isinstance(chunk_size, bool)
                or not isinstance(chunk_size, int)
                or chunk_size <= 0
                or not isinstance(chunks, bytes)
            ):
                findings.append(Finding("corrupt", None, "a blob row of the index is malformed"))
            else:
                sound.append(row)
        sound.sort(key=lambda row: (row[0], row[1]))
        known: dict[str, set[str]] = {}
        for index, (tenant, digest, size, chunk_size, chunks) in enumerate(sound, 1):
            known.setdefault(tenant_key(tenant), set()).add(digest)
            findings.extend(self._check_blob(tenant, digest, size, chunk_size, chunks))
            if progress is not None:
                progress(index, len(sound))
        findings.extend(self._walk_objects(known))
        findings.extend(self._index_findings())
        with os.scandir(self._staging) as entries:
            for name in sorted(entry.name for entry in entries):
                state, _ = _staged_state(os.path.join(self._staging, name))
                if state == "leftover":
                    findings.append(Finding("staging", None, "a staged file of a write that died"))
                elif state == "unknown":
                    findings.append(
                        _unknown("an entry the store did not make", os.path.join("staging", name))
                    )
        try:
            _read_key(os.path.join(self._root, _KEY_FILE))
        except StoreError:
            findings.append(Finding("corrupt", None, "the marker key file is damaged"))
        for name in ("", "staging", _KEY_FILE, *_INDEX_FILES):  # objects: checked by the walk
            with contextlib.suppress(FileNotFoundError):
                finding = _mode_finding(os.lstat(os.path.join(self._root, name)))
                if finding is not None:
                    findings.append(finding)
        return findings

    def _index_findings(self) -> list[Finding]:
        """The search index out of step with the records: a record of a text body without its
        search row (``unindexed``: search cannot find it until its bytes are put again), and
        search rows no record names (``stray_index``). A search table too damaged to read is
        one ``unindexed`` finding (searches may miss hits; no byte is lost), not an error."""
        try:
            return self._index_gaps()
        except sqlite3.DatabaseError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise
            return [Finding("unindexed", None, "the search index is damaged")]

    def _index_gaps(self) -> list[Finding]:
        with self._lock:
            # FTS5's own check reads every block of its shadow tables (and changes nothing).
            self._index.execute("INSERT INTO search_text (search_text) VALUES ('integrity-check')")
            missing = self._index.execute(
                "SELECT a.tenant, a.digest, a.size, a.media_type, a.sensitivity FROM artifacts a"
                " WHERE NOT EXISTS (SELECT 1 FROM search_docs d WHERE d.tenant = a.tenant"
                " AND d.user = a.user AND d.session = a.session AND d.digest = a.digest)"
                # Another process's search row still to be written is not a gap.
                " AND NOT EXISTS (SELECT 1 FROM search_pending p WHERE p.tenant = a.tenant"
                " AND p.user = a.user AND p.session = a.session AND p.digest = a.digest)"
            ).fetchall()
            (stray,) = self._index.execute(
                "SELECT count(*) FROM search_docs d WHERE NOT EXISTS (SELECT 1 FROM artifacts a"
                " WHERE a.tenant = d.tenant AND a.user = d.user AND a.session = d.session"
                " AND a.digest = d.digest)"
                " OR NOT EXISTS (SELECT 1 FROM search_text f WHERE f.rowid = d.id)"
            ).fetchone()
        findings = []
        for tenant, digest, size, media_type, sensitivity in sorted(missing, key=str):
            if not isinstance(media_type, str):
                continue  # a malformed record: reported as one already
            text = self._head_text(tenant, digest, size, media_type, sensitivity)
            if isinstance(text, bytes):
                findings.append(
                    Finding("unindexed", digest, "a record of a text body has no search row")
                )
        if stray:
            findings.append(Finding("stray_index", None, "search rows name no record"))
        return findings

    def _check_blob(
        self, tenant: str, digest: str, size: int, chunk_size: int, chunks: bytes
    ) -> list[Finding]:
        fd = self._open_blob(tenant, digest, size)
        if fd is None:
            path = self._blob_path(tenant, digest)
            # Under the write lock neither gc nor a writer is between its row and its file.
            with self._write() as db:
                named = db.execute(
                    "SELECT 1 FROM blobs WHERE tenant = ? AND digest = ?", (tenant, digest)
                ).fetchone()
                present = os.path.lexists(path)
            if named is None:
                return []  # collected since the listing
            if not present:
                return [Finding("missing_blob", digest, "the blob's bytes are gone")]
            return [
                Finding(
                    "corrupt", digest, "the blob is a link, not a plain file, foreign, or resized"
                )
            ]
        try:
            sha = hashlib.sha256()
            pieces = []
            for offset in range(0, size, 4 * 1024 * 1024):
                block = _read_exact(fd, offset, min(4 * 1024 * 1024, size - offset))
                sha.update(block)
                pieces.append(block)
            info = os.fstat(fd)
        finally:
            os.close(fd)
        if sha.hexdigest() != digest:
            return [Finding("corrupt", digest, "bytes do not match their digest")]
        if chunk_digests(b"".join(pieces), chunk_size) != chunks:
            return [Finding("corrupt", digest, "chunk digests do not match the bytes")]
        finding = _mode_finding(info, digest)
        return [] if finding is None else [finding]

    def _walk_objects(self, known: dict[str, set[str]]) -> list[Finding]:
        findings: list[Finding] = []
        for dirpath, dirnames, filenames in os.walk(self._objects):
            dirnames.sort()
            rel = Path(dirpath).relative_to(self._objects).parts
            if len(rel) <= 2:  # objects, a tenant's directory, a prefix directory
                with contextlib.suppress(FileNotFoundError):
                    finding = _mode_finding(os.lstat(dirpath))
                    if finding is not None:
                        findings.append(finding)
            for name in sorted(filenames) + [d for d in dirnames if len(rel) >= 2]:
                full = os.path.join(dirpath, name)
                digest = (rel[1] + name) if len(rel) == 2 else ""
                try:
                    regular = stat.S_ISREG(os.lstat(full).st_mode)
                except FileNotFoundError:
                    continue  # collected since the walk listed it
                well_formed = len(rel) == 2 and len(digest) == 64 and set(digest) <= _HEX
                if not (well_formed and regular):
                    where = os.path.join("objects", *rel, name)
                    findings.append(_unknown("an entry the store did not make", where))
                elif digest not in known.get(rel[0], set()) and self._unnamed(rel[0], digest):
                    findings.append(Finding("orphan", digest, "bytes no record names"))
            for name in list(dirnames):
                if os.path.islink(os.path.join(dirpath, name)):
                    where = os.path.join("objects", *rel, name)
                    findings.append(_unknown("a symlink in the store", where))
                    dirnames.remove(name)
        return findings

    def _unnamed(self, key: str, digest: str) -> bool:
        """Whether no blob row of the tenant keyed ``key`` names ``digest`` (a put may have
        added one since verify listed the rows)."""
        with self._lock:
            tenants = self._index.execute(
                "SELECT tenant FROM blobs WHERE digest = ?", (digest,)
            ).fetchall()
        return not any(
            tenant_key(tenant) == key for (tenant,) in tenants if isinstance(tenant, str)
        )

    def marker_key(self) -> bytes:
        """The store's marker key, from ``marker.key`` (0600) under the root; made on first use.

        Made whole or not at all: the bytes are written and synced to a staged file that is then
        hard-linked into place (``link`` fails if the name exists), so a concurrent opener reads
        either no key file or a complete one, and two first users agree on the winner's key.

        Raises:
            StoreError: the key file is not a plain file of exactly 32 bytes (damaged: the store
                cannot vouch for the markers it made; nothing is replaced silently).
        """
        if self._marker_key is None:
            with _translated():
                path = os.path.join(self._root, _KEY_FILE)
                key = _read_key(path)
                if key is None:
                    staged, fd = self._create_staged()
                    try:
                        os.write(fd, new_key())
                        os.fsync(fd)
                        with contextlib.suppress(FileExistsError):
                            os.link(staged, path, follow_symlinks=False)
                            _fsync_dir(self._root)
                    finally:
                        os.close(fd)
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(staged)
                    key = _read_key(path)
                if key is None:
                    raise StoreError("the store's marker key file vanished while it was read")
                self._marker_key = key
        return self._marker_key

    def close(self) -> None:
        """Close the index, once the search rows queued are written. Idempotent."""
        self._forked()
        with self._wake:
            first = not self._closed
            self._closed = True  # the indexer ends once its queue is empty
            indexer = self._indexer
            self._wake.notify_all()
        if not first:
            return
        if indexer is not None:
            indexer.join()
        with self._lock:
            self._db.close()
            if self._indexer_db is not None:
                self._indexer_db.close()

    def corrupt_for_tests(self, tenant: str, ref: Ref, offset: int = 0) -> None:
        """Flip one stored byte in place, as a disk fault would. For tests of ``stale``."""
        path = self._blob_path(tenant, ref.digest)
        with open(path, "r+b") as handle:
            handle.seek(offset)
            byte = handle.read(1)
            handle.seek(offset)
            handle.write(bytes([byte[0] ^ 0xFF]))

    def lose_for_tests(self, tenant: str, ref: Ref) -> None:
        """Delete the blob file of ``ref`` in ``tenant`` and keep every row, as a disk fault or
        a stray ``rm`` would. For tests of ``stale`` and of a put that heals it."""
        os.unlink(self._blob_path(tenant, ref.digest))

    def blob_path_for_tests(self, tenant: str, ref: Ref) -> Path:
        """Where a blob lives, for tests that attack the filesystem (symlinks, permissions)."""
        return self._blob_path(tenant, ref.digest)


def _absent(db: sqlite3.Connection, scope: Scope, ref: Ref) -> ReadResult:
    """The outcome for a ref the scope holds no record of: ``unauthorized`` when another owner
    of the same tenant holds one, else ``missing``.

    The same query shape whether the tenant never saw the bytes or another tenant holds them:
    denial across tenants must look like absence.
    """
    other = db.execute(
        "SELECT 1 FROM artifacts WHERE tenant = ? AND digest = ? LIMIT 1",
        (scope.tenant, ref.digest),
    ).fetchone()
    return ReadResult(ReadOutcome.UNAUTHORIZED if other else ReadOutcome.MISSING, ref)


def _unknown(detail: str, where: str) -> Finding:
    """An ``unknown`` finding with the entry's path relative to the root: the root itself is
    never named, the entry's place under it is what an operator needs to look at it (a tenant
    key or a digest prefix names no owner)."""
    return Finding("unknown", None, detail, path=where)


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _is_plain_dir(path: str) -> bool:
    """A directory, not a link to one (gc never walks out of the root through a link)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _read_exact(fd: int, offset: int, length: int) -> bytes:
    data = os.pread(fd, length, offset)
    if len(data) == length or not data:
        return data
    parts = [data]
    got = len(data)
    while got < length:
        more = os.pread(fd, length - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _read_key(path: str) -> bytes | None:
    """The marker key at ``path``; ``None`` when there is none yet."""
    try:
        fd = os.open(path, _PROBE_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a symlink (ELOOP) or unreadable
        raise StoreError("the store's marker key file is not a plain file it can read") from exc
    try:
        info = os.fstat(fd)
        data = os.read(fd, KEY_BYTES + 1) if stat.S_ISREG(info.st_mode) else b""
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise StoreError(
            "the store's marker key file is damaged (not a plain file of 32 bytes); restore "
            "it from a backup, or remove it to make a new key (stubs and segments already "
            "handed out will then no longer pass the guard)"
        )
    return data


def _mode_finding(info: os.stat_result, digest: str | None = None) -> Finding | None:
    """A ``permissions`` finding for a directory that is not 0700 or a file that is not 0600."""
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISDIR(info.st_mode) and mode != 0o700:
        return Finding("permissions", digest, "a directory is not 0700")
    if stat.S_ISREG(info.st_mode) and mode != 0o600:
        return Finding("permissions", digest, "a file is not 0600")
    return None


def _staged_state(path: str, *, remove: bool = False) -> tuple[str, os.stat_result | None]:
    """What an entry of the staging directory is, and its ``fstat`` when it could be opened.

    ``held``: a live writer holds its lock. ``leftover``: a plain file nobody holds, whose
    writer died (removed first when ``remove``). ``unknown``: not a plain file (a link, a FIFO,
    a directory...), or unreadable. ``gone``: removed meanwhile. Opening never blocks, and
    the probe's own lock lasts microseconds (a shared one when only looking).
    """
    try:
        fd = os.open(path, _PROBE_FLAGS)
    except FileNotFoundError:
        return "gone", None
    except OSError:
        return "unknown", None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return "unknown", info
        try:
            fcntl.flock(fd, (fcntl.LOCK_EX if remove else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        except OSError:
            return "held", info  # held by a writer (or locks unsupported: keep it then)
        if remove:
            with contextlib.suppress(FileNotFoundError):
                now = os.lstat(path)
                # The very file that was locked, not one renamed over its name since.
                if (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino):
                    os.unlink(path)
        return "leftover", info
    finally:
        os.close(fd)
