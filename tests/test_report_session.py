"""``cargohold report --session S``: every event of a hold carries its scope's opaque run tag, and
the report keeps only the events whose tag the store's key gives for S."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import cargohold
from cargohold import JsonLinesSink, ListSink, LoggingSink, MemoryStore, Scope, StoreError, run_tag
from cargohold.cli import cli
from cargohold.report import build_report, render_html

TENANT, USER = "acme", "ana"


def _run(store: Path | MemoryStore, log: io.StringIO | Any, session: str, tool: str) -> None:
    """One session's run: a heavy result offloaded, read back, and a gateway request."""
    with cargohold.open(
        store, tenant=TENANT, user=USER, session=session, sinks=[JsonLinesSink(log)]
    ) as hold:
        stored = hold.offload("".join(f"{tool} line {i}\n" for i in range(4000)), tool=tool)
        assert stored.ref is not None
        hold.read_lines(stored.ref, 1, 5)
        hold.record_request(
            api="anthropic", outcome="forwarded", request_bytes=90_000, forwarded_bytes=2_000
        )


def _two_sessions(tmp_path: Path) -> Path:
    """One events log holding two sessions' runs of one local store, and an older event."""
    path = tmp_path / "events.jsonl"
    with path.open("a", encoding="utf-8") as log:
        _run(tmp_path / "store", log, "run-a", "tool_of_a")
        _run(tmp_path / "store", log, "run-b", "tool_of_b")
        older = {"operation": "offload", "outcome": "inline", "tool": "older_tool"}
        log.write(json.dumps(older) + "\n")  # written before events carried a run tag
    return path


def _cli(tmp_path: Path, *args: str) -> Any:
    store = ["--store", str(tmp_path / "store"), "--tenant", TENANT, "--user", USER]
    return CliRunner().invoke(cli, [*store, *args])


def test_report_session_shows_only_that_sessions_events(tmp_path: Path) -> None:
    log = _two_sessions(tmp_path)
    page = tmp_path / "a.html"

    written = _cli(
        tmp_path, "report", "--events", str(log), "--session", "run-a", "--html", str(page)
    )
    shown = _cli(tmp_path, "report", "--events", str(log), "--session", "run-b")
    whole = _cli(tmp_path, "report", "--events", str(log))

    assert written.exit_code == 0, written.output
    text = page.read_text()
    assert "tool_of_a" in text
    assert "tool_of_b" not in text
    assert "older_tool" not in text
    assert "run-a" not in text  # the page never names the session
    tags = {json.loads(line).get("run") for line in log.read_text().splitlines()}
    assert len(tags - {None}) == 2
    assert all(tag not in text and tag not in shown.stdout for tag in tags - {None})
    assert '<section id="requests">' in text
    assert shown.exit_code == 0, shown.output
    assert "tool_of_b" in shown.stdout
    assert "tool_of_a" not in shown.stdout
    assert "3 decision events" in shown.stdout
    assert whole.exit_code == 0, whole.output
    assert "7 decision events" in whole.stdout  # without --session: every event


def test_a_report_of_one_session_counts_what_it_left_out(tmp_path: Path) -> None:
    log = _two_sessions(tmp_path)
    events = [json.loads(line) for line in log.read_text().splitlines()]
    with cargohold.open(tmp_path / "store", tenant=TENANT, user=USER, session="run-a") as hold:
        tag = run_tag(hold.store.marker_key(), hold.scope)

    report = build_report(events, run=tag)

    assert (report.events, report.other_runs, report.untagged) == (3, 3, 1)
    assert report.run_filtered
    assert report.by_operation == {"offload": 1, "rehydrate": 1, "request": 1}
    assert "3 of other sessions and 1 without a run tag" in render_html(report)
    assert not build_report(events).run_filtered


def test_every_event_of_a_hold_carries_its_scopes_run_tag_and_a_derived_session_its_own() -> None:
    store = MemoryStore()
    memory = ListSink()
    with cargohold.open(store, tenant=TENANT, user=USER, session="s1", sinks=[memory]) as hold:
        hold.offload("x" * 40_000, tool="t")
        hold.derive(agent="worker").offload("small", tool="t")
        hold.derive(task="t-2").offload("small", tool="t")
        hold.for_session("s2").offload("small", tool="t")
        hold.for_session("s2", agent="reader").offload("small", tool="t")
        hold.guard({"messages": [{"role": "user", "content": "hi"}]}, format="openai-chat")

    key = store.marker_key()
    s1 = run_tag(key, Scope(TENANT, USER, "s1"))
    s2 = run_tag(key, Scope(TENANT, USER, "s2"))
    tags = [event.run for event in memory.events]
    assert tags[:3] == [s1, s1, s1]
    assert tags[3:5] == [s2, s2]
    assert all(tag == s1 for tag in tags[5:])
    assert s1 != s2
    assert [event.sequence for event in memory.events] == list(range(1, len(tags) + 1))


def test_a_run_tag_is_bound_to_the_stores_key_and_to_each_part_of_the_scope() -> None:
    key, other_key = bytes(range(32)), bytes(range(1, 33))
    tag = run_tag(key, Scope("ab", "c", "d"))

    assert len(tag) == 16
    assert int(tag, 16) >= 0
    assert tag == run_tag(key, Scope("ab", "c", "d", task="any", agent="any"))
    assert tag != run_tag(other_key, Scope("ab", "c", "d"))
    assert tag != run_tag(key, Scope("a", "bc", "d"))  # parts that concatenate alike
    assert tag != run_tag(key, Scope("ab", "cd", "d"))


