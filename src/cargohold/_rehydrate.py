"""Explicit rehydration: one reference at a time, owner-checked, digest-verified, budgeted.

A reference appearing in context is inert; bytes come back only through these calls. Each call is
one decision with one event. Anything but ``resolved`` carries no content. What a read returns is
wrapped as a recovered context segment (see :mod:`cargohold._segment`), which the offload seam lets
through as ``bypass``, so a read is never offloaded again.

Model-facing reads default to a 16 KiB budget, below the heavy threshold; a caller that wants more
asks for it explicitly, up to 1 MiB per answer.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jmespath
import jmespath.exceptions
import re2

from cargohold._cpu import CPU_BOUND
from cargohold._errors import ReadError, UsageError
from cargohold._events import (
    READ_REASONS,
    ContentKind,
    DecisionEvent,
    Operation,
    Reason,
    RehydrateOutcome,
    Reporter,
    record,
)
from cargohold._facade import ScopedStore, as_ref
from cargohold._grep import MatchingLines, compile_pattern, entries
from cargohold._query import (
    MAX_DEPTH,
    QueryFailed,
    QueryFailedError,
    QueryLimit,
    compile_expression,
    evaluate,
)
from cargohold._records import MAX_READ_BYTES, KiB, ReadOutcome, ReadResult, Sensitivity
from cargohold._ref import Ref, is_ref
from cargohold._searchanswer import (
    SearchMatch,
    SearchResult,
    hit_block,
    no_hits,
    search_head,
    search_notes,
    search_terms,
)
from cargohold._secrets import find_secrets, mask_secrets
from cargohold._segment import render_segment
from cargohold._text import is_text, line_offset, looks_binary, utf8_len
from cargohold._tokens import estimate_tokens
from cargohold._toolspecs import MAX_HITS, SEARCH_TOOL

DEFAULT_READ_BUDGET = 16 * KiB
"""Default budget of a model-facing read: below the heavy threshold."""


@dataclass(frozen=True, slots=True)
class RehydrateResult:
    """One rehydrate decision.

    Attributes:
        outcome: ``resolved``, ``missing``, ``unauthorized``, ``stale``, ``expired``,
            ``over_budget``, ``unsupported`` (lines, a grep or a query asked of a binary body,
            reason ``binary_content``: read its bytes, which come back base64-encoded), or
            ``out_of_range`` (the range starts at or past the end of a body that has bytes or
            lines, reason ``past_end``: ``size``, ``lines`` and ``fit`` say what there is).
        reason: The stable reason code.
        ref: The reference asked for.
        segment: The recovered segment to put into the conversation (resolved only).
        content: The answer's text without the segment markers (resolved only).
        span: What was read (``bytes 0-4096 of 120000``...), when resolved.
        answer_bytes: UTF-8 bytes of the answer, or of the answer that would have been given
            (``over_budget``); 0 when nothing was read.
        budget: The byte budget applied.
        event: The decision's event: the very instance the reporter received.
        start: First byte of the body the answer covers (byte and line reads), when resolved.
        end: The byte after the last one it covers: the answer is body bytes ``[start, end)``.
        size: The body's total size in bytes, when its record was found.
        encoding: ``utf-8`` (the answer is the body's own text) or ``base64`` (binary bytes).
        fit: A range that fits the budget, when the answer was ``over_budget``: ``(offset,
            length)`` in bytes for :meth:`Rehydrator.read`, ``(start_line, end_line)`` for
            :meth:`Rehydrator.read_lines`. When ``unsupported`` (a binary body asked for lines
            or a grep): the first base64 page that fits, ``(offset, length)`` for
            :meth:`Rehydrator.read`. When ``out_of_range``: the last range of the body that
            fits, in the read's own terms (``None``: the body is empty, or its last line alone
            is over the budget). When a line read resolved ``lossy``: the ``(offset, length)``
            byte read of its exact bytes.
        masked: The answer was made from a copy of the body with its credentials masked (same
            length and lines), so it is not the body's exact bytes; the span says so too.
        lines: The body's line count (a line read that resolved, was ``over_budget`` or
            ``out_of_range``), counted as ``wc -l`` does plus a last line without a newline.
        lossy: A line read of bytes that are not all UTF-8: each bad byte came back as U+FFFD,
            so the answer is not the exact bytes ``[start, end)`` (the span says so, and ``fit``
            names the ``(offset, length)`` byte read that returns them exactly, base64).
        bound: A query that was ``over_budget`` before its answer was complete: which bound
            stopped it (``size``: the answer was at least ``answer_bytes`` when its growth
            stopped; ``steps``, ``depth`` or ``time``: the expression did too much work, nested
            too deep or ran too long, reason ``evaluation_limit``). ``None`` otherwise.
    """

    outcome: RehydrateOutcome
    reason: Reason
    ref: Ref
    segment: str | None = field(repr=False)
    content: str | None = field(repr=False)
    span: str | None
    answer_bytes: int
    budget: int
    event: DecisionEvent
    start: int | None = None
    end: int | None = None
    size: int | None = None
    encoding: str = "utf-8"
    fit: tuple[int, int] | None = None
    masked: bool = False
    bound: str | None = None
    lines: int | None = None
    lossy: bool = False

    @property
    def ok(self) -> bool:
        """Whether the read resolved."""
        return self.outcome is RehydrateOutcome.RESOLVED

    @property
    def text(self) -> str:
        """What to put into the conversation: the recovered segment when resolved, else a
        one-line statement of the outcome (never content)."""
        if self.segment is not None:
            return self.segment
        return f"[cargohold] {self.ref}: {self.outcome.value} ({self.reason.value}); no content"

    def raise_for_outcome(self) -> str:
        """The content, or :class:`~cargohold.ReadError` naming the outcome."""
        if self.content is None:
            raise ReadError(f"read was {self.outcome.value}", outcome=self.outcome.value)
        return self.content


def _text_slice(raw: bytes, start: int) -> tuple[str, int, int] | None:
    """``raw`` as text, trimmed to whole UTF-8 characters at its end, or ``None`` if binary
    (or if it starts inside a character).

    Returns the text and the exact byte span it covers, which always starts at ``start``.
    """
    if raw and (raw[0] & 0xC0) == 0x80:
        # The range starts inside a character. Skipping to the next whole one would leave those
        # bytes in no answer when a client pages through the body: give this page as base64.
        return None
    body = raw
    lead = 0
    for trim in range(4):
        piece = body[: len(body) - trim] if trim else body
        if raw and not piece:  # only partial characters: as text they would never be returned
            return None
        try:
            text = piece.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start < len(piece) - 3:
                return None
            continue
        if "\x00" in text:
            return None
        return text, start + lead, start + lead + len(piece)
    return None


class Rehydrator:
    """Explicit, verified, budgeted reads for one scope.

    Args:
        store: The scoped store to read from (its scope is the owner check).
        reporter: Where decision events go; ``None`` reports nothing.
        default_budget: Budget of a read that names none; when omitted, the configured
            ``read_budget`` (``CARGOHOLD_READ_BUDGET``, the configuration file, 16 KiB).
    """

    def __init__(
        self,
        store: ScopedStore,
        *,
        reporter: Reporter | None = None,
        default_budget: int | None = None,
    ) -> None:
        if not isinstance(store, ScopedStore):
            raise UsageError("a Rehydrator needs a cargohold.ScopedStore")
        if default_budget is None:
            from cargohold._config import load_settings  # the configured read budget

            default_budget = load_settings().read_budget
        self._store = store
        self._reporter = reporter
        self._default_budget = _check_budget(default_budget)

    def __repr__(self) -> str:
        return f"Rehydrator(default_budget={self._default_budget})"

    # -- decisions ------------------------------------------------------------------------

    def _decide(
        self,
        ref: Ref,
        outcome: ReadOutcome | RehydrateOutcome,
        budget: int,
        *,
        answer: str | None = None,
        span: str | None = None,
        answer_bytes: int = 0,
        start: int | None = None,
        end: int | None = None,
        size: int | None = None,
        encoding: str = "utf-8",
        fit: tuple[int, int] | None = None,
        masked: bool = False,
        reason: Reason | None = None,
        bound: str | None = None,
        lines: int | None = None,
        lossy: bool = False,
    ) -> RehydrateResult:
        rehydrate_outcome = RehydrateOutcome(outcome.value)
        if reason is None:
            reason = READ_REASONS[ReadOutcome(outcome.value)]
        segment = None
        masked = masked and answer is not None
        if masked:
            span = f"{span or 'answer'}, credentials masked"
        if answer is not None:  # marked with the store's key: the guard and seam trust it
            key = self._store.marker_key()
            segment = render_segment(ref, span or "", answer, budget, key=key)
        answer_size = utf8_len(answer) if answer is not None else answer_bytes
        event = record(
            self._reporter,
            Operation.REHYDRATE,
            rehydrate_outcome,
            ContentKind.RECOVERED_CONTEXT,
            reason,
            observed_bytes=answer_size,
            limit_bytes=budget,
            ref=str(ref),
            context_bytes=0 if segment is None else utf8_len(segment),
            estimated_tokens=estimate_tokens(answer_size),
        )
        return RehydrateResult(
            rehydrate_outcome,
            reason,
            ref,
            segment,
            answer,
            span,
            answer_size,
            budget,
            event,
            start=start if answer is not None else None,
            end=end if answer is not None else None,
            size=size,
            encoding=encoding,
            fit=fit,
            masked=masked,
            bound=bound,
            lines=lines,
            lossy=lossy and answer is not None,
        )

    def _whole(self, ref: Ref, budget: int) -> tuple[ReadResult, RehydrateResult | None, bool]:
        """Read and verify a whole body for line, grep and query answers (any size), its
        credentials masked; the last item says whether any were."""
        result = self._store.read(ref)
        if result.outcome is not ReadOutcome.RESOLVED:
            size = None if result.record is None else result.record.size
            return result, self._decide(ref, result.outcome, budget, size=size), False
        masked = _masked(result)
        return masked, None, masked is not result

    def _binary(self, ref: Ref, budget: int, size: int) -> RehydrateResult:
        """A line read, grep or query of a binary body: ``unsupported``, with the first page of
        base64 that fits the budget as :attr:`RehydrateResult.fit` (for :meth:`read`)."""
        page = max(1, budget // 4 * 3)  # base64 turns 3 bytes into 4
        return self._decide(
            ref,
            RehydrateOutcome.UNSUPPORTED,
            budget,
            size=size,
            reason=Reason.BINARY_CONTENT,
            fit=(0, min(page, size) or page),
        )

    # -- reads ----------------------------------------------------------------------------

    def read(
        self,
        ref: Ref | str,
        *,
        offset: int = 0,
        length: int | None = None,
        budget: int | None = None,
    ) -> RehydrateResult:
        """Bytes ``[offset, offset + length)`` (to the end when ``length`` is ``None``).

        Text comes back as text, cut to whole characters at its edges (the span says exactly
        which bytes); binary comes back base64-encoded. Over the budget: ``over_budget``. An
        ``offset`` at or past the end of a body that has bytes (or past 0 of an empty one) is
        ``out_of_range``, with the body's ``size`` and its last part that fits as ``fit``.
        """
        ref = as_ref(ref)
        limit = self._budget(budget)
        if isinstance(length, bool) or (
            length is not None and (not isinstance(length, int) or length < 0)
        ):
            raise UsageError("length must be a non-negative integer")
        end = None if length is None else offset + length
        result = self._store.read(ref, start=offset, end=end, max_bytes=limit)
        if result.outcome is ReadOutcome.OVER_BUDGET and result.record is not None:
            size = result.record.size
            stop = size if end is None else min(end, size)
            # binary comes back as base64 (4 bytes per 3): a first page of ``limit`` bytes fits
            # only if it is text, so look at it before suggesting it
            probe = self._store.read(ref, start=result.start, end=result.start + limit)
            binary = probe.data is not None and _text_slice(probe.data, result.start) is None
            return self._decide(
                ref,
                result.outcome,
                limit,
                answer_bytes=max(0, stop - result.start),
                size=size,
                fit=(result.start, max(1, limit // 4 * 3) if binary else limit),
            )
        if (
            result.outcome is not ReadOutcome.RESOLVED
            or result.data is None
            or result.record is None
        ):
            known = None if result.record is None else result.record.size
            return self._decide(ref, result.outcome, limit, size=known)
        size = result.record.size
        if offset >= size and (size > 0 or offset > 0):
            # Past the end: an empty "resolved" would read as an empty part of the body.
            page = max(1, limit // 4 * 3)  # fits as text, and as base64 (3 bytes in 4)
            last = max(0, size - page)
            return self._decide(
                ref,
                RehydrateOutcome.OUT_OF_RANGE,
                limit,
                size=size,
                reason=Reason.PAST_END,
                fit=(last, size - last) if size else None,
            )
        if result.record.sensitivity is Sensitivity.RESTRICTED and len(result.data) < size:
            # A masked tool's artifact: a credential may cross the range's edges, where a scan
            # of the range alone would not know it. Mask by the whole body's findings.
            whole, refused, _ = self._whole(ref, limit)
            if refused is not None or whole.data is None:
                return refused or self._decide(ref, whole.outcome, limit, size=size)
            cut = whole.data[result.start : result.start + len(result.data)]
            masked = cut != result.data
            result = dataclasses.replace(result, data=cut)
        else:
            unmasked = result
            result = _masked(result)
            masked = result is not unmasked
        assert result.data is not None
        sliced = _text_slice(result.data, result.start)
        if sliced is not None:
            text, first, last = sliced
            span = f"bytes {first}-{last} of {size}"
            return self._decide(
                ref,
                result.outcome,
                limit,
                answer=text,
                span=span,
                start=first,
                end=last,
                size=size,
                masked=masked,
            )
        encoded = base64.b64encode(result.data).decode("ascii")
        if len(encoded) > limit:
            fit = (result.start, max(1, limit // 4 * 3))  # base64 turns 3 bytes into 4
            return self._decide(
                ref, ReadOutcome.OVER_BUDGET, limit, answer_bytes=len(encoded), size=size, fit=fit
            )
        last = result.start + len(result.data)
        span = f"bytes {result.start}-{last} of {size}, base64"
        return self._decide(
            ref,
            result.outcome,
            limit,
            answer=encoded,
            span=span,
            start=result.start,
            end=last,
            size=size,
            encoding="base64",
            masked=masked,
        )

    def read_lines(
        self,
        ref: Ref | str,
        start: int = 1,
        end: int | None = None,
        *,
        budget: int | None = None,
    ) -> RehydrateResult:
        """Lines ``start`` to ``end`` inclusive, numbered from 1 (to the last when ``end=None``).

        A ``start`` past the last line (past 1 for an empty body) is ``out_of_range``, with the
        body's ``lines`` and its last lines that fit as ``fit``.

        A binary body (a NUL byte in its first 8 KiB, as GNU grep judges, or bytes that are not
        UTF-8 under a binary media type: an image, a PDF, a gzip stream) has no lines:
        ``unsupported``, reason ``binary_content``; :meth:`read` returns its bytes as base64.
        """
        ref = as_ref(ref)
        limit = self._budget(budget)
        if isinstance(start, bool) or not isinstance(start, int) or start < 1:
            raise UsageError("start line must be an integer of at least 1")
        if end is not None and (isinstance(end, bool) or not isinstance(end, int) or end < start):
            raise UsageError("end line must be an integer at or after the start line")
        result, refused, masked = self._whole(ref, limit)
        if refused is not None or result.data is None:
            return refused or self._decide(ref, result.outcome, limit)
        data = result.data
        total = len(data)
        if looks_binary(data, result.record.media_type if result.record else None):
            return self._binary(ref, limit, total)
        count = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        if start > max(count, 1):
            return self._decide(
                ref,
                RehydrateOutcome.OUT_OF_RANGE,
                limit,
                size=total,
                reason=Reason.PAST_END,
                fit=_last_lines(data, count, limit),
                lines=count,
            )
        stop = count if end is None else min(end, count)
        first = min(start, stop + 1)
        begin = line_offset(data, first)
        finish = line_offset(data, stop + 1)
        raw = data[begin:finish]
        try:
            text, lossy = raw.decode("utf-8"), False
        except UnicodeDecodeError:  # shown as U+FFFD, and said to be: not the exact bytes
            text, lossy = raw.decode("utf-8", "replace"), True
        size = utf8_len(text)
        if size > limit:
            cut = data.rfind(b"\n", begin, begin + limit)  # the last whole line that fits
            fitting = data.count(b"\n", begin, cut + 1) if cut >= 0 else 0
            return self._decide(
                ref,
                ReadOutcome.OVER_BUDGET,
                limit,
                answer_bytes=size,
                size=total,
                fit=(first, first + fitting - 1) if fitting else None,  # None: one line is over
                lines=count,
            )
        span = f"lines {first}-{stop} of {count}"
        if lossy:  # a segment's span is short, lower-case ASCII (see cargohold._segment)
            span += ", not utf-8: replaced"
        return self._decide(
            ref,
            result.outcome,
            limit,
            answer=text,
            span=span,
            start=begin,
            end=finish,
            size=total,
            fit=(begin, finish - begin) if lossy else None,
            masked=masked,
            lines=count,
            lossy=lossy,
        )

    def grep(
        self,
        ref: Ref | str,
        pattern: str,
        *,
        ignore_case: bool = False,
        max_matches: int = 100,
        budget: int | None = None,
    ) -> RehydrateResult:
        """Lines matching a regular expression, with their line numbers.

        The pattern runs on RE2, a linear-time engine: an untrusted pattern cannot hang the
        read. It sees one line at a time (``^``, ``$``, ``\\A`` and ``\\z`` are the line's
        edges; no match spans two lines). Very long lines are shown as a window around each
        match, naming its exact byte offset. Bytes that are not UTF-8 are shown as U+FFFD and, as
        in GNU grep, match no character. The answer states how many lines matched in all, even
        when it shows fewer. A binary body is ``unsupported`` (see :meth:`read_lines`). The scan
        runs over the body's bytes without copying or splitting
        them, with a Python step per matching line, never per line (see
        :class:`cargohold._grep.MatchingLines`).
        """
        ref = as_ref(ref)
        limit = self._budget(budget)
        if not isinstance(pattern, str) or not pattern or len(pattern) > 1000:
            raise UsageError("pattern must be a non-empty string of at most 1000 characters")
        if not is_text(pattern):
            raise UsageError(
                "pattern holds a lone surrogate (half of a UTF-16 pair, no character): "
                "nothing can match it; give the pattern as text"
            )
        if isinstance(max_matches, bool) or not isinstance(max_matches, int) or max_matches < 1:
            raise UsageError("max_matches must be a positive integer")
        try:
            regex = compile_pattern(pattern, ignore_case)
        except re2.error:
            raise UsageError("pattern is not a valid regular expression (RE2 syntax)") from None
        result, refused, masked = self._whole(ref, limit)
        if refused is not None or result.data is None:
            return refused or self._decide(ref, result.outcome, limit)
        if looks_binary(result.data, result.record.media_type if result.record else None):
            return self._binary(ref, limit, len(result.data))
        with CPU_BOUND:  # a scan of the whole body: see cargohold._cpu
            lines = MatchingLines(result.data, pattern, regex, ignore_case)
            shown: list[str] = []
            used = 0
            matched = 0
            reserve = 120  # room for the closing count line
            while len(shown) < max_matches:
                found = lines.next()
                if found is None:
                    break
                matched += 1
                for entry in entries(regex, result.data, *found, max_matches - len(shown)):
                    cost = utf8_len(entry)
                    if used + cost + reserve > limit:
                        max_matches = len(shown)  # budget reached: stop showing, keep counting
                        break
                    shown.append(entry)
                    used += cost
            matched += lines.count_rest()
        # Decided outside the lock: the decision's sinks are the caller's code.
        noun = "matching line" if matched == 1 else "matching lines"
        footer = f"[{matched} {noun}; {len(shown)} shown]"
        text = "".join(shown) + footer
        if utf8_len(text) > limit:  # a budget too small even for the count line
            return self._decide(ref, ReadOutcome.OVER_BUDGET, limit, answer_bytes=utf8_len(text))
        span = f"grep {matched} {noun}"
        return self._decide(ref, result.outcome, limit, answer=text, span=span, masked=masked)

    def query(
        self, ref: Ref | str, expression: str, *, budget: int | None = None
    ) -> RehydrateResult:
        """A JMESPath expression evaluated on a JSON artifact; the result as compact JSON.

        The evaluation is bounded as it runs (see :mod:`cargohold._query`): an answer that grows
        past the budget is never written out, and an expression that does too much work on this
        document, nests too deep or runs too long stops. Each is ``over_budget``, its
        :attr:`RehydrateResult.bound` saying which bound (``size``: the answer is at least
        ``answer_bytes``; ``steps``, ``depth``, ``time``: reason ``evaluation_limit``, a larger
        budget would not help). A binary body is ``unsupported`` (see :meth:`read_lines`).

        Raises:
            UsageError: the expression is not JMESPath, or the artifact is not JSON (or holds a
                number longer than Python reads, or nests deeper than it parses).
            QueryFailedError: (a UsageError) the expression failed on this document; the
                message names the function and the types, e.g. ``length() expects
                array|object|string, got number``.
        """
        ref = as_ref(ref)
        limit = self._budget(budget)
        if not isinstance(expression, str) or not expression or len(expression) > 2000:
            raise UsageError("expression must be a non-empty string of at most 2000 characters")
        try:
            compiled = compile_expression(expression)
        except jmespath.exceptions.JMESPathError:
            raise UsageError("expression is not valid JMESPath") from None
        except QueryLimit:
            raise UsageError(f"expression nests deeper than {MAX_DEPTH} levels") from None
        result, refused, masked = self._whole(ref, limit)
        if refused is not None or result.data is None:
            return refused or self._decide(ref, result.outcome, limit)
        size = len(result.data)
        if looks_binary(result.data, result.record.media_type if result.record else None):
            return self._binary(ref, limit, size)
        try:
            with CPU_BOUND:  # parsing the whole body: see cargohold._cpu
                document = json.loads(result.data, parse_constant=_refuse_constant)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise UsageError("the artifact is not JSON; use grep or a line read") from None
        except _NotJSONConstantError:
            raise UsageError(
                "the artifact is not JSON (it holds NaN or Infinity); use grep or a line read"
            ) from None
        except RecursionError:  # valid, maybe, but nested deeper than the parser recurses
            raise _too_deep() from None
        except ValueError:  # an integer of more digits than Python converts (4,300)
            raise UsageError(
                "the JSON holds a number of more digits than the query engine reads "
                f"({sys.get_int_max_str_digits():,}); use grep or a line read"
            ) from None
        try:
            text = evaluate(compiled, document, budget=limit, body_bytes=size)
            if not is_text(text):  # a lone surrogate the body spelled "\udcff": keep it escaped
                text = json.dumps(json.loads(text), separators=(",", ":"))
        except QueryFailed as exc:
            raise QueryFailedError(f"the expression failed on this document: {exc}") from None
        except QueryLimit as exc:
            over = exc.bound == "size"
            return self._decide(
                ref,
                ReadOutcome.OVER_BUDGET,
                limit,
                answer_bytes=exc.size,
                size=size,
                reason=None if over else Reason.EVALUATION_LIMIT,
                bound=exc.bound,
            )
        except RecursionError:  # comparing or writing back values nested almost that deep
            raise _too_deep() from None
        answer_size = utf8_len(text)
        if answer_size > limit:
            return self._decide(
                ref, ReadOutcome.OVER_BUDGET, limit, answer_bytes=answer_size, size=size
            )
        return self._decide(
            ref, result.outcome, limit, answer=text, span="query", size=size, masked=masked
        )

    # -- search ---------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        budget: int | None = None,
        lines_per_hit: int = 5,
    ) -> SearchResult:
        """Ranked full-text search over this scope's artifacts, each hit read back verified.

        The store ranks (:meth:`~cargohold.ScopedStore.search`: artifacts of this scope only
        that hold every whitespace-separated term, case-insensitive). Each hit, best first, is
        then read whole like any read (owner, digest, expiry), its credentials masked, and
        shown as its reference, its facts and up to ``lines_per_hit`` of its lines that hold a
        term (case-insensitive, each with its line number; a long line as an excerpt naming its
        byte offset), whole hits only, within ``budget``. A hit whose read does not resolve
        (its bytes went stale, or it expired since the index answered) or whose body is binary
        is left out and counted, never shown; one that reads as missing (collected since) or
        another session's is dropped uncounted (a count could tell of another's artifact).
        Hits past the budget are counted, not read.

        One decision, one ``rehydrate`` event (tool ``artifact_search``): ``resolved`` naming
        the best hit shown; ``resolved`` with reason ``no_match`` and no reference when no hit
        can be shown; ``over_budget`` (naming the first verified hit) when not even its first
        line fits the budget.

        Raises:
            UsageError: a blank query, more than :data:`MAX_SEARCH_TERMS` terms or
                :data:`MAX_QUERY_CHARS` characters, a ``limit`` outside 1..100, a bad budget.
        """
        budget_bytes = self._budget(budget)
        terms = search_terms(query)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_HITS:
            raise UsageError(f"limit must be an integer from 1 to {MAX_HITS}")
        if isinstance(lines_per_hit, bool) or not isinstance(lines_per_hit, int):
            raise UsageError("lines_per_hit must be a positive integer")
        if lines_per_hit < 1:
            raise UsageError("lines_per_hit must be a positive integer")
        hits = self._store.search(" ".join(terms), limit=limit)
        pattern = "|".join(re.escape(term) for term in terms)
        regex = compile_pattern(pattern, True)
        shown: list[SearchMatch] = []
        blocks: list[str] = []
        first: Ref | None = None  # the first hit that read back verified
        left_out = 0
        cut = 0
        used = utf8_len(search_head(terms, MAX_HITS))
        for index, hit in enumerate(hits):
            read = self._store.read(hit.ref)  # whole and verified, like every read
            data, found = read.data, read.record
            if read.outcome in (ReadOutcome.MISSING, ReadOutcome.UNAUTHORIZED):
                # Not this scope's (or collected since the index answered): a store that
                # answered it is wrong, and counting it would tell of another's artifact.
                continue
            if read.outcome is not ReadOutcome.RESOLVED or data is None or found is None:
                left_out += 1
                continue
            if looks_binary(data, found.media_type):
                left_out += 1
                continue
            visible = _masked(read)  # what a search shows goes to a model, as any read
            data = visible.data or b""
            first = first or hit.ref
            with CPU_BOUND:  # a scan of the whole body: see cargohold._cpu
                lines = MatchingLines(data, pattern, regex, True)
                excerpts: list[str] = []
                numbers: list[int] = []
                while len(numbers) < lines_per_hit:
                    line = lines.next()
                    if line is None:
                        break
                    numbers.append(line[0])
                    excerpts.extend(entries(regex, data, *line, 1))
                matched = len(numbers) + lines.count_rest()
            match = SearchMatch(
                hit.ref,
                hit.score,
                found.size,
                found.media_type,
                found.tool,
                tuple(numbers),
                matched,
                visible is not read,
            )
            block = hit_block(len(shown) + 1, match, excerpts)
            if used + utf8_len(block) > budget_bytes:
                # Whole hits only; a first hit over the budget is shown by its head line alone.
                head = block.split("\n", 1)[0] + "\n"
                if shown or used + utf8_len(head) > budget_bytes:
                    cut = len(hits) - index
                    break
                block = head
                match = dataclasses.replace(match, lines=())
            shown.append(match)
            blocks.append(block)
            used += utf8_len(block)
        return self._searched(terms, budget_bytes, shown, blocks, first, left_out, cut)

    def _searched(
        self,
        terms: tuple[str, ...],
        budget: int,
        shown: list[SearchMatch],
        blocks: list[str],
        first: Ref | None,
        left_out: int,
        cut: int,
    ) -> SearchResult:
        """The search's one decision: its answer, its segment and its event."""
        answer: str | None = None
        while shown:  # the closing notes must fit too: drop whole hits from the end
            tail = search_notes(left_out, cut, budget)
            answer = search_head(terms, len(shown)) + "".join(blocks).rstrip("\n") + tail
            if utf8_len(answer) <= budget:
                break
            answer = None
            head = blocks[0].split("\n", 1)[0] + "\n"
            if len(shown) == 1 and blocks[0] != head:  # the first hit by its head line alone
                blocks[0], shown[0] = head, dataclasses.replace(shown[0], lines=())
                continue
            shown.pop()
            blocks.pop()
            cut += 1
        segment: str | None = None
        ref: Ref | None = None
        if shown and answer is not None:
            outcome, reason, ref = RehydrateOutcome.RESOLVED, Reason.VERIFIED, shown[0].ref
            noun = "hit" if len(shown) == 1 else "hits"
            span = f"search {len(shown)} {noun}"
            segment = render_segment(ref, span, answer, budget, key=self._store.marker_key())
        elif cut and first is not None:  # not even the first hit's head line fits
            outcome, reason, ref = RehydrateOutcome.OVER_BUDGET, Reason.BUDGET_EXCEEDED, first
            answer = None
        else:
            # No hit names no reference: the reason stays no_match when even this is over.
            answer = no_hits(terms, left_out, cut, budget)
            reason = Reason.NO_MATCH
            outcome = RehydrateOutcome.OVER_BUDGET if answer is None else RehydrateOutcome.RESOLVED
        size = 0 if answer is None else utf8_len(answer)
        context = utf8_len(segment) if segment is not None else size
        event = record(
            self._reporter,
            Operation.REHYDRATE,
            outcome,
            ContentKind.RECOVERED_CONTEXT,
            reason,
            observed_bytes=size,
            limit_bytes=budget,
            ref=None if ref is None else str(ref),
            tool=SEARCH_TOOL,
            context_bytes=context,
            estimated_tokens=estimate_tokens(size),
        )
        return SearchResult(
            outcome,
            reason,
            terms,
            tuple(shown),
            segment,
            answer,
            budget,
            event,
            left_out=left_out,
            not_shown=cut,
        )

    # -- passing references to tools -----------------------------------------------------

    def resolve_arguments(self, arguments: Any, *, budget: int | None = None) -> Any:
        """A copy of a tool's arguments with each reference replaced by its verified bytes.

        Only values that are exactly a canonical reference are replaced (text for UTF-8 bodies,
        ``bytes`` otherwise), for the one tool about to be called; nothing enters the
        conversation. Each replacement is a rehydrate decision with its event.

        Args:
            arguments: JSON-like data (dicts, lists, strings...).
            budget: The most bytes one reference may bring in; the store's artifact limit when
                omitted.

        Raises:
            ReadError: a reference that did not resolve (its ``outcome`` says why).
        """
        limit = self._store.store.limits.max_artifact_bytes if budget is None else budget
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UsageError("budget must be a positive integer")
        return self._resolve(arguments, limit)

    def _resolve(self, value: Any, limit: int) -> Any:
        if isinstance(value, str):
            if not is_ref(value):
                return value
            ref = Ref.parse(value)
            result = self._store.read(ref, max_bytes=limit)
            if result.outcome is not ReadOutcome.RESOLVED or result.data is None:
                self._decide(ref, result.outcome, limit)
                raise ReadError(
                    f"an argument reference was {result.outcome.value}",
                    outcome=result.outcome.value,
                )
            record(
                self._reporter,
                Operation.REHYDRATE,
                RehydrateOutcome.RESOLVED,
                ContentKind.RECOVERED_CONTEXT,
                Reason.VERIFIED,
                observed_bytes=len(result.data),
                limit_bytes=limit,
                ref=str(ref),
            )
            try:
                return result.data.decode("utf-8")
            except UnicodeDecodeError:
                return result.data
        if isinstance(value, Mapping):
            return {key: self._resolve(item, limit) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self._resolve(item, limit) for item in value]
        return value

    def _budget(self, budget: int | None) -> int:
        return self._default_budget if budget is None else _check_budget(budget)


