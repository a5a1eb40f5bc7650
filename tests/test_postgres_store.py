"""What the PostgreSQL backend promises beyond the conformance suite.

Schema versions checked at open and changed only by an explicit upgrade; URLs through
``open_store``; psycopg's failures translated at the seam, without a DSN, host or password in any
message or repr, and an unreachable server in one line of stderr; lost connections retried for
idempotent verbs, with the pool recovering; gc racing a writer that re-references the same bytes,
or the row a put is about to extend; ``cargohold db``.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree

import pytest
from click.testing import CliRunner

import cargohold
from cargohold import (
    CargoholdError,
    ConfigError,
    ReadOutcome,
    Ref,
    SchemaError,
    Scope,
    ScopedStore,
    StoreError,
    StoreUnavailableError,
    Usage,
    UsageError,
)
from cargohold.cli import ExitCode, cli
from cargohold.cli._db import db
from cargohold.store import open_store
from cargohold.store._pg_migrations import LATEST, MIGRATIONS
from cargohold.store._postgres import PostgresStore, schema_status, upgrade_schema
from cargohold.testing import FakeClock

if TYPE_CHECKING:
    from pg_cluster import PgCluster

pytest_plugins = ["pg_cluster"]
"""The throwaway cluster's fixtures: ``pg_cluster`` and ``pg_url``."""

ALICE = Scope("tenant-acme", "user-ana", "session-1")
BOB = Scope("tenant-acme", "user-bob", "session-1")
PASSWORD = "pw-canary-71c3"
DB_USER = "postgres"


def _dbname(url: str) -> str:
    return url.rsplit("/", 1)[1]


def _with_password(url: str) -> str:
    """The same URL with a password (trust auth accepts and ignores it)."""
    return url.replace(f"{DB_USER}@", f"{DB_USER}:{PASSWORD}@", 1)


def _secrets_of(url: str, pg_cluster: PgCluster) -> list[str]:
    return [PASSWORD, _dbname(url), "127.0.0.1", str(pg_cluster.port), url]


def _assert_discreet(exc: BaseException, secrets: list[str]) -> None:
    for text in (str(exc), repr(exc)):
        for secret in secrets:
            assert secret not in text


@pytest.fixture
def store_url(pg_url: str) -> str:
    upgrade_schema(pg_url)
    return pg_url


@pytest.fixture
def store(store_url: str) -> Iterator[PostgresStore]:
    opened = PostgresStore(store_url)
    yield opened
    opened.close()


def _terminate_store_connections(pg_cluster: PgCluster, url: str) -> int:
    """Kill every server process serving the store's database, as a failover would."""
    with pg_cluster.connect() as admin:  # type: ignore[attr-defined]
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND application_name = 'cargohold'",
            (_dbname(url),),
        ).fetchall()
    return len(rows)


# -- schema ---------------------------------------------------------------------------------------


def test_a_database_never_upgraded_is_refused_until_db_upgrade_runs(pg_url: str) -> None:
    with pytest.raises(SchemaError) as raised:
        PostgresStore(pg_url)
    assert raised.value.code == "schema"
    assert schema_status(pg_url).state == "behind"

    assert upgrade_schema(pg_url) == (0, LATEST)

    assert schema_status(pg_url).state == "current"
    opened = PostgresStore(pg_url)
    try:
        assert ScopedStore(opened, ALICE).put(b"after upgrade").blob_written
    finally:
        opened.close()


def test_upgrading_again_changes_nothing(store_url: str, store: PostgresStore) -> None:
    ref = ScopedStore(store, ALICE).put(b"kept across upgrades").ref

    assert upgrade_schema(store_url) == (LATEST, LATEST)

    assert ScopedStore(store, ALICE).read(ref).data == b"kept across upgrades"


def test_hosts_upgrading_at_once_apply_each_migration_once(
    pg_url: str,
    pg_cluster: PgCluster,
) -> None:
    results: list[Any] = []

    def run() -> None:
        try:
            results.append(upgrade_schema(pg_url))
        except CargoholdError as exc:  # reported, so the assertion below names it
            results.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(results) == [(0, LATEST)] + [(LATEST, LATEST)] * 3
    with pg_cluster.connect(_dbname(pg_url)) as conn:  # type: ignore[attr-defined]
        versions = conn.execute("SELECT version FROM cargohold.schema_version").fetchall()
    assert [row[0] for row in versions] == list(range(1, LATEST + 1))


