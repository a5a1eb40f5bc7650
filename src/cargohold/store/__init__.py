"""Store backends and the seam they share.

Pick a backend by URL with :func:`open_store`: ``memory://``, a filesystem path or ``file://``
URL (the local backend), or ``postgresql://`` (the PostgreSQL backend, ``cargohold[postgres]``),
optionally with its bodies in S3-compatible object storage (``blobs="s3://bucket/prefix"``,
``cargohold[s3]``).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from cargohold._errors import ConfigError
from cargohold._records import Limits
from cargohold.store._local import LocalStore, default_root
from cargohold.store._location import DEFAULT_THRESHOLD
from cargohold.store._memory import MemoryStore
from cargohold.store._protocol import Clock, Progress, StoreBackend
from cargohold.store._search import INDEX_BYTES, SearchHit

if TYPE_CHECKING:
    from cargohold.store._postgres import PostgresStore, schema_status, upgrade_schema

__all__ = [
    "INDEX_BYTES",
    "Clock",
    "LocalStore",
    "MemoryStore",
    "PostgresStore",
    "Progress",
    "SearchHit",
    "StoreBackend",
    "default_root",
    "open_store",
    "schema_status",
    "upgrade_schema",
]

_LAZY = frozenset({"PostgresStore", "schema_status", "upgrade_schema"})


def __getattr__(name: str) -> object:
    """The PostgreSQL names, imported on first use: ``import cargohold`` never loads psycopg."""
    if name in _LAZY:
        from cargohold.store import _postgres

        return getattr(_postgres, name)
    raise AttributeError(name)


def open_store(
    url: str | os.PathLike[str] | None = None,
    *,
    limits: Limits | None = None,
    clock: Clock = time.time,
    blobs: str | None = None,
    blobs_threshold: int | None = None,
) -> StoreBackend:
    """Open the store a URL names (no configuration is read here: the store is the lowest
    layer; :func:`cargohold.open_store` resolves the configured store, then calls this).

    Args:
        url: ``memory://``; a path or ``file://`` URL for the local backend; ``""`` or
            ``None`` for the embedded default (local, under the XDG cache directory);
            ``postgresql://`` or ``postgres://`` for the PostgreSQL backend
            (``cargohold[postgres]``).
        limits: Store limits; the defaults when omitted.
        clock: Source of "now" for TTLs.
        blobs: ``s3://bucket/prefix``: the PostgreSQL store keeps bodies larger than
            ``blobs_threshold`` there (``cargohold[s3]``; endpoint and credentials from the
            AWS variables).
        blobs_threshold: Bodies of more than this many bytes go to the bucket (64 KiB).

    Raises:
        ConfigError: an unknown scheme, a PostgreSQL URL without psycopg installed, ``blobs``
            without obstore installed, or ``blobs`` for another backend than PostgreSQL.
    """
    if url is None:
        url = ""
    is_postgres = isinstance(url, str) and url.startswith(("postgresql:", "postgres:"))
    if blobs is not None and not is_postgres:
        raise ConfigError("bodies in object storage (blobs) need the PostgreSQL store")
    if url == "":
        return LocalStore(None, limits=limits, clock=clock)
    if isinstance(url, os.PathLike):
        return LocalStore(url, limits=limits, clock=clock)
    if url == "memory://" or url.startswith("memory:"):
        return MemoryStore(limits=limits, clock=clock)
    if url.startswith("file:"):
        parsed = urlparse(url)
        if parsed.netloc not in ("", "localhost"):
            raise ConfigError("a file:// store URL must name a local path")
        return LocalStore(unquote(parsed.path), limits=limits, clock=clock)
    if url.startswith(("postgresql:", "postgres:")):
        # Imported here: `import cargohold` must not import psycopg. Without it, the import
        # raises a ConfigError naming the extra to install.
        from cargohold.store._postgres import PostgresStore

        if blobs is None:
            return PostgresStore(url, limits=limits, clock=clock)
        return PostgresStore(
            url,
            limits=limits,
            clock=clock,
            blobs=blobs,
            blobs_threshold=DEFAULT_THRESHOLD if blobs_threshold is None else blobs_threshold,
        )
    if "://" in url:
        raise ConfigError(
            "unknown store URL scheme: use memory://, file://, a path or postgresql://"
        )
    return LocalStore(url, limits=limits, clock=clock)
