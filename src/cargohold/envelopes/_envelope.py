"""Role packets: built from an authority, serialized canonically, checked for freshness.

A packet document is canonical JSON (sorted keys, no insignificant whitespace, UTF-8, integers
and strings only, no timestamp, nothing random)::

    {"digest":"sha256:<hex of the canonical packet bytes>","packet":{...}}

so the same authority, role, decision and subject give the same bytes in any process. A check
never repairs a packet: it rebuilds the projection from the current authority and compares.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from cargohold._errors import UsageError
from cargohold._records import PutResult
from cargohold._ref import Ref, is_ref
from cargohold.envelopes._authority import (
    ID_PATTERN,
    Authority,
    AuthorityError,
    AuthoritySource,
    check_path,
    split_record_key,
)
from cargohold.envelopes._ownership import answer
from cargohold.envelopes._project import Projection, Prose, project
from cargohold.envelopes._source import nested_deeper_than
from cargohold.envelopes._types import (
    DECISIONS,
    Binding,
    BindingChange,
    BindingValue,
    BoundaryConflict,
    ContextNotReadyError,
    Decision,
    EnvelopeError,
    Missing,
    Outcome,
    Ownership,
    Role,
)

FORMAT = "cargohold.envelope/2"
DEFAULT_BUDGET = 16 * 1024
"""The default context budget of a packet document, in bytes."""
DEFAULT_FACT_LIMIT = 2 * 1024
"""A text value longer than this (UTF-8 bytes) travels as an ``artifact://`` reference."""
MIN_BUDGET = 1024
MAX_BUDGET = 1024 * 1024
MIN_FACT_LIMIT = 128
MAX_PACKET_BYTES = 4 * MAX_BUDGET
"""The largest packet document :meth:`Envelope.parse` reads."""
MAX_PACKET_DEPTH = 100
"""The deepest nesting of objects and arrays a packet document may have (the document itself is
level 1). A packet cargohold builds nests under ten; a deeper one is hand-made, and is refused
before any recursive walk of it (the digest's serialization, a check's comparison), so no depth
escapes as a RecursionError. The same bound as ``load_facts``' walk of the facts."""

TEXT_MEDIA_TYPE = "text/plain; charset=utf-8"
JSON_MEDIA_TYPE = "application/json"
ARTIFACT_KIND = "envelope_fact"
ARTIFACT_TOOL = "cargohold-envelope"

_ID = re.compile(ID_PATTERN)
# One refusal whether the parser or the walk met the depth: how deep a recursive parser gets
# depends on the caller's stack, the refusal does not.
_TOO_DEEP = (
    f"not a packet document: arrays or objects nest deeper than {MAX_PACKET_DEPTH} levels "
    "(a packet cargohold builds nests a few)"
)
_PACKET_KEYS = frozenset(
    {"format", "role", "decision", "subject", "budget", "fact_limit", "facts", "bindings"}
)
# Outcomes of a batch, most severe first: the exit status of a batch is its most severe one.
SEVERITY = (
    Outcome.CONTEXT_CONFLICT,
    Outcome.CONTEXT_INSUFFICIENT,
    Outcome.OVER_BUDGET,
    Outcome.CONTEXT_STALE,
    Outcome.READY,
)


class FactStore(Protocol):
    """Where large facts go: :class:`cargohold.ScopedStore` is one."""

    def put(
        self,
        data: bytes,
        *,
        media_type: str | None = None,
        kind: str | None = None,
        tool: str | None = None,
    ) -> PutResult:
        """Store ``data`` and return its reference."""
        ...


_Offload = Callable[[bytes, str], Ref]


def canonical_json(value: Any) -> bytes:
    """The canonical bytes of a JSON value: sorted keys, no whitespace, UTF-8, no NaN.

    Raises:
        AuthorityError: a text holds a lone surrogate, which UTF-8 cannot carry.
    """
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise AuthorityError("the authority holds text that is not valid Unicode") from None


