"""Logic every backend shares: write preparation, range arithmetic, chunk verification."""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from cargohold._errors import CargoholdError, LimitExceededError, StoreError, UsageError
from cargohold._records import (
    CHUNK_SIZE,
    ArtifactRecord,
    Finding,
    Limits,
    PutRequest,
    Sensitivity,
    check_sensitivity,
    normalize_media_type,
)
from cargohold._ref import Ref

_DIGEST_LEN = 32
_DIGEST = re.compile(r"[0-9a-f]{64}")


class MalformedRowError(StoreError):
    """An index row holds a value no write of this store makes (a digest that is not 64
    lowercase hex, text where a size or a time belongs...): damage or tampering.

    Such a row is never followed (no path or key is built from it); listings skip it, a verb
    that needs it raises this, and ``verify`` reports it.
    """


MALFORMED = "an index row of the store is malformed: run `cargohold verify`"
"""The message of :class:`MalformedRowError`: it never quotes the row (a value may be a path)."""


def is_digest(value: object) -> bool:
    """Whether ``value`` is a digest as the store writes one: exactly 64 lowercase hex."""
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


ROW_INT_MAX = 1 << 48
"""The largest count or size a row may hold (256 TiB): a larger one is tampering, and sums of a
few of them would overflow SQLite's 64-bit integers."""


def is_row_int(value: object) -> bool:
    """Whether ``value`` is a count or a size a write of this store could have made."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= ROW_INT_MAX


def row_int(value: object) -> int:
    """A count or a size read from an index row: a non-negative integer, else the row is
    malformed (SQLite keeps whatever text a tampered row holds)."""
    if not is_row_int(value):
        raise MalformedRowError(MALFORMED)
    assert isinstance(value, int)
    return value


def _row_time(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise MalformedRowError(MALFORMED)
    return float(value)


def as_bytes(data: object) -> bytes:
    """Accept ``bytes``-like input only: text is encoded by the caller, who knows its charset."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise UsageError("store data must be bytes (encode text first)")


def chunk_digests(data: bytes | memoryview, chunk_size: int = CHUNK_SIZE) -> bytes:
    """Concatenated SHA-256 digests of each fixed-size chunk (one digest for an empty body)."""
    view = memoryview(data)
    if len(view) == 0:
        return hashlib.sha256(b"").digest()
    sha = hashlib.sha256
    return b"".join(
        sha(view[offset : offset + chunk_size]).digest()
        for offset in range(0, len(view), chunk_size)
    )


@dataclass(frozen=True, slots=True)
class PreparedWrite:
    """A write checked against every limit that does not depend on what is already stored."""

    data: bytes = field(repr=False)  # never in a repr: a body
    ref: Ref
    media_type: str
    kind: str | None
    tool: str | None
    ttl: float
    sensitivity: Sensitivity
    complete: bool
    classification: str | None
    parent: Ref | None
    chunks: bytes = field(repr=False)
    """The per-chunk digests (:func:`chunk_digests`), computed in the same pass as ``ref``:
    what a stored blob's range reads are checked against (required: empty digests would make
    every range read stale)."""


def _digests(body: bytes) -> tuple[str, bytes]:
    """The SHA-256 of ``body`` and its per-chunk digests, in one pass over the bytes.

    Each chunk is hashed twice (for itself and for the whole) while it is in cache, rather than
    the body being walked twice; a body of one chunk (or none) is its own only chunk.
    """
    if len(body) <= CHUNK_SIZE:
        digest = hashlib.sha256(body).digest()
        return digest.hex(), digest
    whole = hashlib.sha256()
    view = memoryview(body)
    parts = []
    for offset in range(0, len(view), CHUNK_SIZE):
        piece = view[offset : offset + CHUNK_SIZE]
        whole.update(piece)
        parts.append(hashlib.sha256(piece).digest())
    return whole.hexdigest(), b"".join(parts)


