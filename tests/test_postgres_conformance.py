"""The shipped conformance suite, run against the PostgreSQL backend on a throwaway cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cargohold.testing import PostgresHarness, StoreHarness
from cargohold.testing.conformance import *  # noqa: F403 - the suite is collected from here

if TYPE_CHECKING:
    from pg_cluster import PgCluster

pytest_plugins = ["pg_cluster"]
"""The throwaway cluster's fixtures: ``pg_cluster`` and ``pg_url``."""


@pytest.fixture(scope="module")
def conformance_url(pg_cluster: PgCluster) -> str:
    """One database for the module: each store lives in a fresh schema of its own."""
    return pg_cluster.create_database("conformance")


@pytest.fixture
def store_harness(conformance_url: str) -> StoreHarness:
    return PostgresHarness(conformance_url)
