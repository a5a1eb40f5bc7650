"""Token estimates by content family, calibrated on o200k (see DESIGN.md, measured facts).

Bytes divided by four undercounts JSON by a fifth and base64 almost threefold, so the estimate
depends on what the bytes are. The estimate is deliberately on the high side of each measurement.
"""

from __future__ import annotations

import enum
import math


class Family(enum.StrEnum):
    """Content families with distinct bytes-per-token ratios."""

    PROSE = "prose"
    CODE = "code"
    JSON = "json"
    BASE64 = "base64"
    BINARY = "binary"


BYTES_PER_TOKEN: dict[Family, float] = {
    Family.PROSE: 4.35,
    Family.CODE: 4.3,
    Family.JSON: 3.25,
    Family.BASE64: 1.4,
    # Raw bytes never enter a context as such; if they were base64-encoded to do so, they would
    # cost 4/3 of their size at base64's ratio.
    Family.BINARY: 1.4 * 3 / 4,
}


def estimate_tokens(size: int, family: Family | str = Family.PROSE) -> int:
    """Estimated tokens of ``size`` bytes of the given family (rounded up)."""
    ratio = BYTES_PER_TOKEN[Family(family)]
    return math.ceil(size / ratio) if size > 0 else 0


def family_of(kind: str | None, media_type: str) -> Family:
    """The token family of an artifact from its detected kind and media type."""
    if kind in ("binary", "image", "pdf", "archive"):
        return Family.BINARY
    if kind in ("base64", "data_uri"):
        return Family.BASE64
    if kind in ("json", "ndjson") or media_type.endswith(("json", "+json")):
        return Family.JSON
    if kind in ("code", "diff"):
        return Family.CODE
    return Family.PROSE
