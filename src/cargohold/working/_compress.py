"""The compressor seam: an optional, pluggable smaller representation of a stored output.

A compressor (a local helper, a small model, a rules engine) may replace the deterministic
projector's preview of a worker's output, under four conditions:

- it runs only after the exact bytes are stored (the working context calls it with stored
  bytes and their reference, never before the put and never in degraded mode);
- it runs only for ``compressible`` kinds: never for ``exact_required`` (failures, failed or
  cancelled runs, stack traces, unknown text), ``bypass`` (recovered segments) or
  ``unsupported`` (binary);
- its answer must be text, non-empty, without control characters or cargohold markers, within
  the preview's byte budget and shorter than its input, and must keep every failure signal the
  input holds (each of ``FAILED``, ``ERROR``, ``Traceback``... that appears, and the names of
  the first failing tests);
- it answers within its timeout.

Otherwise (it raises, is unavailable, hangs, or answers badly) the deterministic projector's
preview is used, and the decision is one ``compress`` event with the reason. The compressor
never changes a :class:`~cargohold.working.WorkerResult` or its references: the reference stays
the exact evidence, and the preview says that it is a compressed representation.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from cargohold._events import (
    CompressOutcome,
    ContentKind,
    DecisionEvent,
    Operation,
    Reason,
    Reporter,
    record,
)
from cargohold._ref import Ref
from cargohold._text import utf8_len
from cargohold.projection import Detection, ProjectionClass, project

DEFAULT_TIMEOUT = 5.0
"""Seconds a compressor may take before the deterministic preview is used instead."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_SIGNAL = re.compile(
    rb"(?<![A-Za-z])(FAILED|FAIL|ERROR|FATAL|CRITICAL|Traceback|panic|not ok)(?![A-Za-z])"
)
_FAILING_TEST = re.compile(
    rb"^(?:FAILED|ERROR) (\S+)|^\s*--- FAIL: (\S+)|^(?:FAIL|ERROR): (\S+)|^not ok \d+ - (\S+)",
    re.M,
)
_TESTS_CHECKED = 32
"""Failing-test names the answer must keep (the first ones in the input)."""


@dataclass(frozen=True, slots=True)
class CompressionRequest:
    """What a compressor is asked to make smaller.

    Attributes:
        data: The exact stored bytes. Not in the ``repr``.
        ref: Their reference (already stored).
        kind: The detected kind (``json``, ``log``, ``csv``, ``code``, ``diff``, ``search``...).
        media_type: The normalized media type.
        budget: The most UTF-8 bytes the answer may hold.
    """

    data: bytes = field(repr=False)
    ref: Ref
    kind: str
    media_type: str
    budget: int


Compressor = Callable[[CompressionRequest], str]
"""A compressor: given a request, a smaller text representation. Called on a separate thread;
an exception, a hang past the timeout or a bad answer falls back to the deterministic preview."""


@dataclass(frozen=True, slots=True)
class Preview:
    """The evidence preview of a stored output.

    Attributes:
        text: The preview, within its budget. Not in the ``repr``.
        kind: The detected kind.
        classification: The projection class applied.
        compressed: Whether the compressor's answer is the preview.
        event: The compressor decision's event, when a compressor was asked.
    """

    text: str = field(repr=False)
    kind: str
    classification: ProjectionClass
    compressed: bool
    event: DecisionEvent | None