def test_the_run_tag_stays_out_of_reprs_and_log_messages(
    caplog: pytest.LogCaptureFixture,
) -> None:
    memory = ListSink()
    with (
        caplog.at_level(logging.INFO, logger="cargohold.events"),
        cargohold.open(
            "memory://", tenant=TENANT, user=USER, session="s1", sinks=[memory, LoggingSink()]
        ) as hold,
    ):
        hold.offload("x" * 40_000, tool="t")
        shown = repr(hold) + repr(hold.reporter) + repr(hold.summary)

    (event,) = memory.events
    assert event.run is not None
    assert event.run not in shown
    (logged,) = [r for r in caplog.records if r.name == "cargohold.events"]
    assert event.run not in logged.getMessage()
    assert logged.cargohold["run"] == event.run  # the event's own fields, as every field


class _KeylessStore:
    """A store that cannot give its marker key (a damaged key file)."""

    def __init__(self) -> None:
        self._inner = MemoryStore()
        self.limits = self._inner.limits

    def marker_key(self) -> bytes:
        raise StoreError("the marker key is damaged")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_store_that_cannot_give_its_key_leaves_events_untagged_and_decisions_whole() -> None:
    memory = ListSink()
    with cargohold.open(
        _KeylessStore(),  # type: ignore[arg-type]
        tenant=TENANT,
        user=USER,
        session="s1",
        sinks=[memory],
    ) as hold:
        inline = hold.offload("small", tool="t")
        request = hold.record_request(api="anthropic", outcome="forwarded", request_bytes=5)

    assert inline.outcome == "inline"
    assert [e.run for e in memory.events] == [None, None]
    assert request.run is None


def test_report_session_refuses_a_malformed_session_naming_the_option(tmp_path: Path) -> None:
    log = _two_sessions(tmp_path)

    refused = _cli(tmp_path, "report", "--events", str(log), "--session", " padded ")

    assert refused.exit_code == 2
    assert "--session" in refused.output


def test_report_session_of_a_session_with_no_events_reports_none_and_what_it_left_out(
    tmp_path: Path,
) -> None:
    log = _two_sessions(tmp_path)

    shown = _cli(tmp_path, "report", "--events", str(log), "--session", "run-z")

    assert shown.exit_code == 0, shown.output
    assert "0 decision events" in shown.stdout
    assert "6 of other sessions and 1 without a run tag" in shown.stdout


def test_the_cli_tags_its_events_so_report_session_finds_a_cli_offload(tmp_path: Path) -> None:
    log = tmp_path / "cli-events.jsonl"
    env = {"CARGOHOLD_EVENTS_LOG": str(log)}
    store = ["--store", str(tmp_path / "store"), "--tenant", TENANT, "--user", USER]
    for session, tool in (("cli-a", "tool_of_a"), ("cli-b", "tool_of_b")):
        heavy = "".join(f"{tool} line {i}\n" for i in range(4000))
        offloaded = CliRunner().invoke(
            cli,
            [*store, "--session", session, "offload", "-", "--tool", tool],
            input=heavy,
            env=env,
        )
        assert offloaded.exit_code == 0, offloaded.output

    shown = _cli(tmp_path, "report", "--events", str(log), "--session", "cli-a")

    assert shown.exit_code == 0, shown.output
    assert "tool_of_a" in shown.stdout
    assert "tool_of_b" not in shown.stdout


def test_a_key_the_store_could_not_give_at_first_is_asked_again_and_later_events_are_tagged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import cargohold._events

    monkeypatch.setattr(cargohold._events, "_RUN_RETRY_SECONDS", 0.0)
    memory = ListSink()
    scope = Scope(TENANT, USER, "s1")
    key = b"k" * 32
    calls: list[int] = []

    def flaky() -> bytes:  # the store is down at the first event, back at the second
        calls.append(1)
        if len(calls) == 1:
            raise StoreError("down for a moment")
        return key

    reporter = cargohold.Reporter([memory]).for_scope(flaky, scope)
    for _ in range(2):
        reporter.decide(
            cargohold.Operation.OFFLOAD,
            cargohold.OffloadOutcome.INLINE,
            cargohold.ContentKind.TOOL_RESULT,
            cargohold.Reason.BELOW_THRESHOLD,
            observed_bytes=5,
            limit_bytes=10,
            ref=None,
        )

    assert [e.run for e in memory.events] == [None, run_tag(key, scope)]


def test_a_guard_stop_in_the_default_events_log_is_in_its_sessions_report(tmp_path: Path) -> None:
    log = tmp_path / "guard-events.jsonl"
    env = {"CARGOHOLD_EVENTS_LOG": str(log)}
    store = ["--store", str(tmp_path / "store"), "--tenant", TENANT, "--user", USER]
    leak = Path(__file__).parent / "fixtures" / "guard" / "openai_chat_leak.json"
    stopped = CliRunner().invoke(
        cli, [*store, "--session", "g1", "guard", str(leak), "--format", "openai-chat"], env=env
    )
    assert stopped.exit_code == 9, stopped.output

    mine = _cli(tmp_path, "report", "--events", str(log), "--session", "g1")
    other = _cli(tmp_path, "report", "--events", str(log), "--session", "g2")

    assert mine.exit_code == 0, mine.output
    assert "1 decision event" in mine.stdout
    assert "0 decision events" in other.stdout or "no decision events" in other.stdout


def test_report_session_against_another_store_says_to_name_the_store_the_run_used(
    tmp_path: Path,
) -> None:
    log = _two_sessions(tmp_path)
    elsewhere = ["--store", str(tmp_path / "another-store"), "--tenant", TENANT, "--user", USER]

    shown = CliRunner().invoke(
        cli, [*elsewhere, "report", "--events", str(log), "--session", "run-a"]
    )

    assert shown.exit_code == 0, shown.output
    assert "tool_of_a" not in shown.stdout  # another store's key: no tag of it matches
    assert "name the store the run used" in shown.stderr
