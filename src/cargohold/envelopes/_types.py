"""The small vocabulary of envelopes: roles, outcomes, ownership values, bindings, missing facts."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from cargohold._errors import CargoholdError, UsageError


class Role(enum.StrEnum):
    """The role a packet is built for; each gets exactly the facts its decision needs."""

    PLANNER = "planner"
    WORKER = "worker"
    REVIEWER = "reviewer"
    COORDINATOR = "coordinator"


class Decision(enum.StrEnum):
    """The decision a packet authorizes; each role has its own, the reviewer two.

    ``plan_task`` (planner), ``execute_step`` (worker: the task's current step),
    ``review_plan`` (reviewer, before the task starts: judged against the base branch and its
    evaluated head), ``review_submission`` (reviewer, after start: judged against the base
    commit and the submission), ``schedule_milestone`` (coordinator).
    """

    PLAN_TASK = "plan_task"
    EXECUTE_STEP = "execute_step"
    REVIEW_PLAN = "review_plan"
    REVIEW_SUBMISSION = "review_submission"
    SCHEDULE_MILESTONE = "schedule_milestone"


DECISIONS: dict[Role, tuple[Decision, ...]] = {
    Role.PLANNER: (Decision.PLAN_TASK,),
    Role.WORKER: (Decision.EXECUTE_STEP,),
    Role.REVIEWER: (Decision.REVIEW_SUBMISSION, Decision.REVIEW_PLAN),
    Role.COORDINATOR: (Decision.SCHEDULE_MILESTONE,),
}
"""The decisions each role may take (the first is the role's usual one)."""


class Outcome(enum.StrEnum):
    """What a build or a check came to. Scripts branch on these codes, never on text.

    ``ready``: the packet is current and complete. ``context-stale``: a binding it depends on
    changed (discard it and rebuild; never repair it). ``context-insufficient``: the authority
    lacks a fact the role requires. ``context-conflict``: the authority contradicts itself about
    a fact the decision rests on (two tasks' boundaries over one owned path); no rebuild fixes
    it, the authority must. ``over-budget``: the packet cannot fit its budget (a large text
    needs a store to travel as a reference, or even references do not fit).
    """

    READY = "ready"
    CONTEXT_STALE = "context-stale"
    CONTEXT_INSUFFICIENT = "context-insufficient"
    CONTEXT_CONFLICT = "context-conflict"
    OVER_BUDGET = "over-budget"


class Ownership(enum.StrEnum):
    """The five ownership values a packet distinguishes. Only ``owned`` ever permits a write.

    ``known_empty``: the authority represents ownership and nothing relevant is allocated.
    ``owned``: allocated to the packet's task. ``reserved``: allocated to another task.
    ``unresolved``: the authority says explicitly that nobody owns it yet.
    ``not_represented``: the authority (or the packet) says nothing about it; never permission.
    """

    KNOWN_EMPTY = "known_empty"
    OWNED = "owned"
    RESERVED = "reserved"
    UNRESOLVED = "unresolved"
    NOT_REPRESENTED = "not_represented"


class EnvelopeError(UsageError):
    """Bytes that are not a role packet, or a packet whose content does not match its digest.

    An edited packet is refused here; it is never checked, and never repaired.
    """

    code = "envelope"


class ContextNotReadyError(CargoholdError):
    """A packet used to authorize a decision while it is not ``ready``.

    Attributes:
        outcome: The check's outcome code (``context-stale``, ``context-insufficient`` or
            ``context-conflict``).
    """

    code = "context_not_ready"

    def __init__(self, message: str, *, outcome: Outcome) -> None:
        super().__init__(message)
        self.outcome = outcome


BindingValue = str | int


DIGEST_KIND = "digest"
"""The kind of a binding over a set of records summarised in a packet (see :class:`Binding`)."""


@dataclass(frozen=True, slots=True, order=True)
class Binding:
    """A freshness binding: a packet holds only while ``record``'s ``field`` is ``value``.

    Ordered as ``(kind, id, field)`` tuples, never as joined strings. A binding of kind
    ``digest`` (``digest:ownership`` ``summary``) binds a set of records a packet summarises
    rather than lists: its value is the SHA-256 of the canonical JSON of exactly those records
    (ids, revisions and the projected fields), and the same bytes are the detail an agent can
    load (``artifact://sha256/<the same hex>``).

    Attributes:
        kind: The record's kind (``task``, ``milestone``, ``allocation`` ... or ``digest``).
        id: The record's id (for a digest: the fact it summarises).
        field: The bound field (``revision``, ``plan_hash`` ... or what the digest covers).
        value: Its value when the packet was built.
    """

    kind: str
    id: str
    field: str
    value: BindingValue

    @property
    def record(self) -> str:
        """The record's name in a packet: ``kind:id``."""
        return f"{self.kind}:{self.id}"


@dataclass(frozen=True, slots=True)
class BindingChange:
    """A binding that no longer holds.

    Attributes:
        kind: The record's kind.
        id: The record's id.
        field: The bound field.
        before: The packet's value; ``None`` when the current authority binds a record the
            packet did not (a new relevant record).
        after: The current value; ``None`` when the packet bound a record that is gone or no
            longer relevant.
    """

    kind: str
    id: str
    field: str
    before: BindingValue | None
    after: BindingValue | None

    @property
    def record(self) -> str:
        """The record's name in a packet: ``kind:id``."""
        return f"{self.kind}:{self.id}"


class ConflictReason(enum.StrEnum):
    """Why two boundaries contradict each other over a path.

    ``write_path_reserved``: a path of this task's write boundary lies wholly in another task's
    allocation. ``sibling_writes_owned_path``: another task's write boundary reaches into a path
    this task owns.
    """

    WRITE_PATH_RESERVED = "write_path_reserved"
    SIBLING_WRITES_OWNED_PATH = "sibling_writes_owned_path"


@dataclass(frozen=True, slots=True)
class BoundaryConflict:
    """Two authority facts that contradict each other about a path this decision rests on.

    Attributes:
        reason: What contradicts what.
        record: The task whose boundary holds the path (``task:T2``).
        field: The boundary field (``boundary.write``).
        item: The path.
        other: The other task (``task:T1``).
        decided_by: The allocation that decides the path (``allocation:A2``).
    """

    reason: ConflictReason
    record: str
    field: str
    item: str
    other: str
    decided_by: str

    def as_dict(self) -> dict[str, str]:
        """The JSON form."""
        return {
            "reason": self.reason.value,
            "record": self.record,
            "field": self.field,
            "item": self.item,
            "other": self.other,
            "decided_by": self.decided_by,
        }


@dataclass(frozen=True, slots=True)
class Missing:
    """A fact the role requires that the authority does not hold.

    Attributes:
        fact: The packet fact that needs it (``ownership``, ``milestone_objective`` ...).
        record: The record that should hold it (``task:T1``), or ``authority`` for a whole
            collection that is not represented.
        field: The field that is absent (``objective``, ``allocations`` ...).
        item: The item of the field concerned (a write path not covered by any allocation), if
            any.
    """

    fact: str
    record: str
    field: str
    item: str | None = None

    def as_dict(self) -> dict[str, str]:
        """The JSON form: ``item`` only when there is one."""
        result = {"fact": self.fact, "record": self.record, "field": self.field}
        if self.item is not None:
            result["item"] = self.item
        return result
