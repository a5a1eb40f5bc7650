"""A primary delegates to two workers, consolidates, checkpoints, and a new primary takes over.

Scripted and offline; run it from a checkout::

    .venv/bin/python examples/orchestrator_handoff.py            # a fresh temporary directory
    .venv/bin/python examples/orchestrator_handoff.py WORKDIR    # or this one (kept afterwards)

1. The primary opens the embedded local store under WORKDIR and a working context for its
   session, with the LIGHT budget profile (4 KiB per worker result).
2. It delegates to two workers. The build worker passes with a huge log (about 1.8 MB) and a
   coverage file it stored itself; the test worker fails a test run.
3. Each worker's exact output is stored first; the primary's model sees only the bounded
   results (the edge guard lets them through). The primary consolidates: it accepts the passing
   worker's proposed state change and refuses the failed one's.
4. It writes a checkpoint (metadata and references only) and starts a NEW primary process
   (``--take-over``), which restores the checkpoint, reads the failed test's evidence by
   reference (grep and an exact whole read whose SHA-256 matches the reference) and checks that
   the store holds not one byte more than before.

The last line each process prints starts with ``RESULT``, followed by JSON facts (what the
tests of this example check).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import cargohold
from cargohold.working import Checkpoint, Scalar, WorkerResult, WorkingContext

OWNER = {"tenant": "acme", "user": "release-bot", "session": "release-42"}
CHECKPOINT_FILE = "checkpoint.json"


# -- the workers (scripted) -------------------------------------------------------------------


def build_log() -> str:
    """The build worker's output: 25,000 lines of a passing build, the same on every run."""
    lines = [
        f"2026-05-04T09:{i // 3600 % 60:02d}:{i // 60 % 60:02d}Z INFO build step {i} "
        f"compiled module_{i % 97}.o in {i % 13} ms"
        for i in range(25_000)
    ]
    return "\n".join([*lines, "2026-05-04T09:59:59Z INFO build finished: 97 modules, 0 errors"])


def test_log() -> str:
    """The test worker's output: a pytest run with one failure."""
    passed = [f"tests/test_orders.py::test_order_case_{i} PASSED" for i in range(300)]
    return "\n".join(
        [
            "============================= test session starts ==============================",
            "collected 301 items",
            *passed,
            "=================================== FAILURES ===================================",
            "____________________________ test_partial_refund _____________________________",
            "    def test_partial_refund():",
            "        order = make_order(total=10)",
            ">       assert refund(order, 5) == 5",
            "E       AssertionError: assert 4 == 5",
            "E        +  where 4 = refund(<Order total=10>, 5)",
            "tests/test_refunds.py:42: AssertionError",
            "=========================== short test summary info ============================",
            "FAILED tests/test_refunds.py::test_partial_refund - AssertionError: assert 4 == 5",
            "======================== 1 failed, 300 passed in 12.48s ========================",
        ]
    )


def run_build_worker(context: WorkingContext) -> WorkerResult:
    """The build worker: passes, stores a coverage file with its own hold, reports both."""
    worker = context.worker_hold("builder", task="release-42/build")
    coverage = {"total": "81%", "files": {f"src/module_{i}.c": 60 + i % 40 for i in range(2000)}}
    stored = worker.offload(coverage, tool="coverage", media_type="application/json")
    assert stored.ref is not None
    report = {
        "summary": "Build passed: 97 modules compiled, no warnings.",
        "findings": ["incremental build reused 12 cached objects"],
        "refs": [{"ref": str(stored.ref), "role": "data", "association_id": "call-build-cov"}],
        "state_delta": {"changes": [{"op": "set", "key": "build", "value": "green"}]},
    }
    return context.submit(
        build_log(),
        worker="builder",
        task="release-42/build",
        status="passed",
        association_id="call-build",
        report=json.dumps(report),  # what a worker process would send: JSON text
    )


def run_test_worker(context: WorkingContext) -> WorkerResult:
    """The test worker: one test fails; it says so, and proposes a state change anyway."""
    report = {
        "status": "failed",
        "summary": "1 of 301 tests failed in the refunds module.",
        "errors": [{"kind": "test", "message": "test_partial_refund failed in test_refunds.py"}],
        "state_delta": {"changes": [{"op": "set", "key": "tests", "value": "green"}]},
    }
    return context.submit(
        test_log(),
        worker="tester",
        task="release-42/test",
        status="failed",  # the runner exited 1
        association_id="call-test",
        report=report,
    )


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# -- the first primary ------------------------------------------------------------------------


