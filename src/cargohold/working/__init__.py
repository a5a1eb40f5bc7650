"""The working context: bounded worker results with exact evidence behind references.

When a primary agent delegates to workers (sub-agents, coding workers, test runners), each
worker's complete output is stored exactly, before anything else; the primary gets a bounded,
typed :class:`WorkerResult` (status, summary, findings, visible errors, references with their
evidence role and the call they came from, an advisory :class:`StateDelta`) and a projection of
it that fits a budget profile. Worker reports are untrusted input; the primary alone
consolidates. A :class:`Checkpoint` carries metadata and references only, so a new primary in
another process restores it and reads the same evidence without a byte written twice. An
optional compressor may shorten previews of compressible outputs, and falls back to the
deterministic projector whenever it fails.

Quick start::

    import cargohold
    from cargohold.working import WorkingContext

    with cargohold.open(session="run-1") as hold:
        context = WorkingContext(hold, budget="light")
        result = context.submit(log_text, worker="tester", status="failed",
                                association_id="call-7",
                                report={"errors": [{"kind": "test", "message": "2 failed"}]})
        print(context.project(result))        # what the primary's model sees, <= 4 KiB
        handoff = context.checkpoint().to_json()
    # another process, the same store:
    #   context = WorkingContext.restore(hold, handoff)
"""

from cargohold.working._checkpoint import (
    FORMAT,
    MAX_CHECKPOINT_BYTES,
    MAX_RESULTS,
    STATE_MAX,
    Checkpoint,
    CheckpointError,
)
from cargohold.working._compress import DEFAULT_TIMEOUT, CompressionRequest, Compressor
from cargohold.working._context import WorkingContext
from cargohold.working._result import (
    CHANGES_MAX,
    ERROR_MESSAGE_MAX_BYTES,
    ERRORS_MAX,
    FINDING_MAX_BYTES,
    FINDINGS_MAX,
    REPORT_MAX_BYTES,
    REPORT_REFS_MAX,
    SUMMARY_MAX_BYTES,
    VALUE_MAX_BYTES,
    ChangeOp,
    ErrorKind,
    EvidenceRole,
    ResultRef,
    Scalar,
    StateChange,
    StateDelta,
    WorkerError,
    WorkerReport,
    WorkerResult,
    WorkerResultError,
    WorkerStatus,
)

__all__ = [
    "CHANGES_MAX",
    "DEFAULT_TIMEOUT",
    "ERRORS_MAX",
    "ERROR_MESSAGE_MAX_BYTES",
    "FINDINGS_MAX",
    "FINDING_MAX_BYTES",
    "FORMAT",
    "MAX_CHECKPOINT_BYTES",
    "MAX_RESULTS",
    "REPORT_MAX_BYTES",
    "REPORT_REFS_MAX",
    "STATE_MAX",
    "SUMMARY_MAX_BYTES",
    "VALUE_MAX_BYTES",
    "ChangeOp",
    "Checkpoint",
    "CheckpointError",
    "CompressionRequest",
    "Compressor",
    "ErrorKind",
    "EvidenceRole",
    "ResultRef",
    "Scalar",
    "StateChange",
    "StateDelta",
    "WorkerError",
    "WorkerReport",
    "WorkerResult",
    "WorkerResultError",
    "WorkerStatus",
    "WorkingContext",
]
