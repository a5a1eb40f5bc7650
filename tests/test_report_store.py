"""A PostgreSQL store's scope as an event source: ``PostgresEventsSink`` writes each event into
the store's ``events`` table, and ``cargohold --store postgresql://... report --session S`` reads
that session's events back by their run tag."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import cargohold
from cargohold import ListSink, PostgresEventsSink, Scope, read_store_events, run_tag
from cargohold.cli import cli
from cargohold.store._postgres import PostgresStore, upgrade_schema

pytest_plugins = ["pg_cluster"]
"""The throwaway cluster's fixtures: ``pg_cluster`` and ``pg_url``."""

TENANT, USER = "acme", "ana"


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    upgrade_schema(pg_url)
    opened = PostgresStore(pg_url)
    yield opened
    opened.close()


def _run(store: PostgresStore, session: str, tool: str, *sinks: Any) -> None:
    with cargohold.open(
        store,
        tenant=TENANT,
        user=USER,
        session=session,
        sinks=[PostgresEventsSink(store, clock=lambda: 1796049206.25), *sinks],
    ) as hold:
        stored = hold.offload("".join(f"{tool} line {i}\n" for i in range(4000)), tool=tool)
        assert stored.ref is not None
        hold.read_lines(stored.ref, 1, 5)
        hold.record_request(
            api="openai-chat", outcome="forwarded", request_bytes=90_000, forwarded_bytes=2_000
        )


def test_the_events_table_gives_back_one_sessions_events_as_they_were_emitted(
    store: PostgresStore,
) -> None:
    memory = ListSink()
    _run(store, "run-a", "tool_of_a", memory)
    _run(store, "run-b", "tool_of_b")

    tag = run_tag(store.marker_key(), Scope(TENANT, USER, "run-a"))
    read = read_store_events(store, tag)

    assert read == [
        {"time": "2026-11-30T14:33:26.250Z", **event.as_dict()} for event in memory.events
    ]
    assert [event["operation"] for event in read] == ["offload", "rehydrate", "request"]
    assert read[0]["tool"] == "tool_of_a"
    assert read_store_events(store, tag, limit=1) == read[-1:]  # the newest


def test_a_store_no_sink_wrote_to_holds_no_events(store: PostgresStore) -> None:
    assert read_store_events(store, "0123456789abcdef") == []


def test_hosts_making_the_events_table_at_once_all_succeed(pg_url: str) -> None:
    upgrade_schema(pg_url)
    stores = [PostgresStore(pg_url) for _ in range(4)]
    failures: list[BaseException] = []
    start = threading.Barrier(len(stores))

    def make(store: PostgresStore) -> None:
        start.wait(timeout=30)
        try:
            PostgresEventsSink(store)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=make, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for store in stores:
        store.close()

    assert failures == []


def test_report_session_of_a_postgresql_store_reads_its_events_table(
    store: PostgresStore, pg_url: str, tmp_path: Path
) -> None:
    _run(store, "run-a", "tool_of_a")
    _run(store, "run-b", "tool_of_b")
    page = tmp_path / "b.html"
    scope = ["--store", pg_url, "--tenant", TENANT, "--user", USER]

    written = CliRunner().invoke(cli, [*scope, "report", "--session", "run-b", "--html", str(page)])

    assert written.exit_code == 0, written.output
    text = page.read_text()
    assert "tool_of_b" in text
    assert "tool_of_a" not in text
    assert "3 decision events of this session" in text
    assert '<section id="requests">' in text
    assert "run-b" not in text
