"""Decision events: exactly one per offload or rehydrate decision, and one per guard failure
(and, in a working context with a compressor, one per compressor decision; behind the gateway,
one per request).

An event is categorical and privacy-safe by construction: it holds codes, byte counts, a validated
canonical reference (or none where the outcome must not carry one) and agent correlation. It never
holds a body, a path, an owner identity or an exception's text: there is no field that could. Its
run tag (:func:`run_tag`) is a pseudonym of its scope, keyed by the store's secret: equal for one
scope's events, meaningless without the store.

Reporting is best-effort through an explicitly passed :class:`Reporter`; with none, nothing is
reported and nothing is thrown. A reporter's :meth:`Reporter.child` shares its sinks and its
sequence counter, so sequence numbers are monotonic across a run's whole agent tree.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import itertools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from cargohold._errors import UsageError
from cargohold._records import ReadOutcome
from cargohold._ref import is_ref

if TYPE_CHECKING:
    from cargohold._scope import Scope

_log = logging.getLogger("cargohold.events")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")
_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")
_RUN = re.compile(r"[0-9a-f]{16}")


class Operation(enum.StrEnum):
    """What kind of decision an event records."""

    OFFLOAD = "offload"
    REHYDRATE = "rehydrate"
    GUARD = "guard"
    COMPRESS = "compress"
    """A pluggable compressor's answer for a stored worker output was used, or refused."""
    COMPACT = "compact"
    """Old tool results of a conversation were stored and replaced by compact stubs."""
    REQUEST = "request"
    """A request through the gateway: what it kept out of the context, forwarded or not."""


class ContentKind(enum.StrEnum):
    """Whose content the decision was about."""

    TOOL_RESULT = "tool_result"
    RECOVERED_CONTEXT = "recovered_context"
    # guard: where in a request the content sits
    MESSAGE_TEXT = "message_text"
    SYSTEM_PROMPT = "system_prompt"
    TOOL_ARGUMENTS = "tool_arguments"
    ATTACHMENT = "attachment"
    TOOL_DEFINITIONS = "tool_definitions"
    REQUEST = "request"
    """The request as a whole (the window check), or a key outside its messages."""


class OffloadOutcome(enum.StrEnum):
    """The one outcome of an offload decision."""

    INLINE = "inline"
    OFFLOADED = "offloaded"
    EXISTING_REFERENCE = "existing_reference"
    REJECTED = "rejected"
    FAILED = "failed"
    BYPASS = "bypass"


class RehydrateOutcome(enum.StrEnum):
    """The one outcome of a rehydrate decision: the store's read outcomes, and what a read of a
    verified body can still refuse (its kind, its range)."""

    RESOLVED = "resolved"
    MISSING = "missing"
    UNAUTHORIZED = "unauthorized"
    STALE = "stale"
    EXPIRED = "expired"
    OVER_BUDGET = "over_budget"
    UNSUPPORTED = "unsupported"
    """A line read or grep of a binary body (reason ``binary_content``): it has no lines to
    show; its bytes are read as base64 pages (``artifact_read``)."""
    OUT_OF_RANGE = "out_of_range"
    """A byte or line range that starts past the body's end (reason ``past_end``): the answer
    gives the body's size, its line count for a line read, and the last range that fits."""


class GuardOutcome(enum.StrEnum):
    """The outcome of a guard check that failed, or that could not check the window."""

    CONTEXT_LEAK = "llm.context_leak"
    CONTEXT_WINDOW_EXCEEDED = "llm.context_window_exceeded"
    CONTEXT_WINDOW_UNKNOWN = "llm.context_window_unknown"
    """Refused: no window is known for the model and the guard is strict."""
    CONTEXT_WINDOW_UNCHECKED = "llm.context_window_unchecked"
    """Sent without a window check: no window is known for the model (not a failure)."""


class CompressOutcome(enum.StrEnum):
    """The outcome of a compressor decision (working context): its answer became the preview,
    or the deterministic projector's preview did."""

    COMPRESSED = "compressed"
    FALLBACK = "fallback"


