"""Privacy by reflection: no body, store path, owner identity or raw exception text ever reaches
an event (any field, its str or repr), a sink's output, a log record, a result's repr, or the
message of an error cargohold raises.

Each test plants unique canary strings where the secret lives, drives every decision it can
through the public API, and then searches everything an operator or a model could see.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cargohold import (
    CargoholdError,
    ContentKind,
    DecisionEvent,
    JsonLinesSink,
    LimitExceededError,
    Limits,
    ListSink,
    LocalStore,
    LoggingSink,
    MemoryStore,
    Offloader,
    OffloadOutcome,
    OpenTelemetrySink,
    Operation,
    ReadError,
    Reason,
    Ref,
    RehydrateOutcome,
    Rehydrator,
    RejectedError,
    Reporter,
    RunSummary,
    SchemaError,
    Scope,
    ScopedStore,
    SensitivityRefusedError,
    StoreBackend,
    StoreError,
    StoreUnavailableError,
)
from cargohold.testing import FakeClock

BODY = "cnry-body-5b1f0d7e"
TENANT = "cnry-tenant-90a4c3"
USER = "cnry-user-1e6b72"
SESSION = "cnry-session-d83f51"
OTHER_SESSION = "cnry-session-other-47c2aa"
PATH = "cnry-path-c0ffee42"
EXCEPTION = "cnry-exception-8d7e6f"
OWNER_CANARIES = (TENANT, USER, SESSION, OTHER_SESSION)
ALL = (BODY, *OWNER_CANARIES, PATH, EXCEPTION)
KiB = 1024


def _body(size: int) -> str:
    """A realistic log whose every line carries the body canary."""
    lines = (f"2026-03-01 INFO {BODY} item {index} token=abc{index}\n" for index in range(size))
    return "".join(lines)[:size]


def _assert_clean(text: str, canaries: tuple[str, ...] = ALL) -> None:
    for canary in canaries:
        assert canary not in text


def _assert_event_clean(event: DecisionEvent) -> None:
    for item in dataclasses.fields(event):
        _assert_clean(str(getattr(event, item.name)))
        _assert_clean(repr(getattr(event, item.name)))
    _assert_clean(str(event))
    _assert_clean(repr(event))
    _assert_clean(json.dumps(event.as_dict()))


def _assert_error_clean(error: BaseException) -> None:
    _assert_clean(str(error))
    _assert_clean(repr(error))
    for arg in error.args:
        _assert_clean(str(arg))


@dataclass
class Observed:
    """Everything an operator could see of a run: the sinks' outputs and the log records."""

    memory: ListSink = field(default_factory=ListSink)
    lines: io.StringIO = field(default_factory=io.StringIO)
    summary: RunSummary = field(default_factory=RunSummary)
    exporter: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)
    reporter: Reporter = field(init=False)

    def __post_init__(self) -> None:
        self.reporter = Reporter(
            [
                self.memory,
                JsonLinesSink(self.lines),
                LoggingSink(level=logging.DEBUG),
                OpenTelemetrySink(),
                self.summary,
            ],
            agent_id="planner",
        )

    def assert_clean(self, caplog: pytest.LogCaptureFixture) -> None:
        assert self.memory.events, "the run reported nothing to inspect"
        for event in self.memory.events:
            _assert_event_clean(event)
        _assert_clean(self.lines.getvalue())
        _assert_clean(json.dumps(self.summary.as_dict()))
        _assert_clean("\n".join(self.summary.lines()))
        _assert_clean(repr(self.summary))
        records = caplog.records
        assert len([r for r in records if r.name == "cargohold.events"]) >= len(self.memory.events)
        for record in records:
            _assert_clean(record.getMessage())
            _assert_clean(str(record.msg))
            _assert_clean(repr(record.args))
            _assert_clean(json.dumps(getattr(record, "cargohold", None)))
            _assert_clean(repr(record.__dict__))
        _assert_clean(caplog.text)
        for span in self.exporter.get_finished_spans():
            for span_event in span.events:
                _assert_clean(repr(dict(span_event.attributes or {})))


