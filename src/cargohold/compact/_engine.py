"""The compaction engine: which old tool results to clear, storing them, and the report.

The decision is a pure function of the request (and the store's answers), so a stateless
caller (a gateway that sees the client's whole, uncompacted history on every turn) and a
stateful one (a loop that keeps the compacted history) get the same bytes:

- The conversation is replayed message by message, as it grew. At each message the tokens so
  far (of the fixed part and of each message as it stands) are compared with
  ``trigger_tokens``; below it nothing happens. The tokens are the real tokenizer's (o200k,
  as the edge guard settles a request near the window) unless the edge guard's estimate of
  the whole request, scaled by the top of its error band, stays below the trigger: dense
  CSV, GeoJSON and logs run 2.5-3 bytes a token, so the estimate alone (about 4.35 for text)
  would compact only at about 1.5 times the trigger. Counts are remembered (a hold's
  :class:`~._memo.CompactionMemo`), so a history sent again is not counted again.
- Over it, the candidates are the tool results after the last compaction point (the last
  result that already is a compact stub), but the newest ``keep_last``, of tools not
  excluded, of at least ``min_result_bytes`` and larger than a compact stub. When what
  clearing them all would save is under ``clear_at_least``, nothing happens (yet); else they
  are all cleared at once (one compaction, one prompt-cache break), their inputs too with
  ``clear_tool_inputs``, and the last of them is the new compaction point.
- Nothing at or before the compaction point is ever rewritten: between two compactions, each
  request is the previous one with messages appended, byte for byte.

Clearing a result stores it first, through an offloader with the hold's store, scope, TTL,
credential and classification policy, whatever its size (so the heavy threshold does not
apply); a result the store refuses or fails stays as it is (nothing is lost, ever). A result
that already is a stub or a recovered segment of this store is replaced by the compact stub of
its own reference when that reads back, else kept. The memo remembers each compact stub made
(checked by the body's SHA-256 before reuse), so a stateless caller's history of earlier
cleared results costs a hash per result, not a store and a render. Messages are never removed
or reordered, only their contents replaced, so every call keeps its result and every result
its call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cargohold._errors import StoreError, UsageError
from cargohold._events import (
    CompactOutcome,
    ContentKind,
    DecisionEvent,
    OffloadOutcome,
    Operation,
    Reason,
    Reporter,
    record,
)
from cargohold._offload import Offloader
from cargohold._records import ReadResult, normalize_media_type
from cargohold._ref import Ref
from cargohold._secrets import find_secrets, mask_secrets
from cargohold._segment import OPEN as SEGMENT_OPEN
from cargohold._segment import parse_segment
from cargohold._stub import (
    COMPACT_STUB_BYTES,
    MARKER,
    parse_compact_stub,
    parse_stub,
    render_compact_stub,
)
from cargohold._text import utf8_len
from cargohold._tokens import count_tokens, estimate_tokens
from cargohold.compact._anthropic import AnthropicFormat
from cargohold.compact._chat import ChatFormat
from cargohold.compact._langchain import LangChainFormat
from cargohold.compact._memo import CompactionMemo, Remembered, StubKey
from cargohold.compact._model import INPUT, RESULT, Counter, Format, Position, Slot
from cargohold.compact._policy import CompactionPolicy
from cargohold.compact._responses import ResponsesFormat
from cargohold.guard import ESTIMATE_BAND, RequestFormat
from cargohold.projection import sniff_media_type

_FORMATS: dict[RequestFormat, Format] = {
    RequestFormat.OPENAI_CHAT: ChatFormat(),
    RequestFormat.ANTHROPIC: AnthropicFormat(),
    RequestFormat.OPENAI_RESPONSES: ResponsesFormat(),
    RequestFormat.LANGCHAIN: LangChainFormat(),
}
_STUB_TOKENS = estimate_tokens(COMPACT_STUB_BYTES)
_HEAD = 8192
"""What is read of a stub's or segment's artifact for its compact stub (kind, first line)."""


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """What one :meth:`cargohold.Hold.compact` call did (no content).

    Attributes:
        format: The request format.
        tokens_before: The tokens of the request as given: the real tokenizer's count, or
            the edge guard's estimate when that decided (``counted`` false).
        tokens_after: The same measure of the request returned.
        cleared: Tool results the returned request holds as compact stubs that the given one
            held whole (or as a larger stub or a segment).
        inputs_cleared: Tool call inputs cleared likewise (``clear_tool_inputs``).
        refs: The references of everything cleared, in conversation order (each once).
        compactions: Compaction points new in this request (since the model's last turn):
            0 means this request extends the previous one byte for byte, so the provider's
            prompt cache keeps its prefix; each is one ``compact`` event.
        kept: Results that were due to be cleared but stay as they are, because the store
            refused or failed them, or a stub's artifact no longer reads back.
        events: The ``compact`` events reported, one per new compaction point.
        counted: Whether the tokens are the real tokenizer's count (the estimate was within
            its error of the trigger, or over it) rather than the estimate (far below it, or
            no tokenizer installed).
    """

    format: RequestFormat
    tokens_before: int
    tokens_after: int
    cleared: int = 0
    inputs_cleared: int = 0
    refs: tuple[Ref, ...] = ()
    compactions: int = 0
    kept: int = 0
    events: tuple[DecisionEvent, ...] = field(default=(), repr=False)
    counted: bool = False

    @property
    def changed(self) -> bool:
        """Whether the returned request differs from the one given."""
        return bool(self.cleared or self.inputs_cleared)


@dataclass(slots=True)
class _Cleared:
    text: str
    ref: Ref
    size: int


def clearing_offloader(offloader: Offloader) -> Offloader:
    """An offloader like ``offloader`` (store, scope, TTL, secrets policy, declared classes,
    read tools) that stores every result, whatever its size, and reports nothing (the
    compaction reports its one event)."""
    return Offloader(
        offloader.store,
        threshold=1,
        tool_thresholds={},
        secrets_policy=offloader.secrets_policy,
        budget=offloader.budget,
        reporter=None,
        read_tools=offloader.read_tools,
        ttl=offloader.ttl,
        tool_classifications=offloader.tool_classifications,
    )


class _Run:
    """One compaction call over one request."""

    def __init__(
        self,
        fmt: Format,
        policy: CompactionPolicy,
        offloader: Offloader,
        key: bytes | None,
        memo: CompactionMemo | None,
        counter: Counter | None,
    ) -> None:
        self.fmt = fmt
        self.policy = policy
        self.offloader = offloader
        self.clearer = clearing_offloader(offloader)
        self.key = key
        self.memo = memo
        self.counter = counter
        scope = offloader.store.scope
        self.scope = (scope.tenant, scope.user, scope.session)
        self.read_tools = offloader.read_tools

    def saving(self, slot: Slot) -> int:
        """The tokens clearing ``slot`` would save (its body's, less a compact stub's)."""
        counted = None if self.counter is None else self.counter(slot.body)
        tokens = estimate_tokens(utf8_len(slot.body)) if counted is None else counted
        return max(0, tokens - _STUB_TOKENS)

    def clear(self, slot: Slot) -> _Cleared | None:
        """Store the slot's body and render its compact stub (or reuse the one the memo
        remembers for it); ``None`` to keep it as it is."""
        if self.memo is None:
            return self._clear(slot)
        key: StubKey = (
            *self.scope,
            slot.kind,
            slot.tool,
            slot.call_id,
            slot.media_type,
            self.read_tools,
            self.offloader.secrets_policy_for(slot.tool),
        )
        found = self.memo.stub(self.offloader.store, key, slot.body, self.offloader.ttl)
        if found is not None:
            return _Cleared(found.stub, found.ref, found.size)
        cleared = self._clear(slot)
        if cleared is not None:
            self.memo.remember(key, slot.body, Remembered(cleared.text, cleared.ref, cleared.size))
        return cleared

    def is_cleared(self, slot: Slot) -> bool:
        """Whether the slot already holds a genuine compact stub (an input: inside the object
        a cleared input is)."""
        text = _inner(slot.body) if slot.kind == INPUT else slot.body
        if not text.startswith(MARKER) or utf8_len(text) > COMPACT_STUB_BYTES:
            return False
        return parse_compact_stub(text, key=self.key) is not None

    def clearable(self, slot: Slot) -> bool:
        size = utf8_len(slot.body)
        return (
            size >= self.policy.min_result_bytes
            and size > COMPACT_STUB_BYTES
            and slot.tool not in self.policy.exclude_tools
        )

    def _read(self, ref: Ref, *, end: int | None = None) -> ReadResult | None:
        """A verified read of ``ref`` (its head up to ``end``), or ``None`` when it does not
        resolve or the store fails: the slot then stays as it is."""
        try:
            read = self.offloader.store.read(ref, start=0, end=end)
        except StoreError:
            return None
        return read if read.ok and read.data is not None else None

    def _clear(self, slot: Slot) -> _Cleared | None:
        text = slot.body
        ref: Ref | None = None
        if slot.kind == RESULT and text.startswith(MARKER) and self.key is not None:
            info = parse_stub(text, key=self.key)
            ref = None if info is None else info.ref
        elif slot.kind == RESULT and text.startswith(SEGMENT_OPEN) and self.key is not None:
            segment = parse_segment(text, key=self.key)
            ref = None if segment is None else segment.ref
        if ref is not None:  # already out of context: its own stub, if it still reads back
            read = self._read(ref, end=_HEAD)
            if read is None or read.record is None:
                return None
            head = read.data or b""
            # The artifact may be a masked one (restricted, its credentials stored): the first
            # line a stub shows is always of a masked copy.
            findings = find_secrets(head)
            stub = render_compact_stub(
                mask_secrets(head, findings) if findings else head,
                ref,
                media_type=read.record.media_type,
                tool=slot.tool,
                call_id=slot.call_id,
                what=slot.kind,
                read_tools=self.offloader.read_tools,
                key=self.key,
                size=read.record.size,
            )
            if stub.size_bytes >= utf8_len(text):
                return None
            return _Cleared(stub.text, ref, read.record.size)
        result = self.clearer.offload(
            text, tool=slot.tool, media_type=slot.media_type, render=False
        )
        if result.outcome not in (OffloadOutcome.OFFLOADED, OffloadOutcome.EXISTING_REFERENCE):
            return None  # refused or failed: the result stays, whole
        ref = result.ref
        if ref is None:
            return None
        data = text.encode("utf-8", "surrogatepass")
        if result.redacted:  # what was stored is the redacted copy: read it back
            read = self._read(ref)
            if read is None or read.data is None:
                return None
            data = read.data
        if slot.media_type is None:  # as the offloader names a text's media type
            media = normalize_media_type(sniff_media_type(data) or "text/plain; charset=utf-8")
        else:
            media = normalize_media_type(slot.media_type)
        shown = data
        if self.clearer.secrets_policy_for(slot.tool) == "mask":
            findings = find_secrets(data)
            if findings:
                shown = mask_secrets(data, findings)
        stub = render_compact_stub(
            shown,
            ref,
            media_type=media,
            tool=slot.tool,
            call_id=slot.call_id,
            what=slot.kind,
            read_tools=self.offloader.read_tools,
            key=self.key,
            size=len(data),
        )
        return _Cleared(stub.text, ref, len(data))


def _inner(body: str) -> str:
    """The stub inside a cleared input's object (:func:`~._model.cleared_input`), or ``""``."""
    if not body.startswith('{"cargohold":'):
        return ""
    try:
        value = json.loads(body)
    except ValueError:
        return ""
    inner = value.get("cargohold") if isinstance(value, dict) and len(value) == 1 else None
    return inner if isinstance(inner, str) else ""


