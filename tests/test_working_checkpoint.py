"""Checkpoints and handoff: metadata and references only, bound to the store's key, restored by
a new primary (in another process too) that reads the same evidence without writing a byte."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from cargohold import Budget, Hold, MemoryStore, ReadOutcome, UsageError
from cargohold.testing import FakeClock
from cargohold.working import (
    FORMAT,
    MAX_CHECKPOINT_BYTES,
    Checkpoint,
    CheckpointError,
    WorkerStatus,
    WorkingContext,
)
from working_fixtures import (
    BUILD_MARK,
    TEST_MARK,
    UnavailableStore,
    build_log,
    failing_test_run,
    open_hold,
    orders_json,
)

DISTINCTIVE = (
    BUILD_MARK,
    TEST_MARK,
    "compiled module_",
    "INFO build step",
    "assert refund(order, 5) == 5",
    "test_order_case_17 PASSED",
    '"customer"',
    "c-00042",
)
"""Strings that only the workers' outputs hold: none may be in a checkpoint."""


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def hold(store: MemoryStore) -> Iterator[Hold]:
    with open_hold(store) as opened:
        yield opened


def _delegate(context: WorkingContext) -> None:
    """Three workers: one passes with a huge log and a JSON file of its own, one fails a test
    run, one is cancelled with a JSON output."""
    helper = context.worker_hold("builder")
    data = helper.offload(orders_json(), tool="export", media_type="application/json")
    assert data.ref is not None
    context.submit(
        build_log(),
        worker="builder",
        status="passed",
        association_id="call-1",
        report={
            "summary": "97 modules built",
            "refs": [{"ref": str(data.ref), "role": "data", "association_id": "call-1b"}],
            "state_delta": {"changes": [{"op": "set", "key": "build", "value": "green"}]},
        },
    )
    context.submit(
        failing_test_run(),
        worker="tester",
        status="failed",
        association_id="call-2",
        report={"errors": [{"kind": "test", "message": "test_partial_refund failed"}]},
    )
    context.submit(orders_json(300), worker="exporter", status="cancelled", association_id="call-3")


# Seed: "Session, checkpoint, SharedContextBrief, handoff, and automatic instructions persist or
# carry only bounded metadata and ResultRefs."
def test_a_checkpoint_carries_metadata_and_references_and_no_byte_of_any_output(
    hold: Hold,
) -> None:
    context = WorkingContext(hold)
    _delegate(context)

    checkpoint = context.checkpoint(state={"build": "green", "blocked_by": "tester"})
    brief = context.brief()

    for text in DISTINCTIVE:
        assert text.encode() not in checkpoint.data
        assert text not in brief
    document = json.loads(checkpoint.data)
    assert set(document) == {"checkpoint", "mac"}
    assert document["checkpoint"]["format"] == FORMAT
    assert [r["status"] for r in document["checkpoint"]["results"]] == [
        "passed",
        "failed",
        "cancelled",
    ]
    named = {entry.ref for result in context.results for entry in result.refs}
    assert set(checkpoint.refs) == named
    assert len(checkpoint.data) < 4096  # for 2 MB of evidence
    assert "Checkpoint(3 results" in repr(checkpoint)
    assert "97 modules" not in repr(checkpoint)


def test_a_checkpoint_is_canonical_and_parses_back_to_the_same_bytes(hold: Hold) -> None:
    context = WorkingContext(hold, budget="strong")
    _delegate(context)
    key = hold.store.marker_key()

    first = context.checkpoint(state={"build": "green"})
    second = context.checkpoint(state={"build": "green"})
    parsed = Checkpoint.parse(first.to_json(), key=key)

    assert first.data == second.data
    assert parsed == first
    assert parsed.results == context.results
    assert parsed.budget is Budget.STRONG
    assert dict(parsed.state) == {"build": "green"}
    body = json.loads(first.data)["checkpoint"]
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical.encode() in first.data


