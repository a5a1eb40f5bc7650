"""The store contract as plain pytest functions, one behaviour per test.

Star-import this module into a test module that defines a ``store_harness`` fixture (see
:mod:`cargohold.testing`). Every test drives the backend through :class:`~cargohold.ScopedStore`
and the backend's own verbs, reads "now" from a :class:`~cargohold.testing.FakeClock` and never
sleeps.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import math
import random
import threading
from collections.abc import Iterator

import pytest

from cargohold._errors import (
    InvalidReferenceError,
    LimitExceededError,
    ReadError,
    RejectedError,
    SensitivityRefusedError,
    UsageError,
)
from cargohold._facade import ScopedStore
from cargohold._records import (
    CHUNK_SIZE,
    DAY,
    ArtifactRecord,
    Limits,
    ReadOutcome,
    ReadResult,
    Sensitivity,
    Usage,
)
from cargohold._ref import Ref
from cargohold._scope import Scope
from cargohold.store import INDEX_BYTES, StoreBackend
from cargohold.testing._harness import FakeClock, StoreHarness

CHUNK = CHUNK_SIZE
"""The fixed chunk of the per-chunk digests; range and tamper tests straddle its boundaries."""

ALICE = Scope("tenant-acme", "user-ana", "session-1")
ALICE_LATER = Scope("tenant-acme", "user-ana", "session-2")
BOB = Scope("tenant-acme", "user-bob", "session-1")
MALLORY = Scope("tenant-other", "user-ana", "session-1")
"""Another tenant, with the same user and session names as ALICE."""


def body(size: int, seed: int = 0) -> bytes:
    """Deterministic incompressible bytes: a different ``seed`` gives different bytes."""
    return random.Random(f"{seed}:{size}").randbytes(size)


class StoreCase:
    """One test's access to the backend under test: a fake clock and every store it opened.

    Attributes:
        harness: The backend's harness.
        clock: The clock every store opened here reads.
    """

    def __init__(self, harness: StoreHarness, clock: FakeClock) -> None:
        self.harness = harness
        self.clock = clock
        self._opened: list[StoreBackend] = []

    def __repr__(self) -> str:
        return f"StoreCase({self.harness.name!r})"

    def open(self, limits: Limits | None = None) -> StoreBackend:
        """A fresh, empty store (closed when the test ends)."""
        store = self.harness.open(limits=limits or Limits(), clock=self.clock)
        self._opened.append(store)
        return store

    def reopen(self, store: StoreBackend) -> StoreBackend | None:
        """A new handle on ``store``'s data, or ``None`` when the data lives in the handle."""
        again = self.harness.reopen(store)
        if again is not None:
            self._opened.append(again)
        return again

    def corrupt(self, store: StoreBackend, scope: Scope, ref: Ref, offset: int) -> None:
        """Flip one stored byte of ``ref`` in ``scope``'s tenant."""
        self.harness.corrupt(store, scope.tenant, ref, offset)

    def lose(self, store: StoreBackend, scope: Scope, ref: Ref) -> None:
        """Remove the stored bytes of ``ref`` in ``scope``'s tenant, keeping its records."""
        self.harness.lose(store, scope.tenant, ref)

    def close(self) -> None:
        """Close every store opened here."""
        while self._opened:
            self._opened.pop().close()


@pytest.fixture
def store_case(store_harness: StoreHarness) -> Iterator[StoreCase]:
    """The backend under test, named by the ``store_harness`` fixture the importer defines."""
    case = StoreCase(store_harness, FakeClock())
    yield case
    case.close()


@pytest.fixture
def store(store_case: StoreCase) -> StoreBackend:
    """A fresh store with the default limits."""
    return store_case.open()


def _snapshot(store: StoreBackend, *scopes: Scope) -> object:
    """Everything a refused write must leave as it was."""
    return (
        store.store_usage(),
        [store.usage(scope) for scope in scopes],
        [store.artifacts(scope) for scope in scopes],
    )


def _assert_no_content(result: ReadResult) -> None:
    assert result.outcome is not ReadOutcome.RESOLVED
    assert result.data is None
    assert not result.ok
    with pytest.raises(ReadError) as raised:
        result.raise_for_outcome()
    assert raised.value.outcome == result.outcome.value


# -- round trip and addressing ------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, 1000, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17])
def test_put_then_read_returns_the_exact_bytes(store: StoreBackend, size: int) -> None:
    data = body(size)
    scoped = ScopedStore(store, ALICE)
    put = scoped.put(data)

    result = scoped.read(put.ref)

    assert result.outcome is ReadOutcome.RESOLVED
    assert result.data == data
    assert result.start == 0
    assert result.raise_for_outcome() == data


def test_the_ref_is_the_sha256_of_the_stored_bytes(store: StoreBackend) -> None:
    data = body(5000, seed=1)
    put = ScopedStore(store, ALICE).put(data)

    digest = hashlib.sha256(data).hexdigest()
    assert put.ref == Ref(digest)
    assert str(put.ref) == "artifact://sha256/" + digest
    assert put.record.ref == put.ref
    assert put.record.size == len(data)


def test_a_read_accepts_the_canonical_string_form_of_a_ref(store: StoreBackend) -> None:
    scoped = ScopedStore(store, ALICE)
    put = scoped.put(b"by string")

    assert scoped.read(str(put.ref)).data == b"by string"
    with pytest.raises(InvalidReferenceError):
        scoped.read(str(put.ref).upper())


def test_bytearray_and_memoryview_store_the_same_bytes_as_bytes(store: StoreBackend) -> None:
    scoped = ScopedStore(store, ALICE)
    data = body(300, seed=2)

    # ScopedStore.put is annotated `bytes` though every backend takes any bytes-like buffer.
    refs = {scoped.put(data).ref, scoped.put(bytearray(data)).ref}
    refs.add(scoped.put(memoryview(data)).ref)

    assert refs == {Ref.of(data)}
    assert store.store_usage() == Usage(1, len(data))


def test_text_is_refused_until_the_caller_encodes_it(store: StoreBackend) -> None:
    scoped = ScopedStore(store, ALICE)

    with pytest.raises(UsageError):
        scoped.put("not bytes")  # type: ignore[arg-type]  # the error under test

    assert store.store_usage() == Usage(0, 0)


def test_identical_bytes_in_one_scope_give_one_ref_and_are_written_once(
    store: StoreBackend,
) -> None:
    scoped = ScopedStore(store, ALICE)
    data = body(2 * CHUNK, seed=3)

    first = scoped.put(data)
    second = scoped.put(data)

    assert (first.existing, first.blob_written) == (False, True)
    assert (second.existing, second.blob_written) == (True, False)
    assert second.ref == first.ref
    assert store.store_usage() == Usage(1, len(data))
    assert store.usage(ALICE) == Usage(1, len(data))
    assert [record.ref for record in store.artifacts(ALICE)] == [first.ref]


def test_the_same_bytes_in_another_session_of_the_tenant_reuse_the_blob(
    store: StoreBackend,
) -> None:
    data = body(1000, seed=4)
    first = ScopedStore(store, ALICE).put(data)

    later = ScopedStore(store, ALICE_LATER)
    second = later.put(data)

    assert second.ref == first.ref
    assert (second.existing, second.blob_written) == (False, False)
    assert later.read(second.ref).data == data
    assert store.store_usage() == Usage(1, len(data))
    assert store.usage(ALICE_LATER) == Usage(1, len(data))


def test_another_tenant_stores_its_own_copy_of_the_same_bytes(store: StoreBackend) -> None:
    data = body(1000, seed=5)
    ScopedStore(store, ALICE).put(data)
    other = ScopedStore(store, MALLORY)

    assert other.read(Ref.of(data)).outcome is ReadOutcome.MISSING
    put = other.put(data)

    assert (put.existing, put.blob_written) == (False, True)
    assert other.read(put.ref).data == data
    assert store.store_usage() == Usage(2, 2 * len(data))


# -- who may read ---------------------------------------------------------------------------


