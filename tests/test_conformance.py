"""The shipped conformance suite, run against the memory and local backends."""

from __future__ import annotations

from pathlib import Path

import pytest

from cargohold.testing import LocalHarness, MemoryHarness, StoreHarness
from cargohold.testing.conformance import *  # noqa: F403 - the suite is collected from here


@pytest.fixture(params=["memory", "local"])
def store_harness(request: pytest.FixtureRequest, tmp_path: Path) -> StoreHarness:
    if request.param == "memory":
        return MemoryHarness()
    return LocalHarness(tmp_path)