class CompactOutcome(enum.StrEnum):
    """The outcome of a compaction: old results cleared (one event per compaction point)."""

    COMPACTED = "compacted"


class RequestOutcome(enum.StrEnum):
    """The outcome of one request through the gateway (one ``request`` event per request)."""

    FORWARDED = "forwarded"
    """Sent upstream: rewritten (reason ``rewritten``) or as it came (``unchanged``)."""
    REFUSED = "refused"
    """Not sent: the edge guard stopped it (reason: the guard's, ``raw_heavy_content``,
    ``window_margin`` or ``unknown_model``)."""
    FAILED = "failed"
    """Not sent: its rewrite failed (reason ``store_unavailable``, ``store_error`` or
    ``rewrite_error``)."""


class Reason(enum.StrEnum):
    """Why a decision came out as it did. Assigned where the decision is made, never parsed."""

    # offload
    BELOW_THRESHOLD = "below_threshold"
    AT_OR_ABOVE_THRESHOLD = "at_or_above_threshold"
    IDENTICAL_CONTENT = "identical_content"
    ARTIFACT_TOO_LARGE = "artifact_too_large"
    SESSION_OBJECTS = "session_objects"
    SESSION_BYTES = "session_bytes"
    STORE_OBJECTS = "store_objects"
    STORE_BYTES = "store_bytes"
    TENANT_OBJECTS = "tenant_objects"
    TENANT_BYTES = "tenant_bytes"
    SENSITIVITY = "sensitivity"
    CREDENTIAL_DETECTED = "credential_detected"  # rejected: the body holds a credential
    CREDENTIAL_MASKED = "credential_masked"  # offloaded: the tool's policy masks credentials
    CREDENTIAL_REDACTED = "credential_redacted"  # inline or offloaded: credentials redacted
    STORE_UNAVAILABLE = "store_unavailable"
    STORE_ERROR = "store_error"
    RECOVERED_SEGMENT = "recovered_segment"
    DERIVED = "derived"  # offloaded: a tool derived it from a stored artifact (artifact_patch)
    # rehydrate
    VERIFIED = "verified"
    NOT_FOUND = "not_found"
    OWNER_MISMATCH = "owner_mismatch"
    DIGEST_MISMATCH = "digest_mismatch"
    TTL_ELAPSED = "ttl_elapsed"
    BUDGET_EXCEEDED = "budget_exceeded"
    EVALUATION_LIMIT = "evaluation_limit"  # over_budget: a query's work, depth or time bound
    BINARY_CONTENT = "binary_content"  # unsupported: lines or grep asked of a binary body
    PAST_END = "past_end"  # out_of_range: the range starts at or past the body's end
    NO_MATCH = "no_match"  # resolved: a search that found no hit to show (names no ref)
    # guard
    RAW_HEAVY_CONTENT = "raw_heavy_content"
    WINDOW_MARGIN = "window_margin"
    UNKNOWN_MODEL = "unknown_model"
    # compress (working context): why a compressor's answer was used or refused
    COMPRESSOR_ANSWERED = "compressor_answered"
    COMPRESSOR_FAILED = "compressor_failed"  # raised (or was unavailable)
    COMPRESSOR_TIMEOUT = "compressor_timeout"
    COMPRESSOR_MALFORMED = "compressor_malformed"  # not text, empty, or holds a marker
    COMPRESSOR_OVERSIZED = "compressor_oversized"  # over its budget, or longer than its input
    COMPRESSOR_HID_FAILURE = "compressor_hid_failure"  # dropped failure lines the input holds
    # compact
    TRIGGER_TOKENS = "trigger_tokens"  # the conversation crossed its policy's trigger
    # request (gateway)
    REWRITTEN = "rewritten"  # forwarded with at least one part replaced, cleared or screened
    UNCHANGED = "unchanged"  # forwarded as the client sent it
    REWRITE_ERROR = "rewrite_error"  # failed: the rewrite raised something not the store's


