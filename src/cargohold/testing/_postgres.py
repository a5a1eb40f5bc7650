"""The conformance harness of the PostgreSQL backend.

Importing this module never imports psycopg: the backend is loaded when a store is opened.
"""

from __future__ import annotations

import itertools
import secrets
import weakref
from typing import TYPE_CHECKING

from cargohold._records import Limits
from cargohold._ref import Ref
from cargohold.store import Clock, StoreBackend

if TYPE_CHECKING:
    from cargohold.store._postgres import PostgresStore


class PostgresHarness:
    """Opens each store in its own fresh schema of one database, upgraded to the latest version.

    Args:
        url: A ``postgresql://`` URL of a database the harness may create schemas in (a
            throwaway test database: the schemas are left for the database's owner to drop).
        prefix: The start of every schema name this harness creates.
        max_size: Pool size of each opened store; tests open several stores at once.
        blobs: An ``s3://bucket/prefix`` to run with the object storage tier: each store gets a
            prefix of its own under it (named after its schema). The AWS variables name the
            endpoint and credentials.
        blobs_threshold: The tier's threshold (0: every non-empty body goes to the bucket).
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "conformance",
        max_size: int = 2,
        blobs: str | None = None,
        blobs_threshold: int = 0,
    ) -> None:
        self._url = url
        self._prefix = prefix
        self._max_size = max_size
        self._blobs = None if blobs is None else blobs.rstrip("/")
        self._blobs_threshold = blobs_threshold
        self.name = "postgres" if blobs is None else "postgres+s3"
        self._counter = itertools.count(1)
        self._opened: weakref.WeakKeyDictionary[PostgresStore, tuple[str, Limits, Clock]] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return "PostgresHarness()"

    def _open_in(self, schema: str, limits: Limits, clock: Clock) -> PostgresStore:
        from cargohold.store._postgres import PostgresStore

        store = PostgresStore(
            self._url,
            limits=limits,
            clock=clock,
            schema=schema,
            max_size=self._max_size,
            blobs=None if self._blobs is None else f"{self._blobs}/{schema}",
            blobs_threshold=self._blobs_threshold,
        )
        self._opened[store] = (schema, limits, clock)
        return store

    def open(self, *, limits: Limits, clock: Clock) -> StoreBackend:
        """A fresh, empty :class:`~cargohold.store.PostgresStore` in a new schema (random: many
        harnesses share one database)."""
        from cargohold.store._postgres import upgrade_schema

        # Random, not counted: several harnesses (one per test) share one database.
        schema = f"{self._prefix}_{secrets.token_hex(6)}_{next(self._counter)}"
        upgrade_schema(self._url, schema=schema)
        return self._open_in(schema, limits, clock)

    def corrupt(self, store: StoreBackend, tenant: str, ref: Ref, offset: int) -> None:
        """Flip the byte at ``offset`` of ``ref``'s stored body in ``tenant``, bypassing the
        store's write path."""
        from cargohold.store._postgres import PostgresStore

        if not isinstance(store, PostgresStore):
            raise TypeError("PostgresHarness corrupts PostgresStore instances only")
        store.corrupt_for_tests(tenant, ref, offset)

    def reopen(self, store: StoreBackend) -> StoreBackend | None:
        """A new handle on ``store``'s schema, with the limits and clock it was opened with."""
        from cargohold.store._postgres import PostgresStore

        if not isinstance(store, PostgresStore):
            raise TypeError("PostgresHarness reopens PostgresStore instances only")
        schema, limits, clock = self._opened[store]
        return self._open_in(schema, limits, clock)

    def lose(self, store: StoreBackend, tenant: str, ref: Ref) -> None:
        """Delete ``ref``'s stored body in ``tenant`` (its row or bucket object), keeping its
        records."""
        from cargohold.store._postgres import PostgresStore

        if not isinstance(store, PostgresStore):
            raise TypeError("PostgresHarness damages PostgresStore instances only")
        store.lose_for_tests(tenant, ref)