def test_another_tenants_artifact_reads_exactly_like_one_never_stored(
    store: StoreBackend,
) -> None:
    data = body(100, seed=6)
    ref = ScopedStore(store, ALICE).put(data).ref
    never = Ref.of(b"never stored anywhere")
    other = ScopedStore(store, MALLORY)

    for result in (other.read(ref), other.stat(ref)):
        assert result.outcome is ReadOutcome.MISSING
        assert (result.data, result.record, result.start) == (None, None, 0)
    for verb in (other.read, other.stat):
        denied, absent = verb(ref), verb(never)
        assert (denied.outcome, denied.data, denied.record, denied.start) == (
            absent.outcome,
            absent.data,
            absent.record,
            absent.start,
        )


@pytest.mark.parametrize("reader", [ALICE_LATER, BOB], ids=["other-session", "other-user"])
def test_another_owner_in_the_same_tenant_reads_as_unauthorized(
    store: StoreBackend, reader: Scope
) -> None:
    ref = ScopedStore(store, ALICE).put(body(100, seed=7)).ref
    scoped = ScopedStore(store, reader)

    for result in (scoped.read(ref), scoped.stat(ref)):
        assert result.outcome is ReadOutcome.UNAUTHORIZED
        assert result.record is None
        _assert_no_content(result)


def test_an_unknown_ref_reads_as_missing(store: StoreBackend) -> None:
    scoped = ScopedStore(store, ALICE)
    scoped.put(b"something else")
    ref = Ref.of(b"never stored")

    for result in (scoped.read(ref), scoped.stat(ref)):
        assert result.outcome is ReadOutcome.MISSING
        assert result.ref == ref
        assert result.record is None
        _assert_no_content(result)