_WITH_REF = frozenset(
    {
        OffloadOutcome.OFFLOADED,
        OffloadOutcome.EXISTING_REFERENCE,
        OffloadOutcome.BYPASS,
    }
)
_WITHOUT_REF = frozenset({OffloadOutcome.INLINE, OffloadOutcome.REJECTED, OffloadOutcome.FAILED})

_REQUEST_REASONS: Mapping[RequestOutcome, frozenset[Reason]] = {
    RequestOutcome.FORWARDED: frozenset({Reason.REWRITTEN, Reason.UNCHANGED}),
    RequestOutcome.REFUSED: frozenset(
        {Reason.RAW_HEAVY_CONTENT, Reason.WINDOW_MARGIN, Reason.UNKNOWN_MODEL}
    ),
    RequestOutcome.FAILED: frozenset(
        {Reason.STORE_UNAVAILABLE, Reason.STORE_ERROR, Reason.REWRITE_ERROR}
    ),
}
"""The reasons a request event may give for each outcome."""

Outcome = (
    OffloadOutcome
    | RehydrateOutcome
    | GuardOutcome
    | CompressOutcome
    | CompactOutcome
    | RequestOutcome
)


@dataclass(frozen=True, slots=True)
class DecisionEvent:
    """One decision, as tests, operators and sinks see it.

    Attributes:
        operation: ``offload``, ``rehydrate``, ``guard``, ``compress`` or ``compact``.
        outcome: The categorical outcome.
        content_kind: ``tool_result`` or ``recovered_context``; for the guard, where the content
            sits (``message_text``, ``system_prompt``, ``attachment``...) or ``request``.
        reason: A stable reason code.
        observed_bytes: UTF-8 (or raw) bytes the decision looked at.
        limit_bytes: The threshold or budget it compared them with.
        ref: The canonical reference, or ``None`` where the outcome must not carry one.
        tool: The producing tool's name, when known.
        context_bytes: Bytes that entered the conversation as the decision's result (the stub,
            the inline content, the recovered segment; 0 when nothing did).
        estimated_tokens: Estimated tokens of the observed bytes (by content kind).
        limit_tokens: The token limit compared with (the guard's window less its margin, a
            compaction's trigger), when the decision compared tokens; ``None`` otherwise.
        cleared: Tool results (and inputs) a compaction replaced by stubs; 0 for the others.
        tokens_after: A compaction's estimate of the conversation's tokens after it
            (``estimated_tokens`` is the estimate before); ``None`` for the others.
        kind: The projection kind of the stored bytes (``json``, ``csv``, ``log``, ``code``,
            ``binary``...: the kind the stub states, without its detail), on an offload that
            stored or reused them; on a request event, the API it spoke (``anthropic``,
            ``openai_chat``, ``openai_responses``); ``None`` elsewhere, and in events of logs
            written before the field existed.
        agent_id: The reporting agent.
        parent_agent_id: Its parent, ``None`` at the root.
        depth: 0 at the root agent, +1 per nesting.
        sequence: Monotonic across the whole agent tree of one run.
        kept_out_bytes: A request event's bytes kept out of the context: the bytes of the
            parts its rewrite replaced by stubs (a stub reused from an earlier turn counts
            again: it kept its bytes out of this request too); 0 for the other events.
        offloaded: A request event's parts stored and replaced by a stub on this request.
        reused: A request event's parts replaced by the stub of an earlier turn.
        screened: A request event's inline parts forwarded with credentials redacted or masked,
            or withheld.
        run: The run tag: an opaque, pseudonymous label of the owner scope the decision was
            made in (16 hex digits of an HMAC of tenant, user and session under the store's
            secret marker key, see :func:`run_tag`): equal for the events of one scope, not
            reversible without the store, not an identity. ``None`` when no scope's key was
            known (a bare :class:`Reporter`), and in logs written before the field existed.

    On a request event (``operation`` ``request``, ``content_kind`` ``request``):
    ``observed_bytes`` is the request's size as the client sent it, ``context_bytes`` the size
    forwarded (0 when it was not), ``limit_bytes`` the heavy threshold its parts were judged at,
    ``estimated_tokens`` the estimated tokens kept out, and ``cleared`` the results its
    compaction cleared.
    """

    operation: Operation
    outcome: Outcome
    content_kind: ContentKind
    reason: Reason
    observed_bytes: int
    limit_bytes: int
    ref: str | None
    tool: str | None
    agent_id: str
    parent_agent_id: str | None
    depth: int
    sequence: int
    context_bytes: int = 0
    estimated_tokens: int = 0
    limit_tokens: int | None = None
    cleared: int = 0
    tokens_after: int | None = None
    kind: str | None = None
    kept_out_bytes: int = 0
    offloaded: int = 0
    reused: int = 0
    screened: int = 0
    run: str | None = None

    def __post_init__(self) -> None:
        if self.ref is not None and not is_ref(self.ref):
            raise UsageError("an event reference must be canonical")
        if isinstance(self.outcome, OffloadOutcome):
            if self.outcome in _WITH_REF and self.ref is None:
                raise UsageError(f"a {self.outcome.value} event must carry its reference")
            if self.outcome in _WITHOUT_REF and self.ref is not None:
                raise UsageError(f"a {self.outcome.value} event must not carry a reference")
        if (
            isinstance(self.outcome, RehydrateOutcome)
            and self.ref is None
            and self.reason is not Reason.NO_MATCH  # a search that found nothing names none
        ):
            raise UsageError("a rehydrate event names the reference it was asked for")
        compress = isinstance(self.outcome, CompressOutcome)
        if compress != (self.operation is Operation.COMPRESS):
            raise UsageError("a compress outcome belongs to a compress event, and only there")
        if compress and self.ref is None:
            raise UsageError("a compress event names the stored output it previewed")
        if isinstance(self.outcome, CompactOutcome) != (self.operation is Operation.COMPACT):
            raise UsageError("a compact outcome belongs to a compact event, and only there")
        self._check_request()
        if self.run is not None and (
            not isinstance(self.run, str) or _RUN.fullmatch(self.run) is None
        ):
            raise UsageError("an event run tag is 16 lower-case hex digits")
        after = self.tokens_after
        if (
            isinstance(self.cleared, bool)
            or not isinstance(self.cleared, int)
            or self.cleared < 0
            or (after is not None and (isinstance(after, bool) or not isinstance(after, int)))
            or (after is not None and after < 0)
        ):
            raise UsageError("a compaction's counts are non-negative integers")
        if self.tool is not None and _ID.fullmatch(self.tool) is None:
            raise UsageError("an event tool name must be a short identifier")
        # A code, never text from a body: a kind is one short lower-case identifier.
        if self.kind is not None and (
            not isinstance(self.kind, str) or _KIND.fullmatch(self.kind) is None
        ):
            raise UsageError("an event kind must be a short lower-case identifier")
        parent = self.parent_agent_id
        for agent in (self.agent_id,) if parent is None else (self.agent_id, parent):
            if not isinstance(agent, str) or _ID.fullmatch(agent) is None:
                raise UsageError("an event agent id must be a short identifier")
        if isinstance(self.depth, bool) or not isinstance(self.depth, int):
            raise UsageError("an event depth is a non-negative integer")
        if (self.depth == 0) != (self.parent_agent_id is None):
            raise UsageError("an event has a parent agent exactly when its depth is above 0")
        counts = (self.observed_bytes, self.limit_bytes, self.depth, self.context_bytes)
        if min(counts) < 0 or self.estimated_tokens < 0:
            raise UsageError("event byte counts and depth are non-negative")
        limit = self.limit_tokens
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise UsageError("an event token limit is a non-negative integer")

    def _check_request(self) -> None:
        """A request event's own rules; its counts on any other event are 0."""
        outcome = self.outcome
        request = isinstance(outcome, RequestOutcome)
        if request != (self.operation is Operation.REQUEST):
            raise UsageError("a request outcome belongs to a request event, and only there")
        counts = (self.kept_out_bytes, self.offloaded, self.reused, self.screened)
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in counts):
            raise UsageError("a request's counts are non-negative integers")
        if not isinstance(outcome, RequestOutcome):
            if any(counts):
                raise UsageError("only a request event counts parts kept out of a request")
            return
        if self.ref is not None or self.content_kind is not ContentKind.REQUEST:
            raise UsageError("a request event is about the request as a whole, without a ref")
        if self.reason not in _REQUEST_REASONS[outcome]:
            raise UsageError(f"a {outcome.value} request event has no reason {self.reason}")

    def as_dict(self) -> dict[str, str | int | None]:
        """The event as plain JSON-ready data."""
        return {
            "operation": self.operation.value,
            "outcome": self.outcome.value,
            "content_kind": self.content_kind.value,
            "reason": self.reason.value,
            "observed_bytes": self.observed_bytes,
            "limit_bytes": self.limit_bytes,
            "ref": self.ref,
            "tool": self.tool,
            "agent_id": self.agent_id,
            "parent_agent_id": self.parent_agent_id,
            "depth": self.depth,
            "sequence": self.sequence,
            "context_bytes": self.context_bytes,
            "estimated_tokens": self.estimated_tokens,
            "limit_tokens": self.limit_tokens,
            "cleared": self.cleared,
            "tokens_after": self.tokens_after,
            "kind": self.kind,
            "kept_out_bytes": self.kept_out_bytes,
            "offloaded": self.offloaded,
            "reused": self.reused,
            "screened": self.screened,
            "run": self.run,
        }


