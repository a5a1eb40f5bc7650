"""Projection: what a stub's preview shows of a body.

Two steps, both deterministic: :func:`detect` names the kind and the projection class from the
media type hint and the bytes; :func:`project` renders a preview of at most ``budget`` UTF-8 bytes.

Classes (fail-safe): ``compressible`` (a structure-aware preview is allowed), ``exact_required``
(only verbatim excerpts, head and tail, with the omitted byte count stated; never a summary),
``bypass`` (never projected), ``unsupported`` (binary: metadata only). A failed or cancelled result
is never ``compressible``.

This version renders every text body as an ``exact_required`` verbatim head and tail; the
structure-aware projectors are built on the same two functions.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from cargohold._text import cut_utf8, cut_utf8_tail, decode, looks_textual, utf8_len


class ProjectionClass(enum.StrEnum):
    """How a body may be projected into a preview."""

    COMPRESSIBLE = "compressible"
    EXACT_REQUIRED = "exact_required"
    BYPASS = "bypass"
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True, slots=True)
class Detection:
    """What a body is, and how it may be projected."""

    kind: str
    classification: ProjectionClass


@dataclass(frozen=True, slots=True)
class Projection:
    """A rendered preview.

    Attributes:
        kind: The detected kind (``text``, ``json``, ``binary``...).
        classification: The projection class applied.
        preview: The preview text, at most the budget it was rendered for.
    """

    kind: str
    classification: ProjectionClass
    preview: str


def detect(data: bytes, *, media_type: str, failed: bool = False) -> Detection:
    """The kind and class of ``data``. Binary is unsupported; a failure is never compressible."""
    if not looks_textual(data):
        return Detection("binary", ProjectionClass.UNSUPPORTED)
    base = media_type.split(";")[0]
    kind = "json" if base.endswith("json") else "text"
    return Detection(kind, ProjectionClass.EXACT_REQUIRED)


def _binary_preview(data: bytes) -> str:
    magic = " ".join(f"{byte:02x}" for byte in data[:16])
    return f"binary content, no preview; first bytes: {magic}" if data else "empty body"


def head_tail(data: bytes, budget: int) -> str:
    """A verbatim head and tail of ``data`` within ``budget`` bytes, stating what is omitted.

    The head gets about two thirds of the room, the tail the rest; both end on line edges when a
    line edge is near, and never split a UTF-8 character. The tail is always represented.
    """
    if len(data) <= budget and utf8_len(decode(data)) <= budget:
        return decode(data)
    lines_total = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    note_room = 96
    room = max(0, budget - note_room)
    head_room = room * 2 // 3
    tail_room = room - head_room
    head = cut_utf8(data, head_room)
    cut = head.rfind(b"\n")
    if cut >= len(head) * 3 // 4:
        head = head[: cut + 1]
    tail = cut_utf8_tail(data[len(head) :], tail_room)
    cut = tail.find(b"\n")
    if 0 <= cut < len(tail) // 4 and cut + 1 < len(tail):
        tail = tail[cut + 1 :]
    omitted = len(data) - len(head) - len(tail)
    first_line = head.count(b"\n") + 1
    last_line = lines_total - tail.count(b"\n") - (0 if tail.endswith(b"\n") else 1)
    where = f"lines {first_line:,}-{last_line:,} of {lines_total:,}, " if lines_total > 1 else ""
    head_text = decode(head)
    tail_text = decode(tail)
    span = f"bytes {len(head):,}-{len(head) + omitted:,}"
    note = f"[... {omitted:,} bytes omitted ({where}{span}) ...]"
    joint = "" if head_text.endswith("\n") or not head_text else "\n"
    text = f"{head_text}{joint}{note}\n{tail_text}"
    # Replacement characters can grow the text; trim the head until it fits.
    while utf8_len(text) > budget and head_text:
        head_text = head_text[: max(0, len(head_text) - (utf8_len(text) - budget) - 4)]
        text = f"{head_text}\n{note}\n{tail_text}"
    return text


def project(data: bytes, *, media_type: str, budget: int, failed: bool = False) -> Projection:
    """A preview of ``data`` in at most ``budget`` UTF-8 bytes."""
    found = detect(data, media_type=media_type, failed=failed)
    if found.classification is ProjectionClass.UNSUPPORTED:
        preview = _binary_preview(data)
    else:
        preview = head_tail(data, budget)
    if utf8_len(preview) > budget:
        preview = decode(cut_utf8(preview.encode("utf-8", "replace"), budget))
    return Projection(found.kind, found.classification, preview)
