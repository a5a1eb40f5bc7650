"""Coordination envelopes: role packets that are provably fresh, or refuse.

A role packet (planner, worker, reviewer, coordinator) is a derived, disposable projection of
an authority: the workflow state of milestones, tasks, dependencies, ownership, prerequisites,
blockers and human gates, each with revisions or hashes. A packet holds only the facts its role
needs, each naming its source record and field, and only the freshness bindings those facts rest
on. Checked against the current authority it is ``ready``, ``context-stale`` (discard and
rebuild; never repair) or ``context-insufficient`` (the authority lacks a required fact).

Quick start::

    from cargohold import envelopes

    authority = envelopes.load_authority("workflow.toml")
    built = envelopes.build_envelope(authority, "planner", task="T1")
    packet = built.envelope                  # None unless built.outcome is Outcome.READY
    ...                                       # the authority moves on
    envelopes.check_envelope(packet, envelopes.load_authority("workflow.toml")).outcome

Importing this package does not import pydantic; loading a file does.
"""

from cargohold.envelopes._authority import (
    Allocation,
    AllocationState,
    Authority,
    AuthorityError,
    AuthoritySource,
    Blocker,
    BlockerState,
    Boundary,
    Dependency,
    DependencyState,
    Gate,
    GateState,
    Milestone,
    Prerequisite,
    PrerequisiteState,
    Step,
    Submission,
    Task,
    TaskStatus,
)
from cargohold.envelopes._envelope import (
    DEFAULT_BUDGET,
    DEFAULT_FACT_LIMIT,
    FORMAT,
    MAX_BUDGET,
    MIN_BUDGET,
    MIN_FACT_LIMIT,
    BuildResult,
    CheckResult,
    Envelope,
    FactStore,
    build_envelope,
    canonical_json,
    check_envelope,
    require_ready,
)
from cargohold.envelopes._source import (
    FileAuthority,
    decode_authority,
    load_authority,
    parse_authority,
)
from cargohold.envelopes._types import (
    Binding,
    BindingChange,
    ContextNotReadyError,
    EnvelopeError,
    Missing,
    Outcome,
    Ownership,
    Role,
)

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_FACT_LIMIT",
    "FORMAT",
    "MAX_BUDGET",
    "MIN_BUDGET",
    "MIN_FACT_LIMIT",
    "Allocation",
    "AllocationState",
    "Authority",
    "AuthorityError",
    "AuthoritySource",
    "Binding",
    "BindingChange",
    "Blocker",
    "BlockerState",
    "Boundary",
    "BuildResult",
    "CheckResult",
    "ContextNotReadyError",
    "Dependency",
    "DependencyState",
    "Envelope",
    "EnvelopeError",
    "FactStore",
    "FileAuthority",
    "Gate",
    "GateState",
    "Milestone",
    "Missing",
    "Outcome",
    "Ownership",
    "Prerequisite",
    "PrerequisiteState",
    "Role",
    "Step",
    "Submission",
    "Task",
    "TaskStatus",
    "build_envelope",
    "canonical_json",
    "check_envelope",
    "decode_authority",
    "load_authority",
    "parse_authority",
    "require_ready",
]
