"""The verbatim projector: head and tail, omitted bytes stated. ``exact_required``'s only form."""

from __future__ import annotations

from cargohold._text import cut_utf8, cut_utf8_tail, decode, utf8_len

_NOTE_ROOM = 112


def head_tail(data: bytes, budget: int) -> str:
    """A verbatim head and tail of ``data`` within ``budget`` bytes, stating what is omitted.

    The head gets about two thirds of the room, the tail the rest; both end on line edges when a
    line edge is near, and never split a UTF-8 character. The tail is always represented. Bytes
    that are not UTF-8 show as U+FFFD, which the budget accounts for.
    """
    # Decoding never shortens (an invalid byte becomes a 3-byte U+FFFD): a body over the budget
    # is never whole, and is not decoded (a decoded copy and its re-encoding were twice its size).
    if len(data) <= budget:
        whole = decode(data)
        if utf8_len(whole) <= budget:
            return whole
    room = max(0, budget - _NOTE_ROOM)
    head_room = room * 2 // 3
    tail_room = room - head_room
    # Invalid bytes decode to 3-byte U+FFFD: shrink the byte slices until the text fits.
    for shrink in (1, 2, 3):
        head = cut_utf8(data, head_room // shrink)
        cut = head.rfind(b"\n")
        if cut >= len(head) * 3 // 4:
            head = head[: cut + 1]
        # The tail depends only on the body's last bytes: slicing just those (not all after the
        # head) keeps a copy of the whole body out of memory.
        limit = tail_room // shrink
        tail = cut_utf8_tail(data[max(len(head), len(data) - limit - 1) :], limit)
        cut = tail.find(b"\n")
        if 0 <= cut < len(tail) // 4 and cut + 1 < len(tail):
            tail = tail[cut + 1 :]
        text = _join(data, head, tail)
        if utf8_len(text) <= budget:
            return text
    return _join(data, b"", b"")[:budget]


def _join(data: bytes, head: bytes, tail: bytes) -> str:
    omitted = len(data) - len(head) - len(tail)
    lines_total = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    first_line = head.count(b"\n") + 1
    last_line = lines_total - tail.count(b"\n") - (0 if tail.endswith(b"\n") else 1)
    where = f"lines {first_line:,}-{last_line:,} of {lines_total:,}, " if lines_total > 1 else ""
    span = f"bytes {len(head):,}-{len(head) + omitted:,} of {len(data):,}"
    note = f"[... {omitted:,} bytes omitted ({where}{span}) ...]"
    head_text = decode(head)
    joint = "" if head_text.endswith("\n") or not head_text else "\n"
    return f"{head_text}{joint}{note}\n{decode(tail)}"
