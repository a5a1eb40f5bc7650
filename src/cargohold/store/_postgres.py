"""The PostgreSQL backend: one authoritative store shared by many agent hosts.

Metadata and bytes both live in PostgreSQL, in one schema (``cargohold`` by default)::

    blobs           (tenant, digest) -> size, chunk size, per-chunk digests, and the body: data
                    (bytea), or object (the key suffix of its object in the bucket)
    artifacts       (tenant, user, session, digest) -> the record; references its blob
    stats           one row: distinct blobs and bytes, the store quota's counter
    object_intents  objects being uploaded or waiting to be deleted (the blob tier)
    object_location one row: the bucket and prefix of the blob tier, if any
    events          decision events, one row each (PostgresEventsSink): their run tag, time, fields
    marker_key, schema_version

A row is visible only once its transaction commits, so a write interrupted anywhere (a dropped
connection, a server crash) leaves nothing partial. Bytes travel in binary; ``data`` is stored
uncompressed out of line, so a range read fetches only the TOAST chunks it needs with
``substring`` and re-hashes only the chunks it touches against the digests recorded at write.

Concurrency, which is the reason this backend exists:

- Identical bytes from many writers: ``INSERT ... ON CONFLICT DO NOTHING`` on the blob's key.
  PostgreSQL makes the losers wait for the winner's commit, then do nothing; every writer
  succeeds and one blob is stored (never check-then-insert).
- Session quotas: every new artifact of a session is written under a transaction-scoped advisory
  lock on that session, and counted under it, so writers of one session cannot overshoot.
- Store quota: the counters row is updated as the last statement before commit, and the new
  values are checked under its row lock; an over-quota writer rolls its blob back.
- gc against writers: a writer holds ``FOR KEY SHARE`` on the blob it references (taken by the
  lookup, or by its own insert) until it commits; gc takes ``FOR UPDATE`` on a blob before it
  deletes it, then deletes it only if no artifact row names it, in a statement that runs after
  the lock was granted and so sees every committed writer. A writer that finds its blob deleted
  under it inserts it again.
- Lock order is the same everywhere (session lock, blob, artifact row, counters), and gc locks
  blobs in key order, so no two transactions wait for each other in a cycle.

Bodies in object storage (the blob tier, ``blobs="s3://bucket/prefix"``): a body larger than the
tier's threshold lives in the bucket (:mod:`cargohold.store._blobs`) and its blob row holds the
object's key suffix instead of the bytes; records, chunk digests, quotas and TTLs stay here. Two
systems that share no transaction, kept consistent by ordering and by never reusing a key:

- A body is uploaded before its record commits. The writer first announces the upload (an
  ``object_intents`` row, state ``upload``), uploads to a key of its own, then in the put's
  transaction inserts the blob row naming that key and deletes its intent; if the intent is gone
  (gc reaped it as abandoned, and may have deleted the object), the transaction rolls back and
  the writer uploads again. So no row ever names an object that was not whole in the bucket
  when the row committed.
- A writer that finds the blob row holds it (``FOR KEY SHARE``, as above) and checks with a HEAD
  request that its object is there; if it is not (damage, a bucket lifecycle rule), it uploads
  the body again under a new key and repoints the row. A put that returns has left its body.
- gc deletes an object only after the transaction that removed the row naming it has committed:
  the same transaction records the object as a ``delete`` intent, and the object is deleted
  afterwards, then its intent. A writer re-adding the same bytes meanwhile finds no row and
  uploads under a new key, which that delete cannot reach. An interrupted gc leaves intents the
  next gc finishes. Upload intents older than ``blobs_grace`` are abandoned writes: gc turns them
  into deletes (the fence above makes that safe even for a writer still uploading).
- ``verify`` streams every object through SHA-256 and the chunk digests, and lists the bucket:
  a row whose object is gone is ``missing_blob``; an object with an intent is ``staging`` (gc
  removes it); one with neither is ``orphan`` and one whose key the store did not make is
  ``unknown``: both only reported, never deleted, since nothing proves they are garbage.
- Reads re-verify as for bytes in rows: a whole read hashes the object while it streams in; a
  range read fetches only the chunks it touches (a ranged GET) and re-hashes them.

Faults: psycopg's errors are translated here, in :func:`_translated`, without their text (it can
name hosts and users). A lost connection on an idempotent verb (reads, and puts, which are
idempotent by content) is retried on a fresh connection after the pool has discarded its broken
ones; otherwise the caller gets :class:`StoreUnavailableError`. The pool's own log records about
cargohold's pools (one warning per failed connection attempt, naming the host and the server's
message) are dropped by a filter on the ``psycopg.pool`` logger: the typed error is the one
report, and an unreachable server costs the command line one line of stderr, not a dozen.
Records about other pools of the process pass untouched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from cargohold._errors import (
    CargoholdError,
    ConfigError,
    SchemaError,
    StoreError,
    StoreUnavailableError,
    UsageError,
)

try:
    import psycopg
    import psycopg.conninfo
    import psycopg.errors
    import psycopg_pool
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without psycopg
    raise ConfigError(
        "the PostgreSQL backend needs psycopg: pip install 'cargohold[postgres]'"
    ) from exc

from cargohold._marks import KEY_BYTES, new_key
from cargohold._records import (
    CHUNK_SIZE,
    ArtifactRecord,
    Finding,
    GcReport,
    Limits,
    PutRequest,
    PutResult,
    ReadOutcome,
    ReadResult,
    Sensitivity,
    Usage,
)
from cargohold._ref import Ref
from cargohold._scope import Scope
from cargohold.store import _pg_migrations as migrations
from cargohold.store._core import (
    RECORD_COLUMNS,
    RECORD_WIDTH,
    PreparedWrite,
    check_store,
    check_tenant,
    chunk_digests,
    clip_range,
    higher_sensitivity,
    is_digest,
    needs_refresh,
    prepare_write,
    record_findings,
    record_from_row,
    sound_records,
    tenant_quota,
    verify_range,
)
from cargohold.store._location import DEFAULT_THRESHOLD
from cargohold.store._protocol import Clock, Progress
from cargohold.store._search import (
    SearchHit,
    index_text,
    ranked,
    search_terms,
    search_words,
)

if TYPE_CHECKING:
    from cargohold.store._blobs import ObjectTier

__all__ = ["PostgresStore", "schema_status", "upgrade_schema"]

_T = TypeVar("_T")
_Conn = psycopg.Connection[Any]

_POOL_NAME = "cargohold"
"""The name of every pool this backend opens; psycopg_pool names the pool in its records."""


class _QuietPool(logging.Filter):
    """Drops ``psycopg.pool`` records about cargohold's pools (their first argument is the
    pool's name): every failure they describe reaches the caller as a typed error."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        return not (isinstance(args, tuple) and args and args[0] == _POOL_NAME)


def _quiet_pool_logs() -> None:
    """Install :class:`_QuietPool` on the ``psycopg.pool`` logger, once per process."""
    logger = logging.getLogger("psycopg.pool")
    if not any(isinstance(f, _QuietPool) for f in logger.filters):
        logger.addFilter(_QuietPool())


_quiet_pool_logs()

GC_BATCH = 256
"""Blobs gc examines per transaction: bounds how long it holds their locks."""
_BLOB_ATTEMPTS = 8
"""A writer re-inserts a blob gc deleted under it; each retry needs another gc to interleave."""
_READ_ATTEMPTS = 3
"""A read whose object vanished because gc collected it meanwhile is answered again from the
rows; a row that still names a vanished object is damage (``stale``)."""
_NO_BUDGET = 1 << 62
_LOST_CONNECTION_STATES = frozenset({"57P01", "57P02", "57P03"})
"""Admin shutdown, crash shutdown, cannot connect now (plus class 08, connection exceptions)."""

_RECORD_COLUMNS = ", ".join("a." + column.strip() for column in RECORD_COLUMNS.split(","))
"""The record columns of :func:`record_from_row`, of the artifacts table aliased ``a``."""
_OWNED = 'a.tenant = %(tenant)s AND a."user" = %(user)s AND a.session = %(session)s'
_UNNAMED_OK = (
    "(EXISTS (SELECT 1 FROM {s}.artifacts)"
    " AND NOT EXISTS (SELECT 1 FROM {s}.artifacts WHERE digest !~ '^[0-9a-f]{64}$'))"
)
"""When "no record names this blob row" proves it garbage: some record is left, none malformed."""

