"""Versioned schema migrations of the PostgreSQL backend, applied only when asked.

A shared store is upgraded on purpose (``cargohold db upgrade``), never as a side effect of an
agent host opening it: hosts running an older cargohold must not find the schema changed under
them mid-run. Opening a store checks the version and refuses, with a :class:`SchemaError` naming
the command to run, when the schema is behind or ahead.

Each migration is a version number and its statements; ``{schema}`` in a statement is the store's
quoted schema name. Applied versions are rows of ``schema_version``. An upgrade runs in one
transaction under an advisory lock, so two hosts upgrading at once apply each migration once.

This module never imports psycopg: it works on a connection the caller passes in.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Protocol

from cargohold._errors import ConfigError, SchemaError

DEFAULT_SCHEMA = "cargohold"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True, slots=True)
class Migration:
    """One step of the schema: a version and the statements that reach it from the one before."""

    version: int
    description: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "blobs with per-chunk digests, artifacts, store counters",
        (
            # Owner parts and digests compare bytewise ("C"): order is deterministic and the
            # same as Python's str order, whatever the database's default collation.
            """CREATE TABLE {schema}.blobs (
                tenant text COLLATE "C" NOT NULL,
                digest text COLLATE "C" NOT NULL CHECK (digest ~ '^[0-9a-f]{{64}}$'),
                size bigint NOT NULL CHECK (size >= 0),
                chunk_size integer NOT NULL CHECK (chunk_size > 0),
                chunks bytea NOT NULL,
                data bytea NOT NULL CHECK (octet_length(data) = size),
                created double precision NOT NULL,
                PRIMARY KEY (tenant, digest)
            )""",
            # Uncompressed out-of-line storage: substring() then fetches only the TOAST chunks
            # a range read touches, instead of decompressing the whole value first.
            "ALTER TABLE {schema}.blobs ALTER COLUMN data SET STORAGE EXTERNAL",
            """CREATE TABLE {schema}.artifacts (
                tenant text COLLATE "C" NOT NULL,
                "user" text COLLATE "C" NOT NULL,
                session text COLLATE "C" NOT NULL,
                digest text COLLATE "C" NOT NULL,
                size bigint NOT NULL,
                media_type text NOT NULL,
                kind text,
                tool text,
                created double precision NOT NULL,
                expires double precision NOT NULL,
                sensitivity text NOT NULL,
                complete boolean NOT NULL,
                classification text,
                task text,
                worker text,
                agent text,
                PRIMARY KEY (tenant, "user", session, digest),
                FOREIGN KEY (tenant, digest) REFERENCES {schema}.blobs (tenant, digest)
            )""",
            "CREATE INDEX artifacts_by_digest ON {schema}.artifacts (tenant, digest)",
            "CREATE INDEX artifacts_by_expiry ON {schema}.artifacts (expires)",
            # One row: the store quota is checked against it under its row lock, so concurrent
            # writers of new blobs cannot overshoot the quota together.
            """CREATE TABLE {schema}.stats (
                id integer PRIMARY KEY CHECK (id = 1),
                objects bigint NOT NULL,
                bytes bigint NOT NULL
            )""",
            "INSERT INTO {schema}.stats (id, objects, bytes) VALUES (1, 0, 0)",
        ),
    ),
    Migration(
        2,
        "the store's marker key (binds the stubs and segments it renders)",
        (
            # One row, written by the first host that needs the key (its random bytes come
            # from the client, not from a database extension); every host reads the same one.
            """CREATE TABLE {schema}.marker_key (
                id integer PRIMARY KEY CHECK (id = 1),
                key bytea NOT NULL CHECK (octet_length(key) = 32)
            )""",
        ),
    ),
    Migration(
        3,
        "the artifact each record was derived from (its parent)",
        (
            # The parent's canonical reference, NULL for bytes a tool produced. A nullable
            # column without a default is added without rewriting the table.
            'ALTER TABLE {schema}.artifacts ADD COLUMN parent text COLLATE "C"'
            " CHECK (parent ~ '^artifact://sha256/[0-9a-f]{{64}}$')",
        ),
    ),
    Migration(
        4,
        "bodies in object storage: the blob's object, upload and delete intents, the bucket",
        (
            # A body lives in exactly one place: its row (data) or the bucket, under
            # sha256/<digest>/<object> (object: the upload's own random key suffix, never
            # reused, so a delete of one upload can never reach another's).
            "ALTER TABLE {schema}.blobs ALTER COLUMN data DROP NOT NULL",
            'ALTER TABLE {schema}.blobs ADD COLUMN object text COLLATE "C"'
            " CHECK (object ~ '^[0-9a-f]{{32}}$')",
            "ALTER TABLE {schema}.blobs ADD CONSTRAINT blobs_body_in_one_place"
            " CHECK ((data IS NULL) <> (object IS NULL))",
            "CREATE UNIQUE INDEX blobs_by_object ON {schema}.blobs (object)"
            " WHERE object IS NOT NULL",
            # Every object the store writes or deletes is announced here first. 'upload': a
            # writer is uploading it; the row goes in the transaction that makes a blob row name
            # the object, and a writer whose row is gone (reaped by gc) uploads again. 'delete':
            # no row names it any more (or none ever will); gc deletes the object, then the row.
            # An object in the bucket with neither a blob row nor an intent is not provably
            # garbage, and is only ever reported.
            """CREATE TABLE {schema}.object_intents (
                object text COLLATE "C" PRIMARY KEY CHECK (object ~ '^[0-9a-f]{{32}}$'),
                digest text COLLATE "C" NOT NULL CHECK (digest ~ '^[0-9a-f]{{64}}$'),
                state text NOT NULL CHECK (state IN ('upload', 'delete')),
                since double precision NOT NULL
            )""",
            # The bucket and prefix every host of the store uses (never an endpoint or a
            # credential): a host configured for another, or for none, refuses to open.
            """CREATE TABLE {schema}.object_location (
                id integer PRIMARY KEY CHECK (id = 1),
                location text NOT NULL
            )""",
        ),
    ),
    Migration(
        5,
        "full-text search: each record's words, with a GIN index",
        (
            # The words of the record's text body (NULL: binary, or written before this
            # version until it is put again), parsed by the 'simple' configuration from the
            # tokens cargohold made (no stemming, no stop words). It lives on the record, so
            # every delete of a record (gc) removes it. A nullable column rewrites no row.
            "ALTER TABLE {schema}.artifacts ADD COLUMN search tsvector",
            "CREATE INDEX artifacts_search ON {schema}.artifacts USING gin (search)",
        ),
    ),
    Migration(
        6,
        "decision events: one row per event, read back by run tag",
        (
            # What PostgresEventsSink writes: the event's fields (never a body, a path or an
            # owner), its run tag (an opaque HMAC of the scope, NULL for an untagged event) and
            # the time the sink received it. The id gives the order events were written in;
            # (run, id) serves "one run's newest N" without a sort.
            """CREATE TABLE {schema}.events (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                time timestamptz NOT NULL,
                run text COLLATE "C",
                event jsonb NOT NULL
            )""",
            "CREATE INDEX events_by_run ON {schema}.events (run, id)",
        ),
    ),
)

LATEST = MIGRATIONS[-1].version
"""The schema version this cargohold reads and writes."""


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    """Where a store's schema stands against this version of cargohold.

    Attributes:
        current: The version applied in the database (0: never upgraded).
        latest: The version this cargohold expects.
    """

    current: int
    latest: int

    @property
    def state(self) -> str:
        """``current``, ``behind`` (run ``cargohold db upgrade``) or ``ahead`` (upgrade
        cargohold)."""
        if self.current == self.latest:
            return "current"
        return "behind" if self.current < self.latest else "ahead"


class _Cursor(Protocol):
    def fetchone(self) -> Any: ...


class Connection(Protocol):
    """The part of a psycopg connection migrations use."""

    def execute(self, query: Any, params: Any = ..., /) -> _Cursor: ...

    def transaction(self) -> Any: ...


def quoted_schema(schema: str) -> str:
    """The schema name, checked and quoted for SQL.

    Raises:
        ConfigError: not a plain lower-case identifier (letters, digits, underscores).
    """
    if not isinstance(schema, str) or _SCHEMA_NAME.fullmatch(schema) is None:
        raise ConfigError("a PostgreSQL schema name must be a lower-case identifier")
    return f'"{schema}"'


def lock_key(schema: str, *parts: str) -> int:
    """A signed 64-bit advisory lock key for ``parts`` within ``schema``.

    The parts are length-prefixed before hashing, so tuples that concatenate alike get
    different keys. A collision between two keys only makes their holders wait for each other.
    """
    hasher = hashlib.sha256(b"cargohold-lock\0")
    for part in (schema, *parts):
        raw = part.encode()
        hasher.update(len(raw).to_bytes(4, "big") + raw)
    return int.from_bytes(hasher.digest()[:8], "big", signed=True)


def _current(conn: Connection, schema: str) -> int:
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{quoted_schema(schema)}.schema_version",)
    ).fetchone()
    if not row[0]:
        return 0
    found = conn.execute(
        f"SELECT coalesce(max(version), 0) FROM {quoted_schema(schema)}.schema_version"  # noqa: S608 - a checked identifier
    ).fetchone()
    return int(found[0])


def status(conn: Connection, schema: str = DEFAULT_SCHEMA) -> SchemaStatus:
    """The schema version applied in the database, and the one this cargohold expects."""
    return SchemaStatus(_current(conn, schema), LATEST)


def check(conn: Connection, schema: str = DEFAULT_SCHEMA) -> None:
    """Refuse a store whose schema is not exactly the one this cargohold expects.

    Raises:
        SchemaError: behind (run ``cargohold db upgrade``) or ahead (upgrade cargohold).
    """
    found = status(conn, schema)
    if found.state == "behind":
        raise SchemaError(
            f"the PostgreSQL store's schema is version {found.current}, this cargohold needs "
            f"{found.latest}: run `cargohold db upgrade`"
        )
    if found.state == "ahead":
        raise SchemaError(
            f"the PostgreSQL store's schema is version {found.current}; this cargohold knows "
            f"up to {found.latest}: upgrade cargohold"
        )


def upgrade(conn: Connection, schema: str = DEFAULT_SCHEMA) -> tuple[int, int]:
    """Apply every pending migration in one transaction; returns ``(from, to)`` versions.

    Raises:
        SchemaError: the database's schema is newer than this cargohold.
    """
    name = quoted_schema(schema)
    with conn.transaction():
        # Two hosts upgrading at once: the second waits, then finds nothing left to apply.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema, "migrations"),))
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {name}")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {name}.schema_version ("
            " version integer PRIMARY KEY,"
            " description text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        before = _current(conn, schema)
        if before > LATEST:
            raise SchemaError(
                f"the PostgreSQL store's schema is version {before}; this cargohold knows up to "
                f"{LATEST}: upgrade cargohold"
            )
        for migration in MIGRATIONS:
            if migration.version <= before:
                continue
            for statement in migration.statements:
                conn.execute(statement.format(schema=name))
            conn.execute(
                f"INSERT INTO {name}.schema_version (version, description) VALUES (%s, %s)",  # noqa: S608 - a checked identifier
                (migration.version, migration.description),
            )
    return before, LATEST
