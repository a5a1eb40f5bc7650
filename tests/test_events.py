"""Decision events: exactly one per decision, validated, correlated across an agent tree, sunk."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import threading
from collections import Counter
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cargohold import (
    ContentKind,
    DecisionEvent,
    GuardOutcome,
    JsonLinesSink,
    Limits,
    ListSink,
    LoggingSink,
    MemoryStore,
    Offloader,
    OffloadOutcome,
    OffloadResult,
    OpenTelemetrySink,
    Operation,
    Reason,
    Ref,
    RehydrateOutcome,
    RehydrateResult,
    Rehydrator,
    Reporter,
    RunSummary,
    Scope,
    ScopedStore,
    StoreUnavailableError,
    UsageError,
)

OWNER = Scope("tenant-acme", "user-ana", "session-1")
OTHER_SESSION = Scope("tenant-acme", "user-ana", "session-2")
REF = str(Ref.of(b"an artifact"))
KiB = 1024


def _log(size: int, word: str = "row") -> str:
    text = "".join(f"2026-03-01 INFO {word} {index} done\n" for index in range(size // 20 + 1))
    return text[:size]


class UnavailableStore:
    """A backend whose puts fail as an unreachable store's would."""

    def __init__(self) -> None:
        self._inner = MemoryStore()
        self.limits = self._inner.limits

    def put(self, *args: Any) -> Any:
        raise StoreUnavailableError("store I/O failed")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _event(**changes: Any) -> DecisionEvent:
    fields: dict[str, Any] = {
        "operation": Operation.OFFLOAD,
        "outcome": OffloadOutcome.OFFLOADED,
        "content_kind": ContentKind.TOOL_RESULT,
        "reason": Reason.AT_OR_ABOVE_THRESHOLD,
        "observed_bytes": 40_000,
        "limit_bytes": 32_768,
        "ref": REF,
        "tool": "list_orders",
        "agent_id": "main",
        "parent_agent_id": None,
        "depth": 0,
        "sequence": 1,
    }
    fields.update(changes)
    return DecisionEvent(**fields)


Decision = OffloadResult | RehydrateResult


def _mixed_run(reporter: Reporter | None) -> list[Decision]:
    """Every kind of offload and rehydrate decision, in one run, on fresh stores."""
    # One marker key for both runs: the stubs and segments of two stores differ by it alone.
    key = bytes(range(32))
    store = MemoryStore(limits=Limits(max_artifact_bytes=20 * KiB), marker_key=key)
    scoped = ScopedStore(store, OWNER)
    offloader = Offloader(scoped, threshold=1000, reporter=reporter)
    failing = Offloader(
        ScopedStore(UnavailableStore(), OWNER),
        threshold=1000,
        reporter=reporter,
    )
    reader = Rehydrator(scoped, reporter=reporter)
    foreign = ScopedStore(store, OTHER_SESSION).put(b"another session's bytes").ref
    body = _log(5000)

    decisions: list[Decision] = []
    decisions.append(offloader.offload("small"))
    stored = offloader.offload(body, tool="tail_log")
    decisions.append(stored)
    assert stored.ref is not None
    decisions.append(offloader.offload(body, tool="tail_log"))
    decisions.append(offloader.offload(body, sensitivity="secret"))
    decisions.append(offloader.offload(_log(30 * KiB)))
    decisions.append(failing.offload(body))
    read = reader.read(stored.ref, offset=0, length=100)
    decisions.append(read)
    assert read.segment is not None
    decisions.append(offloader.offload(read.segment))
    decisions.append(reader.read(Ref.of(b"nothing")))
    decisions.append(reader.read(foreign))
    decisions.append(reader.read(stored.ref, budget=10))
    decisions.append(reader.read_lines(stored.ref, 1, 2))
    decisions.append(reader.grep(stored.ref, "INFO row 1[0-9] "))
    rows = offloader.offload([{"id": index} for index in range(200)])
    decisions.append(rows)
    assert rows.ref is not None
    decisions.append(reader.query(rows.ref, "[0]"))
    return decisions


# -- exactly one per decision ------------------------------------------------------------------


