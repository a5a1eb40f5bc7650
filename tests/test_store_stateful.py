"""The store contract as a state machine: random sequences of verbs against a simple model.

Hypothesis drives puts (a small pool of bodies, so dedup happens; random TTLs within the limits),
whole and range reads, stats, touches, gc, a clock that jumps (to exact expiries too), and tight
limits, so quota refusals are common; across three scopes (two sessions of one tenant, and a
second tenant) and two store handles on the same data (two ``LocalStore`` objects on one root,
two ``PostgresStore`` pools on one schema, one shared ``MemoryStore``) that share one
``FakeClock``. The model is a few dictionaries; after every step the store must agree with it:

- every put that returned success reads back resolved, exact bytes, through either handle, until
  its expiry passes; then it reads ``expired``, and after a gc ``missing`` (or ``unauthorized``
  while another session of the tenant still names the bytes);
- another tenant's artifact is ``missing``, another session's ``unauthorized``;
- a put over a limit raises with the model's reason and changes nothing;
- session usage, store usage and each owner's listing match the model; every ref is the SHA-256
  of its bytes; ``verify`` finds nothing.

``STATEFUL_EXAMPLES`` (and ``STATEFUL_STEPS``) raise the search above CI's, e.g.
``STATEFUL_EXAMPLES=2000 .venv/bin/pytest tests/test_store_stateful.py``.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from cargohold import (
    GcReport,
    LimitExceededError,
    Limits,
    ReadOutcome,
    ReadResult,
    Ref,
    Scope,
    ScopedStore,
    Usage,
    UsageError,
)
from cargohold.store import StoreBackend
from cargohold.testing import FakeClock, LocalHarness, MemoryHarness, PostgresHarness, StoreHarness

if TYPE_CHECKING:
    from pg_cluster import PgCluster

pytest_plugins = ["pg_cluster"]
"""The throwaway cluster's fixtures: ``pg_cluster`` and ``pg_url``."""

MAX_TTL = 1000.0
LIMITS = Limits(
    max_artifact_bytes=200_000,
    session_bytes=250_000,
    session_objects=3,
    store_bytes=330_000,
    store_objects=6,
    default_ttl=100.0,
    max_ttl=MAX_TTL,
)
"""Tight enough that every limit is hit within a few dozen steps."""

SIZES = (0, 1, 100, 4096, 65_536, 65_537, 150_000, 210_000)
"""Empty; one byte; small; exactly one 64 KiB chunk; one byte into a second chunk; three chunks;
over the per-artifact limit."""
POOL = tuple(random.Random(f"stateful:{i}").randbytes(size) for i, size in enumerate(SIZES))
DIGESTS = tuple(hashlib.sha256(body).hexdigest() for body in POOL)
SCOPES = (
    Scope("t-a", "u", "s-1"),
    Scope("t-a", "u", "s-2"),  # another session of the same tenant: unauthorized
    Scope("t-b", "u", "s-1"),  # another tenant, same user and session names: missing
)
BAD_TTLS = (0, -1.0, MAX_TTL + 1)

handles = st.integers(0, 1)
scopes = st.sampled_from(range(len(SCOPES)))
bodies = st.sampled_from(range(len(POOL)))
ttls = st.one_of(st.none(), st.integers(1, int(MAX_TTL)), st.sampled_from([0.5, 12.25, MAX_TTL]))
offsets = st.one_of(
    st.integers(0, 300),
    st.sampled_from([65_535, 65_536, 65_537, 131_071, 131_072, 149_999, 150_000]),
    st.integers(0, 220_000),
)
lengths = st.one_of(st.none(), st.integers(0, 300), st.integers(0, 220_000))
budgets = st.one_of(st.none(), st.integers(0, 200_000))
steps = st.one_of(st.integers(1, 150), st.integers(1, 1200), st.sampled_from([0.5, 49.75]))


@dataclass(slots=True)
class Held:
    """What the model knows of one artifact."""

    size: int
    created: float
    expires: float


Key = tuple[str, str, str, str]  # (tenant, user, session, digest)


