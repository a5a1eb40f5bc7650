"""The PostgreSQL store with bodies in object storage: where bodies go, how a lost or stray
object is found and healed, how abandoned uploads are collected, and who may open the store.

Against a throwaway PostgreSQL cluster and a throwaway SeaweedFS server on loopback; the
bucket is inspected with obstore directly, never through the store under test.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import cargohold
from cargohold import (
    ConfigError,
    LimitExceededError,
    Limits,
    ReadOutcome,
    Scope,
    ScopedStore,
    StoreError,
)
from cargohold.store._postgres import PostgresStore, upgrade_schema
from cargohold.testing import FakeClock

if TYPE_CHECKING:
    from pg_cluster import PgCluster
    from s3_server import S3Server

pytest_plugins = ["pg_cluster", "s3_server"]

KiB = 1024
ALICE = Scope("tenant-acme", "user-ana", "session-1")
ALICE_LATER = Scope("tenant-acme", "user-ana", "session-2")
BOB = Scope("tenant-acme", "user-bob", "session-1")
OTHER_TENANT = Scope("tenant-other", "user-ana", "session-1")
KEY = re.compile(r"sha256/([0-9a-f]{64})/([0-9a-f]{32})")


def body(size: int, seed: int = 0) -> bytes:
    import random

    return random.Random(f"{seed}:{size}").randbytes(size)


@pytest.fixture
def store_url(pg_url: str) -> str:
    upgrade_schema(pg_url)
    return pg_url


@pytest.fixture
def blobs(s3_env: S3Server) -> str:
    """A bucket prefix of this test's own."""
    return s3_env.url("store")


@pytest.fixture
def open_store(store_url: str, blobs: str, clock: FakeClock) -> Iterator[Any]:
    """Opens stores (hosts) on the test's database and prefix; closes them afterwards."""
    opened: list[PostgresStore] = []

    def opener(**options: Any) -> PostgresStore:
        settings = {"clock": clock, "blobs": blobs, "max_size": 2, **options}
        store = PostgresStore(store_url, **settings)
        opened.append(store)
        return store

    yield opener
    for store in opened:
        store.close()


def objects(blobs: str) -> list[str]:
    """Every key under the prefix, read with obstore itself."""
    import obstore
    from obstore.store import S3Store

    bucket = S3Store.from_url(blobs, client_options={"allow_http": True})
    return sorted(str(meta["path"]) for batch in obstore.list(bucket) for meta in batch)


def raw_bucket(blobs: str) -> Any:
    from obstore.store import S3Store

    return S3Store.from_url(blobs, client_options={"allow_http": True})


def blob_rows(pg_cluster: PgCluster, url: str) -> list[tuple[str, str, bool, str | None]]:
    """(tenant, digest, bytes in the row, object) of every blob row."""
    with pg_cluster.connect(url.rsplit("/", 1)[1]) as conn:  # type: ignore[attr-defined]
        rows = conn.execute(
            "SELECT tenant, digest, data IS NOT NULL, object FROM cargohold.blobs"
            " ORDER BY tenant, digest"
        ).fetchall()
    return [tuple(row) for row in rows]


def test_bodies_over_the_threshold_go_to_the_bucket_and_smaller_ones_stay_in_their_row(
    open_store: Any, blobs: str, store_url: str, pg_cluster: PgCluster
) -> None:
    store = ScopedStore(open_store(blobs_threshold=64 * KiB), ALICE)
    small = store.put(body(64 * KiB))  # at the threshold: not above it
    large = store.put(body(64 * KiB + 1))

    rows = {digest: (in_row, obj) for _, digest, in_row, obj in blob_rows(pg_cluster, store_url)}
    assert rows[small.ref.digest] == (True, None)
    assert rows[large.ref.digest][0] is False
    assert objects(blobs) == [f"sha256/{large.ref.digest}/{rows[large.ref.digest][1]}"]
    assert store.read(large.ref).data == body(64 * KiB + 1)
    assert (
        store.read(large.ref, start=64 * KiB - 3, end=64 * KiB + 1).data
        == body(64 * KiB + 1)[64 * KiB - 3 :]
    )


