"""The working context of one session: workers' exact outputs stored, bounded results projected.

For each worker's output, in this order:

1. the exact bytes are stored (through the offload seam with a threshold of one byte: every
   non-empty output is kept, whatever its size; credentials are scanned for as everywhere and,
   under the default policy, replaced by markers before anything is stored, so the evidence is
   the redacted copy; the store's quotas and sensitivity rules apply). Nothing is projected
   before this.
2. the worker's report is validated as untrusted input; the references it names must be held
   by the store for this session.
3. a :class:`~cargohold.working.WorkerResult` is built: status, bounded summary, findings and
   errors, the stored output's reference (role ``raw_output``) and the report's, the advisory
   state delta. When the output could not be stored, the result is ``degraded`` and carries no
   evidence; the raw output is dropped, never used as a fallback.
4. the projection the primary's model sees is rendered within the context's budget profile
   (LIGHT 4 KiB ... MAX 16 KiB): status and errors first, then the references, then what room
   allows of the summary, findings and proposed changes, then a preview of the output by its
   projection class (failure overrides compressible), made by the compressor seam or the
   deterministic projector.

The context never applies a state delta and never merges results: each call is one result,
and identical bytes from two calls are two entries with their own association ids.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cargohold._errors import StoreError, StoreUnavailableError, UsageError
from cargohold._events import OffloadOutcome, Reason
from cargohold._offload import Offloader, media_type_of
from cargohold._records import ReadOutcome, Sensitivity
from cargohold._ref import Ref
from cargohold._secrets import find_secrets, mask_secrets, redact_secrets, redaction_note
from cargohold._segment import OPEN as SEGMENT_OPEN
from cargohold._segment import parse_segment
from cargohold._stub import Budget
from cargohold._text import fit, looks_textual, utf8_len
from cargohold.projection import Detection, ProjectionClass, detect
from cargohold.working._checkpoint import Checkpoint
from cargohold.working._compress import DEFAULT_TIMEOUT, Compressor, make_preview
from cargohold.working._result import (
    ErrorKind,
    EvidenceRole,
    ResultRef,
    Scalar,
    WorkerError,
    WorkerReport,
    WorkerResult,
    WorkerResultError,
    WorkerStatus,
    check_id,
)

if TYPE_CHECKING:
    from cargohold._facade import ScopedStore
    from cargohold._hold import Hold

OPEN = "[cargohold:worker-result]"
"""The first token of a worker result's projection."""
CLOSE = "[cargohold:end-worker-result]"
BRIEF_OPEN = "[cargohold:working-context]"
BRIEF_CLOSE = "[cargohold:end-working-context]"

_TEXT_MEDIA_TYPE = "text/plain; charset=utf-8"
_STORED = frozenset({OffloadOutcome.OFFLOADED, OffloadOutcome.EXISTING_REFERENCE})
"""The offload outcomes that leave the exact output stored under a reference."""
_REF_LINE_MAX = 320
_ITEM_LINE_MAX = 240
_SHOWN_RESERVE = 160  # the "not shown for room" line, whatever it holds
_MIN_PREVIEW = 384
_RULE_MAX = 160


def _usage_id(value: object, name: str) -> str:
    try:
        return check_id(value, name)
    except WorkerResultError:
        raise UsageError(f"{name} must be 1-128 letters, digits or ._:/- characters") from None


def _one_line(text: str, limit: int) -> str:
    """``text`` on one line (whitespace runs collapsed), cut to ``limit`` bytes with the cut
    stated."""
    flat = " ".join(text.split())
    if utf8_len(flat) <= limit:
        return flat
    return fit(flat, limit - 6) + " [...]"


@dataclass(slots=True)
class _Lines:
    """Lines chosen for a projection, within a byte budget (each line costs its newline)."""

    room: int

    def take(self, line: str) -> bool:
        cost = utf8_len(line) + 1
        if cost > self.room:
            return False
        self.room -= cost
        return True


