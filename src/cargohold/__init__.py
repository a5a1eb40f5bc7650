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

from cargohold._config import Settings, load_settings
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
    ContentKind,
    DecisionEvent,
    GuardOutcome,
    OffloadOutcome,
    Operation,
    Reason,
    RehydrateOutcome,
    Reporter,
    Sink,
)
from cargohold._facade import ScopedStore
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
from cargohold._segment import SegmentInfo, parse_segment, render_segment
from cargohold._sinks import JsonLinesSink, ListSink, LoggingSink, OpenTelemetrySink, RunSummary
from cargohold._stub import Budget, ReadTools, Stub, StubInfo, parse_stub, render_stub
from cargohold._tokens import estimate_tokens
from cargohold.guard import (
    ContextLeakError,
    ContextWindowExceededError,
    DispositionRefusedError,
    Guard,
    guard_anthropic,
    guard_openai,
)
from cargohold.projection import ProjectionClass
from cargohold.store import LocalStore, MemoryStore, StoreBackend, open_store

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_READ_BUDGET",
    "HEAVY_THRESHOLD",
    "ArtifactRecord",
    "Budget",
    "CargoholdError",
    "ConfigError",
    "ContentKind",
    "ContextLeakError",
    "ContextWindowExceededError",
    "DecisionEvent",
    "DispositionRefusedError",
    "Finding",
    "GcReport",
    "Guard",
    "GuardOutcome",
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
    "ProjectionClass",
    "PutRequest",
    "PutResult",
    "ReadError",
    "ReadOutcome",
    "ReadResult",
    "ReadTools",
    "Reason",
    "Ref",
    "RehydrateOutcome",
    "RehydrateResult",
    "Rehydrator",
    "RejectedError",
    "Reporter",
    "RunSummary",
    "SchemaError",
    "Scope",
    "ScopedStore",
    "SegmentInfo",
    "Sensitivity",
    "SensitivityRefusedError",
    "Settings",
    "Sink",
    "StoreBackend",
    "StoreError",
    "StoreUnavailableError",
    "Stub",
    "StubInfo",
    "Usage",
    "UsageError",
    "estimate_tokens",
    "guard_anthropic",
    "guard_openai",
    "load_settings",
    "open_store",
    "parse_segment",
    "parse_stub",
    "render_segment",
    "render_stub",
]