def test_a_version_1_store_is_refused_until_upgraded_then_its_hosts_share_one_marker_key(
    pg_url: str,
    pg_cluster: PgCluster,
) -> None:
    with pg_cluster.connect(_dbname(pg_url)) as conn:  # type: ignore[attr-defined]
        # What a cargohold of the first schema made: version 1 only.
        conn.execute("CREATE SCHEMA cargohold")
        conn.execute(
            "CREATE TABLE cargohold.schema_version (version integer PRIMARY KEY,"
            " description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for statement in MIGRATIONS[0].statements:
            conn.execute(statement.format(schema="cargohold"))
        conn.execute("INSERT INTO cargohold.schema_version VALUES (1, 'first')")
    with pytest.raises(SchemaError):
        PostgresStore(pg_url)

    assert upgrade_schema(pg_url) == (1, LATEST)

    first, second = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        ref = ScopedStore(first, ALICE).put(b"written after the upgrade").ref
        assert first.marker_key() == second.marker_key()
        assert len(first.marker_key()) == 32
        assert ScopedStore(second, ALICE).read(ref).data == b"written after the upgrade"
    finally:
        first.close()
        second.close()


def test_a_version_2_store_keeps_its_artifacts_through_the_upgrade_that_adds_the_parent(
    store_url: str,
    pg_cluster: PgCluster,
) -> None:
    first = PostgresStore(store_url)
    try:
        kept = ScopedStore(first, ALICE).put(b"written by a cargohold of schema 2", tool="t")
    finally:
        first.close()
    with pg_cluster.connect(_dbname(store_url)) as conn:  # type: ignore[attr-defined]
        # What schema 2 looked like: the same tables, without the parent column (3) and
        # without the object storage tier's column, constraint and tables (4).
        conn.execute("ALTER TABLE cargohold.artifacts DROP COLUMN parent")
        conn.execute("ALTER TABLE cargohold.artifacts DROP COLUMN search")  # (5), its index too
        conn.execute("DROP TABLE cargohold.object_intents, cargohold.object_location")
        conn.execute("DROP TABLE cargohold.events")  # (6)
        conn.execute("ALTER TABLE cargohold.blobs DROP COLUMN object")  # and its index, check
        conn.execute("ALTER TABLE cargohold.blobs ALTER COLUMN data SET NOT NULL")
        conn.execute("DELETE FROM cargohold.schema_version WHERE version > 2")
    with pytest.raises(SchemaError):
        PostgresStore(store_url)

    assert upgrade_schema(store_url) == (2, LATEST)

    again = PostgresStore(store_url)
    try:
        scoped = ScopedStore(again, ALICE)
        old = scoped.read(kept.ref)
        derived = scoped.put(b"derived after the upgrade", parent=kept.ref)
        assert old.data == b"written by a cargohold of schema 2"
        assert old.record == kept.record
        assert scoped.stat(derived.ref).record.parent == kept.ref  # type: ignore[union-attr]
    finally:
        again.close()


def test_the_schema_refuses_a_parent_that_is_not_a_canonical_reference(
    store: PostgresStore, store_url: str, pg_cluster: PgCluster
) -> None:
    put = ScopedStore(store, ALICE).put(b"child", parent=Ref.of(b"parent"))
    psycopg = pytest.importorskip("psycopg")

    for bad in ("artifact://sha256/" + "G" * 64, "/etc/passwd", "artifact://sha256/" + "a" * 63):
        with (
            pg_cluster.connect(_dbname(store_url)) as conn,  # type: ignore[attr-defined]
            pytest.raises(psycopg.errors.CheckViolation),
        ):
            conn.execute(
                "UPDATE cargohold.artifacts SET parent = %s WHERE digest = %s",
                (bad, put.ref.digest),
            )


def test_a_role_that_may_only_read_gets_the_marker_key_a_writer_made(
    store_url: str, store: PostgresStore, pg_cluster: PgCluster
) -> None:
    key = store.marker_key()
    dbname = _dbname(store_url)
    role = f"reader_{dbname}"[:63]
    with pg_cluster.connect(dbname) as conn:  # type: ignore[attr-defined]
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT USAGE ON SCHEMA cargohold TO "{role}"')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA cargohold TO "{role}"')
    reader = PostgresStore(store_url.replace("postgres@", f"{role}@", 1))
    try:
        assert reader.marker_key() == key  # read, never inserted: the role may not write
    finally:
        reader.close()


def test_a_schema_newer_than_this_cargohold_is_refused_and_not_downgraded(
    store_url: str,
    pg_cluster: PgCluster,
) -> None:
    with pg_cluster.connect(_dbname(store_url)) as conn:  # type: ignore[attr-defined]
        conn.execute(
            "INSERT INTO cargohold.schema_version (version, description) VALUES (%s, 'future')",
            (LATEST + 1,),
        )

    with pytest.raises(SchemaError):
        PostgresStore(store_url)
    with pytest.raises(SchemaError):
        upgrade_schema(store_url)
    assert schema_status(store_url).state == "ahead"


