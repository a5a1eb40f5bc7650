"""Coordination envelopes: role packets that are provably fresh, or refuse.

A role packet (planner, worker, reviewer, coordinator) is a derived, disposable projection of
an authority: the workflow state of milestones, tasks, dependencies, ownership, prerequisites,
blockers and human gates, each with revisions or hashes. A packet holds only the facts its role
needs, each naming its source record and field, and only the freshness bindings those facts rest
on. Checked against the current authority it is ``ready``, ``context-stale`` (discard and
rebuild; never repair) or ``context-insufficient`` (the authority lacks a required fact).

Quick start::

    from cargohold import envelopes

    source = envelopes.FileAuthority("workflow.json")
    built = envelopes.build_envelope(source, "planner", task="T1", store=agent_hold.store)
    packet = built.envelope                  # None unless built.outcome is Outcome.READY
    ...                                       # the authority moves on
    envelopes.check_envelope(packet, source).outcome
    source.transition(packet, update)        # compare and swap: fails if a binding moved

The design this implements (the P03 brief) is marked NO-GO, a hypothesis to be proven on fresh
role-separated replays; what this package guarantees regardless is in docs/envelopes.md.

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
    build_milestone,
    canonical_json,
    check_envelope,
    check_envelopes,
    require_ready,
)
from cargohold.envelopes._load import FactReader, LoadedFacts, load_facts
from cargohold.envelopes._project import PROSE_LIMIT
from cargohold.envelopes._source import (
    FileAuthority,
    decode_authority,
    load_authority,
    parse_authority,
)
from cargohold.envelopes._types import (
    Binding,
    BindingChange,
    BoundaryConflict,
    ConflictReason,
    ContextNotReadyError,
    Decision,
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
    "PROSE_LIMIT",
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
    "BoundaryConflict",
    "BuildResult",
    "CheckResult",
    "ConflictReason",
    "ContextNotReadyError",
    "Decision",
    "Dependency",
    "DependencyState",
    "Envelope",
    "EnvelopeError",
    "FactReader",
    "FactStore",
    "FileAuthority",
    "Gate",
    "GateState",
    "LoadedFacts",
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
    "build_milestone",
    "canonical_json",
    "check_envelope",
    "check_envelopes",
    "decode_authority",
    "load_authority",
    "load_facts",
    "parse_authority",
    "require_ready",
]