def test_identical_bytes_from_two_hosts_are_one_object_and_another_tenant_gets_its_own(
    open_store: Any, blobs: str
) -> None:
    first, second = open_store(), open_store()
    data = body(300 * KiB)
    one = ScopedStore(first, ALICE).put(data)
    two = ScopedStore(second, ALICE_LATER).put(data)
    assert (one.blob_written, two.blob_written) == (True, False)
    assert len(objects(blobs)) == 1

    ScopedStore(second, OTHER_TENANT).put(data)
    keys = objects(blobs)
    assert len(keys) == 2
    assert {KEY.fullmatch(key).group(1) for key in keys} == {one.ref.digest}  # type: ignore[union-attr]


def test_object_keys_name_the_digest_and_never_the_owner(open_store: Any, blobs: str) -> None:
    scope = Scope("tenant-secretive", "user-private", "session-hidden", task="task-x")
    ref = ScopedStore(open_store(), scope).put(body(100 * KiB)).ref
    (key,) = objects(blobs)
    found = KEY.fullmatch(key)
    assert found is not None
    assert found.group(1) == ref.digest
    for part in ("secretive", "private", "hidden", "task-x"):
        assert part not in blobs + key


def test_a_body_lost_from_the_bucket_reads_stale_and_verify_reports_it_missing(
    open_store: Any, blobs: str
) -> None:
    import obstore

    store = open_store()
    ref = ScopedStore(store, ALICE).put(body(200 * KiB)).ref
    (key,) = objects(blobs)
    obstore.delete(raw_bucket(blobs), key)

    result = ScopedStore(store, ALICE).read(ref)
    assert (result.outcome, result.data) == (ReadOutcome.STALE, None)
    ranged = ScopedStore(store, ALICE).read(ref, start=10, end=20)
    assert ranged.outcome is ReadOutcome.STALE
    assert [(f.kind, f.digest) for f in store.verify()] == [("missing_blob", ref.digest)]


def test_a_put_of_bytes_whose_object_was_lost_uploads_them_again_and_heals_every_record(
    open_store: Any, blobs: str, clock: FakeClock
) -> None:
    import obstore

    store = open_store()
    data = body(200 * KiB)
    ref = ScopedStore(store, ALICE).put(data).ref
    (lost,) = objects(blobs)
    obstore.delete(raw_bucket(blobs), lost)

    again = ScopedStore(store, BOB).put(data)  # finds the blob row, then no object behind it
    assert again.existing is False
    assert ScopedStore(store, ALICE).read(ref).data == data
    (healed,) = objects(blobs)
    assert healed != lost
    # The lost object's key waits as a delete for gc (should it ever show up again).
    assert [f.kind for f in store.verify()] == []
    store.gc()
    assert store.verify() == []
    assert ScopedStore(store, BOB).read(ref).data == data


def test_an_object_no_row_or_upload_names_is_reported_and_gc_deletes_it_but_no_unknown_key(
    open_store: Any, blobs: str
) -> None:
    import obstore

    store = open_store()
    kept = body(100 * KiB)
    ref = ScopedStore(store, ALICE).put(kept).ref
    stray = "sha256/" + "ab" * 32 + "/" + "cd" * 16
    obstore.put(raw_bucket(blobs), stray, b"not put through the store")
    obstore.put(raw_bucket(blobs), "notes/readme.txt", b"someone else's object")

    findings = sorted((f.kind, f.digest) for f in store.verify())
    assert findings == [("orphan", "ab" * 32), ("unknown", None)]
    store.gc()

    assert stray not in objects(blobs)
    assert "notes/readme.txt" in objects(blobs)
    assert [f.kind for f in store.verify()] == ["unknown"]
    assert ScopedStore(store, ALICE).read(ref).data == kept


def test_an_object_key_is_never_built_from_a_malformed_digest_or_nonce(
    open_store: Any,
) -> None:
    from cargohold.store._blobs import ObjectTier

    for digest, nonce in [
        ("../" * 21 + "x", "cd" * 16),
        ("ab" * 32, "../x"),
        ("AB" * 32, "0" * 32),
    ]:
        with pytest.raises(StoreError):
            ObjectTier.key(digest, nonce)