def test_stores_in_two_schemas_of_one_database_are_apart(store_url: str) -> None:
    upgrade_schema(store_url, schema="cargohold_staging")
    main, staging = PostgresStore(store_url), PostgresStore(store_url, schema="cargohold_staging")
    try:
        ref = ScopedStore(main, ALICE).put(b"main only").ref

        assert ScopedStore(staging, ALICE).read(ref).outcome is ReadOutcome.MISSING
        assert staging.store_usage() == Usage(0, 0)
    finally:
        main.close()
        staging.close()


@pytest.mark.parametrize("schema", ["Upper", "has-dash", "x; DROP TABLE y", "", "1starts"])
def test_a_schema_name_that_is_not_a_plain_identifier_is_a_config_error(
    store_url: str, schema: str
) -> None:
    with pytest.raises(ConfigError):
        PostgresStore(store_url, schema=schema)
    with pytest.raises(ConfigError):
        upgrade_schema(store_url, schema=schema)


def test_tables_dropped_under_an_open_store_give_a_schema_error(
    store: PostgresStore,
    store_url: str,
    pg_cluster: PgCluster,
) -> None:
    ScopedStore(store, ALICE).put(b"x")
    with pg_cluster.connect(_dbname(store_url)) as conn:  # type: ignore[attr-defined]
        conn.execute("DROP SCHEMA cargohold CASCADE")

    with pytest.raises(SchemaError):
        ScopedStore(store, ALICE).read(Ref.of(b"x"))


# -- opening by URL -------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_open_store_opens_the_postgres_backend_for_its_url_schemes(
    store_url: str, scheme: str
) -> None:
    url = store_url.replace("postgresql://", f"{scheme}://", 1)
    clock = FakeClock()

    opened = open_store(url, limits=cargohold.Limits(session_objects=1), clock=clock)
    try:
        assert isinstance(opened, PostgresStore)
        put = ScopedStore(opened, ALICE).put(b"by url", ttl=10)
        assert put.record.created == clock()
        assert opened.limits.session_objects == 1
    finally:
        opened.close()


def test_without_psycopg_a_postgres_url_is_a_config_error_naming_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['psycopg'] = None\n"  # what an environment without the extra looks like
        "from cargohold.store import open_store\n"
        "from cargohold import ConfigError\n"
        "try:\n"
        "    open_store('postgresql://nobody@127.0.0.1/none')\n"
        "except ConfigError as exc:\n"
        "    print(exc.code, 'cargohold[postgres]' in str(exc))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )

    assert (done.returncode, done.stdout.split()) == (0, ["config", "True"]), done.stderr