class WorkingContext:
    """The evidence layer of one session: workers' exact outputs behind references, bounded
    results for the primary, checkpoints for a handoff.

    Args:
        hold: The primary's hold (its scope is the session; workers' outputs are stored there,
            attributed to each worker).
        budget: The budget profile of each result's projection (``light`` 4 KiB,
            ``balanced`` 8 KiB, ``strong`` 12 KiB, ``max`` 16 KiB); the hold's stub budget
            when omitted.
        compressor: An optional smaller-representation step for compressible outputs (see
            :mod:`cargohold.working._compress`); the deterministic projector otherwise.
        compressor_timeout: Seconds the compressor may take.

    Thread-safe: workers may submit from many threads at once.
    """

    __slots__ = (
        "_availability",
        "_budget",
        "_cache",
        "_compressor",
        "_hold",
        "_lock",
        "_results",
        "_timeout",
    )

    def __init__(
        self,
        hold: Hold,
        *,
        budget: Budget | str | None = None,
        compressor: Compressor | None = None,
        compressor_timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        from cargohold._hold import Hold

        if not isinstance(hold, Hold):
            raise UsageError("a WorkingContext needs a cargohold.Hold (cargohold.open())")
        if compressor is not None and not callable(compressor):
            raise UsageError("a compressor is a callable taking a CompressionRequest")
        timeout = compressor_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise UsageError("compressor_timeout must be a positive number of seconds")
        self._hold = hold
        self._budget = hold.offloader.budget if budget is None else Budget.parse(budget)
        self._compressor = compressor
        self._timeout = float(timeout)
        self._lock = threading.Lock()
        self._results: list[WorkerResult] = []
        self._cache: dict[tuple[WorkerResult, Budget], str] = {}
        self._availability: dict[Ref, ReadOutcome] = {}

    def __repr__(self) -> str:
        return f"WorkingContext({len(self._results)} results, budget={self._budget.label})"

    @property
    def hold(self) -> Hold:
        """The primary's hold."""
        return self._hold

    @property
    def budget(self) -> Budget:
        """The budget profile of each result's projection."""
        return self._budget

    @property
    def results(self) -> tuple[WorkerResult, ...]:
        """Every result, in submission order."""
        with self._lock:
            return tuple(self._results)

    def availability(self, ref: Ref | str) -> ReadOutcome | None:
        """What the store said of ``ref`` when this context last checked it (``resolved`` for
        outputs stored here; for a restored context, the check made at restore), or ``None``
        when this context names no such reference."""
        key = ref if isinstance(ref, Ref) else Ref.parse(ref)
        with self._lock:
            return self._availability.get(key)

    def worker_hold(self, worker: str, *, task: str | None = None) -> Hold:
        """The hold a worker uses for its own tools: the same session, attributed to the
        worker, its events naming it with the primary as parent."""
        _usage_id(worker, "worker")
        if task is not None:
            _usage_id(task, "task")
        return self._hold.derive(worker=worker, agent=worker, task=task)

    # -- submitting ---------------------------------------------------------------------------

    def submit(
        self,
        output: str | bytes | bytearray | memoryview,
        *,
        worker: str,
        status: WorkerStatus | str,
        report: WorkerReport | Mapping[str, Any] | str | bytes | None = None,
        task: str | None = None,
        association_id: str | None = None,
        media_type: str | None = None,
        tool: str | None = None,
        sensitivity: Sensitivity | str = Sensitivity.INTERNAL,
        complete: bool = True,
        classification: ProjectionClass | str | None = None,
    ) -> WorkerResult:
        """Store a worker's exact output, then take its report and return its bounded result.

        Never raises for what the worker sent: a report that does not validate (oversized,
        wrong types, a malformed reference, a reference this session's store does not hold)
        is refused whole and the result is ``failed`` with an ``invalid_report`` error; an
        output the store cannot keep gives a ``degraded`` result without it.

        Args:
            output: The worker's exact output (text is stored as UTF-8).
            worker: The worker's id.
            status: How the run came out as the harness saw it (``passed``, ``failed``,
                ``cancelled``). A report may make it worse, never better.
            report: What the worker says about it (untrusted): a :class:`WorkerReport`, or
                JSON text or a mapping for :meth:`WorkerReport.parse`.
            task: The task worked on (attribution).
            association_id: The call that delegated the work (a tool-call id): it links the
                stored output's reference to that call.
            media_type: The output's media type (plain text for ``str`` when omitted).
            tool: The name the output is stored under (the worker's id when omitted).
            sensitivity: ``public``, ``internal`` or ``restricted``.
            complete: ``False`` when the worker truncated its own output.
            classification: ``exact_required`` declares the output exact (security evidence,
                a policy or authority payload, a memory or context response): its preview is
                verbatim excerpts and the compressor never sees it. When omitted, the hold's
                ``tool_classifications`` entry for ``tool`` (or the worker), else detected.

        Raises:
            UsageError: a developer mistake in the arguments (not in the worker's report),
                including a declared classification other than ``exact_required``.
        """
        claimed = _harness_status(status)
        _usage_id(worker, "worker")
        for name, value in (("task", task), ("association_id", association_id)):
            if value is not None:
                _usage_id(value, name)
        if isinstance(output, str):
            data = output.encode("utf-8", "surrogatepass")
            media_type = media_type or _TEXT_MEDIA_TYPE
        elif isinstance(output, bytes | bytearray | memoryview):
            data = bytes(output)
        else:
            raise UsageError("a worker's output is text or bytes")
        worker_hold = self._hold.derive(worker=worker, agent=worker, task=task)
        base = self._hold.offloader
        offloader = Offloader(
            worker_hold.store,
            threshold=1,  # evidence is kept whatever its size; only an empty output is not
            tool_thresholds={},
            secrets_policy=base.secrets_policy,
            budget=Budget.LIGHT,
            reporter=worker_hold.reporter,
            read_tools=base.read_tools,
            ttl=base.ttl,
            tool_classifications=base.tool_classifications,
        )
        # 1. The exact bytes first. Bytes, not text: a worker's output is never a bypass.
        stored = offloader.offload(
            data,
            tool=tool or worker,
            media_type=media_type,
            sensitivity=sensitivity,
            complete=complete,
            failed=claimed is not WorkerStatus.PASSED,
            classification=classification,
            render=False,  # the context renders its own projection (step 4)
        )
        declared = classification or offloader.classification_for(tool or worker)
        if stored.redacted:
            # The redact policy stored a copy with each credential replaced by a marker: that
            # copy is the evidence, its size the one recorded, and the one projected. The same
            # function over the same findings gives the same bytes (binary keeps its length).
            data = redact_secrets(data, stored.redacted, keep_length=not looks_textual(data))
        errors: list[WorkerError] = []
        degraded: str | None = None
        raw: ResultRef | None = None
        if stored.ref is not None and stored.outcome in _STORED:
            raw = ResultRef(
                stored.ref,
                EvidenceRole.RAW_OUTPUT,
                association_id,
                size=len(data),
                media_type=media_type_of(data, media_type),
                complete=complete,
            )
        elif stored.outcome in (OffloadOutcome.FAILED, OffloadOutcome.REJECTED):
            degraded = stored.reason.value
            errors.append(
                WorkerError(
                    ErrorKind.EVIDENCE,
                    f"the worker's exact output ({len(data):,} bytes) was not stored "
                    f"({degraded}); it is not in this context and cannot be read back",
                )
            )
        # 2. The report, untrusted.
        parsed, refs, problem = _take_report(report, worker_hold.store)
        if problem is not None:
            if problem in (Reason.STORE_UNAVAILABLE.value, Reason.STORE_ERROR.value):
                degraded = degraded or problem
                message = (
                    f"the references the worker reported could not be checked ({problem}); "
                    "none of them is kept"
                )
                errors.append(WorkerError(ErrorKind.EVIDENCE, message))
            else:
                errors.append(WorkerError(ErrorKind.INVALID_REPORT, problem))
        # 3. The result: a report can make the status worse, never better.
        reported = claimed
        if parsed.status is not None and parsed.status.severity > reported.severity:
            reported = parsed.status
        if any(error.kind is ErrorKind.INVALID_REPORT for error in errors):
            reported = WorkerStatus.FAILED
        if parsed.errors and reported is WorkerStatus.PASSED:
            cancelled = all(error.kind is ErrorKind.CANCELLATION for error in parsed.errors)
            reported = WorkerStatus.CANCELLED if cancelled else WorkerStatus.FAILED
        with self._lock:
            result = WorkerResult(
                sequence=self._results[-1].sequence + 1 if self._results else 1,
                worker=worker,
                status=WorkerStatus.DEGRADED if degraded else reported,
                reported_status=reported,
                task=task,
                association_id=association_id,
                summary=parsed.summary,
                findings=parsed.findings,
                errors=(*parsed.errors, *errors),
                refs=(*([raw] if raw else []), *refs),
                state_delta=parsed.state_delta,
                degraded_reason=degraded,
            )
            self._results.append(result)
            for entry in result.refs:
                self._availability[entry.ref] = ReadOutcome.RESOLVED
        # 4. The projection, from the bytes in hand (the compressor only ever sees stored ones).
        text = self._render(
            result, self._budget, data if raw else None, worker_hold, declared=declared
        )
        with self._lock:
            self._cache[(result, self._budget)] = text
        return result

    async def asubmit(
        self,
        output: str | bytes | bytearray | memoryview,
        *,
        worker: str,
        status: WorkerStatus | str,
        report: WorkerReport | Mapping[str, Any] | str | bytes | None = None,
        task: str | None = None,
        association_id: str | None = None,
        media_type: str | None = None,
        tool: str | None = None,
        sensitivity: Sensitivity | str = Sensitivity.INTERNAL,
        complete: bool = True,
        classification: ProjectionClass | str | None = None,
    ) -> WorkerResult:
        """:meth:`submit` on the hold's worker pool: the event loop never waits on the store."""
        return await self._hold.arun(
            self.submit,
            output,
            worker=worker,
            status=status,
            report=report,
            task=task,
            association_id=association_id,
            media_type=media_type,
            tool=tool,
            sensitivity=sensitivity,
            complete=complete,
            classification=classification,
        )

    # -- projecting ---------------------------------------------------------------------------

    def project(self, result: WorkerResult, *, budget: Budget | str | None = None) -> str:
        """What the primary's model sees of ``result``: at most ``budget`` bytes (the
        context's profile when omitted), never the output itself.

        The preview of the stored output is made from the bytes the store returns for its
        reference (verified), so a restored context projects what the original one did.
        """
        chosen = self._budget if budget is None else Budget.parse(budget)
        if not isinstance(result, WorkerResult):
            raise UsageError("project() takes a WorkerResult")
        with self._lock:
            cached = self._cache.get((result, chosen))
        if cached is not None:
            return cached
        text = self._render(result, chosen, None, self._hold)
        with self._lock:
            self._cache[(result, chosen)] = text
        return text

    async def aproject(self, result: WorkerResult, *, budget: Budget | str | None = None) -> str:
        """:meth:`project` on the hold's worker pool."""
        return await self._hold.arun(self.project, result, budget=budget)

    def _render(
        self,
        result: WorkerResult,
        budget: Budget,
        data: bytes | None,
        via: Hold,
        *,
        declared: ProjectionClass | str | None = None,
    ) -> str:
        raw = result.raw_ref

        def preview(room: int) -> list[str]:
            if raw is None:
                return []
            return self._preview(result, raw, room, data, via, declared)

        read_tools = self._hold.offloader.read_tools
        json_like = any("json" in (entry.media_type or "") for entry in result.refs)
        return render_result(
            result,
            budget=int(budget),
            preview=preview,
            read_more=read_tools.hint(json_like=json_like) if result.refs else None,
            availability=self._availability_of(result),
        )

    def _availability_of(self, result: WorkerResult) -> dict[Ref, ReadOutcome]:
        with self._lock:
            return {
                entry.ref: self._availability.get(entry.ref, ReadOutcome.RESOLVED)
                for entry in result.refs
            }

    def _preview(
        self,
        result: WorkerResult,
        raw: ResultRef,
        room: int,
        data: bytes | None,
        via: Hold,
        declared: ProjectionClass | str | None,
    ) -> list[str]:
        """The preview block of the stored output in ``room`` bytes (rules included).

        ``declared`` is the class the submit declared; a preview made later (a restored
        context) takes it from the record, where the offload wrote the class it decided.
        """
        if data is None:
            try:
                answer = via.store.read(raw.ref)
            except StoreError as exc:
                code = (
                    Reason.STORE_UNAVAILABLE
                    if isinstance(exc, StoreUnavailableError)
                    else Reason.STORE_ERROR
                )
                return [f"evidence preview unavailable ({code.value}); try again later"]
            if not answer.ok or answer.data is None:
                with self._lock:
                    self._availability[raw.ref] = answer.outcome
                return [f"evidence preview unavailable: the output reads as {answer.outcome.value}"]
            data = answer.data
            if answer.record is not None:
                declared = answer.record.classification
        media = raw.media_type or "application/octet-stream"
        failed = result.reported_status is not WorkerStatus.PASSED
        if _is_segment(data, via.store):
            return [
                f"the output is a recovered segment (class {ProjectionClass.BYPASS.value}): "
                "never projected; read it by reference"
            ]
        findings = find_secrets(data)
        if findings:  # a tool whose policy masks: the exact bytes are stored, never shown
            data = mask_secrets(data, findings)
        # What the redact policy took out, from its markers in the stored bytes (so a restored
        # context says it too): kinds and lines, bounded, never a value.
        note = redaction_note(data, _RULE_MAX)
        preview_budget = room - 2 * _RULE_MAX
        if note and preview_budget - len(note) - 1 >= 2 * _RULE_MAX:
            preview_budget -= len(note) + 1
        else:
            note = ""
        found: Detection = detect(data, media_type=media, failed=failed)
        if (
            declared == ProjectionClass.EXACT_REQUIRED.value
            and found.classification is ProjectionClass.COMPRESSIBLE
        ):  # declared exact: verbatim excerpts, and no compressor ever sees it
            found = Detection(found.kind, ProjectionClass.EXACT_REQUIRED, found.detail)
        made = make_preview(
            data,
            raw.ref,
            media_type=media,
            budget=preview_budget,
            detection=found,
            failed=failed,
            compressor=self._compressor,
            timeout=self._timeout,
            reporter=via.reporter,
            tool=result.worker,
        )
        what = (
            "compressed representation, not exact: the reference holds the exact bytes"
            if made.compressed
            else f"class {made.classification.value}"
        )
        lines = [f"--- evidence preview: raw_output | kind {made.kind} | {what} ---"]
        if note:
            lines.append(note)
        lines.extend(made.text.rstrip("\n").split("\n") if made.text else [])
        lines.append("--- end of preview ---")
        return lines

    # -- the shared brief, checkpoints and handoff -------------------------------------------

    def brief(self, *, budget: Budget | str | None = None) -> str:
        """A bounded overview of every result for a primary's model (a new primary's first
        context after a handoff): one line per result and its stored output's reference.
        Results that did not pass are listed before any passed one is left out for room."""
        chosen = self._budget if budget is None else Budget.parse(budget)
        with self._lock:
            results, availability = tuple(self._results), dict(self._availability)
        return render_brief(results, budget=int(chosen), availability=availability)

    def checkpoint(self, *, state: Mapping[str, Scalar] | None = None) -> Checkpoint:
        """A checkpoint of this context: metadata and references only, bound to the store's
        marker key.

        Args:
            state: The primary's consolidated state (at most 256 short keys of text, integer,
                boolean or null values), handed over with the results.

        Raises:
            UsageError: a state out of bounds.
            StoreError: the store cannot give its marker key (unavailable).
        """
        key = self._hold.store.marker_key()
        return Checkpoint.build(self.results, budget=self._budget, state=state or {}, key=key)

    @classmethod
    def restore(
        cls,
        hold: Hold,
        checkpoint: Checkpoint | bytes | str,
        *,
        budget: Budget | str | None = None,
        compressor: Compressor | None = None,
        compressor_timeout: float = DEFAULT_TIMEOUT,
    ) -> WorkingContext:
        """A new primary's working context from a checkpoint: the same results and
        references, no byte written. Each reference is checked (metadata only) against
        ``hold``'s scope; :meth:`availability` tells what the store said.

        Raises:
            CheckpointError: not a checkpoint, edited, or written for another store.
            StoreError: the store cannot be reached.
        """
        key = hold.store.marker_key()
        data = checkpoint.data if isinstance(checkpoint, Checkpoint) else checkpoint
        parsed = Checkpoint.parse(data, key=key)
        context = cls(
            hold,
            budget=parsed.budget if budget is None else budget,
            compressor=compressor,
            compressor_timeout=compressor_timeout,
        )
        availability = {ref: hold.store.stat(ref).outcome for ref in parsed.refs}
        with context._lock:
            context._results.extend(parsed.results)
            context._availability.update(availability)
        return context


def _harness_status(status: object) -> WorkerStatus:
    try:
        if not isinstance(status, str):
            raise ValueError(status)
        value = WorkerStatus(status)
    except ValueError:
        raise UsageError("status must be one of: passed, failed, cancelled") from None
    if value is WorkerStatus.DEGRADED:
        raise UsageError("degraded is the working context's verdict, not a worker's status")
    return value


def _take_report(
    report: object, store: ScopedStore
) -> tuple[WorkerReport, tuple[ResultRef, ...], str | None]:
    """The validated report, its references as the store holds them, and the problem that
    refused them: a message for an ``invalid_report`` error, or a store reason code (the
    report is then kept without its references, which could not be checked)."""
    if report is None:
        return WorkerReport(), (), None
    try:
        parsed = report if isinstance(report, WorkerReport) else WorkerReport.parse(report)
        refs = []
        for index, entry in enumerate(parsed.refs):
            answer = store.stat(entry.ref)
            if not answer.ok or answer.record is None:
                # missing, unauthorized and expired alike: a report gets no existence oracle
                raise WorkerResultError(
                    f"refs[{index}].ref: not held by the store for this session",
                    reason="reference_not_held",
                    field=f"refs[{index}].ref",
                )
            record = answer.record
            refs.append(
                ResultRef(
                    entry.ref,
                    entry.role,
                    entry.association_id,
                    size=record.size,
                    media_type=record.media_type,
                    complete=record.complete,
                )
            )
    except WorkerResultError as exc:
        message = (
            f"the worker's report was refused ({exc.reason} at {exc.field}); nothing of it is used"
        )
        return WorkerReport(), (), message
    except StoreError as exc:
        code = Reason.STORE_UNAVAILABLE if isinstance(exc, StoreUnavailableError) else None
        kept = WorkerReport(
            status=parsed.status,
            summary=parsed.summary,
            findings=parsed.findings,
            errors=parsed.errors,
            state_delta=parsed.state_delta,
        )
        return kept, (), (code or Reason.STORE_ERROR).value
    return parsed, tuple(refs), None


def _is_segment(data: bytes, store: ScopedStore) -> bool:
    """Whether ``data`` is a genuine recovered segment of this store (class ``bypass``)."""
    if not data.startswith(SEGMENT_OPEN.encode()):
        return False
    try:
        key = store.marker_key()
        text = data.decode("utf-8")
    except (StoreError, UnicodeDecodeError):
        return False
    return parse_segment(text, key=key) is not None


# -- rendering (deterministic: same result, same bytes, same budget -> same text) -----------


def _ref_line(entry: ResultRef, availability: ReadOutcome | None) -> str:
    parts = [f"- {entry.role.value} {entry.ref}"]
    if entry.association_id is not None:
        parts.append(f"association {entry.association_id}")
    if entry.media_type is not None:
        parts.append(_one_line(entry.media_type, 80))
    if entry.size is not None:
        parts.append(f"{entry.size:,} bytes")
    if entry.complete is not None:
        parts.append("complete" if entry.complete else "truncated by its producer")
    if availability is not None and availability is not ReadOutcome.RESOLVED:
        parts.append(f"unavailable: {availability.value}")
    return _one_line(" | ".join(parts), _REF_LINE_MAX)


def _error_counts(errors: tuple[WorkerError, ...]) -> str:
    if not errors:
        return "errors: none"
    counts: dict[str, int] = {}
    for error in errors:
        counts[error.kind.value] = counts.get(error.kind.value, 0) + 1
    return f"errors: {len(errors)} (" + ", ".join(f"{k} {n}" for k, n in counts.items()) + ")"


def render_result(
    result: WorkerResult,
    *,
    budget: int,
    preview: Callable[[int], list[str]],
    read_more: str | None,
    availability: Mapping[Ref, ReadOutcome],
) -> str:
    """The projection of ``result`` in at most ``budget`` UTF-8 bytes.

    What must be there is placed first (the status, the degraded notice, the count of errors
    by kind, the stored output's reference, how to read more); then, while room lasts and in
    this order: the other references, each error, the summary (a quarter of the budget at
    most), the findings (a quarter), the proposed changes (an eighth), and the preview of the
    stored output with what is left. What did not fit is counted on one line.
    """
    head = f"{OPEN} #{result.sequence} worker {result.worker} | status {result.status.value}"
    if result.status is not result.reported_status:
        head += f" (run {result.reported_status.value})"
    if result.task is not None:
        head += f" | task {result.task}"
    if result.association_id is not None:
        head += f" | association {result.association_id}"
    top = [head]
    if result.degraded_reason is not None:
        top.append(
            f"degraded ({result.degraded_reason}): the worker's exact output was not stored; "
            "it is not in this context and cannot be read back"
        )
    top.append(_error_counts(result.errors))
    raw = result.raw_ref
    others = [entry for entry in result.refs if entry is not raw]
    evidence = ["evidence:"]
    if raw is not None:
        evidence.append(_ref_line(raw, availability.get(raw.ref)))
    elif result.degraded_reason is None:
        evidence.append("- raw_output: none (the worker's output was empty)")
    tail = [*([read_more] if read_more else []), CLOSE]
    lines = _Lines(budget - _SHOWN_RESERVE)
    for line in (*top, *evidence, *tail):
        if not lines.take(line):
            raise AssertionError("a worker result's fixed lines exceed its budget")

    shown_refs = _take_all(lines, [_ref_line(e, availability.get(e.ref)) for e in others])
    error_lines = _take_all(
        lines,
        [f"- {e.kind.value}: {_one_line(e.message, _ITEM_LINE_MAX)}" for e in result.errors],
    )
    summary: list[str] = []
    summary_note: str | None = None
    if result.summary.strip():
        limit = min(budget // 4, lines.room - 1)
        line = "summary: " + _one_line(result.summary, limit - 10) if limit >= 64 else ""
        if line and lines.take(line):
            summary = [line]
            summary_note = "the rest of the summary" if line.endswith(" [...]") else None
        else:
            summary_note = "the summary"
    findings = _take_section(
        lines,
        "findings:",
        [f"- {_one_line(f, _ITEM_LINE_MAX)}" for f in result.findings],
        budget // 4,
    )
    changes = _take_section(
        lines,
        f"proposed state changes (advisory; not applied): {len(result.state_delta)}",
        [_change_line(change.as_dict()) for change in result.state_delta.changes],
        budget // 8,
    )
    left = {
        "references": len(others) - len(shown_refs),
        "errors": len(result.errors) - len(error_lines),
        "findings": len(result.findings) - max(0, len(findings) - 1),
        "proposed changes": len(result.state_delta) - max(0, len(changes) - 1),
    }
    note = [f"{n} {what}" for what, n in left.items() if n > 0]
    if summary_note is not None:
        note.append(summary_note)
    shown_note = ["not shown for room: " + ", ".join(note)] if note else []
    block: list[str] = []
    if lines.room >= _MIN_PREVIEW:
        block = preview(lines.room)
    elif raw is not None:
        block = ["evidence preview: none for room; read the output by reference"]
    if sum(utf8_len(line) + 1 for line in block) > lines.room:
        block = []  # a preview fits whole, or is not there
    text = "\n".join(
        [
            *top,
            *error_lines,
            *summary,
            *findings,
            *evidence,
            *shown_refs,
            *changes,
            *shown_note,
            *block,
            *tail,
        ]
    )
    if utf8_len(text) > budget:  # the renderer broke its contract: fail loudly, never leak
        raise AssertionError("worker result projection over budget")
    return text


def _take_all(lines: _Lines, candidates: list[str]) -> list[str]:
    taken = []
    for line in candidates:
        if not lines.take(line):
            break
        taken.append(line)
    return taken


def _take_section(lines: _Lines, heading: str, items: list[str], share: int) -> list[str]:
    """A heading and as many items as fit in ``share`` bytes and the room; nothing when no
    item fits."""
    if not items:
        return []
    section = _Lines(min(share, lines.room))
    if not section.take(heading):
        return []
    taken = _take_all(section, items)
    if not taken:
        return []
    chosen = [heading, *taken]
    for line in chosen:
        lines.take(line)
    return chosen


def _change_line(change: Mapping[str, Any]) -> str:
    if change["op"] == "unset":
        return f"- unset {change['key']}"
    value = json.dumps(change["value"], ensure_ascii=False)
    return _one_line(f"- set {change['key']} = {value}", _ITEM_LINE_MAX)


def render_brief(
    results: tuple[WorkerResult, ...],
    *,
    budget: int,
    availability: Mapping[Ref, ReadOutcome],
) -> str:
    """One bounded overview of ``results``: a line per result and one per stored output's
    reference. Results that did not pass come first when room runs out."""
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status.value] = counts.get(result.status.value, 0) + 1
    summary = ", ".join(f"{n} {status}" for status, n in counts.items()) or "none"
    head = f"{BRIEF_OPEN} {len(results)} worker results | {summary}"
    lines = _Lines(budget - _SHOWN_RESERVE)
    lines.take(head)
    lines.take(BRIEF_CLOSE)

    def entry(result: WorkerResult) -> list[str]:
        line = f"#{result.sequence} {result.worker} | {result.status.value}"
        if result.status is not result.reported_status:
            line += f" (run {result.reported_status.value})"
        if result.association_id is not None:
            line += f" | association {result.association_id}"
        line += " | " + _error_counts(result.errors)
        line += f" | evidence refs {len(result.refs)}"
        block = [_one_line(line, _REF_LINE_MAX)]
        if result.raw_ref is not None:
            raw = result.raw_ref
            block.append("  " + _ref_line(raw, availability.get(raw.ref)))
        return block

    order = sorted(results, key=lambda r: (r.status is WorkerStatus.PASSED, r.sequence))
    chosen: set[int] = set()
    for result in order:
        block = entry(result)
        cost = sum(utf8_len(line) + 1 for line in block)
        if cost > lines.room:
            continue
        lines.room -= cost
        chosen.add(result.sequence)
    body = [line for result in results if result.sequence in chosen for line in entry(result)]
    left = len(results) - len(chosen)
    note = [f"not shown for room: {left} results"] if left else []
    return "\n".join([head, *body, *note, BRIEF_CLOSE])
