"""The offload seam: a tool's result goes in, exactly one decision comes out.

At or above the heavy threshold (32 KiB of UTF-8 by default; bytes for binary) a result is stored
and replaced by a stub; below it, it stays inline and no reference is minted. There is no switch
that turns offloading off and no no-op store. No stub names bytes that are not stored: a large
body's stub is made while its put runs and handed out only once the put has returned (a put that
fails drops it), a small body's only after the put. When the store fails, the conversation gets
a bounded notice without a reference, never the raw body. A recovered context segment (what an
explicit read returned) passes as ``bypass`` up to the budget its reader chose, so a read is never
undone.

Every result is scanned for credentials first (:mod:`cargohold._secrets`), whatever its size, and
its tool's secrets policy decides. ``redact`` (the default): each credential is replaced by a marker
of its kind before anything else happens, so no credential enters the store or the conversation;
the rest of the result is decided as any result is (``inline`` or ``offloaded``), with reason
``credential_redacted`` and the kinds and lines in :attr:`OffloadResult.redacted`. ``reject``: the
whole result is ``rejected`` with a notice naming the kinds and line numbers, never the values.
``mask``: the exact bytes are stored as ``restricted`` (even below the threshold: a credential
never goes inline) and the stub is rendered from a masked copy. A value the caller marked
``secret``, ``credential`` or ``raw_auth`` is rejected at any size.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cargohold._cpu import CPU_BOUND
from cargohold._errors import (
    CargoholdError,
    LimitExceededError,
    RejectedError,
    SensitivityRefusedError,
    StoreError,
    StoreUnavailableError,
    UsageError,
)
from cargohold._events import (
    LIMIT_REASONS,
    ContentKind,
    DecisionEvent,
    OffloadOutcome,
    Operation,
    Reason,
    Reporter,
    record,
)
from cargohold._facade import ScopedStore
from cargohold._records import (
    DEFAULT_MEDIA_TYPE,
    KiB,
    MiB,
    PutResult,
    Sensitivity,
    normalize_media_type,
)
from cargohold._ref import Ref
from cargohold._secrets import (
    SecretFinding,
    describe_findings,
    find_secrets,
    mask_secrets,
    policy_for,
    redact_secrets,
    redaction_note,
)
from cargohold._segment import OPEN as SEGMENT_OPEN
from cargohold._segment import parse_segment
from cargohold._stub import (
    DEFAULT_READ_TOOLS,
    MARKER,
    Budget,
    ReadTools,
    Stub,
    render_notice,
    render_stub,
)
from cargohold._text import looks_textual
from cargohold._tokens import Family, estimate_tokens, family_of
from cargohold.projection import Detection, ProjectionClass, detect, sniff_media_type
from cargohold.store._core import Prehash

HEAVY_THRESHOLD = 32 * KiB
"""The default heavy threshold: results of at least this many bytes are offloaded."""

OVERLAP_BYTES = 4 * MiB
"""From this size on, a text body's put runs on a thread of its own while its stub is made.