# Every statement names its tables through "{s}", the store's checked, quoted schema name, and
# "{cols}", "{owned}" and "{unnamed_ok}" stand for the fragments above (see _Sql). Values are
# always bound parameters, never formatted in.
_SQL_TEMPLATES = {
    "select_one": "SELECT {cols} FROM {s}.artifacts a WHERE {owned} AND a.digest = %(digest)s",
    "select_all": "SELECT {cols} FROM {s}.artifacts a WHERE {owned} ORDER BY a.created, a.digest",
    # A put's lookup: the record, whether a blob row backs it and where its body is (NULL:
    # in the row), so a repeated put can tell a record whose bytes were lost (see _existing).
    "select_put": "SELECT {cols}, b.tenant IS NOT NULL, b.object FROM {s}.artifacts a"
    " LEFT JOIN {s}.blobs b ON b.tenant = a.tenant AND b.digest = a.digest"
    " WHERE {owned} AND a.digest = %(digest)s",
    "tenant_has": "SELECT EXISTS (SELECT 1 FROM {s}.artifacts"
    " WHERE tenant = %(tenant)s AND digest = %(digest)s)",
    # One round trip per read: the record, the chunk digests, and only the bytes the answer
    # needs. The range is clipped to the body here exactly as _core.clip_range does, widened to
    # whole chunks so each touched chunk can be re-hashed; nothing is fetched for an expired
    # record, an answer over budget or an empty range. Python re-derives the same range from
    # the record and checks what came back, so a disagreement can only ever read as stale.
    "read": "SELECT {cols}, b.chunk_size, b.chunks, c.first,"
    " CASE WHEN a.expires > %(now)s::float8 AND r.stop - r.begin <= %(budget)s::bigint THEN"
    "  CASE WHEN r.begin = 0 AND r.stop = a.size THEN b.data"
    "       WHEN r.stop > r.begin THEN"
    "         substring(b.data FROM (c.first + 1)::integer FOR (c.last - c.first)::integer)"
    "  END"
    " END, b.object"
    " FROM {s}.artifacts a"
    " LEFT JOIN {s}.blobs b ON b.tenant = a.tenant AND b.digest = a.digest"
    " CROSS JOIN LATERAL (SELECT least(%(start)s::bigint, s.stop) AS begin, s.stop FROM"
    "  (SELECT CASE WHEN %(end)s::bigint IS NULL THEN a.size"
    "   ELSE least(%(end)s::bigint, a.size) END AS stop) s"
    " ) r"
    " CROSS JOIN LATERAL (SELECT (r.begin / b.chunk_size) * b.chunk_size AS first,"
    "  least(a.size, ((r.stop + b.chunk_size - 1) / b.chunk_size) * b.chunk_size) AS last) c"
    " WHERE {owned} AND a.digest = %(digest)s",
    "refresh": "UPDATE {s}.artifacts SET expires = greatest(expires, %(expires)s)"
    ' WHERE tenant = %(tenant)s AND "user" = %(user)s AND session = %(session)s'
    " AND digest = %(digest)s AND expires > %(now)s RETURNING expires",
    # Check and extend in one statement: the row lock and PostgreSQL's recheck of the WHERE
    # clause after a concurrent gc's delete commits mean a row gc removed returns nothing.
    "touch": "UPDATE {s}.artifacts a SET expires = greatest(a.expires, %(expires)s::float8)"
    " WHERE {owned} AND a.digest = %(digest)s AND a.expires > %(now)s::float8 RETURNING {cols}",
    "session_usage": "SELECT count(*), coalesce(sum(size), 0)::bigint FROM {s}.artifacts"
    ' WHERE tenant = %(tenant)s AND "user" = %(user)s AND session = %(session)s'
    " AND expires > %(now)s",
    "hold_blob": "SELECT object FROM {s}.blobs WHERE tenant = %(tenant)s AND digest = %(digest)s"
    " FOR KEY SHARE",
    # A writer replacing a lost object changes the row: it locks it so from the start, never
    # upgrading a shared lock another writer of the same bytes may also hold.
    "hold_blob_for_update": "SELECT object FROM {s}.blobs"
    " WHERE tenant = %(tenant)s AND digest = %(digest)s FOR UPDATE",
    "blob_object": "SELECT object FROM {s}.blobs WHERE tenant = %(tenant)s AND digest = %(digest)s",
    "insert_blob": "INSERT INTO {s}.blobs"
    " (tenant, digest, size, chunk_size, chunks, data, created)"
    " VALUES (%(tenant)s, %(digest)s, %(size)s, %(chunk_size)s, %(chunks)b, %(data)b, %(now)s)"
    " ON CONFLICT (tenant, digest) DO NOTHING",
    "insert_object_blob": "INSERT INTO {s}.blobs"
    " (tenant, digest, size, chunk_size, chunks, object, created) VALUES (%(tenant)s,"
    " %(digest)s, %(size)s, %(chunk_size)s, %(chunks)b, %(object)s, %(now)s)"
    " ON CONFLICT (tenant, digest) DO NOTHING",
    "replace_object": "UPDATE {s}.blobs SET object = %(object)s"
    " WHERE tenant = %(tenant)s AND digest = %(digest)s AND object = %(old)s",
    # The object intents (see migration 4 and the module docstring).
    "announce_upload": "INSERT INTO {s}.object_intents (object, digest, state, since)"
    " VALUES (%(object)s, %(digest)s, 'upload', extract(epoch FROM clock_timestamp()))"
    " ON CONFLICT (object) DO NOTHING",
    "consume_upload": "DELETE FROM {s}.object_intents"
    " WHERE object = %(object)s AND state = 'upload'",
    "abandon_upload": "UPDATE {s}.object_intents SET state = 'delete'"
    " WHERE object = %(object)s RETURNING digest",
    "doom_objects": "INSERT INTO {s}.object_intents (object, digest, state, since)"
    " SELECT o, d, 'delete', extract(epoch FROM clock_timestamp())"
    " FROM unnest(%(objects)s::text[], %(digests)s::text[]) AS"
    " x(o, d) ON CONFLICT (object) DO UPDATE SET state = 'delete'",
    # Ages are measured on the database's clock, the one clock every host shares: a host whose
    # own clock is off can neither have its uploads taken early nor keep abandoned ones.
    "reap_uploads": "UPDATE {s}.object_intents SET state = 'delete'"
    " WHERE state = 'upload' AND since < extract(epoch FROM clock_timestamp()) - %(grace)s",
    "doomed": "SELECT object, digest FROM {s}.object_intents WHERE state = 'delete'"
    " ORDER BY object",
    "forget_doomed": "DELETE FROM {s}.object_intents"
    " WHERE object = ANY(%(objects)s::text[]) AND state = 'delete'",
    "intents": "SELECT object FROM {s}.object_intents",
    "named_objects": "SELECT object FROM {s}.blobs WHERE object IS NOT NULL",
    # An orphan is doomed only while still unnamed: a row or an intent made since the
    # listing (impossible by the protocol, checked anyway) keeps it.
    "doom_orphans": "INSERT INTO {s}.object_intents (object, digest, state, since)"
    " SELECT o, d, 'delete', extract(epoch FROM clock_timestamp())"
    " FROM unnest(%(objects)s::text[], %(digests)s::text[]) AS x(o, d)"
    " WHERE NOT EXISTS (SELECT 1 FROM {s}.blobs WHERE object = o)"
    " ON CONFLICT (object) DO NOTHING",
    "object_known": "SELECT EXISTS (SELECT 1 FROM {s}.blobs WHERE object = %(object)s)"
    " OR EXISTS (SELECT 1 FROM {s}.object_intents WHERE object = %(object)s)",
    "precheck": "SELECT (SELECT count(*) FROM {s}.artifacts WHERE tenant = %(tenant)s"
    '  AND "user" = %(user)s AND session = %(session)s AND expires > %(now)s),'
    " (SELECT coalesce(sum(size), 0)::bigint FROM {s}.artifacts WHERE tenant = %(tenant)s"
    '  AND "user" = %(user)s AND session = %(session)s AND expires > %(now)s),'
    " s.objects, s.bytes, EXISTS (SELECT 1 FROM {s}.blobs WHERE tenant = %(tenant)s"
    "  AND digest = %(digest)s) FROM {s}.stats s WHERE s.id = 1",
    # Insert-if-absent then read, as the marker key: the first host names the bucket for all.
    "location": "WITH made AS (INSERT INTO {s}.object_location (id, location)"
    " VALUES (1, %(location)s) ON CONFLICT (id) DO NOTHING RETURNING location)"
    " SELECT location FROM made UNION ALL"
    " SELECT location FROM {s}.object_location WHERE id = 1",
    "location_get": "SELECT location FROM {s}.object_location WHERE id = 1",
    # Under the session lock and with the old record known to be expired (or absent): a fresh
    # record replaces it whole, as if gc had run in between. Known when looked up: a put that
    # extended the row since (outside the session lock) may have committed in between, so an
    # expiry still in the future is never shortened (a put's promise stands).
    "upsert_artifact": 'INSERT INTO {s}.artifacts (tenant, "user", session, digest, size,'
    " media_type, kind, tool, created, expires, sensitivity, complete, classification, task,"
    " worker, agent, parent, search) VALUES (%(tenant)s, %(user)s, %(session)s, %(digest)s,"
    " %(size)s, %(media_type)s, %(kind)s, %(tool)s, %(now)s, %(expires)s, %(sensitivity)s,"
    " %(complete)s, %(classification)s, %(task)s, %(worker)s, %(agent)s, %(parent)s,"
    " to_tsvector('simple', %(words)s))"
    ' ON CONFLICT (tenant, "user", session, digest) DO UPDATE SET size = excluded.size,'
    " media_type = excluded.media_type, kind = excluded.kind, tool = excluded.tool,"
    " created = excluded.created, expires = CASE WHEN {s}.artifacts.expires > %(now)s"
    " THEN greatest({s}.artifacts.expires, excluded.expires) ELSE excluded.expires END,"
    " sensitivity = excluded.sensitivity, complete = excluded.complete,"
    " classification = excluded.classification, task = excluded.task,"
    " worker = excluded.worker, agent = excluded.agent, parent = excluded.parent,"
    " search = excluded.search",
    # A re-put as restricted of bytes held as internal (or public): the record is raised, and
    # its words are those of the masked copy.
    "raise_sensitivity": "UPDATE {s}.artifacts a SET sensitivity = %(sensitivity)s,"
    " search = to_tsvector('simple', %(words)s) WHERE {owned} AND a.digest = %(digest)s",
    # A re-put writes the words of a record that has none (written before the search index).
    "heal_search": "UPDATE {s}.artifacts a SET search = to_tsvector('simple', %(words)s)"
    " WHERE {owned} AND a.digest = %(digest)s AND a.search IS NULL",
    "store_counters": "SELECT objects, bytes FROM {s}.stats WHERE id = 1",
    "tenant_usage": "SELECT count(*), coalesce(sum(size), 0)::bigint FROM {s}.blobs"
    " WHERE tenant = %(tenant)s",
    # Decision events (migration 6): one row each; a run's newest N by the (run, id) index,
    # handed back oldest first.
    "append_event": "INSERT INTO {s}.events (time, run, event)"
    " VALUES (to_timestamp(%(time)s::float8), %(run)s, %(event)s::jsonb)",
    "run_events": "SELECT extract(epoch FROM e.time)::float8, e.event FROM (SELECT id, time,"
    " event FROM {s}.events WHERE run = %(run)s ORDER BY id DESC LIMIT %(limit)s) e"
    " ORDER BY e.id",
    "read_marker_key": "SELECT key FROM {s}.marker_key WHERE id = 1",
    # Insert-if-absent then read, in one statement: the first writer's key wins for everyone.
    "marker_key": "WITH made AS (INSERT INTO {s}.marker_key (id, key) VALUES (1, %(key)s)"
    " ON CONFLICT (id) DO NOTHING RETURNING key)"
    " SELECT key FROM made UNION ALL SELECT key FROM {s}.marker_key WHERE id = 1",
    "count_blob": "UPDATE {s}.stats SET objects = objects + 1, bytes = bytes + %(size)s"
    " WHERE id = 1 RETURNING objects, bytes",
    # A digest that is not 64 hex (a tampered row: artifacts.digest has no CHECK of its own)
    # is never followed; verify reports it. Blob rows no record names (none of the put's
    # making, but a tampered or restored database may hold them) are collected too, but only
    # while that proves them garbage ({unnamed_ok}): not while a record's digest is malformed
    # (the blob may be the one it meant) nor while no record is left at all (a lost or
    # truncated artifacts table would otherwise take every blob with it).
    "expired_blobs": "SELECT DISTINCT tenant, digest FROM {s}.artifacts"
    " WHERE expires <= %(now)s AND digest ~ '^[0-9a-f]{64}$'"
    " UNION SELECT tenant, digest FROM {s}.blobs b WHERE NOT EXISTS (SELECT 1 FROM"
    " {s}.artifacts a WHERE a.tenant = b.tenant AND a.digest = b.digest) AND {unnamed_ok}"
    " ORDER BY tenant, digest",
    # The blobs gc would remove are exactly those no live record names: those whose records
    # all expired, and those no record names at all (while {unnamed_ok}).
    "dry_run_gc": "SELECT count(*),"
    " (SELECT count(*) FROM {s}.blobs b WHERE NOT EXISTS (SELECT 1 FROM {s}.artifacts y"
    "   WHERE y.tenant = b.tenant AND y.digest = b.digest AND y.expires > %(now)s)"
    "   AND ({unnamed_ok} OR EXISTS (SELECT 1 FROM {s}.artifacts y"
    "   WHERE y.tenant = b.tenant AND y.digest = b.digest))),"
    " (SELECT coalesce(sum(size), 0)::bigint FROM {s}.blobs b WHERE NOT EXISTS (SELECT 1"
    "   FROM {s}.artifacts y WHERE y.tenant = b.tenant AND y.digest = b.digest"
    "   AND y.expires > %(now)s)"
    "   AND ({unnamed_ok} OR EXISTS (SELECT 1 FROM {s}.artifacts y"
    "   WHERE y.tenant = b.tenant AND y.digest = b.digest)))"
    " FROM {s}.artifacts WHERE expires <= %(now)s AND digest ~ '^[0-9a-f]{64}$'",
    "lock_blobs": "SELECT 1 FROM {s}.blobs WHERE (tenant, digest) IN"
    " (SELECT * FROM unnest(%(tenants)s::text[], %(digests)s::text[]))"
    " ORDER BY tenant, digest FOR UPDATE",
    "delete_expired": "DELETE FROM {s}.artifacts WHERE (tenant, digest) IN"
    " (SELECT * FROM unnest(%(tenants)s::text[], %(digests)s::text[]))"
    " AND expires <= %(now)s",
    "delete_unnamed_blobs": "DELETE FROM {s}.blobs b WHERE (b.tenant, b.digest) IN"
    " (SELECT * FROM unnest(%(tenants)s::text[], %(digests)s::text[]))"
    " AND NOT EXISTS (SELECT 1 FROM {s}.artifacts a"
    "  WHERE a.tenant = b.tenant AND a.digest = b.digest) RETURNING b.size, b.digest, b.object",
    "uncount_blobs": "UPDATE {s}.stats SET objects = objects - %(objects)s,"
    " bytes = bytes - %(bytes)s WHERE id = 1",
    "list_blobs": "SELECT tenant, digest FROM {s}.blobs ORDER BY tenant, digest",
    "verify_blob": "SELECT size, chunk_size, chunks, data, EXISTS (SELECT 1 FROM {s}.artifacts a"
    " WHERE a.tenant = b.tenant AND a.digest = b.digest), object"
    " FROM {s}.blobs b WHERE tenant = %(tenant)s AND digest = %(digest)s",
    # Every record with the owner, whether a blob row backs it, and that blob's size.
    "records_check": 'SELECT {cols}, a.tenant, a."user", a.session, b.tenant IS NOT NULL,'
    " b.size FROM {s}.artifacts a"
    " LEFT JOIN {s}.blobs b ON b.tenant = a.tenant AND b.digest = a.digest",
    # The counters follow, as if the row had never been counted: the put that heals counts it.
    "lose": "WITH gone AS (DELETE FROM {s}.blobs WHERE tenant = %(tenant)s"
    " AND digest = %(digest)s RETURNING size) UPDATE {s}.stats SET"
    " objects = objects - (SELECT count(*) FROM gone),"
    " bytes = bytes - (SELECT coalesce(sum(size), 0) FROM gone) WHERE id = 1",
    "corrupt": "UPDATE {s}.blobs SET data = set_byte(data, %(offset)s,"
    " 255 - get_byte(data, %(offset)s)) WHERE tenant = %(tenant)s AND digest = %(digest)s",
}


