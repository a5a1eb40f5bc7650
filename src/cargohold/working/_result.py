"""Worker results: what a worker may tell the primary, validated as untrusted input.

A worker (a sub-agent, a coding worker, a test runner) hands back two things: its exact raw
output, which the working context stores before anything else, and a small *report* about it: a
status claim, a summary, findings, errors, references to evidence it stored itself, and a
proposed :class:`StateDelta`. The report is untrusted data: every field is type-checked and
bounded here, every reference must be canonical (and, in the working context, held by the store
for this session), and nothing in it can carry a cargohold marker. Nothing a worker says is ever
applied: the primary alone consolidates.

Bounds (UTF-8 bytes and counts; over a bound is refused, never cut):

================================  =====================================================
summary                           :data:`SUMMARY_MAX_BYTES` (2 KiB)
findings                          :data:`FINDINGS_MAX` (16) of :data:`FINDING_MAX_BYTES` (512)
errors                            :data:`ERRORS_MAX` (16), messages of
                                  :data:`ERROR_MESSAGE_MAX_BYTES` (512)
references                        :data:`REPORT_REFS_MAX` (16)
state changes                     :data:`CHANGES_MAX` (16), values of :data:`VALUE_MAX_BYTES`
a report given as JSON text       :data:`REPORT_MAX_BYTES` (64 KiB)
================================  =====================================================

A refused report raises :class:`WorkerResultError`, whose ``reason`` is a stable code and whose
``field`` names the schema field (``findings[3]``), never a value or a key the input made up.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from cargohold._errors import CargoholdError, InvalidReferenceError
from cargohold._records import KiB
from cargohold._ref import Ref

ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}"
"""Worker ids, task ids, association ids and state keys: short identifiers, as event ids are."""

SUMMARY_MAX_BYTES = 2 * KiB
FINDING_MAX_BYTES = 512
FINDINGS_MAX = 16
ERROR_MESSAGE_MAX_BYTES = 512
ERRORS_MAX = 16
REPORT_REFS_MAX = 16
CHANGES_MAX = 16
VALUE_MAX_BYTES = 256
REPORT_MAX_BYTES = 64 * KiB
_INT_LIMIT = 2**63

_ID = re.compile(ID_PATTERN)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # newline and tab are text; the rest is not
_MARKER = "[cargohold"  # every stub, segment and notice starts so: a report can never forge one

Scalar: TypeAlias = str | int | bool | None
"""A state value: JSON text, integer, boolean or null (no floats: canonical bytes stay simple)."""


class WorkerResultError(CargoholdError):
    """A worker's report that is not valid untrusted input.

    Attributes:
        reason: A stable code: ``wrong_type``, ``unknown_field``, ``too_large``, ``too_many``,
            ``invalid_value``, ``invalid_text``, ``malformed_reference``, ``reference_not_held``,
            ``reserved``, ``duplicate`` or ``not_json``.
        field: The schema field at fault (``summary``, ``refs[2].ref``...), never input text.
    """

    code = "invalid_worker_result"

    def __init__(self, message: str, *, reason: str, field: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.field = field


class WorkerStatus(enum.StrEnum):
    """How a worker's work came out. ``degraded`` is the working context's verdict alone."""

    PASSED = "passed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    DEGRADED = "degraded"
    """The worker's exact output could not be stored (the store was unavailable, or refused
    it): the result holds no evidence of it, and the raw output is not in any context."""

    @property
    def severity(self) -> int:
        """Order of claims: a report can make a result worse, never better."""
        return _SEVERITY[self]


_SEVERITY = {
    WorkerStatus.PASSED: 0,
    WorkerStatus.CANCELLED: 1,
    WorkerStatus.FAILED: 2,
    WorkerStatus.DEGRADED: 3,
}


class EvidenceRole(enum.StrEnum):
    """What a referenced artifact is evidence of."""

    RAW_OUTPUT = "raw_output"
    """The worker's exact output, stored by the working context (a report cannot claim it)."""
    LOG = "log"
    TEST_REPORT = "test_report"
    BUILD_LOG = "build_log"
    DIFF = "diff"
    TRACE = "trace"
    SECURITY_REPORT = "security_report"
    DATA = "data"
    OTHER = "other"


