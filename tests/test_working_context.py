"""The working context: workers' exact outputs stored first, bounded results, visible failures,
association ids, degraded mode, and the seed's acceptance points for this part (each quoted from
seeds/001_09151c99e5d66e73.txt above the test that names it)."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import cargohold
import cargohold.working._context as context_module
from cargohold import (
    Budget,
    Hold,
    Limits,
    ListSink,
    MemoryStore,
    OffloadOutcome,
    Operation,
    Reason,
    UsageError,
)
from cargohold.working import (
    ERRORS_MAX,
    FINDINGS_MAX,
    REPORT_REFS_MAX,
    ChangeOp,
    ErrorKind,
    EvidenceRole,
    StateChange,
    StateDelta,
    WorkerError,
    WorkerReport,
    WorkerResult,
    WorkerStatus,
    WorkingContext,
)
from working_fixtures import (
    BUILD_MARK,
    TEST_MARK,
    KiB,
    UnavailableStore,
    build_log,
    failing_test_run,
    open_hold,
    orders_json,
)

SNAPSHOTS = Path(__file__).parent / "snapshots" / "working"


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


@pytest.fixture
def hold(sink: ListSink) -> Iterator[Hold]:
    with open_hold(sinks=[sink]) as opened:
        yield opened


@pytest.fixture
def context(hold: Hold) -> WorkingContext:
    return WorkingContext(hold, budget="light")


def _read_whole(hold: Hold, result: WorkerResult) -> bytes:
    raw = result.raw_ref
    assert raw is not None
    answer = hold.store.read(raw.ref)
    assert answer.ok
    assert answer.data is not None
    return answer.data


# -- statuses ---------------------------------------------------------------------------------


def test_a_passed_run_is_passed_with_its_exact_output_as_raw_output_evidence(
    hold: Hold, context: WorkingContext
) -> None:
    output = build_log()

    result = context.submit(output, worker="builder", status="passed", association_id="call-1")

    assert result.status is WorkerStatus.PASSED
    assert result.ok
    assert result.errors == ()
    raw = result.raw_ref
    assert raw is not None
    assert raw.role is EvidenceRole.RAW_OUTPUT
    assert raw.size == len(output.encode())
    assert _read_whole(hold, result) == output.encode()


@pytest.mark.parametrize("status", [WorkerStatus.FAILED, WorkerStatus.CANCELLED])
def test_a_failed_or_cancelled_run_keeps_its_status_on_the_first_line(
    context: WorkingContext, status: WorkerStatus
) -> None:
    result = context.submit(failing_test_run(), worker="tester", status=status)

    assert result.status is status
    assert not result.ok
    first = context.project(result).split("\n", 1)[0]
    assert first.startswith("[cargohold:worker-result] #1 worker tester")
    assert f"status {status.value}" in first


@pytest.mark.parametrize(
    ("harness", "claim", "expected"),
    [
        ("passed", "failed", WorkerStatus.FAILED),
        ("passed", "cancelled", WorkerStatus.CANCELLED),
        ("failed", "passed", WorkerStatus.FAILED),
        ("cancelled", "passed", WorkerStatus.CANCELLED),
        ("cancelled", "failed", WorkerStatus.FAILED),
    ],
)
def test_a_report_can_make_a_status_worse_but_never_better(
    context: WorkingContext, harness: str, claim: str, expected: WorkerStatus
) -> None:
    result = context.submit("output", worker="w", status=harness, report={"status": claim})

    assert result.status is expected


def test_a_passed_claim_that_lists_errors_is_failed(context: WorkingContext) -> None:
    report = {"status": "passed", "errors": [{"kind": "build", "message": "linker warning"}]}

    result = context.submit("output", worker="w", status="passed", report=report)

    assert result.status is WorkerStatus.FAILED
    assert [error.kind for error in result.errors] == [ErrorKind.BUILD]


def test_a_passed_claim_whose_only_errors_are_cancellations_is_cancelled(
    context: WorkingContext,
) -> None:
    report = {"errors": [{"kind": "cancellation", "message": "stopped by the primary"}]}

    result = context.submit("output", worker="w", status="passed", report=report)

    assert result.status is WorkerStatus.CANCELLED


def test_an_empty_output_stores_nothing_and_says_so(context: WorkingContext) -> None:
    result = context.submit("", worker="w", status="passed")

    assert result.raw_ref is None
    assert result.status is WorkerStatus.PASSED
    assert "- raw_output: none (the worker's output was empty)" in context.project(result)


def test_harness_mistakes_are_usage_errors_and_store_nothing(hold: Hold) -> None:
    context = WorkingContext(hold)

    with pytest.raises(UsageError):
        context.submit("x", worker="bad worker id", status="passed")
    with pytest.raises(UsageError):
        context.submit("x", worker="w", status="degraded")  # the context's verdict alone
    with pytest.raises(UsageError):
        context.submit("x", worker="w", status="exploded")
    with pytest.raises(UsageError):
        context.submit(["x"], worker="w", status="passed")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        context.submit("x", worker="w", status="passed", association_id="call 1")
    assert hold.store.artifacts() == []
    assert context.results == ()


# -- degraded ---------------------------------------------------------------------------------


# Seed: "If the store is unavailable, IVOAI returns WorkingContext as degraded and does not use
# raw output as a prompt fallback. This may lose the exact evidence from that execution, but
# never causes silent, unbounded injection."
def test_store_unavailable_marks_the_result_degraded_and_never_uses_the_raw_output() -> None:
    store = UnavailableStore()
    sink = ListSink()
    with open_hold(store, sinks=[sink]) as hold:
        context = WorkingContext(hold, budget="light")
        output = failing_test_run()
        report = {"summary": "1 test failed", "errors": [{"kind": "test", "message": "refund"}]}

        result = context.submit(output, worker="tester", status="failed", report=report)
        text = context.project(result)

    assert store.put_calls == 1
    assert result.status is WorkerStatus.DEGRADED
    assert result.reported_status is WorkerStatus.FAILED  # the failure stays visible
    assert result.degraded_reason == Reason.STORE_UNAVAILABLE.value
    assert result.raw_ref is None
    assert [e.kind for e in result.errors] == [ErrorKind.TEST, ErrorKind.EVIDENCE]
    assert "status degraded (run failed)" in text
    assert "degraded (store_unavailable): the worker's exact output was not stored" in text
    assert TEST_MARK not in text
    assert "assert refund(order, 5)" not in text
    assert "evidence preview" not in text
    assert len(text.encode()) <= Budget.LIGHT
    (event,) = sink.events
    assert event.outcome is OffloadOutcome.FAILED
    assert event.ref is None


def test_degraded_with_references_that_cannot_be_checked_keeps_none_of_them() -> None:
    inner = MemoryStore()
    with open_hold(inner) as healthy:
        stored = healthy.offload(build_log(3000), tool="worker-tool")
    assert stored.ref is not None
    with open_hold(UnavailableStore(inner, stat_fails=True)) as hold:
        context = WorkingContext(hold)
        report = {"summary": "built", "refs": [{"ref": str(stored.ref), "role": "log"}]}

        result = context.submit("short output", worker="w", status="passed", report=report)

    assert result.status is WorkerStatus.DEGRADED
    assert result.refs == ()
    assert result.summary == "built"
    assert result.errors[-1].kind is ErrorKind.EVIDENCE


# Seed: "Content classified as secret, credential, or raw_auth is not accepted in the general
# store. internal and restricted content is private and never enters observability as a body."
def test_an_output_holding_a_credential_is_redacted_and_a_refused_sensitivity_degraded(
    context: WorkingContext, sink: ListSink
) -> None:
    key = "AKIA" + "Z7Q4B2N8X5C1V3M6"  # an AWS access key id shape
    leaking = build_log(200) + f"\nexport AWS_ACCESS_KEY_ID={key}\n"

    credential = context.submit(leaking, worker="w1", status="passed")
    secret = context.submit("a secret value", worker="w2", status="passed", sensitivity="secret")
    restricted = context.submit(
        build_log(200), worker="w3", status="passed", sensitivity="restricted"
    )

    # The redact policy (the default) stores the output with the key replaced by a marker:
    # the evidence is kept, the key is not, and what is recorded is what was stored.
    assert credential.status is WorkerStatus.PASSED
    stored = _read_whole(context.hold, credential)
    assert stored == leaking.replace(key, "[REDACTED:aws_access_key_id]").encode()
    assert credential.raw_ref is not None
    assert credential.raw_ref.size == len(stored)
    assert key not in context.project(credential)
    assert secret.degraded_reason == Reason.SENSITIVITY.value
    assert restricted.status is WorkerStatus.PASSED
    for event in sink.events:
        assert key not in repr(event)
        assert BUILD_MARK not in repr(event.as_dict())


@pytest.mark.parametrize("budget", ["light", "balanced", "max"])
def test_a_masked_credential_never_reaches_the_projection_nor_a_restored_one(
    monkeypatch: pytest.MonkeyPatch, budget: str
) -> None:
    # The worker's tool masks credentials: its exact bytes are stored (they are evidence), but
    # the primary's model sees a preview made from a masked copy, at submit and when projected
    # again from the stored bytes.
    monkeypatch.setenv("CARGOHOLD_SECRETS_POLICY", "builder=mask")
    key = "AKIA" + "Z7Q4B2N8X5C1V3M6"  # an AWS access key id shape
    leaking = f"export AWS_ACCESS_KEY_ID={key}\n" + build_log(50)
    with open_hold() as hold:
        context = WorkingContext(hold, budget=budget)
        result = context.submit(leaking, worker="builder", status="failed")
        assert result.status is WorkerStatus.FAILED
        assert _read_whole(hold, result) == leaking.encode()  # the evidence is exact
        shown = [context.project(result, budget=b) for b in ("light", "balanced", "max")]
        restored = WorkingContext.restore(hold, context.checkpoint())
        shown.append(restored.project(restored.results[0]))
    assert all(key not in text for text in shown)
    assert "[masked" in shown[0]


def test_an_output_over_the_artifact_limit_is_degraded_not_inlined() -> None:
    store = MemoryStore(limits=Limits(max_artifact_bytes=64 * KiB))
    with open_hold(store) as hold:
        context = WorkingContext(hold, budget="max")
        output = build_log()

        result = context.submit(output, worker="w", status="passed")
        text = context.project(result)

    assert result.degraded_reason == Reason.ARTIFACT_TOO_LARGE.value
    assert BUILD_MARK not in text
    assert len(text.encode()) <= Budget.MAX


# -- failure visibility -----------------------------------------------------------------------


def _maximal_report(kind: str, *, refs: list[dict[str, str]] | None = None) -> dict[str, object]:
    """A report at every bound, whose one failure of ``kind`` sits last among 16 errors."""
    return {
        "summary": "s" * 2048,
        "findings": [f"finding {i} " + "f" * 500 for i in range(FINDINGS_MAX)],
        "errors": [
            *({"kind": "worker", "message": f"noise {i} " + "n" * 490} for i in range(15)),
            {"kind": kind, "message": f"{kind} failure: see the output " + "m" * 450},
        ][:ERRORS_MAX],
        "refs": refs or [],
        "state_delta": {
            "changes": [{"op": "set", "key": f"key-{i}", "value": "v" * 256} for i in range(16)]
        },
    }


# Seed: "Worker, test, build, security, and cancellation failures remain explicit in the bounded
# result; complete detail remains retrievable through the reference."
@pytest.mark.parametrize("kind", ["worker", "test", "build", "security", "cancellation", "timeout"])
def test_every_kind_of_failure_stays_explicit_in_the_smallest_projection_and_its_detail_by_ref(
    hold: Hold, context: WorkingContext, kind: str
) -> None:
    output = failing_test_run()

    result = context.submit(output, worker="w", status="failed", report=_maximal_report(kind))
    text = context.project(result)

    assert len(text.encode()) <= Budget.LIGHT
    counts = text.split("\n")[1]
    assert counts.startswith("errors: 16 (")
    assert f"{kind} " in counts
    assert kind in {error.kind.value for error in result.errors}
    raw = result.raw_ref
    assert raw is not None
    detail = hold.grep(raw.ref, TEST_MARK)
    assert detail.ok
    assert detail.content is not None
    assert "AssertionError: assert 4 == 5" in detail.content


def test_what_did_not_fit_is_counted_not_silently_dropped(context: WorkingContext) -> None:
    result = context.submit(
        failing_test_run(), worker="w", status="failed", report=_maximal_report("test")
    )

    text = context.project(result)

    (note,) = [line for line in text.split("\n") if line.startswith("not shown for room: ")]
    assert "findings" in note
    assert "errors" in note


# -- bounds -----------------------------------------------------------------------------------


# Seed: "The storage budget preserves evidence; the context budget limits only the automatic
# projection sent to the primary. Current budgets are 4 KiB (LIGHT), 8 KiB (BALANCED), 12 KiB
# (STRONG), and 16 KiB (MAX)."
@pytest.mark.parametrize("budget", list(Budget), ids=lambda b: b.label)
def test_each_budget_profile_bounds_the_projection_and_never_the_stored_evidence(
    hold: Hold, budget: Budget
) -> None:
    context = WorkingContext(hold, budget=budget)
    helper = context.worker_hold("w")
    refs = []
    for i in range(REPORT_REFS_MAX):
        stored = helper.offload(f"evidence {i} " * 5000, tool="t")
        assert stored.ref is not None
        refs.append({"ref": str(stored.ref), "role": "log", "association_id": "a" * 100 + str(i)})
    output = build_log()

    result = context.submit(
        output, worker="w", status="failed", report=_maximal_report("test", refs=refs)
    )
    text = context.project(result)

    assert len(text.encode()) <= budget
    assert context.budget is budget
    assert _read_whole(hold, result) == output.encode()
    assert len(result.refs) == REPORT_REFS_MAX + 1


def test_larger_budgets_show_more_and_the_smallest_still_names_the_output(
    context: WorkingContext,
) -> None:
    result = context.submit(
        failing_test_run(), worker="w", status="failed", report=_maximal_report("test")
    )

    sizes = [len(context.project(result, budget=b).encode()) for b in Budget]

    assert sizes == sorted(sizes)
    raw = result.raw_ref
    assert raw is not None
    for budget in Budget:
        assert str(raw.ref) in context.project(result, budget=budget)


def test_the_projection_is_deterministic_for_the_same_bytes_and_budget(hold: Hold) -> None:
    first = WorkingContext(hold, budget="balanced")
    second = WorkingContext(hold, budget="balanced")

    a = first.submit(failing_test_run(), worker="w", status="failed", association_id="c1")
    b = second.submit(failing_test_run(), worker="w", status="failed", association_id="c1")

    assert a == b
    assert first.project(a) == second.project(b)


def test_a_failing_run_at_light_matches_its_reviewed_snapshot(context: WorkingContext) -> None:
    report = {
        "summary": "1 of 401 tests failed in the refunds module.",
        "findings": ["refund rounds down on partial amounts"],
        "errors": [{"kind": "test", "message": "test_partial_refund failed in test_refunds.py"}],
        "state_delta": {"changes": [{"op": "set", "key": "tests", "value": "green"}]},
    }
    result = context.submit(
        failing_test_run(),
        worker="tester",
        task="T-7",
        status="failed",
        association_id="call-test",
        report=report,
    )

    _check_snapshot(SNAPSHOTS / "failing_test_run.light.txt", context.project(result) + "\n")


def _check_snapshot(path: Path, actual: str) -> None:
    """Compare with the reviewed snapshot; ``CARGOHOLD_UPDATE_SNAPSHOTS=1`` rewrites it and
    fails (see tests/test_projection_corpus.py for the procedure)."""
    import os

    expected = path.read_text(encoding="utf-8") if path.is_file() else None
    if actual == expected:
        return
    if os.environ.get("CARGOHOLD_UPDATE_SNAPSHOTS") == "1" and not os.environ.get("CI"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        pytest.fail(f"snapshot {path.name} rewritten: review git diff, then run without the switch")
    assert expected is not None, f"no snapshot: run with CARGOHOLD_UPDATE_SNAPSHOTS=1 ({path.name})"
    assert actual == expected


# -- association ids --------------------------------------------------------------------------


# Seed: "An optional bounded association_id links a ResultRef to the call/result that originated
# the evidence. Distinct calls preserve distinct refs and are never merged implicitly."
def test_distinct_calls_keep_distinct_refs_each_linked_to_its_call(context: WorkingContext) -> None:
    first = context.submit(build_log(100), worker="w", status="passed", association_id="call-1")
    second = context.submit(build_log(101), worker="w", status="passed", association_id="call-2")

    assert [r.sequence for r in context.results] == [1, 2]
    assert first.raw_ref is not None
    assert second.raw_ref is not None
    assert first.raw_ref.ref != second.raw_ref.ref
    assert (first.raw_ref.association_id, second.raw_ref.association_id) == ("call-1", "call-2")


def test_identical_output_from_two_calls_is_stored_once_and_kept_as_two_entries(
    hold: Hold, context: WorkingContext, sink: ListSink
) -> None:
    output = build_log(500)

    first = context.submit(output, worker="w", status="passed", association_id="call-1")
    second = context.submit(output, worker="w", status="passed", association_id="call-2")

    assert first.raw_ref is not None
    assert second.raw_ref is not None
    assert first.raw_ref.ref == second.raw_ref.ref  # content-addressed: the same bytes
    assert first.raw_ref != second.raw_ref  # never merged: two calls, two entries
    assert len(context.results) == 2
    assert [e.outcome for e in sink.events] == [
        OffloadOutcome.OFFLOADED,
        OffloadOutcome.EXISTING_REFERENCE,
    ]
    assert hold.store.usage().objects == 1


def test_a_reports_references_keep_their_own_association_ids(context: WorkingContext) -> None:
    helper = context.worker_hold("w")
    log = helper.offload(build_log(3000), tool="run")
    assert log.ref is not None
    refs = [
        {"ref": str(log.ref), "role": "log", "association_id": "tool-call-7"},
        {"ref": str(log.ref), "role": "build_log", "association_id": "tool-call-8"},
    ]

    result = context.submit(
        "done", worker="w", status="passed", association_id="call-1", report={"refs": refs}
    )

    assert [(e.role, e.association_id) for e in result.refs] == [
        (EvidenceRole.RAW_OUTPUT, "call-1"),
        (EvidenceRole.LOG, "tool-call-7"),
        (EvidenceRole.BUILD_LOG, "tool-call-8"),
    ]
    assert result.refs[1].size == result.refs[2].size  # the store's record, not a claim


# -- the seed's other acceptance points -------------------------------------------------------


# Seed: "It preserves a worker's complete output without automatically injecting that output into
# the primary's context."
def test_the_complete_output_is_preserved_and_only_a_bounded_projection_reaches_the_primary(
    hold: Hold, context: WorkingContext
) -> None:
    output = build_log()

    result = context.submit(output, worker="builder", status="passed")
    text = context.project(result)

    assert _read_whole(hold, result) == output.encode()
    assert len(text.encode()) <= Budget.LIGHT < len(output) // 100
    assert output not in text
    hold.guard({"messages": [{"role": "tool", "content": text}]}, format="openai-chat")


# Seed: "the primary remains the sole authoritative writer and consolidator; WorkerResult and
# StateDelta are untrusted, advisory data only."
def test_a_state_delta_is_only_proposed_and_the_primary_alone_applies_it(
    context: WorkingContext,
) -> None:
    delta = {
        "changes": [{"op": "set", "key": "build", "value": "green"}, {"op": "unset", "key": "old"}]
    }
    state = {"build": "red", "old": 1, "kept": True}

    result = context.submit("ok", worker="w", status="passed", report={"state_delta": delta})
    text = context.project(result)
    applied = result.state_delta.apply(state)

    assert "proposed state changes (advisory; not applied): 2" in text
    assert state == {"build": "red", "old": 1, "kept": True}  # the primary's, untouched
    assert applied == {"build": "green", "kept": True}
    assert result.state_delta == StateDelta(
        (StateChange(ChangeOp.SET, "build", "green"), StateChange(ChangeOp.UNSET, "old"))
    )


# Seed: "ResultRef associates the reference with the evidence role. WorkerResult contains
# status, a bounded summary, bounded findings, references, important errors, and typed
# StateDelta. Long evidence is never stored inline."
def test_a_worker_result_holds_typed_bounded_fields_and_long_evidence_stays_behind_its_ref(
    context: WorkingContext,
) -> None:
    long_summary = build_log(200)  # evidence passed off as a summary

    refused = context.submit(
        build_log(), worker="w", status="passed", report={"summary": long_summary}
    )
    kept = context.submit(
        build_log(),
        worker="w",
        status="passed",
        report=WorkerReport(summary="built", findings=("ok",), errors=()),
    )

    assert refused.summary == ""
    assert refused.status is WorkerStatus.FAILED
    assert refused.errors[-1].kind is ErrorKind.INVALID_REPORT
    assert "too_large at summary" in refused.errors[-1].message
    assert isinstance(kept.status, WorkerStatus)
    assert (kept.summary, kept.findings) == ("built", ("ok",))
    assert isinstance(kept.state_delta, StateDelta)
    assert all(entry.role is EvidenceRole.RAW_OUTPUT for entry in kept.refs)


# Seed: "Exact output is persisted before structured projection."
def test_the_exact_output_is_persisted_before_any_projection_is_made(
    hold: Hold, context: WorkingContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[bool] = []
    real = context_module.make_preview

    def checking(data: bytes, ref: cargohold.Ref, **kwargs: object) -> object:
        answer = hold.store.read(ref)
        seen.append(answer.ok and answer.data == data)
        return real(data, ref, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(context_module, "make_preview", checking)

    context.submit(orders_json(), worker="w", status="passed")

    assert seen == [True]


# Seed: "Failure or cancellation always overrides a compressible suggestion."
@pytest.mark.parametrize("status", ["failed", "cancelled"])
def test_a_failed_or_cancelled_run_is_exact_required_even_when_its_output_is_compressible(
    hold: Hold, status: str
) -> None:
    calls: list[object] = []
    context = WorkingContext(hold, compressor=lambda request: calls.append(request) or "x")

    failed = context.submit(orders_json(), worker="w", status=status)
    passed = context.submit(orders_json(3000), worker="w", status="passed")

    assert "| kind json | class exact_required ---" in context.project(failed)
    assert "class compressible" not in context.project(failed)
    assert len(calls) == 1  # only for the passing run
    assert "compressed representation" in context.project(passed)


# -- events, agents, threads, async -----------------------------------------------------------


def test_each_submission_is_one_offload_event_naming_the_worker_under_the_primary(
    context: WorkingContext, sink: ListSink
) -> None:
    context.submit(build_log(), worker="builder", status="passed")
    context.submit(failing_test_run(), worker="tester", status="failed")

    assert [(e.operation, e.agent_id, e.parent_agent_id, e.depth) for e in sink.events] == [
        (Operation.OFFLOAD, "builder", "primary", 1),
        (Operation.OFFLOAD, "tester", "primary", 1),
    ]
    assert [e.sequence for e in sink.events] == sorted(e.sequence for e in sink.events)
    for event in sink.events:
        text = repr(event) + repr(event.as_dict())
        assert BUILD_MARK not in text
        assert TEST_MARK not in text


def test_the_stored_output_is_attributed_to_its_worker_and_task(
    hold: Hold, context: WorkingContext
) -> None:
    context.submit(build_log(100), worker="builder", task="T-1", status="passed")

    (record,) = hold.store.artifacts()

    assert (record.worker, record.task, record.agent) == ("builder", "T-1", "builder")


def test_a_binary_output_given_no_media_type_is_recorded_and_referenced_as_what_it_is(
    hold: Hold, context: WorkingContext
) -> None:
    pdf = b"%PDF-1.7\n" + bytes(range(256)) * 200  # a PDF's magic number, then binary bytes

    result = context.submit(pdf, worker="renderer", status="passed")

    (record,) = hold.store.artifacts()
    assert result.raw_ref is not None
    assert result.raw_ref.media_type == record.media_type == "application/pdf"
    assert (record.kind, record.classification) == ("binary (pdf)", "unsupported")


def test_workers_may_submit_from_many_threads_and_each_gets_its_own_sequence(
    context: WorkingContext,
) -> None:
    def work(n: int) -> None:
        context.submit(build_log(50 + n), worker=f"w{n}", status="passed", association_id=f"c{n}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(r.sequence for r in context.results) == [1, 2, 3, 4, 5, 6]
    assert len({r.association_id for r in context.results}) == 6


def test_the_async_twins_store_and_project_on_the_holds_pool(context: WorkingContext) -> None:
    async def main() -> tuple[WorkerResult, str]:
        result = await context.asubmit(failing_test_run(), worker="w", status="failed")
        return result, await context.aproject(result)

    result, text = asyncio.run(main())

    assert result.status is WorkerStatus.FAILED
    assert text == context.project(result)


def test_a_recovered_segment_as_output_is_bypass_never_projected(hold: Hold) -> None:
    calls: list[object] = []
    context = WorkingContext(hold, compressor=lambda request: calls.append(request) or "x")
    stored = hold.offload(orders_json(), tool="orders")
    assert stored.ref is not None
    segment = hold.read(stored.ref, length=2000).segment
    assert segment is not None

    result = context.submit(segment, worker="reader", status="passed")

    assert "(class bypass): never projected; read it by reference" in context.project(result)
    assert calls == []


def test_reprs_show_no_summary_finding_message_or_output(context: WorkingContext) -> None:
    report = {
        "summary": "cnry-summary-1",
        "findings": ["cnry-finding-2"],
        "errors": [{"kind": "test", "message": "cnry-message-3"}],
        "state_delta": {"changes": [{"op": "set", "key": "k", "value": "cnry-value-4"}]},
    }

    result = context.submit(build_log(50), worker="w", status="failed", report=report)

    shown = repr(result) + repr(context) + repr(WorkerReport.parse(report)) + repr(result.errors)
    for canary in (
        "cnry-summary-1",
        "cnry-finding-2",
        "cnry-message-3",
        "cnry-value-4",
        BUILD_MARK,
    ):
        assert canary not in shown


def test_a_worker_result_rebuilds_from_its_data_and_refuses_inconsistent_ones(
    context: WorkingContext,
) -> None:
    result = context.submit(build_log(50), worker="w", status="failed", association_id="c")
    data = result.as_dict()

    assert WorkerResult.from_dict(data) == result
    with pytest.raises(cargohold.WorkerResultError):
        WorkerResult.from_dict({**data, "status": "degraded"})  # degraded needs its reason
    with pytest.raises(cargohold.WorkerResultError):
        WorkerResult.from_dict({**data, "status": "passed"})  # not what the run came to
    with pytest.raises(cargohold.WorkerResultError):
        WorkerError(ErrorKind.TEST, "x" * 513)


def test_hashes_of_evidence_match_their_refs(hold: Hold, context: WorkingContext) -> None:
    result = context.submit(failing_test_run(), worker="w", status="failed")

    raw = result.raw_ref
    assert raw is not None
    assert hashlib.sha256(_read_whole(hold, result)).hexdigest() == raw.ref.digest


# Seed: "Each projection receives a provider-neutral class: compressible, exact_required, bypass,
# or unsupported. Classification is deterministic and fail-safe. [...] errors, stack traces,
# test/build failures [...] are exact_required; unknown types also favor fidelity."
def test_each_output_is_projected_under_its_class_and_failures_and_unknown_text_stay_exact(
    hold: Hold,
) -> None:
    context = WorkingContext(hold, budget="balanced")
    stored = hold.offload(orders_json(), tool="orders")
    assert stored.ref is not None
    segment = hold.read(stored.ref, length=2000).segment
    assert segment is not None
    traceback = "Traceback (most recent call last):\n" + '  File "a.py", line 1\n' * 400
    prose = " ".join(f"Clause {i} of the refund policy applies." for i in range(400))
    cases = [
        (build_log(2000), "kind log | class compressible"),
        (failing_test_run(), "kind failure | class exact_required"),
        (traceback + "ValueError: bad refund\n", "kind failure | class exact_required"),
        (prose, "kind text | class exact_required"),
        (bytes(range(256)) * 40, "kind binary | class unsupported"),
        (segment, "(class bypass): never projected"),
    ]

    for output, expected in cases:
        result = context.submit(output, worker="w", status="passed")
        assert expected in context.project(result)
        assert context.project(result) == context.project(result, budget="balanced")


# Seed: "A read revalidates session, integrity, TTL, and limits; a reference never becomes
# arbitrary file read."
def test_a_projection_made_after_the_bytes_changed_on_disk_shows_nothing_of_them() -> None:
    store = MemoryStore()
    with open_hold(store) as hold:
        context = WorkingContext(hold, budget="light")
        result = context.submit(failing_test_run(), worker="w", status="failed")
        raw = result.raw_ref
        assert raw is not None
        store.corrupt_for_tests("acme", raw.ref, offset=100)

        text = context.project(result, budget="max")  # not cached: read back, verified

    assert "evidence preview unavailable: the output reads as stale" in text
    assert TEST_MARK not in text
    assert context.availability(raw.ref) is cargohold.ReadOutcome.STALE
