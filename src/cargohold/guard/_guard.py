"""The edge guard: one pass over an assembled request just before it is sent.

Two checks, in this order:

1. Leak: no part at or above the heavy threshold may be raw. A genuine stub or a genuine recovered
   segment (its marker's digest matching its text) passes; anything else raises
   :class:`ContextLeakError` and reports one ``llm.context_leak`` event.
2. Window: the request's tokens must not exceed the model's window less a margin, or
   :class:`ContextWindowExceededError` is raised and one ``llm.context_window_exceeded`` event
   reported. A model with no known window is reported (``llm.context_window_unchecked``) and
   passes; a strict guard refuses it (:class:`ContextWindowUnknownError`).

Counting must not dominate the call. The calibrated bytes-per-token estimate (by family: text,
JSON, base64; images at a flat cost) decides unless the request lies within the estimate's error
band of the limit; only then does the real tokenizer (bpe-openai's o200k, loaded once, lazily)
settle it. The guard never truncates and never modifies the request.
"""

from __future__ import annotations

import enum
import functools
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cargohold._config import MAX_THRESHOLD, check_threshold
from cargohold._errors import CargoholdError, UsageError
from cargohold._events import (
    ContentKind,
    GuardOutcome,
    Operation,
    Reason,
    Reporter,
    record,
)
from cargohold._marks import check_key
from cargohold._tokens import (
    BYTES_PER_TOKEN,
    IMAGE_TOKENS,
    Family,
    count_tokens,
    estimate_tokens,
)
from cargohold.guard._errors import (
    ContextLeakError,
    ContextWindowExceededError,
    ContextWindowUnknownError,
)
from cargohold.guard._formats import (
    walk_anthropic,
    walk_langchain,
    walk_openai_chat,
    walk_openai_completions,
    walk_openai_responses,
)
from cargohold.guard._log import AGENT_ID, EventsLogSink, events_path
from cargohold.guard._models import window_for
from cargohold.guard._walk import Walker

DEFAULT_MARGIN = 4096
"""Tokens kept free below the window by default (room for the answer)."""

MESSAGE_TOKENS = 4
"""Framing tokens counted per message (role and separators)."""

ESTIMATE_BAND = (0.6, 1.8)
"""The estimate's error, as the range of real/estimated tokens seen on real content: dense logs
and CSV run about 1.8 times the estimate, well-compressed prose and JSON about 0.6 of it. Outside
``estimate * band`` of the limit the estimate decides; inside, the real tokenizer."""


class RequestFormat(enum.StrEnum):
    """The request shapes the guard walks."""

    OPENAI_CHAT = "openai-chat"
    OPENAI_RESPONSES = "openai-responses"
    OPENAI_COMPLETIONS = "openai-completions"
    """The legacy ``completions.create``: a ``prompt`` (text or token ids) and a ``suffix``."""
    ANTHROPIC = "anthropic"
    LANGCHAIN = "langchain"


class Decision(enum.StrEnum):
    """What decided the window check."""

    ESTIMATE = "estimate"
    TOKENIZER = "tokenizer"
    NO_TOKENIZER = "no_tokenizer"
    """In the band, but no real tokenizer is installed: the estimate decided."""
    UNKNOWN_MODEL = "unknown_model"
    """No model, or a model no table knows: no window check was made."""
    SKIPPED = "skipped"
    """The caller asked for the leak check only."""


_KINDS: dict[str, ContentKind] = {
    "text": ContentKind.MESSAGE_TEXT,
    "system": ContentKind.SYSTEM_PROMPT,
    "tool_result": ContentKind.TOOL_RESULT,
    "tool_arguments": ContentKind.TOOL_ARGUMENTS,
    "attachment": ContentKind.ATTACHMENT,
    "tool_definitions": ContentKind.TOOL_DEFINITIONS,
    "other": ContentKind.REQUEST,
}
"""A finding's place -> the content kind its event reports."""

_WALKERS: dict[RequestFormat, Callable[[Walker, Any], None]] = {
    RequestFormat.OPENAI_CHAT: walk_openai_chat,
    RequestFormat.OPENAI_RESPONSES: walk_openai_responses,
    RequestFormat.OPENAI_COMPLETIONS: walk_openai_completions,
    RequestFormat.ANTHROPIC: walk_anthropic,
    RequestFormat.LANGCHAIN: walk_langchain,
}


