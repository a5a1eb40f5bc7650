"""Repository paths in normal form, and an index that answers "what covers or lies below".

A path names a file, or a directory and everything below it. Two paths *overlap* when one
covers the other. Every ownership question of a packet is a question about overlap, so an
authority of thousands of allocations keeps them in a :class:`PathIndex` rather than scanning
them for every path asked.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Generic, TypeVar

_V = TypeVar("_V")

Parts = tuple[str, ...]


# A pure memo (a path always has the same parts): a projection asks about the same few
# thousand paths over and over, and splitting them dominated the build of a large milestone.
@functools.lru_cache(maxsize=1 << 16)
def path_parts(path: str) -> Parts:
    """The parts of a normal path; the root ``.`` has none."""
    return () if path == "." else tuple(path.split("/"))


def covers(outer: str, inner: str) -> bool:
    """Whether ``outer`` is ``inner`` or a directory above it."""
    outer_parts, inner_parts = path_parts(outer), path_parts(inner)
    return inner_parts[: len(outer_parts)] == outer_parts


def overlaps(a: str, b: str) -> bool:
    """Whether two paths share any file: one covers the other."""
    return covers(a, b) or covers(b, a)


def depth(path: str) -> int:
    """How many parts a path has (the root ``.`` has none)."""
    return len(path_parts(path))


def truncate(path: str, parts: int) -> str:
    """The first ``parts`` parts of ``path`` (the path itself when it has no more)."""
    kept = path_parts(path)[:parts]
    return "/".join(kept) if kept else "."


class PathIndex(Generic[_V]):
    """Values keyed by path, answering which cover a path and which lie below it.

    Each path is registered under itself and under every directory above it, so a query costs
    the depth of the asked path plus the size of its answer, whatever the index holds.
    """

    __slots__ = ("_at", "_below")

    def __init__(self, entries: Iterable[tuple[str, _V]]) -> None:
        self._at: dict[Parts, list[_V]] = {}
        self._below: dict[Parts, list[_V]] = {}
        for path, value in entries:
            parts = path_parts(path)
            self._at.setdefault(parts, []).append(value)
            for end in range(len(parts)):
                self._below.setdefault(parts[:end], []).append(value)

    def covering(self, path: str) -> list[_V]:
        """The values at ``path`` or at a directory above it, shallowest first."""
        parts = path_parts(path)
        found: list[_V] = []
        for end in range(len(parts) + 1):
            found.extend(self._at.get(parts[:end], ()))
        return found

    def below(self, path: str) -> list[_V]:
        """The values strictly below ``path``."""
        return list(self._below.get(path_parts(path), ()))

    def overlapping(self, path: str) -> list[_V]:
        """The values that overlap ``path``: covering it, or below it."""
        return self.covering(path) + self.below(path)
