"""The scoped store facade: the only way producers and tools touch a store."""

from __future__ import annotations

from cargohold._records import (
    ArtifactRecord,
    PutRequest,
    PutResult,
    ReadResult,
    Sensitivity,
    Usage,
)
from cargohold._ref import Ref
from cargohold._scope import Scope
from cargohold.store._protocol import StoreBackend
from cargohold.store._search import SearchHit


def as_ref(ref: Ref | str) -> Ref:
    """Accept a :class:`Ref` or its canonical string form (parsed strictly)."""
    return ref if isinstance(ref, Ref) else Ref.parse(ref)


class ScopedStore:
    """A store bound to one owner scope.

    It stamps the scope on every write and checks it on every read, so a tool can neither read
    another session's artifact nor forget to attribute one.

    Args:
        store: Any backend implementing :class:`~cargohold.store.StoreBackend`.
        scope: The owner binding; tenant, user and session are required.
    """

    __slots__ = ("_scope", "_store")

    def __init__(self, store: StoreBackend, scope: Scope) -> None:
        if not isinstance(scope, Scope):
            raise TypeError("scope must be a cargohold.Scope")
        self._store = store
        self._scope = scope

    def __repr__(self) -> str:
        return f"ScopedStore({self._store!r})"

    @property
    def scope(self) -> Scope:
        """The owner binding this facade stamps and checks."""
        return self._scope

    @property
    def store(self) -> StoreBackend:
        """The backend behind the facade."""
        return self._store

    def put(
        self,
        data: bytes | bytearray | memoryview,
        *,
        media_type: str | None = None,
        kind: str | None = None,
        tool: str | None = None,
        ttl: float | None = None,
        sensitivity: Sensitivity | str = Sensitivity.INTERNAL,
        complete: bool = True,
        classification: str | None = None,
        parent: Ref | str | None = None,
    ) -> PutResult:
        """Store ``data`` for this scope. See :class:`~cargohold.PutRequest` for the fields."""
        request = PutRequest(
            media_type=media_type,
            kind=kind,
            tool=tool,
            ttl=ttl,
            sensitivity=sensitivity,
            complete=complete,
            classification=classification,
            parent=parent,
        )
        return self._store.put(self._scope, data, request)

    def stat(self, ref: Ref | str) -> ReadResult:
        """The record of ``ref`` if this scope may see it; never reads the bytes."""
        return self._store.stat(self._scope, as_ref(ref))

    def touch(self, ref: Ref | str, ttl: float | None = None) -> ReadResult:
        """Keep ``ref`` alive for at least ``ttl`` more seconds (the store's default TTL when
        ``None``); never shortens its life and never revives an expired one.

        The outcome is :meth:`stat`'s, with the updated record when ``resolved``; never bytes.

        Raises:
            UsageError: a ``ttl`` that is not positive or is over the store's ``max_ttl``.
        """
        return self._store.touch(self._scope, as_ref(ref), ttl)

    def marker_key(self) -> bytes:
        """The backend's marker key (see :meth:`~cargohold.store.StoreBackend.marker_key`)."""
        return self._store.marker_key()

    def read(
        self,
        ref: Ref | str,
        *,
        start: int = 0,
        end: int | None = None,
        max_bytes: int | None = None,
    ) -> ReadResult:
        """Verified bytes ``[start, end)`` of ``ref``, or an outcome without content."""
        return self._store.read(self._scope, as_ref(ref), start=start, end=end, max_bytes=max_bytes)

    def artifacts(self) -> list[ArtifactRecord]:
        """This owner's artifacts, expired ones included, oldest first."""
        return self._store.artifacts(self._scope)

    def search(self, query: str, *, limit: int) -> list[SearchHit]:
        """This scope's artifacts that hold every word of ``query``, best first (see
        :meth:`~cargohold.store.StoreBackend.search`); references and scores, never bytes.

        Raises:
            UsageError: a blank query, a ``limit`` outside 1..100.
        """
        return self._store.search(self._scope, query, limit=limit)

    def usage(self) -> Usage:
        """What this session holds toward its quota."""
        return self._store.usage(self._scope)