@dataclass(frozen=True, slots=True)
class GuardReport:
    """A request that may go, and what the guard measured of it (no content).

    Attributes:
        format: The request format walked.
        model: The model checked against, if any.
        request_bytes: UTF-8 bytes of every leaf string of the request.
        messages: Messages (or input items, system prompts) counted.
        images: Image parts counted (at :data:`IMAGE_TOKENS` each).
        estimated_tokens: The calibrated estimate.
        counted_tokens: The real tokenizer's count, when the estimate was too close to call.
        window: The model's context window, when known.
        margin: Tokens kept free below the window.
        decided_by: What decided the window check.
    """

    format: RequestFormat
    model: str | None
    request_bytes: int
    messages: int
    images: int
    estimated_tokens: int
    counted_tokens: int | None
    window: int | None
    margin: int
    decided_by: Decision

    @property
    def tokens(self) -> int:
        """The count when one was made, else the estimate."""
        return self.estimated_tokens if self.counted_tokens is None else self.counted_tokens


def _positive(name: str, value: int, *, zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if zero else 1):
        raise UsageError(f"{name} must be a {'non-negative' if zero else 'positive'} integer")
    return value


class Guard:
    """Checks whole requests before they go to a model.

    What is not given is configured, as the offloader's settings are (``heavy_threshold``,
    ``tool_thresholds``, ``window_margin``, ``model_windows``; see the README), so the guard
    judges a tool's result at the very threshold the offloader applied to it.

    Stubs and recovered segments pass only when their check verifies under the store's marker
    key (an HMAC a tool cannot compute; see ``docs/guard.md``). The key is asked for only when a
    heavy part carries a marker: from ``key``, or else from the configured store.

    Args:
        threshold: The heavy threshold in bytes (at or above: must be a stub or segment), at
            most 1 MiB (the largest read) as the offloader's: no threshold turns the guard off.
        tool_thresholds: Tool name -> its own threshold, for the results of that tool (the
            request names the tool of each result through its call), each bounded alike.
        margin: Tokens kept free below the model's window.
        windows: Model-name prefix -> context window, consulted before the built-in table.
        reporter: Where the guard's events go. ``None``: the configured events log
            (``events_log``; by default ``events.jsonl`` in the user's state directory), where
            the CLI logs every decision. ``Reporter()`` with no sinks reports nothing.
        estimate_band: ``(low, high)`` bounds of real/estimated tokens; the estimate decides
            outside them, the real tokenizer inside.
        strict_window: Refuse a request whose model has no known window (or that names no
            model) with :class:`ContextWindowUnknownError`, instead of reporting an
            ``llm.context_window_unchecked`` event and letting it go.
        key: The marker key of the store whose stubs and segments the requests carry (its
            ``marker_key()``), or a callable returning it (called once, when a marker is first
            met: :attr:`cargohold.Hold.edge_guard` passes its store's). ``None``: the
            configured store's, read once when first needed. A key that cannot be had trusts
            no marker.

    Raises:
        ConfigError: a threshold that is not a positive integer of at most 1 MiB (the message
            names ``heavy_threshold`` or ``tool_thresholds.<tool>`` and the bound).
        UsageError: another argument out of range.

    Example::

        guard = cargohold.guard.Guard(reporter=reporter)
        guard.check(request, format="openai-chat")     # raises before anything is sent
    """

    def __init__(
        self,
        *,
        threshold: int | None = None,
        tool_thresholds: Mapping[str, int] | None = None,
        margin: int | None = None,
        windows: Mapping[str, int] | None = None,
        reporter: Reporter | None = None,
        estimate_band: tuple[float, float] = ESTIMATE_BAND,
        strict_window: bool = False,
        key: bytes | Callable[[], bytes] | None = None,
    ) -> None:
        log: Path | None = None  # the configured events log; read at the first event if unknown
        if threshold is None or tool_thresholds is None or margin is None or windows is None:
            from cargohold._config import load_settings  # what was not given is configured

            settings = load_settings()
            threshold = settings.heavy_threshold if threshold is None else threshold
            if tool_thresholds is None:
                tool_thresholds = settings.tool_thresholds
            margin = settings.window_margin if margin is None else margin
            windows = settings.model_windows if windows is None else windows
            log = events_path(settings.events_log)
        if reporter is None:  # the configured events log, where the CLI logs every decision
            reporter = Reporter([EventsLogSink(log)], agent_id=AGENT_ID)
        # Bounded as the offloader's are (at most 1 MiB, the largest read): a guard threshold
        # above every read's bound would let any raw result through, an off switch.
        self._threshold = check_threshold("heavy_threshold", threshold)
        self._tool_thresholds = {
            _tool(name): check_threshold(f"tool_thresholds.{name}", value)
            for name, value in tool_thresholds.items()
        }
        self._margin = _positive("margin", margin, zero=True)
        self._key: bytes | None = None
        self._key_source: Callable[[], bytes | None] = _configured_key
        if callable(key):
            self._key_source = _guarded(key)
        elif key is not None:
            self._key = check_key(key)
        self._key_lock = threading.Lock()
        self._windows = dict(windows or {})
        for value in self._windows.values():
            _positive("a context window", value)
        low, high = estimate_band
        if not 0 < low <= 1 <= high:
            raise UsageError("estimate_band is (low, high) with 0 < low <= 1 <= high")
        self._band = (float(low), float(high))
        self._reporter = reporter
        self._strict = bool(strict_window)
        self._known: dict[str, int | None] = {}

    def __repr__(self) -> str:  # never the key
        strict = ", strict_window=True" if self._strict else ""
        return f"Guard(threshold={self._threshold}, margin={self._margin}{strict})"

    @property
    def threshold(self) -> int:
        """The heavy threshold in bytes."""
        return self._threshold

    @property
    def tool_thresholds(self) -> dict[str, int]:
        """The per-tool thresholds (a copy)."""
        return dict(self._tool_thresholds)

    def threshold_for(self, tool: str | None) -> int:
        """The threshold ``tool``'s results are judged at."""
        if tool is not None and tool in self._tool_thresholds:
            return self._tool_thresholds[tool]
        return self._threshold

    def _marker_key(self) -> bytes | None:
        """The key markers must verify under; the configured store's when none was given.
        ``None`` when it cannot be had (then no marker passes: fail closed)."""
        if self._key is None:
            with self._key_lock:
                if self._key is None:
                    self._key = self._key_source()
        return self._key

    @property
    def strict_window(self) -> bool:
        """Whether a model with no known window is refused rather than reported."""
        return self._strict

    @property
    def reporter(self) -> Reporter:
        """Where the guard's events go (the configured events log when none was given)."""
        return self._reporter

    def window_for(self, model: str) -> int | None:
        """The window this guard uses for ``model`` (the caller's table first)."""
        if model not in self._known:
            if len(self._known) >= 256:  # model names come from requests: keep the memo small
                self._known.clear()
            self._known[model] = window_for(model, self._windows)
        return self._known[model]

    def check(
        self,
        request: Any,
        *,
        format: RequestFormat | str,
        model: str | None = None,
        check_window: bool = True,
    ) -> GuardReport:
        """Check ``request``; return what was measured, or raise before it is sent.

        Args:
            request: The request as the client would send it (a mapping of the create call's
                arguments; for LangChain, a list of messages).
            format: ``openai-chat``, ``openai-responses``, ``openai-completions`` (the legacy
                ``completions.create``), ``anthropic`` or ``langchain``.
            model: The model; taken from the request's ``model`` when omitted. With no model,
                or one no table knows, only the leak check is made and an
                ``llm.context_window_unchecked`` event reported (refused when strict).
            check_window: ``False`` to make the leak check only.

        Raises:
            ContextLeakError: a raw part at or above the heavy threshold.
            ContextWindowExceededError: more tokens than the window less the margin.
            ContextWindowUnknownError: a strict guard and no known window for the model.
            UsageError: an unknown format, a request of the wrong shape, one holding a
                one-shot iterator (it cannot be checked without being consumed), or one nested
                deeper than the walk recurses (hundreds of levels).
        """
        fmt = _format(format)
        walk = _WALKERS[fmt]
        if type(request) is not dict:  # a plain dict is the usual request: no ABC checks
            if fmt is not RequestFormat.LANGCHAIN and not isinstance(request, Mapping):
                raise UsageError(
                    f"an {fmt.value} request is a mapping of the create call's arguments"
                )
            if isinstance(request, Iterator):
                raise UsageError("a request is a list of messages, not a one-shot iterator")
        walker = Walker(
            self._threshold,
            root=request,
            tool_thresholds=self._tool_thresholds,
            key=self._marker_key,
        )
        _walked(walk, walker, request)
        estimated = _estimate(walker)
        if walker.findings:
            first = walker.findings[0]
            event = record(
                self._reporter,
                Operation.GUARD,
                GuardOutcome.CONTEXT_LEAK,
                _KINDS.get(first.where, ContentKind.REQUEST),
                Reason.RAW_HEAVY_CONTENT,
                observed_bytes=first.size,
                limit_bytes=first.threshold or self._threshold,
                ref=None,
                tool=first.tool,
                estimated_tokens=estimated,
            )
            raise ContextLeakError(walker.findings, threshold=self._threshold, event=event)
        if not check_window:
            model = None
        elif model is None and isinstance(request, Mapping):
            named = request.get("model")
            model = named if isinstance(named, str) else None
        window = None if model is None else self.window_for(model)
        counted: int | None = None
        if not check_window:
            decided = Decision.SKIPPED
        elif model is None or window is None:
            decided = Decision.UNKNOWN_MODEL
            event = record(
                self._reporter,
                Operation.GUARD,
                GuardOutcome.CONTEXT_WINDOW_UNKNOWN
                if self._strict
                else GuardOutcome.CONTEXT_WINDOW_UNCHECKED,
                ContentKind.REQUEST,
                Reason.UNKNOWN_MODEL,
                observed_bytes=walker.request_bytes,
                limit_bytes=0,
                ref=None,
                estimated_tokens=estimated,
            )
            if self._strict:
                raise ContextWindowUnknownError(model=model, event=event)
        else:
            allowed = window - self._margin
            if allowed < 1:
                raise UsageError("the margin leaves no room in the model's window")
            low, high = self._band
            if estimated * high <= allowed:
                decided, over = Decision.ESTIMATE, False
            elif estimated * low > allowed:
                decided, over = Decision.ESTIMATE, True
            else:
                counted = self._count(walk, request, walker)
                if counted is None:
                    decided, over = Decision.NO_TOKENIZER, estimated > allowed
                else:
                    decided, over = Decision.TOKENIZER, counted > allowed
            if over:
                tokens = estimated if counted is None else counted
                event = record(
                    self._reporter,
                    Operation.GUARD,
                    GuardOutcome.CONTEXT_WINDOW_EXCEEDED,
                    ContentKind.REQUEST,
                    Reason.WINDOW_MARGIN,
                    observed_bytes=walker.request_bytes,
                    limit_bytes=0,  # the window is tokens: limit_tokens
                    ref=None,
                    estimated_tokens=tokens,
                    limit_tokens=allowed,
                )
                raise ContextWindowExceededError(
                    model=model,
                    window=window,
                    margin=self._margin,
                    tokens=tokens,
                    counted=counted is not None,
                    event=event,
                )
        return GuardReport(
            format=fmt,
            model=model,
            request_bytes=walker.request_bytes,
            messages=walker.messages,
            images=walker.images,
            estimated_tokens=estimated,
            counted_tokens=counted,
            window=window,
            margin=self._margin,
            decided_by=decided,
        )

    def _count(
        self, walk: Callable[[Walker, Any], None], request: Any, first: Walker
    ) -> int | None:
        texts: list[str] = []
        _walked(walk, Walker(self._threshold, collect=texts, root=request), request)  # counts only
        total = 0
        for text in texts:
            counted = count_tokens(text)
            if counted is None:
                return None
            total += counted
        # bytes, path and file payloads have no text to count: their base64, estimated
        payloads = estimate_tokens(first.payload_bytes, Family.BASE64)
        return (
            total
            + payloads
            + first.images * IMAGE_TOKENS
            + first.messages * MESSAGE_TOKENS
            + first.tokens  # token ids: counted as given
        )