class _Sql:
    """The statements of one schema, formatted once when the store opens."""

    def __init__(self, schema: str) -> None:
        name = migrations.quoted_schema(schema)
        for key, template in _SQL_TEMPLATES.items():
            text = (
                template.replace("{cols}", _RECORD_COLUMNS)
                .replace("{owned}", _OWNED)
                .replace("{unnamed_ok}", _UNNAMED_OK)
            )
            setattr(self, key, text.replace("{s}", name))

    def __getattr__(self, key: str) -> str:  # pragma: no cover - typing aid, never reached
        raise AttributeError(key)


def _connection_lost(exc: BaseException, conn: _Conn | None) -> bool:
    """Whether ``exc`` means the connection died (worth retrying on another)."""
    if isinstance(exc, psycopg_pool.PoolTimeout | psycopg_pool.PoolClosed):
        return False
    if conn is not None and conn.broken:
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _LOST_CONNECTION_STATES


def _translate(exc: psycopg.Error) -> StoreError:
    """A cargohold error for a psycopg one, without its text (it may name hosts and users)."""
    if isinstance(exc, psycopg_pool.PoolTimeout):
        return StoreUnavailableError("no connection to the PostgreSQL store within the timeout")
    if isinstance(exc, psycopg.errors.UndefinedTable | psycopg.errors.UndefinedColumn):
        return SchemaError("the PostgreSQL store's tables are missing: run `cargohold db upgrade`")
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return StoreError("the PostgreSQL role lacks a privilege the store needs")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return StoreUnavailableError(
            "the PostgreSQL store could not be reached or lost its connection"
        )
    return StoreError("the PostgreSQL store could not complete the operation")


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except CargoholdError:
        raise
    except psycopg.Error as exc:
        raise _translate(exc) from exc


def _owner(scope: Scope, digest: str) -> dict[str, Any]:
    return {
        "tenant": scope.tenant,
        "user": scope.user,
        "session": scope.session,
        "digest": digest,
    }