def _last_lines(data: bytes, count: int, budget: int) -> tuple[int, int] | None:
    """The last lines of ``data`` that fit ``budget`` bytes, ``(start_line, end_line)``; ``None``
    when there are none or its last line alone is over the budget."""
    total = len(data)
    if count == 0:
        return None
    begin = max(0, total - budget)
    if begin > 0 and data[begin - 1] != 0x0A:  # inside a line: the next one starts the range
        newline = data.find(b"\n", begin)
        if newline < 0 or newline + 1 >= total:
            return None
        begin = newline + 1
    return data.count(b"\n", 0, begin) + 1, count


def _masked(result: ReadResult) -> ReadResult:
    """``result`` with every credential in its bytes masked (same length and line breaks, so
    spans and line numbers hold): what a read answers goes to a model. The exact bytes stay in
    the store, for :meth:`Rehydrator.resolve_arguments` and ``cargohold cat``."""
    if result.data is None:
        return result
    findings = find_secrets(result.data)
    if not findings:
        return result
    return dataclasses.replace(result, data=mask_secrets(result.data, findings))


class _NotJSONConstantError(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity`` in a body: Python's JSON reads them, JSON has none."""


def _refuse_constant(name: str) -> object:
    raise _NotJSONConstantError(name)


def _too_deep() -> UsageError:
    return UsageError(
        f"the JSON nests deeper than {_json_depth_limit():,} levels; use grep or a line read"
    )


def _json_depth_limit() -> int:
    """How many levels of nesting the JSON parser takes here, measured.

    The bound is the interpreter's recursion limit less the stack already in use (and, on newer
    Pythons, the C stack itself), so a fixed figure would be wrong somewhere. A few parses of
    small documents, on the error path only.
    """
    low, high = 1, 1 << 20
    while low < high:
        middle = (low + high + 1) // 2
        try:
            json.loads("[" * middle + "]" * middle)
        except RecursionError:
            high = middle - 1
        else:
            low = middle
    return low


def _check_budget(budget: int) -> int:
    if isinstance(budget, bool) or not isinstance(budget, int) or not 0 < budget <= MAX_READ_BYTES:
        raise UsageError(f"a read budget is a byte count from 1 to {MAX_READ_BYTES}")
    return budget