def test_every_decision_reports_exactly_one_event_the_very_instance_on_its_result() -> None:
    sink = ListSink()

    decisions = _mixed_run(Reporter([sink]))

    assert len(sink.events) == len(decisions)
    for decision, event in zip(decisions, sink.events, strict=True):
        assert decision.event is event


def test_a_usage_error_is_not_a_decision_and_reports_nothing() -> None:
    sink = ListSink()
    scoped = ScopedStore(MemoryStore(), OWNER)
    offloader = Offloader(scoped, threshold=10, reporter=Reporter([sink]))
    reader = Rehydrator(scoped, reporter=Reporter([sink]))
    ref = scoped.put(b"not json").ref

    for call in (
        lambda: offloader.offload(object()),
        lambda: offloader.offload("x" * 100, budget="enormous"),
        lambda: reader.read(ref, budget=0),
        lambda: reader.grep(ref, "("),
        lambda: reader.query(ref, "[?"),
        lambda: reader.read("artifact://sha256/NOT-CANONICAL"),
    ):
        with pytest.raises(UsageError):
            call()
    assert sink.events == []


# -- fields -------------------------------------------------------------------------------------


def test_each_decision_reports_its_categorical_fields_and_byte_counts() -> None:
    sink = ListSink()
    decisions = _mixed_run(Reporter([sink]))
    stored_ref = str(decisions[1].ref)

    observed = [
        (e.operation, e.outcome, e.content_kind, e.reason, e.limit_bytes) for e in sink.events
    ]

    offload, rehydrate = Operation.OFFLOAD, Operation.REHYDRATE
    tool, recovered = ContentKind.TOOL_RESULT, ContentKind.RECOVERED_CONTEXT
    assert observed == [
        (offload, OffloadOutcome.INLINE, tool, Reason.BELOW_THRESHOLD, 1000),
        (offload, OffloadOutcome.OFFLOADED, tool, Reason.AT_OR_ABOVE_THRESHOLD, 1000),
        (offload, OffloadOutcome.EXISTING_REFERENCE, tool, Reason.IDENTICAL_CONTENT, 1000),
        (offload, OffloadOutcome.REJECTED, tool, Reason.SENSITIVITY, 1000),
        (offload, OffloadOutcome.REJECTED, tool, Reason.ARTIFACT_TOO_LARGE, 1000),
        (offload, OffloadOutcome.FAILED, tool, Reason.STORE_UNAVAILABLE, 1000),
        (rehydrate, RehydrateOutcome.RESOLVED, recovered, Reason.VERIFIED, 16 * KiB),
        (offload, OffloadOutcome.BYPASS, recovered, Reason.RECOVERED_SEGMENT, 16 * KiB),
        (rehydrate, RehydrateOutcome.MISSING, recovered, Reason.NOT_FOUND, 16 * KiB),
        (rehydrate, RehydrateOutcome.UNAUTHORIZED, recovered, Reason.OWNER_MISMATCH, 16 * KiB),
        (rehydrate, RehydrateOutcome.OVER_BUDGET, recovered, Reason.BUDGET_EXCEEDED, 10),
        (rehydrate, RehydrateOutcome.RESOLVED, recovered, Reason.VERIFIED, 16 * KiB),
        (rehydrate, RehydrateOutcome.RESOLVED, recovered, Reason.VERIFIED, 16 * KiB),
        (offload, OffloadOutcome.OFFLOADED, tool, Reason.AT_OR_ABOVE_THRESHOLD, 1000),
        (rehydrate, RehydrateOutcome.RESOLVED, recovered, Reason.VERIFIED, 16 * KiB),
    ]
    refs = [e.ref for e in sink.events]
    assert refs[:8] == [None, stored_ref, stored_ref, None, None, None, stored_ref, stored_ref]
    assert refs[8] == str(Ref.of(b"nothing"))
    assert refs[10:13] == [stored_ref] * 3
    observed_bytes = [e.observed_bytes for e in sink.events]
    assert observed_bytes[:7] == [5, 5000, 5000, 5000, 30 * KiB, 5000, 100]
    assert observed_bytes[7] == len(decisions[7].content)
    assert observed_bytes[8:11] == [0, 0, 5000]
    assert {e.tool for e in sink.events[1:3]} == {"tail_log"}


