"""Credential detection benchmark: the cost of scanning every result on the way in.

``secrets``: :func:`cargohold.find_secrets` over 1 MiB and 16 MiB of a log, a JSON document,
base64 text and random bytes (none holds a credential: the common case, one pass of the RE2
automaton), and over a 16 MiB log with a credential every ten lines (the costly case: each match
is confirmed and located in Python); the same JSON document as text wrapped twice in
``{"result": text}`` (what an MCP server's ``structuredContent`` carries: every escape doubled);
and :func:`cargohold._secrets.redact_secrets` of the dense log (what the default ``redact`` policy
adds after the scan). Each against a durable local put of the same number of bytes, interleaved
with it in the same run: the offload seam scans (and redacts) before it stores, so the ratio is
what credential handling adds to an offload.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from pathlib import Path

from bench._util import Case, MiB, Row, distinct, interleave
from bench.decisions import _log, _records_json
from bench.store import UNLIMITED, Config
from cargohold import LocalStore, Scope, ScopedStore, find_secrets
from cargohold._secrets import redact_secrets


def _base64(size: int, seed: int) -> bytes:
    return base64.encodebytes(random.Random(seed).randbytes(size))[:size]


def _dense_log(size: int, seed: int) -> bytes:
    """A log with an ``Authorization: Bearer`` line every ten lines (fake tokens)."""
    rng = random.Random(seed)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    lines = _log(size, seed).splitlines(keepends=True)
    for index in range(0, len(lines), 10):
        token = "".join(rng.choice(alphabet) for _ in range(40))
        lines[index] = f"2026-11-29T02:00:00Z DEBUG request Authorization: Bearer {token}\n"
    return "".join(lines).encode()[:size]


def _escaped_json(size: int, seed: int) -> bytes:
    """A JSON document as text inside ``{"result": text}``, twice: its escapes doubled."""
    text = _records_json(size, seed)
    for _ in range(2):
        text = json.dumps({"result": text})
    return text.encode()[:size]


_KINDS: tuple[tuple[str, Callable[[int, int], bytes], tuple[int, ...]], ...] = (
    ("log", lambda size, seed: _log(size, seed).encode(), (MiB, 16 * MiB)),
    ("json", lambda size, seed: _records_json(size, seed).encode(), (MiB, 16 * MiB)),
    ("base64", _base64, (MiB, 16 * MiB)),
    ("binary", lambda size, seed: random.Random(seed).randbytes(size), (MiB, 16 * MiB)),
    ("json text escaped twice", _escaped_json, (MiB, 16 * MiB)),
    ("log, a credential every 10 lines", _dense_log, (16 * MiB,)),
)


def bench_secrets(root: Path, cfg: Config) -> list[Row]:
    store = LocalStore(root / "secrets", limits=UNLIMITED)
    rows: list[Row] = []
    session = iter(range(1 << 30))
    for kind, make, sizes in _KINDS:
        for size in sizes:
            data = make(size, 1)
            findings = len(find_secrets(data))
            scoped = ScopedStore(store, Scope("bench", "u", f"s{next(session)}"))
            medians = interleave(
                [
                    Case("scan", lambda i, d=data: find_secrets(d)),
                    # distinct bytes each time, so that every put writes (no deduplication)
                    Case("put", lambda i, d=data, s=scoped: s.put(distinct(d, i))),
                ],
                cfg.repeat(size),
            )
            label = f"find_secrets, {kind}" + (f" ({findings:,} found)" if findings else "")
            rows.append(Row("secrets", label, size, medians["scan"], "store put", medians["put"]))
    size = 16 * MiB
    data = _dense_log(size, 1)
    found = find_secrets(data)
    scoped = ScopedStore(store, Scope("bench", "u", f"s{next(session)}"))
    medians = interleave(
        [
            Case("redact", lambda i: redact_secrets(data, found)),
            Case("put", lambda i: scoped.put(distinct(data, i))),
        ],
        cfg.repeat(size),
    )
    label = f"redact_secrets, log, a credential every 10 lines ({len(found):,} redacted)"
    rows.append(Row("secrets", label, size, medians["redact"], "store put", medians["put"]))
    store.close()
    return rows


SECTIONS: dict[str, Callable[[Path, Config], list[Row]]] = {"secrets": bench_secrets}
