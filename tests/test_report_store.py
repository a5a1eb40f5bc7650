"""A PostgreSQL store's scope as an event source: the ``events`` table is schema version 6,
``PostgresEventsSink`` writes each event into it, and with ``events_log = "store"`` every command
line writes there too, ``cargohold events`` lists the scope's run and ``cargohold report
--session S`` reads that session's events back by their run tag."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import cargohold
from cargohold import (
    ListSink,
    PostgresEventsSink,
    SchemaError,
    Scope,
    UsageError,
    read_store_events,
    run_tag,
)
from cargohold.cli import ExitCode, cli
from cargohold.store._pg_migrations import LATEST
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
    assert read_store_events(store, tag, limit=2) == read[-2:]  # the newest, oldest first


def test_a_run_no_event_was_written_for_holds_no_events(store: PostgresStore) -> None:
    _run(store, "run-a", "tool_of_a")

    assert read_store_events(store, run_tag(store.marker_key(), Scope(TENANT, USER, "run-c"))) == []


def test_the_newest_events_come_back_oldest_first(store: PostgresStore) -> None:
    for second in range(5):
        store.append_event("0123456789abcdef", {"sequence": second}, received=1796049206 + second)

    newest = read_store_events(store, "0123456789abcdef", limit=3)

    assert [event["sequence"] for event in newest] == [2, 3, 4]
    assert newest[0]["time"] == "2026-11-30T14:33:28.000Z"


def test_an_event_that_is_not_json_data_or_a_limit_below_one_is_a_usage_error(
    store: PostgresStore,
) -> None:
    raw: Any = {"bytes": b"raw"}  # bytes, on purpose: not JSON data
    with pytest.raises(UsageError):
        store.append_event("0123456789abcdef", raw, received=0.0)
    with pytest.raises(UsageError):
        read_store_events(store, "0123456789abcdef", limit=0)

    assert read_store_events(store, "0123456789abcdef") == []  # nothing was written


def test_a_version_5_store_is_refused_until_the_upgrade_that_adds_the_events_table(
    pg_url: str, pg_cluster: Any
) -> None:
    upgrade_schema(pg_url)
    with pg_cluster.connect(pg_url.rsplit("/", 1)[1]) as conn:
        # What schema 5 looked like: everything but the events table.
        conn.execute("DROP TABLE cargohold.events")
        conn.execute("DELETE FROM cargohold.schema_version WHERE version > 5")
    with pytest.raises(SchemaError) as refused:
        PostgresStore(pg_url)
    assert "cargohold db upgrade" in str(refused.value)  # the message is the remedy

    assert upgrade_schema(pg_url) == (5, LATEST)

    store = PostgresStore(pg_url)
    try:
        _run(store, "run-a", "tool_of_a")
        tag = run_tag(store.marker_key(), Scope(TENANT, USER, "run-a"))
        assert [event["operation"] for event in read_store_events(store, tag)] == [
            "offload",
            "rehydrate",
            "request",
        ]
    finally:
        store.close()


def test_report_session_of_a_postgresql_store_reads_its_events_table(
    store: PostgresStore, pg_url: str, tmp_path: Path
) -> None:
    _run(store, "run-a", "tool_of_a")
    _run(store, "run-b", "tool_of_b")
    page = tmp_path / "b.html"
    scope = ["--store", pg_url, "--tenant", TENANT, "--user", USER]

    written = CliRunner().invoke(
        cli,
        [*scope, "report", "--session", "run-b", "--html", str(page)],
        env={"CARGOHOLD_EVENTS_LOG": "store"},
    )

    assert written.exit_code == 0, written.output
    text = page.read_text()
    assert "tool_of_b" in text
    assert "tool_of_a" not in text
    assert "3 decision events of this session" in text
    assert '<section id="requests">' in text
    assert "run-b" not in text


def _cli(pg_url: str, session: str, *args: str, body: str | None = None) -> Result:
    """One command line of ``session`` on the PostgreSQL store, its events in the store."""
    scope = ["--store", pg_url, "--tenant", TENANT, "--user", USER, "--session", session]
    return CliRunner().invoke(
        cli, [*scope, *args], input=body, env={"CARGOHOLD_EVENTS_LOG": "store"}
    )


def _log(tool: str) -> str:
    return "".join(f"{tool} step {i} passed\n" for i in range(4000))


def test_cli_decisions_with_events_log_store_are_listed_and_reported_by_session(
    store: PostgresStore, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no configuration file found above it
    made = _cli(pg_url, "run-a", "offload", "-", "--tool", "build_of_a", "--json", body=_log("a"))
    assert made.exit_code == 0, made.output
    ref = json.loads(made.stdout)["ref"]
    assert _cli(pg_url, "run-a", "read", ref, "--lines", "1:5").exit_code == 0
    other = _cli(pg_url, "run-b", "offload", "-", "--tool", "build_of_b", body=_log("b"))
    assert other.exit_code == 0, other.output

    listed = _cli(pg_url, "run-a", "events", "--json")
    page_a, page_b = tmp_path / "a.html", tmp_path / "b.html"
    reported = _cli(pg_url, "run-b", "report", "--session", "run-a", "--html", str(page_a))
    by_default = _cli(pg_url, "run-b", "report", "--html", str(page_b))  # run-b's own

    assert listed.exit_code == 0, listed.output
    events = json.loads(listed.stdout)
    assert [(event["operation"], event["outcome"]) for event in events] == [
        ("offload", "offloaded"),
        ("rehydrate", "resolved"),
    ]
    assert events[0]["tool"] == "build_of_a"
    assert events[1]["ref"] == ref
    assert reported.exit_code == 0, reported.output
    assert by_default.exit_code == 0, by_default.output
    text_a, text_b = page_a.read_text(), page_b.read_text()
    assert "build_of_a" in text_a
    assert "build_of_b" not in text_a
    assert "2 decision events of this session" in text_a
    assert "build_of_b" in text_b
    assert "build_of_a" not in text_b
    assert "1 decision event of this session" in text_b


def test_events_log_store_with_a_store_that_is_not_postgresql_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where an events file named "store" would appear
    local = ["--store", str(tmp_path / "local")]
    env = {"CARGOHOLD_EVENTS_LOG": "store"}
    runner = CliRunner()

    offloaded = runner.invoke(
        cli, [*local, "offload", "-", "--tool", "t"], input=_log("t"), env=env
    )
    listed = runner.invoke(cli, [*local, "events"], env=env)
    reported = runner.invoke(cli, [*local, "report"], env=env)

    for refused in (offloaded, listed, reported):
        assert refused.exit_code == ExitCode.USAGE, refused.output
        assert "events_log" in refused.output  # the message names the setting
    assert json.loads(runner.invoke(cli, [*local, "ls", "--json"]).stdout) == []  # none stored
    assert not (tmp_path / "store").exists()


def test_a_guard_stop_with_events_log_store_is_listed_with_its_scope(
    store: PostgresStore, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    leak = Path(__file__).parent / "fixtures" / "guard" / "openai_chat_leak.json"

    stopped = _cli(pg_url, "run-a", "guard", str(leak), "--format", "openai-chat")
    listed = _cli(pg_url, "run-a", "events", "--json")
    other = _cli(pg_url, "run-b", "events", "--json")

    assert stopped.exit_code == ExitCode.CONTEXT_LEAK, stopped.output
    assert [event["outcome"] for event in json.loads(listed.stdout)] == ["llm.context_leak"]
    assert json.loads(other.stdout) == []
