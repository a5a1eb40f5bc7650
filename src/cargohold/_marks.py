"""Marker keys: how cargohold tells the stubs and segments it made from a tool's forgery.

A stub or a recovered segment lets content through that would otherwise be raw heavy content: the
offload seam passes a segment as ``bypass``, the edge guard passes a stub or segment at any size.
A plain digest in the marker proves only that the text was not edited by accident; anyone can
compute one. So every store holds one secret, its *marker key* (32 random bytes, created on first
use, the same for every process that opens the store), and the markers cargohold writes carry an
HMAC-SHA256 under that key. A tool cannot compute it without the key, so a marker it forged, or a
genuine one it edited, fails the check and is judged as what it is: raw content.

The key never leaves the process that read it: it is not logged, not in any repr, not in any event
or error. Where it lives is the store's business (``marker.key`` beside the local store, a table of
the PostgreSQL store, random per instance for the memory store).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from cargohold._errors import UsageError

KEY_BYTES = 32
"""Length of a marker key."""


def new_key() -> bytes:
    """A fresh random marker key."""
    return secrets.token_bytes(KEY_BYTES)


def check_key(key: object) -> bytes:
    """``key`` as bytes if it is a marker key (exactly :data:`KEY_BYTES` bytes).

    Raises:
        UsageError: anything else (the message never shows the value).
    """
    if isinstance(key, bytearray | memoryview):
        key = bytes(key)
    if not isinstance(key, bytes) or len(key) != KEY_BYTES:
        raise UsageError(f"a marker key is exactly {KEY_BYTES} bytes (a store's marker_key())")
    return key


def tag(key: bytes, domain: bytes, *parts: bytes) -> str:
    """The hex HMAC-SHA256 under ``key`` of ``parts``, separated by ``domain`` (what is tagged:
    a stub's tag can never pass for a segment's)."""
    mac = hmac.new(key, domain, hashlib.sha256)
    for part in parts:
        mac.update(b"\0")
        mac.update(part)
    return mac.hexdigest()


def same(a: str, b: str) -> bool:
    """Constant-time comparison of two hex tags."""
    return hmac.compare_digest(a.encode("ascii", "replace"), b.encode("ascii", "replace"))
