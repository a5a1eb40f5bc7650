"""A resent conversation: the part of a request its client already sent on the previous turn.

A client sends its whole history on every turn: turn *n + 1* is turn *n*'s body with new
messages after its last ones. Parsing, hashing and looking up those resent megabytes again on
every turn is most of what the gateway would cost a long conversation with nothing new, so the
rewrite of a turn is kept (:class:`Turn`) and the next request that begins with the same bytes
is split instead (:meth:`Turn.split`): a comparison of the resent bytes, and only what follows
them (the new messages, the fields after the conversation) is parsed.

The resent part ends at a message: the longest run of the previous turn's messages the request
repeats byte for byte. Claude Code moves its prompt-cache mark (``cache_control``) to the last
message on every turn, so its previous last message comes back changed: every message before
it is reused, and it is read again with the new ones.

Only a body that is its own canonical JSON (what orjson writes: compact, keys in the order
read; what the OpenAI and Anthropic SDKs and Claude Code send) is kept, so the offset where
each message ends is known exactly without a parser that reports positions, and the same bytes
up to there are the same messages. Any other body is rewritten whole, every turn, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from cargohold.gateway._counts import RewriteCounts

# A run of 19 or more digits: an integer orjson would read as a float once it is over 64 bits
# (or a fraction whose digits a float cannot keep); such a body is read and written by
# Python's json, which keeps integers exact.
# Found as 19 zeros in the body with every digit made a zero: two C passes, about 1 ms for
# 2 MiB, where a regular expression took 40 ms on a body of many shorter runs (log timestamps).
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 19


def long_digits(body: bytes) -> bool:
    """Whether ``body`` holds a run of 19 or more digits."""
    return body.translate(_DIGITS_AS_ZERO).find(_LONG_RUN) >= 0


# The new messages are parsed as the value of this key: an object that opens with it and goes
# on with the body's own bytes after the resent ones (its new messages, the array's end, the
# fields after the conversation). It begins with a NUL, which JSON can only write as the escape
# \u0000 (no letters, so no other spelling): a body whose new part holds that escape anywhere
# is rewritten whole, so no field of the body can be taken for the key.
_KEY = "\x00cargohold.resent"
_NUL = b"\\u0000"
_OPEN = orjson.dumps({_KEY: []})[:-2]  # {"\u0000cargohold.resent":[


class CallLog(dict[str, str]):
    """Tool-call id -> tool, as the formats fill it, logging each call with the index of the
    message it is in (:attr:`message`, set by the rewrite before each message): what a later
    turn replays for the messages it reuses."""

    __slots__ = ("log", "message")

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[int, str, str]] = []
        self.message = 0

    def __setitem__(self, key: str, value: str) -> None:
        super().__setitem__(key, value)
        self.log.append((self.message, key, value))

    @classmethod
    def replayed(cls, log: list[tuple[int, str, str]], before: int) -> CallLog:
        """The calls of the messages before index ``before``, as ``log`` recorded them."""
        calls = cls()
        for message, key, value in log:
            if message >= before:
                break
            calls.message = message
            calls[key] = value
        return calls


@dataclass(frozen=True, slots=True)
class Turn:
    """One scope's last rewritten request, kept so that the next one can skip what it resends.

    Attributes:
        key: The request field the conversation is in (``messages``, ``input``).
        body: The client's body, as it was sent.
        ends: Where each message ends in it (the offset just past its last byte).
        head: The request's fields before the conversation, as read.
        messages: The conversation as forwarded (each heavy slot its stub), never mutated.
        calls: Every tool call of the conversation: (message index, call id, tool), in order.
        counts: What a request resending the first *i + 1* messages counts for them, at
            index *i*: their stubs reused, their credentials screened again.
        changed: The index of the first message the rewrite changed; ``None``: none.
        until: When the kept rewrite expires (``time.monotonic``): the stubs' artifacts are
            looked up again by a whole rewrite at least that often.
    """

    key: str
    body: bytes
    ends: list[int]
    head: dict[str, Any]
    messages: list[Any]
    calls: list[tuple[int, str, str]]
    counts: list[RewriteCounts]
    changed: int | None
    until: float

    def __repr__(self) -> str:  # never the body
        return f"Turn(messages={len(self.messages)}, bytes={len(self.body)})"

    def split(self, body: bytes) -> Split | None:
        """``body`` split after the longest run of this turn's messages it resends byte for
        byte (at least one); ``None`` when it resends none, or what follows them does not read
        as messages and the request's last fields (then the body is rewritten whole)."""
        reused = self._resent(body)
        if reused == 0:
            return None
        rest = body[self.ends[reused - 1] :]
        if rest[:1] == b",":
            rest = rest[1:]
        elif rest[:1] != b"]":  # not reached: _resent checks the byte after the message
            return None
        if _NUL in rest or long_digits(rest):
            return None  # maybe the key itself, or a number orjson would not read exactly
        wrapped = _OPEN + rest
        try:
            parsed = orjson.loads(wrapped)
        except orjson.JSONDecodeError:
            return None
        if type(parsed) is not dict:  # not reached: the text opens an object
            return None
        new = parsed.pop(_KEY, None)
        if type(new) is not list or self.key in parsed or not parsed.keys().isdisjoint(self.head):
            return None  # a duplicate field: the body's own parse would differ
        canonical = orjson.dumps({_KEY: new, **parsed}) == wrapped
        return Split(reused, new, parsed, canonical)

    def _resent(self, body: bytes) -> int:
        """How many of this turn's messages ``body`` begins with, byte for byte, each followed
        by the end of one message (a comma or the array's close)."""
        view = memoryview(self.body)

        def resends(count: int) -> bool:
            end = self.ends[count - 1]
            return body.startswith(view[:end]) and body[end : end + 1] in (b",", b"]")

        total = len(self.ends)
        if total == 0:
            return 0
        if resends(total):  # an SDK client's turn: every message again, then new ones
            return total
        if total > 1 and resends(total - 1):  # Claude Code's: the last one's cache mark moved
            return total - 1
        low, high = 0, total - 2  # resends(low) holds (0: trivially), resends(high + 1) fails
        while low < high:
            middle = (low + high + 1) // 2
            if resends(middle):
                low = middle
            else:
                high = middle - 1
        return low

    def counts_of(self, reused: int) -> RewriteCounts:
        """What a request resending the first ``reused`` messages counts for them."""
        counts = RewriteCounts()
        counts.add(self.counts[reused - 1])
        return counts

    def extended(
        self,
        body: bytes,
        split: Split,
        messages: list[Any],
        calls: CallLog,
        fresh: list[RewriteCounts],
    ) -> Turn | None:
        """The turn of ``body``, a canonical request :meth:`split` read as ``split``:
        ``messages`` its whole conversation as forwarded, ``calls`` the log of its calls,
        ``fresh`` what its new messages counted, cumulatively, each as a later request counts
        it. It expires when this one does (the resent stubs were not looked up again).
        ``None`` when the offsets do not add up (not reached: the body is canonical)."""
        reused = split.reused
        ends = self.ends[:reused]
        end = ends[-1]
        for message in split.new:
            end += 1 + len(orjson.dumps(message))  # the comma, then the message
            ends.append(end)
        if end != len(body) - len(_tail(split.fields)) - 1 or body[end : end + 1] != b"]":
            return None
        base = self.counts[reused - 1]
        counts = self.counts[:reused]
        for after in fresh:
            total = RewriteCounts()
            total.add(base)
            total.add(after)
            counts.append(total)
        changed = self.changed if self.changed is not None and self.changed < reused else None
        if changed is None:
            changed = next(
                (reused + i for i, m in enumerate(split.new) if messages[reused + i] is not m),
                None,
            )
        return Turn(
            key=self.key,
            body=body,
            ends=ends,
            head=self.head,
            messages=messages,
            calls=calls.log,
            counts=counts,
            changed=changed,
            until=self.until,
        )


