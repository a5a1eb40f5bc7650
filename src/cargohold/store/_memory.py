"""The memory backend: a real store that lives as long as its process (tests, ephemeral runs)."""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, replace

from cargohold._errors import LimitExceededError
from cargohold._marks import check_key, new_key
from cargohold._records import (
    ArtifactRecord,
    Finding,
    GcReport,
    Limits,
    PutRequest,
    PutResult,
    ReadOutcome,
    ReadResult,
    Usage,
)
from cargohold._ref import Ref
from cargohold._scope import Scope
from cargohold.store._core import (
    check_store,
    check_tenant,
    chunk_digests,
    clip_range,
    higher_sensitivity,
    needs_refresh,
    prepare_write,
    verify_range,
)
from cargohold.store._protocol import Clock, Progress
from cargohold.store._search import SearchHit, index_text, ranked, score, search_terms

_Owner = tuple[str, str, str]
_ArtifactKey = tuple[str, str, str, str]  # (tenant, user, session, digest)
_BlobKey = tuple[str, str]  # (tenant, digest)


@dataclass(slots=True)
class _Blob:
    data: bytearray
    chunks: bytes


class MemoryStore:
    """An in-process store with the same contracts as the durable backends.

    Bytes are kept per tenant and deduplicated within it; every read is verified against the
    recorded digests exactly as the local backend's are, so a test that corrupts a blob (see
    :meth:`corrupt_for_tests`) sees ``stale``.

    Args:
        limits: Size, quota and TTL limits.
        clock: Seconds since the epoch (injected in tests).
        marker_key: The 32-byte marker key its stubs and segments are bound to; random when
            omitted (give one to share it with a guard in another place, as tests do).
    """

    def __init__(
        self,
        *,
        limits: Limits | None = None,
        clock: Clock = time.time,
        marker_key: bytes | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self._clock = clock
        self._lock = threading.RLock()
        self._artifacts: dict[_ArtifactKey, ArtifactRecord] = {}
        self._blobs: dict[_BlobKey, _Blob] = {}
        # Running figures, so a put's quota checks do not walk every artifact: each owner's
        # records (expired ones included, until gc removes them: an upper bound of its live
        # ones, made exact only when it would refuse), each tenant's blobs, and all blobs.
        self._owned: dict[_Owner, list[int]] = {}  # owner -> [records, bytes]
        self._held: dict[str, list[int]] = {}  # tenant -> [blobs, bytes]
        self._stored = [0, 0]  # every tenant's [blobs, bytes]
        self._marker_key = new_key() if marker_key is None else check_key(marker_key)

    def __repr__(self) -> str:
        return "MemoryStore()"

    def put(
        self, scope: Scope, data: bytes | bytearray | memoryview, request: PutRequest
    ) -> PutResult:
        """Store ``data`` for ``scope``; see :meth:`StoreBackend.put`.

        The same owner putting the same live bytes again gets ``existing=True`` (its expiry
        extended when due) and bytes lost since (:meth:`lose_for_tests`) put back.

        Raises:
            UsageError: bytes that are not bytes, a bad TTL, media type, label or parent.
            LimitExceededError: over the artifact size, a session, tenant or store quota.
            SensitivityRefusedError: ``secret``, ``credential`` or ``raw_auth`` content.
        """
        write = prepare_write(data, request, self.limits)
        digest = write.ref.digest
        key: _ArtifactKey = (*scope.owner, digest)
        blob_key: _BlobKey = (scope.tenant, digest)
        with self._lock:
            now = self._clock()
            old = self._artifacts.get(key)
            live = old is not None and old.expires > now
            if old is not None and live:
                record = old
                if needs_refresh(old.expires, now, write.ttl):
                    record = replace(record, expires=now + write.ttl)
                sensitivity = higher_sensitivity(old.sensitivity, write.sensitivity)
                if sensitivity is not old.sensitivity:
                    # Searched by its masked copy from now on (the index is made per search).
                    record = replace(record, sensitivity=sensitivity)
                if record is not old:
                    self._artifacts[key] = record
                # A record is a promise only with its bytes: bytes lost since are put back.
                healed = blob_key not in self._blobs
                if healed:
                    self._add_blob(blob_key, write.data)
                return PutResult(write.ref, record, existing=True, blob_written=healed)
            owned = self._owned.get(scope.owner, [0, 0])
            try:
                self.limits.check_session(owned[0], owned[1], len(write.data))
            except LimitExceededError:  # the bound counts expired records: count exactly
                objects, size = self._session_usage(scope.owner, now)
                self.limits.check_session(objects, size, len(write.data))
            blob_written = blob_key not in self._blobs
            if blob_written:
                held = self._held.get(scope.tenant, [0, 0])
                check_tenant(self.limits, held[0], held[1], len(write.data))
                check_store(self.limits, self._stored[0], self._stored[1], len(write.data))
            record = ArtifactRecord(
                ref=write.ref,
                size=len(write.data),
                media_type=write.media_type,
                kind=write.kind,
                tool=write.tool,
                created=now,
                expires=now + write.ttl,
                sensitivity=write.sensitivity,
                complete=write.complete,
                classification=write.classification,
                task=scope.task,
                worker=scope.worker,
                agent=scope.agent,
                parent=write.parent,
            )
            if blob_written:
                self._add_blob(blob_key, write.data)
            if old is None:  # an expired record under the key is replaced: counted already
                counts = self._owned.setdefault(scope.owner, [0, 0])
                counts[0] += 1
                counts[1] += record.size
            self._artifacts[key] = record
            return PutResult(write.ref, record, existing=False, blob_written=blob_written)

    def _add_blob(self, key: _BlobKey, data: bytes) -> None:
        self._blobs[key] = _Blob(bytearray(data), chunk_digests(data))
        held = self._held.setdefault(key[0], [0, 0])
        for counts in (held, self._stored):
            counts[0] += 1
            counts[1] += len(data)

    def _drop_blob(self, key: _BlobKey) -> None:
        blob = self._blobs.pop(key, None)
        if blob is None:
            return
        for counts in (self._held[key[0]], self._stored):
            counts[0] -= 1
            counts[1] -= len(blob.data)

    def _session_usage(self, owner: _Owner, now: float) -> tuple[int, int]:
        objects = size = 0
        for key, record in self._artifacts.items():
            if key[:3] == owner and record.expires > now:
                objects += 1
                size += record.size
        return objects, size

    def _lookup(self, scope: Scope, ref: Ref) -> ReadResult:
        record = self._artifacts.get((*scope.owner, ref.digest))
        if record is None:
            tenant_has_it = any(
                key[0] == scope.tenant and key[3] == ref.digest for key in self._artifacts
            )
            outcome = ReadOutcome.UNAUTHORIZED if tenant_has_it else ReadOutcome.MISSING
            return ReadResult(outcome, ref)
        if record.expires <= self._clock():
            return ReadResult(ReadOutcome.EXPIRED, ref, record=record)
        return ReadResult(ReadOutcome.RESOLVED, ref, record=record)

    def stat(self, scope: Scope, ref: Ref) -> ReadResult:
        """The record of ``ref`` for ``scope`` without reading the bytes; see
        :meth:`StoreBackend.stat`.
        """
        with self._lock:
            return self._lookup(scope, ref)

    def touch(self, scope: Scope, ref: Ref, ttl: float | None = None) -> ReadResult:
        """Extend ``ref``'s life to ``max(expires, now + ttl)``; see :meth:`StoreBackend.touch`.

        Raises:
            UsageError: a TTL out of range.
        """
        extend = self.limits.check_ttl(ttl)
        with self._lock:
            found = self._lookup(scope, ref)
            record = found.record
            if found.outcome is not ReadOutcome.RESOLVED or record is None:
                return found
            expires = max(record.expires, self._clock() + extend)
            if expires != record.expires:
                record = replace(record, expires=expires)
                self._artifacts[(*scope.owner, ref.digest)] = record
            return ReadResult(ReadOutcome.RESOLVED, ref, record=record)

    def read(
        self,
        scope: Scope,
        ref: Ref,
        *,
        start: int = 0,
        end: int | None = None,
        max_bytes: int | None = None,
    ) -> ReadResult:
        """Verified bytes ``[start, end)`` of ``ref``; see :meth:`StoreBackend.read`.

        Raises:
            UsageError: a negative start, or an end before the start.
        """
        with self._lock:
            found = self._lookup(scope, ref)
            record = found.record
            if found.outcome is not ReadOutcome.RESOLVED or record is None:
                return found
            begin, stop = clip_range(record.size, start, end)
            if max_bytes is not None and stop - begin > max_bytes:
                return ReadResult(ReadOutcome.OVER_BUDGET, ref, record=record, start=begin)
            blob = self._blobs.get((scope.tenant, ref.digest))
            if blob is None:
                return ReadResult(ReadOutcome.STALE, ref, record=record, start=begin)
            if begin == 0 and stop == record.size:
                body = bytes(blob.data)
                if len(body) != record.size or hashlib.sha256(body).hexdigest() != ref.digest:
                    return ReadResult(ReadOutcome.STALE, ref, record=record, start=begin)
                return ReadResult(ReadOutcome.RESOLVED, ref, body, record, begin)
            data = blob.data
            part = verify_range(
                lambda offset, length: bytes(data[offset : offset + length]),
                blob.chunks,
                record.size,
                begin,
                stop,
            )
            if part is None:
                return ReadResult(ReadOutcome.STALE, ref, record=record, start=begin)
            return ReadResult(ReadOutcome.RESOLVED, ref, part, record, begin)

    def artifacts(self, scope: Scope) -> list[ArtifactRecord]:
        """Every record of the scope's owner, expired ones included, oldest first."""
        with self._lock:
            found = [r for k, r in self._artifacts.items() if k[:3] == scope.owner]
        return sorted(found, key=lambda r: (r.created, r.ref.digest))

    def search(self, scope: Scope, query: str, *, limit: int) -> list[SearchHit]:
        """Ranked full-text search by a scan over the scope's own live bodies; see
        :meth:`StoreBackend.search`.

        Raises:
            UsageError: a blank query, a ``limit`` outside 1..100.
        """
        terms = search_terms(query, limit)
        with self._lock:
            now = self._clock()
            found: list[SearchHit] = []
            for key, record in self._artifacts.items():
                if key[:3] != scope.owner or record.expires <= now or not terms:
                    continue
                blob = self._blobs.get((scope.tenant, key[3]))
                if blob is None:
                    continue
                text = index_text(bytes(blob.data), record.media_type, record.sensitivity)
                points = None if text is None else score(text, terms)
                if points is not None:
                    found.append(SearchHit(record.ref, points))
        return ranked(found, limit)

    def usage(self, scope: Scope) -> Usage:
        """The session's unexpired artifacts and their bytes (its quota's count)."""
        with self._lock:
            objects, size = self._session_usage(scope.owner, self._clock())
        return Usage(objects, size)

    def tenant_usage(self, scope: Scope) -> Usage:
        """The distinct blobs and bytes of the scope's tenant; see
        :meth:`StoreBackend.tenant_usage`."""
        with self._lock:
            return self._tenant_usage(scope.tenant)

    def _tenant_usage(self, tenant: str) -> Usage:
        blobs, size = self._held.get(tenant, (0, 0))
        return Usage(blobs, size)

    def store_usage(self) -> Usage:
        """Every tenant's distinct blobs and bytes: an operator's figure."""
        with self._lock:
            return Usage(self._stored[0], self._stored[1])

    def gc(self, *, dry_run: bool = False, progress: Progress | None = None) -> GcReport:
        """Remove expired artifacts and the blobs no live artifact names; see
        :meth:`StoreBackend.gc`.
        """
        with self._lock:
            now = self._clock()
            expired = sorted(k for k, r in self._artifacts.items() if r.expires <= now)
            remaining = {(k[0], k[3]) for k, r in self._artifacts.items() if r.expires > now}
            doomed = sorted({(k[0], k[3]) for k in expired} - remaining)
            freed = sum(len(self._blobs[b].data) for b in doomed if b in self._blobs)
            if not dry_run:
                for index, key in enumerate(expired, 1):
                    record = self._artifacts.pop(key)
                    counts = self._owned[key[:3]]
                    counts[0] -= 1
                    counts[1] -= record.size
                    if progress is not None:
                        progress(index, len(expired))
                for blob_key in doomed:
                    self._drop_blob(blob_key)
            return GcReport(len(expired), len(doomed), freed, dry_run)

    def verify(self, *, progress: Progress | None = None) -> list[Finding]:
        """Re-hash every blob and check every record has its bytes; deletes nothing."""
        with self._lock:
            findings: list[Finding] = []
            blobs = sorted(self._blobs.items())
            for index, ((_, digest), blob) in enumerate(blobs, 1):
                body = bytes(blob.data)
                if hashlib.sha256(body).hexdigest() != digest:
                    findings.append(Finding("corrupt", digest, "bytes do not match their digest"))
                elif chunk_digests(body) != blob.chunks:
                    findings.append(Finding("corrupt", digest, "chunk digests do not match"))
                if progress is not None:
                    progress(index, len(blobs))
            for key in sorted(self._artifacts):
                if (key[0], key[3]) not in self._blobs:
                    findings.append(Finding("missing_blob", key[3], "a record has no bytes"))
            return findings

    def marker_key(self) -> bytes:
        """This instance's marker key: the one it was given, else random and gone with the
        instance (as its bytes are)."""
        return self._marker_key

    def close(self) -> None:
        """Nothing to release; the contents live until the object is dropped."""

    def lose_for_tests(self, tenant: str, ref: Ref) -> None:
        """Drop the stored bytes of ``ref`` in ``tenant`` and keep every record, as a deleted
        file would. For tests of ``stale`` and of a put that heals it."""
        with self._lock:
            if (tenant, ref.digest) not in self._blobs:
                raise KeyError(ref.digest)
            self._drop_blob((tenant, ref.digest))

    def corrupt_for_tests(self, tenant: str, ref: Ref, offset: int = 0) -> None:
        """Flip one stored byte, as a disk fault would. For tests of the ``stale`` outcome."""
        with self._lock:
            blob = self._blobs[(tenant, ref.digest)]
            blob.data[offset] ^= 0xFF