class Prehash:
    """The digests of one ``bytes`` body, hashed on a thread of their own from the moment this
    is made, for a put of that very object while the ``with`` block lasts.

    Hashing releases the GIL for each piece it is given, and a put hashes a 16 MiB body in 512
    pieces (the whole and each 64 KiB chunk): started beside Python work that holds the GIL (a
    projection), each piece waits for a switch interval, and the put takes seconds where alone
    it takes milliseconds. The offload starts its hashing beside the credential scan instead
    (RE2 releases the GIL too: the two run on two cores in the time of one), and the put
    that comes later takes the digests made (:func:`prepare_write` waits for them if need be).

    Only the exact object given is known, and only while it is held here (``bytes`` are
    immutable, and the entry holds a reference, so no other object can take its ``id``):
    any other body, equal or not, is hashed by its own put. A thread that cannot be started
    leaves the put to hash as it always does.
    """

    __slots__ = ("_data", "_digests", "_thread")

    def __init__(self, data: bytes) -> None:
        if type(data) is not bytes:
            raise UsageError("only an immutable bytes object can be hashed ahead of its put")
        self._data = data
        self._digests: tuple[str, bytes] | None = None
        self._thread: threading.Thread | None = threading.Thread(
            target=self._run, name="cargohold-hash", daemon=True
        )
        try:
            self._thread.start()
        except RuntimeError:  # no thread to be had: the put hashes, as without this
            self._thread = None

    def _run(self) -> None:
        # A failure (memory) leaves the digests unknown: the put hashes, and raises if it must.
        with contextlib.suppress(Exception):
            self._digests = _digests(self._data)

    def holds(self, data: object) -> bool:
        """Whether ``data`` is the very object hashed here."""
        return data is self._data

    def digests(self) -> tuple[str, bytes] | None:
        """The SHA-256 and the chunk digests of the body, once hashed; ``None`` when hashing
        could not run (the caller hashes)."""
        if self._thread is not None:
            self._thread.join()
        return self._digests

    def ref(self) -> Ref:
        """The body's reference (hashed here when the thread could not)."""
        found = self.digests()
        return Ref(found[0]) if found is not None else Ref.of(self._data)

    def __enter__(self) -> Prehash:
        with _PREHASHED_LOCK:
            _PREHASHED[id(self._data)] = self
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with _PREHASHED_LOCK:
            if _PREHASHED.get(id(self._data)) is self:
                del _PREHASHED[id(self._data)]


_PREHASHED_LOCK = threading.Lock()
_PREHASHED: dict[int, Prehash] = {}
"""The bodies being hashed ahead of their put, by ``id``: each entry holds its body."""


def _known_digests(body: bytes) -> tuple[str, bytes]:
    """The digests of ``body``: those a :class:`Prehash` of this very object made, else its own
    hashing."""
    with _PREHASHED_LOCK:
        ahead = _PREHASHED.get(id(body))
    if ahead is not None and ahead.holds(body):
        found = ahead.digests()
        if found is not None:
            return found
    return _digests(body)


def _label(name: str, value: str | None) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= 128 or not value.isprintable():
        raise UsageError(f"{name} must be a printable string of 1 to 128 characters")
    return value


def _parent(value: Ref | str | None) -> Ref | None:
    """The parent of a write, parsed strictly (a malformed one is an error, never dropped)."""
    if value is None or isinstance(value, Ref):
        return value
    if not isinstance(value, str):
        raise UsageError("parent must be a Ref, its canonical string, or None")
    return Ref.parse(value)


def prepare_write(data: object, request: PutRequest, limits: Limits) -> PreparedWrite:
    """Validate a write and hash it. Raises before anything is stored."""
    body = as_bytes(data)
    sensitivity = check_sensitivity(request.sensitivity)
    media_type = normalize_media_type(request.media_type)
    ttl = limits.check_ttl(request.ttl)
    limits.check_artifact(len(body))
    if not isinstance(request.complete, bool):
        raise UsageError("complete must be a bool")
    parent = _parent(request.parent)
    digest, chunks = _known_digests(body)
    ref = Ref(digest)
    if parent == ref:
        raise UsageError("an artifact cannot be its own parent")
    return PreparedWrite(
        data=body,
        ref=ref,
        media_type=media_type,
        kind=_label("kind", request.kind),
        tool=_label("tool", request.tool),
        ttl=ttl,
        sensitivity=sensitivity,
        complete=request.complete,
        classification=_label("classification", request.classification),
        parent=parent,
        chunks=chunks,
    )


