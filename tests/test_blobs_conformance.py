"""The shipped conformance suite, run against the PostgreSQL store with its object storage tier.

Every non-empty body goes to the bucket (threshold 0) of a throwaway SeaweedFS server on
loopback; the empty body stays in its row. Each store has a schema and a bucket prefix of its
own, so ``verify`` of one never meets another's objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from cargohold.testing import PostgresHarness, StoreHarness
from cargohold.testing.conformance import *  # noqa: F403 - the suite is collected from here

if TYPE_CHECKING:
    from pg_cluster import PgCluster
    from s3_server import S3Server

pytest_plugins = ["pg_cluster", "s3_server"]
"""The throwaway servers' fixtures: ``pg_cluster``, ``s3_server`` and ``s3_env``."""


@pytest.fixture(scope="module")
def conformance_url(pg_cluster: PgCluster) -> str:
    """One database for the module: each store lives in a fresh schema of its own."""
    return pg_cluster.create_database("blobs_conformance")


@pytest.fixture
def store_harness(conformance_url: str, s3_env: S3Server) -> StoreHarness:
    return PostgresHarness(conformance_url, blobs=s3_env.url("conformance"), blobs_threshold=0)


# The search index lives in PostgreSQL's rows whatever tier holds the bytes, so the 10,000-artifact
# search is test_postgres_conformance.py's; here it would only time 10,000 uploads (68 s).
del test_a_store_of_10000_artifacts_answers_a_search_with_at_most_its_limit  # noqa: F821
