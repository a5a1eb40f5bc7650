"""Role packets: built from an authority, serialized canonically, checked for freshness.

A packet document is canonical JSON (sorted keys, no insignificant whitespace, UTF-8, integers
and strings only, no timestamp, nothing random)::

    {"digest":"sha256:<hex of the canonical packet bytes>","packet":{...}}

so the same authority, role and subject give the same bytes in any process. A check never
repairs a packet: it rebuilds the projection from the current authority and compares.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from cargohold._errors import UsageError
from cargohold._records import PutResult
from cargohold._ref import Ref, is_ref
from cargohold.envelopes._authority import (
    ID_PATTERN,
    Authority,
    AuthorityError,
    check_path,
    covers,
    overlaps,
    path_parts,
    split_record_key,
)
from cargohold.envelopes._project import Projection, project
from cargohold.envelopes._types import (
    Binding,
    BindingChange,
    BindingValue,
    ContextNotReadyError,
    EnvelopeError,
    Missing,
    Outcome,
    Ownership,
    Role,
)

FORMAT = "cargohold.envelope/1"
DEFAULT_BUDGET = 16 * 1024
"""The default context budget of a packet document, in bytes."""
DEFAULT_FACT_LIMIT = 2 * 1024
"""A text value longer than this (UTF-8 bytes) travels as an ``artifact://`` reference."""
MIN_BUDGET = 1024
MAX_BUDGET = 1024 * 1024
MIN_FACT_LIMIT = 128
MAX_PACKET_BYTES = 4 * MAX_BUDGET
"""The largest packet document :meth:`Envelope.parse` reads."""

TEXT_MEDIA_TYPE = "text/plain; charset=utf-8"
JSON_MEDIA_TYPE = "application/json"
ARTIFACT_KIND = "envelope_fact"
ARTIFACT_TOOL = "cargohold-envelope"

_ID = re.compile(ID_PATTERN)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


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


# -- the envelope ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Envelope:
    """A role packet: derived, disposable, deterministic. Equal when their bytes are equal.

    Attributes:
        data: The canonical document bytes (what ``cargohold envelope build`` prints).
        digest: ``sha256:<hex>`` of the canonical packet bytes.
        role: The role it was built for.
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
            EnvelopeError: not a packet document, an unknown format, or a digest mismatch.
        """
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
        if len(raw) > MAX_PACKET_BYTES:
            raise EnvelopeError(f"a packet document is at most {MAX_PACKET_BYTES} bytes")
        try:
            document = json.loads(raw.decode("utf-8"), parse_float=_no_float)
        except (UnicodeDecodeError, json.JSONDecodeError, ValueError):
            raise EnvelopeError("not a packet document: expected canonical JSON") from None
        if not isinstance(document, dict) or set(document) != {"digest", "packet"}:
            raise EnvelopeError("not a packet document: expected digest and packet")
        packet = document["packet"]
        if not isinstance(packet, dict):
            raise EnvelopeError("not a packet document: packet is an object")
        try:
            body = canonical_json(packet)
        except AuthorityError:
            raise EnvelopeError("not a packet document: text that is not valid Unicode") from None
        if document["digest"] != _digest(body):
            raise EnvelopeError("the packet does not match its digest: discard it and rebuild")
        return _from_packet(packet, body)

    def ownership_of(self, path: str) -> Ownership:
        """What this packet says about touching ``path`` (a proposal's file or directory).

        ``reserved`` when any allocation overlapping ``path`` is another task's; else
        ``unresolved`` when any is explicitly unresolved; else ``owned`` when the deepest
        allocation covering ``path`` is this task's; else ``not_represented``: the packet holds
        no ownership fact for it, which never permits a write.

        Raises:
            AuthorityError: ``path`` is not a normal repository path.
        """
        check_path(path)
        ownership = self.facts.get("ownership")
        if not isinstance(ownership, dict) or "items" not in ownership:
            return Ownership.NOT_REPRESENTED  # no ownership fact, or it travels as a reference
        items = [
            (item["fields"]["path"], Ownership(item["ownership"]))
            for item in ownership["items"]
            if isinstance(item["fields"].get("path"), str)
        ]
        touching = {value for item_path, value in items if overlaps(item_path, path)}
        if Ownership.RESERVED in touching:
            return Ownership.RESERVED
        if Ownership.UNRESOLVED in touching:
            return Ownership.UNRESOLVED
        covering = [(p, value) for p, value in items if covers(p, path)]
        if covering:
            _, deepest = max(covering, key=lambda pair: len(path_parts(pair[0])))
            if deepest is Ownership.OWNED:
                return Ownership.OWNED
        return Ownership.NOT_REPRESENTED


def _no_float(text: str) -> Any:
    raise ValueError("a packet holds no floating-point number")