def primary(workdir: Path) -> dict[str, Any]:
    """Delegate, consolidate, checkpoint, hand over; the facts of the run."""
    store = workdir / "store"
    with cargohold.open(store, agent="primary", **OWNER) as hold:
        context = WorkingContext(hold, budget="light")
        results = [run_build_worker(context), run_test_worker(context)]

        print("== what the primary's model sees of each worker ==")
        projections = []
        for result in results:
            text = context.project(result)
            projections.append(text)
            raw = result.raw_ref
            size = raw.size if raw is not None and raw.size is not None else 0
            print(f"-- {result.worker}: {len(text.encode()):,} bytes instead of {size:,} --")
            print(text)
        # The edge guard agrees: nothing in these projections is raw heavy content.
        request = {
            "model": "gpt-4.1",
            "messages": [
                {"role": "tool", "tool_call_id": "call-x", "content": t} for t in projections
            ],
        }
        hold.guard(request, format="openai-chat")

        # Consolidation is the primary's alone: a passing worker's proposal is accepted, a
        # failed one's is not; failures stay visible in what is handed over.
        state: dict[str, Scalar] = {"release": "42"}
        for result in results:
            if result.ok:
                state = result.state_delta.apply(state)
        state["blocked_by"] = ",".join(r.worker for r in results if not r.ok) or None

        checkpoint = context.checkpoint(state=state)
        path = workdir / CHECKPOINT_FILE
        path.write_bytes(checkpoint.data)
        usage = hold.store.usage()
        print(
            f"== checkpoint: {len(checkpoint.data):,} bytes, {len(checkpoint.refs)} references =="
        )

    # A NEW primary process takes over from the checkpoint alone.
    child = subprocess.run(  # noqa: S603 - this very script, by its own path
        [sys.executable, __file__, "--take-over", str(workdir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    print(child.stdout, end="")
    taken = json.loads(child.stdout.strip().splitlines()[-1].removeprefix("RESULT "))
    return {
        "statuses": [r.status.value for r in results],
        "associations": [r.association_id for r in results],
        "refs": [str(entry.ref) for r in results for entry in r.refs],
        "projection_bytes": [len(t.encode()) for t in projections],
        "projections_identical": taken["projection_digests"] == [_digest(t) for t in projections],
        "state": state,
        "usage_before_handoff": [usage.objects, usage.bytes],
        "checkpoint": str(workdir / CHECKPOINT_FILE),
        "take_over": taken,
    }


# -- the new primary --------------------------------------------------------------------------


def take_over(workdir: Path) -> dict[str, Any]:
    """Restore the checkpoint in this new process and read the same evidence by reference."""
    with cargohold.open(workdir / "store", agent="primary-2", **OWNER) as hold:
        usage_before = hold.store.usage()
        data = (workdir / CHECKPOINT_FILE).read_bytes()
        context = WorkingContext.restore(hold, data)
        checkpoint = Checkpoint.parse(data, key=hold.store.marker_key())
        print("== the new primary's brief ==")
        print(context.brief())

        failed = next(r for r in context.results if not r.ok)
        raw = failed.raw_ref
        assert raw is not None
        answer = hold.call_tool("artifact_grep", {"ref": str(raw.ref), "pattern": "^FAILED "})
        print("== the failed run's evidence, by reference ==")
        print(answer.text)
        whole = hold.store.read(raw.ref)  # exact and verified against the digest
        exact = whole.data or b""
        usage_after = hold.store.usage()
        return {
            "results": len(context.results),
            "statuses": [r.status.value for r in context.results],
            "refs": [str(entry.ref) for r in context.results for entry in r.refs],
            "available": sorted(
                {str(ref): str(context.availability(ref)) for ref in checkpoint.refs}.values()
            ),
            "state": dict(checkpoint.state),
            "grep_outcome": answer.outcome,
            "grep_found": "tests/test_refunds.py::test_partial_refund" in (answer.content or ""),
            "digest_matches": hashlib.sha256(exact).hexdigest() == raw.ref.digest,
            "projection_digests": [_digest(context.project(r)) for r in context.results],
            "usage": [
                [usage_before.objects, usage_before.bytes],
                [usage_after.objects, usage_after.bytes],
            ],
        }


def main(argv: list[str]) -> int:
    if argv[:1] == ["--take-over"]:
        facts = take_over(Path(argv[1]))
    elif argv:
        facts = primary(Path(argv[0]))
    else:
        with tempfile.TemporaryDirectory(prefix="cargohold-orchestrator-") as tmp:
            facts = primary(Path(tmp))
    print("RESULT " + json.dumps(facts, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