def test_importing_cargohold_its_cli_and_testing_never_imports_psycopg() -> None:
    code = (
        "import sys, cargohold, cargohold.cli, cargohold.testing, cargohold.cli._db\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'psycopg_pool')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )

    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr


def test_an_unparsable_url_is_a_config_error(store_url: str) -> None:
    with pytest.raises(ConfigError):
        PostgresStore("postgresql://127.0.0.1/db?no_such_option=1")


# -- privacy and translated failures --------------------------------------------------------------


def test_the_repr_shows_no_dsn_password_host_or_database(
    store_url: str,
    pg_cluster: PgCluster,
) -> None:
    opened = PostgresStore(_with_password(store_url))
    try:
        ScopedStore(opened, ALICE).put(b"x")
        for text in (repr(opened), str(opened)):
            for secret in _secrets_of(store_url, pg_cluster):
                assert secret not in text
    finally:
        opened.close()


def test_an_unreachable_server_is_store_unavailable_without_naming_it(
    pg_cluster: PgCluster,
) -> None:
    url = f"postgresql://{DB_USER}:{PASSWORD}@127.0.0.1:{pg_cluster.unused_port()}/nowhere"

    with pytest.raises(StoreUnavailableError) as raised:
        PostgresStore(url, timeout=1)

    _assert_discreet(raised.value, [PASSWORD, "nowhere", url])


@pytest.fixture
def refused_url() -> Iterator[str]:
    """A URL to a loopback port that is bound and never listens: every connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"postgresql://{DB_USER}:{PASSWORD}@127.0.0.1:{sock.getsockname()[1]}/nowhere"


def test_an_unreachable_server_leaves_no_pool_log_record_only_the_typed_error(
    refused_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="psycopg")

    with pytest.raises(StoreUnavailableError):
        PostgresStore(refused_url, timeout=2)

    # What logging prints when an application configured none: warnings and worse.
    loud = [
        r for r in caplog.records if r.name.startswith("psycopg") and r.levelno >= logging.WARNING
    ]
    assert [(r.name, r.levelname) for r in loud] == []


def test_the_pool_logs_of_other_pools_in_the_process_are_left_alone(
    refused_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    import psycopg_pool

    caplog.set_level(logging.WARNING, logger="psycopg")
    pool = psycopg_pool.ConnectionPool(refused_url, open=False, name="not-cargohold", timeout=1)
    try:
        with pytest.raises(psycopg_pool.PoolTimeout):
            pool.open(wait=True, timeout=1)
    finally:
        pool.close()

    assert any("not-cargohold" in r.getMessage() for r in caplog.records)


def test_the_command_line_reports_a_refused_connection_at_once_naming_host_port_and_cause(
    refused_url: str,
) -> None:
    # The process boundary is the point: psycopg_pool's records reach stderr through logging's
    # last-resort handler only in a process that configured no logging, unlike pytest's. The
    # pool's timeout is ten minutes: only a refusal reported at once ends before the harness's
    # bound of 60 s (the pool alone retried for its whole timeout, then said only that).
    code = (
        "import functools, sys\n"
        "from cargohold.store import _postgres\n"
        "_postgres.PostgresStore = functools.partial(_postgres.PostgresStore, timeout=600.0)\n"
        "from cargohold.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--store", refused_url, "ls"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == ExitCode.ERROR
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("cargohold: error: ")
    port = refused_url.rsplit(":", 1)[1].split("/")[0]
    assert f"127.0.0.1:{port}" in done.stderr
    assert "refused" in done.stderr
    for secret in (PASSWORD, "nowhere", DB_USER):
        assert secret not in done.stderr


def test_a_database_that_does_not_exist_is_store_unavailable_without_naming_it(
    pg_cluster: PgCluster,
) -> None:
    url = _with_password(pg_cluster.url("no_such_db_canary"))

    with pytest.raises(StoreUnavailableError) as raised:
        PostgresStore(url, timeout=1)

    _assert_discreet(raised.value, [PASSWORD, "no_such_db_canary", url])


def test_a_role_without_privileges_gets_a_store_error_not_a_psycopg_one(
    store_url: str,
    pg_cluster: PgCluster,
) -> None:
    role = f"reader_{_dbname(store_url)}"
    with pg_cluster.connect(_dbname(store_url)) as conn:  # type: ignore[attr-defined]
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT USAGE ON SCHEMA cargohold TO "{role}"')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA cargohold TO "{role}"')
    url = store_url.replace(f"{DB_USER}@", f"{role}@", 1)
    reader = PostgresStore(url)
    try:
        assert reader.store_usage() == Usage(0, 0)
        with pytest.raises(StoreError) as raised:
            ScopedStore(reader, ALICE).put(b"no insert privilege")
        assert type(raised.value) is StoreError
        _assert_discreet(raised.value, [role, *_secrets_of(store_url, pg_cluster)])
    finally:
        reader.close()


def test_a_closed_store_is_a_usage_error(store: PostgresStore) -> None:
    store.close()

    with pytest.raises(UsageError):
        store.store_usage()
    with pytest.raises(UsageError):
        ScopedStore(store, ALICE).put(b"x")


# -- lost connections -----------------------------------------------------------------------------


def test_reads_and_puts_after_every_connection_was_killed_succeed_on_a_fresh_one(
    store: PostgresStore,
    store_url: str,
    pg_cluster: PgCluster,
) -> None:
    scoped = ScopedStore(store, ALICE)
    ref = scoped.put(b"before the failover").ref
    assert _terminate_store_connections(pg_cluster, store_url) >= 1

    assert scoped.read(ref).data == b"before the failover"
    assert _terminate_store_connections(pg_cluster, store_url) >= 1
    put = scoped.put(b"after the failover")
    assert scoped.read(put.ref).data == b"after the failover"
    assert store.verify() == []


def test_without_retries_a_killed_connection_is_store_unavailable_and_the_pool_recovers(
    store_url: str,
    pg_cluster: PgCluster,
) -> None:
    opened = PostgresStore(_with_password(store_url), retries=0)
    try:
        scoped = ScopedStore(opened, ALICE)
        ref = scoped.put(b"kept").ref
        assert _terminate_store_connections(pg_cluster, store_url) >= 1

        with pytest.raises(StoreUnavailableError) as raised:
            scoped.read(ref)

        _assert_discreet(raised.value, _secrets_of(store_url, pg_cluster))
        assert scoped.read(ref).data == b"kept"
    finally:
        opened.close()


def test_gc_that_loses_its_connection_is_store_unavailable_and_can_run_again(
    store_url: str,
    pg_cluster: PgCluster,
) -> None:
    clock = FakeClock()
    opened = PostgresStore(store_url, clock=clock)
    try:
        ScopedStore(opened, ALICE).put(b"expiring", ttl=10)
        clock.advance(10)
        assert _terminate_store_connections(pg_cluster, store_url) >= 1

        with pytest.raises(StoreUnavailableError):
            opened.gc()

        assert opened.gc().artifacts == 1
        assert opened.store_usage() == Usage(0, 0)
    finally:
        opened.close()


# -- gc against a writer re-referencing the same bytes --------------------------------------------

RACE_ROUNDS = 60


def test_gc_racing_a_writer_that_re_references_expired_bytes_never_takes_them(
    store_url: str,
) -> None:
    clock = FakeClock()
    past = FakeClock(clock() - 1000)
    live, old = PostgresStore(store_url, clock=clock), PostgresStore(store_url, clock=past)
    errors: list[BaseException] = []
    try:
        for round_ in range(RACE_ROUNDS):
            data = f"round {round_} ".encode() * 100
            # Only an expired artifact names these bytes: gc's candidate, unless BOB names them
            # again first.
            ScopedStore(old, ALICE).put(data, ttl=10)
            start = threading.Barrier(2, timeout=30)

            def collect(start: threading.Barrier = start) -> None:
                start.wait()
                live.gc()

            def write(data: bytes = data, start: threading.Barrier = start) -> None:
                start.wait()
                ScopedStore(live, BOB).put(data)

            threads = [threading.Thread(target=_reporting(f, errors)) for f in (collect, write)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=60)
            assert errors == []
            assert ScopedStore(live, BOB).read(Ref.of(data)).data == data
        assert live.gc().artifacts == 0  # each round's gc took that round's expired row
        assert live.verify() == []
        assert live.store_usage().objects == RACE_ROUNDS
    finally:
        live.close()
        old.close()


def test_a_put_whose_row_gc_collects_between_its_lookup_and_its_extension_stays_readable(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    data = b"re-put near its expiry" * 100
    store = PostgresStore(store_url, clock=clock)
    try:
        scoped = ScopedStore(store, ALICE)
        scoped.put(data, ttl=100)
        clock.advance(99)  # alive for the put's lookup, due for an extension; expired a second on
        other_host = PostgresStore(store_url, clock=FakeClock(clock() + 1))
        looked_up = store._existing
        collected: list[object] = []

        def gc_then_extend(*args: Any) -> Any:
            if not collected:
                collected.append(other_host.gc())
            return looked_up(*args)

        monkeypatch.setattr(store, "_existing", gc_then_extend)
        try:
            put = scoped.put(data, ttl=100)
        finally:
            other_host.close()
        monkeypatch.undo()

        assert collected
        read = scoped.read(put.ref)
        assert read.outcome is ReadOutcome.RESOLVED
        assert read.data == data
        assert put.record.expires == clock() + 100
        assert store.store_usage() == Usage(1, len(data))
        assert store.verify() == []
    finally:
        store.close()


def _reporting(target: Any, errors: list[BaseException]) -> Any:
    def run() -> None:
        try:
            target()
        except BaseException as exc:  # handed to the test thread, which asserts none happened
            errors.append(exc)

    return run


# -- verify over damage the conformance harness cannot make ---------------------------------------

CHUNK = 64 * 1024


def test_verify_reports_a_chunk_digest_that_does_not_match(
    store: PostgresStore, store_url: str, pg_cluster: PgCluster
) -> None:
    data = bytes(range(256)) * (3 * CHUNK // 256)
    scoped = ScopedStore(store, ALICE)
    ref = scoped.put(data).ref
    with pg_cluster.connect(_dbname(store_url)) as conn:  # type: ignore[attr-defined]
        (chunks,) = conn.execute(
            "SELECT chunks FROM cargohold.blobs WHERE digest = %s", (ref.digest,)
        ).fetchone()
        assert len(chunks) == 3 * 32
        # One byte of the second chunk's recorded digest flipped; the blob itself is intact.
        tampered = chunks[:32] + bytes([chunks[32] ^ 0xFF]) + chunks[33:]
        conn.execute(
            "UPDATE cargohold.blobs SET chunks = %s WHERE digest = %s", (tampered, ref.digest)
        )

    assert scoped.read(ref).data == data  # the bytes still match the reference's digest
    assert scoped.read(ref, start=CHUNK, end=CHUNK + 1).outcome is ReadOutcome.STALE
    assert [(f.kind, f.digest) for f in store.verify()] == [("corrupt", ref.digest)]


def test_verify_reports_a_record_whose_blob_row_is_gone_and_keeps_the_record(
    store: PostgresStore, store_url: str, pg_cluster: PgCluster
) -> None:
    scoped = ScopedStore(store, ALICE)
    ref = scoped.put(b"a record without its blob row").ref
    with pg_cluster.connect(_dbname(store_url)) as conn:  # type: ignore[attr-defined]
        # A replica session skips the foreign key's triggers, as a restore of one table could.
        conn.execute("SET session_replication_role = replica")
        conn.execute("DELETE FROM cargohold.blobs WHERE digest = %s", (ref.digest,))

    assert [(f.kind, f.digest) for f in store.verify()] == [("missing_blob", ref.digest)]
    assert [r.ref for r in scoped.artifacts()] == [ref]


# -- cargohold db ---------------------------------------------------------------------------------


@pytest.fixture
def db_cli(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The ``cargohold`` group with ``db`` attached (as the application registers it)."""
    monkeypatch.setitem(cli.commands, "db", db)

    def run(url: str | None, *args: str) -> Any:
        store = ["--store", url] if url else []
        return CliRunner().invoke(cli, [*store, "db", *args], catch_exceptions=False)

    return run


def test_db_status_then_upgrade_then_status_again(db_cli: Any, pg_url: str) -> None:
    before = db_cli(pg_url, "status", "--json")
    upgraded = db_cli(pg_url, "upgrade", "--json")
    again = db_cli(pg_url, "upgrade", "--json")
    after = db_cli(pg_url, "status")

    assert before.exit_code == ExitCode.ERROR
    assert before.stdout.strip() == f'{{"current": 0, "latest": {LATEST}, "state": "behind"}}'
    assert upgraded.exit_code == ExitCode.OK
    assert upgraded.stdout.strip() == f'{{"from": 0, "to": {LATEST}, "changed": true}}'
    assert again.stdout.strip() == f'{{"from": {LATEST}, "to": {LATEST}, "changed": false}}'
    assert after.exit_code == ExitCode.OK


def test_db_upgrade_of_a_non_postgres_store_is_a_usage_error(db_cli: Any) -> None:
    result = db_cli("memory://", "upgrade")

    assert result.exit_code == ExitCode.USAGE


def test_db_errors_name_the_host_and_port_but_neither_the_password_nor_the_database(
    db_cli: Any,
    pg_cluster: PgCluster,
) -> None:
    port = pg_cluster.unused_port()
    url = f"postgresql://{DB_USER}:{PASSWORD}@127.0.0.1:{port}/db_canary"

    result = db_cli(url, "status")

    assert result.exit_code == ExitCode.ERROR
    assert f"127.0.0.1:{port}" in result.output
    for secret in (PASSWORD, "db_canary", url):
        assert secret not in result.output


# -- the test cluster itself ----------------------------------------------------------------------


@pytest.mark.parametrize(("ci", "skipped", "errors"), [("", 1, 0), ("true", 0, 1)])
def test_without_postgresql_the_tests_skip_except_under_ci_where_they_fail(
    tmp_path: Path, ci: str, skipped: int, errors: int
) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        'pytest_plugins = ["pg_cluster"]\n\n\ndef test_needs_a_cluster(pg_cluster):\n    pass\n'
    )
    report = tmp_path / "report.xml"
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).parent),
        "PG_TEST_BINDIR": str(tmp_path / "no-postgresql-here"),
        "CI": ci,
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={report}", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    suite = ElementTree.parse(report).getroot().find("testsuite")
    assert suite is not None
    counts = (int(suite.get("skipped", "0")), int(suite.get("errors", "0")))
    assert counts == (skipped, errors), done.stdout
    assert done.returncode == (pytest.ExitCode.OK if ci == "" else pytest.ExitCode.TESTS_FAILED)