@dataclass(frozen=True, slots=True)
class Split:
    """A request that resends a kept turn's first ``reused`` messages: its ``new`` messages
    after them (as read), its ``fields`` after the conversation, and whether its bytes are
    canonical (a turn of its own can be kept)."""

    reused: int
    new: list[Any]
    fields: dict[str, Any]
    canonical: bool

    def __repr__(self) -> str:  # never the messages
        return f"Split(reused={self.reused}, new={len(self.new)})"


def turn_of(
    key: str,
    body: bytes,
    request: dict[str, Any],
    messages: list[Any],
    calls: CallLog,
    counts: list[RewriteCounts],
    *,
    until: float,
) -> Turn | None:
    """The turn to keep of a request rewritten whole: ``body`` as sent, ``request`` as read,
    ``messages`` its conversation as forwarded, ``counts`` cumulative after each message (as
    a later request counts them); ``None`` when ``body`` is not the canonical JSON of
    ``request`` (nothing is kept: its next turn is rewritten whole too)."""
    names = list(request)
    at = names.index(key)
    head = {name: request[name] for name in names[:at]}
    read = request[key]
    parts = [orjson.dumps(message) for message in read]
    front = orjson.dumps(head)[:-1] + (b"," if head else b"") + orjson.dumps(key) + b":["
    tail = _tail({name: request[name] for name in names[at + 1 :]})
    if body != b"".join((front, b",".join(parts), b"]", tail)):
        return None
    ends: list[int] = []
    end = len(front) - 1  # so the first message's comma is the array's opening bracket
    for part in parts:
        end += 1 + len(part)
        ends.append(end)
    changed = next((i for i, m in enumerate(read) if messages[i] is not m), None)
    return Turn(
        key=key,
        body=body,
        ends=ends,
        head=head,
        messages=messages,
        calls=calls.log,
        counts=counts,
        changed=changed,
        until=until,
    )


def _tail(fields: dict[str, Any]) -> bytes:
    """The canonical bytes after a request's conversation: its later ``fields`` and the
    object's close."""
    if not fields:
        return b"}"
    return b"," + orjson.dumps(fields)[1:]


def reused(counts: RewriteCounts) -> RewriteCounts:
    """``counts`` as a later request that resends the same messages counts them: every stub
    stored now is reused then; what was screened is screened again; nothing is compacted."""
    return RewriteCounts(
        offloaded=0,
        reused=counts.reused + counts.offloaded,
        bytes_kept_out=counts.bytes_kept_out,
        tokens_kept_out=counts.tokens_kept_out,
        compacted=0,
        screened=counts.screened,
        unstored=0,
    )