class ErrorKind(enum.StrEnum):
    """What failed. The last two are assigned by the working context, never by a report."""

    WORKER = "worker"
    TEST = "test"
    BUILD = "build"
    SECURITY = "security"
    CANCELLATION = "cancellation"
    TIMEOUT = "timeout"
    INVALID_REPORT = "invalid_report"
    """The worker's report was refused (its reason code is in the message)."""
    EVIDENCE = "evidence"
    """The worker's exact output, or the references it reported, could not be kept."""


_CONTEXT_KINDS = frozenset({ErrorKind.INVALID_REPORT, ErrorKind.EVIDENCE})


class ChangeOp(enum.StrEnum):
    """A proposed change to one key of the primary's state."""

    SET = "set"
    UNSET = "unset"


# -- checks ----------------------------------------------------------------------------------


def _bad(reason: str, where: str, message: str) -> WorkerResultError:
    return WorkerResultError(f"{where}: {message}", reason=reason, field=where)


def check_id(value: object, where: str) -> str:
    """``value`` if it is a short identifier (:data:`ID_PATTERN`)."""
    if not isinstance(value, str):
        raise _bad("wrong_type", where, "expected a string identifier")
    if _ID.fullmatch(value) is None:
        raise _bad("invalid_value", where, "expected 1-128 letters, digits or ._:/- characters")
    return value


def check_text(value: object, where: str, limit: int) -> str:
    """``value`` if it is text of at most ``limit`` UTF-8 bytes, without control characters
    (newline and tab allowed) and without a cargohold marker."""
    if not isinstance(value, str):
        raise _bad("wrong_type", where, "expected text")
    if len(value) > limit:  # each character is at least one byte: refuse before encoding
        raise _bad("too_large", where, f"at most {limit:,} bytes")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise _bad("invalid_text", where, "not valid Unicode text") from None
    if size > limit:
        raise _bad("too_large", where, f"at most {limit:,} bytes")
    if _CONTROL.search(value) is not None:
        raise _bad("invalid_text", where, "holds control characters")
    if _MARKER in value:
        raise _bad("invalid_text", where, "holds a cargohold marker")
    return value


def _check_list(value: object, where: str, limit: int) -> Sequence[Any]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise _bad("wrong_type", where, "expected a list")
    if len(value) > limit:
        raise _bad("too_many", where, f"at most {limit} items")
    return value


