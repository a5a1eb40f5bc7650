"""Per-request events of the gateway: one ``request`` event per request through a hold, what it
kept out counted by the run summary, listed by ``cargohold events`` and drawn by the report."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

import cargohold
from cargohold import (
    ContentKind,
    DecisionEvent,
    JsonLinesSink,
    ListSink,
    Operation,
    Reason,
    Reporter,
    RequestOutcome,
    UsageError,
)
from cargohold.cli import cli
from cargohold.report import SECTIONS, build_report, render_html, render_terminal

CANARIES = {
    "tenant": "canary-tenant-5e1f",
    "user": "canary-user-0b9d",
    "session": "canary-session-77aa",
}


def _hold(*sinks: Any) -> cargohold.Hold:
    return cargohold.open(
        "memory://",
        tenant=CANARIES["tenant"],
        user=CANARIES["user"],
        session=CANARIES["session"],
        sinks=sinks,
    )


def _forwarded(hold: cargohold.Hold, **changes: Any) -> DecisionEvent:
    fields: dict[str, Any] = {
        "api": "anthropic",
        "outcome": "forwarded",
        "request_bytes": 2_400_000,
        "forwarded_bytes": 12_000,
        "bytes_kept_out": 2_390_000,
        "tokens_kept_out": 600_000,
        "offloaded": 1,
        "reused": 3,
        "compacted": 2,
        "screened": 1,
    }
    fields.update(changes)
    return hold.record_request(**fields)


def test_a_forwarded_request_reports_one_request_event_with_what_it_kept_out() -> None:
    memory = ListSink()
    with _hold(memory) as hold:
        event = _forwarded(hold)

    assert memory.events == [event]
    assert memory.events[0] is event
    assert event.operation is Operation.REQUEST
    assert event.outcome == "forwarded"
    assert event.reason is Reason.REWRITTEN
    assert event.content_kind is ContentKind.REQUEST
    assert event.ref is None
    assert event.kind == "anthropic"
    assert (event.observed_bytes, event.context_bytes) == (2_400_000, 12_000)
    assert (event.kept_out_bytes, event.estimated_tokens) == (2_390_000, 600_000)
    assert (event.offloaded, event.reused, event.cleared, event.screened) == (1, 3, 2, 1)
    assert event.limit_bytes == hold.settings.heavy_threshold


def test_a_request_forwarded_as_it_came_is_unchanged() -> None:
    with _hold() as hold:
        event = hold.record_request(
            api="openai-chat", outcome="forwarded", request_bytes=900, forwarded_bytes=900
        )

    assert event.reason is Reason.UNCHANGED
    assert event.kind == "openai_chat"
    assert (event.kept_out_bytes, event.offloaded, event.reused) == (0, 0, 0)


def test_a_refused_request_names_the_guard_reason_and_a_failed_one_defaults_to_rewrite_error() -> (
    None
):
    with _hold() as hold:
        refused = hold.record_request(
            api="openai-responses",
            outcome="refused",
            reason=Reason.RAW_HEAVY_CONTENT,
            request_bytes=80_000,
            offloaded=1,
        )
        failed = hold.record_request(api="anthropic", outcome="failed", request_bytes=10)
        with pytest.raises(UsageError):
            hold.record_request(api="anthropic", outcome="refused", request_bytes=10)

    assert (refused.outcome, refused.reason, refused.context_bytes) == (
        "refused",
        Reason.RAW_HEAVY_CONTENT,
        0,
    )
    assert (failed.outcome, failed.reason) == ("failed", Reason.REWRITE_ERROR)


@pytest.mark.parametrize(
    "changes",
    [
        {"api": "gemini"},
        {"api": "anthropic; api_key=sk-live-XYZ"},
        {"outcome": "sent"},
        {"outcome": "refused", "reason": "raw_heavy_content", "forwarded_bytes": 10},
        {"reason": "raw_heavy_content"},  # a guard's reason on a forwarded request
        {"reason": "because"},
        {"request_bytes": -1},
        {"bytes_kept_out": True},
        {"tokens_kept_out": 1.5},
        {"reused": "3"},
        {"compacted": -2},
    ],
)
def test_a_request_with_a_bad_field_is_a_usage_error_that_reports_nothing(
    changes: dict[str, Any],
) -> None:
    memory = ListSink()
    with _hold(memory) as hold, pytest.raises(UsageError):
        _forwarded(hold, **changes)

    assert memory.events == []


def _request_event(**changes: Any) -> DecisionEvent:
    fields: dict[str, Any] = {
        "operation": Operation.REQUEST,
        "outcome": RequestOutcome.FORWARDED,
        "content_kind": ContentKind.REQUEST,
        "reason": Reason.REWRITTEN,
        "observed_bytes": 50_000,
        "limit_bytes": 32_768,
        "ref": None,
        "tool": None,
        "agent_id": "gateway",
        "parent_agent_id": None,
        "depth": 0,
        "sequence": 1,
        "kept_out_bytes": 40_000,
    }
    fields.update(changes)
    return DecisionEvent(**fields)


@pytest.mark.parametrize(
    "changes",
    [
        {"ref": str(cargohold.Ref.of(b"x"))},
        {"content_kind": ContentKind.TOOL_RESULT},
        {"reason": Reason.AT_OR_ABOVE_THRESHOLD},
        {"operation": Operation.OFFLOAD},
        {"kept_out_bytes": -1},
        {"screened": True},
        {"run": "ABCDEF0123456789"},
        {"run": "abc"},
    ],
)
def test_a_request_event_refuses_a_reference_a_foreign_reason_and_bad_counts(
    changes: dict[str, Any],
) -> None:
    with pytest.raises(UsageError):
        _request_event(**changes)


def test_only_a_request_event_counts_parts_kept_out_of_a_request() -> None:
    with pytest.raises(UsageError):
        DecisionEvent(
            operation=Operation.OFFLOAD,
            outcome=cargohold.OffloadOutcome.INLINE,
            content_kind=ContentKind.TOOL_RESULT,
            reason=Reason.BELOW_THRESHOLD,
            observed_bytes=10,
            limit_bytes=100,
            ref=None,
            tool=None,
            agent_id="main",
            parent_agent_id=None,
            depth=0,
            sequence=1,
            reused=1,
        )


def test_the_run_summary_counts_requests_what_they_kept_out_and_the_largest() -> None:
    with _hold() as hold:
        _forwarded(hold, bytes_kept_out=100_000, tokens_kept_out=25_000, forwarded_bytes=5_000)
        _forwarded(hold, bytes_kept_out=300_000, tokens_kept_out=70_000, forwarded_bytes=7_000)
        _forwarded(hold, bytes_kept_out=200_000, tokens_kept_out=90_000, forwarded_bytes=6_000)
        hold.record_request(
            api="anthropic",
            outcome="refused",
            reason="window_margin",
            request_bytes=4_000_000,
            bytes_kept_out=999_999,
            tokens_kept_out=999_999,
        )
        data = hold.summary.as_dict()
        lines = hold.summary.lines()

    assert data["decisions"] == {"request:forwarded": 3, "request:refused": 1}
    assert data["requests"] == 4
    assert data["requests_forwarded"] == 3
    assert data["request_bytes"] == 3 * 2_400_000
    assert data["forwarded_bytes"] == 18_000
    assert data["request_bytes_kept_out"] == 600_000  # the refused one kept nothing out
    assert data["request_tokens_kept_out"] == 185_000
    assert data["largest_request_bytes_kept_out"] == 300_000
    assert data["largest_request_tokens_kept_out"] == 70_000
    # A request event is not an offload decision: the decision totals stay the offloads'.
    assert data["body_bytes_offloaded"] == data["bytes_kept_out"] == 0
    assert len(lines) == 4
    assert "600,000" in lines[3]
    assert "300,000" in lines[3]


def test_a_run_summary_without_requests_keeps_its_three_lines() -> None:
    with _hold() as hold:
        hold.offload("small")
        assert len(hold.summary.lines()) == 3
        assert hold.summary.as_dict()["requests"] == 0


def test_a_request_event_holds_no_key_body_scope_or_path() -> None:
    stream = io.StringIO()
    with _hold(JsonLinesSink(stream)) as hold:
        event = _forwarded(hold)
        derived = hold.for_session("canary-other-session-3c4d")
        _forwarded(derived)

    text = stream.getvalue() + repr(event) + str(event) + repr(hold.reporter)
    for canary in (*CANARIES.values(), "canary-other-session-3c4d"):
        assert canary not in text
    assert [json.loads(line)["operation"] for line in stream.getvalue().splitlines()] == [
        "request",
        "request",
    ]


def test_a_request_event_survives_a_json_line_as_plain_data() -> None:
    with _hold() as hold:
        event = _forwarded(hold)

    data = event.as_dict()
    assert set(data) == {f.name for f in dataclasses.fields(DecisionEvent)}
    assert json.loads(json.dumps(data)) == data
    assert (data["kept_out_bytes"], data["reused"], data["cleared"]) == (2_390_000, 3, 2)


def _log(tmp_path: Path, *, requests: bool) -> Path:
    stream = io.StringIO()
    with _hold(JsonLinesSink(stream, clock=lambda: 1796049206.25)) as hold:
        hold.offload("x" * 40_000, tool="read_file")
        if requests:
            _forwarded(hold, bytes_kept_out=100_000, tokens_kept_out=25_000)
            _forwarded(hold, bytes_kept_out=300_000, tokens_kept_out=70_000)
            hold.record_request(
                api="openai-chat", outcome="refused", reason="raw_heavy_content", request_bytes=9
            )
    path = tmp_path / "events.jsonl"
    path.write_text(stream.getvalue())
    return path


def test_cargohold_events_lists_request_events(tmp_path: Path) -> None:
    path = _log(tmp_path, requests=True)

    shown = CliRunner().invoke(cli, ["events", "--file", str(path)])
    as_json = CliRunner().invoke(cli, ["events", "--file", str(path), "--json"])

    assert shown.exit_code == 0, shown.output
    rows = [line.split() for line in shown.stdout.splitlines()[1:]]
    assert [row[2:4] for row in rows] == [
        ["offload", "offloaded"],
        ["request", "forwarded"],
        ["request", "forwarded"],
        ["request", "refused"],
    ]
    listed = json.loads(as_json.stdout)
    assert [e["kept_out_bytes"] for e in listed if e["operation"] == "request"] == [
        100_000,
        300_000,
        0,
    ]


def test_the_report_draws_gateway_requests_only_when_the_log_holds_request_events(
    tmp_path: Path,
) -> None:
    with_requests = build_report(
        json.loads(line) for line in _log(tmp_path, requests=True).read_text().splitlines()
    )
    without = build_report(
        json.loads(line) for line in _log(tmp_path, requests=False).read_text().splitlines()
    )

    figures = with_requests.requests
    assert (figures.requests, figures.forwarded) == (3, 2)
    assert figures.by_outcome == {"forwarded": 2, "refused": 1}
    assert figures.by_api == {"anthropic": 2, "openai_chat": 1}
    assert (figures.kept_out_bytes, figures.kept_out_tokens) == (400_000, 95_000)
    assert (figures.kept_out_bytes_per_request, figures.kept_out_tokens_per_request) == (
        200_000,
        47_500,
    )
    assert (figures.largest_kept_out_bytes, figures.largest_kept_out_tokens) == (300_000, 70_000)
    assert (figures.offloaded, figures.reused, figures.compacted) == (2, 6, 4)
    assert with_requests.observed_bytes == without.observed_bytes  # the offloads' totals only

    page = render_html(with_requests)
    assert '<section id="requests">' in page
    assert page.index('<section id="totals">') < page.index('<section id="requests">')
    for section in SECTIONS:
        assert f'<section id="{section}">' in page
    assert '<section id="requests">' not in render_html(without)

    console = Console(file=io.StringIO(), width=200, highlight=False)
    render_terminal(with_requests, console)
    terminal = console.file.getvalue()  # type: ignore[attr-defined]
    assert "gateway requests" in terminal
    assert "300.0 KB" in terminal  # the most one request kept out
    quiet = Console(file=io.StringIO(), width=200, highlight=False)
    render_terminal(without, quiet)
    assert "gateway requests" not in quiet.file.getvalue()  # type: ignore[attr-defined]


def test_an_edited_request_event_counts_nothing_it_cannot_vouch_for() -> None:
    report = build_report(
        [
            {
                "operation": "request",
                "outcome": "forwarded",
                "kind": "<script>",
                "kept_out_bytes": "lots",
                "estimated_tokens": -5,
                "reused": True,
            },
            {"operation": "request", "outcome": "x" * 60},
        ]
    )

    figures = report.requests
    assert figures.by_api == {"?": 2}
    assert figures.by_outcome == {"forwarded": 1, "?": 1}
    assert (figures.kept_out_bytes, figures.kept_out_tokens, figures.reused) == (0, 0, 0)
    assert "<script>" not in render_html(report)


def test_a_bare_reporter_still_reports_a_request_event_without_a_run_tag() -> None:
    memory = ListSink()
    event = Reporter([memory], agent_id="gateway").decide(
        Operation.REQUEST,
        RequestOutcome.FORWARDED,
        ContentKind.REQUEST,
        Reason.UNCHANGED,
        observed_bytes=10,
        limit_bytes=32_768,
        ref=None,
        context_bytes=10,
    )

    assert memory.events == [event]
    assert event.run is None


def test_the_async_twin_reports_the_request_off_the_event_loop() -> None:
    class ThreadSink:
        def __init__(self) -> None:
            self.threads: list[str] = []

        def emit(self, event: DecisionEvent) -> None:
            self.threads.append(threading.current_thread().name)

    sink = ThreadSink()
    memory = ListSink()
    with _hold(sink, memory) as hold:
        event = asyncio.run(
            hold.arecord_request(
                api="anthropic", outcome="forwarded", request_bytes=10, forwarded_bytes=10
            )
        )

    assert memory.events == [event]
    assert event.reason is Reason.UNCHANGED
    assert sink.threads[0].startswith("cargohold")  # the hold's worker pool
