"""cargohold keeps heavy tool output out of an LLM agent's context window without losing a byte.

The exact bytes go to an authoritative, content-addressed, owner-scoped store; the conversation
carries a reference (``artifact://sha256/<hex>``); the bytes come back only through an explicit,
verified, budgeted read.

Quick start::

    import cargohold

    store = cargohold.open_store("memory://")          # or a path, or None for the default
    scoped = cargohold.ScopedStore(store, cargohold.Scope("acme", "ana", "run-1"))
    put = scoped.put(b"...heavy bytes...", media_type="text/csv", tool="query")
    print(put.ref)                                      # artifact://sha256/...
    data = scoped.read(put.ref, start=0, end=100).raise_for_outcome()
"""

# Public names resolve on first use (PEP 562): `import cargohold` (and so the CLI's start-up) pays
# only for what is used, and optional integrations are never imported until asked for.
import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from cargohold._config import Settings, load_settings, open_store
    from cargohold._decorator import offload_tool
    from cargohold._errors import (
        CargoholdError,
        ConfigError,
        InvalidReferenceError,
        InvalidScopeError,
        LimitExceededError,
        ReadError,
        RejectedError,
        SchemaError,
        SensitivityRefusedError,
        StoreError,
        StoreUnavailableError,
        UsageError,
    )
    from cargohold._events import (
        CompactOutcome,
        CompressOutcome,
        ContentKind,
        DecisionEvent,
        GuardOutcome,
        OffloadOutcome,
        Operation,
        Reason,
        RehydrateOutcome,
        Reporter,
        RequestOutcome,
        Sink,
        run_tag,
    )
    from cargohold._facade import ScopedStore
    from cargohold._hold import Hold, open
    from cargohold._offload import HEAVY_THRESHOLD, Offloader, OffloadResult
    from cargohold._records import (
        ArtifactRecord,
        Finding,
        GcReport,
        Limits,
        PutRequest,
        PutResult,
        ReadOutcome,
        ReadResult,
        Sensitivity,
        Usage,
    )
    from cargohold._ref import Ref
    from cargohold._rehydrate import DEFAULT_READ_BUDGET, RehydrateResult, Rehydrator
    from cargohold._scope import Scope
    from cargohold._searchanswer import SearchMatch, SearchResult
    from cargohold._secrets import SecretFinding, SecretKind, find_secrets, mask_secrets
    from cargohold._segment import SegmentInfo, parse_segment, render_segment
    from cargohold._sinks import (
        JsonLinesSink,
        ListSink,
        LoggingSink,
        OpenTelemetrySink,
        PostgresEventsSink,
        RunSummary,
        read_store_events,
    )
    from cargohold._stub import Budget, ReadTools, Stub, StubInfo, parse_stub, render_stub
    from cargohold._tokens import estimate_tokens
    from cargohold._tools import ReadToolset, ToolAnswer
    from cargohold._toolspecs import ToolSpec
    from cargohold.compact import CompactionPolicy, CompactionReport
    from cargohold.guard import (
        ContextLeakError,
        ContextWindowExceededError,
        ContextWindowUnknownError,
        DispositionRefusedError,
        Guard,
        guard_anthropic,
        guard_openai,
    )
    from cargohold.projection import ProjectionClass
    from cargohold.store import LocalStore, MemoryStore, StoreBackend
    from cargohold.working import (
        ChangeOp,
        Checkpoint,
        CheckpointError,
        CompressionRequest,
        Compressor,
        ErrorKind,
        EvidenceRole,
        ResultRef,
        StateChange,
        StateDelta,
        WorkerError,
        WorkerReport,
        WorkerResult,
        WorkerResultError,
        WorkerStatus,
        WorkingContext,
    )

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "ArtifactRecord": "cargohold._records",
    "Budget": "cargohold._stub",
    "CargoholdError": "cargohold._errors",
    "ChangeOp": "cargohold.working",
    "Checkpoint": "cargohold.working",
    "CheckpointError": "cargohold.working",
    "CompactOutcome": "cargohold._events",
    "CompactionPolicy": "cargohold.compact",
    "CompactionReport": "cargohold.compact",
    "CompressOutcome": "cargohold._events",
    "CompressionRequest": "cargohold.working",
    "Compressor": "cargohold.working",
    "ConfigError": "cargohold._errors",
    "ContentKind": "cargohold._events",
    "ContextLeakError": "cargohold.guard",
    "ContextWindowExceededError": "cargohold.guard",
    "ContextWindowUnknownError": "cargohold.guard",
    "DEFAULT_READ_BUDGET": "cargohold._rehydrate",
    "DecisionEvent": "cargohold._events",
    "DispositionRefusedError": "cargohold.guard",
    "ErrorKind": "cargohold.working",
    "EvidenceRole": "cargohold.working",
    "Finding": "cargohold._records",
    "GcReport": "cargohold._records",
    "Guard": "cargohold.guard",
    "GuardOutcome": "cargohold._events",
    "HEAVY_THRESHOLD": "cargohold._offload",
    "Hold": "cargohold._hold",
    "InvalidReferenceError": "cargohold._errors",
    "InvalidScopeError": "cargohold._errors",
    "JsonLinesSink": "cargohold._sinks",
    "LimitExceededError": "cargohold._errors",
    "Limits": "cargohold._records",
    "ListSink": "cargohold._sinks",
    "LocalStore": "cargohold.store",
    "LoggingSink": "cargohold._sinks",
    "MemoryStore": "cargohold.store",
    "OffloadOutcome": "cargohold._events",
    "OffloadResult": "cargohold._offload",
    "Offloader": "cargohold._offload",
    "OpenTelemetrySink": "cargohold._sinks",
    "Operation": "cargohold._events",
    "PostgresEventsSink": "cargohold._sinks",
    "ProjectionClass": "cargohold.projection",
    "PutRequest": "cargohold._records",
    "PutResult": "cargohold._records",
    "ReadError": "cargohold._errors",
    "ReadOutcome": "cargohold._records",
    "ReadResult": "cargohold._records",
    "ReadTools": "cargohold._stub",
    "ReadToolset": "cargohold._tools",
    "Reason": "cargohold._events",
    "Ref": "cargohold._ref",
    "RehydrateOutcome": "cargohold._events",
    "RehydrateResult": "cargohold._rehydrate",
    "Rehydrator": "cargohold._rehydrate",
    "RejectedError": "cargohold._errors",
    "Reporter": "cargohold._events",
    "RequestOutcome": "cargohold._events",
    "ResultRef": "cargohold.working",
    "RunSummary": "cargohold._sinks",
    "SchemaError": "cargohold._errors",
    "Scope": "cargohold._scope",
    "ScopedStore": "cargohold._facade",
    "SearchMatch": "cargohold._searchanswer",
    "SearchResult": "cargohold._searchanswer",
    "SecretFinding": "cargohold._secrets",
    "SecretKind": "cargohold._secrets",
    "SegmentInfo": "cargohold._segment",
    "Sensitivity": "cargohold._records",
    "SensitivityRefusedError": "cargohold._errors",
    "Settings": "cargohold._config",
    "Sink": "cargohold._events",
    "StateChange": "cargohold.working",
    "StateDelta": "cargohold.working",
    "StoreBackend": "cargohold.store",
    "StoreError": "cargohold._errors",
    "StoreUnavailableError": "cargohold._errors",
    "Stub": "cargohold._stub",
    "ToolAnswer": "cargohold._tools",
    "ToolSpec": "cargohold._toolspecs",
    "StubInfo": "cargohold._stub",
    "Usage": "cargohold._records",
    "UsageError": "cargohold._errors",
    "WorkerError": "cargohold.working",
    "WorkerReport": "cargohold.working",
    "WorkerResult": "cargohold.working",
    "WorkerResultError": "cargohold.working",
    "WorkerStatus": "cargohold.working",
    "WorkingContext": "cargohold.working",
    "estimate_tokens": "cargohold._tokens",
    "find_secrets": "cargohold._secrets",
    "guard_anthropic": "cargohold.guard",
    "guard_openai": "cargohold.guard",
    "load_settings": "cargohold._config",
    "mask_secrets": "cargohold._secrets",
    "offload_tool": "cargohold._decorator",
    "open": "cargohold._hold",
    "open_store": "cargohold._config",
    "parse_segment": "cargohold._segment",
    "parse_stub": "cargohold._stub",
    "read_store_events": "cargohold._sinks",
    "render_segment": "cargohold._segment",
    "render_stub": "cargohold._stub",
    "run_tag": "cargohold._events",
}
"""Each public name and the module that defines it."""