# Seed: "During a Codex/Claude handoff, the new primary rehydrates the same references without
# duplicating raw output."
def test_a_restored_context_rehydrates_the_same_references_without_writing_a_byte(
    store: MemoryStore, hold: Hold
) -> None:
    original = WorkingContext(hold, budget="light")
    _delegate(original)
    handoff = original.checkpoint().to_json()
    usage = store.store_usage()
    artifacts = len(hold.store.artifacts())

    with open_hold(store, agent="primary-2") as new_hold:
        restored = WorkingContext.restore(new_hold, handoff)
        projections = [restored.project(result) for result in restored.results]
        raw = restored.results[1].raw_ref
        assert raw is not None
        evidence = new_hold.grep(raw.ref, "^FAILED ")

    assert restored.results == original.results
    assert projections == [original.project(result) for result in original.results]
    assert evidence.ok
    assert "tests/test_refunds.py::test_partial_refund" in (evidence.content or "")
    assert store.store_usage() == usage
    assert len(hold.store.artifacts()) == artifacts
    for ref in Checkpoint.parse(handoff, key=store.marker_key()).refs:
        assert restored.availability(ref) is ReadOutcome.RESOLVED


_NEW_PRIMARY = textwrap.dedent(
    """
    import hashlib, json, sys
    import cargohold
    from cargohold.working import WorkingContext

    store, checkpoint = sys.argv[1], open(sys.argv[2], "rb").read()
    with cargohold.open(store, tenant="acme", user="ana", session="run-1", agent="p2") as hold:
        before = hold.store.store.store_usage()
        context = WorkingContext.restore(hold, checkpoint)
        digests = []
        for result in context.results:
            for entry in result.refs:
                data = hold.store.read(entry.ref).data
                digests.append(hashlib.sha256(data).hexdigest() == entry.ref.digest)
        after = hold.store.store.store_usage()
        print(json.dumps({
            "statuses": [r.status.value for r in context.results],
            "digests": digests,
            "projection": context.project(context.results[1]),
            "usage": [[before.objects, before.bytes], [after.objects, after.bytes]],
        }))
    """
)


def test_a_new_primary_process_restores_the_checkpoint_and_reads_the_same_exact_bytes(
    tmp_path: Path,
) -> None:
    store_path = tmp_path / "store"
    with open_hold(store_path) as hold:
        context = WorkingContext(hold, budget="light")
        _delegate(context)
        projection = context.project(context.results[1])
        (tmp_path / "checkpoint.json").write_bytes(context.checkpoint().data)

    child = subprocess.run(
        [sys.executable, "-c", _NEW_PRIMARY, str(store_path), str(tmp_path / "checkpoint.json")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    facts = json.loads(child.stdout)

    assert facts["statuses"] == ["passed", "failed", "cancelled"]
    assert facts["digests"] == [True] * 4
    assert facts["projection"] == projection
    assert facts["usage"][0] == facts["usage"][1]


def test_an_edited_checkpoint_is_refused_whole(hold: Hold) -> None:
    context = WorkingContext(hold)
    _delegate(context)
    text = context.checkpoint().to_json()
    key = hold.store.marker_key()
    edited = text.replace('"status":"failed"', '"status":"passed"', 1).replace(
        '"reported_status":"failed"', '"reported_status":"passed"', 1
    )
    assert edited != text

    with pytest.raises(CheckpointError) as raised:
        WorkingContext.restore(hold, edited)

    assert raised.value.reason == "mac_mismatch"
    with pytest.raises(CheckpointError):
        Checkpoint.parse(text.replace("97 modules", "98 modules"), key=key)


def test_a_checkpoint_written_for_another_store_is_refused(hold: Hold) -> None:
    context = WorkingContext(hold)
    _delegate(context)
    checkpoint = context.checkpoint()

    with open_hold(MemoryStore()) as elsewhere, pytest.raises(CheckpointError) as raised:
        WorkingContext.restore(elsewhere, checkpoint)

    assert raised.value.reason == "mac_mismatch"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"not json", "not_json"),
        (b"\xff\xfe\x00", "not_json"),
        (b'{"checkpoint": {"x": 1.5}, "mac": "00"}', "not_json"),
        (b"[]", "format"),
        (b'{"checkpoint": {}, "mac": "00"}', "format"),
        (
            b'{"checkpoint": {"format": "other/1", "budget": "light", "results": [], '
            b'"state": {}}, "mac": "0"}',
            "format",
        ),
        (b" " * (MAX_CHECKPOINT_BYTES + 1), "too_large"),
    ],
)
def test_what_is_not_a_checkpoint_is_refused_with_a_reason(
    hold: Hold, data: bytes, reason: str
) -> None:
    with pytest.raises(CheckpointError) as raised:
        Checkpoint.parse(data, key=hold.store.marker_key())

    assert raised.value.reason == reason


