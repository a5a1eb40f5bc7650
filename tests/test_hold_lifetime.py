"""How long a reference lives through the front door: sliding expiry on read, explicit extend."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

import cargohold
from cargohold import (
    Hold,
    MemoryStore,
    ReadOutcome,
    ReadResult,
    RehydrateOutcome,
    Scope,
    StoreUnavailableError,
    UsageError,
)
from cargohold.testing import FakeClock

HOUR = 3600.0
DAY = 24 * HOUR
BODY = json.dumps({"items": [{"id": i, "status": "paid"} for i in range(2000)]}, indent=1)
"""A JSON result well over the heavy threshold, so every read verb (query too) applies."""


def _open(clock: FakeClock, **settings: Any) -> Hold:
    return cargohold.open(
        MemoryStore(clock=clock), tenant="acme", user="ana", session="thread-1", **settings
    )


def _offloaded(hold: Hold) -> cargohold.Ref:
    result = hold.offload(BODY, tool="list_orders", media_type="application/json")
    assert result.ref is not None
    return result.ref


def _expires(hold: Hold, ref: cargohold.Ref) -> float:
    record = hold.info(ref).record
    assert record is not None
    return record.expires


def test_with_sliding_ttl_a_reference_read_every_20_hours_stays_readable_for_days(
    clock: FakeClock,
) -> None:
    with _open(clock, sliding_ttl=True) as hold:
        ref = _offloaded(hold)

        for _ in range(4):  # 80 hours in all: past three days, on a 24-hour TTL
            clock.advance(20 * HOUR)
            assert hold.read(ref, length=100).outcome is RehydrateOutcome.RESOLVED

        assert _expires(hold, ref) == clock() + DAY


def test_without_sliding_ttl_reads_extend_nothing_and_a_reference_expires_after_24_hours(
    clock: FakeClock,
) -> None:
    with _open(clock) as hold:
        ref = _offloaded(hold)
        expires = _expires(hold, ref)

        clock.advance(20 * HOUR)
        assert hold.read(ref, length=100).outcome is RehydrateOutcome.RESOLVED
        assert _expires(hold, ref) == expires
        clock.advance(4 * HOUR)

        assert hold.settings.sliding_ttl is False
        assert hold.read(ref, length=100).outcome is RehydrateOutcome.EXPIRED


_READS: dict[str, Callable[[Hold, cargohold.Ref], bool]] = {
    "read": lambda h, r: h.read(r, length=100).ok,
    "read_lines": lambda h, r: h.read_lines(r, 1, 3).ok,
    "grep": lambda h, r: h.grep(r, '"id": 7,').ok,
    "query": lambda h, r: h.query(r, "length(items)").ok,
    "artifact_info": lambda h, r: h.call_tool("artifact_info", {"ref": str(r)}).ok,
    "artifact_read": lambda h, r: h.call_tool("artifact_read", {"ref": str(r), "length": 99}).ok,
    "artifact_read_lines": lambda h, r: (
        h.call_tool("artifact_read_lines", {"ref": str(r), "start_line": 2, "end_line": 4}).ok
    ),
    "artifact_grep": lambda h, r: h.call_tool("artifact_grep", {"ref": str(r), "pattern": "id"}).ok,
    "artifact_query": lambda h, r: (
        h.call_tool("artifact_query", {"ref": str(r), "expression": "items[0].id"}).ok
    ),
}


@pytest.mark.parametrize("verb", list(_READS))
def test_with_sliding_ttl_every_resolved_read_extends_the_reference(
    clock: FakeClock, verb: str
) -> None:
    with _open(clock, sliding_ttl=True) as hold:
        ref = _offloaded(hold)
        now = clock.advance(20 * HOUR)

        assert _READS[verb](hold, ref)

        assert _expires(hold, ref) == now + DAY


def test_with_sliding_ttl_a_read_that_does_not_resolve_extends_nothing(clock: FakeClock) -> None:
    with _open(clock, sliding_ttl=True) as hold:
        ref = _offloaded(hold)
        expires = _expires(hold, ref)
        clock.advance(20 * HOUR)

        over = hold.read(ref, length=len(BODY), budget=1024)
        mistake = hold.call_tool("artifact_query", {"ref": str(ref)})
        other = hold.for_session("thread-2").read(ref, length=100)

        assert over.outcome is RehydrateOutcome.OVER_BUDGET
        assert not mistake.ok
        assert other.outcome is RehydrateOutcome.UNAUTHORIZED
        assert _expires(hold, ref) == expires


def test_sliding_ttl_extends_by_the_holds_ttl_and_reaches_derived_holds(clock: FakeClock) -> None:
    with _open(clock, sliding_ttl=True, ttl=2 * HOUR) as hold:
        worker = hold.derive(agent="worker-1")
        ref = _offloaded(worker)
        now = clock.advance(HOUR)

        assert worker.read(ref, length=10).ok

        assert _expires(hold, ref) == now + 2 * HOUR


def test_sliding_ttl_can_be_turned_on_by_the_environment(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARGOHOLD_SLIDING_TTL", "1")

    with _open(clock) as hold:
        assert hold.settings.sliding_ttl is True
    with _open(clock, sliding_ttl=False) as hold:
        assert hold.settings.sliding_ttl is False


class _TouchDownStore(MemoryStore):
    """A memory store whose extensions fail as a store that went away would."""

    def touch(self, scope: Scope, ref: cargohold.Ref, ttl: float | None = None) -> ReadResult:
        raise StoreUnavailableError("the store could not be reached")


def test_a_failed_sliding_extension_does_not_undo_the_read(clock: FakeClock) -> None:
    store = _TouchDownStore(clock=clock)
    with cargohold.open(store, tenant="acme", user="ana", session="s", sliding_ttl=True) as hold:
        ref = _offloaded(hold)

        answer = hold.read(ref, length=100)

        assert answer.outcome is RehydrateOutcome.RESOLVED
        assert answer.content == BODY[:100]


def test_extend_keeps_a_resumed_threads_reference_alive_past_its_first_expiry(
    clock: FakeClock,
) -> None:
    with _open(clock) as hold:
        ref = _offloaded(hold)
        now = clock.advance(23 * HOUR)  # the thread was checkpointed, and resumes now

        extended = hold.extend(ref)

        assert extended.outcome is ReadOutcome.RESOLVED
        assert extended.data is None
        assert extended.record is not None
        assert extended.record.expires == now + DAY
        clock.advance(23 * HOUR)
        assert hold.read(ref, length=100).outcome is RehydrateOutcome.RESOLVED


def test_extend_takes_an_explicit_ttl_up_to_the_stores_maximum(clock: FakeClock) -> None:
    with _open(clock) as hold:
        ref = _offloaded(hold)
        now = clock()

        assert hold.extend(str(ref), ttl=7 * DAY).record == hold.info(ref).record
        assert _expires(hold, ref) == now + 7 * DAY
        with pytest.raises(UsageError):
            hold.extend(ref, ttl=7 * DAY + 1)
        assert hold.extend(ref, ttl=HOUR).record == hold.info(ref).record  # never shortens
        assert _expires(hold, ref) == now + 7 * DAY


def test_extend_answers_like_info_for_what_it_cannot_extend(clock: FakeClock) -> None:
    with _open(clock) as hold:
        ref = _offloaded(hold)

        assert hold.for_session("thread-2").extend(ref).outcome is ReadOutcome.UNAUTHORIZED
        with cargohold.open(
            hold.store.store, tenant="other", user="ana", session="thread-1"
        ) as stranger:
            assert stranger.extend(ref).outcome is ReadOutcome.MISSING
        clock.advance(DAY)
        expired = hold.extend(ref)
        assert expired.outcome is ReadOutcome.EXPIRED
        assert hold.read(ref, length=100).outcome is RehydrateOutcome.EXPIRED


def test_aextend_gives_the_same_answer_as_extend(clock: FakeClock) -> None:
    with _open(clock) as hold:
        ref = _offloaded(hold)
        now = clock.advance(HOUR)

        extended = asyncio.run(hold.aextend(ref, ttl=2 * DAY))

        assert extended.outcome is ReadOutcome.RESOLVED
        assert extended.record == hold.info(ref).record
        assert _expires(hold, ref) == now + 2 * DAY