def tenant_quota(limits: Limits) -> tuple[int | None, int | None]:
    """The tenant quota, ``(objects, bytes)``: ``Limits.tenant_objects`` and
    ``Limits.tenant_bytes``, ``None`` for either one not set (the store quota alone binds)."""
    return limits.tenant_objects, limits.tenant_bytes


def check_tenant(limits: Limits, objects: int, size: int, new_size: int) -> None:
    """Refuse a new blob that would put its tenant over the tenant quota, when one is set.

    The message gives the tenant's own figures only: a refusal never tells one tenant what
    another stores (the store quota's refusal names no figure a tenant could learn from).

    Raises:
        LimitExceededError: reason ``tenant_objects`` or ``tenant_bytes``.
    """
    max_objects, max_bytes = tenant_quota(limits)
    if max_objects is not None and objects + 1 > max_objects:
        raise LimitExceededError(
            f"this tenant holds {objects:,} blobs, its limit is {max_objects:,} (raise it with "
            "tenant_objects; expired artifacts count until `cargohold gc`)",
            reason="tenant_objects",
            setting="tenant_objects",
            limit=max_objects,
        )
    if max_bytes is not None and size + new_size > max_bytes:
        raise LimitExceededError(
            f"this tenant would hold {size + new_size:,} bytes, its limit is {max_bytes:,} "
            "(raise it with tenant_bytes; expired artifacts count until `cargohold gc`)",
            reason="tenant_bytes",
            setting="tenant_bytes",
            limit=max_bytes,
        )


def check_store(limits: Limits, objects: int, size: int, new_size: int) -> None:
    """Refuse a new blob that would put the store over its quota, naming no store-wide figure.

    :meth:`Limits.check_store` decides; its refusal is raised again with the limit and the
    setting but without what the store holds, since every tenant meets this refusal and the
    store's figures are every tenant's (``cargohold du --all-tenants`` shows them to an
    operator). The reason, setting and limit stay those of the original.

    Raises:
        LimitExceededError: reason ``store_objects`` or ``store_bytes``.
    """
    try:
        limits.check_store(objects, size, new_size)
    except LimitExceededError as exc:
        unit = "blobs" if exc.reason == "store_objects" else "bytes"
        limit = exc.limit if exc.limit is not None else "its"
        shown = f"{limit:,}" if isinstance(limit, int) else limit
        raise LimitExceededError(
            f"the store is full: its limit is {shown} {unit} for all tenants together (an "
            f"operator raises it with {exc.setting or exc.reason}; expired artifacts count "
            "until `cargohold gc`, and `cargohold du --all-tenants` shows what it holds)",
            reason=exc.reason,
            setting=exc.setting,
            limit=exc.limit,
        ) from None


def clip_range(size: int, start: int, end: int | None) -> tuple[int, int]:
    """Clip ``[start, end)`` to a body of ``size`` bytes.

    Raises:
        UsageError: a negative bound, or ``end`` before ``start``.
    """
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise UsageError("range start must be a non-negative integer")
    if end is not None and (isinstance(end, bool) or not isinstance(end, int) or end < start):
        raise UsageError("range end must be an integer at or after its start")
    stop = size if end is None else min(end, size)
    begin = min(start, stop)
    return begin, stop


def needs_refresh(old_expires: float, now: float, ttl: float) -> bool:
    """Whether a repeated write should extend an artifact's life.

    A repeated write of the same bytes keeps the artifact alive for at least half of the TTL it
    asked for; writing the expiry on every repeat would turn a cheap lookup into a write.
    """
    return old_expires < now + ttl / 2


_RANK = {Sensitivity.PUBLIC: 0, Sensitivity.INTERNAL: 1, Sensitivity.RESTRICTED: 2}


def higher_sensitivity(old: Sensitivity, new: Sensitivity) -> Sensitivity:
    """The sensitivity a record keeps when the same bytes are put again: the higher one.

    Bytes first stored ``internal`` and then by a ``mask`` offload as ``restricted`` must
    become restricted (their reads and their search row masked); a later ``internal`` put
    never lowers a restricted record.
    """
    return new if _RANK.get(new, 2) > _RANK.get(old, 2) else old