def test_the_reference_on_an_event_is_canonical_or_absent() -> None:
    sink = ListSink()
    _mixed_run(Reporter([sink]))

    for event in sink.events:
        if event.outcome in (OffloadOutcome.INLINE, OffloadOutcome.REJECTED, OffloadOutcome.FAILED):
            assert event.ref is None
        else:
            assert event.ref is not None
            assert str(Ref.parse(event.ref)) == event.ref


@pytest.mark.parametrize(
    "ref",
    [
        "artifact://sha256/abc",
        "artifact://sha256/" + "A" * 64,
        "artifact://sha256/" + "g" * 64,
        "artifact://md5/" + "a" * 64,
        "blob://sha256/" + "a" * 64,
        "ARTIFACT://SHA256/" + "a" * 64,
        " " + REF,
        REF + "\n",
        REF + "/etc/passwd",
        "a" * 64,
        "",
    ],
)
def test_an_event_refuses_a_reference_that_is_not_canonical(ref: str) -> None:
    with pytest.raises(UsageError):
        _event(ref=ref)


@pytest.mark.parametrize(
    "outcome", [OffloadOutcome.INLINE, OffloadOutcome.REJECTED, OffloadOutcome.FAILED]
)
def test_an_event_refuses_a_reference_on_an_outcome_that_must_not_carry_one(
    outcome: OffloadOutcome,
) -> None:
    with pytest.raises(UsageError):
        _event(outcome=outcome, ref=REF)
    assert _event(outcome=outcome, ref=None).ref is None


@pytest.mark.parametrize(
    "outcome",
    [OffloadOutcome.OFFLOADED, OffloadOutcome.EXISTING_REFERENCE, OffloadOutcome.BYPASS],
)
def test_an_event_requires_the_reference_of_an_outcome_that_carries_one(
    outcome: OffloadOutcome,
) -> None:
    with pytest.raises(UsageError):
        _event(outcome=outcome, ref=None)
    assert _event(outcome=outcome).ref == REF


@pytest.mark.parametrize("outcome", list(RehydrateOutcome))
def test_a_rehydrate_event_names_the_reference_asked_for(outcome: RehydrateOutcome) -> None:
    fields = {
        "operation": Operation.REHYDRATE,
        "outcome": outcome,
        "content_kind": ContentKind.RECOVERED_CONTEXT,
    }
    with pytest.raises(UsageError):
        _event(**fields, ref=None)
    assert _event(**fields).ref == REF


@pytest.mark.parametrize(
    "changes",
    [
        {"observed_bytes": -1},
        {"limit_bytes": -1},
        {"depth": -1},
        {"context_bytes": -1},
        {"estimated_tokens": -1},
        {"limit_tokens": -1},
        {"limit_tokens": True},
        {"tool": "a tool name with spaces"},
        {"tool": "x" * 200},
        {"agent_id": "api_key=sk-live-XYZ and more"},
        {"agent_id": ""},
        {"agent_id": "x" * 200},
        {"agent_id": None},
        {"parent_agent_id": "a parent\nwith a newline", "depth": 1},
        {"parent_agent_id": "planner", "depth": 0},
        {"depth": 1},
        {"depth": True},
        {"kind": "json; the body: api_key=sk-live-XYZ"},
        {"kind": "JSON"},
        {"kind": ""},
        {"kind": 3},
    ],
)
def test_an_event_refuses_negative_counts_and_malformed_tool_names_and_agent_ids(
    changes: dict[str, Any],
) -> None:
    with pytest.raises(UsageError):
        _event(**changes)


def test_an_event_is_immutable() -> None:
    event = _event()
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.outcome = OffloadOutcome.INLINE


def test_as_dict_gives_every_field_as_plain_data() -> None:
    event = _event(parent_agent_id="planner", depth=1, sequence=7, context_bytes=900)

    data = event.as_dict()

    assert set(data) == {field.name for field in dataclasses.fields(DecisionEvent)}
    assert data["outcome"] == "offloaded"
    assert data["ref"] == REF
    assert data["sequence"] == 7
    assert data["limit_tokens"] is None
    assert json.loads(json.dumps(data)) == data