def test_a_put_that_replaces_an_expired_record_never_shortens_an_extension_committed_meanwhile(
    pg_url: str,
) -> None:
    # Writer A sees the record expired (its clock is past it) and replaces it; writer B, whose
    # clock is a second behind, extends the same live record between A's lookup and A's upsert.
    # B was promised X + 99 s: A's upsert must not cut that back to A's own, shorter expiry.
    upgrade_schema(pg_url)
    t0 = 1_800_000_000.0
    expiry = t0 + 10
    limits = cargohold.Limits(max_ttl=1000, default_ttl=10)
    scope = Scope("t", "u", "s")
    body = b"x" * 100
    setup = PostgresStore(pg_url, limits=limits, clock=lambda: t0)
    ref = ScopedStore(setup, scope).put(body, ttl=10).ref
    late = PostgresStore(pg_url, limits=limits, clock=lambda: expiry - 1)
    promised: list[float] = []
    calls = 0

    def a_clock() -> float:
        nonlocal calls
        calls += 1
        if calls == 3:  # inside A's transaction: after its lookup, before its upsert
            promised.append(ScopedStore(late, scope).put(body, ttl=100).record.expires)
        return expiry + 0.5

    early = PostgresStore(pg_url, limits=limits, clock=a_clock)
    check = PostgresStore(pg_url, limits=limits, clock=lambda: expiry + 2)
    try:
        ScopedStore(early, scope).put(body, ttl=1)

        assert promised == [expiry - 1 + 100]
        got = ScopedStore(check, scope).read(ref)
        assert got.outcome is ReadOutcome.RESOLVED
        assert got.record is not None
        assert got.record.expires >= promised[0]
    finally:
        for store in (setup, late, early, check):
            store.close()


