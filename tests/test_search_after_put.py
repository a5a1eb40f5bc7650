"""The local store writes a text put's search row after the put returns, on its indexer thread.

What must hold all the same: a search after a put finds it (in this handle, in another handle,
in another process), no clear text of a body raised to restricted ever enters the index, and
nothing queued is lost at close.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cargohold import LocalStore, Scope, ScopedStore, StoreError
from cargohold.store import _local
from cargohold.testing import FakeClock

ALICE = Scope("tenant-acme", "user-ana", "session-1")
KEY_TEXT = "AKIA" + "Q3EXAMPLEKEY7ZZZ"
KEYED = f"aws key {KEY_TEXT} in config\n".encode() * 20


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_000_000.0)


@contextlib.contextmanager
def _opened(root: Path, clock: FakeClock) -> Iterator[LocalStore]:
    store = LocalStore(root, clock=clock)
    try:
        yield store
    finally:
        store.close()


@contextlib.contextmanager
def _indexer_held(store: LocalStore) -> Iterator[None]:
    """The store's indexer thread waits before each search row it writes until the block ends
    (a search's own catch-up, on the caller's thread, is not held)."""
    gate = threading.Event()
    original = store._write_pending

    def held(*args: Any) -> None:
        if threading.current_thread().name == "cargohold-search-index":
            gate.wait(10)
        original(*args)

    store._write_pending = held  # type: ignore[method-assign]
    try:
        yield
    finally:
        gate.set()


def _rows(root: Path) -> tuple[int, int]:
    """The index's written search rows and its pending ones."""
    with contextlib.closing(sqlite3.connect(root / "index.sqlite3")) as db:
        (docs,) = db.execute("SELECT count(*) FROM search_docs").fetchone()
        (pending,) = db.execute("SELECT count(*) FROM search_pending").fetchone()
    return int(docs), int(pending)


def test_a_put_returns_before_its_search_row_is_written_and_close_writes_it(
    tmp_path: Path, clock: FakeClock
) -> None:
    with _opened(tmp_path, clock) as store, _indexer_held(store):
        ScopedStore(store, ALICE).put(b"a body with a needle in it\n" * 40)
        assert _rows(tmp_path) == (0, 1)  # the record committed, its search row still to come

    assert _rows(tmp_path) == (1, 0)  # the close waited for the indexer


def test_a_search_right_after_a_put_finds_it_while_the_indexer_is_behind(
    tmp_path: Path, clock: FakeClock
) -> None:
    with _opened(tmp_path, clock) as writer, _opened(tmp_path, clock) as reader:
        with _indexer_held(writer):
            ref = ScopedStore(writer, ALICE).put(b"a body with a needle in it\n" * 40).ref

            # Another handle (as another process would) writes the pending row itself.
            hits = ScopedStore(reader, ALICE).search("needle", limit=5)

        assert [hit.ref for hit in hits] == [ref]
        writer._drain()  # white box: the writer's own job, released, finds its row taken
        assert _rows(tmp_path) == (1, 0)
        assert [hit.ref for hit in ScopedStore(writer, ALICE).search("needle", limit=5)] == [ref]


def test_another_owners_pending_row_is_left_to_its_own_search(
    tmp_path: Path, clock: FakeClock
) -> None:
    bob = Scope("tenant-acme", "user-bob", "session-1")
    with (
        _opened(tmp_path, clock) as writer,
        _opened(tmp_path, clock) as reader,
        _indexer_held(writer),
    ):
        ScopedStore(writer, bob).put(b"bob's needle\n" * 40)
        assert ScopedStore(reader, ALICE).search("needle", limit=5) == []
        assert _rows(tmp_path) == (0, 1)


def test_a_body_raised_to_restricted_before_its_row_is_written_is_indexed_masked_only(
    tmp_path: Path, clock: FakeClock
) -> None:
    with _opened(tmp_path, clock) as store:
        scoped = ScopedStore(store, ALICE)
        with _indexer_held(store):
            ref = scoped.put(KEYED).ref  # queued with the clear text
            scoped.put(KEYED, sensitivity="restricted")  # queued again, masked
        store._drain()

        assert scoped.search(KEY_TEXT, limit=5) == []
        assert [hit.ref for hit in scoped.search("config", limit=5)] == [ref]
    with contextlib.closing(sqlite3.connect(tmp_path / "index.sqlite3")) as db:
        bodies = [body for (body,) in db.execute("SELECT body FROM search_text")]
    assert len(bodies) == 1
    assert KEY_TEXT not in bodies[0]


def test_a_pending_row_a_crash_left_is_written_by_the_next_search(
    tmp_path: Path, clock: FakeClock
) -> None:
    with _opened(tmp_path, clock) as store:
        ref = ScopedStore(store, ALICE).put(b"a body with a needle in it\n" * 40).ref
    # What a process that died between its put and its indexer leaves: the row still pending.
    with contextlib.closing(sqlite3.connect(tmp_path / "index.sqlite3")) as db:
        db.execute("DELETE FROM search_text")
        (doc,) = db.execute("SELECT tenant, user, session, digest FROM search_docs").fetchall()
        db.execute("DELETE FROM search_docs")
        db.execute(
            "INSERT INTO search_pending (tenant, user, session, digest) VALUES (?, ?, ?, ?)", doc
        )
        db.commit()

    with _opened(tmp_path, clock) as store:
        assert store.verify() == []  # a row to be written is not a gap
        assert [hit.ref for hit in ScopedStore(store, ALICE).search("needle", limit=5)] == [ref]
    assert _rows(tmp_path) == (1, 0)


def test_gc_of_a_record_whose_row_is_pending_leaves_no_row_behind(
    tmp_path: Path, clock: FakeClock
) -> None:
    with _opened(tmp_path, clock) as store:
        with _indexer_held(store):
            ScopedStore(store, ALICE).put(b"short lived needle\n" * 40, ttl=5)
            clock.advance(6)
            assert store.gc().artifacts == 1
        store._drain()
        assert _rows(tmp_path) == (0, 0)
        assert store.verify() == []


def test_a_put_past_the_indexers_queue_writes_its_row_itself(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_local, "_QUEUE_BYTES", 1000)
    with _opened(tmp_path, clock) as store, _indexer_held(store):
        ScopedStore(store, ALICE).put(b"a body too big for the queue\n" * 100)

        assert _rows(tmp_path) == (1, 0)  # in the put's own transaction


def test_a_full_disk_while_a_put_past_the_queue_indexes_is_a_store_error_not_damage(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: object) -> None:
        error = sqlite3.OperationalError("database or disk is full")
        error.sqlite_errorcode = 13  # type: ignore[attr-defined]  # SQLITE_FULL
        raise error

    monkeypatch.setattr(_local, "_QUEUE_BYTES", 1000)
    with _opened(tmp_path, clock) as store:
        scoped = ScopedStore(store, ALICE)
        monkeypatch.setattr(LocalStore, "_add_doc", staticmethod(full))
        with pytest.raises(StoreError):
            scoped.put(b"a text body while the disk is full\n" * 50)
        monkeypatch.setattr(LocalStore, "_add_doc", _ADD_DOC)
        ref = scoped.put(b"a text body once there is room\n" * 50).ref

        assert not store._search_damaged
        assert [hit.ref for hit in scoped.search("room", limit=5)] == [ref]


_ADD_DOC = LocalStore.__dict__["_add_doc"]
