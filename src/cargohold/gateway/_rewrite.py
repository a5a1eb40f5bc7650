"""The rewrite of one request before it is forwarded: heavy tool results and heavy tool-call
inputs become their stubs, compaction runs if configured, then the edge guard.

A client resends its whole history on every turn, raw results included. A result seen on an
earlier turn is not projected again: its stub is looked up in an in-memory map keyed by the
scope, the slot's kind and tool, and the SHA-256 of its bytes (the digest the reference is made
of, about 1.3 ms for 2 MiB), and kept only while its artifact still reads back in that scope.
Same bytes, same stub: the rewrite of a message is the same on every turn, so the provider's
prompt cache keeps hitting. Each scope's last request and its rewrite are kept too
(:mod:`._resent`): a request that resends its first messages byte for byte is read only from
what follows them (:meth:`Rewriter.rewrite_resent`), and forwards what a whole rewrite would.

A slot below the heavy threshold stays inline, under the secrets policy of its tool like every
surface's results (:meth:`Offloader.secrets_policy_for`): a credential in it is redacted (with
the note of the kinds and lines), masked, or the slot withheld (``reject``), the same bytes on
every turn.

An image or document carried as base64 (:mod:`._attachments`), in a message or inside a tool
result, at or above the heavy threshold (its base64 measured, as the guard measures it) goes by
the hold's attachment disposition (``attachment_disposition``, per tool ``tool_dispositions``):
``ref`` stores its decoded bytes as their own artifact and a text part holding the stub takes
its place; ``tool:<name>`` stores them and the routing notice takes its place; ``inline`` and
``provider_native`` leave it (the guard decides, and its refusal says why). It is done before the
message's tool results are, so a tool result's picture is stored as the picture, not as part of
the result's JSON; the stub is reused by digest on every later turn, as a result's is.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cargohold._errors import StoreError, UsageError
from cargohold._events import OffloadOutcome, Reason
from cargohold._secrets import redaction_note, screen_text
from cargohold._segment import OPEN as SEGMENT_OPEN
from cargohold._segment import parse_segment
from cargohold._stub import MARKER
from cargohold._toolspecs import SPECS
from cargohold.compact._model import RESULT
from cargohold.gateway._attachments import Found, Place, find_attachments, replace_attachments
from cargohold.gateway._counts import RewriteCounts
from cargohold.gateway._persisted import spilled_file
from cargohold.gateway._resent import CallLog, Turn, reused, turn_of
from cargohold.guard import (
    Attachment,
    ContextLeakError,
    Disposition,
    DispositionKind,
    dispose,
)

if TYPE_CHECKING:
    from pathlib import Path

    from cargohold._hold import Hold
    from cargohold.compact import CompactionPolicy
    from cargohold.gateway._provider import Provider

_REUSABLE = frozenset({OffloadOutcome.OFFLOADED, OffloadOutcome.EXISTING_REFERENCE})
_CacheKey = tuple[str, str, str, str, str | None, str | None, bytes]
_TurnKey = tuple[str, str, str, str]

__all__ = ["RewriteCounts", "RewriteTotals", "Rewriter"]


@dataclass(frozen=True, slots=True)
class RewriteTotals:
    """The figures of every request one :class:`Rewriter` rewrote since it was made.

    Attributes:
        requests: Requests rewritten (refused ones included: the guard runs last).
        changed: Requests forwarded with at least one slot replaced.
        counts: The sum of the requests' :class:`RewriteCounts` (a stub reused on every turn
            counts on every turn: it kept its bytes out of each of those requests).
        resent: Requests that resent the previous request's conversation byte for byte,
            whose rewrite was reused for it (only their new messages were read).
    """

    requests: int
    changed: int
    counts: RewriteCounts
    resent: int = 0


@dataclass(slots=True)
class Rewriter:
    """Rewrites requests for one gateway; safe to share between threads.

    Attributes:
        compact: Whether lossless compaction runs on each request (:meth:`Hold.compact`).
        policy: The compaction policy; the hold's configured one when ``None``.
        tool_results: The folder whose files a client's ``<persisted-output>`` notice may
            name (:mod:`._persisted`); ``None``: notices are left as they are.
        cache_size: How many stubs the map keeps (least recently used go first).
        recheck_seconds: How long a stub is reused before its artifact is looked up again
            (an artifact lives for hours; a lookup per stub per turn would cost 0.1 ms each),
            and how long a conversation's rewrite is reused for the requests that resend it.
        turn_bytes: How many bytes of resent requests are kept, all scopes together (the least
            recently used scope's go first); each scope keeps its last request only.
    """

    compact: bool = False
    policy: CompactionPolicy | None = None
    tool_results: Path | None = field(default=None, repr=False)  # a path: not in the repr
    cache_size: int = 4096
    recheck_seconds: float = 30.0
    turn_bytes: int = 256 * 1024 * 1024
    _stubs: OrderedDict[_CacheKey, tuple[str, str, float, int]] = field(
        default_factory=OrderedDict, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _requests: int = field(default=0, repr=False)
    _changed: int = field(default=0, repr=False)
    _sum: RewriteCounts = field(default_factory=RewriteCounts, repr=False)
    _turns: OrderedDict[_TurnKey, Turn] = field(default_factory=OrderedDict, repr=False)
    _turns_size: int = field(default=0, repr=False)
    _resent: int = field(default=0, repr=False)

    @property
    def totals(self) -> RewriteTotals:
        """Every request's figures so far, summed (a copy: later requests do not change it)."""
        with self._lock:
            counts = RewriteCounts()
            counts.add(self._sum)
            return RewriteTotals(
                requests=self._requests,
                changed=self._changed,
                counts=counts,
                resent=self._resent,
            )

    def rewrite(
        self,
        hold: Hold,
        provider: Provider,
        request: dict[str, Any],
        *,
        counts: RewriteCounts | None = None,
        body: bytes | None = None,
    ) -> tuple[Any, RewriteCounts]:
        """The request to forward (``request`` itself when nothing changed) and its counts.

        ``counts``: filled as the rewrite goes (a new one when ``None``), so a caller knows
        what a refused request stored too. ``body``: the bytes ``request`` was read from, when
        orjson read them; a canonical body's rewrite is kept for the next request of the
        scope, which :meth:`rewrite_resent` then reads only the new part of.

        Raises:
            ContextLeakError: a raw heavy part remains that the gateway cannot replace (user
                text, an attachment, a system prompt): the request must not be forwarded.
            ContextWindowExceededError: the request exceeds the model's window less the margin.
        """
        counts = RewriteCounts() if counts is None else counts
        try:
            result = self._rewrite(hold, provider, request, counts, body)
        finally:
            with self._lock:  # a refused request counts too: its slots were stored
                self._requests += 1
                self._sum.add(counts)
        if result is not request:
            with self._lock:
                self._changed += 1
        return result, counts

    def _rewrite(
        self,
        hold: Hold,
        provider: Provider,
        request: dict[str, Any],
        counts: RewriteCounts,
        body: bytes | None,
    ) -> Any:
        fmt = provider.format
        messages = fmt.messages(request)
        result: Any = request
        left: dict[int, str] = {}  # message index -> why a heavy attachment there was left
        calls = CallLog()
        marks: list[RewriteCounts] = []
        rewritten: list[Any] | None = None
        if messages is not None:
            rewritten = self._messages(hold, provider, messages, 0, calls, counts, left, marks)
            if rewritten is not None:
                result = fmt.rebuild(request, rewritten)
        if self.compact:
            result, report = hold.compact(result, format=provider.name, policy=self.policy)
            counts.compacted = report.cleared
        _guarded(hold, provider, result, left)
        if body is not None and not self.compact and counts.unstored == 0 and messages:
            turn = turn_of(
                fmt.key,
                body,
                request,
                list(messages) if rewritten is None else rewritten,
                calls,
                marks,
                until=time.monotonic() + self.recheck_seconds,
            )
            if turn is not None:
                self._keep_turn(_turn_key(hold, provider), turn)
        return result

    def rewrite_resent(
        self,
        hold: Hold,
        provider: Provider,
        body: bytes,
        *,
        counts: RewriteCounts | None = None,
    ) -> tuple[Any, bool, RewriteCounts] | None:
        """The request to forward when ``body`` resends messages of this scope's last
        request byte for byte (its first ones, at least one), rewriting only what follows
        them; ``None`` when it does not (then :meth:`rewrite` the parsed body).

        The resent messages are not parsed, hashed or looked up again: they are the same
        bytes, so their rewrite is the one already made (:mod:`._resent`). The request is
        rebuilt from it, the new messages and the fields after the conversation, and guarded
        whole, as :meth:`rewrite` guards it: what is forwarded is what :meth:`rewrite` would
        forward. Returns the request, whether the client's own bytes are forwarded (nothing
        in it rewritten), and the counts (the resent messages' stubs count as reused).

        Raises:
            ContextLeakError, ContextWindowExceededError: as :meth:`rewrite`.
        """
        if self.compact:  # a compaction may rewrite any message: the whole request is read
            return None
        key = _turn_key(hold, provider)
        with self._lock:
            turn = self._turns.get(key)
            if turn is not None:
                self._turns.move_to_end(key)
        if turn is None or time.monotonic() >= turn.until:
            return None
        split = turn.split(body)
        if split is None:
            return None
        reused = split.reused
        counts = RewriteCounts() if counts is None else counts
        fresh = RewriteCounts()
        marks: list[RewriteCounts] = []
        try:
            calls = CallLog.replayed(turn.calls, reused)
            left: dict[int, str] = {}
            new = split.new
            rewritten = self._messages(hold, provider, new, reused, calls, fresh, left, marks)
            messages = [*turn.messages[:reused], *(new if rewritten is None else rewritten)]
            request = {**turn.head, turn.key: messages, **split.fields}
            _guarded(hold, provider, request, left)
        finally:
            counts.add(turn.counts_of(reused))
            counts.add(fresh)
            with self._lock:  # a refused request counts too: its slots were stored
                self._requests += 1
                self._resent += 1
                self._sum.add(counts)
        raw = (turn.changed is None or turn.changed >= reused) and rewritten is None
        if not raw:
            with self._lock:
                self._changed += 1
        if split.canonical and fresh.unstored == 0:
            extended = turn.extended(body, split, messages, calls, marks)
            if extended is not None:
                self._keep_turn(key, extended)
        return request, raw, counts

    def _messages(
        self,
        hold: Hold,
        provider: Provider,
        messages: Sequence[Any],
        first: int,
        calls: CallLog,
        counts: RewriteCounts,
        left: dict[int, str],
        marks: list[RewriteCounts],
    ) -> list[Any] | None:
        """``messages`` (the conversation's from index ``first`` on) with their heavy slots
        replaced, or ``None`` when none is. ``calls`` logs the calls as they are met,
        ``left`` gets why a heavy attachment was left, ``marks`` what ``counts`` holds after
        each message (as a later request resending it counts it: :func:`reused`)."""
        new_messages: list[Any] | None = None
        for offset in range(len(messages)):
            index = first + offset
            calls.message = index
            new_messages = self._message(
                hold, provider, messages, new_messages, offset, index, calls, counts, left
            )
            marks.append(reused(counts))
        return new_messages

    def _message(
        self,
        hold: Hold,
        provider: Provider,
        messages: Sequence[Any],
        new_messages: list[Any] | None,
        offset: int,
        index: int,
        calls: CallLog,
        counts: RewriteCounts,
        left: dict[int, str],
    ) -> list[Any] | None:
        """One message of :meth:`_messages`: ``new_messages`` (made from ``messages`` when
        ``None`` and this one is rewritten) with this one's heavy slots replaced."""
        fmt = provider.format
        message = messages[offset]
        # Attachments first: a tool result's picture is stored as itself, and the result's
        # slot is then what is left of it (its text, the picture's stub).
        disposed = self._attachments(hold, provider, index, message, calls, counts, left)
        if disposed is not message:
            if new_messages is None:
                new_messages = list(messages)
            new_messages[offset] = message = disposed
        stubs: dict[tuple[str, int], str] = {}
        for slot in fmt.slots(index, message, calls):
            limit = hold.offloader.threshold_for(slot.tool)
            if slot.kind == RESULT and self.tool_results is not None:
                spilled = self._spilled(hold, slot.tool, slot.call_id, slot.body, counts)
                if spilled is not None:
                    stubs[slot.kind, slot.part] = spilled
                    continue
            if len(slot.body) * 4 < limit:  # at most 4 UTF-8 bytes a character
                screened = _screened(hold, slot.kind, slot.tool, slot.body, counts)
                if screened is not None:
                    stubs[slot.kind, slot.part] = screened
                continue
            data = slot.body.encode("utf-8", "surrogatepass")
            if len(data) < limit:
                screened = _screened(hold, slot.kind, slot.tool, slot.body, counts)
                if screened is not None:
                    stubs[slot.kind, slot.part] = screened
                continue
            segment = _structured_segment(hold, slot.kind, slot.tool, slot.body)
            if segment is not None:
                stubs[slot.kind, slot.part] = segment
                continue
            stub = self._stub(hold, slot.kind, slot.tool, slot.media_type, slot.body, data, counts)
            if stub is None or stub == slot.body:
                continue  # a recovered segment (bypass): forwarded as it is
            counts.bytes_kept_out += len(data)
            stubs[slot.kind, slot.part] = stub
        if stubs:
            if new_messages is None:
                new_messages = list(messages)
            new_messages[offset] = fmt.replace(message, stubs)
        return new_messages

    def _keep_turn(self, key: _TurnKey, turn: Turn) -> None:
        """Keep ``turn`` as its scope's last request (within :attr:`turn_bytes`)."""
        size = len(turn.body)
        with self._lock:
            old = self._turns.pop(key, None)
            if old is not None:
                self._turns_size -= len(old.body)
            if size > self.turn_bytes:
                return
            self._turns[key] = turn
            self._turns_size += size
            while self._turns_size > self.turn_bytes:
                _, dropped = self._turns.popitem(last=False)
                self._turns_size -= len(dropped.body)

    def _attachments(
        self,
        hold: Hold,
        provider: Provider,
        index: int,
        message: Any,
        calls: dict[str, str],
        counts: RewriteCounts,
        left: dict[int, str],
    ) -> Any:
        """``message`` with each heavy attachment it carries inline disposed of (see the
        module), or ``message`` itself when none is replaced."""
        found = find_attachments(provider.name, message, calls)
        if not found:
            return message
        texts: dict[Place, str] = {}
        for attachment in found:
            tool = attachment.tool if attachment.result else None
            size = len(attachment.encoded)  # base64 is ASCII: characters are its bytes
            if size < hold.offloader.threshold_for(tool):
                continue  # small: forwarded byte for byte (inline is the guard's to judge)
            if not attachment.encoded.isascii():
                left[index] = _NOT_BASE64
                continue
            try:
                disposition = _disposition(hold, tool)
            except UsageError:
                left[index] = _BAD_DISPOSITION
                continue
            if disposition.kind in _LEFT:
                left[index] = _LEFT[disposition.kind]
                continue
            text = self._attachment_stub(hold, provider, attachment, disposition, counts)
            if text is None:
                left[index] = _NOT_BASE64
                continue
            counts.bytes_kept_out += size
            texts[attachment.place] = text
        if not texts:
            return message
        return replace_attachments(provider.name, message, texts)

    def _attachment_stub(
        self,
        hold: Hold,
        provider: Provider,
        attachment: Found,
        disposition: Disposition,
        counts: RewriteCounts,
    ) -> str | None:
        """The text that takes a heavy attachment's place under ``ref`` or ``tool:<name>``:
        the earlier turn's when its artifact still reads back, else the disposition carried
        out (its bytes stored with their media type, the hold's scope, TTL and events).
        ``None`` when it is not base64 (left as it is: the guard decides).

        Looked up by the SHA-256 of the base64 as the request carries it (its media type
        beside it), a cheaper key than decoding first (hashing costs about a seventh of
        decoding here): the same string always decodes to the same bytes, and the entry still
        holds their reference, looked up again as any stub's is.
        """
        kind = f"attachment {disposition}"
        carried = attachment.encoded.encode("ascii")
        key = self._key(hold, kind, attachment.tool, attachment.media_type, carried)
        cached = self._cached(hold, key, counts)
        if cached is not None:
            return cached
        decoded = attachment.decoded()
        if decoded is None:
            return None
        data, media_type = decoded
        done = dispose(
            Attachment(data, media_type=media_type, hint=disposition, tool=attachment.tool),
            format=provider.name,
            offloader=hold.offloader,
        )
        stored = done.offload
        text = done.part.get("text")
        if stored is None or not isinstance(text, str):  # not reached: ref and tool store
            return None
        if stored.outcome is OffloadOutcome.BYPASS:
            return text  # bytes that are a genuine recovered segment: the segment, as text
        counts.offloaded += 1
        tokens = stored.event.estimated_tokens
        counts.tokens_kept_out += tokens
        if stored.outcome in _REUSABLE and stored.ref is not None:
            self._remember(key, str(stored.ref), text, tokens)
        else:
            counts.unstored += 1
        # Rejected or failed: the offloader's bounded notice without the bytes, never them.
        return text

    def _spilled(
        self,
        hold: Hold,
        tool: str | None,
        call_id: str | None,
        notice: str,
        counts: RewriteCounts,
    ) -> str | None:
        """The stub of the file a ``<persisted-output>`` notice names, or ``None`` to leave
        the notice as it is (not a notice, a file it may not read, a result kept inline)."""
        assert self.tool_results is not None
        if "<persisted-output>" not in notice[:64]:
            return None
        max_bytes = hold.settings.limits.max_artifact_bytes
        data = spilled_file(notice, self.tool_results, max_bytes, call_id)
        if data is None:
            return None
        try:
            body: str | bytes = data.decode("utf-8")
        except UnicodeDecodeError:
            body = data
        stub = self._stub(hold, RESULT, tool, None, body, data, counts, spill=True)
        if stub is None or not stub.startswith("[cargohold]"):
            return None  # kept inline by the offloader: the client's own notice stands
        counts.bytes_kept_out += len(data)
        return stub

    def _stub(
        self,
        hold: Hold,
        kind: str,
        tool: str | None,
        media_type: str | None,
        body: str | bytes,
        data: bytes,
        counts: RewriteCounts,
        *,
        spill: bool = False,
    ) -> str | None:
        """The stub of one heavy slot: the earlier turn's when its artifact still reads back,
        else a new offload (stored and projected by the hold's offloader).

        ``spill``: the body is a spilled file's; ``None`` when the offloader keeps it inline
        (a small file: the notice stands, with its path and preview, and nothing counts).
        """
        key = self._key(hold, kind, tool, media_type, data)
        cached = self._cached(hold, key, counts)
        if cached is not None:
            return cached
        offload = hold.offload(body, tool=tool, media_type=media_type)
        if offload.outcome is OffloadOutcome.BYPASS:
            return offload.model_text  # a recovered segment: the bytes the model asked for
        if spill and offload.outcome is OffloadOutcome.INLINE:
            return None
        counts.offloaded += 1
        # An inline answer keeps nothing out.
        tokens = 0 if offload.outcome is OffloadOutcome.INLINE else offload.event.estimated_tokens
        counts.tokens_kept_out += tokens
        if offload.outcome in _REUSABLE and offload.ref is not None:
            self._remember(key, str(offload.ref), offload.text, tokens)
        elif offload.outcome is not OffloadOutcome.INLINE:
            counts.unstored += 1
        # Rejected or failed: the offloader's bounded stub without the body, never the body.
        return offload.model_text  # an inline redacted body: the note of what, its final line

    @staticmethod
    def _key(
        hold: Hold, kind: str, tool: str | None, media_type: str | None, data: bytes
    ) -> _CacheKey:
        """A stub's key in the map: the scope, the slot's kind and tool, and the SHA-256 of
        the exact bytes (the digest the reference is made of)."""
        scope = hold.scope
        digest = hashlib.sha256(data).digest()
        return (scope.tenant, scope.user, scope.session, kind, tool, media_type, digest)

    def _cached(self, hold: Hold, key: _CacheKey, counts: RewriteCounts) -> str | None:
        """The stub an earlier turn made under ``key``, while its artifact still reads back
        (looked up again once ``recheck_seconds`` have passed), else ``None``."""
        with self._lock:
            cached = self._stubs.get(key)
            if cached is not None:
                self._stubs.move_to_end(key)
        if cached is None:
            return None
        now = time.monotonic()
        ref, stub, checked, tokens = cached
        if now - checked >= self.recheck_seconds:
            if not hold.info(ref).ok:
                return None
            with self._lock:
                self._stubs[key] = (ref, stub, now, tokens)
        counts.reused += 1
        counts.tokens_kept_out += tokens
        return stub

    def _remember(self, key: _CacheKey, ref: str, stub: str, tokens: int) -> None:
        """Keep ``stub`` under ``key`` for later turns (the least recently used go first)."""
        with self._lock:
            self._stubs[key] = (ref, stub, time.monotonic(), tokens)
            while len(self._stubs) > self.cache_size:
                self._stubs.popitem(last=False)


def _turn_key(hold: Hold, provider: Provider) -> _TurnKey:
    """Whose last request a turn is: the scope's, in one provider's API."""
    scope = hold.scope
    return (scope.tenant, scope.user, scope.session, provider.name)


def _guarded(hold: Hold, provider: Provider, request: Any, left: dict[int, str]) -> None:
    """The edge guard on the request to forward; a refused attachment the rewrite left says
    why it was left (``left``: message index -> why).

    Raises:
        ContextLeakError, ContextWindowExceededError: as :meth:`Hold.guard`.
    """
    model = request.get("model") if isinstance(request, dict) else None
    try:
        hold.guard(request, format=provider.name, model=model if isinstance(model, str) else None)
    except ContextLeakError as leak:
        why = _why_left(leak, left)
        if why is None:
            raise
        raise _AttachmentLeftError(leak, why) from None


def _disposition(hold: Hold, tool: str | None) -> Disposition:
    """The disposition of an attachment: its tool's (``tool_dispositions``), else the hold's
    default (``attachment_disposition``), as every surface resolves it.

    Raises:
        UsageError: the configured value names a tool that is no tool name.
    """
    settings = hold.settings
    chosen = settings.tool_dispositions.get(tool) if tool is not None else None
    return Disposition.parse(chosen or settings.attachment_disposition)


_NOT_BASE64 = "an attachment there is not valid base64, so the gateway could not store it"
_BAD_DISPOSITION = (
    "the attachment disposition configured for it (attachment_disposition or "
    "tool_dispositions) is not valid"
)
_LEFT = {
    DispositionKind.INLINE: (
        "the attachment disposition there is inline (attachment_disposition or "
        "tool_dispositions), which keeps an attachment in the request only below the heavy "
        "threshold; set ref to store it and send its stub"
    ),
    DispositionKind.PROVIDER_NATIVE: (
        "the attachment disposition there is provider_native (attachment_disposition or "
        "tool_dispositions): the gateway uploads nothing, so a heavy attachment goes to the "
        "provider as a file id (upload it through the provider's files API), or set ref to "
        "store it and send its stub"
    ),
}


def _why_left(leak: ContextLeakError, left: dict[int, str]) -> str | None:
    """Why the first attachment the guard refused was left in the request, when the rewrite
    left one there (``None``: the leak is not one of them)."""
    for finding in leak.findings:
        if finding.where == "attachment" and finding.message_index in left:
            return left[finding.message_index]
    return None


class _AttachmentLeftError(ContextLeakError):
    """The guard's refusal of an attachment the gateway left in the request, saying why (its
    disposition, or bytes that are not base64): the same findings and the same event."""

    def __init__(self, leak: ContextLeakError, why: str) -> None:
        super().__init__(leak.findings, threshold=leak.threshold, event=leak.event)
        self.args = (f"{self.args[0]} The gateway left it: {why}.",)


def _screened(
    hold: Hold, kind: str, tool: str | None, body: str, counts: RewriteCounts
) -> str | None:
    """An inline slot under its tool's secrets policy: ``None`` when it holds no credential
    (it is forwarded as the client sent it), else what is forwarded in its place.

    Deterministic (the same body gives the same text), so the prompt cache keeps hitting; no
    event, since the slot is resent and screened again on every turn.
    """
    policy = hold.offloader.secrets_policy_for(tool)
    screened = screen_text(body, policy)
    if screened == body:
        return None
    counts.screened += 1
    if screened is None:
        what = "tool result" if kind == RESULT else "tool input"
        return (
            f"{MARKER} withheld (rejected: {Reason.CREDENTIAL_DETECTED.value}): this {what} "
            "held a credential and its tool's secrets policy is reject."
        )
    note = redaction_note(screened.encode("utf-8", "surrogatepass"), stored=False)
    if not note:  # masked in place: no marker to name
        return screened
    if screened and not screened.endswith("\n"):
        screened += "\n"
    return f"{screened}{MARKER} {note}"


def _structured_segment(hold: Hold, kind: str, tool: str | None, body: str) -> str | None:
    """The recovered segment of a read tool's structured answer sent as the result (Claude Code
    sends an MCP result's structured content, as compact JSON, when there is one), else ``None``.

    Forwarded in the answer's place: the segment the text part holds, which offloading would
    undo (the model asked for those bytes). Only when the result is a cargohold read tool's
    (``artifact_read``, or Claude Code's ``mcp__<server>__artifact_read``) and the segment is
    genuine under the hold's marker key: anything else shaped like one (another tool's output,
    a forged segment) is offloaded like any heavy result, so no tool output can put a segment
    the guard refuses into every later turn. Only the segment goes on, never the object's other
    fields.
    """
    if kind != RESULT or not _is_read_tool(tool) or not body.startswith('{"tool":"artifact_'):
        return None
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    if not isinstance(answer, dict) or answer.get("tool") not in _READ_TOOLS:
        return None
    text = answer.get("text")
    if not isinstance(text, str) or not text.startswith(SEGMENT_OPEN):
        return None
    try:
        key = hold.store.marker_key()
    except StoreError:
        return None  # no key, no genuine segment: offloaded (and failing closed there)
    if parse_segment(text, key=key) is None:
        return None
    return text


_READ_TOOLS = frozenset(spec.name for spec in SPECS)


def _is_read_tool(tool: str | None) -> bool:
    """Whether ``tool`` names a cargohold read tool, bare or as Claude Code names an MCP
    server's tool (``mcp__<server>__<tool>``)."""
    if tool is None:
        return False
    if tool.startswith("mcp__"):
        tool = tool.rpartition("__")[2]
    return tool in _READ_TOOLS
