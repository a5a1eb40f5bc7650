"""A long-running surface with ``events_log = "store"``: ``cargohold mcp`` over stdio writes
its read decisions into the PostgreSQL store's events table, under its scope's run tag."""

from __future__ import annotations

import sys
from pathlib import Path

from _require import require

require("mcp", "mcp")

import cargohold  # noqa: E402 - after the extra's check
from cargohold import Scope, read_store_events, run_tag  # noqa: E402
from cargohold.store._postgres import PostgresStore, upgrade_schema  # noqa: E402
from mcp_fixtures import CLI, child_env, connect, stdio  # noqa: E402

pytest_plugins = ["pg_cluster"]
"""The throwaway cluster's fixtures: ``pg_cluster`` and ``pg_url``."""

SCOPE = Scope("acme", "ana", "served")
BODY = "".join(f"{i},customer-{i % 41}\n" for i in range(5_000)).encode()


def test_the_mcp_server_with_events_log_store_writes_its_reads_into_the_events_table(
    pg_url: str, tmp_path: Path
) -> None:
    upgrade_schema(pg_url)
    store = PostgresStore(pg_url)
    try:
        with cargohold.open(
            store, tenant=SCOPE.tenant, user=SCOPE.user, session=SCOPE.session
        ) as hold:
            ref = str(hold.store.put(BODY, media_type="text/csv", tool="export").ref)
        scope = ["--tenant", SCOPE.tenant, "--user", SCOPE.user, "--session", SCOPE.session]
        command = [sys.executable, "-c", CLI, "--store", pg_url, *scope, "mcp"]
        env = child_env(tmp_path, CARGOHOLD_EVENTS_LOG="store")

        with connect(stdio(command, env), mode="legacy") as client:
            answer = client.call("artifact_read", {"ref": ref, "offset": 0, "length": 100})
        events = read_store_events(store, run_tag(store.marker_key(), SCOPE))
    finally:
        store.close()

    assert not answer.is_error
    assert [(event["operation"], event["outcome"], event["ref"]) for event in events] == [
        ("rehydrate", "resolved", ref)
    ]
    assert not (tmp_path / "events.jsonl").exists()