def _from_packet(packet: dict[str, Any], body: bytes) -> Envelope:
    def bad(what: str) -> EnvelopeError:
        return EnvelopeError(f"not a packet of this version: {what}")

    expected = {"format", "role", "subject", "budget", "fact_limit", "facts", "bindings"}
    if set(packet) != expected or packet["format"] != FORMAT:
        raise bad(f"expected format {FORMAT}")
    try:
        role = Role(packet["role"])
    except ValueError:
        raise bad("unknown role") from None
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
        if not isinstance(item, dict) or set(item) != {"record", "field", "value"}:
            raise bad("a binding is a record, a field and a value")
        kind, record_id = (
            split_record_key(item["record"]) if isinstance(item["record"], str) else ("", "")
        )
        value = item["value"]
        if (
            not kind
            or _ID.fullmatch(record_id) is None
            or not isinstance(item["field"], str)
            or isinstance(value, bool)
            or not isinstance(value, str | int)
        ):
            raise bad("a binding names kind:id, a field, and a string or integer value")
        bindings.append(Binding(kind, record_id, item["field"], value))
    document = b'{"digest":"' + _digest(body).encode() + b'","packet":' + body + b"}"
    return Envelope(
        data=document,
        digest=_digest(body),
        role=role,
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
        outcome: ``ready``, ``context-insufficient`` or ``over-budget``.
        envelope: The packet (``None`` unless ready).
        missing: The required facts the authority lacks (``context-insufficient``).
        reason: For ``over-budget``: ``needs_store`` (a fact must travel as a reference and no
            store was given) or ``too_large`` (the packet does not fit even with references).
        size: For ``over-budget``, the size the document would have had.
        budget: The budget asked for.
    """

    outcome: Outcome
    envelope: Envelope | None
    missing: tuple[Missing, ...] = ()
    reason: str | None = None
    size: int | None = None
    budget: int = DEFAULT_BUDGET

    @property
    def ready(self) -> bool:
        """Whether a packet was built."""
        return self.outcome is Outcome.READY


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The freshness of a packet against the current authority.

    Attributes:
        outcome: ``ready``, ``context-stale`` or ``context-insufficient``.
        digest: The checked packet's digest.
        changed: For ``context-stale``: the bindings that no longer hold.
        conflicts: For ``context-stale`` with every binding unchanged: the facts whose values
            changed anyway (an authority that changed a field without its revision).
        missing: For ``context-insufficient``: the required facts the authority lacks now.
    """

    outcome: Outcome
    digest: str
    changed: tuple[BindingChange, ...] = ()
    conflicts: tuple[str, ...] = ()
    missing: tuple[Missing, ...] = ()

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
            "changed": [
                {"record": c.record, "field": c.field, "before": c.before, "after": c.after}
                for c in self.changed
            ],
            "conflicts": list(self.conflicts),
            "missing": [m.as_dict() for m in self.missing],
        }


# -- building --------------------------------------------------------------------------------