# -- a tampered database: bad rows are never followed, never block a scope ----------------------


def _tamper(pg_cluster: PgCluster, url: str, sql: str, *params: object) -> None:
    with pg_cluster.connect(_dbname(url)) as conn:  # type: ignore[attr-defined]
        conn.execute("SET session_replication_role = replica")  # foreign keys off
        conn.execute(sql, params)


@pytest.mark.parametrize(
    "bad",
    ["../../etc/passwd", "AB" * 32, "ab" * 31, "/" + "a" * 63],
    ids=["path", "upper", "short", "abs"],
)
def test_a_record_with_a_malformed_digest_is_left_out_of_listings_kept_by_gc_and_reported(
    store_url: str, pg_cluster: PgCluster, bad: str
) -> None:
    clock = FakeClock()
    store = PostgresStore(store_url, clock=clock)
    try:
        scoped = ScopedStore(store, ALICE)
        kept = scoped.put(b"a sound artifact").ref
        damaged = scoped.put(b"an artifact whose row is edited", ttl=10).ref
        _tamper(
            pg_cluster,
            store_url,
            "UPDATE cargohold.artifacts SET digest = %s WHERE digest = %s",
            bad,
            damaged.digest,
        )
        clock.advance(11)

        assert [record.ref for record in scoped.artifacts()] == [kept]
        store.gc()
        findings = store.verify()
        with pg_cluster.connect(_dbname(store_url)) as conn:  # type: ignore[attr-defined]
            (left,) = conn.execute(
                "SELECT count(*) FROM cargohold.artifacts WHERE digest = %s", (bad,)
            ).fetchone()
    finally:
        store.close()

    assert left == 1
    assert ("corrupt", None) in [(f.kind, f.digest) for f in findings]
    assert all(f.digest is None or len(f.digest) == 64 for f in findings)


