"""A projection's peak memory stays under 1.5x the body it reads (issue 27: an offload at most 3x).

Measured with tracemalloc (Python's own allocations, which is where copies of a body go: a
decoded copy, a ``rstrip`` or ``rsplit`` of it, a list of its lines), over a body of 4 MiB, so
that a single copy of the body stands out of everything else a projector allocates.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from cargohold.projection import detect, project

SIZE = 4 * 1024 * 1024
BUDGET = 8 * 1024
FIXTURES = Path(__file__).parent / "fixtures" / "code"


def _repeated(source: bytes) -> bytes:
    """``source`` repeated to about ``SIZE`` bytes, cut at a line end."""
    body = source * (SIZE // len(source) + 1)
    return body[: body.rfind(b"\n", 0, SIZE) + 1]


BODIES = {
    "text": (_repeated(b"the quick brown fox jumps over the lazy dog and rests a while\n"), None),
    "search": (_repeated((FIXTURES / "cargohold_grep_rn.txt").read_bytes()), None),
    "diff": (_repeated((FIXTURES / "cargohold_git_diff.diff").read_bytes()), "text/x-diff"),
    "code": (
        _repeated((FIXTURES / "cargohold_conformance.py.txt").read_bytes()),
        "text/x-python",
    ),
}


def _peak(data: bytes, media_type: str) -> int:
    found = detect(data, media_type=media_type)
    project(data[:65536], media_type=media_type, budget=BUDGET)  # imports and caches, unmeasured
    tracemalloc.start()
    try:
        project(data, media_type=media_type, budget=BUDGET, detection=found)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("kind", sorted(BODIES))
def test_projection_peak_memory_stays_under_the_body_size(kind: str) -> None:
    data, media = BODIES[kind]
    media_type = media or "text/plain"
    assert detect(data, media_type=media_type).kind == kind
    assert _peak(data, media_type) < len(data) * 1.5