def _check_limits(budget: int, fact_limit: int) -> None:
    for name, value, low, high in (
        ("budget", budget, MIN_BUDGET, MAX_BUDGET),
        ("fact_limit", fact_limit, MIN_FACT_LIMIT, MAX_BUDGET),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise UsageError(f"{name} is an integer from {low} to {high} bytes")


def _offload_text(value: Any, limit: int, offload: _Offload | None) -> tuple[Any, bool]:
    """Replace every text longer than ``limit`` bytes by a reference stub.

    Returns the new value and whether a replacement was needed but impossible (no store).
    """
    if isinstance(value, str):
        data = value.encode("utf-8")
        if len(data) <= limit:
            return value, False
        if offload is None:
            return value, True
        return _stub(offload(data, TEXT_MEDIA_TYPE), len(data), TEXT_MEDIA_TYPE), False
    if isinstance(value, list):
        pairs = [_offload_text(item, limit, offload) for item in value]
        return [new for new, _ in pairs], any(blocked for _, blocked in pairs)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        blocked = False
        for key, item in value.items():
            out[key], item_blocked = _offload_text(item, limit, offload)
            blocked = blocked or item_blocked
        return out, blocked
    return value, False


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
    """Serialize a complete projection within ``budget``: first every long text, then whole
    facts (largest first, ties by name) travel as references, until the document fits."""
    bindings = [
        {"record": f"{kind}:{record_id}", "field": name, "value": value}
        for (kind, record_id, name), value in sorted(projection.bindings.items())
    ]
    facts, blocked = _offload_text(projection.facts, fact_limit, offload)
    packet: dict[str, Any] = {
        "format": FORMAT,
        "role": role.value,
        "subject": dict(projection.subject),
        "budget": budget,
        "fact_limit": fact_limit,
        "facts": facts,
        "bindings": bindings,
    }
    size = len(_document(packet))
    if blocked:
        return _Assembly(Outcome.OVER_BUDGET, packet, "needs_store", size)
    if size <= budget:
        return _Assembly(Outcome.READY, packet, None, size)
    encoded = {name: canonical_json(fact) for name, fact in facts.items()}
    for name in sorted(encoded, key=lambda n: (-len(encoded[n]), n)):
        data = encoded[name]
        stub_size = len(canonical_json(_stub(Ref.of(data), len(data), JSON_MEDIA_TYPE)))
        if len(data) <= stub_size:
            break  # replacing what is left would not make the document smaller
        if offload is None:
            return _Assembly(Outcome.OVER_BUDGET, packet, "needs_store", size)
        facts[name] = _stub(offload(data, JSON_MEDIA_TYPE), len(data), JSON_MEDIA_TYPE)
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


def build_envelope(
    authority: Authority,
    role: Role | str,
    *,
    task: str | None = None,
    milestone: str | None = None,
    budget: int = DEFAULT_BUDGET,
    fact_limit: int = DEFAULT_FACT_LIMIT,
    store: FactStore | None = None,
) -> BuildResult:
    """Build the packet of ``role`` for ``task`` (or, for a coordinator, ``milestone``).

    Args:
        authority: The current workflow state.
        role: planner, worker, reviewer or coordinator.
        task: The subject task; a coordinator given a task works on its milestone.
        milestone: A coordinator's subject milestone.
        budget: The most bytes the packet document may hold.
        fact_limit: A text value longer than this travels as an ``artifact://`` reference.
        store: Where large facts are stored (e.g. a :class:`cargohold.ScopedStore`). Without
            one, a packet that needs a reference is refused as ``over-budget``
            (``needs_store``); nothing is ever truncated.

    Returns:
        ``ready`` with the packet; ``context-insufficient`` with the facts the authority lacks
        (no packet: missing authority never becomes an empty or permissive value); or
        ``over-budget``.

    Raises:
        UsageError: a bad role, subject, budget or fact limit.
    """
    role = _role(role)
    _subject(role, task, milestone)
    _check_limits(budget, fact_limit)
    projection = project(authority, role, task=task, milestone=milestone)
    if projection.missing:
        return BuildResult(
            Outcome.CONTEXT_INSUFFICIENT,
            None,
            missing=tuple(dict.fromkeys(projection.missing)),
            budget=budget,
        )
    offload = None if store is None else _store_offload(store)
    assembly = _assemble(projection, role, budget, fact_limit, offload)
    if assembly.outcome is not Outcome.READY:
        return BuildResult(
            assembly.outcome, None, reason=assembly.reason, size=assembly.size, budget=budget
        )
    body = canonical_json(assembly.packet)
    return BuildResult(Outcome.READY, _from_packet(assembly.packet, body), budget=budget)


# -- checking --------------------------------------------------------------------------------


def check_envelope(envelope: Envelope | bytes | str, authority: Authority) -> CheckResult:
    """Whether ``envelope`` still holds against the current ``authority``.

    The role's projection is rebuilt from ``authority`` (large facts are only hashed, never
    stored): a required fact it lacks gives ``context-insufficient``; a binding that differs,
    appeared or disappeared gives ``context-stale`` naming it; facts that differ under unchanged
    bindings give ``context-stale`` naming those facts as conflicts. Only a packet identical, byte
    for byte, to the rebuilt one is ``ready``. Nothing is repaired.

    Raises:
        EnvelopeError: ``envelope`` is not a valid packet document.
    """
    if not isinstance(envelope, Envelope):
        envelope = Envelope.parse(envelope)
    projection = project(authority, envelope.role, task=envelope.task, milestone=envelope.milestone)
    if projection.missing:
        return CheckResult(
            Outcome.CONTEXT_INSUFFICIENT,
            envelope.digest,
            missing=tuple(dict.fromkeys(projection.missing)),
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
        return CheckResult(Outcome.CONTEXT_STALE, envelope.digest, changed=changed)
    assembly = _assemble(
        projection, envelope.role, envelope.budget, envelope.fact_limit, _hash_only
    )
    if assembly.outcome is Outcome.READY and _document(assembly.packet) == envelope.data:
        return CheckResult(Outcome.READY, envelope.digest)
    current = assembly.packet["facts"]
    names = sorted(envelope.facts.keys() | current.keys())
    conflicts = tuple(n for n in names if envelope.facts.get(n) != current.get(n))
    return CheckResult(Outcome.CONTEXT_STALE, envelope.digest, conflicts=conflicts or ("packet",))


def require_ready(envelope: Envelope | bytes | str, authority: Authority) -> Envelope:
    """The packet, if it is ``ready`` against ``authority``; the guard before a decision.

    Raises:
        ContextNotReadyError: the packet is stale or the authority is insufficient.
        EnvelopeError: not a valid packet document.
    """
    parsed = envelope if isinstance(envelope, Envelope) else Envelope.parse(envelope)
    check_envelope(parsed, authority).raise_for_outcome()
    return parsed