class Sink(Protocol):
    """Where events go: JSON lines, logging, OpenTelemetry, a run summary, a test list."""

    def emit(self, event: DecisionEvent) -> None:
        """Take one event. May raise; the reporter contains it."""
        ...


def _check_id(name: str, value: str) -> str:
    if not isinstance(value, str) or _ID.fullmatch(value) is None:
        raise UsageError(f"{name} must be 1-128 characters of letters, digits and ._:/-")
    return value


_RUN_LABEL = b"cargohold.run\x00"
"""Domain separation: a run tag's MAC input never equals a stub or segment marker's."""


def run_tag(key: bytes, scope: Scope) -> str:
    """The run tag events of ``scope`` carry: 16 hex digits of HMAC-SHA256 under ``key`` (the
    store's secret marker key) of the scope's tenant, user and session, NUL-separated (a scope
    part holds no NUL, so two scopes never join alike).

    Pseudonymous, not anonymous: equal for every event of one scope in one store, so a log can
    be cut by session (``cargohold report --session S``, which computes the same tag with the
    store's key); without the key it names no tenant, user or session, and no one can test a
    guess. Treat it as you would the log itself; it is not an identity and grants nothing.
    """
    owner = "\x00".join((scope.tenant, scope.user, scope.session)).encode("utf-8")
    return hmac.new(key, _RUN_LABEL + owner, hashlib.sha256).hexdigest()[:16]


