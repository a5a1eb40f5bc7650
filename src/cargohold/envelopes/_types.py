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


class Outcome(enum.StrEnum):
    """What a build or a check came to. Scripts branch on these codes, never on text.

    ``ready``: the packet is current and complete. ``context-stale``: a binding it depends on
    changed (discard it and rebuild; never repair it). ``context-insufficient``: the authority
    lacks a fact the role requires. ``over-budget``: the packet cannot fit its budget (a large
    fact needs a store to travel as a reference, or even references do not fit).
    """

    READY = "ready"
    CONTEXT_STALE = "context-stale"
    CONTEXT_INSUFFICIENT = "context-insufficient"
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
        outcome: The check's outcome code (``context-stale`` or ``context-insufficient``).
    """

    code = "context_not_ready"

    def __init__(self, message: str, *, outcome: Outcome) -> None:
        super().__init__(message)
        self.outcome = outcome


BindingValue = str | int


@dataclass(frozen=True, slots=True, order=True)
class Binding:
    """A freshness binding: a packet holds only while ``record``'s ``field`` is ``value``.

    Ordered as ``(kind, id, field)`` tuples, never as joined strings.

    Attributes:
        kind: The record's kind (``task``, ``milestone``, ``allocation`` ...).
        id: The record's id.
        field: The bound field (``revision``, ``plan_hash`` ...).
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
