"""The read tools as data: what a stub advertises, ready for any model API or MCP.

Seven tools, framework-neutral, specified in :mod:`cargohold._toolspecs` (a name, a description
written for a model and the JSON Schema of the arguments of each, exportable as an OpenAI function
tool, an Anthropic tool and an MCP tool). :meth:`ReadToolset.call` runs one and always returns
a :class:`ToolAnswer`: ``.text`` for the model, and a structured part (outcome, exact byte span,
total size, SHA-256 of the returned bytes) with which a client can page through a body and
reassemble it exactly.

Six read (``artifact_search`` finds artifacts by the words they hold, the other five read one
reference); ``artifact_patch`` derives: it applies a JSON Patch or line and byte edits to an
artifact the model never saw (see :mod:`cargohold._patch`), stores the result with the old
reference as its parent, and answers with the new reference and a summary of the change, never
the body. The model then passes the new reference on (to a proxied tool that takes references,
say), so a 300 KB document is changed and written back without its bytes entering the context.

A mistake the model made (a malformed reference, a bad regular expression or JMESPath expression,
an answer over its budget, a reference that is missing or expired) is an answer whose text says
what was wrong and how to fix the call; it is never an exception.

Ranges, one convention everywhere (API, tools, CLI): bytes are ``offset`` + ``length`` (the
half-open span ``[offset, offset + length)``, 0-based); lines are 1-based and inclusive, as
editors show them (``start_line=10, end_line=20`` is eleven lines).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final

import jmespath
import jmespath.exceptions
import re2

from cargohold import _patch
from cargohold._cpu import CPU_BOUND
from cargohold._errors import CargoholdError, RejectedError, UsageError
from cargohold._events import (
    LIMIT_REASONS,
    READ_REASONS,
    ContentKind,
    DecisionEvent,
    OffloadOutcome,
    Operation,
    Reason,
    RehydrateOutcome,
    Reporter,
    record,
)
from cargohold._facade import ScopedStore
from cargohold._query import MAX_DEPTH, QueryFailedError, QueryLimit, compile_expression
from cargohold._records import MAX_READ_BYTES, ArtifactRecord, ReadOutcome, Sensitivity
from cargohold._ref import Ref
from cargohold._rehydrate import RehydrateResult, Rehydrator
from cargohold._searchanswer import SearchResult
from cargohold._secrets import describe_findings, find_secrets, policy_for, redact_secrets
from cargohold._text import looks_textual, utf8_len
from cargohold._tokens import estimate_tokens
from cargohold._toolspecs import MAX_HITS, PATCH_TOOL, SEARCH_TOOL, SPECS, TOOL_NAMES, ToolSpec

INVALID_ARGUMENTS: Final = "invalid_arguments"
"""The outcome of a call the model got wrong before anything was read."""
CONFLICT: Final = _patch.CONFLICT
"""``artifact_patch``: the patch does not apply to the artifact's exact bytes (a ``test`` that
fails, a path or range that is not there, a JSON Patch on a body that is not JSON)."""
REJECTED: Final = _patch.REJECTED
"""``artifact_patch``: the result would be over a store limit (its size, a quota)."""


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """The answer to one read-tool call.

    Attributes:
        tool: The tool called.
        outcome: ``resolved``, ``missing``, ``unauthorized``, ``stale``, ``expired``,
            ``over_budget``, ``unsupported`` (lines, a grep or a query asked of a binary
            artifact: the text says which ``artifact_read`` returns its bytes),
            ``out_of_range`` (a byte or line range that starts past the end: the text gives the
            size and the last range that reads), or ``invalid_arguments`` (the call itself was
            wrong).
        text: What the model sees: a recovered segment when resolved, else what went wrong and
            how to fix the call.
        ref: The reference read, when the call named a valid one.
        start: The answer covers body bytes ``[start, end)`` (byte and line reads).
        end: See ``start``.
        next_offset: Where the next page starts, or ``None`` at the end of the body.
        size: The body's total size in bytes, when known.
        sha256: SHA-256 of the returned bytes (the text's UTF-8, or the decoded base64).
        encoding: ``utf-8`` or ``base64``: how the returned bytes are carried in ``content``.
        content: The returned content without the segment's marker lines (resolved only).
        event: The decision's event, when a read was decided (for ``artifact_patch``, the
            storing of the new artifact, or the read of the old one when that did not resolve).
        parent: ``artifact_patch``: the reference the new artifact (``ref``) was derived from.
        change: ``artifact_patch``: what changed, as counts and line numbers (never content):
            ``method``, ``operations``, ``bytes_before``/``bytes_after``,
            ``lines_before``/``lines_after``, ``lines_removed``/``lines_added`` (and whether
            those are ``exact``), the changed lines ``first_line``..``last_line`` of the new
            artifact, ``formatting`` and ``style`` (JSON Patch), ``media_type``, ``unchanged``
            and ``existing`` (the same bytes were already stored).
        masked: The answer was made from a copy with the body's credentials masked (so it is
            not the exact bytes; ``sha256`` is of what was returned).
        hits: ``artifact_search``: each hit shown, best first, as facts (``ref``, ``score``,
            ``size``, ``media_type``, ``tool``, the ``lines`` shown, ``matched_lines``,
            ``masked``), never content; ``()`` when nothing matched. ``None`` for the other
            tools.
        left_out: ``artifact_search``: hits whose verified read did not resolve, or binary.
        exact_bytes: ``artifact_read_lines`` of lines that are not all UTF-8: each bad byte
            came back as U+FFFD, so ``content`` is not the bytes ``[start, end)`` (``sha256``
            is of what was returned); this is the ``(offset, length)`` of the
            ``artifact_read`` that returns them exactly. ``None`` when the answer is exact.
    """

    tool: str
    outcome: str
    text: str = field(repr=False)
    ref: Ref | None = None
    start: int | None = None
    end: int | None = None
    next_offset: int | None = None
    size: int | None = None
    sha256: str | None = None
    encoding: str = "utf-8"
    content: str | None = field(default=None, repr=False)
    event: DecisionEvent | None = field(default=None, repr=False)
    parent: Ref | None = None
    change: Mapping[str, Any] | None = field(default=None, hash=False)
    masked: bool = False
    hits: tuple[Mapping[str, Any], ...] | None = field(default=None, hash=False)
    left_out: int = 0
    exact_bytes: tuple[int, int] | None = None

    @property
    def ok(self) -> bool:
        """Whether the call was answered with content (or facts, for ``artifact_info``; or a
        new reference, for ``artifact_patch``)."""
        return self.outcome == ReadOutcome.RESOLVED.value

    @property
    def is_error(self) -> bool:
        """Whether the model should treat the answer as a failed call."""
        return not self.ok

    def data(self) -> bytes | None:
        """The returned bytes themselves (decoded from base64 when binary), or ``None``."""
        if self.content is None:
            return None
        if self.encoding == "base64":
            return base64.b64decode(self.content)
        return self.content.encode("utf-8", "surrogatepass")

    def structured(self) -> dict[str, Any]:
        """The structured part: JSON-ready, never the content itself.

        ``change`` appears in an ``artifact_patch`` answer that resolved, and ``parent`` when
        that answer names a new artifact; the other tools' answers have neither. ``masked``
        appears (``true``) when a read answered from a masked copy; ``exact`` (``false``) and
        ``exact_bytes`` (``{"offset", "length"}`` of the ``artifact_read`` that returns them)
        when a line read replaced bytes that are not UTF-8.
        """
        facts: dict[str, Any] = {
            "tool": self.tool,
            "outcome": self.outcome,
            "ref": None if self.ref is None else str(self.ref),
            "start": self.start,
            "end": self.end,
            "next_offset": self.next_offset,
            "size": self.size,
            "sha256": self.sha256,
            "encoding": self.encoding,
        }
        if self.parent is not None:
            facts["parent"] = str(self.parent)
        if self.change is not None:
            facts["change"] = dict(self.change)
        if self.masked:
            facts["masked"] = True
        if self.exact_bytes is not None:
            facts["exact"] = False
            offset, length = self.exact_bytes
            facts["exact_bytes"] = {"offset": offset, "length": length}
        if self.hits is not None:
            facts["hits"] = [dict(hit) for hit in self.hits]
            facts["left_out"] = self.left_out
        return facts


class ToolMistake(Exception):
    """A call the model got wrong: the message is the fix, written for the model.

    Internal to the read tools and the command line: :meth:`ReadToolset.call` turns one into an
    answer, the CLI into a ``UsageError`` with the same message. Never raised to a caller.
    """


_OUTCOME_TEXT = {
    ReadOutcome.MISSING: (
        "no artifact with this reference is visible to this session. Check the reference "
        "against the stub (copy it whole); an artifact stored by another session or tenant "
        "cannot be read here."
    ),
    ReadOutcome.UNAUTHORIZED: (
        "this artifact belongs to another session; it cannot be read from this one."
    ),
    ReadOutcome.STALE: (
        "the stored bytes no longer match their SHA-256, so nothing is returned. Do not retry; "
        "re-run the tool that produced the artifact."
    ),
    ReadOutcome.EXPIRED: (
        "the artifact expired and its bytes are no longer kept. Re-run the tool that produced "
        "it to get a fresh reference."
    ),
}


class ReadToolset:
    """The read tools bound to one scope's reads.

    Args:
        rehydrator: The verified, budgeted reads of one scope.
        store: The same scope's store (for ``artifact_info``, and where ``artifact_patch``
            stores what it derives).
        default_budget: Budget of a call that names none.
        reporter: Where ``artifact_patch`` reports its decisions (the reads report through
            ``rehydrator``); ``None`` reports nothing.
        ttl: The TTL of artifacts ``artifact_patch`` stores; the store's default when ``None``.
        secrets_policy: The per-tool secrets policies (``redact``, ``reject``, ``mask``; a
            ``"*"`` entry for every other tool): what ``artifact_patch`` stores of a result that
            holds a credential, under the policy of the parent's tool, as an offload would.
    """

    __slots__ = (
        "_default_budget",
        "_handlers",
        "_reader",
        "_reporter",
        "_secrets_policy",
        "_store",
        "_ttl",
    )

    def __init__(
        self,
        rehydrator: Rehydrator,
        store: ScopedStore,
        *,
        default_budget: int,
        reporter: Reporter | None = None,
        ttl: float | None = None,
        secrets_policy: Mapping[str, str] | None = None,
    ) -> None:
        self._reader = rehydrator
        self._secrets_policy = dict(secrets_policy or {})
        self._store = store
        self._default_budget = default_budget
        self._reporter = reporter
        self._ttl = ttl
        self._handlers: dict[str, Callable[[Mapping[str, Any]], ToolAnswer]] = {
            "artifact_info": self._info,
            "artifact_read": self._read,
            "artifact_read_lines": self._read_lines,
            "artifact_grep": self._grep,
            "artifact_query": self._query,
            SEARCH_TOOL: self._search,
            PATCH_TOOL: self._patch,
        }

    def __repr__(self) -> str:
        return f"ReadToolset({', '.join(TOOL_NAMES)})"

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        """Every read tool's spec."""
        return SPECS

    def spec(self, name: str) -> ToolSpec:
        """The spec of the tool ``name``.

        Raises:
            UsageError: no read tool has that name.
        """
        for spec in SPECS:
            if spec.name == name:
                return spec
        raise UsageError(f"no read tool is named {name!r}; they are {', '.join(TOOL_NAMES)}")

    def openai(self) -> list[dict[str, Any]]:
        """All read tools as OpenAI Chat Completions function tools."""
        return [spec.openai() for spec in SPECS]

    def openai_responses(self) -> list[dict[str, Any]]:
        """All read tools as OpenAI Responses API function tools."""
        return [spec.openai_responses() for spec in SPECS]

    def anthropic(self) -> list[dict[str, Any]]:
        """All read tools as Anthropic tools."""
        return [spec.anthropic() for spec in SPECS]

    def mcp(self) -> list[dict[str, Any]]:
        """All read tools as MCP tools."""
        return [spec.mcp() for spec in SPECS]

    def call(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> ToolAnswer:
        """Run the read tool ``name`` with the model's ``arguments`` (a mapping or JSON text).

        Never raises for anything the model controls: every mistake is an answer whose
        ``outcome`` is ``invalid_arguments`` (or the read's own outcome) and whose text says how
        to fix the call. Store failures (the store is down) still raise: they are not the
        model's to fix.
        """
        handler = self._handlers.get(name) if isinstance(name, str) else None
        if handler is None:
            shown = _shown(name)
            return _mistake(shown, f"there is no tool {shown}; use one of {', '.join(TOOL_NAMES)}.")
        try:
            args = _arguments(name, arguments)
            return handler(args)
        except ToolMistake as exc:
            return _mistake(name, str(exc))

    # -- the tools ------------------------------------------------------------------------

    def _info(self, args: Mapping[str, Any]) -> ToolAnswer:
        ref = _ref(args)
        result = self._store.stat(ref)
        record = result.record
        if result.outcome is not ReadOutcome.RESOLVED or record is None:
            return _refused("artifact_info", ref, result.outcome, record.size if record else None)
        facts = {
            "ref": str(ref),
            "size": record.size,
            "media_type": record.media_type,
            "kind": record.kind,
            "tool": record.tool,
            "complete": record.complete,
            "expires_at": datetime.fromtimestamp(record.expires, UTC).isoformat(timespec="seconds"),
            "parent": None if record.parent is None else str(record.parent),
        }
        text = json.dumps(facts, separators=(",", ":"))
        return ToolAnswer(
            "artifact_info",
            ReadOutcome.RESOLVED.value,
            text,
            ref,
            size=record.size,
            sha256=ref.digest,
        )

    def _read(self, args: Mapping[str, Any]) -> ToolAnswer:
        ref = _ref(args)
        offset = _int(args, "offset", 0, minimum=0)
        length = _optional_int(args, "length", minimum=0)
        budget = self._budget(args)
        result = self._reader.read(ref, offset=offset, length=length, budget=budget)
        if result.outcome is RehydrateOutcome.OUT_OF_RANGE:
            return _with_event(_past_end("artifact_read", result, offset), result.event)
        return self._answer("artifact_read", result)

    def _read_lines(self, args: Mapping[str, Any]) -> ToolAnswer:
        ref = _ref(args)
        start = _int(args, "start_line", None, minimum=1)
        end = _optional_int(args, "end_line", minimum=1)
        if end is not None and end < start:
            raise ToolMistake(
                f"end_line ({end}) is before start_line ({start}); lines are 1-based and "
                f"inclusive, so start_line={start} end_line={start} reads one line."
            )
        result = self._reader.read_lines(ref, start, end, budget=self._budget(args))
        if result.outcome is RehydrateOutcome.OUT_OF_RANGE:
            return _with_event(_past_end("artifact_read_lines", result, start), result.event)
        return self._answer("artifact_read_lines", result)

    def _grep(self, args: Mapping[str, Any]) -> ToolAnswer:
        ref = _ref(args)
        pattern = _text(args, "pattern", 1000)
        ignore_case = args.get("ignore_case", False)
        if not isinstance(ignore_case, bool):
            raise ToolMistake("ignore_case must be true or false.")
        max_matches = _int(args, "max_matches", 100, minimum=1)
        _check_text(pattern, "pattern")
        check_pattern(pattern)
        result = self._reader.grep(
            ref,
            pattern,
            ignore_case=ignore_case,
            max_matches=max_matches,
            budget=self._budget(args),
        )
        return self._answer("artifact_grep", result)

    def _query(self, args: Mapping[str, Any]) -> ToolAnswer:
        ref = _ref(args)
        expression = _text(args, "expression", 2000)
        check_expression(expression)
        try:
            result = self._reader.query(ref, expression, budget=self._budget(args))
        except QueryFailedError as exc:  # the document is JSON: the expression is what to fix
            raise ToolMistake(
                f"{exc}. Fix the expression: type(x) names a value's type, keys(@) an object's "
                "keys, to_string(x) and to_number(x) convert."
            ) from None
        except UsageError as exc:  # not JSON, or nested too deep
            raise ToolMistake(
                f"{exc}. artifact_grep and artifact_read_lines read any body, JSON or not."
            ) from None
        return self._answer("artifact_query", result)

    def _search(self, args: Mapping[str, Any]) -> ToolAnswer:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolMistake('query must be the words to find, e.g. "TimeoutError payments".')
        _check_text(query, "query")
        limit = _int(args, "limit", 10, minimum=1)
        if limit > MAX_HITS:
            raise ToolMistake(f"limit is at most {MAX_HITS}; ask for fewer hits.")
        budget = self._budget(args)
        try:
            result = self._reader.search(query, limit=limit, budget=budget)
        except UsageError as exc:  # the query's own bounds (its length, its word count)
            raise ToolMistake(f"{exc}.") from None
        return _search_answer(result)

    def _patch(self, args: Mapping[str, Any]) -> ToolAnswer:
        ref = _ref(args)
        json_patch, edits = args.get("json_patch"), args.get("edits")
        if (json_patch is None) == (edits is None):
            raise ToolMistake(
                "give exactly one of json_patch (RFC 6902 operations, for a JSON artifact) or "
                "edits (line or byte ranges, for any artifact)."
            )
        try:  # the call's shape is checked before a byte is read
            operations = _patch.check_json_patch(json_patch) if json_patch is not None else []
            edit_list = _patch.check_edits(edits) if edits is not None else []
        except _patch.PatchError as exc:
            raise ToolMistake(str(exc)) from None
        limit = self._store.store.limits.max_artifact_bytes
        old = self._store.read(ref)  # whole and verified: the patch applies to exactly these
        read_event = record(
            self._reporter,
            Operation.REHYDRATE,
            RehydrateOutcome(old.outcome.value),
            ContentKind.TOOL_ARGUMENTS,
            READ_REASONS[old.outcome],
            observed_bytes=0
            if old.record is None or old.outcome is ReadOutcome.UNAUTHORIZED
            else old.record.size,
            limit_bytes=limit,
            ref=str(ref),
            tool=PATCH_TOOL,
        )
        if not old.ok or old.data is None or old.record is None:
            answer = _refused(
                PATCH_TOOL, ref, old.outcome, None if old.record is None else old.record.size
            )
            return _with_event(answer, read_event)
        parent = old.record
        try:
            with CPU_BOUND:  # parsing and writing a whole body: see cargohold._cpu
                if operations:
                    derived = _patch.apply_json_patch(old.data, operations, max_bytes=limit)
                else:
                    derived = _patch.apply_edits(old.data, edit_list, max_bytes=limit)
                # A patch can write a credential in: the derived bytes pass the secrets policy
                # of the tool that produced the parent, as that tool's offload did.
                policy = policy_for(self._secrets_policy, parent.tool)
                findings = () if derived.data == old.data else tuple(find_secrets(derived.data))
                if findings and policy == "redact":
                    textual = looks_textual(derived.data)
                    redacted = redact_secrets(derived.data, findings, keep_length=not textual)
                    derived = replace(derived, data=redacted)
                change = _patch.line_change(old.data, derived.data)
        except _patch.PatchError as exc:
            if exc.outcome == INVALID_ARGUMENTS:
                raise ToolMistake(str(exc)) from None
            answer = ToolAnswer(
                PATCH_TOOL, exc.outcome, f"{PATCH_TOOL}: {exc.outcome}: {exc}", ref, size=None
            )
            if exc.outcome == REJECTED:
                reason = LIMIT_REASONS.get(exc.reason or "", Reason.ARTIFACT_TOO_LARGE)
                return _with_event(answer, self._stored(OffloadOutcome.REJECTED, reason, 0, None))
            return _with_event(answer, read_event)
        if derived.data == old.data:
            facts = _change_facts(derived, change, parent, unchanged=True, existing=True)
            text = _patch_text(ref, ref, facts)
            return ToolAnswer(
                PATCH_TOOL,
                ReadOutcome.RESOLVED.value,
                text,
                ref,
                size=parent.size,
                sha256=ref.digest,
                event=read_event,
                change=facts,
            )
        if findings and policy == "reject":
            whose = f"tool {parent.tool}" if parent.tool else "every tool"
            text = (
                f"{PATCH_TOOL}: rejected: the result would hold credentials: "
                f"{describe_findings(findings)}; nothing was stored (the secrets_policy of "
                f"{whose} is reject)."
            )
            answer = ToolAnswer(PATCH_TOOL, REJECTED, text, ref)
            refused = self._stored(
                OffloadOutcome.REJECTED, Reason.CREDENTIAL_DETECTED, len(derived.data), None
            )
            return _with_event(answer, refused)
        sensitivity = parent.sensitivity
        if findings and policy == "mask":  # the exact bytes, stored as restricted
            sensitivity = Sensitivity.RESTRICTED
        kind, classification = _derived_kind(derived.data, parent)
        try:
            put = self._store.put(
                derived.data,
                media_type=parent.media_type,
                kind=kind,
                tool=PATCH_TOOL,
                ttl=self._ttl,
                sensitivity=sensitivity,
                complete=parent.complete,
                classification=classification,
                parent=ref,
            )
        except RejectedError as exc:
            reason = LIMIT_REASONS.get(exc.reason, Reason.STORE_ERROR)
            text = (
                f"{PATCH_TOOL}: rejected: the store refused the result ({exc.reason}: "
                f"{len(derived.data):,} bytes); nothing was stored."
            )
            answer = ToolAnswer(PATCH_TOOL, REJECTED, text, ref)
            refused = self._stored(OffloadOutcome.REJECTED, reason, len(derived.data), None)
            return _with_event(answer, refused)
        facts = _change_facts(derived, change, parent, unchanged=False, existing=put.existing)
        if findings:  # kinds and lines only, never a value
            facts["credentials"] = "redacted" if policy == "redact" else "masked"
        text = _patch_text(put.ref, ref, facts)
        if findings:
            text += (
                f"\ncredentials {facts['credentials']} in the stored result: "
                f"{describe_findings(findings)}"
                + (" (stored restricted: masked on every read)" if policy == "mask" else "")
            )
        outcome, reason = (
            (OffloadOutcome.EXISTING_REFERENCE, Reason.IDENTICAL_CONTENT)
            if put.existing
            else (OffloadOutcome.OFFLOADED, Reason.DERIVED)
        )
        if findings:
            reason = Reason.CREDENTIAL_REDACTED if policy == "redact" else Reason.CREDENTIAL_MASKED
        event = self._stored(outcome, reason, len(derived.data), put.ref, context=utf8_len(text))
        return ToolAnswer(
            PATCH_TOOL,
            ReadOutcome.RESOLVED.value,
            text,
            put.ref,
            size=put.record.size,
            sha256=put.ref.digest,
            event=event,
            parent=ref,
            change=facts,
        )

    def _stored(
        self,
        outcome: OffloadOutcome,
        reason: Reason,
        size: int,
        ref: Ref | None,
        *,
        context: int = 0,
    ) -> DecisionEvent:
        """The decision to store (or not) a derived artifact: one ``offload`` event."""
        return record(
            self._reporter,
            Operation.OFFLOAD,
            outcome,
            ContentKind.TOOL_RESULT,
            reason,
            observed_bytes=size,
            limit_bytes=self._store.store.limits.max_artifact_bytes,
            ref=None if ref is None else str(ref),
            tool=PATCH_TOOL,
            context_bytes=context,
            estimated_tokens=estimate_tokens(size),
        )

    # -- answers --------------------------------------------------------------------------

    def _budget(self, args: Mapping[str, Any]) -> int:
        budget = _int(args, "budget", self._default_budget, minimum=1)
        if budget > MAX_READ_BYTES:
            raise ToolMistake(f"budget is at most {MAX_READ_BYTES} bytes (1 MiB); ask for less.")
        return budget

    def _answer(self, tool: str, result: RehydrateResult) -> ToolAnswer:
        if result.outcome is RehydrateOutcome.UNSUPPORTED:
            return _with_event(_binary(tool, result), result.event)
        if not result.ok or result.segment is None:
            answer = _refused(tool, result.ref, ReadOutcome(result.outcome.value), result.size)
            if result.outcome.value == ReadOutcome.OVER_BUDGET.value:
                answer = _over_budget(tool, result)
            return _with_event(answer, result.event)
        content = result.content or ""
        returned = (
            base64.b64decode(content)
            if result.encoding == "base64"
            else content.encode("utf-8", "surrogatepass")
        )
        next_offset = None
        if result.end is not None and result.size is not None and result.end < result.size:
            next_offset = result.end
        return ToolAnswer(
            tool,
            result.outcome.value,
            result.segment,
            result.ref,
            start=result.start,
            end=result.end,
            next_offset=next_offset,
            size=result.size,
            sha256=hashlib.sha256(returned).hexdigest(),
            encoding=result.encoding,
            content=content,
            event=result.event,
            masked=result.masked,
            exact_bytes=result.fit if result.lossy else None,
        )


def _derived_kind(data: bytes, parent: ArtifactRecord) -> tuple[str, str]:
    """The kind and class a derived artifact's record carries: its parent's (a patch keeps
    what the thing is, and a declared ``exact_required`` stays declared), else, for a parent
    stored with none (a plain put), what the derived bytes are, as an offload records them."""
    if parent.kind is not None and parent.classification is not None:
        return parent.kind, parent.classification
    from cargohold.projection import detect  # the projectors only when there is no record

    with CPU_BOUND:  # a parse of the whole body at most, as an offload's
        found = detect(data, media_type=parent.media_type)
    label = f"{found.kind} ({found.detail})" if found.detail else found.kind  # as a stub says
    return parent.kind or label, parent.classification or found.classification.value


def _change_facts(
    derived: _patch.Derived,
    change: _patch.LineChange,
    parent: ArtifactRecord,
    *,
    unchanged: bool,
    existing: bool,
) -> dict[str, Any]:
    """What an ``artifact_patch`` did, as counts and line numbers: never content."""
    return {
        "method": derived.method,
        "operations": dict(derived.operations),
        "bytes_before": parent.size,
        "bytes_after": len(derived.data),
        "lines_before": change.lines_before,
        "lines_after": change.lines_after,
        "lines_removed": 0 if unchanged else change.removed,
        "lines_added": 0 if unchanged else change.added,
        "exact": change.exact,
        "first_line": None if unchanged else change.first_line,
        "last_line": None if unchanged else change.last_line,
        "formatting": derived.formatting,
        "style": derived.style,
        "media_type": parent.media_type,
        "unchanged": unchanged,
        "existing": existing,
    }


def _patch_text(new: Ref, old: Ref, facts: Mapping[str, Any]) -> str:
    """The model's view of an ``artifact_patch`` answer: a few bounded lines, no content."""
    total = sum(facts["operations"].values())
    if facts["method"] == "json_patch":
        kinds = ", ".join(f"{name} {count}" for name, count in facts["operations"].items())
        applied = f"{total} JSON Patch operation{'s' if total != 1 else ''} applied ({kinds})"
    else:
        kinds = ", ".join(
            f"{count} {'line' if kind == 'lines' else 'byte'} edit{'s' if count != 1 else ''}"
            for kind, count in facts["operations"].items()
        )
        applied = f"{kinds} applied"
    if facts["unchanged"]:
        return (
            f"{PATCH_TOOL}: resolved: {applied}, and the result is the very same bytes: "
            f"{old} is unchanged and nothing new was stored."
        )
    before, after = facts["bytes_before"], facts["bytes_after"]
    first, last = facts["first_line"], facts["last_line"]
    counts = f"{facts['lines_removed']:,} removed, {facts['lines_added']:,} added"
    if not facts["exact"]:
        counts = f"at most {counts}"
    if last > first:
        where = f"lines {first:,} to {last:,}"
    else:
        where = f"line {first:,}" if last == first else f"before line {first:,} (lines removed)"
    lines = [
        f"{PATCH_TOOL}: resolved: {new}",
        f"derived from {old} ({facts['media_type']}); {applied}"
        + ("; the same bytes were already stored" if facts["existing"] else ""),
        f"bytes {before:,} -> {after:,} ({after - before:+,}); lines {facts['lines_before']:,}"
        f" -> {facts['lines_after']:,}: {counts}; the changes lie in {where} of the new artifact",
    ]
    if facts["formatting"] == "preserved":
        lines.append(f"formatting preserved ({facts['style']}): only the patched values changed")
    elif facts["formatting"] == "reformatted":
        lines.append(
            "formatting: the original's could not be reproduced exactly (numbers or spacing "
            f"written in another way), so the whole document was re-serialized "
            f"({facts['style']}); the data is the same but for the patch"
        )
    check = (
        f"check it: artifact_read_lines on the new reference, start_line={first} "
        f"end_line={min(last, first + 20)}; "
        if last >= first
        else ""
    )
    lines.append(
        f"{check}pass the new reference to a tool that takes artifact:// arguments. The old "
        "reference still names the old bytes."
    )
    return "\n".join(lines)


def _search_answer(result: SearchResult) -> ToolAnswer:
    """An ``artifact_search`` answer: the hits' segment, the plain no-hits text, or over
    budget with the fix."""
    hits = tuple(hit.as_dict() for hit in result.hits)
    if result.content is None:
        what = "the first hit's heading" if result.hits or result.not_shown else "a no-hits answer"
        text = (
            f"{SEARCH_TOOL}: over_budget: not even {what} fits this call's "
            f"budget of {result.budget:,} bytes; nothing was returned. Pass a larger budget "
            f"(up to {MAX_READ_BYTES}, 1 MiB)."
        )
        return ToolAnswer(
            SEARCH_TOOL,
            result.outcome.value,
            text,
            event=result.event,
            hits=hits,
            left_out=result.left_out,
        )
    return ToolAnswer(
        SEARCH_TOOL,
        result.outcome.value,
        result.text,
        sha256=hashlib.sha256(result.content.encode("utf-8")).hexdigest(),
        content=result.content,
        event=result.event,
        masked=any(hit.masked for hit in result.hits),
        hits=hits,
        left_out=result.left_out,
    )


def _with_event(answer: ToolAnswer, event: DecisionEvent) -> ToolAnswer:
    return ToolAnswer(
        answer.tool,
        answer.outcome,
        answer.text,
        answer.ref,
        size=answer.size,
        event=event,
    )


def _mistake(tool: str, message: str) -> ToolAnswer:
    return ToolAnswer(tool, INVALID_ARGUMENTS, f"{tool}: invalid arguments: {_encodable(message)}")


_MOST_SHOWN = 64
"""Characters of a name the model sent that an answer echoes."""
_MOST_MISTAKE = 2000
"""Characters of an invalid-arguments answer's explanation (what it echoes of the call is cut)."""


def _shown(value: object) -> str:
    """A name the model sent, as an answer may echo it: quoted, at most :data:`_MOST_SHOWN`
    characters, a character that is not one (a lone surrogate) escaped."""
    text = value if isinstance(value, str) else str(type(value).__name__)
    cut = text[:_MOST_SHOWN]
    return _encodable(repr(cut)) + ("..." if len(text) > _MOST_SHOWN else "")


def _encodable(text: str) -> str:
    """``text`` as valid UTF-8 text, at most :data:`_MOST_MISTAKE` characters: a lone surrogate
    (valid in JSON, ``"\\udcff"``, but no character) is written as its escape, so the answer
    can be sent over any transport."""
    text = text[:_MOST_MISTAKE] + ("..." if len(text) > _MOST_MISTAKE else "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _refused(tool: str, ref: Ref, outcome: ReadOutcome, size: int | None) -> ToolAnswer:
    text = f"{tool}: {outcome.value}: {_OUTCOME_TEXT.get(outcome, '')}".rstrip()
    if outcome is ReadOutcome.UNAUTHORIZED:  # another session's size would be an oracle
        size = None
    return ToolAnswer(tool, outcome.value, text, ref, size=size)


def _past_end(tool: str, result: RehydrateResult, asked: int) -> ToolAnswer:
    """A range that starts past the end: what the body holds, and the last range that reads."""
    size = result.size or 0
    if tool == "artifact_read_lines":
        lines = result.lines or 0
        noun = "line" if lines == 1 else "lines"
        head = f"start_line {asked:,} is past the end: the artifact has {lines:,} {noun}"
        if result.fit is None:
            fix = (
                f" ({size:,} bytes), and its last line alone is over this call's budget: read "
                "it in byte ranges with artifact_read."
            )
        else:
            first, last = result.fit
            fix = f". The last lines that fit: start_line={first} end_line={last}."
    else:
        head = f"offset {asked:,} is past the end: the artifact is {size:,} bytes"
        if result.fit is None:
            fix = ": it is empty, there is nothing to read."
        else:
            offset, length = result.fit
            fix = (
                f" (offsets 0 to {size - 1:,}). The last part that fits: offset={offset} "
                f"length={length}."
            )
    text = f"{tool}: out_of_range: {head}{fix}"
    return ToolAnswer(tool, RehydrateOutcome.OUT_OF_RANGE.value, text, result.ref, size=size)


def _binary(tool: str, result: RehydrateResult) -> ToolAnswer:
    """Lines, a grep or a query asked of a binary body: say so, and which read returns its
    bytes."""
    offset, length = result.fit or (0, max(1, result.budget // 4 * 3))
    what = {
        "artifact_read_lines": "so it has no lines to read",
        "artifact_query": "not JSON",
    }.get(tool, "so it has no lines to search")
    size = "" if result.size is None else f" ({result.size:,} bytes)"
    text = (
        f"{tool}: unsupported: this artifact is binary{size}, {what}. Read its "
        f"bytes with artifact_read, which returns them base64-encoded: offset={offset} "
        f"length={length}, then continue from the answer's next_offset."
    )
    return ToolAnswer(tool, RehydrateOutcome.UNSUPPORTED.value, text, result.ref, size=result.size)


def _over_budget(tool: str, result: RehydrateResult) -> ToolAnswer:
    if result.bound in ("steps", "depth", "time"):
        return ToolAnswer(tool, result.outcome.value, query_limit_text(tool, result), result.ref)
    would = "more than " if result.bound == "size" else ""
    head = (
        f"{tool}: over_budget: the answer would be {would}{result.answer_bytes:,} bytes, over "
        f"this call's budget of {result.budget:,} bytes; nothing was returned."
    )
    if tool == "artifact_read" and result.fit is not None:
        offset, length = result.fit
        fix = f"Read a range that fits: offset={offset} length={length}, then continue from "
        fix += f"offset={offset + length}"
    elif tool == "artifact_read_lines" and result.fit is not None:
        first, last = result.fit
        fix = f"Read fewer lines: start_line={first} end_line={last}, then continue from there"
    elif tool == "artifact_read_lines":
        fix = (
            "The first line asked for is longer than the budget by itself: read it in byte "
            "ranges with artifact_read, or search it with artifact_grep (which names the byte "
            "offset of each match in a long line)"
        )
    elif tool == "artifact_grep":
        fix = "Use a larger budget or a narrower pattern"
    else:
        fix = "Narrow the expression (e.g. a slice [:20], selected fields, or length(...))"
    more = (
        f"; or pass budget up to {MAX_READ_BYTES} (1 MiB)."
        if result.budget < MAX_READ_BYTES
        else "."
    )
    return ToolAnswer(
        tool, result.outcome.value, f"{head} {fix}{more}", result.ref, size=result.size
    )


def query_limit_text(tool: str, result: RehydrateResult) -> str:
    """An ``artifact_query`` stopped by its work, depth or time bound: why, and how to write it.

    The answer's text, ``"<tool>: over_budget: ..."``; the CLI's query error says the same.
    """
    what = {
        "steps": "does more work on this document than a query may (it multiplies what it "
        "works on: [@, @] or a flatten repeated, projections nested over such values, == or "
        "contains on them)",
        "depth": f"nests deeper than {MAX_DEPTH} levels (pipes and brackets)",
        "time": "ran longer than a query may",
    }[result.bound or "steps"]
    return (
        f"{tool}: over_budget: the expression {what}; it was stopped and nothing was returned. "
        "Narrow it: filter and slice first (items[?status=='failed'] | [:20]), select the fields "
        "you need, or count with length(...). A larger budget does not help."
    )


# -- arguments --------------------------------------------------------------------------------


def _arguments(tool: str, arguments: Mapping[str, Any] | str | None) -> Mapping[str, Any]:
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str | bytes):
        try:
            arguments = json.loads(arguments or "{}")
        except (ValueError, RecursionError):
            raise ToolMistake("arguments are not valid JSON; send one JSON object.") from None
    if not isinstance(arguments, Mapping):
        raise ToolMistake("arguments must be one JSON object of named values.")
    allowed = SPEC_BY_NAME[tool].parameters["properties"]
    unknown = sorted(str(key) for key in arguments if key not in allowed)
    if unknown:
        raise ToolMistake(
            f"unknown argument {', '.join(repr(k[:40]) for k in unknown[:5])}; this tool takes "
            f"{', '.join(allowed)}."
        )
    for name in SPEC_BY_NAME[tool].parameters["required"]:
        if arguments.get(name) is None:
            raise ToolMistake(f"{name} is required.")
    return arguments


_HEX = re.compile(r"[0-9a-fA-F]{64}")


def _ref(args: Mapping[str, Any]) -> Ref:
    value = args.get("ref")
    if not isinstance(value, str):
        raise ToolMistake("ref must be a string: artifact://sha256/<64 hex> as the stub prints it.")
    text = value.strip()
    if _HEX.fullmatch(text):  # a bare digest: what else could it mean
        text = "artifact://sha256/" + text.lower()
    try:
        return Ref.parse(text)
    except CargoholdError:
        shown = json.dumps(value[:80]) + ("..." if len(value) > 80 else "")
        raise ToolMistake(
            f"ref {shown} is not a reference; copy it whole from the stub's first line: "
            "artifact://sha256/ then 64 lowercase hex digits."
        ) from None


def _int(args: Mapping[str, Any], name: str, default: int | None, *, minimum: int) -> int:
    value = args.get(name, default)
    if value is None:
        raise ToolMistake(f"{name} is required.")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolMistake(f"{name} must be a whole number, got {json.dumps(value)[:40]}.")
    if value < minimum:
        raise ToolMistake(f"{name} must be at least {minimum}, got {value}.")
    return value


def _optional_int(args: Mapping[str, Any], name: str, *, minimum: int) -> int | None:
    if args.get(name) is None:
        return None
    return _int(args, name, None, minimum=minimum)


def _text(args: Mapping[str, Any], name: str, most: int) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value:
        raise ToolMistake(f"{name} must be a non-empty string.")
    if len(value) > most:
        raise ToolMistake(f"{name} is {len(value):,} characters; at most {most:,}.")
    return value


def _check_text(value: str, name: str) -> None:
    """A string argument must be text: a lone surrogate (``"\\udcff"`` is valid JSON) is no
    character, and no engine can match or compare it."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolMistake(
            f"{name} holds {value[exc.start]!r} at character {exc.start + 1}, half of a UTF-16 "
            "surrogate pair and no character by itself; send text (a byte that is not UTF-8 "
            "cannot be searched for: it shows as U+FFFD in answers)."
        ) from None


def check_pattern(pattern: str) -> None:
    """Compile ``pattern`` as RE2, as ``artifact_grep`` does (the CLI's grep checks it so too).

    Raises:
        ToolMistake: not a valid RE2 expression; the message says where and how to fix it.
    """
    options = re2.Options()
    options.log_errors = False
    try:
        re2.compile(pattern, options)
    except re2.error as exc:
        problem = exc.args[0].decode("utf-8", "replace") if exc.args else "invalid"
        what, _, fragment = problem.partition(": ")
        where = pattern.find(fragment) if fragment else -1
        at = f" at character {where + 1}" if where >= 0 else ""
        raise ToolMistake(
            f"pattern is not a valid RE2 regular expression: {what}{at} ({fragment!r}). RE2 has "
            "no lookaround and no backreferences; escape literal ( [ { . * + ? with a backslash."
        ) from None


def check_expression(expression: str) -> None:
    """Compile ``expression`` as JMESPath, as ``artifact_query`` does (and the CLI's query).

    Raises:
        ToolMistake: not valid JMESPath, or nested deeper than the parser takes.
    """
    try:
        compile_expression(expression)
    except QueryLimit:  # the parser's own recursion
        raise ToolMistake(
            f"expression nests deeper than the parser takes; write it with fewer nested "
            f"brackets and parentheses (at most {MAX_DEPTH} levels)."
        ) from None
    except jmespath.exceptions.ParseError as exc:
        where = exc.lex_position + 1 if isinstance(exc.lex_position, int) else None
        token = f" near {exc.token_value!r}" if exc.token_value not in (None, "") else ""
        at = f" at character {where}{token}" if where is not None else token
        raise ToolMistake(
            f"expression is not valid JMESPath{at}. Quote string literals with single quotes "
            "and compare with ==, e.g. items[?status=='failed'].id"
        ) from None
    except jmespath.exceptions.JMESPathError:
        raise ToolMistake("expression is not valid JMESPath.") from None


SPEC_BY_NAME: Final = {spec.name: spec for spec in SPECS}
