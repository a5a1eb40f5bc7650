"""The shipped conformance suite, run against the PostgreSQL backend on a throwaway cluster."""

from __future__ import annotations

import pytest

from cargohold.testing import PostgresHarness, StoreHarness
from cargohold.testing.conformance import *  # noqa: F403 - the suite is collected from here
from pg_cluster import PgCluster, pg_cluster  # noqa: F401 - the session fixture


@pytest.fixture(scope="module")
def conformance_url(pg_cluster: PgCluster) -> str:  # noqa: F811 - the fixture above
    """One database for the module: each store lives in a fresh schema of its own."""
    return pg_cluster.create_database("conformance")


@pytest.fixture
def store_harness(conformance_url: str) -> StoreHarness:
    return PostgresHarness(conformance_url)