def test_a_read_of_a_record_with_an_unknown_sensitivity_raises_a_store_error(
    store: PostgresStore, store_url: str, pg_cluster: PgCluster
) -> None:
    scoped = ScopedStore(store, ALICE)
    ref = scoped.put(b"an artifact whose row is edited").ref
    _tamper(
        pg_cluster,
        store_url,
        "UPDATE cargohold.artifacts SET sensitivity = 'x' WHERE digest = %s",
        ref.digest,
    )

    for verb in (scoped.read, scoped.stat):
        with pytest.raises(StoreError) as raised:
            verb(ref)
        assert not isinstance(raised.value, UsageError)
    assert scoped.artifacts() == []


def test_verify_reports_a_record_whose_size_is_not_its_blobs(
    store: PostgresStore, store_url: str, pg_cluster: PgCluster
) -> None:
    scoped = ScopedStore(store, ALICE)
    ref = scoped.put(b"twelve bytes").ref
    _tamper(
        pg_cluster,
        store_url,
        "UPDATE cargohold.artifacts SET size = 5 WHERE digest = %s",
        ref.digest,
    )

    assert scoped.read(ref).outcome is ReadOutcome.STALE
    assert [(f.kind, f.digest) for f in store.verify()] == [("corrupt", ref.digest)]


def test_verify_reports_a_record_pointed_at_another_blob(
    store: PostgresStore, store_url: str, pg_cluster: PgCluster
) -> None:
    mine = ScopedStore(store, ALICE).put(b"alice's bytes").ref
    other = ScopedStore(store, BOB).put(b"bob's").ref
    _tamper(
        pg_cluster,
        store_url,
        "UPDATE cargohold.artifacts SET digest = %s WHERE digest = %s",
        other.digest,
        mine.digest,
    )

    assert ("corrupt", other.digest) in [(f.kind, f.digest) for f in store.verify()]


