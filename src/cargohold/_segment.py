"""Recovered context segments: content an explicit read brought back into the conversation.

A segment is marked so the offload seam lets it through (``bypass``) instead of offloading it
again, and so the edge guard can tell it from a producer that forgot to offload: the opening line
names the reference, what part was read, the budget the caller chose and a check of the text
between the marker lines::

    [cargohold:recovered] artifact://sha256/<64 hex> | bytes 0-4096 of 120000 | budget 16384 | mac <64 hex>
    ...the text...
    [cargohold:end-recovered]

The framing is fixed, whatever the text: the opening line, one ``\n``, the text exactly, one
``\n``, the closing line (nothing after it). So the text is everything between the first ``\n``
and the last ``\n``: a client removes exactly one newline before the closing line, never "a
trailing newline if any" (a text that ends with its own newline has two there). The text may
itself hold either marker line; only the first line and the last count.

The check is ``mac``: an HMAC-SHA256, under the store's marker key (:mod:`cargohold._marks`), of the
opening line's fields and the text. A tool that does not hold the key cannot make one, so a segment
it forged (a made-up reference around raw text) or a genuine one it edited is raw content to the
offload seam and the guard. Rendered without a key (tests, documentation), the check is
``sha256``, the plain digest of the text: it catches accidents only, and a guard never trusts it.

Its tokens still count toward the window.
"""  # noqa: E501 - the example line is the format, unbroken

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from cargohold._marks import check_key, same, tag
from cargohold._records import MAX_READ_BYTES
from cargohold._ref import Ref
from cargohold._text import utf8_len

OPEN = "[cargohold:recovered]"
CLOSE = "[cargohold:end-recovered]"
_FIRST = re.compile(
    r"\[cargohold:recovered\] (artifact://sha256/[0-9a-f]{64}) \| ([a-z0-9 ,.=:-]{1,80})"
    r" \| budget ([0-9]{1,7}) \| (sha256|mac) ([0-9a-f]{64})"
)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _mac(key: bytes, fields: str, text: str) -> str:
    return tag(key, b"cargohold segment", fields.encode(), text.encode("utf-8", "surrogatepass"))


def render_segment(ref: Ref, span: str, text: str, budget: int, *, key: bytes | None = None) -> str:
    """Wrap ``text`` read from ``ref`` as a recovered segment.

    Args:
        ref: The reference read.
        span: What was read, e.g. ``bytes 0-4096 of 120000`` or ``lines 10-20 of 2000``.
        text: The content, exactly as it enters the conversation.
        budget: The byte budget the caller chose for it (at most 1 MiB).
        key: The store's marker key: the check is then an HMAC only the key's holders can make
            (what a guard trusts). Without one, a plain digest (tests and documentation).
    """
    fields = f"{ref} | {span} | budget {budget}"
    check = (
        "sha256 " + _digest(text) if key is None else "mac " + _mac(check_key(key), fields, text)
    )
    return f"{OPEN} {fields} | {check}\n{text}\n{CLOSE}"


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What a genuine recovered segment says about itself."""

    ref: Ref
    span: str
    budget: int
    text_bytes: int


def parse_segment(text: str, *, key: bytes | None = None) -> SegmentInfo | None:
    """The segment's facts if ``text`` is a genuine recovered segment within its budget.

    Genuine means: the opening line first, the closing line last, the check matching the text
    between them, and that text within the stated budget, itself at most 1 MiB. With ``key``, the
    check must be the HMAC under that key (a plain ``sha256`` check, which anyone can compute, is
    not genuine); without one, the plain digest (what :func:`render_segment` writes with no key).
    """
    if not text.startswith(OPEN) or not text.endswith("\n" + CLOSE):
        return None
    first_end = text.find("\n")
    match = _FIRST.fullmatch(text[:first_end])
    if match is None or (match.group(4) == "mac") != (key is not None):
        return None
    rest = text[first_end + 1 : len(text) - len(CLOSE)]  # ends with "\n" (checked above)
    check = match.group(5)
    if key is None:

        def genuine(body: str) -> bool:
            return same(_digest(body), check)
    else:
        secret = check_key(key)
        fields = f"{match.group(1)} | {match.group(2)} | budget {match.group(3)}"

        def genuine(body: str) -> bool:
            return same(_mac(secret, fields, body), check)

    # The text, then the one newline before the closing line. Segments written before that
    # framing was fixed left it out after a text ending in a newline: still genuine (the check
    # says which reading it was made for), so a conversation from an older version still passes.
    body = rest[:-1]
    if not genuine(body):
        body = rest
        if not genuine(body):
            return None
    budget = int(match.group(3))
    size = utf8_len(body)
    if budget > MAX_READ_BYTES or size > budget:
        return None
    return SegmentInfo(Ref.parse(match.group(1)), match.group(2), budget, size)