def test_gc_deletes_the_object_of_a_collected_blob_and_keeps_the_ones_still_named(
    open_store: Any, blobs: str, clock: FakeClock
) -> None:
    store = open_store()
    scoped = ScopedStore(store, ALICE)
    gone = scoped.put(body(100 * KiB, 1), ttl=60).ref
    kept = scoped.put(body(100 * KiB, 2), ttl=3600).ref
    shared = body(100 * KiB, 3)
    scoped.put(shared, ttl=60)
    ScopedStore(store, BOB).put(shared, ttl=3600)
    assert len(objects(blobs)) == 3

    clock.advance(120)
    report = store.gc()
    assert (report.artifacts, report.blobs) == (2, 1)
    digests = {KEY.fullmatch(key).group(1) for key in objects(blobs)}  # type: ignore[union-attr]
    assert gone.digest not in digests
    assert kept.digest in digests
    assert store.verify() == []


def test_an_upload_whose_host_died_before_its_commit_is_staging_until_gc_takes_it(
    open_store: Any, blobs: str, store_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    import blobs_worker

    child = blobs_worker.spawn(
        "crash-after-upload",
        {"url": store_url, "blobs": blobs, "key": 2},
        tmp_path / "child.stderr",
    )
    with child:  # closes its pipes
        reader = blobs_worker.shared.LineReader(child.stdout)
        assert reader.next(60)["op"] == "ready"
        assert child.stdin is not None
        child.stdin.write(b"go\n")
        child.stdin.flush()
        uploaded = reader.next(60)
        assert uploaded["op"] == "uploaded"
        assert child.wait(timeout=60) == 9

    store = open_store(blobs_grace=600)
    assert [(f.kind, f.digest) for f in store.verify()] == [("staging", uploaded["digest"])]
    store.gc()  # within the grace (on the database's clock): it may be a writer still at it
    assert len(objects(blobs)) == 1
    collector = open_store(blobs_grace=0)
    assert (
        ScopedStore(store, Scope(blobs_worker.TENANT, "u-crash", "s-crash"))
        .stat(cargohold.Ref(uploaded["digest"]))
        .outcome
        is ReadOutcome.MISSING
    )
    collector.gc()
    assert objects(blobs) == []
    assert store.verify() == []


def test_a_recent_upload_that_has_not_committed_yet_is_left_to_its_writer(
    open_store: Any, blobs: str, clock: FakeClock
) -> None:
    store = open_store(blobs_grace=600)
    tier = store._tier
    real = tier.upload
    gc_during_upload: list[Any] = []

    def upload_then_gc(digest: str, nonce: str, data: bytes) -> None:
        real(digest, nonce, data)
        gc_during_upload.append(store.gc())  # well inside the grace: must not touch it

    tier.upload = upload_then_gc
    data = body(150 * KiB)
    ref = ScopedStore(store, ALICE).put(data).ref
    assert len(gc_during_upload) == 1
    assert ScopedStore(store, ALICE).read(ref).data == data
    assert store.verify() == []


def test_a_writer_whose_upload_gc_took_for_abandoned_uploads_again_and_keeps_its_promise(
    open_store: Any, blobs: str, clock: FakeClock
) -> None:
    writer = open_store(blobs_grace=600)
    collector = open_store(blobs_grace=0)  # takes every upload not yet committed
    tier = writer._tier
    real = tier.upload
    uploads: list[str] = []

    def upload_then_collected(digest: str, nonce: str, data: bytes) -> None:
        real(digest, nonce, data)
        uploads.append(nonce)
        if len(uploads) == 1:
            collector.gc()  # takes the announced upload and deletes its object

    tier.upload = upload_then_collected
    data = body(150 * KiB)
    put = ScopedStore(writer, ALICE).put(data)
    assert len(uploads) == 2  # the first upload was taken: the put uploaded again
    (key,) = objects(blobs)
    assert key.endswith(uploads[1])
    assert ScopedStore(writer, ALICE).read(put.ref).data == data
    assert writer.verify() == []


def test_a_refused_put_leaves_no_object_behind(open_store: Any, blobs: str) -> None:
    store = open_store(limits=Limits(session_objects=1))
    scoped = ScopedStore(store, ALICE)
    scoped.put(body(100 * KiB, 1))
    with pytest.raises(LimitExceededError):
        scoped.put(body(100 * KiB, 2))
    assert len(objects(blobs)) == 1
    assert store.verify() == []


def test_a_host_configured_for_another_bucket_prefix_or_for_none_refuses_to_open(
    open_store: Any, store_url: str, s3_env: S3Server
) -> None:
    open_store()  # the first host names the store's bucket and prefix
    with pytest.raises(ConfigError):
        PostgresStore(store_url, blobs=s3_env.url("elsewhere"))
    with pytest.raises(ConfigError):
        PostgresStore(store_url)


def test_the_configured_blobs_url_reaches_the_store_a_hold_opens(
    store_url: str, blobs: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARGOHOLD_STORE", store_url)
    monkeypatch.setenv("CARGOHOLD_BLOBS", blobs)
    monkeypatch.setenv("CARGOHOLD_BLOBS_THRESHOLD", "1024")
    text = "\n".join(f"2026-01-01 INFO request {i} served in {i % 97} ms" for i in range(3000))
    with cargohold.open(tenant="acme", user="ana", session="run-1") as hold:
        result = hold.offload(text, tool="read_log")
        assert result.outcome.value == "offloaded"
        assert result.ref is not None
        keys = objects(blobs)
        assert keys == [keys[0]]
        assert KEY.fullmatch(keys[0]).group(1) == result.ref.digest  # type: ignore[union-attr]
        answer = hold.call_tool(
            "artifact_read", {"ref": str(result.ref), "offset": 0, "length": 64}
        )
        assert answer.outcome == "resolved"


def test_concurrent_puts_of_the_same_new_bytes_through_one_handle_store_one_object(
    open_store: Any, blobs: str
) -> None:
    store = open_store(max_size=4)
    data = body(400 * KiB)
    scopes = [Scope("tenant-acme", f"user-{i}", "session-1") for i in range(4)]
    barrier = threading.Barrier(len(scopes), timeout=60)
    results: list[Any] = []

    def put(scope: Scope) -> None:
        barrier.wait()
        results.append(ScopedStore(store, scope).put(data))

    threads = [threading.Thread(target=put, args=(scope,)) for scope in scopes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(results) == 4
    assert sum(result.blob_written for result in results) == 1
    assert len(objects(blobs)) == 1  # the losers' surplus uploads were deleted
    assert store.verify() == []


def test_wrong_credentials_are_a_store_error_naming_no_credential_endpoint_or_bucket(
    store_url: str, s3_env: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
    store = PostgresStore(store_url, blobs=s3_env.url("creds"), retries=0, blobs_timeout=5)
    try:
        with pytest.raises(StoreError) as raised:
            ScopedStore(store, ALICE).put(body(100 * KiB))
        assert raised.value.code == "store"
        text = str(raised.value) + repr(raised.value)
        for secret in ("wrong-secret-value", s3_env.access_key, "127.0.0.1", "cargohold-test"):
            assert secret not in text
        assert repr(store) == "PostgresStore()"
        assert repr(store._tier) == "ObjectTier()"
    finally:
        store.close()


def test_gc_without_the_permission_to_list_the_bucket_still_collects_what_the_rows_name(
    open_store: Any, blobs: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cargohold.store._blobs import ObjectTier

    store = open_store()
    ScopedStore(store, ALICE).put(body(100 * KiB, 41), ttl=60)

    def refused(self: ObjectTier) -> Any:
        raise StoreError("the object store refused the credentials or lacks a permission")
        yield  # a generator, as the real listing is

    clock.advance(120)
    with monkeypatch.context() as patched:
        patched.setattr(ObjectTier, "listing", refused)
        report = store.gc()

    assert (report.artifacts, report.blobs) == (1, 1)
    assert objects(blobs) == []
