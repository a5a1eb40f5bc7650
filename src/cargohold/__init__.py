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
from cargohold._facade import ScopedStore
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
from cargohold._scope import Scope
from cargohold.store import LocalStore, MemoryStore, StoreBackend, open_store

__version__ = "0.1.0"

__all__ = [
    "ArtifactRecord",
    "CargoholdError",
    "ConfigError",
    "Finding",
    "GcReport",
    "InvalidReferenceError",
    "InvalidScopeError",
    "LimitExceededError",
    "Limits",
    "LocalStore",
    "MemoryStore",
    "PutRequest",
    "PutResult",
    "ReadError",
    "ReadOutcome",
    "ReadResult",
    "Ref",
    "RejectedError",
    "SchemaError",
    "Scope",
    "ScopedStore",
    "Sensitivity",
    "SensitivityRefusedError",
    "Settings",
    "StoreBackend",
    "StoreError",
    "StoreUnavailableError",
    "Usage",
    "UsageError",
    "load_settings",
    "open_store",
]
