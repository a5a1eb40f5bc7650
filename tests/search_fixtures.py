"""Interim support for the artifact_search tool tests while the store side lands (H1 builds
``StoreBackend.search`` / ``ScopedStore.search``): a facade search that asks the backend when it
can search, else scans the scope's artifacts. Once every backend searches, the patch is never
applied (``ScopedStore`` has ``search``) and this module can go.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from cargohold import ScopedStore
from cargohold._text import looks_binary


def _scan(scoped: ScopedStore, query: str, limit: int) -> list[Any]:
    terms = [term.lower() for term in query.split()]
    scored = []
    for found in scoped.artifacts():
        read = scoped.read(found.ref)
        if not read.ok or read.data is None or looks_binary(read.data, found.media_type):
            continue
        text = read.data.decode("utf-8", "replace").lower()
        if all(term in text for term in terms):
            score = float(sum(text.count(term) for term in terms))
            scored.append(SimpleNamespace(ref=found.ref, score=score))
    scored.sort(key=lambda hit: (-hit.score, hit.ref.digest))
    return scored[:limit]


def _facade_search(self: ScopedStore, query: str, *, limit: int) -> list[Any]:
    backend: Any = self.store
    if hasattr(backend, "search"):
        return list(backend.search(self.scope, query, limit=limit))
    return _scan(self, query, limit)


def patch_facade_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give ``ScopedStore`` its ``search`` for this test if it has none yet."""
    if not hasattr(ScopedStore, "search"):
        monkeypatch.setattr(ScopedStore, "search", _facade_search, raising=False)
