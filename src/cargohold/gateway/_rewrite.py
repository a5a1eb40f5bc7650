"""The rewrite of one request before it is forwarded: heavy tool results and heavy tool-call
inputs become their stubs, compaction runs if configured, then the edge guard.

A client resends its whole history on every turn, raw results included. A result seen on an
earlier turn is not projected again: its stub is looked up in an in-memory map keyed by the
scope, the slot's kind and tool, and the SHA-256 of its bytes (the digest the reference is made
of, about 1.3 ms for 2 MiB), and kept only while its artifact still reads back in that scope.
Same bytes, same stub: the rewrite of a message is the same on every turn, so the provider's
prompt cache keeps hitting.

A slot below the heavy threshold stays inline, under the secrets policy of its tool like every
surface's results (:meth:`Offloader.secrets_policy_for`): a credential in it is redacted (with
the note of the kinds and lines), masked, or the slot withheld (``reject``), the same bytes on
every turn.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cargohold._errors import StoreError
from cargohold._events import OffloadOutcome, Reason
from cargohold._secrets import redaction_note, screen_text
from cargohold._segment import OPEN as SEGMENT_OPEN
from cargohold._segment import parse_segment
from cargohold._stub import MARKER
from cargohold._toolspecs import SPECS
from cargohold.compact._model import RESULT
from cargohold.gateway._persisted import spilled_file

if TYPE_CHECKING:
    from pathlib import Path

    from cargohold._hold import Hold
    from cargohold.compact import CompactionPolicy
    from cargohold.gateway._provider import Provider

_REUSABLE = frozenset({OffloadOutcome.OFFLOADED, OffloadOutcome.EXISTING_REFERENCE})
_CacheKey = tuple[str, str, str, str, str | None, str | None, bytes]


@dataclass(slots=True)
class RewriteCounts:
    """What one rewrite did (no content): the figures of a request, for its log line.

    Attributes:
        offloaded: Slots stored and replaced by a stub on this request.
        reused: Slots replaced by the stub of an earlier turn, without projecting again.
        bytes_kept_out: Bytes of the replaced slots.
        tokens_kept_out: Estimated tokens of the replaced slots (each slot's offload decision's
            estimate, the same on a turn that reuses its stub).
        compacted: Results the compaction cleared.
        screened: Inline slots forwarded with their credentials redacted or masked, or
            withheld (their tool's secrets policy).
    """

    offloaded: int = 0
    reused: int = 0
    bytes_kept_out: int = 0
    tokens_kept_out: int = 0
    compacted: int = 0
    screened: int = 0

    def add(self, other: RewriteCounts) -> None:
        """Add ``other``'s figures to these (a running total of requests)."""
        self.offloaded += other.offloaded
        self.reused += other.reused
        self.bytes_kept_out += other.bytes_kept_out
        self.tokens_kept_out += other.tokens_kept_out
        self.compacted += other.compacted
        self.screened += other.screened


@dataclass(frozen=True, slots=True)
class RewriteTotals:
    """The figures of every request one :class:`Rewriter` rewrote since it was made.

    Attributes:
        requests: Requests rewritten (refused ones included: the guard runs last).
        changed: Requests forwarded with at least one slot replaced.
        counts: The sum of the requests' :class:`RewriteCounts` (a stub reused on every turn
            counts on every turn: it kept its bytes out of each of those requests).
    """

    requests: int
    changed: int
    counts: RewriteCounts


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
            (an artifact lives for hours; a lookup per stub per turn would cost 0.1 ms each).
    """

    compact: bool = False
    policy: CompactionPolicy | None = None
    tool_results: Path | None = field(default=None, repr=False)  # a path: not in the repr
    cache_size: int = 4096
    recheck_seconds: float = 30.0
    _stubs: OrderedDict[_CacheKey, tuple[str, str, float, int]] = field(
        default_factory=OrderedDict, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _requests: int = field(default=0, repr=False)
    _changed: int = field(default=0, repr=False)
    _sum: RewriteCounts = field(default_factory=RewriteCounts, repr=False)

    @property
    def totals(self) -> RewriteTotals:
        """Every request's figures so far, summed (a copy: later requests do not change it)."""
        with self._lock:
            counts = RewriteCounts()
            counts.add(self._sum)
            return RewriteTotals(requests=self._requests, changed=self._changed, counts=counts)

    def rewrite(
        self, hold: Hold, provider: Provider, request: dict[str, Any]
    ) -> tuple[Any, RewriteCounts]:
        """The request to forward (``request`` itself when nothing changed) and its counts.

        Raises:
            ContextLeakError: a raw heavy part remains that the gateway cannot replace (user
                text, an attachment, a system prompt): the request must not be forwarded.
            ContextWindowExceededError: the request exceeds the model's window less the margin.
        """
        counts = RewriteCounts()
        try:
            result = self._rewrite(hold, provider, request, counts)
        finally:
            with self._lock:  # a refused request counts too: its slots were stored
                self._requests += 1
                self._sum.add(counts)
        if result is not request:
            with self._lock:
                self._changed += 1
        return result, counts

    def _rewrite(
        self, hold: Hold, provider: Provider, request: dict[str, Any], counts: RewriteCounts
    ) -> Any:
        fmt = provider.format
        messages = fmt.messages(request)
        result: Any = request
        if messages is not None:
            calls: dict[str, str] = {}
            new_messages: list[Any] | None = None
            for index, message in enumerate(messages):
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
                    stub = self._stub(
                        hold, slot.kind, slot.tool, slot.media_type, slot.body, data, counts
                    )
                    if stub is None or stub == slot.body:
                        continue  # a recovered segment (bypass): forwarded as it is
                    counts.bytes_kept_out += len(data)
                    stubs[slot.kind, slot.part] = stub
                if stubs:
                    if new_messages is None:
                        new_messages = list(messages)
                    new_messages[index] = fmt.replace(message, stubs)
            if new_messages is not None:
                result = fmt.rebuild(request, new_messages)
        if self.compact:
            result, report = hold.compact(result, format=provider.name, policy=self.policy)
            counts.compacted = report.cleared
        model = result.get("model") if isinstance(result, dict) else None
        hold.guard(result, format=provider.name, model=model if isinstance(model, str) else None)
        return result

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
        scope = hold.scope
        digest = hashlib.sha256(data).digest()
        key: _CacheKey = (
            scope.tenant,
            scope.user,
            scope.session,
            kind,
            tool,
            media_type,
            digest,
        )
        with self._lock:
            cached = self._stubs.get(key)
            if cached is not None:
                self._stubs.move_to_end(key)
        now = time.monotonic()
        if cached is not None:
            ref, stub, checked, tokens = cached
            if now - checked < self.recheck_seconds or hold.info(ref).ok:
                if now - checked >= self.recheck_seconds:
                    with self._lock:
                        self._stubs[key] = (ref, stub, now, tokens)
                counts.reused += 1
                counts.tokens_kept_out += tokens
                return stub
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
            with self._lock:
                self._stubs[key] = (str(offload.ref), offload.text, now, tokens)
                while len(self._stubs) > self.cache_size:
                    self._stubs.popitem(last=False)
        # Rejected or failed: the offloader's bounded stub without the body, never the body.
        return offload.model_text  # an inline redacted body: the note of what, its final line


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