def test_a_guard_event_carries_its_token_limit_to_the_json_lines_sink() -> None:
    stream = io.StringIO()
    reporter = Reporter([JsonLinesSink(stream, clock=lambda: 0.0)])
    event = reporter.decide(
        Operation.GUARD,
        GuardOutcome.CONTEXT_WINDOW_EXCEEDED,
        ContentKind.REQUEST,
        Reason.WINDOW_MARGIN,
        observed_bytes=900_000,
        limit_bytes=0,
        ref=None,
        estimated_tokens=210_000,
        limit_tokens=196_000,
    )
    assert event.limit_tokens == 196_000
    assert json.loads(stream.getvalue())["limit_tokens"] == 196_000


def test_the_run_summary_does_not_count_an_unchecked_window_as_a_guard_failure() -> None:
    summary = RunSummary()
    Reporter([summary]).decide(
        Operation.GUARD,
        GuardOutcome.CONTEXT_WINDOW_UNCHECKED,
        ContentKind.REQUEST,
        Reason.UNKNOWN_MODEL,
        observed_bytes=10,
        limit_bytes=0,
        ref=None,
    )
    assert summary.as_dict()["guard_failures"] == 0
    assert summary.as_dict()["decisions"] == {"guard:llm.context_window_unchecked": 1}


# -- no reporter, broken sinks ---------------------------------------------------------------


def test_without_a_reporter_nothing_is_reported_and_decisions_are_unchanged() -> None:
    sink = ListSink()

    reported = _mixed_run(Reporter([sink]))
    silent = _mixed_run(None)

    assert [(d.outcome, d.reason, d.content) for d in silent] == [
        (d.outcome, d.reason, d.content) for d in reported
    ]
    for decision in silent:
        assert decision.event.sequence == 0
        assert decision.event.agent_id == "main"
        assert decision.event.parent_agent_id is None
    assert len(sink.events) == len(reported)  # only the reported run's decisions


class BrokenSink:
    def emit(self, event: DecisionEvent) -> None:
        raise RuntimeError("sink exploded")


def test_a_sink_that_raises_breaks_neither_the_decision_nor_the_other_sinks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    after = ListSink()
    scoped = ScopedStore(MemoryStore(), OWNER)
    offloader = Offloader(scoped, threshold=100, reporter=Reporter([BrokenSink(), after]))

    with caplog.at_level(logging.WARNING, logger="cargohold.events"):
        result = offloader.offload(_log(1000))

    assert result.outcome is OffloadOutcome.OFFLOADED
    assert scoped.read(result.ref).ok
    assert after.events == [result.event]
    warnings = [r for r in caplog.records if r.name == "cargohold.events"]
    assert len(warnings) == 1
    assert "BrokenSink" in warnings[0].getMessage()
    assert "sink exploded" not in warnings[0].getMessage()


# -- correlation -------------------------------------------------------------------------------


def test_child_and_nested_child_reporters_correlate_and_share_one_sequence() -> None:
    sink = ListSink()
    root = Reporter([sink], agent_id="planner")
    child = root.child("worker-1")
    nested = child.child("worker-1.search")
    store = MemoryStore()
    agents = {
        reporter.agent_id: (
            Offloader(ScopedStore(store, OWNER), threshold=100, reporter=reporter),
            Rehydrator(ScopedStore(store, OWNER), reporter=reporter),
        )
        for reporter in (root, child, nested)
    }
    ref = ScopedStore(store, OWNER).put(_log(2000).encode()).ref
    script = [
        ("planner", "offload"),
        ("worker-1", "rehydrate"),
        ("worker-1.search", "offload"),
        ("planner", "rehydrate"),
        ("worker-1.search", "rehydrate"),
        ("worker-1", "offload"),
        ("worker-1.search", "offload"),
        ("planner", "offload"),
        ("worker-1", "rehydrate"),
    ]

    results: list[Decision] = []
    for index, (agent, operation) in enumerate(script):
        offloader, reader = agents[agent]
        if operation == "offload":
            results.append(offloader.offload(_log(500 + index, word=agent)))
        else:
            results.append(reader.read(ref, offset=index, length=50))

    assert [e.sequence for e in sink.events] == list(range(1, len(script) + 1))
    assert [r.event for r in results] == sink.events
    expected = {
        "planner": (None, 0),
        "worker-1": ("planner", 1),
        "worker-1.search": ("worker-1", 2),
    }
    for (agent, operation), event in zip(script, sink.events, strict=True):
        assert event.agent_id == agent
        assert (event.parent_agent_id, event.depth) == expected[agent]
        assert event.operation.value == operation