def _digest(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def _stub(ref: Ref, size: int, media_type: str) -> dict[str, Any]:
    return {"artifact": str(ref), "bytes": size, "media_type": media_type}


def worst(outcomes: Iterable[Outcome]) -> Outcome:
    """The most severe of ``outcomes`` (``ready`` for none)."""
    found = set(outcomes)
    return next((o for o in SEVERITY if o in found), Outcome.READY)


# -- the envelope ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Envelope:
    """A role packet: derived, disposable, deterministic. Equal when their bytes are equal.

    Attributes:
        data: The canonical document bytes (what ``cargohold envelope build`` prints).
        digest: ``sha256:<hex>`` of the canonical packet bytes.
        role: The role it was built for.
        decision: The decision it authorizes.
        task: The subject task (``None`` for a coordinator packet).
        milestone: The subject milestone of a coordinator packet.
        budget: The budget the document fits, in bytes.
        fact_limit: Text values longer than this travel as references.
        facts: Fact name -> fact, as JSON values.
        bindings: The freshness bindings, ordered by ``(kind, id, field)``.
    """

    data: bytes = field(repr=False)
    digest: str
    role: Role
    decision: Decision
    task: str | None
    milestone: str | None
    budget: int
    fact_limit: int
    facts: Mapping[str, Any] = field(repr=False)
    bindings: tuple[Binding, ...] = field(repr=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Envelope) and other.data == self.data

    def __hash__(self) -> int:
        return hash(self.data)

    @property
    def size(self) -> int:
        """The document's size in bytes."""
        return len(self.data)

    @classmethod
    def parse(cls, data: bytes | str) -> Envelope:
        """Read a packet document and verify its digest.

        Any JSON layout is accepted; the digest is checked against the canonical bytes of the
        packet, so an edited packet is refused, never silently accepted or repaired.

        Raises:
            EnvelopeError: not a packet document, an unknown format, a digest mismatch, or
                arrays and objects nested deeper than :data:`MAX_PACKET_DEPTH` levels (at any
                depth: one nested past what the parser recurses is this error too).
        """
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
        if len(raw) > MAX_PACKET_BYTES:
            raise EnvelopeError(f"a packet document is at most {MAX_PACKET_BYTES} bytes")
        try:
            document = json.loads(raw.decode("utf-8"), parse_float=_no_float)
        except (UnicodeDecodeError, json.JSONDecodeError, ValueError):
            raise EnvelopeError("not a packet document: expected canonical JSON") from None
        except RecursionError:  # the decoder recurses once per nested array or object
            raise EnvelopeError(_TOO_DEEP) from None
        return cls.from_document(document)

    @classmethod
    def from_document(cls, document: object) -> Envelope:
        """A packet from an already decoded document (``{"digest": ..., "packet": ...}``).

        Raises:
            EnvelopeError: as :meth:`parse` (a document that contains itself is nested too
                deep).
        """
        if not isinstance(document, dict) or set(document) != {"digest", "packet"}:
            raise EnvelopeError("not a packet document: expected digest and packet")
        packet = document["packet"]
        if not isinstance(packet, dict):
            raise EnvelopeError("not a packet document: packet is an object")
        if nested_deeper_than(document, MAX_PACKET_DEPTH):
            raise EnvelopeError(_TOO_DEEP)
        try:
            body = canonical_json(packet)
        except AuthorityError:
            raise EnvelopeError("not a packet document: text that is not valid Unicode") from None
        except RecursionError:  # within the bound, from a caller already deep in its stack
            raise EnvelopeError(_TOO_DEEP) from None
        if document["digest"] != _digest(body):
            raise EnvelopeError("the packet does not match its digest: discard it and rebuild")
        return _from_packet(packet, body)

    def ownership_of(self, path: str) -> Ownership:
        """What this packet says about touching ``path`` (a proposal's file or directory).

        ``reserved`` when an allocation of another task certainly overlaps ``path``; else
        ``not_represented`` when the packet cannot see everything that overlaps it (outside
        the task's scope, or inside a summarised prefix); else ``unresolved`` when an
        explicitly unresolved allocation overlaps it; else ``owned`` when the deepest
        allocation covering it is this task's; else ``not_represented``. Only ``owned`` ever
        permits a write. A packet's ``coverage`` entries are answered by this same rule.

        Raises:
            AuthorityError: ``path`` is not a normal repository path.
        """
        check_path(path)
        return answer(self.facts.get("ownership"), path)

    def as_document(self) -> dict[str, Any]:
        """The document as JSON values (``{"digest": ..., "packet": ...}``)."""
        document: dict[str, Any] = json.loads(self.data)
        return document


def _no_float(text: str) -> Any:
    raise ValueError("a packet holds no floating-point number")


def _from_packet(packet: dict[str, Any], body: bytes) -> Envelope:
    def bad(what: str) -> EnvelopeError:
        return EnvelopeError(f"not a packet of this version: {what}")

    if set(packet) != _PACKET_KEYS or packet["format"] != FORMAT:
        raise bad(f"expected format {FORMAT}")
    try:
        role = Role(packet["role"])
        decision = Decision(packet["decision"])
    except ValueError:
        raise bad("unknown role or decision") from None
    if decision not in DECISIONS[role]:
        raise bad("a decision this role does not take")
    subject = packet["subject"]
    key = "milestone" if role is Role.COORDINATOR else "task"
    if (
        not isinstance(subject, dict)
        or set(subject) != {key}
        or not isinstance(subject[key], str)
        or _ID.fullmatch(subject[key]) is None
    ):
        raise bad(f"the subject is one {key} id")
    budget, fact_limit = packet["budget"], packet["fact_limit"]
    for value in (budget, fact_limit):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad("budget and fact_limit are non-negative integers")
    if not isinstance(packet["facts"], dict) or not isinstance(packet["bindings"], list):
        raise bad("facts is an object, bindings a list")
    bindings = []
    for item in packet["bindings"]:
        if not isinstance(item, list) or len(item) != 3:
            raise bad("a binding is [record, field, value]")
        record, name, value = item
        kind, record_id = split_record_key(record) if isinstance(record, str) else ("", "")
        if (
            not kind
            or _ID.fullmatch(record_id) is None
            or not isinstance(name, str)
            or isinstance(value, bool)
            or not isinstance(value, str | int)
        ):
            raise bad("a binding names kind:id, a field, and a string or integer value")
        bindings.append(Binding(kind, record_id, name, value))
    digest = _digest(body)
    document = b'{"digest":"' + digest.encode() + b'","packet":' + body + b"}"
    return Envelope(
        data=document,
        digest=digest,
        role=role,
        decision=decision,
        task=subject.get("task"),
        milestone=subject.get("milestone"),
        budget=budget,
        fact_limit=fact_limit,
        facts=packet["facts"],
        bindings=tuple(bindings),
    )


# -- results ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BuildResult:
    """The result of a build: a packet only when the outcome is ``ready``.

    Attributes:
        outcome: ``ready``, ``context-insufficient``, ``context-conflict`` or ``over-budget``.
        envelope: The packet (``None`` unless ready).
        role: The role asked for.
        decision: The decision the packet authorizes (or would have).
        subject: ``{"task": id}`` or ``{"milestone": id}``.
        missing: The required facts the authority lacks (``context-insufficient``).
        conflicts: The boundaries that contradict each other (``context-conflict``).
        reason: For ``over-budget``: ``needs_store`` (a text must travel as a reference and no
            store was given) or ``too_large`` (the packet does not fit even with references).
        size: For ``over-budget``, the size the document would have had.
        budget: The budget asked for.
    """

    outcome: Outcome
    envelope: Envelope | None
    role: Role
    decision: Decision
    subject: Mapping[str, str]
    missing: tuple[Missing, ...] = ()
    conflicts: tuple[BoundaryConflict, ...] = ()
    reason: str | None = None
    size: int | None = None
    budget: int = DEFAULT_BUDGET

    @property
    def ready(self) -> bool:
        """Whether a packet was built."""
        return self.outcome is Outcome.READY

    def as_dict(self) -> dict[str, Any]:
        """The JSON form ``cargohold envelope build --json`` prints (the packet as JSON)."""
        return {
            "outcome": self.outcome.value,
            "role": self.role.value,
            "decision": self.decision.value,
            "subject": dict(self.subject),
            "digest": None if self.envelope is None else self.envelope.digest,
            "size": self.envelope.size if self.envelope is not None else self.size,
            "budget": self.budget,
            "reason": self.reason,
            "missing": [m.as_dict() for m in self.missing],
            "conflicts": [c.as_dict() for c in self.conflicts],
            "packet": None if self.envelope is None else self.envelope.as_document(),
        }


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The freshness of a packet against the current authority.

    Attributes:
        outcome: ``ready``, ``context-stale``, ``context-insufficient`` or
            ``context-conflict``.
        digest: The checked packet's digest.
        changed: For ``context-stale``: the bindings that no longer hold.
        conflicts: For ``context-stale`` with every binding unchanged: the facts whose values
            changed anyway (an authority that changed a field without its revision).
        missing: For ``context-insufficient``: the required facts the authority lacks now.
        boundary_conflicts: For ``context-conflict``: the boundaries that now contradict each
            other over a path the decision rests on.
        role: The packet's role.
        decision: The decision the packet authorizes.
        subject: The packet's subject.
    """

    outcome: Outcome
    digest: str
    changed: tuple[BindingChange, ...] = ()
    conflicts: tuple[str, ...] = ()
    missing: tuple[Missing, ...] = ()
    boundary_conflicts: tuple[BoundaryConflict, ...] = ()
    role: Role | None = None
    decision: Decision | None = None
    subject: Mapping[str, str] = field(default_factory=dict)

    @property
    def ready(self) -> bool:
        """Whether the packet may be used for its decision."""
        return self.outcome is Outcome.READY

    def raise_for_outcome(self) -> None:
        """Raise :class:`ContextNotReadyError` unless ``ready``."""
        if not self.ready:
            raise ContextNotReadyError(
                f"the packet is {self.outcome.value}: it cannot authorize a decision; "
                "discard it and rebuild it from the current authority",
                outcome=self.outcome,
            )

    def as_dict(self) -> dict[str, Any]:
        """The JSON form ``cargohold envelope check --json`` prints."""
        return {
            "outcome": self.outcome.value,
            "digest": self.digest,
            "role": None if self.role is None else self.role.value,
            "decision": None if self.decision is None else self.decision.value,
            "subject": dict(self.subject),
            "changed": [
                {"record": c.record, "field": c.field, "before": c.before, "after": c.after}
                for c in self.changed
            ],
            "conflicts": list(self.conflicts),
            "missing": [m.as_dict() for m in self.missing],
            "boundary_conflicts": [c.as_dict() for c in self.boundary_conflicts],
        }


# -- building --------------------------------------------------------------------------------


def _check_limits(budget: int, fact_limit: int) -> None:
    for name, value, low, high in (
        ("budget", budget, MIN_BUDGET, MAX_BUDGET),
        ("fact_limit", fact_limit, MIN_FACT_LIMIT, MAX_BUDGET),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise UsageError(f"{name} is an integer from {low} to {high} bytes")


_Site = tuple[str | int, ...]


def _prose_sites(value: Any, where: _Site = ()) -> list[tuple[_Site, Prose]]:
    """Where the movable prose of a facts tree is, in document order."""
    if isinstance(value, Prose):
        return [(where, value)]
    if isinstance(value, dict):
        return [site for key in sorted(value) for site in _prose_sites(value[key], (*where, key))]
    if isinstance(value, list):
        return [site for i, item in enumerate(value) for site in _prose_sites(item, (*where, i))]
    return []


def _put_at(root: Any, where: _Site, new: Any) -> None:
    target = root
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = new


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value  # str (Prose stays Prose), int


def _document(packet: dict[str, Any]) -> bytes:
    body = canonical_json(packet)
    return b'{"digest":"' + _digest(body).encode() + b'","packet":' + body + b"}"


@dataclass(slots=True)
class _Assembly:
    outcome: Outcome
    packet: dict[str, Any]
    reason: str | None = None
    size: int = 0


def _assemble(
    projection: Projection,
    role: Role,
    budget: int,
    fact_limit: int,
    offload: _Offload | None,
) -> _Assembly:
    """Serialize a complete projection within ``budget``.

    Only prose moves out, as ``artifact://`` references: first every text longer than
    ``fact_limit``, then, while the document is over budget, the longest remaining texts
    (ties in document order). Structure (paths, ids, ownership values, states, hashes,
    bindings) never leaves the packet: a packet whose structure alone is over budget is
    ``too_large``.
    """
    facts = _copy(projection.facts)
    packet: dict[str, Any] = {
        "format": FORMAT,
        "role": role.value,
        "decision": projection.decision.value,
        "subject": dict(projection.subject),
        "budget": budget,
        "fact_limit": fact_limit,
        "facts": facts,
        "bindings": [
            [f"{kind}:{record_id}", name, value]
            for (kind, record_id, name), value in sorted(projection.bindings.items())
        ],
    }
    sites = _prose_sites(facts)
    needs_store = False
    for where, text in sites:
        data = text.encode("utf-8")
        if len(data) > fact_limit:
            if offload is None:
                needs_store = True
                continue
            _put_at(facts, where, _stub(offload(data, TEXT_MEDIA_TYPE), len(data), TEXT_MEDIA_TYPE))
    size = len(_document(packet))
    if needs_store:
        return _Assembly(Outcome.OVER_BUDGET, packet, "needs_store", size)
    if size <= budget:
        return _Assembly(Outcome.READY, packet, None, size)
    remaining = [(where, text.encode("utf-8")) for where, text in sites]
    remaining = [(where, data) for where, data in remaining if len(data) <= fact_limit]
    order = sorted(range(len(remaining)), key=lambda i: (-len(remaining[i][1]), i))
    for index in order:
        where, data = remaining[index]
        stub = _stub(Ref.of(data), len(data), TEXT_MEDIA_TYPE)
        if len(data) + 2 <= len(canonical_json(stub)):
            break  # what is left is shorter than a reference to it
        if offload is None:
            return _Assembly(Outcome.OVER_BUDGET, packet, "needs_store", size)
        _put_at(facts, where, _stub(offload(data, TEXT_MEDIA_TYPE), len(data), TEXT_MEDIA_TYPE))
        size = len(_document(packet))
        if size <= budget:
            return _Assembly(Outcome.READY, packet, None, size)
    return _Assembly(Outcome.OVER_BUDGET, packet, "too_large", size)


def _store_offload(store: FactStore) -> _Offload:
    def offload(data: bytes, media_type: str) -> Ref:
        ref = store.put(data, media_type=media_type, kind=ARTIFACT_KIND, tool=ARTIFACT_TOOL).ref
        if not is_ref(str(ref)) or ref != Ref.of(data):
            raise UsageError("the store returned a reference that is not the bytes' digest")
        return ref

    return offload


def _hash_only(data: bytes, media_type: str) -> Ref:
    return Ref.of(data)


def _subject(role: Role, task: str | None, milestone: str | None) -> None:
    for name, value in (("task", task), ("milestone", milestone)):
        if value is not None and (not isinstance(value, str) or _ID.fullmatch(value) is None):
            raise UsageError(f"a {name} id is 1-64 letters, digits, '.', '_' or '-'")
    if role is Role.COORDINATOR:
        if (task is None) == (milestone is None):
            raise UsageError("a coordinator packet is for one milestone: give milestone or task")
    elif task is None or milestone is not None:
        raise UsageError(f"a {role.value} packet is for one task: give task, not milestone")


def _role(role: Role | str) -> Role:
    try:
        return Role(role)
    except ValueError:
        raise UsageError("role is planner, worker, reviewer or coordinator") from None


def _decision(role: Role, decision: Decision | str | None) -> Decision | None:
    if decision is None:
        return None
    try:
        chosen = Decision(decision)
    except ValueError:
        chosen = None
    if chosen is None or chosen not in DECISIONS[role]:
        allowed = ", ".join(d.value for d in DECISIONS[role])
        raise UsageError(f"a {role.value} takes the decision {allowed}")
    return chosen


def _load(authority: Authority | AuthoritySource) -> Authority:
    if isinstance(authority, Authority):
        return authority
    if isinstance(authority, AuthoritySource):
        return authority.load()
    raise UsageError("authority is an Authority or an AuthoritySource (an object with load())")


def build_envelope(
    authority: Authority | AuthoritySource,
    role: Role | str,
    *,
    task: str | None = None,
    milestone: str | None = None,
    decision: Decision | str | None = None,
    budget: int = DEFAULT_BUDGET,
    fact_limit: int = DEFAULT_FACT_LIMIT,
    store: FactStore | None = None,
) -> BuildResult:
    """Build the packet of ``role`` for ``task`` (or, for a coordinator, ``milestone``).

    Args:
        authority: The current workflow state, or a source to load it from now.
        role: planner, worker, reviewer or coordinator.
        task: The subject task; a coordinator given a task works on its milestone.
        milestone: A coordinator's subject milestone.
        decision: The decision the packet is to authorize; by default the role's own (a
            reviewer reviews the plan of a task not started yet, else its submission).
        budget: The most bytes the packet document may hold.
        fact_limit: A text value longer than this travels as an ``artifact://`` reference.
        store: Where long texts and the detail behind each digest binding are stored (e.g.
            ``hold.for_session(agent_session).store``: the session of the agent that will read
            them). Without one, a packet that needs a reference is refused as ``over-budget``
            (``needs_store``); nothing is ever truncated.

    Returns:
        ``ready`` with the packet; ``context-insufficient`` with the facts the authority lacks
        or ``context-conflict`` with the boundaries that contradict each other (no packet:
        missing or contradictory authority never becomes an empty or permissive value); or
        ``over-budget``.

    Raises:
        UsageError: a bad role, decision, subject, budget or fact limit.
    """
    role = _role(role)
    chosen = _decision(role, decision)
    _subject(role, task, milestone)
    _check_limits(budget, fact_limit)
    current = _load(authority)
    projection = project(current, role, task=task, milestone=milestone, decision=chosen)

    def result(outcome: Outcome, envelope: Envelope | None = None, **more: Any) -> BuildResult:
        return BuildResult(
            outcome,
            envelope,
            role=role,
            decision=projection.decision,
            subject=dict(projection.subject),
            budget=budget,
            **more,
        )

    if projection.missing or projection.conflicts:
        return result(
            Outcome.CONTEXT_INSUFFICIENT if projection.missing else Outcome.CONTEXT_CONFLICT,
            missing=tuple(dict.fromkeys(projection.missing)),
            conflicts=tuple(dict.fromkeys(projection.conflicts)),
        )
    offload = None if store is None else _store_offload(store)
    assembly = _assemble(projection, role, budget, fact_limit, offload)
    if assembly.outcome is not Outcome.READY:
        return result(assembly.outcome, reason=assembly.reason, size=assembly.size)
    if offload is not None:
        for data in projection.details.values():
            offload(data, JSON_MEDIA_TYPE)
    body = canonical_json(assembly.packet)
    return result(Outcome.READY, _from_packet(json.loads(body), body))


def build_milestone(
    authority: Authority | AuthoritySource,
    milestone: str,
    *,
    roles: Iterable[Role | str] | None = None,
    budget: int = DEFAULT_BUDGET,
    fact_limit: int = DEFAULT_FACT_LIMIT,
    store: FactStore | None = None,
) -> tuple[BuildResult, ...]:
    """Build every packet of a milestone in one call, from one load of the authority.

    The coordinator's packet first (when ``coordinator`` is among ``roles``), then, for each
    member task in id order, the packet of each task role in the order given, each for the
    role's default decision. Each result says its role, decision, subject and outcome; a
    member that is not ready for a role (a worker for a task not started) is reported as such,
    and the others are built all the same. An unknown milestone gives one
    ``context-insufficient`` result.

    Raises:
        UsageError: a bad role, milestone id, budget or fact limit.
    """
    chosen = [_role(r) for r in (roles if roles is not None else list(Role))]
    _subject(Role.COORDINATOR, None, milestone)
    _check_limits(budget, fact_limit)
    current = _load(authority)
    record = current.milestone(milestone)
    options: dict[str, Any] = {"budget": budget, "fact_limit": fact_limit, "store": store}
    if record is None:  # the milestone itself is missing: one insufficient result says so
        return (build_envelope(current, Role.COORDINATOR, milestone=milestone, **options),)
    results = []
    if Role.COORDINATOR in chosen:
        results.append(build_envelope(current, Role.COORDINATOR, milestone=milestone, **options))
    for member in sorted(record.tasks):
        for role in chosen:
            if role is not Role.COORDINATOR:
                results.append(build_envelope(current, role, task=member, **options))
    return tuple(results)


# -- checking --------------------------------------------------------------------------------


def check_envelope(
    envelope: Envelope | bytes | str, authority: Authority | AuthoritySource
) -> CheckResult:
    """Whether ``envelope`` still holds against the current ``authority``.

    The decision's projection is rebuilt from ``authority`` (a source is loaded now; large
    facts are only hashed, never stored): a required fact it lacks gives
    ``context-insufficient``; boundaries that contradict each other give ``context-conflict``;
    a binding that differs, appeared or disappeared gives ``context-stale`` naming it; facts
    that differ under unchanged bindings give ``context-stale`` naming those facts as
    conflicts. Only a packet identical, byte for byte, to the rebuilt one is ``ready``.
    Nothing is repaired.

    Raises:
        EnvelopeError: ``envelope`` is not a valid packet document.
    """
    if not isinstance(envelope, Envelope):
        envelope = Envelope.parse(envelope)
    current = _load(authority)
    projection = project(
        current,
        envelope.role,
        task=envelope.task,
        milestone=envelope.milestone,
        decision=envelope.decision,
    )
    subject = (
        {"task": envelope.task} if envelope.task is not None else {"milestone": envelope.milestone}
    )
    made: dict[str, Any] = {
        "role": envelope.role,
        "decision": envelope.decision,
        "subject": subject,
    }
    if projection.missing or projection.conflicts:
        return CheckResult(
            Outcome.CONTEXT_INSUFFICIENT if projection.missing else Outcome.CONTEXT_CONFLICT,
            envelope.digest,
            missing=tuple(dict.fromkeys(projection.missing)),
            boundary_conflicts=tuple(dict.fromkeys(projection.conflicts)),
            **made,
        )
    before: dict[tuple[str, str, str], BindingValue] = {
        (b.kind, b.id, b.field): b.value for b in envelope.bindings
    }
    after = projection.bindings
    changed = tuple(
        BindingChange(*key, before.get(key), after.get(key))
        for key in sorted(before.keys() | after.keys())
        if before.get(key) != after.get(key)
    )
    if changed:
        return CheckResult(Outcome.CONTEXT_STALE, envelope.digest, changed=changed, **made)
    assembly = _assemble(
        projection, envelope.role, envelope.budget, envelope.fact_limit, _hash_only
    )
    if assembly.outcome is Outcome.READY and _document(assembly.packet) == envelope.data:
        return CheckResult(Outcome.READY, envelope.digest, **made)
    current_facts = json.loads(canonical_json(assembly.packet["facts"]))
    names = sorted(envelope.facts.keys() | current_facts.keys())
    conflicts = tuple(n for n in names if envelope.facts.get(n) != current_facts.get(n))
    return CheckResult(
        Outcome.CONTEXT_STALE, envelope.digest, conflicts=conflicts or ("packet",), **made
    )


def check_envelopes(
    envelopes: Iterable[Envelope | bytes | str], authority: Authority | AuthoritySource
) -> tuple[CheckResult, ...]:
    """Check many packets (a milestone's, say) against one load of the authority.

    Raises:
        EnvelopeError: one of ``envelopes`` is not a valid packet document.
    """
    parsed = [e if isinstance(e, Envelope) else Envelope.parse(e) for e in envelopes]
    current = _load(authority)
    return tuple(check_envelope(e, current) for e in parsed)


def require_ready(
    envelope: Envelope | bytes | str, authority: Authority | AuthoritySource
) -> Envelope:
    """The packet, if it is ``ready`` against ``authority``; the guard before a decision.

    Raises:
        ContextNotReadyError: the packet is stale, insufficient or in conflict.
        EnvelopeError: not a valid packet document.
    """
    parsed = envelope if isinstance(envelope, Envelope) else Envelope.parse(envelope)
    check_envelope(parsed, authority).raise_for_outcome()
    return parsed