def test_no_outcome_but_resolved_carries_content(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    data = body(2 * CHUNK, seed=8)
    ref = scoped.put(data, ttl=100).ref
    tampered = scoped.put(body(10, seed=9)).ref
    store_case.corrupt(store, ALICE, tampered, 3)

    results = [
        scoped.read(Ref.of(b"absent")),
        ScopedStore(store, BOB).read(ref),
        scoped.read(ref, max_bytes=len(data) - 1),
        scoped.read(tampered),
    ]
    store_case.clock.advance(100)
    results.append(scoped.read(ref))

    outcomes = [result.outcome for result in results]
    assert outcomes == [
        ReadOutcome.MISSING,
        ReadOutcome.UNAUTHORIZED,
        ReadOutcome.OVER_BUDGET,
        ReadOutcome.STALE,
        ReadOutcome.EXPIRED,
    ]
    for result in results:
        _assert_no_content(result)


# -- ranges and budgets ---------------------------------------------------------------------

RANGE_BODY_SIZE = 3 * CHUNK + 123
RANGES = [
    (0, 1),
    (10, 100),
    (CHUNK - 1, CHUNK + 1),
    (CHUNK, 2 * CHUNK),
    (CHUNK - 5, 2 * CHUNK + 5),
    (3 * CHUNK, RANGE_BODY_SIZE),
    (2 * CHUNK + 5, None),
    (0, None),
    (5, 5),
    (0, 0),
    (RANGE_BODY_SIZE - 3, RANGE_BODY_SIZE + 1000),
    (RANGE_BODY_SIZE, None),
    (RANGE_BODY_SIZE + 10, RANGE_BODY_SIZE + 20),
]


@pytest.mark.parametrize(("start", "end"), RANGES, ids=[f"{s}:{e}" for s, e in RANGES])
def test_a_range_read_returns_exactly_those_bytes_clipped_to_the_body(
    store: StoreBackend, start: int, end: int | None
) -> None:
    data = body(RANGE_BODY_SIZE, seed=10)
    scoped = ScopedStore(store, ALICE)
    ref = scoped.put(data).ref

    result = scoped.read(ref, start=start, end=end)

    assert result.outcome is ReadOutcome.RESOLVED
    assert result.data == data[start:end]
    assert result.start == min(start, RANGE_BODY_SIZE)
    assert result.record is not None
    assert result.record.size == RANGE_BODY_SIZE


@pytest.mark.parametrize(("start", "end"), [(-1, None), (10, 9), (-5, -1)])
def test_a_malformed_range_is_a_usage_error(
    store: StoreBackend, start: int, end: int | None
) -> None:
    scoped = ScopedStore(store, ALICE)
    ref = scoped.put(body(100)).ref

    with pytest.raises(UsageError):
        scoped.read(ref, start=start, end=end)


def test_a_read_over_its_budget_returns_no_bytes(store: StoreBackend) -> None:
    data = body(2 * CHUNK, seed=11)
    scoped = ScopedStore(store, ALICE)
    ref = scoped.put(data).ref

    whole = scoped.read(ref, max_bytes=len(data) - 1)
    part = scoped.read(ref, start=100, end=200, max_bytes=99)

    for result in (whole, part):
        assert result.outcome is ReadOutcome.OVER_BUDGET
        assert result.record is not None
        assert result.record.size == len(data)
        _assert_no_content(result)
    assert part.start == 100


def test_a_read_exactly_at_its_budget_resolves(store: StoreBackend) -> None:
    data = body(2 * CHUNK, seed=12)
    scoped = ScopedStore(store, ALICE)
    ref = scoped.put(data).ref

    assert scoped.read(ref, max_bytes=len(data)).data == data
    assert scoped.read(ref, start=100, end=200, max_bytes=100).data == data[100:200]
    assert scoped.read(ref, start=len(data) - 10, end=None, max_bytes=10).data == data[-10:]
    assert scoped.read(ref, start=7, end=7, max_bytes=0).data == b""


# -- tamper ---------------------------------------------------------------------------------

TAMPERED_AT = CHUNK + 10
"""The flipped byte of the tamper tests: inside the second chunk."""


def _tampered(store_case: StoreCase) -> tuple[ScopedStore, Ref, bytes]:
    store = store_case.open()
    data = body(3 * CHUNK, seed=13)
    scoped = ScopedStore(store, ALICE)
    ref = scoped.put(data).ref
    store_case.corrupt(store, ALICE, ref, TAMPERED_AT)
    return scoped, ref, data


def test_a_flipped_byte_makes_a_whole_read_stale(store_case: StoreCase) -> None:
    scoped, ref, _ = _tampered(store_case)

    result = scoped.read(ref)

    assert result.outcome is ReadOutcome.STALE
    assert result.record is not None
    assert result.record.ref == ref
    _assert_no_content(result)


@pytest.mark.parametrize(
    ("start", "end"),
    [(CHUNK + 5, CHUNK + 20), (CHUNK - 5, CHUNK + 1), (TAMPERED_AT, TAMPERED_AT + 1), (0, None)],
)
def test_a_range_touching_the_flipped_chunk_is_stale(
    store_case: StoreCase, start: int, end: int | None
) -> None:
    scoped, ref, _ = _tampered(store_case)

    result = scoped.read(ref, start=start, end=end)

    assert result.outcome is ReadOutcome.STALE
    _assert_no_content(result)


@pytest.mark.parametrize(
    ("start", "end"), [(0, 100), (0, CHUNK), (2 * CHUNK, 2 * CHUNK + 100), (2 * CHUNK, None)]
)
def test_a_range_in_an_untouched_chunk_still_resolves(
    store_case: StoreCase, start: int, end: int | None
) -> None:
    scoped, ref, data = _tampered(store_case)

    result = scoped.read(ref, start=start, end=end)

    assert result.outcome is ReadOutcome.RESOLVED
    assert result.data == data[start:end]


LOST_SIZES = [0, 1, CHUNK + 1, 3 * CHUNK]
"""Bodies whose bytes a test loses: empty, tiny, and over a chunk (and over the blob tier's
threshold of 0 in its conformance run)."""


@pytest.mark.parametrize("size", LOST_SIZES)
def test_a_put_by_the_same_owner_after_its_bytes_were_lost_leaves_a_readable_artifact(
    store_case: StoreCase, size: int
) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    data = body(size, seed=21)
    first = scoped.put(data)
    store_case.lose(store, ALICE, first.ref)
    assert scoped.read(first.ref).outcome is ReadOutcome.STALE

    again = scoped.put(data)

    assert again.existing is True
    assert again.blob_written is True
    assert again.record.created == first.record.created
    assert scoped.read(again.ref).data == data
    assert scoped.read(again.ref, start=size // 2).data == data[size // 2 :]
    assert store.usage(ALICE) == Usage(1, size)
    assert store.store_usage().objects == 1
    assert [f.kind for f in store.verify()] == []


def test_a_put_from_another_session_after_the_bytes_were_lost_heals_every_record(
    store_case: StoreCase,
) -> None:
    store = store_case.open()
    data = body(CHUNK + 1, seed=22)
    ref = ScopedStore(store, ALICE).put(data).ref
    store_case.lose(store, ALICE, ref)

    ScopedStore(store, ALICE_LATER).put(data)

    assert ScopedStore(store, ALICE).read(ref).data == data
    assert ScopedStore(store, ALICE_LATER).read(ref).data == data
    assert store.verify() == []


def test_lost_bytes_are_a_missing_blob_finding_of_verify_and_gc_keeps_the_record(
    store_case: StoreCase,
) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    ref = scoped.put(body(100, seed=23)).ref
    store_case.lose(store, ALICE, ref)

    store.gc()

    assert [(f.kind, f.digest) for f in store.verify()] == [("missing_blob", ref.digest)]
    assert scoped.stat(ref).outcome is ReadOutcome.RESOLVED


def test_stat_answers_from_the_record_without_reading_the_bytes(store_case: StoreCase) -> None:
    scoped, ref, data = _tampered(store_case)

    result = scoped.stat(ref)

    assert result.outcome is ReadOutcome.RESOLVED
    assert result.data is None
    assert result.record is not None
    assert result.record.size == len(data)


# -- time to live and gc --------------------------------------------------------------------


def test_an_artifact_expires_when_its_ttl_has_passed(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    put = scoped.put(b"short-lived", ttl=100)

    store_case.clock.advance(99.5)
    assert scoped.read(put.ref).data == b"short-lived"

    store_case.clock.advance(0.5)
    for result in (scoped.read(put.ref), scoped.stat(put.ref)):
        assert result.outcome is ReadOutcome.EXPIRED
        assert result.record == put.record
        _assert_no_content(result)


def test_an_artifact_lives_for_the_default_ttl_when_the_writer_names_none(
    store_case: StoreCase,
) -> None:
    store = store_case.open(Limits(default_ttl=50.0, max_ttl=DAY))
    put = ScopedStore(store, ALICE).put(b"default ttl")

    assert put.record.expires == put.record.created + 50.0
    store_case.clock.advance(50)
    assert ScopedStore(store, ALICE).read(put.ref).outcome is ReadOutcome.EXPIRED


def test_gc_removes_only_expired_artifacts(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    old, young = body(700, seed=14), body(300, seed=15)
    old_ref = scoped.put(old, ttl=100).ref
    young_ref = scoped.put(young, ttl=1000).ref
    store_case.clock.advance(500)

    report = store.gc()

    assert (report.artifacts, report.blobs, report.bytes, report.dry_run) == (1, 1, 700, False)
    assert scoped.read(old_ref).outcome is ReadOutcome.MISSING
    assert scoped.read(young_ref).data == young
    assert [record.ref for record in scoped.artifacts()] == [young_ref]
    assert store.store_usage() == Usage(1, 300)
    assert store.verify() == []


def test_gc_with_nothing_expired_removes_nothing(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    ref = scoped.put(b"kept", ttl=100).ref
    store_case.clock.advance(99)

    report = store.gc()

    assert (report.artifacts, report.blobs, report.bytes) == (0, 0, 0)
    assert scoped.read(ref).data == b"kept"


def test_gc_keeps_bytes_another_live_artifact_still_names(store_case: StoreCase) -> None:
    store = store_case.open()
    data = body(400, seed=16)
    ScopedStore(store, ALICE).put(data, ttl=100)
    later = ScopedStore(store, ALICE_LATER)
    ref = later.put(data, ttl=1000).ref
    store_case.clock.advance(500)

    report = store.gc()

    assert (report.artifacts, report.blobs, report.bytes) == (1, 0, 0)
    assert ScopedStore(store, ALICE).artifacts() == []
    assert ScopedStore(store, ALICE).read(ref).outcome is ReadOutcome.UNAUTHORIZED
    assert later.read(ref).data == data
    assert store.store_usage() == Usage(1, len(data))
    assert store.verify() == []


def test_gc_dry_run_reports_without_changing_anything(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    ref = scoped.put(body(600, seed=17), ttl=100).ref
    scoped.put(body(200, seed=18), ttl=1000)
    store_case.clock.advance(500)
    before = _snapshot(store, ALICE)

    dry = store.gc(dry_run=True)

    assert (dry.artifacts, dry.blobs, dry.bytes, dry.dry_run) == (1, 1, 600, True)
    assert _snapshot(store, ALICE) == before
    assert scoped.read(ref).outcome is ReadOutcome.EXPIRED
    real = store.gc()
    assert (real.artifacts, real.blobs, real.bytes, real.dry_run) == (1, 1, 600, False)


def test_bytes_put_again_after_gc_are_written_again(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    data = body(CHUNK + 1, seed=19)
    scoped.put(data, ttl=10)
    store_case.clock.advance(20)
    store.gc()

    again = scoped.put(data)

    assert (again.existing, again.blob_written) == (False, True)
    assert scoped.read(again.ref).data == data
    assert store.verify() == []


def test_a_put_over_an_expired_artifact_starts_a_fresh_record(store_case: StoreCase) -> None:
    """Whether gc ran in between must not change what the writer gets back."""
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    data = body(100, seed=20)
    scoped.put(data, ttl=10, media_type="text/plain", tool="first")
    now = store_case.clock.advance(20)

    again = scoped.put(data, ttl=100, media_type="text/csv", tool="second")

    assert (again.existing, again.blob_written) == (False, False)
    assert (again.record.created, again.record.expires) == (now, now + 100)
    assert (again.record.media_type, again.record.tool) == ("text/csv", "second")
    assert scoped.stat(again.ref).record == again.record
    assert scoped.read(again.ref).data == data


def test_a_repeated_put_keeps_the_artifact_alive_for_at_least_half_its_ttl(
    store_case: StoreCase,
) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    data = body(100, seed=21)
    first = scoped.put(data, ttl=1000)

    for step in (100, 300, 200, 450, 499, 499, 499):  # each step within the promised half
        now = store_case.clock.advance(step)
        again = scoped.put(data, ttl=1000)
        assert again.existing
        assert again.record.expires >= now + 500
        assert scoped.stat(again.ref).record == again.record
    store_case.clock.advance(499)

    assert store_case.clock() > first.record.expires + 1000
    assert scoped.read(first.ref).data == data


def test_a_repeated_put_never_shortens_an_artifacts_life(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    first = scoped.put(b"long-lived", ttl=1000)

    again = scoped.put(b"long-lived", ttl=10)

    assert again.record.expires == first.record.expires
    store_case.clock.advance(999)
    assert scoped.read(first.ref).data == b"long-lived"


def test_a_repeated_put_with_a_longer_ttl_extends_the_artifact(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    first = scoped.put(b"extended", ttl=10)

    again = scoped.put(b"extended", ttl=1000)

    assert again.record.expires >= first.record.created + 500
    store_case.clock.advance(400)
    assert scoped.read(first.ref).data == b"extended"


# -- touch: extending an artifact's life ------------------------------------------------------


def _assert_touched(result: ReadResult, ref: Ref, expires: float) -> ArtifactRecord:
    """A resolved touch: the updated record, and never any bytes."""
    assert result.outcome is ReadOutcome.RESOLVED
    assert (result.ref, result.data, result.start) == (ref, None, 0)
    assert result.record is not None
    assert result.record.expires == expires
    return result.record


def test_a_touch_keeps_a_live_artifact_past_its_original_expiry(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    put = scoped.put(b"checkpointed", ttl=100)
    now = store_case.clock.advance(90)

    touched = _assert_touched(scoped.touch(put.ref, ttl=100), put.ref, now + 100)

    assert touched == dataclasses.replace(put.record, expires=now + 100)
    assert scoped.stat(put.ref).record == touched
    store_case.clock.advance(99)
    assert scoped.read(put.ref).data == b"checkpointed"
    store_case.clock.advance(1)
    assert scoped.read(put.ref).outcome is ReadOutcome.EXPIRED


def test_a_touch_without_a_ttl_extends_by_the_default_ttl(store_case: StoreCase) -> None:
    store = store_case.open(Limits(default_ttl=50.0, max_ttl=DAY))
    scoped = ScopedStore(store, ALICE)
    put = scoped.put(b"default extension", ttl=10)
    now = store_case.clock.advance(5)

    _assert_touched(scoped.touch(put.ref), put.ref, now + 50)


def test_a_touch_never_shortens_an_artifacts_life(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    put = scoped.put(b"long-lived", ttl=1000)
    store_case.clock.advance(10)

    _assert_touched(scoped.touch(put.ref, ttl=10), put.ref, put.record.expires)

    assert scoped.stat(put.ref).record == put.record
    store_case.clock.advance(989)
    assert scoped.read(put.ref).data == b"long-lived"


def test_a_touch_extends_at_most_to_the_maximum_ttl(store_case: StoreCase) -> None:
    store = store_case.open(Limits(default_ttl=50.0, max_ttl=DAY))
    scoped = ScopedStore(store, ALICE)
    put = scoped.put(b"capped", ttl=10)
    now = store_case.clock.advance(5)

    _assert_touched(scoped.touch(put.ref, ttl=DAY), put.ref, now + DAY)


@pytest.mark.parametrize("ttl", [7 * DAY + 1, math.inf, 0, -1, math.nan])
def test_a_touch_with_a_ttl_out_of_range_is_a_usage_error_and_changes_nothing(
    store: StoreBackend, ttl: float
) -> None:
    # The same rule as a put's: a TTL over the maximum is the caller's mistake, not a wish to
    # be clamped silently.
    scoped = ScopedStore(store, ALICE)
    put = scoped.put(b"kept as it was", ttl=100)
    before = _snapshot(store, ALICE)

    with pytest.raises(UsageError):
        scoped.touch(put.ref, ttl=ttl)

    assert _snapshot(store, ALICE) == before
    assert scoped.stat(put.ref).record == put.record


def test_a_touch_never_revives_an_expired_artifact(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    put = scoped.put(b"gone for good", ttl=10)
    store_case.clock.advance(10)

    result = scoped.touch(put.ref, ttl=1000)

    assert result.outcome is ReadOutcome.EXPIRED
    assert result.record == put.record
    _assert_no_content(result)
    assert scoped.read(put.ref).outcome is ReadOutcome.EXPIRED
    assert store.gc().artifacts == 1
    assert scoped.touch(put.ref).outcome is ReadOutcome.MISSING


def test_a_touched_artifact_survives_gc_and_outlives_its_handle_when_durable(
    store_case: StoreCase,
) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    data = body(300, seed=40)
    put = scoped.put(data, ttl=100)
    store_case.clock.advance(50)
    touched = scoped.touch(put.ref, ttl=1000).record
    store_case.clock.advance(500)

    report = store.gc()

    assert (report.artifacts, report.blobs) == (0, 0)
    assert scoped.read(put.ref).data == data
    again = store_case.reopen(store)
    if again is not None:
        assert ScopedStore(again, ALICE).stat(put.ref).record == touched


def test_the_marker_key_is_32_secret_bytes_stable_for_the_store_and_its_own(
    store_case: StoreCase,
) -> None:
    store = store_case.open()
    before = (store.store_usage(), store.artifacts(ALICE))

    key = store.marker_key()

    assert isinstance(key, bytes)
    assert len(key) == 32
    assert store.marker_key() == key
    assert (store.store_usage(), store.artifacts(ALICE)) == before  # it stores no artifact
    assert key.hex() not in repr(store)
    assert store_case.open().marker_key() != key  # another store, another key
    again = store_case.reopen(store)
    if again is not None:
        assert again.marker_key() == key  # every process that opens the store shares it


def test_first_users_of_a_store_racing_for_its_marker_key_agree_on_one(
    store_case: StoreCase,
) -> None:
    store = store_case.open()
    handles = [store]
    for _ in range(3):
        again = store_case.reopen(store)
        if again is not None:
            handles.append(again)
    barrier = threading.Barrier(8)
    keys: list[bytes] = []
    lock = threading.Lock()

    def first_use(handle: StoreBackend) -> None:
        barrier.wait()
        key = handle.marker_key()
        with lock:
            keys.append(key)

    threads = [
        threading.Thread(target=first_use, args=(handles[n % len(handles)],)) for n in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(keys) == 8
    assert len(set(keys)) == 1


def test_a_touch_changes_no_usage(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    put = scoped.put(body(200, seed=41), ttl=100)
    usage, stored = store.usage(ALICE), store.store_usage()
    store_case.clock.advance(50)

    scoped.touch(put.ref, ttl=1000)

    assert (store.usage(ALICE), store.store_usage()) == (usage, stored)
    assert [record.ref for record in store.artifacts(ALICE)] == [put.ref]


def test_another_tenants_touch_reads_as_missing_and_extends_nothing(
    store_case: StoreCase,
) -> None:
    store = store_case.open()
    put = ScopedStore(store, ALICE).put(body(100, seed=42), ttl=100)
    other = ScopedStore(store, MALLORY)
    store_case.clock.advance(50)

    denied, absent = other.touch(put.ref, ttl=1000), other.touch(Ref.of(b"never stored"))

    assert denied.outcome is ReadOutcome.MISSING
    assert (denied.data, denied.record, denied.start) == (None, None, 0)
    assert (denied.outcome, denied.data, denied.record, denied.start) == (
        absent.outcome,
        absent.data,
        absent.record,
        absent.start,
    )
    assert ScopedStore(store, ALICE).stat(put.ref).record == put.record


@pytest.mark.parametrize("toucher", [ALICE_LATER, BOB], ids=["other-session", "other-user"])
def test_another_owners_touch_in_the_same_tenant_is_unauthorized_and_extends_nothing(
    store_case: StoreCase, toucher: Scope
) -> None:
    store = store_case.open()
    put = ScopedStore(store, ALICE).put(body(100, seed=43), ttl=100)
    store_case.clock.advance(50)

    result = ScopedStore(store, toucher).touch(put.ref, ttl=1000)

    assert result.outcome is ReadOutcome.UNAUTHORIZED
    assert result.record is None
    _assert_no_content(result)
    assert ScopedStore(store, ALICE).stat(put.ref).record == put.record


def test_a_touch_of_an_unknown_ref_is_missing(store: StoreBackend) -> None:
    scoped = ScopedStore(store, ALICE)
    scoped.put(b"something else")

    result = scoped.touch(Ref.of(b"never stored"))

    assert result.outcome is ReadOutcome.MISSING
    assert result.record is None
    _assert_no_content(result)


# -- limits ---------------------------------------------------------------------------------


def _refused(
    store: StoreBackend, scope: Scope, data: bytes, reason: str, *kept: tuple[Scope, Ref, bytes]
) -> None:
    """Assert a put of ``data`` is refused for ``reason`` and changes nothing already stored."""
    scopes = (scope, *(owner for owner, _, _ in kept))
    before = _snapshot(store, *scopes)

    with pytest.raises(LimitExceededError) as raised:
        ScopedStore(store, scope).put(data)

    assert raised.value.reason == reason
    assert _snapshot(store, *scopes) == before
    assert ScopedStore(store, scope).read(Ref.of(data)).outcome in (
        ReadOutcome.MISSING,
        ReadOutcome.UNAUTHORIZED,
    )
    for owner, ref, stored in kept:
        assert ScopedStore(store, owner).read(ref).data == stored


def test_an_artifact_over_the_size_limit_is_refused(store_case: StoreCase) -> None:
    store = store_case.open(Limits(max_artifact_bytes=1000))
    fits = body(1000, seed=22)
    ref = ScopedStore(store, ALICE).put(fits).ref

    _refused(store, ALICE, body(1001, seed=23), "artifact_too_large", (ALICE, ref, fits))


def test_an_artifact_over_the_session_object_quota_is_refused(store_case: StoreCase) -> None:
    store = store_case.open(Limits(session_objects=2))
    scoped = ScopedStore(store, ALICE)
    kept = [(ALICE, scoped.put(data).ref, data) for data in (b"one", b"two")]

    _refused(store, ALICE, b"three", "session_objects", *kept)
    assert scoped.put(b"two").existing  # holding it again is no new object
    assert ScopedStore(store, ALICE_LATER).put(b"three").blob_written


def test_an_artifact_over_the_session_byte_quota_is_refused(store_case: StoreCase) -> None:
    store = store_case.open(Limits(session_bytes=100))
    scoped = ScopedStore(store, ALICE)
    first = body(60, seed=24)
    ref = scoped.put(first).ref

    _refused(store, ALICE, body(41, seed=25), "session_bytes", (ALICE, ref, first))
    assert scoped.put(body(40, seed=26)).ref in {r.ref for r in scoped.artifacts()}
    assert store.usage(ALICE) == Usage(2, 100)


def test_an_artifact_over_the_store_object_quota_is_refused(store_case: StoreCase) -> None:
    store = store_case.open(Limits(store_objects=2))
    kept = [
        (ALICE, ScopedStore(store, ALICE).put(b"alpha").ref, b"alpha"),
        (MALLORY, ScopedStore(store, MALLORY).put(b"beta").ref, b"beta"),
    ]

    _refused(store, BOB, b"gamma", "store_objects", *kept)
    # the same bytes again in a tenant that holds them need no new blob
    assert not ScopedStore(store, ALICE_LATER).put(b"alpha").blob_written
    # deduplication is per tenant: the same bytes in another tenant are a new blob
    _refused(store, MALLORY, b"alpha", "store_objects", *kept)


def test_an_artifact_over_the_store_byte_quota_is_refused(store_case: StoreCase) -> None:
    store = store_case.open(Limits(store_bytes=1000))
    first = body(700, seed=27)
    ref = ScopedStore(store, ALICE).put(first).ref

    _refused(store, MALLORY, body(301, seed=28), "store_bytes", (ALICE, ref, first))
    ScopedStore(store, MALLORY).put(body(300, seed=29))
    assert store.store_usage() == Usage(2, 1000)


def test_expired_artifacts_do_not_count_toward_the_session_quota(store_case: StoreCase) -> None:
    store = store_case.open(Limits(session_objects=1))
    scoped = ScopedStore(store, ALICE)
    scoped.put(b"first", ttl=10)
    store_case.clock.advance(10)

    put = scoped.put(b"second")

    assert scoped.read(put.ref).data == b"second"
    assert store.usage(ALICE) == Usage(1, len(b"second"))


def test_expired_artifacts_count_toward_the_store_quota_until_gc(store_case: StoreCase) -> None:
    store = store_case.open(Limits(store_objects=1))
    ScopedStore(store, ALICE).put(b"first", ttl=10)
    store_case.clock.advance(10)

    with pytest.raises(LimitExceededError) as raised:
        ScopedStore(store, BOB).put(b"second")
    assert raised.value.reason == "store_objects"

    store.gc()
    assert ScopedStore(store, BOB).put(b"second").blob_written


# -- refused writes -------------------------------------------------------------------------

# Named, not derived from Sensitivity.storable: a bug there must fail this suite, not shrink it.
REFUSED = [Sensitivity.SECRET, Sensitivity.CREDENTIAL, Sensitivity.RAW_AUTH]


@pytest.mark.parametrize(
    "sensitivity", [*REFUSED, *(s.value for s in REFUSED)], ids=lambda s: f"{type(s).__name__}-{s}"
)
def test_secret_credential_and_raw_auth_content_is_never_stored(
    store: StoreBackend, sensitivity: Sensitivity | str
) -> None:
    scoped = ScopedStore(store, ALICE)
    data = b"Authorization: Bearer not-a-real-token"

    with pytest.raises(SensitivityRefusedError) as raised:
        scoped.put(data, sensitivity=sensitivity)

    assert raised.value.reason == "sensitivity"
    assert isinstance(raised.value, RejectedError)
    assert scoped.read(Ref.of(data)).outcome is ReadOutcome.MISSING
    assert _snapshot(store, ALICE) == (Usage(0, 0), [Usage(0, 0)], [[]])


@pytest.mark.parametrize(
    "sensitivity", [Sensitivity.PUBLIC, Sensitivity.INTERNAL, Sensitivity.RESTRICTED]
)
def test_public_internal_and_restricted_content_is_stored_and_labelled(
    store: StoreBackend, sensitivity: Sensitivity
) -> None:
    scoped = ScopedStore(store, ALICE)

    put = scoped.put(b"labelled", sensitivity=sensitivity.value)

    assert put.record.sensitivity is sensitivity
    assert scoped.stat(put.ref).record == put.record


def test_an_unknown_sensitivity_is_a_usage_error(store: StoreBackend) -> None:
    with pytest.raises(UsageError) as raised:
        ScopedStore(store, ALICE).put(b"x", sensitivity="top-secret")

    assert not isinstance(raised.value, RejectedError)
    assert store.store_usage() == Usage(0, 0)


@pytest.mark.parametrize("ttl", [7 * DAY + 1, math.inf, 0, -1, math.nan])
def test_a_ttl_out_of_range_is_a_usage_error_and_stores_nothing(
    store: StoreBackend, ttl: float
) -> None:
    scoped = ScopedStore(store, ALICE)

    with pytest.raises(UsageError):
        scoped.put(b"x", ttl=ttl)

    assert _snapshot(store, ALICE) == (Usage(0, 0), [Usage(0, 0)], [[]])


def test_a_ttl_of_exactly_the_maximum_is_accepted(store_case: StoreCase) -> None:
    store = store_case.open()
    put = ScopedStore(store, ALICE).put(b"x", ttl=store.limits.max_ttl)

    assert put.record.expires == put.record.created + 7 * DAY


def test_a_malformed_media_type_is_a_usage_error(store: StoreBackend) -> None:
    with pytest.raises(UsageError):
        ScopedStore(store, ALICE).put(b"x", media_type="not a media type")

    assert store.store_usage() == Usage(0, 0)


# -- verify ---------------------------------------------------------------------------------


def test_verify_of_a_sound_store_finds_nothing(store: StoreBackend) -> None:
    for index, scope in enumerate((ALICE, ALICE_LATER, BOB, MALLORY)):
        scoped = ScopedStore(store, scope)
        scoped.put(b"")
        scoped.put(body(index * CHUNK + 5, seed=index))
        scoped.put(b"shared")

    assert store.verify() == []


def test_verify_reports_a_flipped_byte_and_deletes_nothing(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    sound = scoped.put(body(100, seed=30))
    tampered = scoped.put(body(2 * CHUNK, seed=31))
    store_case.corrupt(store, ALICE, tampered.ref, 2 * CHUNK - 1)
    before = _snapshot(store, ALICE)

    findings = store.verify()

    assert [(f.kind, f.digest) for f in findings] == [("corrupt", tampered.ref.digest)]
    assert store.verify() == findings
    assert _snapshot(store, ALICE) == before
    assert scoped.read(tampered.ref).outcome is ReadOutcome.STALE
    assert scoped.read(sound.ref).outcome is ReadOutcome.RESOLVED


def test_gc_keeps_a_corrupt_artifact_that_has_not_expired(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    ref = scoped.put(body(100, seed=32), ttl=100).ref
    store_case.corrupt(store, ALICE, ref, 0)
    store_case.clock.advance(50)

    report = store.gc()

    assert (report.artifacts, report.blobs) == (0, 0)
    assert [(f.kind, f.digest) for f in store.verify()] == [("corrupt", ref.digest)]


# -- keys compare as tuples -----------------------------------------------------------------

LOOKALIKES = [
    (("a", "bc", "s"), ("ab", "c", "s")),
    (("t", "a", "bc"), ("t", "ab", "c")),
    (("t", "ua", "b"), ("t", "u", "ab")),
    (("a:b", "c", "d"), ("a", "b:c", "d")),
    (("a/b", "c", "d"), ("a", "b/c", "d")),
    (("t", "u|s", "x"), ("t", "u", "s|x")),
]


@pytest.mark.parametrize(("first", "second"), LOOKALIKES, ids=lambda p: "|".join(p))
def test_owners_whose_parts_concatenate_alike_never_collide(
    store: StoreBackend, first: tuple[str, str, str], second: tuple[str, str, str]
) -> None:
    one, two = ScopedStore(store, Scope(*first)), ScopedStore(store, Scope(*second))
    same_tenant = first[0] == second[0]
    data = body(100, seed=33)
    ref = one.put(data).ref

    expected = ReadOutcome.UNAUTHORIZED if same_tenant else ReadOutcome.MISSING
    assert two.read(ref).outcome is expected
    assert two.artifacts() == []
    assert two.usage() == Usage(0, 0)

    put = two.put(data)
    assert (put.existing, put.blob_written) == (False, not same_tenant)
    assert [r.ref for r in one.artifacts()] == [r.ref for r in two.artifacts()] == [ref]
    assert one.read(ref).data == two.read(ref).data == data


# -- persistence ----------------------------------------------------------------------------


def test_stored_artifacts_outlive_their_handle_exactly_when_the_backend_is_durable(
    store_case: StoreCase,
) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    data = body(2 * CHUNK + 1, seed=34)
    put = scoped.put(data, media_type="text/csv", tool="export", parent=Ref.of(b"its source"))
    listed, usage = scoped.artifacts(), store.store_usage()

    again = store_case.reopen(store)

    if again is None:
        # The data lives in the handle: a new store starts empty, the first keeps its data.
        fresh = ScopedStore(store_case.open(), ALICE)
        assert fresh.read(put.ref).outcome is ReadOutcome.MISSING
        assert fresh.artifacts() == []
        assert scoped.read(put.ref).data == data
    else:
        store.close()
        reopened = ScopedStore(again, ALICE)
        assert reopened.read(put.ref).data == data
        assert reopened.read(put.ref, start=CHUNK, end=CHUNK + 2).data == data[CHUNK : CHUNK + 2]
        assert reopened.artifacts() == listed
        assert again.store_usage() == usage
        assert again.verify() == []


def test_a_second_handle_sees_the_first_handles_writes_at_once(store_case: StoreCase) -> None:
    store = store_case.open()
    second = store_case.reopen(store) or store  # a memory store has only the one handle
    ref = ScopedStore(store, ALICE).put(b"visible", ttl=10).ref

    assert ScopedStore(second, ALICE).read(ref).data == b"visible"
    assert not ScopedStore(second, ALICE).put(b"visible", ttl=10).blob_written
    store_case.clock.advance(10)
    assert second.gc().blobs == 1
    assert ScopedStore(store, ALICE).read(ref).outcome is ReadOutcome.MISSING


def test_close_may_be_called_twice(store_case: StoreCase) -> None:
    store = store_case.open()
    ScopedStore(store, ALICE).put(b"x")

    store.close()
    store.close()


# -- listing, usage and records -------------------------------------------------------------


def test_artifacts_lists_only_the_owners_records_oldest_first(store_case: StoreCase) -> None:
    store = store_case.open()
    mine = ScopedStore(store, ALICE)
    second = mine.put(b"zzz written first", ttl=10).ref
    store_case.clock.advance(1)
    first = mine.put(b"aaa written second").ref
    ScopedStore(store, ALICE_LATER).put(b"another session")
    ScopedStore(store, BOB).put(b"another user")
    ScopedStore(store, MALLORY).put(b"another tenant")
    store_case.clock.advance(20)

    assert [record.ref for record in mine.artifacts()] == [second, first]
    assert [record.ref for record in store.artifacts(MALLORY)] == [
        Ref.of(b"another tenant"),
    ]


def test_usage_counts_the_sessions_live_artifacts_and_store_usage_the_blobs(
    store_case: StoreCase,
) -> None:
    store = store_case.open()
    mine, later = ScopedStore(store, ALICE), ScopedStore(store, ALICE_LATER)
    mine.put(b"12345", ttl=10)
    mine.put(b"1234567890")
    later.put(b"1234567890")
    ScopedStore(store, MALLORY).put(b"1234567890")

    assert mine.usage() == Usage(2, 15)
    assert later.usage() == Usage(1, 10)
    assert store.store_usage() == Usage(3, 25)

    store_case.clock.advance(10)
    assert mine.usage() == Usage(1, 10)
    assert store.store_usage() == Usage(3, 25)
    store.gc()
    assert store.store_usage() == Usage(2, 20)


def test_tenant_usage_counts_the_tenants_own_blobs_and_nothing_of_another_tenant(
    store_case: StoreCase,
) -> None:
    store = store_case.open()
    ScopedStore(store, ALICE).put(b"1234567890")
    ScopedStore(store, ALICE_LATER).put(b"1234567890")  # the same blob, counted once
    ScopedStore(store, BOB).put(b"12345")
    mallory = ScopedStore(store, MALLORY)
    mallory.put(b"1234567890")
    before = store.tenant_usage(ALICE)

    mallory.put(body(1000, seed=31))

    assert before == store.tenant_usage(BOB) == Usage(2, 15)
    assert store.tenant_usage(ALICE) == before
    assert store.tenant_usage(MALLORY) == Usage(2, 1010)
    assert store.store_usage() == Usage(4, 1025)


def test_a_tenant_over_its_byte_quota_is_refused_while_another_tenant_still_writes(
    store_case: StoreCase,
) -> None:
    store = store_case.open(Limits(tenant_bytes=100))
    held = body(100, seed=32)
    ref = ScopedStore(store, MALLORY).put(held).ref

    _refused(store, MALLORY, b"one byte more", "tenant_bytes", (MALLORY, ref, held))
    # Another user of the same tenant shares its quota.
    _refused(store, Scope(MALLORY.tenant, "user-eve", "session-9"), b"x", "tenant_bytes")
    assert ScopedStore(store, ALICE).put(held).blob_written is True  # its own copy
    assert store.tenant_usage(ALICE) == store.tenant_usage(MALLORY) == Usage(1, 100)


def test_a_store_quota_refusal_tells_a_tenant_nothing_of_what_other_tenants_hold(
    store_case: StoreCase,
) -> None:
    store = store_case.open(Limits(store_bytes=10_000, store_objects=4))
    for size, seed in ((7_777, 37), (1_111, 38), (11, 39)):
        ScopedStore(store, MALLORY).put(body(size, seed=seed))
    alice = ScopedStore(store, ALICE)

    refusals = []
    with pytest.raises(LimitExceededError) as raised:
        alice.put(body(2_000, seed=40))
    refusals.append(raised.value)
    alice.put(b"x")
    with pytest.raises(LimitExceededError) as raised:
        alice.put(b"y")
    refusals.append(raised.value)

    assert [exc.reason for exc in refusals] == ["store_bytes", "store_objects"]
    for exc in refusals:
        text = str(exc).replace(",", "")
        for figure in ("7777", "1111", "8899", "8900", "10899", "store holds", "would hold"):
            assert figure not in text


def test_a_tenant_over_its_object_quota_is_refused_but_may_reuse_its_own_blobs(
    store_case: StoreCase,
) -> None:
    store = store_case.open(Limits(tenant_objects=2))
    first, second = body(10, seed=34), body(10, seed=35)
    ref = ScopedStore(store, ALICE).put(first).ref
    ScopedStore(store, ALICE).put(second)

    _refused(store, ALICE, body(10, seed=36), "tenant_objects", (ALICE, ref, first))
    assert ScopedStore(store, BOB).put(first).blob_written is False  # no new blob: allowed
    assert ScopedStore(store, MALLORY).put(body(10, seed=36)).blob_written is True


def test_record_fields_round_trip_with_the_media_type_normalized(store_case: StoreCase) -> None:
    store = store_case.open()
    scope = Scope("tenant-acme", "user-ana", "session-1", task="t-1", worker="w-1", agent="a-1")
    scoped = ScopedStore(store, scope)
    now = store_case.clock()

    put = scoped.put(
        b"id,total\n1,2.5\n",
        media_type=' Text/CSV ; Charset="UTF-8"; header=present',
        kind="csv",
        tool="list_orders",
        ttl=3600,
        sensitivity="restricted",
        complete=False,
        classification="compressible",
    )

    expected = ArtifactRecord(
        ref=Ref.of(b"id,total\n1,2.5\n"),
        size=15,
        media_type="text/csv; charset=utf-8",
        kind="csv",
        tool="list_orders",
        created=now,
        expires=now + 3600,
        sensitivity=Sensitivity.RESTRICTED,
        complete=False,
        classification="compressible",
        task="t-1",
        worker="w-1",
        agent="a-1",
        parent=None,
    )
    assert put.record == expected
    assert scoped.stat(put.ref).record == expected
    assert scoped.read(put.ref).record == expected
    assert scoped.artifacts() == [expected]


def test_a_record_without_hints_takes_the_defaults(store: StoreBackend) -> None:
    put = ScopedStore(store, ALICE).put(b"\x00\x01")

    record = put.record
    assert record.media_type == "application/octet-stream"
    assert (record.kind, record.tool, record.classification) == (None, None, None)
    assert (record.task, record.worker, record.agent) == (None, None, None)
    assert record.parent is None
    assert record.sensitivity is Sensitivity.INTERNAL
    assert record.complete is True


# -- derived artifacts: the parent ------------------------------------------------------------


def test_a_derived_artifact_records_its_parent_on_every_read_path(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    original = scoped.put(b'{"rows": [1, 2, 3]}', media_type="application/json")

    derived = scoped.put(b'{"rows": [1, 2, 4]}', parent=original.ref)

    assert derived.record.parent == original.ref
    assert original.record.parent is None
    assert scoped.stat(derived.ref).record == derived.record
    assert scoped.read(derived.ref).record == derived.record
    assert scoped.read(derived.ref, start=2, end=6).record == derived.record
    assert scoped.touch(derived.ref).record.parent == original.ref  # type: ignore[union-attr]
    assert [r.parent for r in scoped.artifacts()] == [None, original.ref]


def test_a_parent_given_as_its_canonical_string_is_recorded_as_the_same_ref(
    store: StoreBackend,
) -> None:
    scoped = ScopedStore(store, ALICE)
    parent = Ref.of(b"the parent")

    put = scoped.put(b"the child", parent=str(parent))

    assert put.record.parent == parent
    assert scoped.stat(put.ref).record == put.record


@pytest.mark.parametrize(
    "parent",
    [
        "sha256:" + "a" * 64,
        "artifact://sha256/" + "A" * 64,
        "artifact://sha256/" + "a" * 63,
        " artifact://sha256/" + "a" * 64,
        "a" * 64,
        42,
    ],
)
def test_a_malformed_parent_is_a_usage_error_and_stores_nothing(
    store: StoreBackend, parent: object
) -> None:
    scoped = ScopedStore(store, ALICE)
    before = _snapshot(store, ALICE)

    with pytest.raises(UsageError):
        scoped.put(b"the child", parent=parent)  # type: ignore[arg-type]

    assert _snapshot(store, ALICE) == before


def test_an_artifact_cannot_be_its_own_parent(store: StoreBackend) -> None:
    scoped = ScopedStore(store, ALICE)
    before = _snapshot(store, ALICE)

    with pytest.raises(UsageError):
        scoped.put(b"myself", parent=Ref.of(b"myself"))

    assert _snapshot(store, ALICE) == before


def test_identical_bytes_put_again_keep_the_first_records_parent(store_case: StoreCase) -> None:
    """One artifact, one history: a repeated put of live bytes changes no field but the expiry,
    whatever parent it names (or none)."""
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    first_parent, other_parent = Ref.of(b"parent one"), Ref.of(b"parent two")
    first = scoped.put(b"derived twice", parent=first_parent)

    with_other = scoped.put(b"derived twice", parent=other_parent)
    without = scoped.put(b"derived twice")

    assert with_other.existing
    assert without.existing
    assert with_other.record.parent == without.record.parent == first_parent
    assert scoped.stat(first.ref).record == first.record

    produced = scoped.put(b"produced by a tool")
    later = scoped.put(b"produced by a tool", parent=first_parent)
    assert later.existing
    assert later.record.parent is None
    assert produced.record.parent is None


def test_a_put_over_an_expired_record_takes_its_own_parent(store_case: StoreCase) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    old_parent, new_parent = Ref.of(b"old parent"), Ref.of(b"new parent")
    scoped.put(b"derived", parent=old_parent, ttl=10)
    store_case.clock.advance(20)

    again = scoped.put(b"derived", parent=new_parent, ttl=100)

    assert not again.existing
    assert again.record.parent == new_parent
    assert scoped.stat(again.ref).record == again.record


def test_each_owner_records_its_own_parent_for_the_same_bytes(store: StoreBackend) -> None:
    alice, later, bob = (ScopedStore(store, scope) for scope in (ALICE, ALICE_LATER, BOB))
    parent = Ref.of(b"alice's parent")

    alice.put(b"shared bytes", parent=parent)
    later.put(b"shared bytes")
    bob_put = bob.put(b"shared bytes", parent=Ref.of(b"bob's parent"))

    assert alice.stat(bob_put.ref).record.parent == parent  # type: ignore[union-attr]
    assert later.stat(bob_put.ref).record.parent is None  # type: ignore[union-attr]
    assert bob_put.record.parent == Ref.of(b"bob's parent")


# -- privacy --------------------------------------------------------------------------------


def test_no_repr_shows_the_body_or_the_owner(store_case: StoreCase) -> None:
    canaries = [
        "body-canary-5d1f",
        "tenant-canary-8a2c",
        "user-canary-3e7b",
        "session-canary-9c4d",
        "task-canary-1b6e",
        "worker-canary-7f0a",
        "agent-canary-2d9c",
    ]
    store = store_case.open()
    scope = Scope(*canaries[1:])
    scoped = ScopedStore(store, scope)
    data = (canaries[0] + "\n").encode() * 50
    put = scoped.put(data, ttl=10)
    store_case.corrupt(store, scope, scoped.put(canaries[0].encode()).ref, 0)

    shown: list[object] = [
        scope,
        scoped,
        store,
        put,
        put.record,
        scoped.read(put.ref),
        scoped.read(put.ref, start=0, end=30),
        scoped.stat(put.ref),
        scoped.artifacts(),
        scoped.usage(),
        store.store_usage(),
        store.verify(),
        store.gc(dry_run=True),
    ]
    store_case.clock.advance(10)
    shown.append(scoped.read(put.ref))

    for item in shown:
        for text in (repr(item), str(item)):
            for canary in canaries:
                assert canary not in text


# -- search ---------------------------------------------------------------------------------


def _answer(scoped: ScopedStore, query: str, limit: int = 100) -> list[tuple[str, float]]:
    return [(hit.ref.digest, hit.score) for hit in scoped.search(query, limit=limit)]


def test_search_finds_the_artifacts_holding_every_term_best_first(store: StoreBackend) -> None:
    scoped = ScopedStore(store, ALICE)
    many = scoped.put(b"disk full: error error error on /var\n").ref
    once = scoped.put(b"an error here\nand the disk\n" + b"filler words " * 200).ref
    scoped.put(b"an error without the other word\n")
    scoped.put(b"nothing of interest\n")

    hits = scoped.search("DISK error", limit=10)

    assert [hit.ref for hit in hits] == [many, once]
    assert hits[0].score > hits[1].score > 0


def test_search_matches_whole_words_and_escapes_the_engines_syntax(store: StoreBackend) -> None:
    scoped = ScopedStore(store, ALICE)
    dotted = scoped.put(b"call foo.bar() NEAR the end\n").ref
    scoped.put(b"foobar and bar\n")

    assert [hit.ref for hit in scoped.search("foo.bar", limit=5)] == [dotted]
    assert [hit.ref for hit in scoped.search('NEAR "end" the*', limit=5)] == [dotted]
    assert scoped.search("foo", limit=5)[0].ref == dotted
    assert scoped.search("--- ***", limit=5) == []


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_a_blank_search_query_is_a_usage_error(store: StoreBackend, query: str) -> None:
    with pytest.raises(UsageError):
        ScopedStore(store, ALICE).search(query, limit=5)


@pytest.mark.parametrize("limit", [0, 101, -1, True])
def test_a_search_limit_outside_1_to_100_is_a_usage_error(store: StoreBackend, limit: int) -> None:
    with pytest.raises(UsageError):
        ScopedStore(store, ALICE).search("word", limit=limit)


def test_search_answers_at_most_its_limit_ties_broken_by_digest(store: StoreBackend) -> None:
    scoped = ScopedStore(store, ALICE)
    refs = [scoped.put(f"needle {index:04}\n".encode()).ref for index in range(12)]

    hits = scoped.search("needle", limit=5)

    assert len({hit.score for hit in hits}) == 1
    assert [hit.ref.digest for hit in hits] == sorted(ref.digest for ref in refs)[:5]
    assert _answer(scoped, "needle", 5) == _answer(scoped, "needle", 5)


def test_another_sessions_or_tenants_artifacts_never_appear_or_change_a_search(
    store: StoreBackend,
) -> None:
    mine = ScopedStore(store, ALICE)
    mine.put(b"shared needle words\n")
    mine.put(b"needle needle alone\n" + b"pad " * 50)
    before = _answer(mine, "needle")
    for scope in (ALICE_LATER, BOB, MALLORY):
        other = ScopedStore(store, scope)
        other.put(b"shared needle words\n")  # the same bytes: one blob in ALICE's tenant
        for index in range(30):
            other.put(f"needle needle needle {index} pad\n".encode())
        assert len(other.search("needle", limit=100)) == 31

    assert _answer(mine, "needle") == before
    assert len(before) == 2
    assert (
        ScopedStore(store, Scope("tenant-acme", "user-ana", "session-9")).search(
            "needle", limit=100
        )
        == []
    )


def test_an_expired_artifact_is_not_found_and_gc_removes_it_from_search(
    store_case: StoreCase,
) -> None:
    store = store_case.open()
    scoped = ScopedStore(store, ALICE)
    short = scoped.put(b"needle short lived\n", ttl=100).ref
    long = scoped.put(b"needle long lived\n", ttl=1000).ref
    assert {hit.ref for hit in scoped.search("needle", limit=5)} == {short, long}
    store_case.clock.advance(500)

    assert [hit.ref for hit in scoped.search("needle", limit=5)] == [long]
    store.gc()
    assert [hit.ref for hit in scoped.search("needle", limit=5)] == [long]
    assert scoped.search("short", limit=5) == []
    again = scoped.put(b"needle short lived\n", ttl=1000).ref
    assert {hit.ref for hit in scoped.search("needle", limit=5)} == {again, long}


def test_binary_bodies_are_not_found_by_search(store: StoreBackend) -> None:
    scoped = ScopedStore(store, ALICE)
    scoped.put(b"needle\x00binary\n")
    scoped.put(b"\x89PNG needle \xff\xfe\xfd", media_type="image/png")
    text = scoped.put(b"needle in text\n").ref

    assert [hit.ref for hit in scoped.search("needle", limit=5)] == [text]


def test_a_restricted_bodys_credential_is_not_found_by_search(store: StoreBackend) -> None:
    scoped = ScopedStore(store, ALICE)
    key = b"AKIA" + b"Q3EXAMPLEKEY7ZZZ"
    ref = scoped.put(b"aws key " + key + b" in config\n", sensitivity="restricted").ref

    assert [hit.ref for hit in scoped.search("config", limit=5)] == [ref]
    assert scoped.search(key.decode(), limit=5) == []


def test_a_put_of_the_same_bytes_as_restricted_raises_the_records_sensitivity(
    store: StoreBackend,
) -> None:
    # First put internal (a plain put), then the same bytes by a mask-policy offload: the
    # record must become restricted, or its reads and search row stay unmasked.
    scoped = ScopedStore(store, ALICE)
    key = b"AKIA" + b"Q3EXAMPLEKEY7ZZZ"
    data = b"aws key " + key + b" in config\n"
    first = scoped.put(data)
    again = scoped.put(data, sensitivity="restricted")

    assert again.ref == first.ref
    assert again.record.sensitivity is Sensitivity.RESTRICTED
    stored = scoped.stat(first.ref).record
    assert stored is not None
    assert stored.sensitivity is Sensitivity.RESTRICTED
    assert [hit.ref for hit in scoped.search("config", limit=5)] == [first.ref]
    assert scoped.search(key.decode(), limit=5) == []


def test_a_put_of_the_same_bytes_as_internal_never_lowers_a_restricted_record(
    store: StoreBackend,
) -> None:
    scoped = ScopedStore(store, ALICE)
    key = b"AKIA" + b"Q3EXAMPLEKEY7ZZZ"
    data = b"aws key " + key + b" in config\n"
    ref = scoped.put(data, sensitivity="restricted").ref
    again = scoped.put(data, sensitivity="internal")

    assert again.record.sensitivity is Sensitivity.RESTRICTED
    stored = scoped.stat(ref).record
    assert stored is not None
    assert stored.sensitivity is Sensitivity.RESTRICTED
    assert scoped.search(key.decode(), limit=5) == []


def test_a_restricted_credential_across_the_index_bound_is_masked_not_cut_into_the_index(
    store: StoreBackend,
) -> None:
    scoped = ScopedStore(store, ALICE)
    key = b"AKIA" + b"Q3EXAMPLEKEY7ZZZ"
    start = INDEX_BYTES - 10  # the bound falls inside the key: its first ten bytes are indexed
    data = b"config words\n" + b"x" * (start - 14) + b" " + key + b" tail\n"
    assert data.index(key) == start
    ref = scoped.put(data, sensitivity="restricted").ref

    assert [hit.ref for hit in scoped.search("config", limit=5)] == [ref]
    assert scoped.search(key[:10].decode(), limit=5) == []
    assert scoped.search(key.decode(), limit=5) == []


def test_a_body_is_found_by_words_in_its_first_mebibytes_only(store: StoreBackend) -> None:
    scoped = ScopedStore(store, ALICE)
    head = b"early word\n" + b"x" * (INDEX_BYTES - 11)
    ref = scoped.put(head + b"\nlate word\n").ref

    assert [hit.ref for hit in scoped.search("early", limit=5)] == [ref]
    assert scoped.search("late", limit=5) == []


def test_a_large_body_of_distinct_words_is_stored_and_found_by_its_first_words(
    store: StoreBackend,
) -> None:
    scoped = ScopedStore(store, ALICE)
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyzäöüßéèêçñøåæœ日本語中文한국어"
    words = ["".join(rng.choice(letters) for _ in range(12)) for _ in range(90_000)]
    data = ("firstword " + " ".join(words)).encode()
    ref = scoped.put(data).ref

    assert len(data) > INDEX_BYTES
    assert [hit.ref for hit in scoped.search("firstword", limit=5)] == [ref]


@pytest.mark.slow
def test_a_store_of_10000_artifacts_answers_a_search_with_at_most_its_limit(
    store_case: StoreCase,
) -> None:
    store = store_case.open(Limits(session_objects=10_000, store_objects=10_000))
    scoped = ScopedStore(store, ALICE)

    def put(index: int) -> tuple[bool, Ref]:
        word = "rare" if index % 271 == 0 else "plain"
        return word == "rare", scoped.put(f"{index} common {word}\n".encode()).ref

    # Filled from eight threads (every backend is thread-safe): a shared store's puts wait on
    # the network and fsync, and one at a time 10,000 of them took two minutes over S3.
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        written = list(pool.map(put, range(10_000)))
    rare = {ref for is_rare, ref in written if is_rare}

    common = scoped.search("common", limit=100)
    few = scoped.search("RARE common", limit=10)

    assert len(common) == 100
    assert common == sorted(common, key=lambda hit: (-hit.score, hit.ref.digest))
    assert len(rare) == 37
    assert len(few) == 10
    assert {hit.ref for hit in few} <= rare
    assert {hit.ref for hit in scoped.search("rare", limit=100)} == rare


__all__ = [
    "store",
    "store_case",
    *sorted(name for name in list(globals()) if name.startswith("test_")),
]