def test_gc_removes_a_blob_row_no_record_names(
    store: PostgresStore, store_url: str, pg_cluster: PgCluster
) -> None:
    scoped = ScopedStore(store, ALICE)
    scoped.put(b"kept")
    ref = scoped.put(b"its record is deleted behind the store's back").ref
    _tamper(pg_cluster, store_url, "DELETE FROM cargohold.artifacts WHERE digest = %s", ref.digest)
    assert [(f.kind, f.digest) for f in store.verify()] == [("orphan", ref.digest)]
    dry = store.gc(dry_run=True)

    report = store.gc()

    assert dry.blobs == report.blobs == 1
    assert store.verify() == []
    assert store.store_usage() == Usage(1, len(b"kept"))


def _blob_digests(pg_cluster: PgCluster, url: str) -> list[str]:
    with pg_cluster.connect(_dbname(url)) as conn:  # type: ignore[attr-defined]
        rows = conn.execute("SELECT digest FROM cargohold.blobs ORDER BY digest").fetchall()
    return [str(digest) for (digest,) in rows]


def test_gc_keeps_the_blob_of_a_record_whose_digest_is_malformed(
    store: PostgresStore, store_url: str, pg_cluster: PgCluster
) -> None:
    scoped = ScopedStore(store, ALICE)
    kept = scoped.put(b"a sound artifact").ref
    damaged = scoped.put(b"an artifact whose row is edited").ref
    _tamper(
        pg_cluster,
        store_url,
        "UPDATE cargohold.artifacts SET digest = %s WHERE digest = %s",
        "AB" * 32,
        damaged.digest,
    )

    dry = store.gc(dry_run=True)
    report = store.gc()

    assert dry.blobs == report.blobs == 0
    assert _blob_digests(pg_cluster, store_url) == sorted([kept.digest, damaged.digest])


def test_gc_after_every_record_was_lost_keeps_every_blob_and_verify_reports_them(
    store: PostgresStore, store_url: str, pg_cluster: PgCluster
) -> None:
    scoped = ScopedStore(store, ALICE)
    refs = [scoped.put(f"bytes a lost record named {i}".encode()).ref for i in range(3)]
    _tamper(pg_cluster, store_url, "DELETE FROM cargohold.artifacts")

    dry = store.gc(dry_run=True)
    report = store.gc()

    assert dry.blobs == report.blobs == 0
    assert _blob_digests(pg_cluster, store_url) == sorted(ref.digest for ref in refs)
    assert sorted((f.kind, f.digest) for f in store.verify()) == sorted(
        ("orphan", ref.digest) for ref in refs
    )


def test_a_server_still_starting_up_or_recovering_is_waited_for_within_the_timeout(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a server answers during crash recovery, twice, then the real connection: the open
    # waits it out (a refusal, by contrast, fails at once: see the command line test above).
    import psycopg

    from cargohold.store import _postgres

    real = psycopg.connect
    answers = [
        "FATAL:  the database system is in recovery mode",
        "FATAL:  the database system is starting up",
    ]

    def connect(*args: Any, **kwargs: Any) -> Any:
        if answers:
            raise psycopg.OperationalError(answers.pop(0))
        return real(*args, **kwargs)

    monkeypatch.setattr(_postgres.psycopg, "connect", connect)
    store = PostgresStore(store_url, timeout=30)
    try:
        assert answers == []
        assert ScopedStore(store, ALICE).put(b"after the recovery").existing is False
    finally:
        store.close()


def test_a_version_4_store_gains_search_and_a_re_put_indexes_an_artifact_written_before(
    store_url: str,
    pg_cluster: PgCluster,
) -> None:
    first = PostgresStore(store_url)
    try:
        kept = ScopedStore(first, ALICE).put(b"an old needle of schema 4\n")
    finally:
        first.close()
    with pg_cluster.connect(_dbname(store_url)) as conn:  # type: ignore[attr-defined]
        conn.execute("ALTER TABLE cargohold.artifacts DROP COLUMN search")
        conn.execute("DROP TABLE cargohold.events")  # (6)
        conn.execute("DELETE FROM cargohold.schema_version WHERE version > 4")

    assert upgrade_schema(store_url) == (4, LATEST)

    again = PostgresStore(store_url)
    try:
        scoped = ScopedStore(again, ALICE)
        assert scoped.search("needle", limit=5) == []  # written before the index: no words yet
        assert scoped.put(b"an old needle of schema 4\n").existing
        assert [hit.ref for hit in scoped.search("needle", limit=5)] == [kept.ref]
    finally:
        again.close()
