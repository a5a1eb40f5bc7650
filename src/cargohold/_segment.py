"""Recovered context segments: content an explicit read brought back into the conversation.

A segment is marked so the offload seam lets it through (``bypass``) instead of offloading it
again, and so the edge guard can tell it from a producer that forgot to offload: the opening line
names the reference, what part was read, the budget the caller chose and the SHA-256 of the text
between the marker lines, which a forgotten raw body cannot match by accident::

    [cargohold:recovered] artifact://sha256/<64 hex> | bytes 0-4096 of 120000 | budget 16384 | sha256 <64 hex>
    ...the text...
    [cargohold:end-recovered]

Its tokens still count toward the window.
"""  # noqa: E501 - the example line is the format, unbroken

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from cargohold._records import MAX_READ_BYTES
from cargohold._ref import Ref
from cargohold._text import utf8_len

OPEN = "[cargohold:recovered]"
CLOSE = "[cargohold:end-recovered]"
_FIRST = re.compile(
    r"\[cargohold:recovered\] (artifact://sha256/[0-9a-f]{64}) \| ([a-z0-9 ,.=:-]{1,80})"
    r" \| budget ([0-9]{1,7}) \| sha256 ([0-9a-f]{64})"
)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def render_segment(ref: Ref, span: str, text: str, budget: int) -> str:
    """Wrap ``text`` read from ``ref`` as a recovered segment.

    Args:
        ref: The reference read.
        span: What was read, e.g. ``bytes 0-4096 of 120000`` or ``lines 10-20 of 2000``.
        text: The content, exactly as it enters the conversation.
        budget: The byte budget the caller chose for it (at most 1 MiB).
    """
    # Text that ends with its own newline needs no separator before the closing line (a stray
    # blank line otherwise); the digest tells the two shapes apart when parsing.
    separator = "" if text.endswith("\n") else "\n"
    head = f"{OPEN} {ref} | {span} | budget {budget} | sha256 {_digest(text)}"
    return f"{head}\n{text}{separator}{CLOSE}"


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What a genuine recovered segment says about itself."""

    ref: Ref
    span: str
    budget: int
    text_bytes: int


def parse_segment(text: str) -> SegmentInfo | None:
    """The segment's facts if ``text`` is a genuine recovered segment within its budget.

    Genuine means: the opening line first, the closing line last, the digest matching the text
    between them, and that text within the stated budget, itself at most 1 MiB.
    """
    if not text.startswith(OPEN) or not text.endswith("\n" + CLOSE):
        return None
    first_end = text.find("\n")
    match = _FIRST.fullmatch(text[:first_end])
    if match is None:
        return None
    rest = text[first_end + 1 : len(text) - len(CLOSE)]  # ends with "\n" (checked above)
    digest = match.group(4)
    body = rest[:-1]  # the text and its separator; or text that ended with its own newline:
    if _digest(body) != digest:
        body = rest
        if _digest(body) != digest:
            return None
    budget = int(match.group(3))
    size = utf8_len(body)
    if budget > MAX_READ_BYTES or size > budget:
        return None
    return SegmentInfo(Ref.parse(match.group(1)), match.group(2), budget, size)