_RUN_RETRY_SECONDS = 5.0
"""How long an event goes untagged after the store could not give its key, before the key
is asked for again."""


class _LazyRun:
    """A scope's run tag, computed at the first event (from the store's marker key, which a
    store may make or fetch on first use) and then kept. A key the store cannot give leaves
    the events without a tag: reporting never breaks a decision."""

    __slots__ = ("_key", "_known", "_retry_at", "_scope", "_value")

    def __init__(self, key: Callable[[], bytes], scope: Scope) -> None:
        self._key = key
        self._scope = scope
        self._value: str | None = None
        self._known = False
        self._retry_at = 0.0

    def __call__(self) -> str | None:
        # Two threads may both compute it: the same value either way.
        if not self._known and time.monotonic() >= self._retry_at:
            try:
                self._value = run_tag(self._key(), self._scope)
                self._known = True
            except Exception as exc:  # a store that cannot give its key: no tag, no failure
                # Asked again later, not never: a store down at the first event (often the
                # store_unavailable event itself) must not leave the whole run untagged.
                self._retry_at = time.monotonic() + _RUN_RETRY_SECONDS
                _log.warning("cargohold run tag unavailable (%s)", type(exc).__name__)
        return self._value


def _no_run() -> str | None:
    return None


@dataclass(slots=True)
class _Counter:
    lock: threading.Lock = field(default_factory=threading.Lock)
    counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def next(self) -> int:
        with self.lock:
            return next(self.counter)


