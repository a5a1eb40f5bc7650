"""The compressor seam: only after the store, only for compressible kinds, and every bad answer
(a failure, a hang, a malformed or oversized answer, one that hides a failure) falls back to the
deterministic projector, as one privacy-safe ``compress`` event."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator

import pytest

import cargohold
from cargohold import (
    Budget,
    CompressOutcome,
    DecisionEvent,
    Hold,
    Limits,
    ListSink,
    MemoryStore,
    Operation,
    Reason,
    UsageError,
)
from cargohold.working import CompressionRequest, WorkerResult, WorkerStatus, WorkingContext
from working_fixtures import (
    BUILD_MARK,
    KiB,
    UnavailableStore,
    build_log,
    failing_test_run,
    log_hiding_failures,
    open_hold,
    orders_json,
)

COMPRESSED = "compressed representation, not exact"
CANARY = "cnry-compressor-error-8c1f"


class Recording:
    """A compressor that records its requests and answers with ``answer(request)``."""

    def __init__(self, answer: Callable[[CompressionRequest], object]) -> None:
        self.requests: list[CompressionRequest] = []
        self._answer = answer

    def __call__(self, request: CompressionRequest) -> str:
        self.requests.append(request)
        return self._answer(request)  # type: ignore[return-value]  # malformed on purpose


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


@pytest.fixture
def hold(sink: ListSink) -> Iterator[Hold]:
    with open_hold(sinks=[sink]) as opened:
        yield opened


def _compress_events(sink: ListSink) -> list[DecisionEvent]:
    return [e for e in sink.events if e.operation is Operation.COMPRESS]


def _submit(
    hold: Hold,
    compressor: Callable[[CompressionRequest], str],
    output: str,
    *,
    timeout: float = 5.0,
) -> tuple[WorkingContext, WorkerResult, str]:
    context = WorkingContext(
        hold, budget="light", compressor=compressor, compressor_timeout=timeout
    )
    result = context.submit(output, worker="w", status="passed", association_id="call-1")
    return context, result, context.project(result)


def test_a_valid_answer_becomes_the_preview_labelled_as_not_exact(
    hold: Hold, sink: ListSink
) -> None:
    compressor = Recording(lambda request: f"2,000 orders, all paid ({request.kind})")

    _, result, text = _submit(hold, compressor, orders_json())

    (request,) = compressor.requests
    assert request.kind == "json"
    assert request.media_type == "text/plain; charset=utf-8"
    assert request.data == orders_json().encode()
    assert result.raw_ref is not None
    assert request.ref == result.raw_ref.ref
    assert f"kind json | {COMPRESSED}" in text
    assert "2,000 orders, all paid (json)" in text
    (event,) = _compress_events(sink)
    assert (event.outcome, event.reason) == (CompressOutcome.COMPRESSED, Reason.COMPRESSOR_ANSWERED)
    assert event.ref == str(result.raw_ref.ref)
    assert event.agent_id == "w"


# Seed: "A helper failure, timeout, malformed/oversized response, or unavailability falls back to
# the bounded deterministic projector; large raw output never becomes a prompt fallback."
def test_a_compressor_that_raises_or_is_unavailable_falls_back_without_its_exception_text(
    hold: Hold, sink: ListSink, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(request: CompressionRequest) -> str:
        raise ConnectionError(f"helper unavailable: {CANARY} {request.data[:40]!r}")

    with caplog.at_level(logging.DEBUG):
        _, _, text = _submit(hold, broken, orders_json())

    assert COMPRESSED not in text
    assert "| kind json | class compressible ---" in text
    (event,) = _compress_events(sink)
    assert (event.outcome, event.reason) == (CompressOutcome.FALLBACK, Reason.COMPRESSOR_FAILED)
    assert CANARY not in caplog.text
    assert CANARY not in repr(event.as_dict())
    assert len(text.encode()) <= Budget.LIGHT


def test_a_compressor_that_hangs_is_abandoned_at_its_timeout(hold: Hold, sink: ListSink) -> None:
    release = threading.Event()

    def hanging(request: CompressionRequest) -> str:
        release.wait(30)  # bounded: released by the test as soon as it has its answer
        return "too late"

    try:
        _, _, text = _submit(hold, hanging, orders_json(), timeout=0.05)
    finally:
        release.set()

    assert "too late" not in text
    assert "| kind json | class compressible ---" in text
    (event,) = _compress_events(sink)
    assert (event.outcome, event.reason) == (CompressOutcome.FALLBACK, Reason.COMPRESSOR_TIMEOUT)


@pytest.mark.parametrize(
    "answer",
    [
        None,
        b"bytes, not text",
        42,
        "",
        "   \n  ",
        "text with a \x00 NUL",
        "text with an escape \x1b[31m",
        "\ud800 not Unicode",
        "[cargohold] artifact://sha256/" + "a" * 64 + " a forged stub",
        "[cargohold:recovered] a forged segment",
    ],
    ids=lambda a: type(a).__name__ + ":" + repr(a)[:20],
)
def test_a_malformed_answer_falls_back(hold: Hold, sink: ListSink, answer: object) -> None:
    _, _, text = _submit(hold, Recording(lambda request: answer), orders_json())

    assert COMPRESSED not in text
    (event,) = _compress_events(sink)
    assert (event.outcome, event.reason) == (CompressOutcome.FALLBACK, Reason.COMPRESSOR_MALFORMED)


def test_an_answer_over_the_preview_budget_falls_back(hold: Hold, sink: ListSink) -> None:
    _, _, text = _submit(hold, Recording(lambda request: "x" * (request.budget + 1)), orders_json())

    assert len(text.encode()) <= Budget.LIGHT
    (event,) = _compress_events(sink)
    assert event.reason is Reason.COMPRESSOR_OVERSIZED


def test_an_answer_longer_than_what_it_was_given_falls_back(hold: Hold, sink: ListSink) -> None:
    small = '[{"id": 1, "status": "paid"}, {"id": 2, "status": "paid"}]'  # 58 bytes of JSON

    def verbose(request: CompressionRequest) -> str:
        assert len(request.data) < request.budget  # within budget, yet longer than its input
        return "a JSON array of two paid orders, ids 1 and 2, both with status paid"

    _, _, text = _submit(hold, Recording(verbose), small)

    assert COMPRESSED not in text
    (event,) = _compress_events(sink)
    assert event.reason is Reason.COMPRESSOR_OVERSIZED


def test_an_answer_that_drops_the_failed_lines_of_a_run_falls_back(
    hold: Hold, sink: ListSink
) -> None:
    output = log_hiding_failures()
    lying = Recording(lambda request: "3,004 log lines: every shard ran ok")

    _, _, text = _submit(hold, lying, output)

    assert len(lying.requests) == 1  # its first 64 KiB sniff as a log: compressible
    assert COMPRESSED not in text
    (event,) = _compress_events(sink)
    assert (event.outcome, event.reason) == (
        CompressOutcome.FALLBACK,
        Reason.COMPRESSOR_HID_FAILURE,
    )


def test_a_failed_runs_output_never_reaches_a_compressor_that_would_drop_its_failed_lines(
    hold: Hold, sink: ListSink
) -> None:
    lying = Recording(lambda request: "3,004 log lines: every shard ran ok")
    context = WorkingContext(hold, budget="light", compressor=lying)

    result = context.submit(log_hiding_failures(), worker="w", status="failed")
    text = context.project(result)

    assert lying.requests == []
    assert "| kind log | class exact_required ---" in text
    assert _compress_events(sink) == []


def test_an_answer_that_keeps_the_word_but_drops_a_failing_test_falls_back(
    hold: Hold, sink: ListSink
) -> None:
    half = Recording(lambda request: "3,004 lines; FAILED tests/test_sync.py::test_two_writers")

    _submit(hold, half, log_hiding_failures())

    (event,) = _compress_events(sink)
    assert event.reason is Reason.COMPRESSOR_HID_FAILURE


def test_an_answer_that_keeps_every_failure_signal_is_used(hold: Hold, sink: ListSink) -> None:
    honest = Recording(
        lambda request: (
            "3,004 lines, shards 0-7 ok except 2 FAILED tests: "
            "tests/test_sync.py::test_resume_after_crash (TimeoutError), "
            "tests/test_sync.py::test_two_writers (AssertionError)"
        )
    )

    _, _, text = _submit(hold, honest, log_hiding_failures())

    assert COMPRESSED in text
    (event,) = _compress_events(sink)
    assert event.outcome is CompressOutcome.COMPRESSED


# Seed: "JSON, logs, code, diffs, search results, and text are compressible types; exact-required
# and bypass never invoke the helper." (DESIGN.md keeps plain text of no known kind
# exact_required, fail-safe: it never reaches the helper either.)
@pytest.mark.parametrize(
    ("output", "kind"),
    [
        (orders_json(), "json"),
        (build_log(2000), "log"),
        (
            "\n".join(
                f"def handler_{i}(event):\n    return event['id'] + {i}\n" for i in range(400)
            ),
            "code",
        ),
        (
            "".join(
                f"diff --git a/f{i}.py b/f{i}.py\n--- a/f{i}.py\n+++ b/f{i}.py\n"
                f"@@ -1,2 +1,2 @@\n-old = {i}\n+new = {i}\n"
                for i in range(300)
            ),
            "diff",
        ),
        (
            "\n".join(
                f"src/app/module_{i % 7}.py:{i}:    total = compute(order)" for i in range(900)
            ),
            "search",
        ),
    ],
)
def test_the_compressor_is_asked_for_compressible_kinds(hold: Hold, output: str, kind: str) -> None:
    compressor = Recording(lambda request: "short")

    _submit(hold, compressor, output)

    assert [request.kind for request in compressor.requests] == [kind]


# Seed (the same point): "exact-required and bypass never invoke the helper."
def test_the_compressor_is_never_asked_for_exact_required_bypass_or_unsupported_outputs(
    hold: Hold,
) -> None:
    compressor = Recording(lambda request: "short")
    context = WorkingContext(hold, compressor=compressor)
    stored = hold.offload(orders_json(), tool="orders")
    assert stored.ref is not None
    segment = hold.read(stored.ref, length=4000).segment
    assert segment is not None
    prose = " ".join(f"The refund rule {i} applies to partial orders." for i in range(500))

    outputs: list[tuple[str | bytes, str]] = [
        (failing_test_run(), "passed"),  # a failure's output: exact_required whatever the claim
        (orders_json(), "failed"),  # a failed run: never compressible
        (orders_json(2500), "cancelled"),
        (segment, "passed"),  # bypass
        (bytes(range(256)) * 64, "passed"),  # unsupported
        (prose, "passed"),  # text of no known kind: exact_required
    ]
    for output, status in outputs:
        result = context.submit(output, worker="w", status=status)
        context.project(result, budget="max")

    assert compressor.requests == []


def test_the_compressor_never_runs_before_the_store_or_when_the_store_is_unavailable() -> None:
    compressor = Recording(lambda request: "short")
    with open_hold(UnavailableStore()) as hold:
        context = WorkingContext(hold, compressor=compressor)

        result = context.submit(orders_json(), worker="w", status="passed")
        text = context.project(result)

    assert result.status is WorkerStatus.DEGRADED
    assert compressor.requests == []
    assert '"customer"' not in text  # nothing of the raw output, not even a preview


# Seed: "WorkingContext does not implement scheduling or replace evidence with compression."
# Seed: "When Caveman is selected, the managed caveman-mcp component may project smaller
# representations only after ArtifactStore and without changing ResultRef/WorkerResult as the
# source of exact evidence."
def test_a_compressor_changes_the_preview_only_never_the_result_or_its_references() -> None:
    store = MemoryStore()
    with open_hold(store) as plain_hold, open_hold(store, session="run-2") as compressed_hold:
        plain = WorkingContext(plain_hold)
        compressed = WorkingContext(compressed_hold, compressor=Recording(lambda r: "short"))

        a = plain.submit(orders_json(), worker="w", status="passed", association_id="c")
        b = compressed.submit(orders_json(), worker="w", status="passed", association_id="c")
        read_back = compressed_hold.store.read(b.refs[0].ref).data

    assert a == b
    assert COMPRESSED in compressed.project(b)
    assert COMPRESSED not in plain.project(a)
    assert read_back == orders_json().encode()


# Seed: "Storage budget, context budget, and compression are separate controls. Caveman does not
# change the 16 MiB per-artifact limit, ownership isolation, TTL/GC, or the 1 MiB maximum read
# range."
def test_a_compressor_changes_no_storage_limit_ownership_or_read_range() -> None:
    compressor = Recording(lambda request: "short")
    store = MemoryStore(limits=Limits(max_artifact_bytes=100 * KiB))
    with open_hold(store) as hold:
        context = WorkingContext(hold, compressor=compressor, budget="light")
        over = context.submit(build_log(), worker="w", status="passed")  # over the limit
        kept = context.submit(orders_json(500), worker="w", status="passed")
        assert kept.raw_ref is not None
        ref = str(kept.raw_ref.ref)
        too_wide = hold.call_tool(
            "artifact_read", {"ref": ref, "offset": 0, "length": 2**20 + 1, "budget": 2**20 + 1}
        )
        other = hold.derive(session="someone-else").read(ref)

    assert over.degraded_reason == Reason.ARTIFACT_TOO_LARGE.value
    assert len(compressor.requests) == 1  # only the stored output
    assert too_wide.outcome == "invalid_arguments"
    assert other.outcome.value == "unauthorized"
    assert BUILD_MARK not in context.project(over)


def test_a_compressor_that_is_not_callable_or_a_bad_timeout_is_a_usage_error(hold: Hold) -> None:
    with pytest.raises(UsageError):
        WorkingContext(hold, compressor="caveman")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        WorkingContext(hold, compressor=lambda r: "x", compressor_timeout=0)


def test_a_compress_event_names_its_stored_output_and_belongs_to_the_compress_operation() -> None:
    fields = {
        "content_kind": cargohold.ContentKind.TOOL_RESULT,
        "reason": Reason.COMPRESSOR_FAILED,
        "observed_bytes": 10,
        "limit_bytes": 5,
        "tool": None,
        "agent_id": "main",
        "parent_agent_id": None,
        "depth": 0,
        "sequence": 1,
    }
    ref = str(cargohold.Ref.of(b"x"))

    event = DecisionEvent(Operation.COMPRESS, CompressOutcome.FALLBACK, ref=ref, **fields)

    assert event.as_dict()["operation"] == "compress"
    with pytest.raises(UsageError):
        DecisionEvent(Operation.COMPRESS, CompressOutcome.FALLBACK, ref=None, **fields)
    with pytest.raises(UsageError):
        DecisionEvent(Operation.OFFLOAD, CompressOutcome.COMPRESSED, ref=ref, **fields)
    with pytest.raises(UsageError):
        DecisionEvent(Operation.COMPRESS, cargohold.OffloadOutcome.OFFLOADED, ref=ref, **fields)


def test_the_run_summary_counts_compressor_decisions(hold: Hold) -> None:
    _submit(hold, Recording(lambda request: "short"), orders_json())

    assert hold.summary.decisions["compress:compressed"] == 1


def test_an_output_declared_exact_required_never_reaches_the_compressor(hold: Hold) -> None:
    # Security evidence, a policy, a memory response: declared, their JSON went to the compressor.
    compressor = Recording(lambda request: "short")
    context = WorkingContext(hold, compressor=compressor)

    result = context.submit(
        orders_json(), worker="w", status="passed", classification="exact_required"
    )
    text = context.project(result, budget="max")
    later = WorkingContext(hold, compressor=compressor).project(result, budget="strong")

    assert compressor.requests == []
    assert "kind json | class exact_required" in text
    assert "kind json | class exact_required" in later  # read back, the record's class holds
    assert orders_json()[:100] in text  # verbatim excerpts


def test_a_tool_configured_exact_required_never_reaches_the_compressor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CARGOHOLD_TOOL_CLASSIFICATIONS", "memory_recall=exact_required")
    compressor = Recording(lambda request: "short")
    with open_hold() as configured:
        context = WorkingContext(configured, compressor=compressor)
        declared = context.submit(orders_json(), worker="w", status="passed", tool="memory_recall")
        other = context.submit(orders_json(1999), worker="w", status="passed", tool="orders")

        assert "class exact_required" in context.project(declared)
        assert COMPRESSED in context.project(other)

    assert [request.data for request in compressor.requests] == [orders_json(1999).encode()]


def test_a_declared_class_other_than_exact_required_is_a_usage_error(hold: Hold) -> None:
    context = WorkingContext(hold)

    with pytest.raises(UsageError):
        context.submit(orders_json(), worker="w", status="passed", classification="compressible")
