"""Shared inputs of the working-context tests: realistic worker outputs and failing stores."""

from __future__ import annotations

import json
from typing import Any

import cargohold
from cargohold import MemoryStore, PutRequest, PutResult, Ref, Scope, StoreUnavailableError

KiB = 1024

BUILD_MARK = "cnry-build-7d41"
"""A string only the build log holds (the checkpoint and every event must not)."""
TEST_MARK = "cnry-assert-90b2"
"""A string only the failing test run's output holds."""


def build_log(lines: int = 20_000, *, mark: str = BUILD_MARK) -> str:
    """A passing build's log: timestamped INFO lines (kind ``log``, compressible)."""
    body = [
        f"2026-05-04T09:{i // 3600 % 60:02d}:{i // 60 % 60:02d}Z INFO build step {i} "
        f"compiled module_{i % 97}.o in {i % 13} ms {mark}"
        for i in range(lines)
    ]
    return "\n".join([*body, "2026-05-04T09:59:59Z INFO build finished: 97 modules, 0 errors"])


def failing_test_run(passed: int = 400, *, mark: str = TEST_MARK) -> str:
    """A pytest run with one failure (kind ``failure``, exact_required)."""
    return "\n".join(
        [
            "============================= test session starts ==============================",
            f"collected {passed + 1} items",
            *(f"tests/test_orders.py::test_order_case_{i} PASSED" for i in range(passed)),
            "=================================== FAILURES ===================================",
            "____________________________ test_partial_refund _____________________________",
            ">       assert refund(order, 5) == 5",
            f"E       AssertionError: assert 4 == 5 ({mark})",
            "tests/test_refunds.py:42: AssertionError",
            "FAILED tests/test_refunds.py::test_partial_refund - AssertionError: assert 4 == 5",
            f"================= 1 failed, {passed} passed in 12.48s =================",
        ]
    )


def orders_json(count: int = 2000) -> str:
    """A JSON array of orders (kind ``json``, compressible)."""
    rows = [
        {"id": i, "customer": f"c-{i % 97:05d}", "total": i * 3 % 1000, "status": "paid"}
        for i in range(count)
    ]
    return json.dumps(rows)


def log_hiding_failures(lines: int = 3000) -> str:
    """A log that sniffs as a plain log (its first 64 KiB are INFO lines) and holds failing
    tests far below: a compressor that drops them hides a failure."""
    head = [
        f"2026-05-04T10:{i // 60 % 60:02d}:{i % 60:02d}Z INFO shard {i % 8} step {i} ok"
        for i in range(lines)
    ]
    tail = [
        "2026-05-04T11:00:00Z INFO running integration shard 7",
        "FAILED tests/test_sync.py::test_resume_after_crash - TimeoutError",
        "FAILED tests/test_sync.py::test_two_writers - AssertionError",
        "2026-05-04T11:00:09Z INFO shard 7 done",
    ]
    return "\n".join([*head, *tail])


class UnavailableStore:
    """A backend around a MemoryStore whose every put raises ``StoreUnavailableError`` (and,
    with ``stat_fails``, every stat too): a store that went away."""

    def __init__(self, inner: MemoryStore | None = None, *, stat_fails: bool = False) -> None:
        self._inner = inner or MemoryStore()
        self._stat_fails = stat_fails
        self.limits = self._inner.limits
        self.put_calls = 0

    def __repr__(self) -> str:
        return "UnavailableStore()"

    def put(self, scope: Scope, data: bytes, request: PutRequest) -> PutResult:
        self.put_calls += 1
        raise StoreUnavailableError("the store is unavailable")

    def stat(self, scope: Scope, ref: Ref) -> cargohold.ReadResult:
        if self._stat_fails:
            raise StoreUnavailableError("the store is unavailable")
        return self._inner.stat(scope, ref)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def open_hold(store: Any = "memory://", **kwargs: Any) -> cargohold.Hold:
    """A hold of the tests' owner scope."""
    owner = {"tenant": "acme", "user": "ana", "session": "run-1", "agent": "primary"}
    return cargohold.open(store, **{**owner, **kwargs})