def make_preview(
    data: bytes,
    ref: Ref,
    *,
    media_type: str,
    budget: int,
    detection: Detection,
    failed: bool,
    compressor: Compressor | None,
    timeout: float,
    reporter: Reporter | None,
    tool: str | None,
) -> Preview:
    """The preview of stored bytes in at most ``budget`` UTF-8 bytes: the compressor's answer
    when one is configured, the kind is compressible and the answer passes every check; the
    deterministic projector's otherwise."""

    def deterministic() -> Preview:
        projection = project(
            data, media_type=media_type, budget=budget, failed=failed, detection=detection
        )
        return Preview(projection.preview, projection.kind, projection.classification, False, None)

    def decided(outcome: CompressOutcome, reason: Reason, preview: str) -> DecisionEvent:
        return record(
            reporter,
            Operation.COMPRESS,
            outcome,
            ContentKind.TOOL_RESULT,
            reason,
            observed_bytes=len(data),
            limit_bytes=budget,
            ref=str(ref),
            tool=tool,
            context_bytes=utf8_len(preview),
        )

    if compressor is None or failed or detection.classification is not ProjectionClass.COMPRESSIBLE:
        return deterministic()  # exact_required, bypass and unsupported never reach a compressor
    request = CompressionRequest(data, ref, detection.kind, media_type, budget)
    answer, reason = _ask(compressor, request, timeout)
    if reason is None:
        reason = _refusal(answer, data, budget)
    if reason is None and isinstance(answer, str):
        event = decided(CompressOutcome.COMPRESSED, Reason.COMPRESSOR_ANSWERED, answer)
        return Preview(answer, detection.kind, ProjectionClass.COMPRESSIBLE, True, event)
    fallback = deterministic()
    event = decided(CompressOutcome.FALLBACK, reason or Reason.COMPRESSOR_FAILED, fallback.text)
    return Preview(fallback.text, fallback.kind, fallback.classification, False, event)


def _ask(
    compressor: Compressor, request: CompressionRequest, timeout: float
) -> tuple[object, Reason | None]:
    """The compressor's answer within ``timeout`` seconds, or the reason there is none.

    It runs on a daemon thread: a compressor that hangs is abandoned (it never holds up the
    caller past the timeout, nor the interpreter's exit); one that raises is contained, and
    its exception (whose text may quote the body) goes nowhere.
    """
    box: list[object] = []
    failed: list[bool] = []
    done = threading.Event()

    def run() -> None:
        try:
            box.append(compressor(request))
        except BaseException:  # contained: no traceback on stderr, no exception text anywhere
            failed.append(True)
        finally:
            done.set()

    threading.Thread(target=run, name="cargohold-compressor", daemon=True).start()
    if not done.wait(timeout):
        return None, Reason.COMPRESSOR_TIMEOUT
    if failed or not box:
        return None, Reason.COMPRESSOR_FAILED
    return box[0], None


def _refusal(answer: object, data: bytes, budget: int) -> Reason | None:
    """Why ``answer`` may not stand for ``data``, or ``None`` when it may."""
    if not isinstance(answer, str) or not answer.strip():
        return Reason.COMPRESSOR_MALFORMED
    try:
        encoded = answer.encode("utf-8")
    except UnicodeEncodeError:
        return Reason.COMPRESSOR_MALFORMED
    if _CONTROL.search(answer) is not None or "[cargohold" in answer:
        return Reason.COMPRESSOR_MALFORMED
    if len(encoded) > budget or len(encoded) >= len(data):
        return Reason.COMPRESSOR_OVERSIZED
    if hides_failure(data, encoded):
        return Reason.COMPRESSOR_HID_FAILURE
    return None


def hides_failure(data: bytes, answer: bytes) -> bool:
    """Whether ``answer`` drops a failure signal ``data`` holds: one of the signal words
    (``FAILED``, ``ERROR``, ``Traceback``...) it never mentions, or one of the first failing
    tests' names."""
    signals = {match.group(1) for match in _SIGNAL.finditer(data)}
    if not signals <= {match.group(1) for match in _SIGNAL.finditer(answer)}:
        return True
    names: list[bytes] = []
    for match in _FAILING_TEST.finditer(data):
        name = next(group for group in match.groups() if group is not None)
        if name not in names:
            names.append(name)
            if len(names) >= _TESTS_CHECKED:
                break
    return any(name not in answer for name in names)