__all__ = [
    "DEFAULT_READ_BUDGET",
    "HEAVY_THRESHOLD",
    "ArtifactRecord",
    "Budget",
    "CargoholdError",
    "ChangeOp",
    "Checkpoint",
    "CheckpointError",
    "CompactOutcome",
    "CompactionPolicy",
    "CompactionReport",
    "CompressOutcome",
    "CompressionRequest",
    "Compressor",
    "ConfigError",
    "ContentKind",
    "ContextLeakError",
    "ContextWindowExceededError",
    "ContextWindowUnknownError",
    "DecisionEvent",
    "DispositionRefusedError",
    "ErrorKind",
    "EvidenceRole",
    "Finding",
    "GcReport",
    "Guard",
    "GuardOutcome",
    "Hold",
    "InvalidReferenceError",
    "InvalidScopeError",
    "JsonLinesSink",
    "LimitExceededError",
    "Limits",
    "ListSink",
    "LocalStore",
    "LoggingSink",
    "MemoryStore",
    "OffloadOutcome",
    "OffloadResult",
    "Offloader",
    "OpenTelemetrySink",
    "Operation",
    "PostgresEventsSink",
    "ProjectionClass",
    "PutRequest",
    "PutResult",
    "ReadError",
    "ReadOutcome",
    "ReadResult",
    "ReadTools",
    "ReadToolset",
    "Reason",
    "Ref",
    "RehydrateOutcome",
    "RehydrateResult",
    "Rehydrator",
    "RejectedError",
    "Reporter",
    "RequestOutcome",
    "ResultRef",
    "RunSummary",
    "SchemaError",
    "Scope",
    "ScopedStore",
    "SearchMatch",
    "SearchResult",
    "SecretFinding",
    "SecretKind",
    "SegmentInfo",
    "Sensitivity",
    "SensitivityRefusedError",
    "Settings",
    "Sink",
    "StateChange",
    "StateDelta",
    "StoreBackend",
    "StoreError",
    "StoreUnavailableError",
    "Stub",
    "StubInfo",
    "ToolAnswer",
    "ToolSpec",
    "Usage",
    "UsageError",
    "WorkerError",
    "WorkerReport",
    "WorkerResult",
    "WorkerResultError",
    "WorkerStatus",
    "WorkingContext",
    "estimate_tokens",
    "find_secrets",
    "guard_anthropic",
    "guard_openai",
    "load_settings",
    "mask_secrets",
    "offload_tool",
    "open",
    "open_store",
    "parse_segment",
    "parse_stub",
    "read_store_events",
    "render_segment",
    "render_stub",
    "run_tag",
]


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cargohold' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
