"""What a backend author implements to run the conformance suite, and the harnesses we ship."""

from __future__ import annotations

import itertools
import weakref
from pathlib import Path
from typing import Protocol

from cargohold._errors import UsageError
from cargohold._records import Limits
from cargohold._ref import Ref
from cargohold.store import Clock, LocalStore, MemoryStore, StoreBackend

_EPOCH = 1_800_000_000.0


class FakeClock:
    """A settable clock for TTL tests without sleeping: call it for "now".

    Args:
        now: The starting time, in seconds since the epoch.
    """

    __slots__ = ("_now",)

    def __init__(self, now: float = _EPOCH) -> None:
        self._now = float(now)

    def __call__(self) -> float:
        return self._now

    def __repr__(self) -> str:
        return f"FakeClock({self._now!r})"

    def advance(self, seconds: float) -> float:
        """Move time forward (never backward) and return the new "now"."""
        if seconds < 0:
            raise UsageError("a clock only moves forward")
        self._now += seconds
        return self._now

    def set(self, now: float) -> None:
        """Jump to ``now`` (forward or backward: tests of clock skew may want either)."""
        self._now = float(now)


class StoreHarness(Protocol):
    """How the conformance suite opens, damages and reopens one kind of backend.

    Attributes:
        name: A short label shown in test ids (``memory``, ``local``, ``postgres``...).
    """

    name: str

    def open(self, *, limits: Limits, clock: Clock) -> StoreBackend:
        """A fresh, empty store with these limits, reading "now" from ``clock``."""
        ...

    def corrupt(self, store: StoreBackend, tenant: str, ref: Ref, offset: int) -> None:
        """Flip the stored byte at ``offset`` of ``ref``'s bytes in ``tenant``, as a disk fault
        would, bypassing the store's own write path."""
        ...

    def reopen(self, store: StoreBackend) -> StoreBackend | None:
        """A new handle on the same data as ``store`` (which may be closed by then), or ``None``
        when the backend's data does not outlive its handle (memory)."""
        ...

    def lose(self, store: StoreBackend, tenant: str, ref: Ref) -> None:
        """Remove the stored bytes of ``ref`` in ``tenant`` and keep every record of them, as a
        deleted file or object would, bypassing the store's own write path."""
        ...


class MemoryHarness:
    """The harness of :class:`~cargohold.MemoryStore`: nothing outlives a handle."""

    name = "memory"

    def __repr__(self) -> str:
        return "MemoryHarness()"

    def open(self, *, limits: Limits, clock: Clock) -> StoreBackend:
        """A fresh, empty :class:`~cargohold.MemoryStore` with these limits and clock."""
        return MemoryStore(limits=limits, clock=clock)

    def corrupt(self, store: StoreBackend, tenant: str, ref: Ref, offset: int) -> None:
        """Flip the byte at ``offset`` of ``ref``'s stored bytes in ``tenant``."""
        if not isinstance(store, MemoryStore):
            raise TypeError("MemoryHarness corrupts MemoryStore instances only")
        store.corrupt_for_tests(tenant, ref, offset)

    def reopen(self, store: StoreBackend) -> StoreBackend | None:
        """``None``: a memory store's data does not outlive its handle."""
        return None

    def lose(self, store: StoreBackend, tenant: str, ref: Ref) -> None:
        """Drop ``ref``'s stored bytes in ``tenant``, keeping every record of them."""
        if not isinstance(store, MemoryStore):
            raise TypeError("MemoryHarness damages MemoryStore instances only")
        store.lose_for_tests(tenant, ref)


class LocalHarness:
    """The harness of :class:`~cargohold.LocalStore`: each store gets its own root under ``base``.

    Args:
        base: A private directory (pytest's ``tmp_path``) to hold the roots of opened stores.
    """

    name = "local"

    def __init__(self, base: str | Path) -> None:
        self._base = Path(base)
        self._counter = itertools.count(1)
        self._opened: weakref.WeakKeyDictionary[LocalStore, tuple[Path, Limits, Clock]] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return "LocalHarness()"

    def _open_at(self, root: Path, limits: Limits, clock: Clock) -> LocalStore:
        store = LocalStore(root, limits=limits, clock=clock)
        self._opened[store] = (root, limits, clock)
        return store

    def open(self, *, limits: Limits, clock: Clock) -> StoreBackend:
        """A fresh, empty :class:`~cargohold.LocalStore` in a new root under ``base``."""
        return self._open_at(self._base / f"store-{next(self._counter)}", limits, clock)

    def corrupt(self, store: StoreBackend, tenant: str, ref: Ref, offset: int) -> None:
        """Flip the byte at ``offset`` of ``ref``'s blob file in ``tenant``, bypassing the
        store's write path."""
        if not isinstance(store, LocalStore):
            raise TypeError("LocalHarness corrupts LocalStore instances only")
        store.corrupt_for_tests(tenant, ref, offset)

    def reopen(self, store: StoreBackend) -> StoreBackend | None:
        """A new handle on ``store``'s root, with the limits and clock it was opened with."""
        if not isinstance(store, LocalStore):
            raise TypeError("LocalHarness reopens LocalStore instances only")
        root, limits, clock = self._opened[store]
        return self._open_at(root, limits, clock)

    def lose(self, store: StoreBackend, tenant: str, ref: Ref) -> None:
        """Delete ``ref``'s blob file in ``tenant``, keeping its index rows."""
        if not isinstance(store, LocalStore):
            raise TypeError("LocalHarness damages LocalStore instances only")
        store.lose_for_tests(tenant, ref)