def test_restored_in_another_session_the_evidence_reads_unauthorized_and_is_not_shown(
    store: MemoryStore, hold: Hold
) -> None:
    context = WorkingContext(hold)
    _delegate(context)
    handoff = context.checkpoint()

    with open_hold(store, session="run-other") as stranger:
        restored = WorkingContext.restore(stranger, handoff)
        text = restored.project(restored.results[1])
        raw = restored.results[1].raw_ref
        assert raw is not None

        assert restored.availability(raw.ref) is ReadOutcome.UNAUTHORIZED
        assert "unavailable: unauthorized" in text
        assert "evidence preview unavailable: the output reads as unauthorized" in text
        assert TEST_MARK not in text
        assert not stranger.read(raw.ref).ok


def test_evidence_that_expired_before_the_handoff_is_reported_expired() -> None:
    clock = FakeClock()
    store = MemoryStore(clock=clock)
    with open_hold(store) as hold:
        context = WorkingContext(hold)
        _delegate(context)
        handoff = context.checkpoint()
        clock.advance(25 * 3600)  # past the default 24 h TTL

        restored = WorkingContext.restore(hold, handoff)

        for ref in handoff.refs:
            assert restored.availability(ref) is ReadOutcome.EXPIRED
        assert "unavailable: expired" in restored.project(restored.results[0])


def test_a_restored_context_continues_the_sequence_and_the_degraded_stay_degraded(
    store: MemoryStore,
) -> None:
    with open_hold(UnavailableStore(store)) as failing:
        degraded = WorkingContext(failing)
        degraded.submit(failing_test_run(), worker="tester", status="failed")
        handoff = degraded.checkpoint()

    with open_hold(store) as hold:
        restored = WorkingContext.restore(hold, handoff)
        added = restored.submit("ok", worker="w", status="passed")

    assert restored.results[0].status is WorkerStatus.DEGRADED
    assert restored.results[0].reported_status is WorkerStatus.FAILED
    assert added.sequence == 2


def test_the_primarys_state_in_a_checkpoint_is_bounded(hold: Hold) -> None:
    context = WorkingContext(hold)

    with pytest.raises(UsageError):
        context.checkpoint(state={f"k{i}": i for i in range(257)})
    with pytest.raises(UsageError):
        context.checkpoint(state={"ratio": 0.5})  # type: ignore[dict-item]
    with pytest.raises(UsageError):
        context.checkpoint(state={"bad key": 1})


def test_the_brief_keeps_every_failure_when_room_runs_short(hold: Hold) -> None:
    context = WorkingContext(hold, budget="light")
    for n in range(40):
        context.submit(f"output {n}", worker=f"w{n}", status="passed", association_id=f"c{n}")
    context.submit(failing_test_run(), worker="tester", status="failed", association_id="late")

    brief = context.brief()

    assert len(brief.encode()) <= Budget.LIGHT
    assert "#41 tester | failed | association late | errors: none" in brief
    assert "not shown for room: " in brief
    assert brief.startswith("[cargohold:working-context] 41 worker results | 40 passed, 1 failed")