class Model:
    """The contract, stated as plainly as possible: dictionaries and the rules of the design."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.artifacts: dict[Key, Held] = {}
        self.blobs: dict[tuple[str, str], int] = {}

    def outcome(self, scope: Scope, digest: str, now: float) -> tuple[ReadOutcome, Held | None]:
        held = self.artifacts.get((*scope.owner, digest))
        if held is None:
            # Any record of the tenant, live or expired, makes the bytes "someone else's".
            other = any(k[0] == scope.tenant and k[3] == digest for k in self.artifacts)
            return (ReadOutcome.UNAUTHORIZED if other else ReadOutcome.MISSING), None
        if held.expires <= now:
            return ReadOutcome.EXPIRED, held
        return ReadOutcome.RESOLVED, held

    def session_usage(self, scope: Scope, now: float) -> Usage:
        live = [h for k, h in self.artifacts.items() if k[:3] == scope.owner and h.expires > now]
        return Usage(len(live), sum(h.size for h in live))

    def store_usage(self) -> Usage:
        return Usage(len(self.blobs), sum(self.blobs.values()))

    def refusal(self, scope: Scope, body: bytes, now: float) -> str | None:
        """The reason a new put of ``body`` is refused, or ``None``; session before store."""
        limits = self.limits
        if len(body) > limits.max_artifact_bytes:
            return "artifact_too_large"
        usage = self.session_usage(scope, now)
        if usage.objects + 1 > limits.session_objects:
            return "session_objects"
        if usage.bytes + len(body) > limits.session_bytes:
            return "session_bytes"
        if (scope.tenant, hashlib.sha256(body).hexdigest()) not in self.blobs:
            held = self.store_usage()
            if held.objects + 1 > limits.store_objects:
                return "store_objects"
            if held.bytes + len(body) > limits.store_bytes:
                return "store_bytes"
        return None

    def gc(self, now: float, *, dry_run: bool) -> GcReport:
        expired = [k for k, h in self.artifacts.items() if h.expires <= now]
        named = {(k[0], k[3]) for k, h in self.artifacts.items() if h.expires > now}
        doomed = {(k[0], k[3]) for k in expired} - named
        report = GcReport(len(expired), len(doomed), sum(self.blobs[b] for b in doomed), dry_run)
        if not dry_run:
            for key in expired:
                del self.artifacts[key]
            for blob in doomed:
                del self.blobs[blob]
        return report


OpenHandles = Callable[[Limits, FakeClock], tuple[list[StoreBackend], Callable[[], None]]]


class StoreContract(RuleBasedStateMachine):
    """The machine; a subclass names how to open its two handles (``open_handles``)."""

    open_handles: ClassVar[OpenHandles]

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.model = Model(LIMITS)
        self.stores, self._cleanup = type(self).open_handles(LIMITS, self.clock)
        self.turn = 0

    def teardown(self) -> None:
        for store in self.stores:
            store.close()
        self._cleanup()

    def scoped(self, handle: int, scope: int) -> ScopedStore:
        return ScopedStore(self.stores[handle], SCOPES[scope])

    # -- expectations ------------------------------------------------------------------------

    def check_read(
        self, got: ReadResult, scope: Scope, index: int, start: int, end: int | None
    ) -> None:
        """``got`` is the model's answer to reading ``[start, end)`` of pool body ``index``."""
        body, digest = POOL[index], DIGESTS[index]
        outcome, held = self.model.outcome(scope, digest, self.clock())
        assert got.ref == Ref(digest)
        if outcome is not ReadOutcome.RESOLVED:
            assert got.outcome is outcome
            assert got.data is None
            if held is None:
                assert got.record is None  # nothing about another owner's artifact
            else:
                assert got.record is not None
                assert got.record.expires == held.expires
            return
        assert held is not None
        stop = held.size if end is None else min(end, held.size)
        begin = min(start, stop)
        assert got.outcome is ReadOutcome.RESOLVED, (got.outcome, begin, stop)
        assert got.data == body[begin:stop]
        assert got.start == begin
        assert got.record is not None
        assert (got.record.size, got.record.created, got.record.expires) == (
            held.size,
            held.created,
            held.expires,
        )

    # -- rules -------------------------------------------------------------------------------

    def put_one(self, handle: int, scope: int, index: int, ttl: float | None) -> None:
        body, digest = POOL[index], DIGESTS[index]
        owner = SCOPES[scope]
        now = self.clock()
        life = LIMITS.default_ttl if ttl is None else float(ttl)
        key: Key = (*owner.owner, digest)
        old = self.model.artifacts.get(key)
        if old is not None and old.expires > now:
            result = self.scoped(handle, scope).put(body, ttl=ttl)
            assert result.existing
            assert not result.blob_written
            # A repeat keeps the artifact alive for at least half the TTL it asked for.
            if old.expires < now + life / 2:
                old.expires = max(old.expires, now + life)
        else:
            reason = self.model.refusal(owner, body, now)
            if reason is not None:
                with pytest.raises(LimitExceededError) as refused:
                    self.scoped(handle, scope).put(body, ttl=ttl)
                assert refused.value.reason == reason
                return  # nothing changed: the invariants compare the store with the model
            result = self.scoped(handle, scope).put(body, ttl=ttl)
            assert not result.existing
            assert result.blob_written == ((owner.tenant, digest) not in self.model.blobs)
            self.model.artifacts[key] = Held(len(body), now, now + life)
            self.model.blobs[(owner.tenant, digest)] = len(body)
        held = self.model.artifacts[key]
        assert result.ref == Ref(digest)
        assert str(result.ref) == "artifact://sha256/" + hashlib.sha256(body).hexdigest()
        assert (result.record.size, result.record.created, result.record.expires) == (
            held.size,
            held.created,
            held.expires,
        )

    @rule(handle=handles, scope=scopes, index=bodies, ttl=ttls)
    def put(self, handle: int, scope: int, index: int, ttl: float | None) -> None:
        self.put_one(handle, scope, index, ttl)

    @rule(puts=st.lists(st.tuples(handles, scopes, bodies, ttls), min_size=2, max_size=5))
    def put_several(self, puts: list[tuple[int, int, int, float | None]]) -> None:
        """Bursts of puts (of the same instant), so the quotas fill up within a few steps."""
        for handle, scope, index, ttl in puts:
            self.put_one(handle, scope, index, ttl)

    @rule(handle=handles, scope=scopes, index=bodies, ttl=st.sampled_from(BAD_TTLS))
    def put_with_a_ttl_out_of_range(self, handle: int, scope: int, index: int, ttl: float) -> None:
        with pytest.raises(UsageError):
            self.scoped(handle, scope).put(POOL[index], ttl=ttl)

    @rule(handle=handles, scope=scopes, index=bodies)
    def read(self, handle: int, scope: int, index: int) -> None:
        got = self.scoped(handle, scope).read(Ref(DIGESTS[index]))
        self.check_read(got, SCOPES[scope], index, 0, None)

    @rule(handle=handles, scope=scopes, index=bodies, start=offsets, length=lengths, budget=budgets)
    def read_range(
        self,
        handle: int,
        scope: int,
        index: int,
        start: int,
        length: int | None,
        budget: int | None,
    ) -> None:
        end = None if length is None else start + length
        got = self.scoped(handle, scope).read(
            Ref(DIGESTS[index]), start=start, end=end, max_bytes=budget
        )
        outcome, held = self.model.outcome(SCOPES[scope], DIGESTS[index], self.clock())
        if outcome is ReadOutcome.RESOLVED and held is not None and budget is not None:
            stop = held.size if end is None else min(end, held.size)
            begin = min(start, stop)
            if stop - begin > budget:
                assert got.outcome is ReadOutcome.OVER_BUDGET
                assert got.data is None
                assert got.start == begin
                return
        self.check_read(got, SCOPES[scope], index, start, end)

    @rule(handle=handles, scope=scopes, index=bodies)
    def stat(self, handle: int, scope: int, index: int) -> None:
        got = self.scoped(handle, scope).stat(Ref(DIGESTS[index]))
        outcome, held = self.model.outcome(SCOPES[scope], DIGESTS[index], self.clock())
        assert got.outcome is outcome
        assert got.data is None
        assert (got.record.expires if got.record else None) == (held.expires if held else None)

    @rule(handle=handles, scope=scopes, index=bodies, ttl=ttls)
    def touch(self, handle: int, scope: int, index: int, ttl: float | None) -> None:
        now = self.clock()
        got = self.scoped(handle, scope).touch(Ref(DIGESTS[index]), ttl)
        outcome, held = self.model.outcome(SCOPES[scope], DIGESTS[index], now)
        if outcome is ReadOutcome.RESOLVED and held is not None:
            held.expires = max(held.expires, now + (LIMITS.default_ttl if ttl is None else ttl))
        assert got.outcome is outcome
        assert got.data is None
        assert (got.record.expires if got.record else None) == (held.expires if held else None)

    @precondition(lambda self: bool(self.model.artifacts))
    @rule(handle=handles, pick=st.integers(0, 63), ttl=ttls)
    def touch_a_recorded_artifact(self, handle: int, pick: int, ttl: float | None) -> None:
        """A touch of something an owner holds (a random touch mostly finds nothing)."""
        keys = sorted(self.model.artifacts)
        tenant, user, session, digest = keys[pick % len(keys)]
        self.touch(handle, SCOPES.index(Scope(tenant, user, session)), DIGESTS.index(digest), ttl)

    @rule(handle=handles, scope=scopes, index=bodies, ttl=st.sampled_from(BAD_TTLS))
    def touch_with_a_ttl_out_of_range(
        self, handle: int, scope: int, index: int, ttl: float
    ) -> None:
        with pytest.raises(UsageError):
            self.scoped(handle, scope).touch(Ref(DIGESTS[index]), ttl)

    @rule(handle=handles, dry_run=st.booleans())
    def gc(self, handle: int, dry_run: bool) -> None:
        expected = self.model.gc(self.clock(), dry_run=dry_run)
        assert self.stores[handle].gc(dry_run=dry_run) == expected

    @rule(seconds=steps)
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @precondition(lambda self: any(h.expires > self.clock() for h in self.model.artifacts.values()))
    @rule(past=st.booleans())
    def advance_to_the_next_expiry(self, past: bool) -> None:
        """Land exactly on an expiry (expired at ``expires <= now``), or just past it."""
        now = self.clock()
        nearest = min(h.expires for h in self.model.artifacts.values() if h.expires > now)
        self.clock.advance(nearest - now + (0.25 if past else 0.0))

    @rule(handle=handles)
    def verify(self, handle: int) -> None:
        assert self.stores[handle].verify() == []

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def every_recorded_put_reads_as_the_model_says(self) -> None:
        # Both handles in turn: what one handle wrote, the other reads.
        self.turn += 1
        handle = self.turn % 2
        now = self.clock()
        for tenant, user, session, digest in list(self.model.artifacts):
            scope = Scope(tenant, user, session)
            got = ScopedStore(self.stores[handle], scope).read(Ref(digest))
            self.check_read(got, scope, DIGESTS.index(digest), 0, None)
            if self.model.artifacts[(tenant, user, session, digest)].expires > now:
                assert got.outcome is ReadOutcome.RESOLVED  # readable until its expiry passes

    @invariant()
    def every_scope_sees_every_stored_ref_as_the_model_says(self) -> None:
        # Another session of the tenant: unauthorized; another tenant: missing (no oracle).
        now = self.clock()
        store = self.stores[self.turn % 2]
        for digest in sorted({key[3] for key in self.model.artifacts}):
            for scope in SCOPES:
                got = ScopedStore(store, scope).stat(Ref(digest))
                outcome, held = self.model.outcome(scope, digest, now)
                assert got.outcome is outcome
                assert (got.record is None) == (held is None)

    @invariant()
    def usage_and_listings_match_the_model(self) -> None:
        now = self.clock()
        store = self.stores[self.turn % 2]
        assert store.store_usage() == self.model.store_usage()
        for scope in SCOPES:
            scoped = ScopedStore(store, scope)
            assert scoped.usage() == self.model.session_usage(scope, now)
            listed = [(r.ref.digest, r.size, r.created, r.expires) for r in scoped.artifacts()]
            expected = sorted(
                (k[3], h.size, h.created, h.expires)
                for k, h in self.model.artifacts.items()
                if k[:3] == scope.owner
            )
            assert sorted(listed) == expected
            assert [row[2] for row in listed] == sorted(row[2] for row in listed)  # oldest first


