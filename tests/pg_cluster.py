"""A throwaway PostgreSQL cluster for the PostgreSQL backend's tests.

Import the fixtures into a test module (``from pg_cluster import pg_cluster, pg_database``).
``pg_cluster`` starts one cluster per test session: ``initdb`` and ``pg_ctl`` from
``pg_config --bindir`` (they refuse to run as root, so as root they run as the ``postgres`` user
through ``runuser``), in a fresh temporary directory that user owns, listening on 127.0.0.1 only,
on a free port, with trust authentication for loopback and durability switched off (a test
cluster never outlives its run). ``pg_database`` creates an empty database per test.

Without the PostgreSQL binaries the tests skip with that reason; when ``CI=true`` they fail
instead, so CI never passes by skipping the PostgreSQL backend. ``PG_TEST_BINDIR`` names the
binaries' directory explicitly (and only that one). Every wait is bounded:
``pg_ctl -w -t 60`` and subprocess timeouts.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from _require import require, unavailable

PG_TIMEOUT = 60
"""Seconds ``pg_ctl`` waits for a start or stop; also the bound of every admin subprocess."""

_MISSING_HINT = "PostgreSQL server binaries not found (pg_config --bindir, initdb, pg_ctl)"


def _bindir() -> Path | None:
    named = os.environ.get("PG_TEST_BINDIR")
    if named:  # only this one: lets a test see what happens on a machine without PostgreSQL
        path = Path(named)
        return path if (path / "initdb").exists() and (path / "pg_ctl").exists() else None
    pg_config = shutil.which("pg_config")
    candidates: list[Path] = []
    if pg_config is not None:
        found = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, timeout=PG_TIMEOUT
        )
        if found.returncode == 0:
            candidates.append(Path(found.stdout.strip()))
    candidates.extend(sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True))
    for candidate in candidates:
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PgCluster:
    """One running cluster: its URLs, an admin connection, and stop/start for fault tests.

    Args:
        bindir: Where ``initdb``, ``pg_ctl`` and ``postgres`` live.
        base: A directory the server's user owns; the cluster lives in ``base/data``.
        run_as: The user to run the server as (``None``: the current user).
    """

    def __init__(self, bindir: Path, base: Path, run_as: str | None) -> None:
        self.bindir = bindir
        self.base = base
        self.data = base / "data"
        self.log = base / "server.log"
        self.port = _free_port()
        self._run_as = run_as
        self._counter = itertools.count(1)

    def __repr__(self) -> str:
        return f"PgCluster(port={self.port})"

    @staticmethod
    def unused_port() -> int:
        """A loopback port nothing listens on (for tests of an unreachable server)."""
        return _free_port()

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self._run_as is not None:
            command = ["runuser", "-u", self._run_as, "--", *command]
        return subprocess.run(
            command, capture_output=True, text=True, timeout=PG_TIMEOUT + 30, check=False
        )

    def _checked(self, *args: str) -> None:
        done = self._run(*args)
        if done.returncode != 0:
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            raise RuntimeError(f"{args[0]} failed:\n{done.stdout}\n{done.stderr}\n{log}")

    def init(self, *, durable: bool = False) -> None:
        """Create the cluster (trust auth, UTF-8, C collation) and write its settings.

        Args:
            durable: Keep fsync on (benchmarks compare against a local store that fsyncs).
        """
        self._checked(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
        )
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.base}'",
            "max_connections": "120",
            # A test cluster never outlives its run, and no test crashes the machine: fsync costs
            # time and proves nothing here. Commits still reach the kernel before they return
            # (synchronous_commit stays on), so a server killed outright keeps every commit.
            "fsync": "off",
            "full_page_writes": "off",
            "logging_collector": "off",
        }
        if durable:
            del settings["fsync"], settings["full_page_writes"]
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as conf:
            for name, value in settings.items():
                conf.write(f"{name} = {value}\n")

    def start(self) -> None:
        """Start the server and wait (bounded) until it accepts connections."""
        self._checked(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start"
        )

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` for teardown, ``immediate`` to simulate a crash."""
        self._checked("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        """Whether the server is up (``pg_ctl status``)."""
        return self._run("pg_ctl", "-D", str(self.data), "status").returncode == 0

    def ensure_running(self) -> None:
        """Start the server again if a fault test left it stopped."""
        if not self.running():
            self.start()

    def url(self, dbname: str = "postgres") -> str:
        """A ``postgresql://`` URL for ``dbname`` on this cluster (loopback, trust auth)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def connect(self, dbname: str = "postgres") -> object:
        """An autocommit psycopg connection, for the tests' own admin queries."""
        import psycopg

        return psycopg.connect(self.url(dbname), autocommit=True, connect_timeout=10)

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its URL."""
        name = f"{prefix}_{os.getpid()}_{next(self._counter)}"
        with self.connect() as conn:  # type: ignore[attr-defined]
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """One throwaway PostgreSQL cluster for the whole test session."""
    # Skip, or fail under CI: CI must never pass by skipping the PostgreSQL backend.
    require("psycopg", "postgres")
    bindir = _bindir()
    if bindir is None:
        unavailable(_MISSING_HINT)
    run_as: str | None = None
    if os.geteuid() == 0:
        import pwd

        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            unavailable("running as root and there is no 'postgres' user to run the server")
        if shutil.which("runuser") is None:
            unavailable("running as root and runuser is missing")
        run_as = "postgres"
    # pytest's tmp_path lives under a root-only directory the server's user cannot enter.
    base = Path(tempfile.mkdtemp(prefix="cargohold-pg-"))
    if run_as is not None:
        os.chown(base, owner.pw_uid, owner.pw_gid)
    cluster = PgCluster(bindir, base, run_as)
    started = False
    try:
        cluster.init()
        cluster.start()
        started = True
        yield cluster
    finally:
        if started:
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                cluster.stop("fast")
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> str:
    """The URL of a new, empty database for one test."""
    return pg_cluster.create_database()
