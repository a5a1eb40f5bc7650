"""Compact stubs (what a cleared result becomes): whole-output snapshots of realistic bodies.

Snapshots live in ``tests/snapshots/compact/``; after a reviewed change to the compact stub,
rewrite them with ``CARGOHOLD_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_compact_stub.py``
(each rewritten snapshot fails its test once; read ``git diff tests/snapshots`` and run again).
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest

from cargohold import Ref
from cargohold._stub import COMPACT_STUB_BYTES, parse_stub, render_compact_stub
from code_fixtures import CODE_FIXTURES
from test_projection_corpus import check_snapshot

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots" / "compact"


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = (640).to_bytes(4, "big") + (480).to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])
    pixels = zlib.compress(b"\x00" + b"\x10\x20\x30" * 640)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels)


SYNTHETIC: dict[str, tuple[bytes, str]] = {
    "orders.json": (
        json.dumps(
            [{"id": i, "customer": f"c-{i:05d}", "total": i * 1.25} for i in range(400)]
        ).encode(),
        "application/json",
    ),
    "build.log": (
        b"\n\n"
        + b"".join(
            f"2026-03-01T10:00:{i % 60:02d}Z INFO step {i} ok\n".encode() for i in range(300)
        )
        + b'Traceback (most recent call last):\n  File "x.py", line 3\nValueError: "bad"\n',
        "text/plain; charset=utf-8",
    ),
    "long-first-line.txt": (("héllo wörld " * 40 + "\nsecond\n").encode(), "text/plain"),
    "screenshot.png": (_png(), "image/png"),
}
SOURCES = {
    **{name: (fixture.read(), fixture.media_type) for name, fixture in CODE_FIXTURES.items()},
    **SYNTHETIC,
}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_each_compact_stub_matches_its_reviewed_snapshot(name: str) -> None:
    data, media_type = SOURCES[name]
    stub = render_compact_stub(
        data,
        Ref.of(data),
        media_type=media_type,
        tool="read_file",
        call_id="toolu_01A09q90qw90lq917835lq9",
    )

    assert len(stub.text.encode()) <= COMPACT_STUB_BYTES
    assert parse_stub(stub.text) is not None
    check_snapshot(SNAPSHOTS / f"{name}.txt", stub.text)