def verify_range(
    read_span: Callable[[int, int], bytes],
    chunks: bytes,
    size: int,
    start: int,
    end: int,
    chunk_size: int = CHUNK_SIZE,
) -> bytes | None:
    """Read ``[start, end)`` through ``read_span`` and check every chunk it touches.

    ``read_span(offset, length)`` returns the stored bytes at that place. Returns ``None`` when a
    touched chunk does not hash to its recorded digest, or the stored bytes are short.
    """
    if start == end:
        return b""
    first = start // chunk_size
    last = (end - 1) // chunk_size
    span_start = first * chunk_size
    span_end = min(size, (last + 1) * chunk_size)
    if len(chunks) < (last + 1) * _DIGEST_LEN:
        return None
    span = read_span(span_start, span_end - span_start)
    if len(span) != span_end - span_start:
        return None
    view = memoryview(span)
    for index in range(first, last + 1):
        offset = index * chunk_size - span_start
        piece = view[offset : offset + chunk_size]
        expected = chunks[index * _DIGEST_LEN : (index + 1) * _DIGEST_LEN]
        if hashlib.sha256(piece).digest() != expected:
            return None
    return bytes(view[start - span_start : end - span_start])


RECORD_COLUMNS = (
    "digest, size, media_type, kind, tool, created, expires, sensitivity, complete,"
    " classification, task, worker, agent, parent"
)
"""The artifact columns every SQL backend selects, in the order :func:`record_from_row` reads."""

RECORD_WIDTH = len(RECORD_COLUMNS.split(","))
"""How many values of a row :func:`record_from_row` reads; what a backend selects after them
starts at this index."""


def record_from_row(row: Any) -> ArtifactRecord:
    """An :class:`ArtifactRecord` from the first values of a row in ``RECORD_COLUMNS`` order.

    The parent column holds the canonical reference string (checked by the schema).

    Raises:
        MalformedRowError: a value no write makes (a bad digest, a size or time that is not a
            number, an unknown sensitivity, a parent that is not a reference). The error never
            quotes the value.
    """
    digest, size, media, kind, tool, created, expires, sens, complete, cls, *rest = tuple(row)[
        :RECORD_WIDTH
    ]
    task, worker, agent, parent = rest

    def text(value: object) -> str | None:
        return None if value is None else str(value)

    if not is_digest(digest) or not isinstance(media, str) or complete not in (0, 1):
        raise MalformedRowError(MALFORMED)
    try:
        return ArtifactRecord(
            ref=Ref(digest),
            size=row_int(size),
            media_type=media,
            kind=text(kind),
            tool=text(tool),
            created=_row_time(created),
            expires=_row_time(expires),
            sensitivity=Sensitivity(str(sens)),
            complete=bool(complete),
            classification=text(cls),
            task=text(task),
            worker=text(worker),
            agent=text(agent),
            parent=None if parent is None else Ref.parse(str(parent)),
        )
    except MalformedRowError:
        raise
    except (CargoholdError, ValueError) as exc:
        raise MalformedRowError(MALFORMED) from exc


def record_findings(rows: list[Any]) -> list[Finding]:
    """What is wrong with the index's records: malformed rows, rows without a blob row, and
    rows whose size is not their blob's (a row edited, or pointed at other bytes).

    ``rows`` are records in ``RECORD_COLUMNS`` order followed by the owner's three parts,
    whether a blob row backs the record, and that blob's size. A malformed row's digest is
    never quoted (it may be a path).
    """
    found: list[tuple[str, str, str]] = []
    for row in rows:
        *owner, backed, blob_size = row[RECORD_WIDTH:]
        try:
            record = record_from_row(row)
            if not all(isinstance(part, str) for part in owner):
                raise MalformedRowError(MALFORMED)
        except MalformedRowError:
            found.append(("corrupt", "", "an index record is malformed (never followed)"))
            continue
        if not backed:
            found.append(("missing_blob", record.ref.digest, "a record has no blob row"))
        elif blob_size != record.size:
            found.append(("corrupt", record.ref.digest, "a record's size is not its blob's"))
    return [Finding(kind, digest or None, detail) for kind, digest, detail in sorted(set(found))]


def sound_records(rows: list[Any]) -> list[ArtifactRecord]:
    """The records of ``rows``, leaving out the malformed ones (``verify`` reports them)."""
    records = []
    for row in rows:
        try:
            records.append(record_from_row(row))
        except MalformedRowError:
            continue
    return records
