"""The one error tree of cargohold.

::

    CargoholdError
    ├── UsageError                    a developer mistake: bad arguments, bad configuration
    │   ├── InvalidReferenceError     not exactly ``artifact://sha256/<64 lowercase hex>``
    │   ├── InvalidScopeError         tenant, user or session missing or malformed
    │   ├── EnvelopeError             a role packet that cannot be built or read (envelopes)
    │   ├── CheckpointError           a working-context checkpoint that is not one, or was edited
    │   └── ConfigError               a configuration file or variable that cannot be used
    │       └── AuthorityError        an envelope authority file that does not validate
    ├── RejectedError                 a write refused; nothing already stored changed
    │   ├── LimitExceededError        over the artifact size, a session quota or the store quota
    │   └── SensitivityRefusedError   ``secret``, ``credential`` or ``raw_auth`` content
    ├── StoreError                    the store could not do its job (not the caller's fault)
    │   ├── StoreUnavailableError     I/O or connection failure, the store is busy or broken
    │   └── SchemaError               the store's schema is not the one this version expects
    ├── ReadError                     a read that did not resolve, raised on request
    ├── ContextLeakError              a request still carries raw heavy content (guard)
    ├── ContextWindowExceededError    a request does not fit the model's window (guard)
    ├── ContextWindowUnknownError     a strict guard knows no window for the model (guard)
    ├── DispositionRefusedError       an attachment disposition that cannot be applied (guard)
    ├── ContextNotReadyError          a role packet that is stale, insufficient or in conflict
    └── WorkerResultError             a worker's report that is not valid untrusted input (working)

Read outcomes (``missing``, ``unauthorized``, ``stale``, ``expired``, ``over_budget``) are values
(:class:`cargohold.ReadOutcome`), not exceptions; :meth:`cargohold.ReadResult.raise_for_outcome`
turns one into a :class:`ReadError` for callers that prefer exceptions.

Every message here is written for a model or a log: it never holds a body, a path of the store, an
owner identity or a lower-level exception's text. Lower-level exceptions (``OSError``,
``sqlite3.Error``, ``psycopg.Error``) are translated where the backend meets the store seam, and
chained (``raise ... from exc``) so a developer with a debugger still sees the cause.
"""

from __future__ import annotations

from typing import ClassVar


class CargoholdError(Exception):
    """Root of every error cargohold raises on purpose.

    Attributes:
        code: A stable, machine-readable code for the error class; tests assert codes, not
            message texts.
    """

    code: ClassVar[str] = "error"


class UsageError(CargoholdError, ValueError):
    """A developer mistake: a bad argument or a bad configuration value."""

    code = "usage"


class InvalidReferenceError(UsageError):
    """A string that is not exactly a canonical ``artifact://sha256/<64 hex>`` reference."""

    code = "invalid_reference"


class InvalidScopeError(UsageError):
    """A scope without tenant, user or session, or with a malformed part."""

    code = "invalid_scope"


class ConfigError(UsageError):
    """A configuration file, variable or argument that cannot be used."""

    code = "config"


class RejectedError(CargoholdError):
    """A write the store refused. Nothing already stored was changed.

    Attributes:
        reason: A stable code naming the refusal (for example ``artifact_too_large``).
    """

    code = "rejected"

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class LimitExceededError(RejectedError):
    """A write over the per-artifact size, a session quota or the store quota.

    Attributes:
        reason: The limit's stable code (``artifact_too_large``, ``session_bytes``...).
        setting: The configuration key that raises the limit (``max_artifact_bytes``,
            ``session_bytes``...), when the limit is one; ``None`` otherwise.
        limit: The limit's value (bytes or objects), when known.
    """

    code = "limit_exceeded"

    def __init__(
        self, message: str, *, reason: str, setting: str | None = None, limit: int | None = None
    ) -> None:
        super().__init__(message, reason=reason)
        self.setting = setting
        self.limit = limit


class SensitivityRefusedError(RejectedError):
    """A write of content whose sensitivity the store never accepts."""

    code = "sensitivity_refused"


class StoreError(CargoholdError):
    """The store could not complete an operation; the caller did nothing wrong."""

    code = "store"


class StoreUnavailableError(StoreError):
    """I/O failure, lost connection, or a store that stayed busy past its timeout."""

    code = "store_unavailable"


class SchemaError(StoreError):
    """The store's schema is older or newer than this version of cargohold expects."""

    code = "schema"


class ReadError(CargoholdError):
    """A read whose outcome was not ``resolved``, raised on request.

    Attributes:
        outcome: The read outcome's stable code (``missing``, ``stale``, ...).
    """

    code = "read"

    def __init__(self, message: str, *, outcome: str) -> None:
        super().__init__(message)
        self.outcome = outcome