def test_separate_runs_have_separate_sequences() -> None:
    first, second = ListSink(), ListSink()
    store = ScopedStore(MemoryStore(), OWNER)
    one = Offloader(store, reporter=Reporter([first]))
    two = Offloader(store, reporter=Reporter([second]).child("sub"))

    for _ in range(3):
        one.offload("a")
        two.offload("b")

    assert [e.sequence for e in first.events] == [1, 2, 3]
    assert [e.sequence for e in second.events] == [1, 2, 3]


def test_the_sequence_stays_unique_across_agents_deciding_on_many_threads() -> None:
    sink = ListSink()
    root = Reporter([sink])
    store = MemoryStore()
    per_thread = 60
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            offloader = Offloader(
                ScopedStore(store, OWNER), threshold=1000, reporter=root.child(name)
            )
            for index in range(per_thread):
                offloader.offload(f"{name} {index}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(f"worker-{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)

    assert errors == []
    assert sorted(e.sequence for e in sink.events) == list(range(1, 4 * per_thread + 1))
    for n in range(4):
        mine = [e.sequence for e in sink.events if e.agent_id == f"worker-{n}"]
        assert mine == sorted(mine)
        assert len(mine) == per_thread


@pytest.mark.parametrize("agent_id", ["", "has space", "x" * 200, "-leading", "é"])
def test_an_agent_id_must_be_a_short_identifier(agent_id: str) -> None:
    with pytest.raises(UsageError):
        Reporter(agent_id=agent_id)
    with pytest.raises(UsageError):
        Reporter().child(agent_id)


# -- sinks --------------------------------------------------------------------------------------


def test_an_offload_event_names_the_projection_kind_of_the_bytes_it_stored() -> None:
    sink = ListSink()
    stream = io.StringIO()
    scoped = ScopedStore(MemoryStore(), OWNER)
    offloader = Offloader(scoped, threshold=1000, reporter=Reporter([sink, JsonLinesSink(stream)]))
    table = "id,customer,total\n" + "".join(f"{i},c-{i:05d},{i * 1.5}\n" for i in range(200))
    rows = [{"id": i, "status": "paid"} for i in range(200)]

    decided = [
        offloader.offload(_log(5000), tool="tail_log"),
        offloader.offload(table, tool="export", media_type="text/csv"),
        offloader.offload(rows, tool="list_orders"),
        offloader.offload(bytes(range(256)) * 8, tool="fetch"),
        offloader.offload(_log(5000), tool="tail_log"),  # the same bytes: reused
        offloader.offload("small", tool="status"),  # inline: nothing stored, no kind
    ]

    assert [d.outcome for d in decided][-2:] == [
        OffloadOutcome.EXISTING_REFERENCE,
        OffloadOutcome.INLINE,
    ]
    assert [e.kind for e in sink.events] == ["log", "csv", "json", "binary", "log", None]
    assert [json.loads(line)["kind"] for line in stream.getvalue().splitlines()] == [
        "log",
        "csv",
        "json",
        "binary",
        "log",
        None,
    ]


def test_the_json_lines_sink_writes_one_parseable_object_per_event() -> None:
    stream = io.StringIO()
    memory = ListSink()

    _mixed_run(Reporter([JsonLinesSink(stream, clock=lambda: 1796049206.25), memory]))

    lines = stream.getvalue().splitlines()
    assert len(lines) == len(memory.events)
    stamped = {"time": "2026-11-30T14:33:26.250Z"}
    assert [json.loads(line) for line in lines] == [
        {**stamped, **e.as_dict()} for e in memory.events
    ]
    assert stream.getvalue().endswith("\n")


def test_the_logging_sink_logs_each_event_with_its_fields_as_extra(
    caplog: pytest.LogCaptureFixture,
) -> None:
    memory = ListSink()

    with caplog.at_level(logging.DEBUG, logger="cargohold.events"):
        _mixed_run(Reporter([LoggingSink(), memory]))

    records = [r for r in caplog.records if r.name == "cargohold.events"]
    assert len(records) == len(memory.events)
    for record, event in zip(records, memory.events, strict=True):
        assert record.levelno == logging.INFO
        assert record.cargohold == event.as_dict()
        assert event.outcome.value in record.getMessage()


def test_the_logging_sink_uses_the_given_logger_and_level_and_warns_on_guard_events(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("myapp.cargo")
    reporter = Reporter([LoggingSink(logger, level=logging.DEBUG)])

    with caplog.at_level(logging.DEBUG, logger="myapp.cargo"):
        reporter.decide(
            Operation.OFFLOAD,
            OffloadOutcome.INLINE,
            ContentKind.TOOL_RESULT,
            Reason.BELOW_THRESHOLD,
            observed_bytes=10,
            limit_bytes=100,
            ref=None,
        )
        reporter.decide(
            Operation.GUARD,
            GuardOutcome.CONTEXT_LEAK,
            ContentKind.TOOL_RESULT,
            Reason.RAW_HEAVY_CONTENT,
            observed_bytes=50_000,
            limit_bytes=32_768,
            ref=None,
        )

    assert [(r.name, r.levelno) for r in caplog.records] == [
        ("myapp.cargo", logging.DEBUG),
        ("myapp.cargo", logging.WARNING),
    ]


def test_the_opentelemetry_sink_adds_each_decision_to_the_current_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("cargohold-tests")
    memory = ListSink()
    reporter = Reporter([OpenTelemetrySink(), memory])
    offloader = Offloader(ScopedStore(MemoryStore(), OWNER), threshold=100, reporter=reporter)

    with tracer.start_as_current_span("agent-step"):
        offloaded = offloader.offload(_log(1000))
        inline = offloader.offload("tiny")
    outside = offloader.offload("no span is active")

    (span,) = exporter.get_finished_spans()
    assert [e.name for e in span.events] == ["cargohold.decision"] * 2
    first, second = (dict(e.attributes or {}) for e in span.events)
    assert first["cargohold.outcome"] == "offloaded"
    assert first["cargohold.ref"] == str(offloaded.ref)
    assert first["cargohold.sequence"] == offloaded.event.sequence
    assert second["cargohold.outcome"] == "inline"
    assert "cargohold.ref" not in second  # None is not an attribute value
    assert second["cargohold.observed_bytes"] == inline.event.observed_bytes
    assert outside.outcome is OffloadOutcome.INLINE  # no span: the event is dropped, no error
    assert len(memory.events) == 3
    provider.shutdown()


def test_the_run_summary_counts_decisions_and_bytes_kept_out_of_context() -> None:
    summary = RunSummary()
    memory = ListSink()

    _mixed_run(Reporter([summary, memory]))
    Reporter([summary]).decide(
        Operation.GUARD,
        GuardOutcome.CONTEXT_LEAK,
        ContentKind.TOOL_RESULT,
        Reason.RAW_HEAVY_CONTENT,
        observed_bytes=50_000,
        limit_bytes=32_768,
        ref=None,
    )

    kept = [
        e
        for e in memory.events
        if e.outcome in (OffloadOutcome.OFFLOADED, OffloadOutcome.EXISTING_REFERENCE)
    ]
    body = sum(e.observed_bytes for e in kept)
    stubs = sum(e.context_bytes for e in kept)
    recovered = sum(e.context_bytes for e in memory.events if e.operation is Operation.REHYDRATE)
    data = summary.as_dict()
    expected = Counter(f"{e.operation.value}:{e.outcome.value}" for e in memory.events)
    expected["guard:llm.context_leak"] += 1
    assert data["decisions"] == dict(expected)
    assert data["decisions"]["rehydrate:resolved"] == 4
    assert data["decisions"]["offload:offloaded"] == 2
    assert (
        data["body_bytes_offloaded"]
        == body
        == 5000 + 5000 + len(json.dumps([{"id": i} for i in range(200)], separators=(",", ":")))
    )
    assert data["context_bytes_instead"] == stubs
    assert data["bytes_kept_out"] == max(0, body - stubs)
    assert data["estimated_tokens_kept_out"] == sum(e.estimated_tokens for e in kept)
    assert data["recovered_bytes"] == recovered > 0
    assert data["guard_failures"] == 1
    assert summary.lines()[0].startswith("decisions: ")
