"""A body hashed ahead of its put (``store._core.Prehash``): the offload hashes a large body beside
its credential scan, and the put later takes those digests instead of hashing in 512 pieces
beside the projection. Only the very object hashed is known, only while it is held, and a put
of any other body (an equal copy, the redacted copy of a result) hashes its own bytes."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

import cargohold
import cargohold.store._core as core
from cargohold import LocalStore, MemoryStore, Offloader, Reason, Ref, Scope, ScopedStore
from cargohold._errors import UsageError
from cargohold._offload import OVERLAP_BYTES
from cargohold.store._core import Prehash, chunk_digests

OWNER = Scope("tenant-acme", "user-ana", "session-1")
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token's shape


def _body(size: int, word: str = "entry") -> bytes:
    line = f"2026-12-02T10:00:00Z INFO {word} request served in 12 ms\n".encode()
    return (line * (size // len(line) + 1))[:size]


class Hashes:
    """Counts the store's own hashing of bodies (``_digests``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bodies: list[bytes] = []
        real = core._digests

        def counted(body: bytes) -> tuple[str, bytes]:
            self.bodies.append(body)
            return real(body)

        monkeypatch.setattr(core, "_digests", counted)


def test_a_put_of_the_prehashed_object_takes_its_digests_and_hashes_nothing_more(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    body = _body(300_000)
    ahead = Prehash(body)
    assert ahead.digests() is not None  # hashed on its thread
    hashes = Hashes(monkeypatch)
    store = LocalStore(tmp_path / "store")
    with ahead:
        result = store.put(OWNER, body, cargohold.PutRequest())
    store.close()
    assert hashes.bodies == []
    assert result.ref == Ref(hashlib.sha256(body).hexdigest())


def test_an_equal_copy_of_a_prehashed_body_is_hashed_by_its_own_put(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = _body(300_000)
    copy = bytes(bytearray(body))
    assert copy == body
    assert copy is not body
    ahead = Prehash(body)
    ahead.digests()
    hashes = Hashes(monkeypatch)
    with ahead:
        MemoryStore().put(OWNER, copy, cargohold.PutRequest())
    assert len(hashes.bodies) == 1
    assert hashes.bodies[0] is copy


def test_a_prehashed_body_is_known_only_inside_its_with_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = _body(300_000)
    ahead = Prehash(body)
    with ahead:
        assert {id(body): ahead} == core._PREHASHED
    assert core._PREHASHED == {}
    hashes = Hashes(monkeypatch)
    MemoryStore().put(OWNER, body, cargohold.PutRequest())
    assert len(hashes.bodies) == 1  # after the block, the put hashed for itself


def test_the_prehashed_digests_are_the_stores_own() -> None:
    body = _body(1_000_003)  # a last chunk shorter than the others
    digest, chunks = Prehash(body).digests() or ("", b"")
    assert digest == hashlib.sha256(body).hexdigest()
    assert chunks == chunk_digests(body)


def test_a_prehash_whose_thread_cannot_start_leaves_the_put_to_hash(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    body = _body(300_000)
    with monkeypatch.context() as patch:
        patch.setattr(threading.Thread, "start", refuse)
        ahead = Prehash(body)
    assert ahead.digests() is None
    assert ahead.ref() == Ref(hashlib.sha256(body).hexdigest())
    hashes = Hashes(monkeypatch)
    store = LocalStore(tmp_path / "store")
    with ahead:
        result = store.put(OWNER, body, cargohold.PutRequest())
    store.close()
    assert len(hashes.bodies) == 1
    assert result.ref == Ref(hashlib.sha256(body).hexdigest())


def test_a_hash_that_failed_on_its_thread_leaves_the_put_to_hash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fail(body: bytes) -> tuple[str, bytes]:
        raise MemoryError

    body = _body(300_000)
    with monkeypatch.context() as patch:
        patch.setattr(core, "_digests", fail)
        ahead = Prehash(body)
        assert ahead.digests() is None
    with ahead:
        result = MemoryStore().put(OWNER, body, cargohold.PutRequest())
    assert result.ref == Ref(hashlib.sha256(body).hexdigest())


@pytest.mark.parametrize("mutable", [bytearray(b"x" * 10), memoryview(b"x" * 10)])
def test_only_an_immutable_bytes_object_is_hashed_ahead(mutable: object) -> None:
    with pytest.raises(UsageError, match="immutable bytes"):
        Prehash(mutable)  # type: ignore[arg-type]


def test_a_large_offload_puts_with_the_digests_hashed_beside_its_credential_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = _body(OVERLAP_BYTES + 4096)
    hashes = Hashes(monkeypatch)
    store = MemoryStore()
    result = Offloader(ScopedStore(store, OWNER)).offload(body)
    assert result.reason is Reason.AT_OR_ABOVE_THRESHOLD
    assert result.ref == Ref(hashlib.sha256(body).hexdigest())
    assert [b is body for b in hashes.bodies] == [True]  # once, ahead, not again by the put
    assert core._PREHASHED == {}


def test_a_redacted_large_offload_is_stored_under_the_digest_of_its_redacted_bytes() -> None:
    body = _body(OVERLAP_BYTES + 4096)
    body = body[:1000] + f" token={TOKEN} ".encode() + body[1000:]
    scoped = ScopedStore(MemoryStore(), OWNER)
    result = Offloader(scoped).offload(body)
    assert result.reason is Reason.CREDENTIAL_REDACTED
    assert result.ref is not None
    stored = scoped.read(result.ref, max_bytes=len(body)).data
    assert stored is not None
    assert TOKEN.encode() not in stored
    assert result.ref == Ref(hashlib.sha256(stored).hexdigest())
    assert core._PREHASHED == {}


def test_an_offload_whose_put_fails_leaves_no_body_known(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()

    def refuse(*args: object, **kwargs: object) -> object:
        raise cargohold.StoreUnavailableError("down")

    monkeypatch.setattr(store, "put", refuse)
    result = Offloader(ScopedStore(store, OWNER)).offload(_body(OVERLAP_BYTES + 4096))
    assert result.ref is None
    assert core._PREHASHED == {}


def test_a_body_below_the_overlap_size_is_hashed_once_by_its_put(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = _body(OVERLAP_BYTES - 1)
    hashes = Hashes(monkeypatch)
    Offloader(ScopedStore(MemoryStore(), OWNER)).offload(body)
    assert [b is body for b in hashes.bodies] == [True]