@pytest.fixture
def observed(caplog: pytest.LogCaptureFixture) -> Iterator[Observed]:
    observed = Observed()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(observed.exporter))
    with (
        caplog.at_level(logging.DEBUG),
        provider.get_tracer("privacy").start_as_current_span("agent-run"),
    ):
        yield observed
    provider.shutdown()


@pytest.fixture(params=["memory", "local"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    """A store of each kind; the local one lives under a directory named by a canary."""
    clock = FakeClock()
    store: StoreBackend
    if request.param == "memory":
        store = MemoryStore(clock=clock, limits=Limits(max_artifact_bytes=64 * KiB))
    else:
        root = tmp_path / f"root-{PATH}" / "store"
        store = LocalStore(root, clock=clock, limits=Limits(max_artifact_bytes=64 * KiB))
    yield store
    store.close()


def _every_decision(
    backend: StoreBackend, reporter: Reporter
) -> tuple[list[Any], list[CargoholdError]]:
    """Drive every offload and rehydrate outcome, as owners named by canaries."""
    owner = ScopedStore(backend, Scope(TENANT, USER, SESSION, task="t1", agent="a1"))
    neighbour = ScopedStore(backend, Scope(TENANT, USER, OTHER_SESSION))
    offloader = Offloader(owner, threshold=1000, reporter=reporter.child("tools"))
    reader = Rehydrator(owner, reporter=reporter.child("reader").child("nested"))
    results: list[Any] = []
    errors: list[CargoholdError] = []

    heavy = offloader.offload(_body(20 * KiB), tool="tail_log")
    assert heavy.outcome is OffloadOutcome.OFFLOADED
    assert heavy.ref is not None
    assert BODY in heavy.content  # the canary really travels: the stub's preview shows it
    rows = offloader.offload([{"id": index, "note": BODY} for index in range(100)])
    assert rows.ref is not None
    results += [
        heavy,
        rows,
        offloader.offload(_body(500)),  # inline
        offloader.offload(_body(20 * KiB), tool="tail_log"),  # existing_reference
        offloader.offload(_body(5000), sensitivity="secret"),  # rejected
        offloader.offload(_body(100 * KiB)),  # rejected: over the artifact limit
    ]
    foreign = neighbour.put(_body(3000).encode()).ref
    read = reader.read(heavy.ref, offset=0, length=2000)
    assert read.content is not None
    assert BODY in read.content
    results += [
        read,
        offloader.offload(read.segment),  # bypass
        reader.read_lines(heavy.ref, 1, 5),
        reader.grep(heavy.ref, BODY),
        reader.query(rows.ref, "[0].note"),
        reader.read(heavy.ref, offset=10**9),  # out_of_range
        reader.read_lines(owner.put(bytes(range(256)) * 64).ref, 1, 5),  # unsupported: binary
        reader.read(heavy.ref, budget=100),  # over_budget
        reader.read(foreign),  # unauthorized
        reader.grep(foreign, "INFO"),
        reader.read(Ref.of(b"absent")),  # missing
    ]
    corrupt = owner.put(_body(4000).encode()).ref
    backend.corrupt_for_tests(TENANT, corrupt)
    results.append(reader.read(corrupt))  # stale
    outcomes = {r.outcome for r in results}
    assert outcomes >= {*RehydrateOutcome} - {RehydrateOutcome.EXPIRED}
    assert outcomes >= {*OffloadOutcome} - {OffloadOutcome.FAILED}

    for refused in results[-5:]:
        if not refused.ok:
            try:
                refused.raise_for_outcome()
            except CargoholdError as exc:
                errors.append(exc)
    for arguments in ({"q": str(foreign)}, {"q": [str(corrupt)]}, {"q": str(heavy.ref)}):
        try:
            reader.resolve_arguments(arguments, budget=100)
        except ReadError as exc:
            errors.append(exc)
    for bad in (lambda: reader.query(heavy.ref, "length(@)"), lambda: Ref.parse(BODY)):
        try:
            bad()
        except CargoholdError as exc:
            errors.append(exc)
    assert len(errors) == 10
    return results, errors


def test_no_body_owner_or_path_reaches_events_logs_results_or_errors(
    backend: StoreBackend, observed: Observed, caplog: pytest.LogCaptureFixture
) -> None:
    results, errors = _every_decision(backend, observed.reporter)

    observed.assert_clean(caplog)
    for result in results:
        _assert_clean(repr(result))
        _assert_clean(str(result))
        _assert_event_clean(result.event)
        stub = getattr(result, "stub", None)
        if stub is not None:
            _assert_clean(repr(stub))
            _assert_clean(json.dumps(stub.as_dict()), (*OWNER_CANARIES, PATH, EXCEPTION))
    for error in errors:
        _assert_error_clean(error)


def test_what_enters_the_conversation_never_names_an_owner_or_a_store_path(
    backend: StoreBackend, observed: Observed
) -> None:
    results, _ = _every_decision(backend, observed.reporter)

    for result in results:
        content = getattr(result, "content", None) or getattr(result, "segment", None) or ""
        if isinstance(content, str):
            _assert_clean(content, (*OWNER_CANARIES, PATH, EXCEPTION))


def test_a_withheld_result_carries_no_part_of_its_body(
    backend: StoreBackend, observed: Observed
) -> None:
    results, _ = _every_decision(backend, observed.reporter)

    withheld = [r for r in results if getattr(r, "outcome", None) is OffloadOutcome.REJECTED]
    assert len(withheld) == 2
    for result in withheld:
        _assert_clean(result.content)


def test_the_facades_and_deciders_do_not_show_their_scope_or_path(
    backend: StoreBackend, observed: Observed
) -> None:
    scope = Scope(TENANT, USER, SESSION, task="t", worker="w", agent="a")
    scoped = ScopedStore(backend, scope)

    for thing in (
        scope,
        scoped,
        backend,
        Offloader(scoped, reporter=observed.reporter),
        Rehydrator(scoped, reporter=observed.reporter),
        observed.reporter,
    ):
        _assert_clean(repr(thing))
        _assert_clean(str(thing))


# -- injected exception messages -------------------------------------------------------------------


class RaisingStore:
    """A backend around a MemoryStore whose puts raise an error carrying a canary message."""

    def __init__(self, error: BaseException) -> None:
        self._inner = MemoryStore()
        self.limits = self._inner.limits
        self._error = error

    def put(self, *args: Any) -> Any:
        raise self._error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _unavailable_from_os_error() -> StoreUnavailableError:
    try:
        try:
            raise PermissionError(13, f"denied {EXCEPTION}", f"/var/{PATH}/blob")
        except OSError as cause:
            raise StoreUnavailableError(f"I/O failed: {EXCEPTION}") from cause
    except StoreUnavailableError as translated:
        return translated


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (StoreUnavailableError(EXCEPTION), OffloadOutcome.FAILED),
        (_unavailable_from_os_error(), OffloadOutcome.FAILED),
        (StoreError(f"index damaged at /srv/{PATH}: {EXCEPTION}"), OffloadOutcome.FAILED),
        (SchemaError(EXCEPTION), OffloadOutcome.FAILED),
        (LimitExceededError(EXCEPTION, reason=EXCEPTION), OffloadOutcome.REJECTED),
        (SensitivityRefusedError(EXCEPTION, reason="sensitivity"), OffloadOutcome.REJECTED),
        (RejectedError(EXCEPTION, reason=EXCEPTION), None),
    ],
    ids=[
        "unavailable",
        "unavailable-from-oserror",
        "store-error",
        "schema",
        "limit",
        "sensitivity",
        "rejected",
    ],
)
def test_an_injected_store_exception_message_never_leaks(
    error: CargoholdError,
    outcome: OffloadOutcome | None,
    observed: Observed,
    caplog: pytest.LogCaptureFixture,
) -> None:
    scoped = ScopedStore(RaisingStore(error), Scope(TENANT, USER, SESSION))
    offloader = Offloader(scoped, threshold=1000, reporter=observed.reporter)

    result = offloader.offload(_body(50 * KiB), tool="fetch_page")

    if outcome is not None:
        assert result.outcome is outcome
    assert result.outcome in (OffloadOutcome.FAILED, OffloadOutcome.REJECTED)
    assert result.ref is None
    assert isinstance(result.content, str)
    assert len(result.content.encode()) < KiB
    _assert_clean(result.content)
    _assert_clean(repr(result))
    _assert_event_clean(result.event)
    assert observed.memory.events == [result.event]
    observed.assert_clean(caplog)