def _walked(walk: Callable[[Walker, Any], None], walker: Walker, request: Any) -> None:
    """``walk(walker, request)``; a request nested deeper than the walk recurses is a
    :class:`UsageError` (refused, so nothing at that depth is sent unchecked)."""
    try:
        walk(walker, request)
    except RecursionError:
        raise UsageError(
            "the request nests too deeply for the guard to check (objects or arrays hundreds of "
            "levels deep); nothing was sent"
        ) from None


def _tool(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise UsageError("tool_thresholds maps tool names to thresholds")
    return name


def _guarded(source: Callable[[], bytes]) -> Callable[[], bytes | None]:
    def key() -> bytes | None:
        try:
            return check_key(source())
        except CargoholdError:  # the store could not give it: no marker is trusted
            return None

    return key


def _configured_key() -> bytes | None:
    """The configured store's marker key, or ``None`` when the store cannot give it."""
    from cargohold._config import load_settings

    settings = load_settings()
    try:
        store = settings.open_store()
    except CargoholdError:
        return None
    try:
        return store.marker_key()
    except CargoholdError:
        return None
    finally:
        store.close()


_FORMATS: dict[object, RequestFormat] = {member.value: member for member in RequestFormat}
"""A format's name (or the member itself: a ``StrEnum`` hashes as its value) -> the member."""


def _format(value: RequestFormat | str) -> RequestFormat:
    try:
        return _FORMATS[value]
    except (KeyError, TypeError):  # TypeError: an unhashable value
        names = ", ".join(f.value for f in RequestFormat)
        raise UsageError(f"format must be one of: {names}") from None


_PROSE, _JSON, _BASE64 = (BYTES_PER_TOKEN[f] for f in (Family.PROSE, Family.JSON, Family.BASE64))


def _estimate(walker: Walker) -> int:
    """:func:`estimate_tokens` of each family's bytes, inline (it runs on every check)."""
    text, json, b64 = walker.text_bytes, walker.json_bytes, walker.b64_bytes
    return (
        (math.ceil(text / _PROSE) if text > 0 else 0)
        + (math.ceil(json / _JSON) if json > 0 else 0)
        + (math.ceil(b64 / _BASE64) if b64 > 0 else 0)
        + walker.images * IMAGE_TOKENS
        + walker.messages * MESSAGE_TOKENS
        + walker.tokens
    )


def estimate_request_tokens(request: Any, *, format: RequestFormat | str) -> int:
    """The guard's calibrated estimate of ``request``'s tokens, the figure its window check
    starts from (by family: text, JSON, base64; images at a flat cost; framing per message).

    Nothing is judged: no leak check, no window. About 0.2 ms for a 2 MiB request.

    Args:
        request: A request (or a part of one, e.g. ``{"messages": [message]}``) as
            :meth:`Guard.check` takes it.
        format: The request's format, as :meth:`Guard.check` names it.

    Raises:
        UsageError: an unknown format, or a request nested deeper than the walk recurses.
    """
    fmt = _format(format)
    walker = Walker(MAX_THRESHOLD, root=request)
    _walked(_WALKERS[fmt], walker, request)
    return _estimate(walker)


def count_request_tokens(
    request: Any,
    *,
    format: RequestFormat | str,
    count: Callable[[str], int | None] = count_tokens,
) -> int | None:
    """``request``'s tokens by the real tokenizer (o200k), as the guard settles a request
    near the window: each text counted, payloads without text (bytes, files) at base64's
    estimate, images at :data:`IMAGE_TOKENS`, the framing per message.

    Nothing is judged (no leak check, no window). About 4 M tokens a second; the tokenizer
    loads once per process (a few hundredths of a second), on first use.

    Args:
        request: A request (or a part of one) as :meth:`Guard.check` takes it.
        format: The request's format, as :meth:`Guard.check` names it.
        count: Counts one text, ``None`` when it cannot (a caller's memo of
            :func:`cargohold._tokens.count_tokens`, say).

    Returns:
        The count, or ``None`` when no real tokenizer is installed.

    Raises:
        UsageError: an unknown format, or a request nested deeper than the walk recurses.
    """
    fmt = _format(format)
    texts: list[str] = []
    walker = Walker(MAX_THRESHOLD, collect=texts, root=request)
    _walked(_WALKERS[fmt], walker, request)
    total = 0
    for text in texts:
        counted = count(text)
        if counted is None:
            return None
        total += counted
    return total + _uncounted(walker)


def _uncounted(walker: Walker) -> int:
    """What a count adds to its texts' tokens: payloads without text (their base64,
    estimated), images, the framing per message, token ids as given."""
    return (
        estimate_tokens(walker.payload_bytes, Family.BASE64)
        + walker.images * IMAGE_TOKENS
        + walker.messages * MESSAGE_TOKENS
        + walker.tokens
    )


def check_request(
    request: Any,
    *,
    format: RequestFormat | str,
    model: str | None = None,
    threshold: int | None = None,
    tool_thresholds: Mapping[str, int] | None = None,
    margin: int | None = None,
    windows: Mapping[str, int] | None = None,
    reporter: Reporter | None = None,
    strict_window: bool = False,
    key: bytes | Callable[[], bytes] | None = None,
) -> GuardReport:
    """:meth:`Guard.check` with a guard made for this one call.

    Called with none of the guard's arguments, it reuses one guard made from the configuration at
    the first such call (reading the configuration costs more than checking a 2 MiB request);
    give any argument, or keep a :class:`Guard`, to control that.
    """
    defaults = (threshold, tool_thresholds, margin, windows, reporter, key) == (None,) * 6
    if defaults and not strict_window:
        guard = _default_guard()
    else:
        guard = Guard(
            threshold=threshold,
            tool_thresholds=tool_thresholds,
            margin=margin,
            windows=windows,
            reporter=reporter,
            strict_window=strict_window,
            key=key,
        )
    return guard.check(request, format=format, model=model)


@functools.cache
def _default_guard() -> Guard:
    """The guard :func:`check_request` reuses when given no argument of its own."""
    return Guard()
