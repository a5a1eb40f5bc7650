"""What a hold's compactions remember between calls: token counts and compact stubs.

A stateless caller (the gateway) sends the whole history on every turn, so without a memo
every earlier cleared result would be stored, read and rendered again, and every message
counted again, on every request. Every map is bounded (least recently used go first) and
thread-safe, and keyed cheaply by a length and Python's ``hash`` (about 0.2 ms for 2 MiB;
randomized per process, which is fine for memory that lives in one):

- messages: a message's tokens (estimated, and counted), keyed by its JSON (``orjson``,
  about 1.3 ms for 2 MiB of messages): a history sent again is neither walked nor counted
  again. Only plain dicts are keyed (SDK objects are measured each time).
- counts: a text's real token count (texts under 64 characters are counted each time).

A collision in these two (two keys of one length and one 64-bit hash) could only move a
trigger decision, never a byte. The third is confirmed:

- stubs: a slot's compact stub, keyed also by the scope, the slot's kind, tool, call id and
  media type, the read tools the stub names and the tool's secrets policy. Before reuse the
  body's SHA-256 must equal the one remembered, so a collision can never put another result's
  stub in its place, and after ``recheck_seconds`` the artifact is touched and its first byte
  read again (it must still resolve in this scope; the touch also keeps it alive for as long as
  the caller keeps sending it). A stub whose artifact is gone is forgotten: the result is
  stored again.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from cargohold._errors import StoreError
from cargohold._facade import ScopedStore
from cargohold._ref import Ref
from cargohold._stub import ReadTools
from cargohold._tokens import count_tokens

_SMALL = 64
"""Texts shorter than this are counted each time (a few microseconds)."""

StubKey = tuple[str, str, str, str, str | None, str | None, str | None, ReadTools, str]
"""(tenant, user, session, kind, tool, call id, media type, read tools, secrets policy): the
policy of the slot's tool too, since it decides what was stored (a redacted copy, the exact
bytes as restricted): holds of different policies on one store never share a stub."""


@dataclass(frozen=True, slots=True)
class Remembered:
    """A compact stub remembered for a body (never the body)."""

    stub: str
    ref: Ref
    size: int


@dataclass(slots=True)
class _Entry:
    digest: bytes
    remembered: Remembered
    checked: float


class CompactionMemo:
    """The bounded memo one store's holds share (see the module docstring).

    Args:
        counts: Token counts kept.
        stubs: Compact stubs kept.
        recheck_seconds: How long a stub is reused before its artifact is touched again.
    """

    def __init__(
        self, *, counts: int = 8192, stubs: int = 4096, recheck_seconds: float = 30.0
    ) -> None:
        self._counts: OrderedDict[tuple[int, int], int] = OrderedDict()
        self._messages: OrderedDict[tuple[str, bool, int, int], int] = OrderedDict()
        self._stubs: OrderedDict[tuple[StubKey, int, int], _Entry] = OrderedDict()
        self._max_counts = counts
        self._max_stubs = stubs
        self._recheck = recheck_seconds
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CompactionMemo(counts={len(self._counts)}, stubs={len(self._stubs)})"

    def message_key(self, fmt: str, message: Any) -> tuple[str, int, int] | None:
        """The key a message's tokens are remembered by, or ``None`` (not a plain dict, or
        not JSON): computed once per message per compaction."""
        if type(message) is not dict:
            return None
        try:
            data = orjson.dumps(message)
        except (TypeError, orjson.JSONEncodeError):
            return None
        return (fmt, len(data), hash(data))

    def tokens(
        self, key: tuple[str, int, int] | None, counted: bool, measure: Callable[[], int]
    ) -> int:
        """The message's tokens (``counted``: the real count, else the estimate), remembered
        under ``key``; ``measure`` gives them when they are not."""
        if key is None:
            return measure()
        full = (key[0], counted, key[1], key[2])
        with self._lock:
            found = self._messages.get(full)
            if found is not None:
                self._messages.move_to_end(full)
                return found
        value = measure()
        with self._lock:
            self._messages[full] = value
            while len(self._messages) > self._max_counts:
                self._messages.popitem(last=False)
        return value

    def count(self, text: str) -> int | None:
        """``text``'s real token count (:func:`cargohold._tokens.count_tokens`), remembered."""
        if len(text) < _SMALL:
            return count_tokens(text)
        key = (len(text), hash(text))
        with self._lock:
            found = self._counts.get(key)
            if found is not None:
                self._counts.move_to_end(key)
                return found
        counted = count_tokens(text)
        if counted is not None:
            with self._lock:
                self._counts[key] = counted
                while len(self._counts) > self._max_counts:
                    self._counts.popitem(last=False)
        return counted

    def stub(
        self, store: ScopedStore, key: StubKey, body: str, ttl: float | None
    ) -> Remembered | None:
        """The stub remembered for ``body`` under ``key``, confirmed (its SHA-256, and its
        artifact in ``store`` once ``recheck_seconds`` have passed), else ``None``."""
        full = (key, len(body), hash(body))
        with self._lock:
            entry = self._stubs.get(full)
            if entry is not None:
                self._stubs.move_to_end(full)
        if entry is None or _digest(body) != entry.digest:
            return None
        now = time.monotonic()
        if now - entry.checked >= self._recheck:
            ref = entry.remembered.ref
            try:  # still alive (kept so), and its bytes still there (a one-byte verified read)
                ok = store.touch(ref, ttl).ok and store.read(ref, start=0, end=1).ok
            except StoreError:
                ok = False
            with self._lock:
                if ok:
                    entry.checked = now
                else:
                    self._stubs.pop(full, None)
            if not ok:
                return None
        return entry.remembered

    def remember(self, key: StubKey, body: str, remembered: Remembered) -> None:
        """Remember ``remembered`` as the stub of ``body`` under ``key``."""
        entry = _Entry(_digest(body), remembered, time.monotonic())
        with self._lock:
            self._stubs[key, len(body), hash(body)] = entry
            while len(self._stubs) > self._max_stubs:
                self._stubs.popitem(last=False)


def _digest(body: str) -> bytes:
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).digest()