def _check_mapping(value: object, where: str, allowed: set[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _bad("wrong_type", where, "expected an object")
    for key in value:
        if not isinstance(key, str) or key not in allowed:
            # the key itself is never echoed: it is the input's, not the schema's
            raise _bad("unknown_field", where, "holds a field this schema does not have")
    return value


def _enum(kind: type[enum.StrEnum], value: object, where: str) -> Any:
    if isinstance(value, kind):
        return value
    if not isinstance(value, str):
        raise _bad("wrong_type", where, "expected a string code")
    try:
        return kind(value)
    except ValueError:
        raise _bad("invalid_value", where, "not a known code") from None


def _check_scalar(value: object, where: str) -> Scalar:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -_INT_LIMIT <= value < _INT_LIMIT:
            raise _bad("invalid_value", where, "an integer of at most 64 bits")
        return value
    if isinstance(value, str):
        return check_text(value, where, VALUE_MAX_BYTES)
    raise _bad("wrong_type", where, "expected text, an integer, a boolean or null")


def _check_ref(value: object, where: str) -> Ref:
    if isinstance(value, Ref):
        return value
    if not isinstance(value, str):
        raise _bad("wrong_type", where, "expected a reference string")
    try:
        return Ref.parse(value)
    except InvalidReferenceError:
        raise _bad(
            "malformed_reference", where, "not a canonical artifact://sha256/<64 hex> reference"
        ) from None


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)  # frozen dataclasses normalize their own fields


# -- values ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResultRef:
    """A reference to stored evidence, what it is evidence of, and the call it came from.

    The size, media type and completeness are the store's record, filled in by the working
    context; a report cannot state them.

    Attributes:
        ref: The canonical reference.
        role: What the artifact is evidence of.
        association_id: The call or result that produced it (a tool-call id, a delegation id).
            Distinct calls keep distinct entries, even for identical bytes.
        size: Bytes of the artifact (from the store).
        media_type: Its media type (from the store).
        complete: ``False`` when its producer truncated it (from the store).
    """

    ref: Ref
    role: EvidenceRole
    association_id: str | None = None
    size: int | None = None
    media_type: str | None = None
    complete: bool | None = None

    def __post_init__(self) -> None:
        _set(self, "ref", _check_ref(self.ref, "ref"))
        _set(self, "role", _enum(EvidenceRole, self.role, "role"))
        if self.association_id is not None:
            check_id(self.association_id, "association_id")
        if self.size is not None and (
            isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0
        ):
            raise _bad("wrong_type", "size", "a non-negative integer")
        if self.media_type is not None:
            check_text(self.media_type, "media_type", 300)
        if self.complete is not None and not isinstance(self.complete, bool):
            raise _bad("wrong_type", "complete", "a boolean")

    def as_dict(self) -> dict[str, Any]:
        """The entry as JSON-ready data."""
        return {
            "ref": str(self.ref),
            "role": self.role.value,
            "association_id": self.association_id,
            "size": self.size,
            "media_type": self.media_type,
            "complete": self.complete,
        }


@dataclass(frozen=True, slots=True)
class WorkerError:
    """A failure that stays visible in the bounded result.

    Attributes:
        kind: What failed (worker, test, build, security, cancellation, timeout...).
        message: A short statement of it (at most 512 bytes). Not in the ``repr``.
    """

    kind: ErrorKind
    message: str = field(repr=False)

    def __post_init__(self) -> None:
        _set(self, "kind", _enum(ErrorKind, self.kind, "kind"))
        check_text(self.message, "message", ERROR_MESSAGE_MAX_BYTES)

    def as_dict(self) -> dict[str, Any]:
        """The error as JSON-ready data."""
        return {"kind": self.kind.value, "message": self.message}


@dataclass(frozen=True, slots=True)
class StateChange:
    """One proposed change: set ``key`` to ``value``, or unset it.

    Attributes:
        op: ``set`` or ``unset``.
        key: A short identifier.
        value: Text (at most 256 bytes), a 64-bit integer, a boolean or null; ``None`` for
            ``unset``. Not in the ``repr``.
    """

    op: ChangeOp
    key: str
    value: Scalar = field(default=None, repr=False)

    def __post_init__(self) -> None:
        _set(self, "op", _enum(ChangeOp, self.op, "op"))
        check_id(self.key, "key")
        _check_scalar(self.value, "value")
        if self.op is ChangeOp.UNSET and self.value is not None:
            raise _bad("invalid_value", "value", "an unset change carries no value")

    def as_dict(self) -> dict[str, Any]:
        """The change as JSON-ready data."""
        return {"op": self.op.value, "key": self.key, "value": self.value}


@dataclass(frozen=True, slots=True)
class StateDelta:
    """A worker's proposed changes to the primary's state: typed, bounded, advisory.

    Never applied by cargohold. The primary decides; :meth:`apply` is a pure helper for a
    primary that has decided to accept a delta.
    """

    changes: tuple[StateChange, ...] = ()

    def __post_init__(self) -> None:
        changes = _check_list(self.changes, "state_delta.changes", CHANGES_MAX)
        keys: set[str] = set()
        for index, change in enumerate(changes):
            if not isinstance(change, StateChange):
                raise _bad("wrong_type", f"state_delta.changes[{index}]", "expected a change")
            if change.key in keys:
                raise _bad("duplicate", f"state_delta.changes[{index}]", "a key changed twice")
            keys.add(change.key)
        _set(self, "changes", tuple(changes))

    def __len__(self) -> int:
        return len(self.changes)

    def apply(self, state: Mapping[str, Scalar]) -> dict[str, Scalar]:
        """A new state: ``state`` with these changes made (``state`` itself is unchanged)."""
        updated = dict(state)
        for change in self.changes:
            if change.op is ChangeOp.SET:
                updated[change.key] = change.value
            else:
                updated.pop(change.key, None)
        return updated

    def as_dict(self) -> dict[str, Any]:
        """The delta as JSON-ready data."""
        return {"changes": [change.as_dict() for change in self.changes]}


# -- the report (untrusted) --------------------------------------------------------------------

_REPORT_FIELDS = {"status", "summary", "findings", "errors", "refs", "state_delta"}


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """What a worker says about its own work. Untrusted: validated on construction.

    Build one in code, or parse what a worker sent with :meth:`parse`. References are checked
    against the store when the working context takes the report.

    Attributes:
        status: The worker's claim (``passed``, ``failed`` or ``cancelled``), if any.
        summary: At most 2 KiB of text.
        findings: At most 16 texts of at most 512 bytes.
        errors: At most 16 failures.
        refs: At most 16 references to evidence the worker stored (never ``raw_output``).
        state_delta: Proposed state changes (advisory).
    """

    status: WorkerStatus | None = None
    summary: str = field(default="", repr=False)
    findings: tuple[str, ...] = field(default=(), repr=False)
    errors: tuple[WorkerError, ...] = ()
    refs: tuple[ResultRef, ...] = ()
    state_delta: StateDelta = field(default_factory=StateDelta, repr=False)

    def __post_init__(self) -> None:
        if self.status is not None:
            status = _enum(WorkerStatus, self.status, "status")
            if status is WorkerStatus.DEGRADED:
                raise _bad("reserved", "status", "degraded is the working context's verdict")
            _set(self, "status", status)
        check_text(self.summary, "summary", SUMMARY_MAX_BYTES)
        findings = _check_list(self.findings, "findings", FINDINGS_MAX)
        for index, finding in enumerate(findings):
            check_text(finding, f"findings[{index}]", FINDING_MAX_BYTES)
        _set(self, "findings", tuple(findings))
        errors = _check_list(self.errors, "errors", ERRORS_MAX)
        for index, error in enumerate(errors):
            if not isinstance(error, WorkerError):
                raise _bad("wrong_type", f"errors[{index}]", "expected an error")
            if error.kind in _CONTEXT_KINDS:
                raise _bad("reserved", f"errors[{index}].kind", "assigned by the working context")
        _set(self, "errors", tuple(errors))
        refs = _check_list(self.refs, "refs", REPORT_REFS_MAX)
        seen: set[tuple[Ref, EvidenceRole, str | None]] = set()
        for index, entry in enumerate(refs):
            if not isinstance(entry, ResultRef):
                raise _bad("wrong_type", f"refs[{index}]", "expected a result reference")
            if entry.role is EvidenceRole.RAW_OUTPUT:
                raise _bad("reserved", f"refs[{index}].role", "raw_output is stored by the context")
            identity = (entry.ref, entry.role, entry.association_id)
            if identity in seen:
                raise _bad("duplicate", f"refs[{index}]", "the same reference, role and call twice")
            seen.add(identity)
        _set(self, "refs", tuple(refs))
        if not isinstance(self.state_delta, StateDelta):
            raise _bad("wrong_type", "state_delta", "expected a state delta")

    @classmethod
    def parse(cls, data: object) -> WorkerReport:
        """Validate what a worker sent: a JSON object (as text or bytes) or a mapping.

        Shape::

            {"status": "failed", "summary": "...", "findings": ["..."],
             "errors": [{"kind": "test", "message": "..."}],
             "refs": [{"ref": "artifact://sha256/...", "role": "log", "association_id": "c1"}],
             "state_delta": {"changes": [{"op": "set", "key": "k", "value": "v"}]}}

        Every field is optional; no other field is allowed.

        Raises:
            WorkerResultError: anything else (its ``reason`` and ``field`` say what).
        """
        if isinstance(data, str | bytes | bytearray):
            data = _load_json(data)
        report = _check_mapping(data, "report", _REPORT_FIELDS)
        findings = _check_list(report.get("findings", ()), "findings", FINDINGS_MAX)
        errors = []
        for index, item in enumerate(_check_list(report.get("errors", ()), "errors", ERRORS_MAX)):
            where = f"errors[{index}]"
            entry = _check_mapping(item, where, {"kind", "message"})
            kind = _enum(ErrorKind, entry.get("kind"), f"{where}.kind")
            if kind in _CONTEXT_KINDS:
                raise _bad("reserved", f"{where}.kind", "assigned by the working context")
            message = check_text(entry.get("message"), f"{where}.message", ERROR_MESSAGE_MAX_BYTES)
            errors.append(WorkerError(kind, message))
        refs = []
        items = _check_list(report.get("refs", ()), "refs", REPORT_REFS_MAX)
        for index, item in enumerate(items):
            where = f"refs[{index}]"
            entry = _check_mapping(item, where, {"ref", "role", "association_id"})
            ref = _check_ref(entry.get("ref"), f"{where}.ref")
            role = _enum(EvidenceRole, entry.get("role"), f"{where}.role")
            association = entry.get("association_id")
            if association is not None:
                check_id(association, f"{where}.association_id")
            refs.append(ResultRef(ref, role, association))
        delta = _check_mapping(report.get("state_delta", {}), "state_delta", {"changes"})
        changes = []
        items = _check_list(delta.get("changes", ()), "state_delta.changes", CHANGES_MAX)
        for index, item in enumerate(items):
            where = f"state_delta.changes[{index}]"
            entry = _check_mapping(item, where, {"op", "key", "value"})
            op = _enum(ChangeOp, entry.get("op"), f"{where}.op")
            key = check_id(entry.get("key"), f"{where}.key")
            changes.append(StateChange(op, key, _check_scalar(entry.get("value"), where)))
        try:
            return cls(
                status=report.get("status"),
                summary=report.get("summary", ""),
                findings=tuple(findings),
                errors=tuple(errors),
                refs=tuple(refs),
                state_delta=StateDelta(tuple(changes)),
            )
        except WorkerResultError:
            raise
        except (TypeError, ValueError):  # a value no check above foresaw: still the input's fault
            raise _bad("wrong_type", "report", "a field of the wrong type") from None


def _load_json(data: str | bytes | bytearray) -> Any:
    size = len(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    if size > REPORT_MAX_BYTES:
        raise _bad("too_large", "report", f"a report is at most {REPORT_MAX_BYTES:,} bytes")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in items:
            if key in result:
                raise _bad("duplicate", "report", "an object holds the same field twice")
            result[key] = value
        return result

    def no_constant(name: str) -> Any:
        raise _bad("not_json", "report", "NaN and Infinity are not JSON")

    try:
        return json.loads(data, object_pairs_hook=pairs, parse_constant=no_constant)
    except WorkerResultError:
        raise
    except (ValueError, RecursionError):
        raise _bad("not_json", "report", "not a JSON object") from None


# -- the result (what the primary gets) --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkerResult:
    """A worker's bounded result, as the working context built it from the stored output and
    the validated report. Everything a primary may consolidate; never the output itself.

    Attributes:
        sequence: Its position in the working context (1, 2, ...), in submission order.
        worker: The worker's id.
        status: ``passed``, ``failed``, ``cancelled``, or ``degraded`` when the exact output
            could not be stored.
        reported_status: The status the worker's run came to (the harness's and the report's
            claims, the worse of the two; ``failed`` when the report listed errors or was
            refused). Differs from ``status`` only when degraded.
        task: The task it worked on, if any.
        association_id: The call that delegated the work (a tool-call id...), if any.
        summary: The report's summary (bounded). Not in the ``repr``.
        findings: The report's findings (bounded). Not in the ``repr``.
        errors: Failures, visible: the report's, plus ``invalid_report`` / ``evidence`` errors
            the working context added.
        refs: Evidence: the stored raw output first (role ``raw_output``), then the report's.
        state_delta: The proposed, unapplied state changes. Not in the ``repr``.
        degraded_reason: Why the output was not stored (``store_unavailable``,
            ``credential_detected``...), only when ``status`` is ``degraded``.
    """

    sequence: int
    worker: str
    status: WorkerStatus
    reported_status: WorkerStatus
    task: str | None = None
    association_id: str | None = None
    summary: str = field(default="", repr=False)
    findings: tuple[str, ...] = field(default=(), repr=False)
    errors: tuple[WorkerError, ...] = ()
    refs: tuple[ResultRef, ...] = ()
    state_delta: StateDelta = field(default_factory=StateDelta, repr=False)
    degraded_reason: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.sequence, bool) or not isinstance(self.sequence, int):
            raise _bad("wrong_type", "sequence", "a positive integer")
        if self.sequence < 1:
            raise _bad("invalid_value", "sequence", "a positive integer")
        check_id(self.worker, "worker")
        for name in ("task", "association_id"):
            if getattr(self, name) is not None:
                check_id(getattr(self, name), name)
        status = _enum(WorkerStatus, self.status, "status")
        reported = _enum(WorkerStatus, self.reported_status, "reported_status")
        _set(self, "status", status)
        _set(self, "reported_status", reported)
        if reported is WorkerStatus.DEGRADED:
            raise _bad("reserved", "reported_status", "degraded is not a worker's status")
        if (status is WorkerStatus.DEGRADED) != (self.degraded_reason is not None):
            raise _bad("invalid_value", "degraded_reason", "given exactly when degraded")
        if status is not WorkerStatus.DEGRADED and status is not reported:
            raise _bad("invalid_value", "status", "the reported status unless degraded")
        if self.degraded_reason is not None:
            check_id(self.degraded_reason, "degraded_reason")
        check_text(self.summary, "summary", SUMMARY_MAX_BYTES)
        findings = _check_list(self.findings, "findings", FINDINGS_MAX)
        for index, finding in enumerate(findings):
            check_text(finding, f"findings[{index}]", FINDING_MAX_BYTES)
        _set(self, "findings", tuple(findings))
        errors = _check_list(self.errors, "errors", ERRORS_MAX + len(_CONTEXT_KINDS))
        if not all(isinstance(error, WorkerError) for error in errors):
            raise _bad("wrong_type", "errors", "expected errors")
        _set(self, "errors", tuple(errors))
        refs = _check_list(self.refs, "refs", REPORT_REFS_MAX + 1)
        if not all(isinstance(entry, ResultRef) for entry in refs):
            raise _bad("wrong_type", "refs", "expected result references")
        raw = [index for index, entry in enumerate(refs) if entry.role is EvidenceRole.RAW_OUTPUT]
        if raw not in ([], [0]):
            raise _bad("invalid_value", "refs", "at most one raw_output, first")
        _set(self, "refs", tuple(refs))
        if not isinstance(self.state_delta, StateDelta):
            raise _bad("wrong_type", "state_delta", "expected a state delta")

    @property
    def ok(self) -> bool:
        """Whether the worker passed and its output is stored."""
        return self.status is WorkerStatus.PASSED

    @property
    def raw_ref(self) -> ResultRef | None:
        """The stored raw output's entry (``None`` when degraded or the output was empty)."""
        if self.refs and self.refs[0].role is EvidenceRole.RAW_OUTPUT:
            return self.refs[0]
        return None

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data: metadata and references only."""
        return {
            "sequence": self.sequence,
            "worker": self.worker,
            "status": self.status.value,
            "reported_status": self.reported_status.value,
            "task": self.task,
            "association_id": self.association_id,
            "summary": self.summary,
            "findings": list(self.findings),
            "errors": [error.as_dict() for error in self.errors],
            "refs": [entry.as_dict() for entry in self.refs],
            "state_delta": self.state_delta.as_dict(),
            "degraded_reason": self.degraded_reason,
        }

    @classmethod
    def from_dict(cls, data: object) -> WorkerResult:
        """Rebuild a result from :meth:`as_dict` data, validating every field again.

        Raises:
            WorkerResultError: data that is not a valid result.
        """
        fields = {
            "sequence",
            "worker",
            "status",
            "reported_status",
            "task",
            "association_id",
            "summary",
            "findings",
            "errors",
            "refs",
            "state_delta",
            "degraded_reason",
        }
        item = _check_mapping(data, "result", fields)
        if set(item) != fields:
            raise _bad("wrong_type", "result", "a field is missing")
        try:
            return cls._from_fields(item)
        except TypeError:  # a missing argument of a nested value: the data's fault
            raise _bad("wrong_type", "result", "a nested field is missing") from None

    @classmethod
    def _from_fields(cls, item: Mapping[str, Any]) -> WorkerResult:
        errors = []
        for index, error in enumerate(_check_list(item["errors"], "errors", 64)):
            entry = _check_mapping(error, f"errors[{index}]", {"kind", "message"})
            errors.append(WorkerError(**entry))
        refs = []
        for index, ref in enumerate(_check_list(item["refs"], "refs", 64)):
            keys = {"ref", "role", "association_id", "size", "media_type", "complete"}
            entry = _check_mapping(ref, f"refs[{index}]", keys)
            refs.append(ResultRef(**entry))
        delta = _check_mapping(item["state_delta"], "state_delta", {"changes"})
        changes = []
        for index, change in enumerate(_check_list(delta.get("changes", ()), "changes", 64)):
            entry = _check_mapping(change, f"changes[{index}]", {"op", "key", "value"})
            changes.append(StateChange(**entry))
        return cls(
            sequence=item["sequence"],
            worker=item["worker"],
            status=item["status"],
            reported_status=item["reported_status"],
            task=item["task"],
            association_id=item["association_id"],
            summary=item["summary"],
            findings=tuple(_check_list(item["findings"], "findings", FINDINGS_MAX)),
            errors=tuple(errors),
            refs=tuple(refs),
            state_delta=StateDelta(tuple(changes)),
            degraded_reason=item["degraded_reason"],
        )