class Reporter:
    """Hands decision events to sinks, with agent correlation and a run-wide sequence.

    Args:
        sinks: Where events go. A sink that raises is logged (class name only) and skipped:
            reporting never breaks the decision it reports.
        agent_id: This agent's id (an attribution label, not an owner identity).
        run: The run tag every event carries (:func:`run_tag` of the scope the decisions are
            made in); ``None``: events carry none. A :class:`~cargohold.Hold` tags its own.

    Example::

        summary = RunSummary()
        root = Reporter([JsonLinesSink(open("events.jsonl", "a")), summary], agent_id="planner")
        worker = root.child("worker-1")   # parent_agent_id="planner", depth=1, shared sequence
    """

    __slots__ = ("_counter", "_run", "_sinks", "agent_id", "depth", "parent_agent_id")

    def __init__(
        self, sinks: Iterable[Sink] = (), *, agent_id: str = "main", run: str | None = None
    ) -> None:
        self._sinks: tuple[Sink, ...] = tuple(sinks)
        self._counter = _Counter()
        self.agent_id = _check_id("agent_id", agent_id)
        self.parent_agent_id: str | None = None
        self.depth = 0
        self._run: Callable[[], str | None] = _no_run
        if run is not None:
            if not isinstance(run, str) or _RUN.fullmatch(run) is None:
                raise UsageError("run must be a run tag: 16 lower-case hex digits (run_tag)")
            self._run = lambda: run

    def __repr__(self) -> str:  # no run tag: it stays in the events alone
        return f"Reporter(agent_id={self.agent_id!r}, depth={self.depth})"

    def _copy(self) -> Reporter:
        twin = Reporter.__new__(Reporter)
        twin._sinks = self._sinks
        twin._counter = self._counter
        twin._run = self._run
        twin.agent_id = self.agent_id
        twin.parent_agent_id = self.parent_agent_id
        twin.depth = self.depth
        return twin

    def child(self, agent_id: str) -> Reporter:
        """A reporter for a sub-agent: same sinks, same sequence, same run tag, one level
        deeper."""
        kid = self._copy()
        kid.agent_id = _check_id("agent_id", agent_id)
        kid.parent_agent_id = self.agent_id
        kid.depth = self.depth + 1
        return kid

    def for_scope(self, key: Callable[[], bytes], scope: Scope) -> Reporter:
        """This reporter (same agent, sinks and sequence) with the run tag of ``scope``,
        computed from ``key()`` (the store's marker key) at its first event."""
        twin = self._copy()
        twin._run = _LazyRun(key, scope)
        return twin

    def decide(
        self,
        operation: Operation,
        outcome: Outcome,
        content_kind: ContentKind,
        reason: Reason,
        *,
        observed_bytes: int,
        limit_bytes: int,
        ref: str | None,
        tool: str | None = None,
        context_bytes: int = 0,
        estimated_tokens: int = 0,
        limit_tokens: int | None = None,
        cleared: int = 0,
        tokens_after: int | None = None,
        kind: str | None = None,
        kept_out_bytes: int = 0,
        offloaded: int = 0,
        reused: int = 0,
        screened: int = 0,
    ) -> DecisionEvent:
        """Build the decision's event, hand that very instance to every sink, and return it."""
        event = DecisionEvent(
            operation=operation,
            outcome=outcome,
            content_kind=content_kind,
            reason=reason,
            observed_bytes=observed_bytes,
            limit_bytes=limit_bytes,
            ref=ref,
            tool=tool if tool is not None and _ID.fullmatch(tool) else None,
            agent_id=self.agent_id,
            parent_agent_id=self.parent_agent_id,
            depth=self.depth,
            sequence=self._counter.next(),
            context_bytes=context_bytes,
            estimated_tokens=estimated_tokens,
            limit_tokens=limit_tokens,
            cleared=cleared,
            tokens_after=tokens_after,
            kind=kind,
            kept_out_bytes=kept_out_bytes,
            offloaded=offloaded,
            reused=reused,
            screened=screened,
            run=self._run(),
        )
        for sink in self._sinks:
            try:
                sink.emit(event)
            except Exception as exc:  # best-effort: a broken sink never breaks a decision
                _log.warning(
                    "cargohold event sink %s failed (%s)", type(sink).__name__, type(exc).__name__
                )
        return event


