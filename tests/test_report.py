"""The run report: aggregated from decision events, drawn as a page and in a terminal, never
holding a body, a path, an owner or an exception's text."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from cargohold import (
    JsonLinesSink,
    MemoryStore,
    Offloader,
    Rehydrator,
    Reporter,
    Scope,
    ScopedStore,
    StoreUnavailableError,
)
from cargohold.cli import cli
from cargohold.report import SECTIONS, build_report, render_html, render_terminal

KiB = 1024
CANARIES = {
    "body": "canary-body-7f3a9c",
    "path": "/home/canary-path-51be0d/secret/config.yaml",
    "tenant": "canary-tenant-a91c",
    "user": "canary-user-33de",
    "exception": "canary-exception-c0ffee",
}


class _FailingStore:
    """A store whose writes fail with an exception text a report must never show."""

    def __init__(self) -> None:
        self._inner = MemoryStore()
        self.limits = self._inner.limits

    def put(self, *args: object, **kwargs: object) -> None:
        raise StoreUnavailableError(f"disk gone: {CANARIES['exception']} {CANARIES['path']}")

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def _canary_run() -> list[dict[str, Any]]:
    """A run of three agent levels whose bodies, paths, owners and failures hold canaries."""
    stream = io.StringIO()
    owner = Scope(CANARIES["tenant"], CANARIES["user"], "report")
    scoped = ScopedStore(MemoryStore(), owner)
    root = Reporter([JsonLinesSink(stream)], agent_id="planner")
    worker = root.child("worker")
    grandchild = worker.child("reader")
    body = "".join(f"line {i} {CANARIES['body']} opened {CANARIES['path']}\n" for i in range(2000))
    big = Offloader(scoped, threshold=4 * KiB, reporter=root).offload(body, tool="read_file")
    Offloader(scoped, reporter=worker).offload(f"ok {CANARIES['body']}", tool="status")
    assert big.ref is not None
    reader = Rehydrator(scoped, reporter=grandchild)
    reader.read_lines(big.ref, 1, 20)
    reader.grep(big.ref, CANARIES["body"])
    failing = ScopedStore(_FailingStore(), owner)  # type: ignore[arg-type]
    Offloader(failing, threshold=4 * KiB, reporter=grandchild).offload(body, tool="read_file")
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def _assert_no_canary(text: str) -> None:
    for name, canary in CANARIES.items():
        assert canary not in text, name
        for word in re.findall(r"canary-[a-z]+-[0-9a-f]+", canary):  # each distinct part too
            assert word not in text, name


def test_the_report_of_a_run_holds_no_body_path_owner_or_exception_text() -> None:
    events = _canary_run()
    report = build_report(events)

    page = render_html(report)
    out = io.StringIO()
    from rich.console import Console

    render_terminal(report, Console(file=out, width=200, color_system=None))

    _assert_no_canary(page)
    _assert_no_canary(out.getvalue())
    assert report.max_depth == 2
    assert [s.outcome for s in report.stops] == ["failed"]


def test_the_report_sums_what_each_tool_returned_against_what_entered_the_context() -> None:
    events = _canary_run()

    report = build_report(events)

    offloads = [e for e in events if e["operation"] == "offload"]
    assert report.observed_bytes == sum(e["observed_bytes"] for e in offloads)
    assert report.context_bytes == sum(e["context_bytes"] for e in offloads)
    by_tool = {t.tool: t for t in report.tools}
    assert by_tool["read_file"].results == 2
    assert (by_tool["read_file"].offloaded, by_tool["read_file"].refused) == (1, 1)
    assert by_tool["status"].inline == 1
    assert [a.agent_id for a in report.agents] == ["planner", "worker", "reader"]
    assert [a.depth for a in report.agents] == [0, 1, 2]
    (read,) = report.read_backs
    assert read.reads == 2
    assert read.read_bytes == sum(
        e["context_bytes"] for e in events if e["operation"] == "rehydrate"
    )
    (largest,) = report.largest
    assert largest.stub_bytes == offloads[0]["context_bytes"]


def test_every_section_is_drawn_and_every_artifact_links_its_command() -> None:
    report = build_report(_canary_run())

    page = render_html(report)

    for section in SECTIONS:
        assert f'<section id="{section}">' in page
    (largest,) = report.largest
    assert f"cargohold show {largest.ref}" in page
    assert f"cargohold read {largest.ref} --lines" in page
    assert "<script" not in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # nothing fetched


def test_the_largest_artifacts_are_named_by_the_kind_their_offload_events_give() -> None:
    stream = io.StringIO()
    offloader = Offloader(
        ScopedStore(MemoryStore(), Scope("acme", "ana", "kinds")),
        threshold=4 * KiB,
        reporter=Reporter([JsonLinesSink(stream)]),
    )
    offloader.offload([{"id": i, "status": "paid"} for i in range(400)], tool="list_orders")
    table = "id,total\n" + "".join(f"{i},{i * 1.5}\n" for i in range(900))
    offloader.offload(table, tool="export", media_type="text/csv")
    report = build_report(json.loads(line) for line in stream.getvalue().splitlines())

    page = render_html(report)
    out = io.StringIO()
    from rich.console import Console

    render_terminal(report, Console(file=out, width=200, color_system=None))

    assert {a.tool: a.kind for a in report.largest} == {"list_orders": "json", "export": "csv"}
    assert "<td>json</td>" in page
    assert "<td>csv</td>" in page
    rows = [line for line in out.getvalue().splitlines() if "cargohold show" in line]
    assert {("json" in row, "csv" in row) for row in rows} == {(True, False), (False, True)}


def test_an_older_log_whose_events_carry_no_kind_is_reported_by_content_kind() -> None:
    event = {
        "operation": "offload",
        "outcome": "offloaded",
        "reason": "at_or_above_threshold",
        "observed_bytes": 40_000,
        "context_bytes": 900,
        "content_kind": "tool_result",
        "ref": "artifact://sha256/" + "ab" * 32,
        "tool": "tail_log",
        "agent_id": "main",
        "sequence": 1,
    }  # a line of a log written before events named the kind

    report = build_report([event])

    (largest,) = report.largest
    assert largest.kind is None
    assert "<td>tool_result</td>" in render_html(report)
    edited = build_report([{**event, "kind": "<b>json</b>"}])
    assert edited.largest[0].kind == "?"


def test_an_edited_log_cannot_inject_markup_or_a_bogus_reference() -> None:
    events = [
        {
            "operation": "offload",
            "outcome": "offloaded",
            "reason": "at_or_above_threshold",
            "observed_bytes": 10,
            "context_bytes": 5,
            "ref": "artifact://sha256/<script>",
            "tool": "<img src=x onerror=alert(1)>",
            "agent_id": "<marquee>",
            "sequence": 1,
        },
        {"operation": "offload", "observed_bytes": "many", "sequence": "x"},
        "not an object",
    ]

    page = render_html(build_report(events))  # type: ignore[arg-type]

    for markup in ("<img", "<marquee", "<script", "artifact://sha256/<"):
        assert markup not in page


def test_a_thousand_events_aggregate_into_bounded_rows() -> None:
    events = [
        {
            "operation": "offload",
            "outcome": "offloaded",
            "reason": "at_or_above_threshold",
            "observed_bytes": 1000 + i,
            "context_bytes": 100,
            "ref": f"artifact://sha256/{i:064x}",
            "tool": f"tool_{i % 7}",
            "agent_id": f"agent-{i % 3}",
            "parent_agent_id": None if i % 3 == 0 else "agent-0",
            "depth": 0 if i % 3 == 0 else 1,
            "sequence": i,
        }
        for i in range(1000)
    ]

    report = build_report(events)

    assert len(report.tools) == 7
    assert len(report.largest) == 20
    assert report.largest[0].size == 1999
    assert sum(sum(a.timeline) for a in report.agents) == 1000


def _cli(tmp_path: Path, *args: str) -> Any:
    (tmp_path / "cargohold.toml").write_text(f'events_log = "{tmp_path / "events.jsonl"}"\n')
    config = ["--store", "memory://", "--config", str(tmp_path / "cargohold.toml")]
    return CliRunner().invoke(cli, [*config, *args])


def test_cargohold_report_writes_the_page_of_a_demo_run(tmp_path: Path) -> None:
    demo = _cli(tmp_path, "demo")
    assert demo.exit_code == 0, demo.output

    written = _cli(tmp_path, "report", "--html", str(tmp_path / "report.html"))

    assert written.exit_code == 0, written.output
    page = (tmp_path / "report.html").read_text()
    for section in SECTIONS:
        assert f'<section id="{section}">' in page
    shown = _cli(tmp_path, "report")
    assert shown.exit_code == 0, shown.output
    assert "largest artifacts" in shown.stdout


def test_the_demo_ends_by_writing_its_report_and_saying_where(tmp_path: Path) -> None:
    demo = _cli(tmp_path, "demo")

    assert demo.exit_code == 0, demo.output
    page = tmp_path / "demo-report.html"
    assert str(page) in demo.stdout.replace("\n", "")
    text = page.read_text()
    for section in SECTIONS:
        assert f'<section id="{section}">' in text
    assert "log-analyst" in text  # the demo's sub-agent, in the tree


def test_the_served_report_is_rebuilt_from_the_log_on_every_load(tmp_path: Path) -> None:
    import threading
    import urllib.request

    from cargohold.cli._report import serve_report

    events = _canary_run()
    log = tmp_path / "events.jsonl"
    log.write_text(json.dumps(events[0]) + "\n")

    def page() -> str:
        lines = log.read_text().splitlines()
        return render_html(build_report([json.loads(line) for line in lines]), refresh=5)

    bound: list[Any] = []
    listening = threading.Event()

    def ready(port: int, stop: Any) -> None:
        bound.extend([port, stop])
        listening.set()

    server = threading.Thread(target=serve_report, args=(page,), kwargs={"ready": ready})
    server.start()
    try:
        assert listening.wait(10)
        url = f"http://127.0.0.1:{bound[0]}/"
        with urllib.request.urlopen(url, timeout=10) as first:
            before = first.read().decode()
        log.write_text("".join(json.dumps(event) + "\n" for event in events))
        with urllib.request.urlopen(url, timeout=10) as second:
            after = second.read().decode()
    finally:
        if bound:
            bound[1]()
        server.join(10)
    assert '<meta http-equiv="refresh" content="5">' in before
    assert "1 decision event (" in before
    assert f"{len(events)} decision events" in after
    _assert_no_canary(after)


def _offload_event(i: int, tool: str, agent: str) -> dict[str, Any]:
    return {
        "operation": "offload",
        "outcome": "offloaded",
        "reason": "at_or_above_threshold",
        "observed_bytes": 1000 + i,
        "context_bytes": 100,
        "ref": f"artifact://sha256/{i:064x}",
        "tool": tool,
        "agent_id": agent,
        "parent_agent_id": None,
        "depth": 0,
        "sequence": i,
    }


def test_a_tool_and_an_agent_named_with_up_to_128_characters_are_reported_as_themselves() -> None:
    tool = "mcp__" + "t" * 123
    agent = "agent-" + "a" * 122
    assert len(tool) == len(agent) == 128

    report = build_report([_offload_event(0, tool, agent), _offload_event(1, "bash", "other")])

    assert {t.tool for t in report.tools} == {tool, "bash"}
    assert {a.agent_id for a in report.agents} == {agent, "other"}


def test_a_name_longer_than_events_allow_is_reported_as_unknown() -> None:
    report = build_report([_offload_event(0, "t" * 129, "a" * 129)])

    assert [t.tool for t in report.tools] == ["?"]
    assert [a.agent_id for a in report.agents] == ["?"]


def test_a_run_of_more_tools_than_the_page_lists_counts_the_rest_in_both_renderers() -> None:
    from rich.console import Console

    from cargohold.report._model import MAX_TOOLS

    extra = 37
    events = [_offload_event(i, f"tool_{i}", "agent") for i in range(MAX_TOOLS + extra)]

    report = build_report(events)
    page = render_html(report)
    console = Console(record=True, width=200)
    render_terminal(report, console)
    terminal = console.export_text()

    assert len(report.tools) == MAX_TOOLS
    assert report.tools_left_off == extra
    assert report.tools[0].tool == f"tool_{MAX_TOOLS + extra - 1}"  # the most bytes first
    tools_section = page.split('<section id="tools">')[1].split("</section>")[0]
    assert tools_section.count("<tr>") == 1 + MAX_TOOLS + 1  # head, tools, the rest in one
    assert f"{extra:,} more" in tools_section
    assert f"{extra:,} more" in terminal
    assert "tool_0 " not in terminal
