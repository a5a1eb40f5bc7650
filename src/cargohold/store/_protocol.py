"""The store seam: one small synchronous protocol that every backend implements.

The seam is synchronous: SQLite, files and psycopg's pooled connections are all synchronous at
heart, and an async surface (the MCP server) adapts at its edge with a worker thread rather than
every backend carrying an async twin of each verb.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from cargohold._records import (
    ArtifactRecord,
    Finding,
    GcReport,
    Limits,
    PutRequest,
    PutResult,
    ReadResult,
    Usage,
)
from cargohold._ref import Ref
from cargohold._scope import Scope
from cargohold.store._search import SearchHit

Clock = Callable[[], float]
"""Seconds since the epoch; injected so expiry is testable without sleeping."""

Progress = Callable[[int, int], None]
"""Called with (done, total) during long work such as ``verify`` and ``gc``."""


@runtime_checkable
class StoreBackend(Protocol):
    """An authoritative, content-addressed, owner-scoped artifact store.

    Every verb takes the owner :class:`~cargohold.Scope` explicitly; producers and tools use
    :class:`~cargohold.ScopedStore`, which stamps one scope on every call. Reads return a
    :class:`~cargohold.ReadResult` whose outcome is a value: only ``resolved`` carries bytes, and
    those bytes were verified against the reference's SHA-256 on the way out.

    Contract (checked by :mod:`cargohold.testing`):

    - identical bytes in one tenant are stored once; the same owner writing them again gets
      ``existing=True`` and no second write;
    - another tenant's artifact reads as ``missing``; another session's in the same tenant as
      ``unauthorized``;
    - a write over a limit (the artifact size, the session, tenant or store quota), or of
      refused sensitivity, raises and changes nothing stored;
    - ``touch`` extends a live artifact's life and never shortens it or revives an expired one;
    - ``gc`` removes only expired artifacts, and bytes no live artifact still names;
    - ``verify`` reports and never deletes.
    """

    limits: Limits

    def put(
        self, scope: Scope, data: bytes | bytearray | memoryview, request: PutRequest
    ) -> PutResult:
        """Store ``data`` for ``scope``; durable when this returns."""
        ...

    def stat(self, scope: Scope, ref: Ref) -> ReadResult:
        """The record of ``ref`` for ``scope``, without reading or verifying the bytes.

        The outcome is ``resolved``, ``missing``, ``unauthorized`` or ``expired``.
        """
        ...

    def touch(self, scope: Scope, ref: Ref, ttl: float | None = None) -> ReadResult:
        """Extend the life of ``ref`` for ``scope``: its expiry becomes ``max(expires, now + ttl)``.

        ``ttl`` defaults to ``limits.default_ttl`` and is checked exactly as a put's is (over
        ``limits.max_ttl`` is a usage error), so a touch never shortens a life and never sets one
        longer than a put could. The check and the update are one atomic step: an artifact
        expired (or collected by ``gc``) meanwhile is never reported resolved, and an expired
        artifact stays expired (a touch never revives one). The outcome is that of
        :meth:`stat`: ``resolved`` with the updated record, or ``missing``, ``unauthorized``,
        ``expired``; never any bytes.
        """
        ...

    def read(
        self,
        scope: Scope,
        ref: Ref,
        *,
        start: int = 0,
        end: int | None = None,
        max_bytes: int | None = None,
    ) -> ReadResult:
        """Verified bytes ``[start, end)`` of ``ref`` (``end=None``: to the end of the body).

        A range past the end is clipped to the body. When the answer would be longer than
        ``max_bytes`` the outcome is ``over_budget`` and nothing is read. A whole read verifies the
        SHA-256 of the body; a partial read re-hashes only the chunks it touches.
        """
        ...

    def artifacts(self, scope: Scope) -> list[ArtifactRecord]:
        """Every artifact recorded for the scope's owner, expired ones included, oldest first."""
        ...

    def search(self, scope: Scope, query: str, *, limit: int) -> list[SearchHit]:
        """Ranked full-text search over the scope's own live, text artifacts.

        ``query`` is plain text (never the engine's syntax): its whitespace-separated terms,
        case-insensitive, each matched as whole words (a term of several words, such as
        ``a.b``, as a phrase); an artifact answers when it holds every term. Best first, ties
        by digest, at most ``limit`` (1..100). Only the scope's own (tenant, user, session)
        artifacts answer, and another owner's can change neither the hits nor their scores.
        Binary bodies are not indexed, and a body is indexed by its first
        :data:`~cargohold.store._search.INDEX_BYTES` only (a ``restricted`` one masked).
        Scores are comparable within one answer only: the memory and local backends score
        alike (:func:`~cargohold.store._search.score`); PostgreSQL ranks with ``ts_rank`` and
        indexes at most :data:`~cargohold.store._search.WORDS_CHARS` (UTF-8 bytes) of each
        body's words, so a word past them is not found there.

        Raises:
            UsageError: a blank query, a ``limit`` outside 1..100.
        """
        ...

    def usage(self, scope: Scope) -> Usage:
        """What the scope's session holds toward its quota (unexpired artifacts)."""
        ...

    def tenant_usage(self, scope: Scope) -> Usage:
        """Distinct blobs and bytes the scope's tenant holds, until gc: what counts toward the
        tenant quota (``Limits.tenant_objects`` and ``tenant_bytes``, when set).

        Bytes are deduplicated within a tenant only, so these figures are the tenant's own and
        say nothing of any other tenant: this, not :meth:`store_usage`, is what a tenant may see.
        """
        ...

    def store_usage(self) -> Usage:
        """Distinct blobs and physical bytes the whole store holds, every tenant's, until gc.

        An operator's figure (``cargohold du --all-tenants``): shown to a tenant, it would
        tell it how much every other tenant stores, to the byte.
        """
        ...

    def gc(self, *, dry_run: bool = False, progress: Progress | None = None) -> GcReport:
        """Remove expired artifacts and the bytes no live artifact names. Explicit, no daemon."""
        ...

    def verify(self, *, progress: Progress | None = None) -> list[Finding]:
        """Check every blob against its digest and report what is wrong. Deletes nothing."""
        ...

    def marker_key(self) -> bytes:
        """The store's marker key: 32 secret bytes that bind the stubs and recovered segments
        cargohold renders for this store, so that a tool cannot forge one (see
        :mod:`cargohold._marks`).

        Created on first use and the same for every process that opens this store afterwards;
        never logged or shown.
        """
        ...

    def close(self) -> None:
        """Release connections and file handles. Idempotent."""
        ...