READ_REASONS: Mapping[ReadOutcome, Reason] = {
    ReadOutcome.RESOLVED: Reason.VERIFIED,
    ReadOutcome.MISSING: Reason.NOT_FOUND,
    ReadOutcome.UNAUTHORIZED: Reason.OWNER_MISMATCH,
    ReadOutcome.STALE: Reason.DIGEST_MISMATCH,
    ReadOutcome.EXPIRED: Reason.TTL_ELAPSED,
    ReadOutcome.OVER_BUDGET: Reason.BUDGET_EXCEEDED,
}
"""The reason a read's event gives for each store read outcome."""

LIMIT_REASONS: Mapping[str, Reason] = {
    "artifact_too_large": Reason.ARTIFACT_TOO_LARGE,
    "session_objects": Reason.SESSION_OBJECTS,
    "session_bytes": Reason.SESSION_BYTES,
    "store_objects": Reason.STORE_OBJECTS,
    "store_bytes": Reason.STORE_BYTES,
    "tenant_objects": Reason.TENANT_OBJECTS,
    "tenant_bytes": Reason.TENANT_BYTES,
    "sensitivity": Reason.SENSITIVITY,
}
"""The reason a refused write's event gives for each limit a store names."""


def record(
    reporter: Reporter | None,
    operation: Operation,
    outcome: Outcome,
    content_kind: ContentKind,
    reason: Reason,
    *,
    observed_bytes: int,
    limit_bytes: int,
    ref: str | None,
    tool: str | None = None,
    context_bytes: int = 0,
    estimated_tokens: int = 0,
    limit_tokens: int | None = None,
    cleared: int = 0,
    tokens_after: int | None = None,
    kind: str | None = None,
    kept_out_bytes: int = 0,
    offloaded: int = 0,
    reused: int = 0,
    screened: int = 0,
) -> DecisionEvent:
    """The decision's event, reported when a reporter is configured.

    With no reporter the event is still built (and attached to the result) but goes nowhere; its
    sequence is 0 and its agent is ``main``.
    """
    if reporter is not None:
        try:
            return reporter.decide(
                operation,
                outcome,
                content_kind,
                reason,
                observed_bytes=observed_bytes,
                limit_bytes=limit_bytes,
                ref=ref,
                tool=tool,
                context_bytes=context_bytes,
                estimated_tokens=estimated_tokens,
                limit_tokens=limit_tokens,
                cleared=cleared,
                tokens_after=tokens_after,
                kind=kind,
                kept_out_bytes=kept_out_bytes,
                offloaded=offloaded,
                reused=reused,
                screened=screened,
            )
        except UsageError:
            raise  # a field the decision got wrong: a bug to surface, not a reporter failure
        except Exception as exc:
            # Best-effort (ADR-0006): a reporter that is not a cargohold Reporter, or breaks,
            # must not undo a decision whose bytes may already be written. Class names only.
            _log.warning(
                "cargohold reporter %s failed (%s); the event is not reported",
                type(reporter).__name__,
                type(exc).__name__,
            )
    return DecisionEvent(
        operation=operation,
        outcome=outcome,
        content_kind=content_kind,
        reason=reason,
        observed_bytes=observed_bytes,
        limit_bytes=limit_bytes,
        ref=ref,
        tool=tool if tool is not None and _ID.fullmatch(tool) else None,
        agent_id="main",
        parent_agent_id=None,
        depth=0,
        sequence=0,
        context_bytes=context_bytes,
        estimated_tokens=estimated_tokens,
        limit_tokens=limit_tokens,
        cleared=cleared,
        tokens_after=tokens_after,
        kind=kind,
        kept_out_bytes=kept_out_bytes,
        offloaded=offloaded,
        reused=reused,
        screened=screened,
    )
