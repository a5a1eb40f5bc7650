"""Shared fixtures of cargohold's own tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

# The conformance suite lives in the package; rewrite its asserts so failures explain themselves.
pytest.register_assert_rewrite("cargohold.testing.conformance")

from cargohold import LocalStore  # noqa: E402 - after the rewrite hook, by design
from cargohold.testing import FakeClock  # noqa: E402


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    """Name pytest-randomly's seed at the end of every run too (``-q`` drops the header that
    names it), so a failing order can be replayed."""
    if config.pluginmanager.hasplugin("randomly") and config.getoption("randomly_reorganize"):
        seed = config.getoption("randomly_seed")
        terminalreporter.write_line(
            f"random test order: replay it with -p randomly --randomly-seed={seed}"
        )


@pytest.fixture
def clock() -> FakeClock:
    """A clock that moves only when a test moves it."""
    return FakeClock()


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    """Where a test's local store lives (not created: the store creates it)."""
    return tmp_path / "store"


@pytest.fixture
def local_store(store_root: Path, clock: FakeClock) -> Iterator[LocalStore]:
    """A fresh local store with default limits, closed after the test."""
    store = LocalStore(store_root, clock=clock)
    yield store
    store.close()


@pytest.fixture(autouse=True)
def _no_ambient_configuration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep the developer's environment and cache out of every test."""
    import os

    for name in list(os.environ):
        # the snapshot switch is the developer's, read by the snapshot tests themselves
        if name.startswith("CARGOHOLD_") and name != "CARGOHOLD_UPDATE_SNAPSHOTS":
            monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))


@pytest.fixture
def configured_marker_key() -> bytes:
    """The configured store (the embedded default, under this test's cache) holds the guard
    fixtures' marker key: a ``Guard()`` given no key reads it, as it does in production."""
    import os

    from cargohold.store import default_root
    from guard_fixtures import KEY

    LocalStore(default_root()).close()  # the root and its private directories
    fd = os.open(default_root() / "marker.key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, KEY)
    finally:
        os.close(fd)
    return KEY