The put's I/O (hashing, write, fsync, SQLite) releases the GIL, but the projection beside it is
mostly pure Python, which hands the GIL back only every switch interval (5 ms): each time the put
returns from a call that released it, it waits up to that long. A local put makes many such
calls: two hashes per 64 KiB chunk before the write, and the chunk digests again while it syncs,
so the put crawls while the projection runs. Measured on the 2-core machines (busy,
interleaved medians of the overlapped and the sequential offload): at 1 MiB the overlap saved
nothing (0.7x to 1.3x, about 1.0x in the middle), at 4 MiB about a sixth (0.78x to 1.02x), at
16 MiB a few percent (0.78x to 1.09x); below this size the put and the projection run one after
the other."""


@dataclass(frozen=True, slots=True)
class OffloadResult:
    """One offload decision.

    Attributes:
        outcome: ``inline``, ``offloaded``, ``existing_reference``, ``rejected``, ``failed`` or
            ``bypass``.
        reason: Why, as a stable code.
        content: What enters the conversation: the inline value (text, or bytes for a small
            binary result), the stub, the withheld-notice, or the recovered segment unchanged.
            Never shown in the ``repr``.
        ref: The reference, for ``offloaded``, ``existing_reference`` and ``bypass``.
        stub: The rendered stub, for ``offloaded`` and ``existing_reference`` (none when the
            caller asked for none: ``render=False``).
        event: The decision's event: the very instance the reporter received.
        redacted: The credentials the ``redact`` policy replaced by markers before the
            result was stored or inlined (kind and line; offsets are the original bytes'),
            empty when none was. ``content`` is then the redacted copy, never the value.
    """

    outcome: OffloadOutcome
    reason: Reason
    content: str | bytes = field(repr=False)
    ref: Ref | None
    stub: Stub | None
    event: DecisionEvent
    redacted: tuple[SecretFinding, ...] = ()

    @property
    def text(self) -> str:
        """The content as text (a small binary inline result is described, not decoded)."""
        if isinstance(self.content, str):
            return self.content
        return f"[cargohold] inline binary result of {len(self.content):,} bytes"

    @property
    def note(self) -> str:
        """The note of what was redacted from an inline result, for the model: one line,
        ``[cargohold] credentials redacted from this result: <kinds and lines>`` (lines of
        :attr:`content`, the copy the model gets); empty when nothing was redacted or the
        result did not stay inline (a stub carries its own note). Never a value."""
        if self.outcome is not OffloadOutcome.INLINE or not self.redacted:
            return ""
        data = self.content
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        note = redaction_note(data, _NOTE_BYTES, stored=False)
        return f"{MARKER} {note}" if note else ""

    @property
    def model_text(self) -> str:
        """What a surface that hands on one string gives the model: :attr:`text`, then
        :attr:`note` as its own final line when there is one."""
        return with_note(self.text, self.note)

    def value_for(self, original: object) -> object:
        """What a surface hands on in place of the tool's ``original`` value.

        ``original`` itself when it stays inline unchanged; its redacted copy when credentials
        were redacted from an inline result: text as text with :attr:`note` as its final line,
        bytes as bytes, JSON data parsed back with no note (a key added to a caller's data could
        clash with its own, and a typed caller keeps its type; a surface that turns the data
        into a message string adds :attr:`note` there); otherwise the stub or notice text.
        """
        if self.outcome is not OffloadOutcome.INLINE:
            return self.text
        if not self.redacted:
            return original
        if isinstance(original, str):
            return self.model_text if isinstance(self.content, str) else self.content
        if isinstance(original, bytes | bytearray | memoryview):
            return self.content
        try:  # markers sit inside JSON strings and need no escaping: the document parses
            return json.loads(self.content)
        except ValueError:
            return self.content


_NOTE_BYTES = 512
"""The most a redaction note takes, marker included (every kind is named well within it)."""


def _note_bytes(data: bytes) -> int:
    """The bytes :func:`with_note` adds to redacted inline ``data`` (its line break included)."""
    note = redaction_note(data, _NOTE_BYTES, stored=False)
    if not note:
        return 0
    return len(f"{MARKER} {note}".encode()) + (1 if data and not data.endswith(b"\n") else 0)


def with_note(text: str, note: str) -> str:
    """``text`` with ``note`` as its own final line (``text`` itself when ``note`` is empty)."""
    if not note:
        return text
    if text and not text.endswith("\n"):
        text += "\n"
    return text + note


def encode_value(value: object, media_type: str | None) -> tuple[bytes, str, bool]:
    """Bytes, media type and textual-ness of a tool's value.

    Text is UTF-8; bytes are kept as they are; anything else must be JSON-serializable and is
    serialized compactly with its key order kept (so identical values give identical bytes).

    Raises:
        UsageError: a value that is not text, bytes or JSON-serializable, or one nested too
            deeply to serialize (the encoder recurses once per level).
    """
    if isinstance(value, str):
        text_type = media_type or "text/plain; charset=utf-8"
        return value.encode("utf-8", "surrogatepass"), text_type, True
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        textual = looks_textual(raw)
        return raw, media_type or _bytes_media_type(textual), textual
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UsageError("a tool result must be text, bytes or JSON-serializable data") from exc
    except RecursionError:  # a 100,000-deep dict: an error of the value, not of the process
        raise UsageError(
            "a tool result is nested too deeply to serialize as JSON: return it as text or "
            "bytes, or flatten it"
        ) from None
    return text.encode("utf-8", "surrogatepass"), media_type or "application/json", True


def _bytes_media_type(textual: bool) -> str:
    return "text/plain; charset=utf-8" if textual else "application/octet-stream"


def media_type_of(data: bytes, media_type: str | None = None) -> str:
    """The normalized media type :meth:`Offloader.offload` stores ``data`` (bytes) under: the
    one given, else the one the bytes prove, else plain text or ``application/octet-stream``."""
    if not _unnamed(media_type):
        return normalize_media_type(media_type)
    with CPU_BOUND:
        sniffed = sniff_media_type(data)
    return normalize_media_type(sniffed or media_type or _bytes_media_type(looks_textual(data)))


def _unnamed(media_type: str | None) -> bool:
    """No media type given, or only ``application/octet-stream`` ("some bytes"), which names
    nothing the bytes themselves cannot improve on."""
    return media_type is None or normalize_media_type(media_type) == DEFAULT_MEDIA_TYPE


class Offloader:
    """Decides, for each tool result, what enters the conversation.

    Args:
        store: The scoped store the bytes go to (a real store: there is no no-op).
        threshold: The heavy threshold in bytes (at or above: offloaded); when omitted, the
            configured one (``CARGOHOLD_HEAVY_THRESHOLD``, the configuration file, 32 KiB). At
            most 1 MiB, the largest read: no threshold turns offloading off.
        tool_thresholds: Per-tool thresholds, lower or higher than the global one (configured
            when omitted; at most 1 MiB each).
        secrets_policy: Per-tool handling of results that hold a credential: ``redact`` (the
            default: each credential replaced by a marker of its kind before the result is
            stored or inlined), ``reject`` (the whole result withheld) or ``mask`` (the exact
            bytes stored as ``restricted``, every credential masked in the stub and every
            read). The key ``"*"`` names the policy of every tool not named. When omitted, the
            configured one if the offloader reads its configuration (that is, when
            ``threshold``, ``tool_thresholds`` or ``budget`` is omitted too); otherwise every
            tool redacts.
        budget: The default stub budget (configured when omitted; ``balanced`` by default).
        reporter: Where decision events go; ``None`` reports nothing.
        read_tools: The read tool names the surface offers, named in every stub.
        ttl: Seconds to keep offloaded bytes; the store's default when ``None``.
        tool_classifications: Tools whose results are declared ``exact_required`` (a tool
            returning security evidence, a policy or a memory): verbatim excerpts only, never
            a compressor (configured when omitted, as ``secrets_policy``).

    Raises:
        ConfigError: a threshold that is not a positive integer of at most 1 MiB (the message
            names the setting and the bound).
    """

    def __init__(
        self,
        store: ScopedStore,
        *,
        threshold: int | None = None,
        tool_thresholds: Mapping[str, int] | None = None,
        secrets_policy: Mapping[str, str] | None = None,
        budget: Budget | str | None = None,
        reporter: Reporter | None = None,
        read_tools: ReadTools = DEFAULT_READ_TOOLS,
        ttl: float | None = None,
        tool_classifications: Mapping[str, str] | None = None,
    ) -> None:
        if not isinstance(store, ScopedStore):
            raise UsageError("an Offloader needs a cargohold.ScopedStore")
        if threshold is None or tool_thresholds is None or budget is None:
            from cargohold._config import load_settings  # what was not given is configured

            settings = load_settings()
            threshold = settings.heavy_threshold if threshold is None else threshold
            tool_thresholds = (
                settings.tool_thresholds if tool_thresholds is None else tool_thresholds
            )
            budget = settings.budget if budget is None else budget
            if secrets_policy is None:
                secrets_policy = settings.secrets_policy
            if tool_classifications is None:
                tool_classifications = settings.tool_classifications
        self._store = store
        self._threshold = _check_threshold("heavy_threshold", threshold)
        self._tool_thresholds = {
            k: _check_threshold(f"tool_thresholds.{k}", v) for k, v in tool_thresholds.items()
        }
        self._secrets_policy = _check_policies(secrets_policy or {})
        self._budget = Budget.parse(budget)
        self._reporter = reporter
        self._read_tools = read_tools
        self._ttl = ttl
        self._tool_classes = {
            tool: _declared_for(tool, value) for tool, value in (tool_classifications or {}).items()
        }
        # The bench sets it past any body on one offloader to time the sequential path beside
        # the overlapped one in the same run.
        self._overlap_bytes = OVERLAP_BYTES

    def __repr__(self) -> str:
        return f"Offloader(threshold={self._threshold}, budget={self._budget.label})"

    @property
    def store(self) -> ScopedStore:
        """The scoped store this offloader writes to."""
        return self._store

    @property
    def reporter(self) -> Reporter | None:
        """Where this offloader's decision events go."""
        return self._reporter

    @property
    def read_tools(self) -> ReadTools:
        """The read tool names its stubs advertise."""
        return self._read_tools

    def threshold_for(self, tool: str | None) -> int:
        """The heavy threshold that applies to ``tool``'s results."""
        if tool is not None and tool in self._tool_thresholds:
            return self._tool_thresholds[tool]
        return self._threshold

    @property
    def secrets_policy(self) -> dict[str, str]:
        """The per-tool secrets policies (a copy)."""
        return dict(self._secrets_policy)

    @property
    def budget(self) -> Budget:
        """The default stub budget."""
        return self._budget

    @property
    def ttl(self) -> float | None:
        """Seconds offloaded bytes are kept; ``None`` for the store's default."""
        return self._ttl

    @property
    def tool_classifications(self) -> dict[str, str]:
        """The per-tool declared classes (a copy): tool name -> ``exact_required``."""
        return {tool: value.value for tool, value in self._tool_classes.items()}

    def classification_for(self, tool: str | None) -> ProjectionClass | None:
        """The class ``tool``'s results are declared (``exact_required``), or ``None`` when
        their class is detected from their bytes."""
        return None if tool is None else self._tool_classes.get(tool)

    def secrets_policy_for(self, tool: str | None) -> str:
        """``redact``, ``reject`` or ``mask``: what becomes of ``tool``'s results that hold a
        credential (its own policy, else the ``"*"`` entry's, else ``redact``)."""
        return policy_for(self._secrets_policy, tool)

    def offload(
        self,
        value: object,
        *,
        tool: str | None = None,
        media_type: str | None = None,
        sensitivity: Sensitivity | str = Sensitivity.INTERNAL,
        complete: bool = True,
        failed: bool = False,
        budget: Budget | str | None = None,
        classification: ProjectionClass | str | None = None,
        render: bool = True,
    ) -> OffloadResult:
        """Decide what of ``value`` enters the conversation.

        Args:
            value: The tool's result: text, bytes, or JSON-serializable data.
            tool: The producing tool's name (per-tool threshold, stub, event).
            media_type: A media type hint. When omitted (or ``application/octet-stream``),
                text and bytes are stored under the type their bytes prove (PNG, PDF, gzip,
                JSON... by :func:`cargohold.projection.sniff_media_type`), else plain text or
                ``application/octet-stream``; other values as ``application/json``.
            sensitivity: ``public``, ``internal`` or ``restricted``; the refused kinds
                (``secret``, ``credential``, ``raw_auth``) give ``rejected`` at any size.
            complete: ``False`` when the tool truncated its own output.
            failed: The call failed or was cancelled: its preview is never ``compressible``.
            budget: This stub's budget, instead of the offloader's default.
            classification: ``exact_required`` to declare the result exact (security
                evidence, a policy or authority payload, a memory or context response): its
                stub shows verbatim excerpts only, never a structural summary, and a
                compressor never sees it. When omitted, the tool's configured class
                (``tool_classifications``), else the class detected from the bytes. A
                declaration only makes a result stricter: binary stays ``unsupported``.
            render: ``False`` to store (or withhold) under the same rules but make no stub,
                for a caller that renders its own view of the stored bytes (the working
                context): an offloaded result's ``stub`` is then ``None``, its content the bare
                reference, and its event counts no context bytes. That caller must mask the
                credentials a ``mask`` policy let through (:func:`cargohold.mask_secrets`).

        Raises:
            UsageError: a value that is not text, bytes or JSON-serializable, or is nested too
                deeply to serialize; a bad media type; an unknown sensitivity; a declared
                classification other than ``exact_required``.
        """
        declared = _declared(classification) or self.classification_for(tool)
        if isinstance(value, str) and value.startswith(SEGMENT_OPEN):
            # Only a segment made for this store passes (its HMAC under the store's key): a
            # tool that wraps raw text in a marker of its own is offloaded like any output.
            key = self._key()
            segment = None if key is None else parse_segment(value, key=key)
            if segment is not None:
                return self._bypass(value, segment.ref, segment.budget, tool)
        data, media, textual = encode_value(value, media_type)
        media = normalize_media_type(media)
        size = len(data)
        limit = self.threshold_for(tool)
        family = family_of("text" if textual else "binary", media)
        try:
            sensitivity = Sensitivity(sensitivity)
        except ValueError:
            raise UsageError(
                "sensitivity must be one of: " + ", ".join(s.value for s in Sensitivity)
            ) from None
        if not sensitivity.storable:  # never stored, and never inline either
            refused = SensitivityRefusedError("refused sensitivity", reason="sensitivity")
            return self._withheld(refused, size, limit, media, tool, family)
        # A body from the overlap size on is hashed beside the credential scan: RE2 releases the
        # GIL while it scans, as hashing does (no CPU_BOUND lock here), and the put, started
        # beside the projection, then has no hashing left to wait for the GIL in.
        ahead = Prehash(data) if size >= self._overlap_bytes and type(data) is bytes else None
        findings = find_secrets(data)
        redacted: tuple[SecretFinding, ...] = ()
        if findings:
            policy = self.secrets_policy_for(tool)
            if policy == "reject":
                return self._credential_rejected(findings, size, limit, media, tool, family)
            if policy == "mask":
                sensitivity = Sensitivity.RESTRICTED
            else:  # redact: from here on the result is its redacted copy, for every decision
                # Binary bytes keep their length (a format's offsets depend on it); text gets
                # compact markers, its line breaks kept.
                data = redact_secrets(data, findings, keep_length=not textual)
                redacted, findings = tuple(findings), []
        if not findings and len(data) < limit:
            inline: str | bytes = data
            if isinstance(value, str) and not redacted:
                inline = value
            elif not isinstance(value, bytes | bytearray | memoryview):
                inline = data.decode("utf-8", "surrogatepass")  # the text, or serialized JSON
            reason = Reason.CREDENTIAL_REDACTED if redacted else Reason.BELOW_THRESHOLD
            # What enters the context as OffloadResult.model_text carries it: the body, and the
            # note of what was redacted as its own final line (a surface that hands JSON data
            # back as data, value_for, adds no note: the count is the text's, a few bytes over).
            context = len(data) + (_note_bytes(data) if redacted else 0)
            event = self._event(
                OffloadOutcome.INLINE,
                reason,
                size,
                limit,
                None,
                tool,
                context_bytes=context,
                tokens=estimate_tokens(context, family),
            )
            return OffloadResult(OffloadOutcome.INLINE, reason, inline, None, None, event, redacted)
        with CPU_BOUND:  # a parse of the body at most, as the projection's
            if _unnamed(media_type) and isinstance(value, str | bytes | bytearray | memoryview):
                # What the bytes prove (a PNG, a PDF, JSON text), so the record says what the
                # stub says; the defaults stand when they leave doubt.
                media = normalize_media_type(sniff_media_type(data) or media)
            # Kind and class are decided before the put, so the record carries them.
            found = _detection(data, media, failed, declared)
        try:
            key = self._store.marker_key()  # read once per store; unreachable: degraded
        except (RejectedError, StoreError) as exc:
            return self._withheld(exc, size, limit, media, tool, family)

        known = ahead if ahead is not None and ahead.holds(data) else None  # not redacted since

        def put() -> PutResult:
            with contextlib.nullcontext() if known is None else known:
                return self._store.put(
                    data,
                    media_type=media,
                    kind=_kind_label(found),
                    tool=tool,
                    ttl=self._ttl,
                    sensitivity=sensitivity,
                    complete=complete,
                    classification=found.classification.value,
                )

        # The stub is made of a masked copy when the bytes hold credentials (same length and
        # lines, so the stub's facts stay those of the real bytes, whose digest the reference
        # remains).
        shown = mask_secrets(data, findings) if findings and render else data

        def render_for(ref: Ref, media_type: str, detection: Detection) -> Stub:
            with CPU_BOUND:
                return render_stub(
                    shown,
                    ref,
                    media_type=media_type,
                    tool=tool,
                    complete=complete,
                    budget=self._budget if budget is None else Budget.parse(budget),
                    failed=failed,
                    read_tools=self._read_tools,
                    key=key,
                    detection=detection,
                )

        early: Stub | None = None
        try:
            # Binary bytes get a few lines of facts and no projection worth overlapping: the
            # second hash and the thread would cost more than it.
            if render and size >= self._overlap_bytes and found.kind != "binary":
                ref = known.ref() if known is not None else Ref.of(data)
                stored, early = _put_while_rendering(put, lambda: render_for(ref, media, found))
            else:
                stored = put()
        except (RejectedError, StoreError) as exc:
            return self._withheld(exc, size, limit, media, tool, family)
        if stored.record.media_type != media:  # the first write's record: judged as it says
            with CPU_BOUND:
                found = _detection(data, stored.record.media_type, failed, declared)
            early = None
        outcome = OffloadOutcome.EXISTING_REFERENCE if stored.existing else OffloadOutcome.OFFLOADED
        if redacted:  # the outcome says whether these (redacted) bytes were stored before
            reason = Reason.CREDENTIAL_REDACTED
        elif stored.existing:
            reason = Reason.IDENTICAL_CONTENT
        elif findings:
            reason = Reason.CREDENTIAL_MASKED
        else:
            reason = Reason.AT_OR_ABOVE_THRESHOLD
        if not render:
            event = self._event(
                outcome,
                reason,
                size,
                limit,
                str(stored.ref),
                tool,
                context_bytes=0,
                tokens=0,
                kind=found.kind,
            )
            return OffloadResult(
                outcome, reason, str(stored.ref), stored.ref, None, event, redacted
            )
        # The stub names the reference only once the put has returned: the bytes are durable.
        # One made while the put ran stands when the put confirms what it was made of (the
        # reference, the media type); otherwise it is made again, as sequentially.
        if early is not None and early.ref == stored.ref:
            stub = early
        else:
            stub = render_for(stored.ref, stored.record.media_type, found)
        event = self._event(
            outcome,
            reason,
            size,
            limit,
            str(stored.ref),
            tool,
            context_bytes=stub.size_bytes,
            tokens=stub.estimated_tokens,
            kind=found.kind,
        )
        return OffloadResult(outcome, reason, stub.text, stored.ref, stub, event, redacted)

    def refuse_oversized(
        self,
        exc: LimitExceededError,
        size: int | None,
        *,
        tool: str | None = None,
        media_type: str = "application/octet-stream",
    ) -> OffloadResult:
        """The decision for a result over the per-artifact limit that was not read whole.

        A surface reading a file or a stream stops one byte past ``max_artifact_bytes``, so the
        bytes never reach :meth:`offload`; the result is refused as a put of it would be:
        ``rejected`` (reason from ``exc``, ``artifact_too_large``), one event, and a notice
        naming the real size, the limit and the setting, never the body.

        Args:
            exc: The refusal, from ``Limits.check_artifact`` of the real size (its ``setting``
                and ``limit`` name what raises it).
            size: The real size (a regular file's, from its metadata), or ``None`` when only
                "more than the limit" is known (a stream, stopped past the limit).
            tool: The producing tool's name.
            media_type: What the bytes read are.
        """
        limit = exc.limit if exc.limit is not None else 0
        observed = size if size is not None else limit + 1  # what was read: one past the limit
        media = normalize_media_type(media_type)
        return self._withheld(
            exc,
            observed,
            self.threshold_for(tool),
            media,
            tool,
            family_of("binary", media),
            known=size is not None,
        )

    def _withheld(
        self,
        exc: CargoholdError,
        size: int,
        limit: int,
        media_type: str,
        tool: str | None,
        family: Family,
        *,
        known: bool = True,
    ) -> OffloadResult:
        if isinstance(exc, SensitivityRefusedError):
            outcome, reason = OffloadOutcome.REJECTED, Reason.SENSITIVITY
        elif isinstance(exc, LimitExceededError):
            outcome, reason = (
                OffloadOutcome.REJECTED,
                LIMIT_REASONS.get(exc.reason, Reason.ARTIFACT_TOO_LARGE),
            )
        elif isinstance(exc, RejectedError):  # a backend's own refusal: still a refusal
            outcome, reason = OffloadOutcome.REJECTED, Reason.STORE_ERROR
        elif isinstance(exc, StoreUnavailableError):
            outcome, reason = OffloadOutcome.FAILED, Reason.STORE_UNAVAILABLE
        else:
            outcome, reason = OffloadOutcome.FAILED, Reason.STORE_ERROR
        if isinstance(exc, LimitExceededError) and exc.setting and exc.limit is not None:
            notice = _limit_notice(
                exc, exc.setting, exc.limit, reason, size if known else None, media_type, tool
            )
        else:
            notice = render_notice(
                outcome=outcome.value,
                reason=reason.value,
                size=size,
                media_type=media_type,
                tool=tool,
            )
        event = self._event(
            outcome,
            reason,
            size,
            limit,
            None,
            tool,
            context_bytes=len(notice.encode()),
            tokens=estimate_tokens(size, family),
        )
        return OffloadResult(outcome, reason, notice, None, None, event)

    def _credential_rejected(
        self,
        findings: list[SecretFinding],
        size: int,
        limit: int,
        media_type: str,
        tool: str | None,
        family: Family,
    ) -> OffloadResult:
        notice = _credential_notice(findings, size, media_type, tool)
        event = self._event(
            OffloadOutcome.REJECTED,
            Reason.CREDENTIAL_DETECTED,
            size,
            limit,
            None,
            tool,
            context_bytes=len(notice.encode()),
            tokens=estimate_tokens(size, family),
        )
        return OffloadResult(
            OffloadOutcome.REJECTED, Reason.CREDENTIAL_DETECTED, notice, None, None, event
        )

    def _key(self) -> bytes | None:
        """The store's marker key; ``None`` when the store cannot give it (no marker is then
        trusted: the value is judged as content)."""
        try:
            return self._store.marker_key()
        except StoreError:
            return None

    def _bypass(self, segment: str, ref: Ref, budget: int, tool: str | None) -> OffloadResult:
        size = len(segment.encode("utf-8", "surrogatepass"))
        event = self._event(
            OffloadOutcome.BYPASS,
            Reason.RECOVERED_SEGMENT,
            size,
            budget,
            str(ref),
            tool,
            content_kind=ContentKind.RECOVERED_CONTEXT,
            context_bytes=size,
            tokens=estimate_tokens(size),
        )
        return OffloadResult(
            OffloadOutcome.BYPASS, Reason.RECOVERED_SEGMENT, segment, ref, None, event
        )

    def _event(
        self,
        outcome: OffloadOutcome,
        reason: Reason,
        observed: int,
        limit: int,
        ref: str | None,
        tool: str | None,
        *,
        content_kind: ContentKind = ContentKind.TOOL_RESULT,
        context_bytes: int,
        tokens: int,
        kind: str | None = None,
    ) -> DecisionEvent:
        return record(
            self._reporter,
            Operation.OFFLOAD,
            outcome,
            content_kind,
            reason,
            observed_bytes=observed,
            limit_bytes=limit,
            ref=ref,
            tool=tool,
            context_bytes=context_bytes,
            estimated_tokens=tokens,
            kind=kind,
        )


def _put_while_rendering(
    put: Callable[[], PutResult], render: Callable[[], Stub]
) -> tuple[PutResult, Stub | None]:
    """``put()`` on a thread of its own while ``render()`` runs on this one; the put's result
    and the stub, returned only once the put has returned (the bytes are durable).

    The put decides first, as it would run first sequentially: when it raises, its exception
    is raised and the stub (which names bytes that are not stored) is dropped; a render that
    raised is raised only after a put that returned. The fsync, the hashing and the store's
    I/O release the GIL, so the two overlap even though the projection is pure Python. A
    thread that cannot be started leaves the two to run one after the other.
    """
    outcome: list[PutResult | BaseException] = []

    def run() -> None:
        try:
            outcome.append(put())
        except BaseException as exc:  # handed to the caller's thread, raised there
            outcome.append(exc)

    # The put sees the caller's context variables (a telemetry span, a request's settings).
    worker = threading.Thread(
        target=contextvars.copy_context().run, args=(run,), name="cargohold-put"
    )
    try:
        worker.start()
    except RuntimeError:  # no thread to be had: sequential
        return put(), None
    try:
        stub: Stub | None = render()
    except Exception:
        worker.join()
        stored = outcome[0]
        if isinstance(stored, BaseException):
            raise stored from None
        raise
    worker.join()
    stored = outcome[0]
    if isinstance(stored, BaseException):
        raise stored
    return stored, stub


def _declared(classification: ProjectionClass | str | None) -> ProjectionClass | None:
    """A caller's declared class: ``exact_required`` or none.

    Raises:
        UsageError: any other class (a class is decided fail-safe; a declaration may only
            make a result stricter, never compressible).
    """
    if classification is None:
        return None
    if classification != ProjectionClass.EXACT_REQUIRED.value:
        raise UsageError("a declared classification can only be exact_required")
    return ProjectionClass.EXACT_REQUIRED


def _declared_for(tool: object, value: object) -> ProjectionClass:
    if not isinstance(tool, str) or value != ProjectionClass.EXACT_REQUIRED.value:
        raise UsageError('tool_classifications maps tool names to "exact_required"')
    return ProjectionClass.EXACT_REQUIRED


def _kind_label(found: Detection) -> str:
    """The kind as the stub states it (``json``, ``code (python)``, ``binary (png)``): what
    ``artifact_info`` and ``cargohold ls`` show of the record."""
    return f"{found.kind} ({found.detail})" if found.detail else found.kind


def _detection(
    data: bytes, media_type: str, failed: bool, declared: ProjectionClass | None
) -> Detection:
    """The kind and class of the bytes, a declared ``exact_required`` over ``compressible``
    (``unsupported`` binary keeps its class: its bytes have no verbatim excerpt)."""
    found = detect(data, media_type=media_type, failed=failed)
    if declared is not None and found.classification is ProjectionClass.COMPRESSIBLE:
        return Detection(found.kind, declared, found.detail)
    return found


_QUOTAS = {
    "artifact_too_large": ("the limit per artifact", "bytes"),
    "session_bytes": ("this session's quota", "bytes"),
    "session_objects": ("this session's quota", "artifacts"),
    "store_bytes": ("the store's quota", "bytes"),
    "store_objects": ("the store's quota", "artifacts"),
    "tenant_bytes": ("this tenant's quota", "bytes"),
    "tenant_objects": ("this tenant's quota", "artifacts"),
}
"""What each limit is, for the notice: its name and unit."""


def _limit_notice(
    exc: LimitExceededError,
    setting: str,
    limit: int,
    reason: Reason,
    size: int | None,
    media_type: str,
    tool: str | None,
) -> str:
    """The bounded notice for a result refused by a store limit: the result's real size (or
    "more than" the limit, for a stream stopped past it), the limit, and the setting that raises
    it (never "retry later": the same call meets the same limit). Well under 1 KiB. The limit is
    described by the store's own reason (``exc``)."""
    source = f"tool {tool}" if tool else "a tool"
    amount = f"{size:,} bytes" if size is not None else f"more than {limit:,} bytes"
    what, unit = _QUOTAS.get(exc.reason, ("a store limit", "bytes"))
    advice = (
        "Narrow the call so that it returns less"
        if exc.reason == "artifact_too_large"
        else "Let older artifacts expire (`cargohold gc` removes expired ones)"
    )
    return (
        f"{MARKER} withheld (rejected: {reason.value}): {source} returned {amount} of "
        f"{media_type}, over {what} of {limit:,} {unit} ({setting}); the raw output is not "
        "in this context.\n"
        f"Nothing can be read back from this result. {advice}, or raise {setting} "
        f"(cargohold.toml or CARGOHOLD_{setting.upper()})."
    )


def _credential_notice(
    findings: list[SecretFinding], size: int, media_type: str, tool: str | None
) -> str:
    """The bounded notice for a result withheld because it holds credentials.

    Kinds and line numbers (at most twenty), never a value; well under 1 KiB.
    """
    source = f"tool {tool}" if tool else "a tool"
    return (
        f"{MARKER} withheld (rejected: {Reason.CREDENTIAL_DETECTED.value}): {source} returned "
        f"{size:,} bytes of {media_type} holding credentials: {describe_findings(findings)}. "
        "Nothing was stored and the raw output is not in this context.\n"
        "Nothing can be read back from this result. Narrow the call so that it returns no "
        "credentials."
    )


def _check_policies(policies: Mapping[str, str]) -> dict[str, str]:
    from cargohold._config import SECRETS_POLICIES

    checked: dict[str, str] = {}
    for tool, policy in policies.items():
        if not isinstance(tool, str) or policy not in SECRETS_POLICIES:
            raise UsageError('a secrets policy maps tool names to "redact", "reject" or "mask"')
        checked[tool] = policy
    return checked


def _check_threshold(setting: str, value: int) -> int:
    """A positive integer of at most 1 MiB (there is no threshold that turns offloading off).

    Raises:
        ConfigError: out of range, naming ``setting`` and the bound.
    """
    from cargohold._config import check_threshold

    return check_threshold(setting, value)


__all__ = ["HEAVY_THRESHOLD", "OffloadResult", "Offloader", "encode_value"]