def _examples(default: int) -> settings:
    return settings(
        max_examples=int(os.environ.get("STATEFUL_EXAMPLES", default)),
        stateful_step_count=int(os.environ.get("STATEFUL_STEPS", 40)),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


def _run(harness_for: Callable[[], tuple[StoreHarness, Callable[[], None]]], cfg: settings) -> None:
    """Run the machine with two handles from a fresh harness per example."""

    def open_handles(
        limits: Limits, clock: FakeClock
    ) -> tuple[list[StoreBackend], Callable[[], None]]:
        harness, cleanup = harness_for()
        first = harness.open(limits=limits, clock=clock)
        # A backend whose data does not outlive its handle (memory) shares the one handle.
        second = harness.reopen(first) or first
        return [first, second], cleanup

    machine = type("Contract", (StoreContract,), {"open_handles": staticmethod(open_handles)})
    run_state_machine_as_test(machine, settings=cfg)


def test_the_memory_store_follows_the_model() -> None:
    _run(lambda: (MemoryHarness(), lambda: None), _examples(100))


def test_two_local_stores_on_one_root_follow_the_model(tmp_path: Path) -> None:
    counter = iter(range(1_000_000))

    def harness_for() -> tuple[StoreHarness, Callable[[], None]]:
        base = tmp_path / f"example-{next(counter)}"
        return LocalHarness(base), lambda: shutil.rmtree(base, ignore_errors=True)

    _run(harness_for, _examples(60))


@pytest.fixture(scope="module")
def stateful_url(pg_cluster: PgCluster) -> str:
    """One database: each example's store lives in a fresh schema of its own."""
    return pg_cluster.create_database("stateful")


def test_two_postgres_stores_on_one_schema_follow_the_model(stateful_url: str) -> None:
    _run(lambda: (PostgresHarness(stateful_url, prefix="stateful"), lambda: None), _examples(12))
