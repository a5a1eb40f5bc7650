"""Records and result values exchanged across the store seam."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field

from cargohold._errors import LimitExceededError, ReadError, SensitivityRefusedError, UsageError
from cargohold._ref import Ref

KiB = 1024
MiB = 1024 * KiB
HOUR = 3600.0
DAY = 24 * HOUR

CHUNK_SIZE = 64 * KiB
"""Fixed chunk size of the per-chunk digests recorded at write, used by verified range reads."""

MAX_READ_BYTES = 1 * MiB
"""The most bytes any single read answer carries."""


class Sensitivity(enum.StrEnum):
    """How private the content is. The last three are refused by every store."""

    PUBLIC = "public"
    INTERNAL = "internal"
    RESTRICTED = "restricted"
    SECRET = "secret"  # noqa: S105 - a category name, not a password
    CREDENTIAL = "credential"
    RAW_AUTH = "raw_auth"

    @property
    def storable(self) -> bool:
        """Whether a store accepts content of this sensitivity."""
        return self in (Sensitivity.PUBLIC, Sensitivity.INTERNAL, Sensitivity.RESTRICTED)


class ReadOutcome(enum.StrEnum):
    """The categorical result of a read. Anything but ``RESOLVED`` carries no content."""

    RESOLVED = "resolved"
    MISSING = "missing"
    UNAUTHORIZED = "unauthorized"
    STALE = "stale"
    EXPIRED = "expired"
    OVER_BUDGET = "over_budget"


_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")
_CHARSET = re.compile(r"[a-z0-9._:-]{1,40}")
DEFAULT_MEDIA_TYPE = "application/octet-stream"


def normalize_media_type(value: str | None) -> str:
    """Lower-case ``type/subtype``, keeping only a ``charset`` parameter.

    Raises:
        UsageError: not of the form ``type/subtype``.
    """
    if value is None:
        return DEFAULT_MEDIA_TYPE
    base, _, params = value.strip().lower().partition(";")
    base = base.strip()
    if _MEDIA_TYPE.fullmatch(base) is None:
        raise UsageError("media type must look like type/subtype")
    for param in params.split(";"):
        name, _, val = param.strip().partition("=")
        val = val.strip().strip('"')
        if name.strip() == "charset" and _CHARSET.fullmatch(val):
            return f"{base}; charset={val}"
    return base


@dataclass(frozen=True, slots=True)
class Limits:
    """Store limits. Over a limit is a typed error that changes nothing already stored.

    Attributes:
        max_artifact_bytes: Largest single artifact.
        session_bytes: Bytes one ``(tenant, user, session)`` may hold (unexpired artifacts).
        session_objects: Artifacts one session may hold (unexpired).
        store_bytes: Physical bytes the whole store may hold (distinct blobs, until gc).
        store_objects: Distinct blobs the whole store may hold (until gc).
        default_ttl: Seconds an artifact lives when the writer names no TTL.
        max_ttl: The longest TTL a writer may ask for.
        tenant_bytes: Bytes one tenant's distinct blobs may hold (until gc); ``None``: no
            tenant quota, the store quota alone binds (a store shared by tenants should set
            one, or one tenant can fill the store for all).
        tenant_objects: Distinct blobs one tenant may hold (until gc); ``None``: no quota.
    """

    max_artifact_bytes: int = 16 * MiB
    session_bytes: int = 64 * MiB
    session_objects: int = 256
    store_bytes: int = 256 * MiB
    store_objects: int = 2048
    default_ttl: float = 24 * HOUR
    max_ttl: float = 7 * DAY
    tenant_bytes: int | None = None
    tenant_objects: int | None = None

    def __post_init__(self) -> None:
        for name in (
            "max_artifact_bytes",
            "session_bytes",
            "session_objects",
            "store_bytes",
            "store_objects",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise UsageError(f"limit {name} must be a positive integer")
        for name in ("tenant_bytes", "tenant_objects"):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value <= 0
            ):
                raise UsageError(f"limit {name} must be a positive integer or None")
        if not 0 < self.default_ttl <= self.max_ttl:
            raise UsageError("default_ttl must be positive and at most max_ttl")

    def check_ttl(self, ttl: float | None) -> float:
        """The TTL to apply to a write, or a usage error when it is out of range."""
        if ttl is None:
            return self.default_ttl
        if not isinstance(ttl, int | float) or isinstance(ttl, bool) or not ttl > 0:
            raise UsageError("ttl must be a positive number of seconds")
        if ttl > self.max_ttl:
            raise UsageError(f"ttl may be at most {int(self.max_ttl)} seconds")
        return float(ttl)

    def check_artifact(self, size: int) -> None:
        """Refuse a single artifact over the per-artifact limit.

        The message gives the real size, the limit and the setting that raises it (a surface
        that reads only up to the limit learns the real size first and calls this with it).
        """
        if size > self.max_artifact_bytes:
            raise LimitExceededError(
                f"artifact of {size:,} bytes is over the {self.max_artifact_bytes:,}-byte limit "
                f"per artifact ({_raise_it('max_artifact_bytes')})",
                reason="artifact_too_large",
                setting="max_artifact_bytes",
                limit=self.max_artifact_bytes,
            )

    def check_session(self, objects: int, size: int, new_size: int) -> None:
        """Refuse a new artifact that would put a session over its quota."""
        if objects + 1 > self.session_objects:
            raise LimitExceededError(
                f"session holds {objects:,} artifacts, the limit is {self.session_objects:,} "
                f"({_raise_it('session_objects')})",
                reason="session_objects",
                setting="session_objects",
                limit=self.session_objects,
            )
        if size + new_size > self.session_bytes:
            raise LimitExceededError(
                f"session would hold {size + new_size:,} bytes, the limit is "
                f"{self.session_bytes:,} ({_raise_it('session_bytes')})",
                reason="session_bytes",
                setting="session_bytes",
                limit=self.session_bytes,
            )

    def check_store(self, objects: int, size: int, new_size: int) -> None:
        """Refuse a new blob that would put the store over its quota."""
        hint = "; expired artifacts count until `cargohold gc`"
        if objects + 1 > self.store_objects:
            raise LimitExceededError(
                f"store holds {objects:,} blobs, the limit is {self.store_objects:,} "
                f"({_raise_it('store_objects')}{hint})",
                reason="store_objects",
                setting="store_objects",
                limit=self.store_objects,
            )
        if size + new_size > self.store_bytes:
            raise LimitExceededError(
                f"store would hold {size + new_size:,} bytes, the limit is "
                f"{self.store_bytes:,} ({_raise_it('store_bytes')}{hint})",
                reason="store_bytes",
                setting="store_bytes",
                limit=self.store_bytes,
            )


def _raise_it(setting: str) -> str:
    """Where a limit is raised: its configuration key and its variable."""
    return f"raise it with {setting} in cargohold.toml or CARGOHOLD_{setting.upper()}"


def check_sensitivity(sensitivity: Sensitivity | str) -> Sensitivity:
    """Parse a sensitivity and refuse the kinds no store accepts."""
    try:
        value = Sensitivity(sensitivity)
    except ValueError:
        raise UsageError(
            "sensitivity must be one of: " + ", ".join(s.value for s in Sensitivity)
        ) from None
    if not value.storable:
        raise SensitivityRefusedError(
            f"content marked {value.value} is never stored", reason="sensitivity"
        )
    return value


@dataclass(frozen=True, slots=True)
class PutRequest:
    """What a writer says about the bytes it stores. The scope is stamped by the facade.

    Attributes:
        media_type: The media type hint (normalized on write).
        kind: A short label of what the artifact is (``json``, ``log``, ``worker_output``...).
        tool: The producing tool's name, if any.
        ttl: Seconds to keep the artifact; ``None`` takes the store's default.
        sensitivity: ``public``, ``internal`` (default) or ``restricted``.
        complete: ``False`` when the producer truncated its own output.
        classification: The projection class, once decided.
        parent: The artifact these bytes were derived from (by ``artifact_patch``, say), as a
            :class:`Ref` or its canonical string; ``None`` for bytes a tool produced. The store
            records the writer's claim as given and does not look the parent up: whoever
            derives the bytes reads the parent first, through the same owner checks.
    """

    media_type: str | None = None
    kind: str | None = None
    tool: str | None = None
    ttl: float | None = None
    sensitivity: Sensitivity | str = Sensitivity.INTERNAL
    complete: bool = True
    classification: str | None = None
    parent: Ref | str | None = None


@dataclass(frozen=True, slots=True)
class ArtifactRecord:
    """An artifact's metadata as one owner sees it.

    Only ``ref``, ``size``, ``media_type``, ``kind``, ``complete`` and ``tool`` may appear in a stub
    or an event; the owner scope and timestamps stay with the store and its operators.

    ``parent`` is the artifact the bytes were derived from (``None`` for bytes a tool produced).
    Like every field but the expiry, it is the first live write's: the same owner putting the
    same bytes again, with another parent or none, gets this record back unchanged (one artifact,
    one history); a put over an expired record starts a fresh one, parent included.
    """

    ref: Ref
    size: int
    media_type: str
    kind: str | None
    tool: str | None
    created: float
    expires: float
    sensitivity: Sensitivity
    complete: bool
    classification: str | None
    task: str | None = field(default=None, repr=False)
    worker: str | None = field(default=None, repr=False)
    agent: str | None = field(default=None, repr=False)
    parent: Ref | None = None


@dataclass(frozen=True, slots=True)
class PutResult:
    """The result of a write.

    Attributes:
        ref: The canonical reference of the stored bytes.
        record: The artifact's record in the writer's scope.
        existing: ``True`` when this scope already held the same bytes (no second write).
        blob_written: ``True`` when the bytes themselves were written by this call.
    """

    ref: Ref
    record: ArtifactRecord
    existing: bool
    blob_written: bool


@dataclass(frozen=True, slots=True)
class ReadResult:
    """The result of a read: an outcome, and content only when the outcome is ``resolved``.

    Attributes:
        outcome: The categorical outcome.
        ref: The reference that was read.
        data: The verified bytes (``None`` unless resolved). Never shown in the ``repr``.
        record: The artifact's record when the caller may see it (resolved, stale, expired,
            over budget), else ``None``.
        start: Offset of ``data`` in the artifact.
    """

    outcome: ReadOutcome
    ref: Ref
    data: bytes | None = field(default=None, repr=False)
    record: ArtifactRecord | None = None
    start: int = 0

    @property
    def ok(self) -> bool:
        """Whether the read resolved."""
        return self.outcome is ReadOutcome.RESOLVED

    def raise_for_outcome(self) -> bytes:
        """The bytes, or :class:`ReadError` naming the outcome."""
        if self.outcome is not ReadOutcome.RESOLVED or self.data is None:
            raise ReadError(f"read was {self.outcome.value}", outcome=self.outcome.value)
        return self.data


@dataclass(frozen=True, slots=True)
class Usage:
    """Objects and bytes held."""

    objects: int
    bytes: int


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing ``verify`` found wrong. Kept, never deleted on assumption.

    Two families. Damage: ``corrupt`` (bytes do not hash to their digest, or something other
    than a plain file of the right size where a blob should be), ``missing_blob`` (a record
    whose bytes are gone), ``permissions`` (a file that is not 0600 or a directory that is not
    0700), ``unknown`` (an entry the store did not make). Housekeeping, the leftovers of an
    interrupted write that lose nothing: ``orphan`` (bytes no record names), ``staging`` (a
    staged file whose writer died; ``gc`` removes it); and the search index's gaps, which cost a
    search a hit at worst: ``unindexed`` (a text record the index does not hold; a re-put of the
    bytes heals it), ``stray_index`` (index rows of no record).

    Attributes:
        kind: One of the codes above.
        digest: The digest concerned, when there is one.
        detail: A short, path-free explanation.
        path: Where the entry lies under the store's root, for an operator (``cargohold
            verify``); ``None`` when the backend names none. Never the root, never in the repr.
    """

    kind: str
    digest: str | None
    detail: str
    path: str | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class GcReport:
    """What a garbage collection removed (or, on a dry run, would remove)."""

    artifacts: int
    blobs: int
    bytes: int
    dry_run: bool