def _batches(items: list[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class _NeedsUpload(Exception):
    """The put's transaction found no usable object for its bytes: roll back, upload, retry.

    Attributes:
        replacing: The object the blob row names that is missing from the bucket (the new
            upload replaces it), or ``None`` when there is no blob row.
    """

    def __init__(self, replacing: str | None) -> None:
        super().__init__()
        self.replacing = replacing


@dataclass(slots=True)
class _Upload:
    """One upload of a put's body: its key suffix, the object it replaces, and whether the
    transaction that committed consumed it (made a blob row name it)."""

    nonce: str
    replacing: str | None
    consumed: bool = False


@dataclass(frozen=True, slots=True)
class _Fetch:
    """A read the rows resolved whose bytes are in the bucket: what to fetch and check, after
    the PostgreSQL connection has gone back to the pool."""

    record: ArtifactRecord
    begin: int
    stop: int
    chunk_size: int
    chunks: bytes
    nonce: str


class PostgresStore:
    """A store in a PostgreSQL database, shared safely by many processes on many hosts.

    The schema must have been created with ``cargohold db upgrade`` (or :func:`upgrade_schema`);
    opening checks its version. Thread-safe: operations draw connections from a pool.

    Args:
        url: A ``postgresql://`` (or ``postgres://``) connection URL.
        limits: Store limits; the defaults of :class:`~cargohold.Limits` when omitted.
        clock: Source of "now" for TTLs; injected in tests.
        schema: The PostgreSQL schema holding the store's tables (a lower-case identifier), so
            several stores can share one database.
        min_size: Connections the pool keeps open.
        max_size: Most connections the pool opens at once.
        timeout: Seconds to wait for a pool connection (also when opening) before failing.
        retries: How many times an idempotent verb (reads, puts) is retried after its
            connection was lost; also how many times a failed request to the bucket is.
        blobs: ``s3://bucket/prefix``: keep bodies larger than ``blobs_threshold`` in this
            S3-compatible bucket (``cargohold[s3]``); endpoint, region and credentials come
            from the standard AWS variables. Every host of one store names the same bucket
            and prefix, and no other store may share them.
        blobs_threshold: Bodies of more than this many bytes go to the bucket.
        blobs_timeout: Seconds one request to the bucket may take, and after which a failing
            one is no longer retried.
        blobs_grace: Seconds after which ``gc`` takes an upload that never committed for
            abandoned and deletes its object (measured on the database server's clock).

    Raises:
        ConfigError: a URL psycopg cannot parse, or a bad schema name.
        StoreUnavailableError: the database cannot be reached within ``timeout``.
        SchemaError: the schema is behind (run ``cargohold db upgrade``) or ahead.
        ConfigError: the store keeps bodies in another bucket or prefix than ``blobs``, or in
            one while ``blobs`` is not given.
    """

    def __init__(
        self,
        url: str,
        *,
        limits: Limits | None = None,
        clock: Clock = time.time,
        schema: str = migrations.DEFAULT_SCHEMA,
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = 30.0,
        retries: int = 2,
        blobs: str | None = None,
        blobs_threshold: int = DEFAULT_THRESHOLD,
        blobs_timeout: float = 30.0,
        blobs_grace: float = 3600.0,
    ) -> None:
        self.limits = limits or Limits()
        self._clock = clock
        self._schema = schema
        self._sql = _Sql(schema)
        self._retries = retries
        self._closed = True
        self._marker_key: bytes | None = None
        self._tier: ObjectTier | None = None
        self._grace = float(blobs_grace)
        if blobs is not None:
            # Imported here: without the tier, obstore is never loaded. Without it installed,
            # the import raises a ConfigError naming the extra.
            from cargohold.store._blobs import ObjectTier

            self._tier = ObjectTier(
                blobs, threshold=blobs_threshold, timeout=blobs_timeout, retries=retries
            )
        try:
            psycopg.conninfo.conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise ConfigError("the PostgreSQL store URL cannot be parsed") from exc
        self._pool: psycopg_pool.ConnectionPool[_Conn] = psycopg_pool.ConnectionPool(
            url,
            min_size=min_size,
            max_size=max(min_size, max_size),
            kwargs={"autocommit": True, "application_name": "cargohold"},
            timeout=timeout,
            open=False,
            name=_POOL_NAME,
        )
        self._closed = False
        try:
            # One direct connection first: the pool retries a failing server until its
            # timeout and then says only that it timed out; this fails at once, and says where
            # and why.
            _connect(url, timeout).close()
            with _translated():
                self._pool.open(wait=True, timeout=timeout)
                with self._pool.connection() as conn:
                    migrations.check(conn, schema)
                    self._check_location(conn)
        except BaseException:
            self.close()
            raise

    def __repr__(self) -> str:
        return "PostgresStore()"

    def _check_location(self, conn: _Conn) -> None:
        """Refuse a host whose bucket is not the one the store's bodies are in."""
        if self._tier is None:
            if conn.execute(self._sql.location_get).fetchone() is not None:
                raise ConfigError(
                    "this PostgreSQL store keeps bodies in object storage: configure its "
                    "bucket (blobs, CARGOHOLD_BLOBS) as its other hosts do"
                )
            return
        row = conn.execute(self._sql.location, {"location": self._tier.location}).fetchone()
        if row is None or str(row[0]) != self._tier.location:
            raise ConfigError(
                "this PostgreSQL store keeps bodies in another bucket or prefix than the "
                "configured blobs URL"
            )

    def _bucket(self) -> ObjectTier:
        if self._tier is None:  # pragma: no cover - a host without the tier refuses to open
            raise StoreError("this store's bodies are in object storage, which is not configured")
        return self._tier

    # -- the connection seam ----------------------------------------------------------------

    def _call(self, op: Callable[[_Conn], _T], *, idempotent: bool) -> _T:
        """Run ``op`` on a pooled connection, translating errors and retrying lost connections.

        Only idempotent verbs are retried: a put that lost its connection at commit either
        committed or rolled back whole, and running it again converges on the same rows.
        """
        if self._closed:
            raise UsageError("the store is closed")
        attempts = 1 + (self._retries if idempotent else 0)
        for attempt in range(1, attempts + 1):
            conn: _Conn | None = None
            try:
                with self._pool.connection() as conn:
                    return op(conn)
            except CargoholdError:
                raise
            except psycopg.Error as exc:
                if attempt < attempts and _connection_lost(exc, conn):
                    # Every idle connection may have died with this one (a server restart):
                    # let the pool test them and replace the dead before the retry draws one.
                    self._pool.check()
                    continue
                raise _translate(exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    # -- writes -----------------------------------------------------------------------------

    def put(
        self, scope: Scope, data: bytes | bytearray | memoryview, request: PutRequest
    ) -> PutResult:
        """Store ``data`` for ``scope``; see :meth:`StoreBackend.put`.

        Retried on a fresh connection after a lost one (a put is idempotent by content). With
        the blob tier, a body over the threshold is uploaded before its record commits.

        Raises:
            UsageError: bad arguments, or a closed store.
            LimitExceededError: over the artifact size, a session, tenant or store quota.
            StoreUnavailableError: the database or the bucket cannot be reached in time.
        """
        write = prepare_write(data, request, self.limits)
        if self._tier is None:
            return self._call(lambda conn: self._put(conn, scope, write, None), idempotent=True)
        return self._put_with_tier(scope, write)

    def _put_with_tier(self, scope: Scope, write: PreparedWrite) -> PutResult:
        """A put that may need the body in the bucket first.

        A body for the bucket whose blob row does not exist yet is uploaded at once, before
        the put's transaction. Otherwise the transaction finds out (a row gone meanwhile, an
        object missing behind its row) and says so by raising :class:`_NeedsUpload`, rolling
        back; the body is then uploaded outside any transaction and the put runs again.
        """
        uploads: list[_Upload] = []
        upload: _Upload | None = None
        try:
            if self._bucket().holds(len(write.data)):
                first = self._call(
                    functools.partial(self._before_upload, scope=scope, write=write),
                    idempotent=True,
                )
                if isinstance(first, PutResult):
                    return first
                if first is not None:
                    uploads.append(first)
                    self._send(write, first)
                    upload = first
            for _ in range(_BLOB_ATTEMPTS):
                try:
                    return self._call(
                        functools.partial(self._put, scope=scope, write=write, upload=upload),
                        idempotent=True,
                    )
                except _NeedsUpload as need:
                    upload = self._announce(scope, write, need.replacing)
                    uploads.append(upload)
                    self._send(write, upload)
            raise StoreUnavailableError("the store stayed busy: an upload kept being collected")
        finally:
            for each in uploads:
                if not each.consumed:
                    self._abandon(write.ref.digest, each)

    def _before_upload(
        self, conn: _Conn, scope: Scope, write: PreparedWrite
    ) -> PutResult | _Upload | None:
        """Before a body for the bucket travels: the owner's live record (a repeated put, no
        upload), or an announced upload when no blob row holds these bytes yet, or ``None``
        (a blob row exists: the put's transaction checks its object)."""
        key = _owner(scope, write.ref.digest)
        row = conn.execute(self._sql.select_put, key, binary=True).fetchone()
        if row is not None:
            found = self._existing(conn, key, row, write)
            if found is not None:
                return found
        return self._announce_on(conn, scope, write, None)

    def _announce(self, scope: Scope, write: PreparedWrite, replacing: str | None) -> _Upload:
        """An upload announced (never ``None``: called when the transaction asked for one)."""

        def op(conn: _Conn) -> _Upload:
            upload = self._announce_on(conn, scope, write, replacing, always=True)
            assert upload is not None  # always=True announces
            return upload

        return self._call(op, idempotent=True)

    def _announce_on(
        self,
        conn: _Conn,
        scope: Scope,
        write: PreparedWrite,
        replacing: str | None,
        *,
        always: bool = False,
    ) -> _Upload | None:
        """Refuse early what the quotas would refuse, before the bytes travel (the put's
        transaction decides); then announce an upload, unless a blob row already holds the
        bytes and ``always`` is false."""
        digest = write.ref.digest
        now = self._clock()
        counts = conn.execute(self._sql.precheck, {**_owner(scope, digest), "now": now}).fetchone()
        if counts is not None:
            objects, held, blobs, stored, exists = counts
            if exists and not always:
                return None
            if replacing is None:
                self.limits.check_session(int(objects), int(held), len(write.data))
                check_store(self.limits, int(blobs), int(stored), len(write.data))
        upload = _Upload(self._bucket().new_nonce(), replacing)
        conn.execute(self._sql.announce_upload, {"object": upload.nonce, "digest": digest})
        return upload

    def _send(self, write: PreparedWrite, upload: _Upload) -> None:
        """Upload the body to the announced key (outside any transaction)."""
        self._bucket().upload(write.ref.digest, upload.nonce, write.data)

    def _abandon(self, digest: str, upload: _Upload) -> None:
        """Delete an upload no blob row names, best effort: gc finishes what this cannot.

        Driven by the intent row, not by what this process believes: the row is gone exactly
        when a committed transaction consumed the upload (or gc already took it), and then the
        object is left alone.
        """
        tier = self._bucket()
        with contextlib.suppress(CargoholdError):
            row = self._call(
                lambda conn: conn.execute(
                    self._sql.abandon_upload, {"object": upload.nonce}
                ).fetchone(),
                idempotent=True,
            )
            if row is None:
                return
            tier.delete([(digest, upload.nonce)])
            self._call(
                lambda conn: conn.execute(self._sql.forget_doomed, {"objects": [upload.nonce]}),
                idempotent=True,
            )

    def _put(
        self, conn: _Conn, scope: Scope, write: PreparedWrite, upload: _Upload | None
    ) -> PutResult:
        if upload is not None:
            upload.consumed = False  # this attempt's transaction has not consumed it (yet)
        key = _owner(scope, write.ref.digest)
        words = search_words(index_text(write.data, write.media_type, write.sensitivity))
        # The cheap path: this owner already holds these bytes, alive. One lookup, rarely a write.
        row = conn.execute(self._sql.select_put, key, binary=True).fetchone()
        if row is not None:
            found = self._existing(conn, key, row, write)
            if found is not None:
                if words is not None:
                    healed = _words_as(write, found.record.sensitivity, words)
                    conn.execute(self._sql.heal_search, {**key, "words": healed})
                return found
        live: ArtifactRecord | None = None
        with conn.transaction():
            # Serializes this session's new artifacts: its quota is counted and consumed under
            # the lock. Taken first, before any row lock (see the module docstring).
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s)",
                (migrations.lock_key(self._schema, *scope.owner),),
            )
            row = conn.execute(self._sql.select_put, key, binary=True).fetchone()
            now = self._clock()
            if row is not None:
                found = self._existing(conn, key, row, write)
                if found is not None:
                    if words is not None:
                        healed = _words_as(write, found.record.sensitivity, words)
                        conn.execute(self._sql.heal_search, {**key, "words": healed})
                    return found
                old = record_from_row(row)
                if old.expires > now:
                    live = old  # alive, but its bytes were lost: put them back, keep the record
            if live is None:
                objects, held = conn.execute(
                    self._sql.session_usage, {**key, "now": now}
                ).fetchone() or (0, 0)
                self.limits.check_session(int(objects), int(held), len(write.data))
            blob_written = self._hold_blob(conn, scope.tenant, write, now, upload)
            expires = now + write.ttl
            if live is not None:
                extended = conn.execute(
                    self._sql.refresh, {**key, "expires": expires, "now": now}
                ).fetchone()
                if extended is not None:
                    live = dataclasses.replace(live, expires=float(extended[0]))
                sensitivity = higher_sensitivity(live.sensitivity, write.sensitivity)
                if sensitivity is not live.sensitivity:
                    # This put's sensitivity is the higher: ``words`` are of its masked copy.
                    conn.execute(
                        self._sql.raise_sensitivity,
                        {**key, "sensitivity": sensitivity.value, "words": words},
                    )
                    live = dataclasses.replace(live, sensitivity=sensitivity)
                elif words is not None:
                    healed = _words_as(write, live.sensitivity, words)
                    conn.execute(self._sql.heal_search, {**key, "words": healed})
            else:
                conn.execute(
                    self._sql.upsert_artifact,
                    {
                        **key,
                        "size": len(write.data),
                        "media_type": write.media_type,
                        "kind": write.kind,
                        "tool": write.tool,
                        "now": now,
                        "expires": expires,
                        "sensitivity": write.sensitivity.value,
                        "complete": write.complete,
                        "classification": write.classification,
                        "task": scope.task,
                        "worker": scope.worker,
                        "agent": scope.agent,
                        "parent": None if write.parent is None else str(write.parent),
                        "words": words,
                    },
                )
            if blob_written:
                # Last before commit: the counters row is the one lock every new blob shares.
                counted = conn.execute(self._sql.count_blob, {"size": len(write.data)}).fetchone()
                objects, held = counted if counted is not None else (0, 0)
                check_store(
                    self.limits, int(objects) - 1, int(held) - len(write.data), len(write.data)
                )
        if live is not None:
            # The bytes went back under the record the owner already had (a new blob row, or
            # its lost object replaced by this put's upload).
            wrote = blob_written or (upload is not None and upload.consumed)
            return PutResult(write.ref, live, existing=True, blob_written=wrote)
        record = ArtifactRecord(
            ref=write.ref,
            size=len(write.data),
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
        return PutResult(write.ref, record, existing=False, blob_written=blob_written)

    def _existing(
        self, conn: _Conn, key: dict[str, Any], row: tuple[Any, ...], write: PreparedWrite
    ) -> PutResult | None:
        """The owner's live record of these bytes with its bytes behind it, its life extended
        if due; ``None`` if none (or its bytes were lost: the caller puts them back).

        ``row`` is a ``select_put`` row. A body in the row is there by the schema's checks; a
        body in the bucket is asked for with a HEAD request, so a repeated put never reports
        success over an object deleted behind the store's back.
        """
        record = record_from_row(row)
        backed, nonce = row[RECORD_WIDTH:]
        now = self._clock()
        if record.expires <= now:
            return None  # expired: counts again toward the quota, so take the full path
        if higher_sensitivity(record.sensitivity, write.sensitivity) is not record.sensitivity:
            return None  # this put raises it: the full path, under the session lock
        if not backed:
            return None
        if nonce is not None and self._bucket().size(write.ref.digest, str(nonce)) != len(
            write.data
        ):
            return None
        if needs_refresh(record.expires, now, write.ttl):
            refreshed = conn.execute(
                self._sql.refresh, {**key, "expires": now + write.ttl, "now": now}
            ).fetchone()
            if refreshed is None:
                return None  # expired (or collected) since the lookup
            record = dataclasses.replace(record, expires=float(refreshed[0]))
        return PutResult(write.ref, record, existing=True, blob_written=False)

    def _hold_blob(
        self, conn: _Conn, tenant: str, write: PreparedWrite, now: float, upload: _Upload | None
    ) -> bool:
        """Make sure the blob exists and stays until commit; ``True`` when this call wrote it.

        Either the lookup's ``FOR KEY SHARE`` or the insert itself holds the blob against gc.
        Insert-or-ignore settles the race between writers of the same bytes: the losers wait
        for the winner's commit and insert nothing. A blob gc deleted between the lookup and
        the insert is simply inserted again.

        With the blob tier: a blob row naming an object is used only once a HEAD request has
        found the object whole (held by the row lock, the object cannot be collected after
        that). A new blob of a body the bucket holds is inserted only with an upload this
        transaction consumes. Either need raises :class:`_NeedsUpload`.
        """
        key = {"tenant": tenant, "digest": write.ref.digest}
        size = len(write.data)
        in_bucket = self._tier is not None and self._tier.holds(size)
        replacing = upload.replacing if upload is not None else None
        lookup = self._sql.hold_blob if replacing is None else self._sql.hold_blob_for_update
        for _ in range(_BLOB_ATTEMPTS):
            row = conn.execute(lookup, key).fetchone()
            if row is not None:
                named = row[0]
                if named is None:
                    return False  # the body is in the row
                if upload is not None and named == replacing:
                    self._consume(conn, upload)
                    conn.execute(
                        self._sql.replace_object, {**key, "object": upload.nonce, "old": named}
                    )
                    # The missing object may yet show up (a glitch of the bucket): gc deletes it.
                    conn.execute(
                        self._sql.doom_objects,
                        {"objects": [named], "digests": [write.ref.digest]},
                    )
                    return False
                if self._bucket().size(write.ref.digest, str(named)) == size:
                    return False
                raise _NeedsUpload(str(named))
            if in_bucket and upload is None:
                raise _NeedsUpload(None)
            if tenant_quota(self.limits) != (None, None):
                # The tenant's new blobs are counted and added under a lock of the tenant's
                # (held to commit, taken after the session lock and before any row lock), so
                # writers of one tenant cannot overshoot its quota together.
                conn.execute(
                    "SELECT pg_advisory_xact_lock(%s)",
                    (migrations.lock_key(self._schema, "tenant", tenant),),
                )
                held = conn.execute(self._sql.tenant_usage, {"tenant": tenant}).fetchone()
                objects, stored = held if held is not None else (0, 0)
                check_tenant(self.limits, int(objects), int(stored), size)
            # Early refusal without the counters' lock, before the bytes travel; the
            # authoritative check runs under the lock just before commit.
            counters = conn.execute(self._sql.store_counters).fetchone()
            if counters is not None:
                check_store(self.limits, int(counters[0]), int(counters[1]), size)
            params = {
                **key,
                "size": size,
                "chunk_size": CHUNK_SIZE,
                "chunks": write.chunks or chunk_digests(write.data),
                "now": now,
            }
            if upload is not None:
                inserted = conn.execute(
                    self._sql.insert_object_blob, {**params, "object": upload.nonce}
                )
            else:
                inserted = conn.execute(self._sql.insert_blob, {**params, "data": write.data})
            if inserted.rowcount == 1:
                if upload is not None:
                    self._consume(conn, upload)
                return True
        raise StoreUnavailableError("the store stayed busy: a blob kept disappearing under gc")

    def _consume(self, conn: _Conn, upload: _Upload) -> None:
        """Take the upload's intent in this transaction, or start over if gc took it."""
        if conn.execute(self._sql.consume_upload, {"object": upload.nonce}).rowcount != 1:
            raise _NeedsUpload(upload.replacing)  # reaped as abandoned: its object may be gone
        upload.consumed = True

    # -- reads ------------------------------------------------------------------------------

    def _absent(self, conn: _Conn, scope: Scope, ref: Ref) -> ReadResult:
        # The same query whether the tenant never saw the bytes or another tenant holds them:
        # denial across tenants must look like absence.
        row = conn.execute(
            self._sql.tenant_has, {"tenant": scope.tenant, "digest": ref.digest}
        ).fetchone()
        outcome = ReadOutcome.UNAUTHORIZED if row and row[0] else ReadOutcome.MISSING
        return ReadResult(outcome, ref)

    def stat(self, scope: Scope, ref: Ref) -> ReadResult:
        """The record of ``ref`` for ``scope``, without fetching the bytes; see
        :meth:`StoreBackend.stat`.
        """

        def op(conn: _Conn) -> ReadResult:
            now = self._clock()
            row = conn.execute(
                self._sql.select_one, _owner(scope, ref.digest), binary=True
            ).fetchone()
            if row is None:
                return self._absent(conn, scope, ref)
            record = record_from_row(row)
            if record.expires <= now:
                return ReadResult(ReadOutcome.EXPIRED, ref, record=record)
            return ReadResult(ReadOutcome.RESOLVED, ref, record=record)

        return self._call(op, idempotent=True)

    def touch(self, scope: Scope, ref: Ref, ttl: float | None = None) -> ReadResult:
        """Extend ``ref``'s life to ``max(expires, now + ttl)`` in one statement; see
        :meth:`StoreBackend.touch`.

        Raises:
            UsageError: a TTL out of range, or a closed store.
        """
        extend = self.limits.check_ttl(ttl)

        def op(conn: _Conn) -> ReadResult:
            now = self._clock()
            key = _owner(scope, ref.digest)
            row = conn.execute(
                self._sql.touch, {**key, "expires": now + extend, "now": now}, binary=True
            ).fetchone()
            if row is not None:
                return ReadResult(ReadOutcome.RESOLVED, ref, record=record_from_row(row))
            # Nothing updated: expired, collected, or never this scope's. Answer as stat would.
            row = conn.execute(self._sql.select_one, key, binary=True).fetchone()
            if row is None:
                return self._absent(conn, scope, ref)
            return ReadResult(ReadOutcome.EXPIRED, ref, record=record_from_row(row))

        # Retried after a lost connection: extending to max(expires, now + ttl) is idempotent.
        return self._call(op, idempotent=True)

    def read(
        self,
        scope: Scope,
        ref: Ref,
        *,
        start: int = 0,
        end: int | None = None,
        max_bytes: int | None = None,
    ) -> ReadResult:
        """Verified bytes ``[start, end)`` of ``ref`` in one round trip (plus the bucket's
        GET for a body there); see :meth:`StoreBackend.read`.

        Raises:
            UsageError: a malformed range, or a closed store.
        """
        try:
            clip_range(0, start, end)
            valid = True
        except UsageError:
            valid = False  # raised below, once the ref is known to resolve (as local does)
        params = {
            **_owner(scope, ref.digest),
            "start": start if valid else 0,
            "end": end if valid else None,
            # A malformed range or a budget fetches nothing; a missing budget, everything.
            "budget": (_NO_BUDGET if max_bytes is None else max_bytes) if valid else -1,
        }

        def op(conn: _Conn) -> ReadResult | _Fetch:
            now = self._clock()
            row = conn.execute(self._sql.read, {**params, "now": now}, binary=True).fetchone()
            if row is None:
                return self._absent(conn, scope, ref)
            return self._answer(row, ref, now, start, end, max_bytes)

        for _ in range(_READ_ATTEMPTS - 1):
            answer = self._call(op, idempotent=True)
            if isinstance(answer, ReadResult):
                return answer
            fetched = self._fetch(scope.tenant, ref, answer)
            if fetched is not None:
                return fetched
        answer = self._call(op, idempotent=True)
        if isinstance(answer, ReadResult):
            return answer
        # The rows kept naming objects that kept vanishing: answer as for missing bytes.
        fetched = self._fetch(scope.tenant, ref, answer)
        return fetched or ReadResult(
            ReadOutcome.STALE, ref, record=answer.record, start=answer.begin
        )

    def _fetch(self, tenant: str, ref: Ref, fetch: _Fetch) -> ReadResult | None:
        """The bytes of a resolved record from the bucket, verified; ``None``: read again.

        Runs with no PostgreSQL connection held. An object that is not there is damage when
        its row still names it (``stale``); when the row is gone or names another object, gc
        or a writer changed it meanwhile, and the read is answered again from the rows.
        """
        from cargohold.store._blobs import ObjectMissing

        tier = self._bucket()
        record = fetch.record
        stale = ReadResult(ReadOutcome.STALE, ref, record=record, start=fetch.begin)
        try:
            if fetch.begin == 0 and fetch.stop == record.size:
                body = tier.read_whole(ref.digest, fetch.nonce, record.size)
                if body is None:
                    return stale
                return ReadResult(ReadOutcome.RESOLVED, ref, body, record, 0)
            part = verify_range(
                lambda offset, length: tier.read_span(
                    ref.digest, fetch.nonce, offset, offset + length
                ),
                fetch.chunks,
                record.size,
                fetch.begin,
                fetch.stop,
                fetch.chunk_size,
            )
        except ObjectMissing:
            row = self._call(
                lambda conn: conn.execute(
                    self._sql.blob_object, {"tenant": tenant, "digest": ref.digest}
                ).fetchone(),
                idempotent=True,
            )
            return stale if row is not None and row[0] == fetch.nonce else None
        if part is None:
            return stale
        return ReadResult(ReadOutcome.RESOLVED, ref, part, record, fetch.begin)

    def _answer(
        self,
        row: tuple[Any, ...],
        ref: Ref,
        now: float,
        start: int,
        end: int | None,
        max_bytes: int | None,
    ) -> ReadResult | _Fetch:
        record = record_from_row(row)
        chunk_size, chunks, first, data, nonce = row[RECORD_WIDTH:]
        if record.expires <= now:
            return ReadResult(ReadOutcome.EXPIRED, ref, record=record)
        begin, stop = clip_range(record.size, start, end)
        if max_bytes is not None and stop - begin > max_bytes:
            return ReadResult(ReadOutcome.OVER_BUDGET, ref, record=record, start=begin)
        stale = ReadResult(ReadOutcome.STALE, ref, record=record, start=begin)
        if chunk_size is None:
            return stale  # a record without its blob row
        if nonce is not None:
            if begin == stop:
                return ReadResult(ReadOutcome.RESOLVED, ref, b"", record, begin)
            return _Fetch(record, begin, stop, int(chunk_size), bytes(chunks), str(nonce))
        if begin == 0 and stop == record.size:
            body = bytes(data) if data is not None else None
            # The record's size is checked too: a record edited to another size than its
            # blob's is damage (verify reports it), never an answer of the wrong length.
            if (
                body is None
                or len(body) != record.size
                or hashlib.sha256(body).hexdigest() != ref.digest
            ):
                return stale
            return ReadResult(ReadOutcome.RESOLVED, ref, body, record, begin)
        span = b"" if data is None else bytes(data)
        fetched_from = int(first)

        def read_span(offset: int, length: int) -> bytes:
            if offset < fetched_from:
                return b""  # not what was fetched: short, so it reads as stale
            return span[offset - fetched_from : offset - fetched_from + length]

        part = verify_range(read_span, bytes(chunks), record.size, begin, stop, int(chunk_size))
        if part is None:
            return stale
        return ReadResult(ReadOutcome.RESOLVED, ref, part, record, begin)

    def artifacts(self, scope: Scope) -> list[ArtifactRecord]:
        """Every record of the scope's owner, oldest first; see :meth:`StoreBackend.artifacts`.

        A malformed row (a digest that is not 64 lowercase hex, an unknown sensitivity) is
        left out, so one damaged row never hides the rest of a scope; ``verify`` reports it.
        """

        def op(conn: _Conn) -> list[ArtifactRecord]:
            rows = conn.execute(self._sql.select_all, _owner(scope, ""), binary=True).fetchall()
            return sound_records(rows)

        return self._call(op, idempotent=True)

    def search(self, scope: Scope, query: str, *, limit: int) -> list[SearchHit]:
        """Ranked full-text search over the scope's own live text artifacts; see
        :meth:`StoreBackend.search`.

        Raises:
            UsageError: a blank query, a ``limit`` outside 1..100.
        """
        terms = search_terms(query, limit)
        if not terms:
            return []
        # Each term a phrase of its tokens, all ANDed; every value is bound as a parameter.
        match = " && ".join(
            f"phraseto_tsquery('simple', %(t{index})s)" for index in range(len(terms))
        )
        params: dict[str, Any] = {f"t{index}": " ".join(term) for index, term in enumerate(terms)}
        table = migrations.quoted_schema(self._schema) + ".artifacts"
        sql = (
            f"SELECT a.digest, ts_rank(a.search, x.q) FROM {table} a, (SELECT {match}) x(q)"  # noqa: S608 - the SQL is constant, the values are parameters
            f" WHERE {_OWNED} AND a.expires > %(now)s AND a.search @@ x.q"
            " ORDER BY 2 DESC, a.digest LIMIT %(limit)s"
        )
        params.update(_owner(scope, ""), now=self._clock(), limit=limit)

        def op(conn: _Conn) -> list[SearchHit]:
            rows = conn.execute(sql, params).fetchall()
            # ts_rank reads the record's own words only: no other owner's row moves a score.
            return [
                SearchHit(Ref(digest), round(float(rank), 9))
                for digest, rank in rows
                if is_digest(digest)
            ]

        return ranked(self._call(op, idempotent=True), limit)

    def usage(self, scope: Scope) -> Usage:
        """The session's unexpired artifacts and their bytes (its quota's count)."""

        def op(conn: _Conn) -> Usage:
            row = conn.execute(
                self._sql.session_usage, {**_owner(scope, ""), "now": self._clock()}
            ).fetchone()
            return Usage(int(row[0]), int(row[1])) if row else Usage(0, 0)

        return self._call(op, idempotent=True)

    def tenant_usage(self, scope: Scope) -> Usage:
        """The distinct blobs and bytes of the scope's tenant; see
        :meth:`StoreBackend.tenant_usage`."""

        def op(conn: _Conn) -> Usage:
            row = conn.execute(self._sql.tenant_usage, {"tenant": scope.tenant}).fetchone()
            return Usage(int(row[0]), int(row[1])) if row else Usage(0, 0)

        return self._call(op, idempotent=True)

    def store_usage(self) -> Usage:
        """Every tenant's distinct blobs and bytes, from the store's counters: an
        operator's figure.
        """

        def op(conn: _Conn) -> Usage:
            row = conn.execute(self._sql.store_counters).fetchone()
            return Usage(int(row[0]), int(row[1])) if row else Usage(0, 0)

        return self._call(op, idempotent=True)

    # -- maintenance ------------------------------------------------------------------------

    def gc(self, *, dry_run: bool = False, progress: Progress | None = None) -> GcReport:
        """Remove expired artifacts, the blobs no live record names, and (with the bucket)
        orphan objects and abandoned uploads; see :meth:`StoreBackend.gc`.

        Blobs are examined in batches of :data:`GC_BATCH`, each in its own transaction; a gc
        that loses its connection is not retried (its committed batches stand): run it again.
        """

        def op(conn: _Conn) -> GcReport:
            now = self._clock()
            if dry_run:
                row = conn.execute(self._sql.dry_run_gc, {"now": now}).fetchone()
                artifacts, blobs, freed = row if row else (0, 0, 0)
                return GcReport(int(artifacts), int(blobs), int(freed), True)
            candidates = [
                (str(tenant), str(digest))
                for tenant, digest in conn.execute(self._sql.expired_blobs, {"now": now})
            ]
            removed = blobs = freed = 0
            total = len(candidates)
            for done, batch in enumerate(_batches(candidates, GC_BATCH)):
                params = {
                    "tenants": [tenant for tenant, _ in batch],
                    "digests": [digest for _, digest in batch],
                    "now": now,
                }
                with conn.transaction():
                    # Blob locks first, in key order: a writer still holding one of these blobs
                    # commits first, and the deletes below (new statements) then see its row.
                    conn.execute(self._sql.lock_blobs, params)
                    removed += conn.execute(self._sql.delete_expired, params).rowcount
                    gone = conn.execute(self._sql.delete_unnamed_blobs, params).fetchall()
                    sizes = [int(size) for size, _, _ in gone]
                    if sizes:
                        conn.execute(
                            self._sql.uncount_blobs, {"objects": len(sizes), "bytes": sum(sizes)}
                        )
                    doomed = [(str(digest), str(obj)) for _, digest, obj in gone if obj]
                    if doomed:
                        # In the same transaction as the rows' removal: an object is deleted
                        # only once no row can name it, and never forgotten if this gc dies.
                        conn.execute(
                            self._sql.doom_objects,
                            {
                                "objects": [obj for _, obj in doomed],
                                "digests": [digest for digest, _ in doomed],
                                "now": now,
                            },
                        )
                blobs += len(sizes)
                freed += sum(sizes)
                if progress is not None:
                    progress(min((done + 1) * GC_BATCH, total), total)
            if self._tier is not None:
                self._delete_orphans(conn, self._tier)
                self._delete_doomed(conn, self._tier)
            return GcReport(removed, blobs, freed, False)

        # Not retried: a gc that lost its connection committed whole batches only; run it again.
        return self._call(op, idempotent=False)

    def _delete_orphans(self, conn: _Conn, tier: ObjectTier) -> None:
        """Doom the objects in the bucket that neither a blob row nor an intent names.

        The bucket is listed before the rows are read. Every object a writer uploads is
        announced (an intent) before the upload starts, and its intent goes only in the
        transaction that makes a blob row name it: an object listed then, and named by no row
        and no intent read afterwards, is one no writer can still commit (a crash's or a
        reaped upload's leftover). Keys the store did not make are never touched.
        """
        try:
            listed = [entry for entry in tier.listing() if entry is not None]
        except StoreUnavailableError:
            raise
        except StoreError:
            # A role without s3:ListBucket: gc still collects what the rows say; orphans stay
            # for a role that may list (verify needs the permission too, and says so).
            return
        if not listed:
            return
        named = {str(obj) for (obj,) in conn.execute(self._sql.named_objects)}
        if not named:
            # No blob row names any object while the bucket holds some: a lost or emptied
            # blobs table, not proof of garbage. Kept; verify reports each as an orphan.
            return
        known = {str(obj) for (obj,) in conn.execute(self._sql.intents)}
        known.update(named)
        orphans = sorted({(digest, nonce) for digest, nonce in listed if nonce not in known})
        for start in range(0, len(orphans), GC_BATCH):
            batch = orphans[start : start + GC_BATCH]
            # Recorded as deletes first, as every delete is: a gc killed midway is finished by
            # the next, and an object is never deleted without an intent saying so.
            conn.execute(
                self._sql.doom_orphans,
                {
                    "objects": [nonce for _, nonce in batch],
                    "digests": [digest for digest, _ in batch],
                },
            )

    def _delete_doomed(self, conn: _Conn, tier: ObjectTier) -> None:
        """Delete the objects no row names any more, then forget them.

        Uploads announced more than ``blobs_grace`` ago and never committed are taken for
        abandoned first: a writer still at it finds its intent gone when it commits, and
        uploads again (see the module docstring).
        """
        conn.execute(self._sql.reap_uploads, {"grace": self._grace})
        doomed = [(str(obj), str(digest)) for obj, digest in conn.execute(self._sql.doomed)]
        for start in range(0, len(doomed), GC_BATCH):
            batch = doomed[start : start + GC_BATCH]
            tier.delete([(digest, obj) for obj, digest in batch])
            conn.execute(self._sql.forget_doomed, {"objects": [obj for obj, _ in batch]})

    def verify(self, *, progress: Progress | None = None) -> list[Finding]:
        """Re-hash every blob (streaming a bucket's objects), check every record against
        its blob, and list the bucket; deletes nothing. See :meth:`StoreBackend.verify`.
        """

        def op(conn: _Conn) -> list[Finding]:
            findings = record_findings(
                conn.execute(self._sql.records_check, binary=True).fetchall()
            )
            # The bucket is listed before the rows are read: an object listed then is named by
            # a row or an intent read afterwards, unless gc deleted it in between.
            listed = list(self._tier.listing()) if self._tier is not None else []
            named: set[str] = set()
            keys = [(str(t), str(d)) for t, d in conn.execute(self._sql.list_blobs)]
            for index, (tenant, digest) in enumerate(keys, 1):
                row = conn.execute(
                    self._sql.verify_blob, {"tenant": tenant, "digest": digest}, binary=True
                ).fetchone()
                if row is not None:  # else collected since the listing
                    *blob, nonce = row
                    if nonce is None:
                        findings.extend(_check_blob(digest, *blob))
                    else:
                        named.add(str(nonce))
                        findings.extend(self._check_object(conn, tenant, digest, str(nonce), blob))
                if progress is not None:
                    progress(index, len(keys))
            if self._tier is not None:
                findings.extend(self._check_listing(conn, self._tier, listed, named))
            return findings

        return self._call(op, idempotent=True)

    def _check_object(
        self, conn: _Conn, tenant: str, digest: str, nonce: str, blob: list[Any]
    ) -> list[Finding]:
        """A blob whose body is in the bucket: stream it through the hashes."""
        from cargohold.store._blobs import ObjectMissing

        size, chunk_size, chunks, _, named = blob
        try:
            found, hexdigest, digests = self._bucket().scan(digest, nonce, int(chunk_size))
        except ObjectMissing:
            again = conn.execute(
                self._sql.blob_object, {"tenant": tenant, "digest": digest}
            ).fetchone()
            if again is None or again[0] != nonce:
                return []  # collected or replaced since the row was read
            return [Finding("missing_blob", digest, "a record's body is missing from the bucket")]
        if found != int(size) or hexdigest != digest:
            return [Finding("corrupt", digest, "bytes do not match their digest")]
        if digests != bytes(chunks):
            return [Finding("corrupt", digest, "chunk digests do not match the bytes")]
        if not named:
            return [Finding("orphan", digest, "bytes no record names")]
        return []

    def _check_listing(
        self,
        conn: _Conn,
        tier: ObjectTier,
        listed: list[tuple[str, str] | None],
        named: set[str],
    ) -> list[Finding]:
        """Objects in the bucket that no blob row names: reported, never deleted."""
        findings: list[Finding] = []
        intents = {str(obj) for (obj,) in conn.execute(self._sql.intents)}
        for entry in listed:
            if entry is None:
                findings.append(Finding("unknown", None, "an object the store did not make"))
                continue
            digest, nonce = entry
            if nonce in named:
                continue
            if nonce in intents:
                findings.append(
                    Finding(
                        "staging",
                        digest,
                        "an upload that never committed, or a delete gc has to finish",
                    )
                )
                continue
            known = conn.execute(self._sql.object_known, {"object": nonce}).fetchone()
            if (known is not None and known[0]) or tier.size(digest, nonce) is None:
                continue  # committed or collected since the listing
            findings.append(Finding("orphan", digest, "bytes in the bucket no record names"))
        return findings

    def marker_key(self) -> bytes:
        """The store's marker key, from its ``marker_key`` table; made by the first host that
        needs it, then the same for all (read once per instance).

        Raises:
            StoreError: the row holds something other than 32 bytes.
        """
        if self._marker_key is None:

            def op(conn: _Conn) -> bytes:
                # A first host committing its key while this statement ran: its snapshot sees
                # neither its own insert (it did nothing) nor the other's row; the next does.
                row = conn.execute(self._sql.read_marker_key).fetchone()
                if row is not None:  # the usual case; a role that may only read needs no more
                    return bytes(row[0])
                for _ in range(3):
                    row = conn.execute(self._sql.marker_key, {"key": new_key()}).fetchone()
                    if row is not None:
                        return bytes(row[0])
                return b""

            # Retried after a lost connection: inserting only when absent is idempotent.
            key = self._call(op, idempotent=True)
            if len(key) != KEY_BYTES:
                raise StoreError("the store's marker key row is damaged (not 32 bytes)")
            self._marker_key = key
        return self._marker_key

    # -- decision events ----------------------------------------------------------------------

    def append_event(
        self, run: str | None, fields: Mapping[str, str | int | None], *, received: float
    ) -> None:
        """Append one decision event to the store's ``events`` table.

        The table sits beside the artifacts, so every host of a shared store reports into one
        place (:class:`~cargohold.PostgresEventsSink` calls this). Not retried after a lost
        connection: a retry after a commit whose answer was lost would write the event twice.

        Args:
            run: The event's run tag (an opaque HMAC of its scope), ``None`` for an event
                without one; the rows of one tag are read back by :meth:`run_events`.
            fields: The event's fields (``DecisionEvent.as_dict()``: never a body, a path or
                an owner), stored as JSON.
            received: When the event was received, in seconds since the epoch.

        Raises:
            UsageError: ``fields`` that are not JSON data, or a closed store.
            StoreError: the row cannot be written (StoreUnavailableError: the database cannot
                be reached).
        """
        try:
            text = json.dumps(dict(fields), separators=(",", ":"), sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise UsageError("an event's fields must be JSON data (strings, integers)") from exc
        row = {"time": float(received), "run": run, "event": text}
        self._call(lambda conn: conn.execute(self._sql.append_event, row), idempotent=False)

    def run_events(self, run: str, *, limit: int) -> list[tuple[float, dict[str, Any]]]:
        """The newest ``limit`` events of run tag ``run``, oldest first, each as the time it
        was received (seconds since the epoch) and its fields.

        A row whose stored value is not a JSON object (a hand edit) is left out.

        Raises:
            UsageError: a ``limit`` that is not a positive integer, or a closed store.
            StoreError: the table cannot be read.
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UsageError("limit must be a positive integer")
        params = {"run": run, "limit": limit}

        def op(conn: _Conn) -> list[tuple[float, dict[str, Any]]]:
            rows = conn.execute(self._sql.run_events, params).fetchall()
            return [(float(moment), value) for moment, value in rows if isinstance(value, dict)]

        return self._call(op, idempotent=True)

    def close(self) -> None:
        """Close the connection pool. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(psycopg.Error):
            self._pool.close()

    def lose_for_tests(self, tenant: str, ref: Ref) -> None:
        """Lose the bytes of ``ref`` in ``tenant`` and keep every record, for tests of ``stale``
        and of a put that heals it: with the blob tier, delete the object behind the store's
        back; without, delete the blob row with the foreign keys bypassed (which needs a
        superuser, as a test cluster's role is), as a restore that lost a table would."""
        row = self._call(
            lambda conn: conn.execute(
                self._sql.blob_object, {"tenant": tenant, "digest": ref.digest}
            ).fetchone(),
            idempotent=True,
        )
        if row is not None and row[0] is not None and self._tier is not None:
            self._tier.delete([(ref.digest, str(row[0]))])
            return

        def op(conn: _Conn) -> None:
            with conn.transaction():
                conn.execute("SET LOCAL session_replication_role = replica")
                conn.execute(self._sql.lose, {"tenant": tenant, "digest": ref.digest})

        self._call(op, idempotent=False)

    def corrupt_for_tests(self, tenant: str, ref: Ref, offset: int = 0) -> None:
        """Flip one stored byte in place, as a disk fault would. For tests of ``stale``."""
        if self._tier is not None:
            row = self._call(
                lambda conn: conn.execute(
                    self._sql.blob_object, {"tenant": tenant, "digest": ref.digest}
                ).fetchone(),
                idempotent=True,
            )
            if row is not None and row[0] is not None:
                key = self._tier.key(ref.digest, str(row[0]))
                body = bytearray(self._tier.get_raw_for_tests(key))
                body[offset] = 255 - body[offset]
                self._tier.put_raw_for_tests(key, bytes(body))
                return
        self._call(
            lambda conn: conn.execute(
                self._sql.corrupt, {"tenant": tenant, "digest": ref.digest, "offset": offset}
            ),
            idempotent=False,
        )


def _check_blob(
    digest: str, size: int, chunk_size: int, chunks: bytes, data: bytes, named: bool
) -> list[Finding]:
    body = bytes(data)
    if len(body) != size or hashlib.sha256(body).hexdigest() != digest:
        return [Finding("corrupt", digest, "bytes do not match their digest")]
    if chunk_digests(body, int(chunk_size)) != bytes(chunks):
        return [Finding("corrupt", digest, "chunk digests do not match the bytes")]
    if not named:
        return [Finding("orphan", digest, "bytes no record names")]
    return []


def upgrade_schema(url: str, *, schema: str = migrations.DEFAULT_SCHEMA) -> tuple[int, int]:
    """Create or upgrade the store's schema at ``url``; returns ``(from, to)`` versions.

    Raises:
        SchemaError: the database's schema is newer than this cargohold.
        StoreUnavailableError: the database cannot be reached.
    """
    migrations.quoted_schema(schema)
    with _translated(), _connect(url) as conn:
        return migrations.upgrade(conn, schema)


def schema_status(url: str, *, schema: str = migrations.DEFAULT_SCHEMA) -> migrations.SchemaStatus:
    """The schema version at ``url`` against the one this cargohold expects."""
    migrations.quoted_schema(schema)
    with _translated(), _connect(url) as conn:
        return migrations.status(conn, schema)


def _connect(url: str, timeout: float = 30.0) -> _Conn:
    """A direct connection to ``url``.

    Raises:
        ConfigError: a URL psycopg cannot parse.
        StoreUnavailableError: the server cannot be reached or refuses the connection; the
            message names the host, the port and the cause (never the password, the user or
            the database, nor libpq's own text).
    """
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise ConfigError("the PostgreSQL store URL cannot be parsed") from exc
    wait = max(1, min(int(timeout), 30))
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        try:
            return psycopg.connect(
                url,
                autocommit=True,
                connect_timeout=wait,
                application_name="cargohold",
            )
        except psycopg.OperationalError as exc:
            # A server starting up, recovering from a crash or out of connection slots says so
            # and will take connections shortly: waited for, within the timeout, as the pool
            # would. A refusal, a name that does not resolve, refused credentials: at once.
            if _transient(exc) and time.monotonic() + delay < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            raise StoreUnavailableError(
                f"the PostgreSQL store at {_where(params)} cannot be reached: {_cause(exc, wait)}"
            ) from exc
        except psycopg.Error as exc:
            raise _translate(exc) from exc


_TRANSIENT_STATES = frozenset({"57P03", "53300"})
"""cannot_connect_now (starting up, in recovery, shutting down) and too_many_connections."""
_TRANSIENT_TEXT = ("too many clients", "starting up", "in recovery mode", "shutting down")


def _transient(exc: psycopg.OperationalError) -> bool:
    """Whether the server said it cannot take a connection *now* (it will soon)."""
    if exc.sqlstate in _TRANSIENT_STATES:
        return True
    text = str(exc).lower()
    return any(needle in text for needle in _TRANSIENT_TEXT)


def _where(params: dict[str, Any]) -> str:
    """``host:port`` as the URL (or libpq's environment and defaults) names them."""
    import os

    host = str(params.get("host") or params.get("hostaddr") or os.environ.get("PGHOST") or "")
    port = str(params.get("port") or os.environ.get("PGPORT") or "5432")
    if not host or host.startswith("/"):
        return f"the local socket (port {port})"  # a socket directory is a path: not shown
    return f"{host}:{port}"


_CAUSES = (
    (("connection refused",), "the connection was refused (is the server running there?)"),
    (
        ("could not translate host name", "name or service not known", "nodename nor servname"),
        "the host name does not resolve",
    ),
    (("no route to host",), "no route to the host"),
    (("network is unreachable",), "the network is unreachable"),
    (
        ("password authentication failed", "authentication failed", "no password supplied"),
        "the server refused the credentials (check the user and password)",
    ),
    (("pg_hba.conf",), "the server does not accept connections from this host or user"),
    (("does not exist",), "the database or role does not exist"),
    (("no such file or directory",), "no server is listening on that socket"),
    (
        ("too many clients", "starting up", "shutting down", "in recovery mode"),
        "the server is not accepting connections now",
    ),
    (("ssl", "certificate"), "the TLS handshake failed"),
)
"""libpq's messages, matched in lower case, and what cargohold says instead: its text names
users, databases and socket paths, so it is never shown."""


def _cause(exc: psycopg.Error, wait: int) -> str:
    text = str(exc).lower()
    if "timeout expired" in text or "timed out" in text:
        return f"no answer within {wait} s"
    for needles, cause in _CAUSES:
        if any(needle in text for needle in needles):
            return cause
    return "the connection failed"


def _words_as(write: PreparedWrite, sensitivity: Sensitivity, words: str) -> str | None:
    """A body's search words as a record of ``sensitivity`` holds them: ``words`` (made at the
    put's own sensitivity) when they agree, else made again (masked, for a restricted record
    put again as internal)."""
    if sensitivity is write.sensitivity:
        return words
    return search_words(index_text(write.data, write.media_type, sensitivity))