def test_a_real_io_failure_under_a_canary_path_never_leaks(
    tmp_path: Path, observed: Observed, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / f"root-{PATH}"
    store = LocalStore(root, clock=FakeClock())
    try:
        shutil.rmtree(root / "staging")  # the next write fails with an OSError naming the path
        scoped = ScopedStore(store, Scope(TENANT, USER, SESSION))
        with pytest.raises(StoreUnavailableError) as raised:
            scoped.put(b"probe")
        assert PATH in str(raised.value.__cause__)  # the raw cause does name the path...
        _assert_error_clean(raised.value)  # ...the translated error does not
        offloader = Offloader(scoped, threshold=1000, reporter=observed.reporter)

        result = offloader.offload(_body(10 * KiB))
    finally:
        store.close()

    assert result.outcome is OffloadOutcome.FAILED
    assert result.event.reason.value == "store_unavailable"
    _assert_clean(result.content)
    _assert_clean(repr(result))
    observed.assert_clean(caplog)


@pytest.mark.parametrize("name", [f"file-{PATH}", f"file-{PATH}/sub"])
def test_a_store_that_cannot_open_its_root_names_no_path(tmp_path: Path, name: str) -> None:
    (tmp_path / f"file-{PATH}").write_text("not a directory")

    with pytest.raises(CargoholdError) as raised:
        LocalStore(tmp_path / name)

    _assert_error_clean(raised.value)


class LeakySink:
    def emit(self, event: DecisionEvent) -> None:
        raise RuntimeError(f"sink failed writing {BODY} for {TENANT} under /srv/{PATH}")


def test_a_failing_sinks_exception_text_never_reaches_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reporter = Reporter([LeakySink()])
    offloader = Offloader(
        ScopedStore(MemoryStore(), Scope(TENANT, USER, SESSION)), threshold=100, reporter=reporter
    )

    with caplog.at_level(logging.DEBUG):
        result = offloader.offload(_body(1000))

    assert result.outcome is OffloadOutcome.OFFLOADED
    assert caplog.records
    for record in caplog.records:
        _assert_clean(record.getMessage())
        _assert_clean(repr(record.args))
        assert record.exc_info is None
    _assert_clean(caplog.text)


def test_an_event_refusing_a_bad_reference_does_not_echo_it() -> None:
    with pytest.raises(CargoholdError) as raised:
        DecisionEvent(
            operation=Operation.OFFLOAD,
            outcome=OffloadOutcome.OFFLOADED,
            content_kind=ContentKind.TOOL_RESULT,
            reason=Reason.AT_OR_ABOVE_THRESHOLD,
            observed_bytes=1,
            limit_bytes=1,
            ref=f"artifact://sha256/{BODY}",
            tool=None,
            agent_id="main",
            parent_agent_id=None,
            depth=0,
            sequence=1,
        )

    _assert_error_clean(raised.value)