def _new_from(fmt: Format, messages: Sequence[Any]) -> int:
    """The index where this request's new part begins: the model's last turn (the previous
    request ended just before it)."""
    last = len(messages) - 1
    while last >= 0 and not fmt.from_model(messages[last]):
        last -= 1
    if last < 0:
        return 0
    while last > 0 and fmt.from_model(messages[last - 1]):
        last -= 1
    return last


def compact_request(
    request: Any,
    *,
    format: RequestFormat | str,
    policy: CompactionPolicy,
    offloader: Offloader,
    reporter: Reporter | None,
    key: bytes | None,
    memo: CompactionMemo | None = None,
) -> tuple[Any, CompactionReport]:
    """Compact ``request`` (see :meth:`cargohold.Hold.compact`); the input is never mutated.

    ``memo`` (the hold's) remembers token counts and compact stubs between calls; without
    one, every call counts, stores and renders afresh (the same bytes out, slower).

    Returns:
        The compacted request (``request`` itself when nothing was cleared) and the report.
    """
    fmt_name = next((f for f in RequestFormat if f.value == format), None)
    fmt = None if fmt_name is None else _FORMATS.get(fmt_name)
    if fmt_name is None or fmt is None:
        names = ", ".join(f.value for f in _FORMATS)
        raise UsageError(f"compaction reads the formats: {names}")
    if not isinstance(policy, CompactionPolicy):
        raise UsageError("policy must be a cargohold.CompactionPolicy")
    if fmt_name is not RequestFormat.LANGCHAIN and not isinstance(request, Mapping):
        raise UsageError(f"an {fmt_name.value} request is a mapping of the create call's arguments")
    messages = fmt.messages(request)
    if messages is None:  # no message list (a Responses input that is one string): nothing
        fixed = fmt.fixed_tokens(request) if isinstance(request, Mapping) else 0
        return request, CompactionReport(fmt_name, fixed, fixed)
    fixed = fmt.fixed_tokens(request)
    keys = [None if memo is None else memo.message_key(fmt_name, m) for m in messages]

    def measure(message: Any, key: tuple[str, int, int] | None, counter: Counter | None) -> int:
        if memo is None:
            return fmt.tokens(message, counter)
        return memo.tokens(key, counter is not None, lambda: fmt.tokens(message, counter))

    tokens = [measure(message, key, None) for message, key in zip(messages, keys, strict=True)]
    before = fixed + sum(tokens)
    # Far enough below the trigger that the estimate's worst error cannot reach it (dense
    # logs run 1.8 times the estimate): every prefix is below it too, nothing to do.
    if before * ESTIMATE_BAND[1] < policy.trigger_tokens:
        return request, CompactionReport(fmt_name, before, before)
    counter: Counter = count_tokens if memo is None else memo.count
    counted = count_tokens("counted") is not None  # a tokenizer is installed
    if counted:
        fixed = fmt.fixed_tokens(request, counter)
        tokens = [
            measure(message, key, counter) for message, key in zip(messages, keys, strict=True)
        ]
        before = fixed + sum(tokens)
    if before < policy.trigger_tokens:
        return request, CompactionReport(fmt_name, before, before, counted=counted)
    run = _Run(fmt, policy, offloader, key, memo, counter if counted else None)
    state = list(messages)
    calls: dict[str, str] = {}
    slots = [fmt.slots(index, message, calls) for index, message in enumerate(messages)]
    inputs: dict[str, Slot] = {}  # call id -> the call's input slot
    done: set[Position] = set()  # slots that hold a compact stub now (given or made)
    skip: set[Position] = set()  # slots that stay as they are in this call
    results: list[Slot] = []
    point: Position | None = None
    new_from = _new_from(fmt, messages)
    cleared_refs: list[Ref] = []
    seen_refs: set[Ref] = set()
    opened = 0  # results before this index are not open to clearing

    def is_open(slot: Slot) -> bool:
        return (
            slot.position not in done
            and slot.position not in skip
            and (point is None or slot.position > point)
            and run.clearable(slot)
        )

    counts = {RESULT: 0, INPUT: 0}
    kept = 0
    events: list[DecisionEvent] = []
    running = fixed
    for index in range(len(messages)):
        running += tokens[index]
        for slot in slots[index]:
            if run.is_cleared(slot):
                done.add(slot.position)
                if slot.kind == RESULT:
                    point = slot.position if point is None else max(point, slot.position)
            if slot.kind == RESULT:
                results.append(slot)
            elif slot.call_id is not None:
                inputs.setdefault(slot.call_id, slot)
        if running < policy.trigger_tokens:
            continue
        end = max(0, len(results) - policy.keep_last)
        # A result that is not open now never is again (done, skip and the point only grow):
        # the scan starts past them, so a long history is not scanned again at every message.
        while opened < end and not is_open(results[opened]):
            opened += 1
        due = [slot for slot in results[opened:end] if is_open(slot)]
        if not due:
            continue
        paired: list[Slot] = []
        if policy.clear_tool_inputs:
            for slot in due:
                call = inputs.get(slot.call_id) if slot.call_id else None
                if (
                    call is not None
                    and call.position not in done
                    and call.position not in skip
                    and (point is None or call.position > point)
                    and run.clearable(call)
                ):
                    paired.append(call)
        if sum(run.saving(slot) for slot in (*due, *paired)) < policy.clear_at_least:
            continue
        stubs: dict[int, dict[tuple[str, int], str]] = {}
        body_bytes = stub_bytes = 0
        cleared_here = 0
        last: Position | None = None
        for slot in sorted((*due, *paired), key=lambda s: s.position):
            cleared = run.clear(slot)
            if cleared is None:
                skip.add(slot.position)
                kept += slot.kind == RESULT
                continue
            stubs.setdefault(slot.message, {})[slot.kind, slot.part] = cleared.text
            done.add(slot.position)
            counts[slot.kind] += 1
            cleared_here += 1
            body_bytes += cleared.size
            stub_bytes += utf8_len(cleared.text)
            if cleared.ref not in seen_refs:
                seen_refs.add(cleared.ref)
                cleared_refs.append(cleared.ref)
            if slot.kind == RESULT:
                last = slot.position
        if not stubs:
            continue
        at = running
        for message, replaced in stubs.items():
            state[message] = fmt.replace(state[message], replaced)
            new_key = None if memo is None else memo.message_key(fmt_name, state[message])
            tokens[message] = measure(state[message], new_key, run.counter)
        running = fixed + sum(tokens[: index + 1])
        if last is not None:
            point = last if point is None else max(point, last)
        if index >= new_from:
            events.append(
                record(
                    reporter,
                    Operation.COMPACT,
                    CompactOutcome.COMPACTED,
                    ContentKind.TOOL_RESULT,
                    Reason.TRIGGER_TOKENS,
                    observed_bytes=body_bytes,
                    limit_bytes=policy.min_result_bytes,
                    ref=None,
                    context_bytes=stub_bytes,
                    estimated_tokens=at,
                    limit_tokens=policy.trigger_tokens,
                    cleared=cleared_here,
                    tokens_after=running,
                )
            )
    if not (counts[RESULT] or counts[INPUT]):
        return request, CompactionReport(fmt_name, before, before, kept=kept, counted=counted)
    after = fixed + sum(tokens)
    return fmt.rebuild(request, state), CompactionReport(
        format=fmt_name,
        tokens_before=before,
        tokens_after=after,
        cleared=counts[RESULT],
        inputs_cleared=counts[INPUT],
        refs=tuple(cleared_refs),
        compactions=len(events),
        kept=kept,
        events=tuple(events),
        counted=counted,
    )
