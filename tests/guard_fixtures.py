"""Helpers of the guard tests: raw heavy content with a canary, genuine stubs and segments."""

from __future__ import annotations

import base64
import hashlib

import cargohold
from cargohold import ListSink, MemoryStore, Offloader, Rehydrator, Reporter, Scope, ScopedStore

KiB = 1024
THRESHOLD = 32 * KiB
CANARY = "CANARY-guard-7f3a9c"
"""Sits inside every raw heavy body: it must never appear in an error, event or CLI line."""

BOOKING_LOG = "".join(
    f"2026-11-29T02:{i // 60 % 60:02d}:{i % 60:02d}Z INFO booking id={i} seat=14C ok\n"
    for i in range(1, 1200)
)
"""About 60 KiB of a realistic log."""


def raw(size: int = 40 * KiB) -> str:
    """Raw text of exactly ``size`` bytes that carries the canary."""
    head = f"{CANARY} raw tool output\n"
    body = (head + BOOKING_LOG * (size // len(BOOKING_LOG) + 1))[:size]
    assert len(body.encode()) == size
    return body


def data_url(size: int = 40 * KiB, media_type: str = "image/png") -> str:
    """A base64 data URL of about ``size`` characters, the canary in its decoded bytes."""
    payload = (CANARY.encode() + b"\x89PNG" * size)[: size * 3 // 4]
    return f"data:{media_type};base64," + base64.b64encode(payload).decode()


def b64(size: int = 40 * KiB) -> str:
    """Bare base64 of about ``size`` characters."""
    return data_url(size).split(",", 1)[1]


KEY = hashlib.sha256(b"cargohold guard fixtures").digest()
"""The marker key of every fixture store; the ``configured_marker_key`` fixture (conftest) makes
it the configured store's too, so a ``Guard()`` given no key trusts these stubs, as a guard
reading the configured store's key trusts that store's in production."""


def scoped() -> ScopedStore:
    store = MemoryStore(marker_key=KEY)
    return ScopedStore(store, Scope("tenant-g1", "user-g2", "session-g3"))


def stub(text: str = BOOKING_LOG, *, tool: str = "read_log", budget: str = "balanced") -> str:
    """A genuine stub rendered by the Offloader on a memory store."""
    result = Offloader(scoped(), budget=budget).offload(text, tool=tool)
    assert result.stub is not None
    return result.text


def segment(size: int = 48 * KiB) -> str:
    """A genuine recovered segment of ``size`` bytes of text (explicit read with a big budget)."""
    store = scoped()
    body = BOOKING_LOG * (size // len(BOOKING_LOG) + 2)
    put = Offloader(store).offload(body, tool="read_log")
    assert put.ref is not None
    read = Rehydrator(store).read(put.ref, offset=0, length=size, budget=size)
    assert read.segment is not None
    return read.segment


def reporter() -> tuple[Reporter, ListSink]:
    sink = ListSink()
    return Reporter([sink], agent_id="guard-test"), sink


__all__ = [
    "BOOKING_LOG",
    "CANARY",
    "KEY",
    "THRESHOLD",
    "KiB",
    "b64",
    "cargohold",
    "data_url",
    "raw",
    "reporter",
    "scoped",
    "segment",
    "stub",
]
