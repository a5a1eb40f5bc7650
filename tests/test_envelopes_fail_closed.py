"""A ready packet is an authorization: it fails closed at realistic scale.

Structure never leaves a packet; a packet of a milestone of hundreds of tasks fits its budget
and still answers from itself; every binding the P03 brief lists is bound; absent is never
empty inside records either; a planned task's plan can be reviewed; boundaries that contradict
each other are detected; one packet answers one path one way; moving something far away
stales nothing; prose about other tasks is bounded or left out.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

import cargohold
from cargohold.envelopes import (
    DEFAULT_BUDGET,
    PROSE_LIMIT,
    BindingChange,
    ConflictReason,
    Decision,
    Envelope,
    Missing,
    Outcome,
    Ownership,
    Role,
    build_envelope,
    build_milestone,
    canonical_json,
    check_envelope,
    parse_authority,
)
from envelopes_fixtures import (
    TASK_ROLES,
    bumped,
    document,
    edited,
    milestone_document,
    ready,
    record,
    scenario,
)


@pytest.fixture
def scoped() -> cargohold.ScopedStore:
    return cargohold.ScopedStore(
        cargohold.MemoryStore(), cargohold.Scope("tenant-f", "user-f", "session-f")
    )


def _stubs(value: Any, where: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Where a facts tree holds ``artifact://`` references."""
    if isinstance(value, dict):
        if set(value) == {"artifact", "bytes", "media_type"}:
            return [where]
        return [site for key, item in value.items() for site in _stubs(item, (*where, key))]
    if isinstance(value, list):
        return [site for item in value for site in _stubs(item, where)]
    return []


# -- structure never leaves the packet ----------------------------------------------------------

LONG_PATH = "src/api/export/" + "generated/" * 30 + "shared_enums.py"


def test_a_long_path_another_task_owns_stays_in_the_packet_and_is_never_owned(
    scoped: cargohold.ScopedStore,
) -> None:
    doc = document()
    doc["allocations"].append(
        {"id": "A9", "revision": 1, "path": LONG_PATH, "state": "owned", "task": "T1"}
    )
    record(doc, "task", "T1")["boundary"]["write"].append(LONG_PATH)
    authority = parse_authority(doc)

    for role in TASK_ROLES:
        envelope = ready(authority, role, task="T2", fact_limit=128, store=scoped)

        paths = [item["fields"]["path"] for item in envelope.facts["ownership"]["items"]]
        assert LONG_PATH in paths
        assert envelope.ownership_of(LONG_PATH) is Ownership.RESERVED
        assert envelope.ownership_of("src/api/export/csv_writer.py") is Ownership.OWNED


def test_only_prose_ever_travels_as_a_reference(scoped: cargohold.ScopedStore) -> None:
    long = "A sentence of the authority's own prose. " * 20
    doc = edited(document(), "task", "T2", objective=long)
    record(doc, "milestone", "M1")["objective"] = long
    record(doc, "prerequisite", "P1")["description"] = long
    record(doc, "blocker", "B1")["description"] = long
    record(doc, "task", "T2")["steps"][1]["title"] = long
    record(doc, "task", "T2")["submission"]["evidence"] = [long, "artifact://sha256/" + "0" * 64]
    authority = parse_authority(doc)
    prose = {"objective", "description", "submission.evidence", "steps.S2.title"}

    for role in TASK_ROLES:
        envelope = ready(authority, role, task="T2", fact_limit=128, budget=6144, store=scoped)

        sites = _stubs(envelope.facts)
        assert sites
        assert {site[-1] for site in sites} <= prose
        assert envelope.size <= 6144


def test_a_packet_whose_ownership_fact_is_not_paths_answers_not_represented() -> None:
    packet = json.loads(ready(scenario(), Role.WORKER, task="T2").data)["packet"]
    packet["facts"]["ownership"] = {"artifact": "artifact://sha256/" + "0" * 64, "bytes": 9,
                                    "media_type": "application/json"}  # fmt: skip
    body = canonical_json(packet)
    digest = "sha256:" + hashlib.sha256(body).hexdigest()

    resealed = Envelope.parse(canonical_json({"digest": digest, "packet": packet}))

    assert resealed.ownership_of("src/api/export/csv_writer.py") is Ownership.NOT_REPRESENTED


# -- realistic scale ----------------------------------------------------------------------------


def test_a_planner_among_hundreds_of_tasks_fits_and_answers_from_its_own_packet() -> None:
    authority = parse_authority(milestone_document(250))  # 2,750 allocations

    envelope = ready(authority, Role.PLANNER, task="T0004")

    assert envelope.size <= DEFAULT_BUDGET
    assert envelope.ownership_of("src/area000/mod0004/file03.py") is Ownership.OWNED
    assert envelope.ownership_of("src/shared/t0004.py") is Ownership.OWNED
    # A sibling's module in the same area: summarised, still known as another task's.
    assert envelope.ownership_of("src/area000/mod0007/file01.py") is Ownership.RESERVED
    # Hundreds of shared files summarised under one prefix: the packet cannot tell which is
    # whose, so it does not say; far away, it says nothing either. Neither permits a write.
    assert envelope.ownership_of("src/shared/t0100.py") is Ownership.NOT_REPRESENTED
    assert envelope.ownership_of("src/area020/mod0200/file01.py") is Ownership.NOT_REPRESENTED
    summary = envelope.facts["ownership"]["summary"]
    assert summary["records"] > 250
    assert ("digest", "ownership", "summary") in {
        (b.kind, b.id, b.field) for b in envelope.bindings
    }


def test_every_packet_of_a_milestone_of_hundreds_of_tasks_fits_the_default_budget() -> None:
    authority = parse_authority(milestone_document(200))  # 2,200 allocations

    results = build_milestone(authority, "MB")

    assert len(results) == 1 + 3 * 200
    assert {r.outcome for r in results} == {Outcome.READY}
    assert max(r.envelope.size for r in results if r.envelope is not None) <= DEFAULT_BUDGET


# -- every binding the brief lists --------------------------------------------------------------


def test_a_planner_packet_goes_stale_when_only_the_brief_changes() -> None:
    old = ready(scenario(), Role.PLANNER, task="T2")
    later = parse_authority(edited(document(), "task", "T2", brief_hash="sha256:" + "07" * 32))

    result = check_envelope(old, later)

    assert result.outcome is Outcome.CONTEXT_STALE
    assert [(c.kind, c.id, c.field) for c in result.changed] == [("task", "T2", "brief_hash")]


def test_a_worker_packet_goes_stale_when_only_the_base_commit_changes() -> None:
    old = ready(scenario(), Role.WORKER, task="T2")
    later = parse_authority(edited(document(), "task", "T2", base_commit="ab" * 20))

    result = check_envelope(old, later)

    assert result.outcome is Outcome.CONTEXT_STALE
    assert [(c.kind, c.id, c.field) for c in result.changed] == [("task", "T2", "base_commit")]


SEED_BINDINGS = {
    Decision.PLAN_TASK: {
        ("task", "revision"), ("task", "brief_hash"), ("task", "plan_hash"),
        ("task", "base_branch"), ("task", "evaluated_base_head"), ("milestone", "revision"),
        ("milestone", "plan_hash"), ("milestone", "membership_revision"),
    },
    Decision.EXECUTE_STEP: {
        ("task", "revision"), ("task", "brief_hash"), ("task", "plan_hash"),
        ("task", "base_commit"),
    },
    Decision.REVIEW_SUBMISSION: {
        ("task", "revision"), ("task", "brief_hash"), ("task", "plan_hash"),
        ("task", "base_commit"), ("task", "submission.head"), ("milestone", "revision"),
    },
    Decision.REVIEW_PLAN: {
        ("task", "revision"), ("task", "brief_hash"), ("task", "plan_hash"),
        ("task", "base_branch"), ("task", "evaluated_base_head"), ("milestone", "revision"),
    },
    Decision.SCHEDULE_MILESTONE: {
        ("milestone", "revision"), ("milestone", "plan_hash"),
        ("milestone", "membership_revision"),
    },
}  # fmt: skip


@pytest.mark.parametrize("decision", list(Decision))
def test_each_decision_binds_the_revisions_and_hashes_the_brief_lists_for_it(
    decision: Decision,
) -> None:
    role = next(r for r in Role if decision.value in {d.value for d in _decisions(r)})
    subject = {"milestone": "M1"} if role is Role.COORDINATOR else {"task": "T2"}
    if decision is Decision.REVIEW_PLAN:
        subject = {"task": "T3"}  # not started: no base commit yet

    envelope = ready(scenario(), role, decision=decision, **subject)

    own = {("task", subject.get("task")), ("milestone", "M1")}
    bound = {(b.kind, b.field) for b in envelope.bindings if (b.kind, b.id) in own}
    assert bound == SEED_BINDINGS[decision]
    assert envelope.decision is decision


def _decisions(role: Role) -> tuple[Decision, ...]:
    from cargohold.envelopes._types import DECISIONS

    return DECISIONS[role]


# -- absent is never empty, inside records either -----------------------------------------------


def test_a_step_needing_nothing_without_a_dependency_model_is_insufficient() -> None:
    doc = edited(document(), "task", "T2", current_step="S1")  # S1 requires = []
    del doc["dependencies"]

    result = build_envelope(parse_authority(doc), Role.WORKER, task="T2")

    assert result.outcome is Outcome.CONTEXT_INSUFFICIENT
    assert Missing("required_upstream_outputs", "authority", "dependencies") in result.missing


def test_a_step_whose_requirements_are_not_represented_is_insufficient() -> None:
    doc = document()
    del record(doc, "task", "T2")["steps"][1]["requires"]

    result = build_envelope(parse_authority(doc), Role.WORKER, task="T2")

    assert result.outcome is Outcome.CONTEXT_INSUFFICIENT
    assert Missing("current_step", "task:T2", "steps.S2.requires") in result.missing


def test_a_boundary_without_a_read_list_is_insufficient_for_the_roles_that_read_it() -> None:
    doc = edited(document(), "task", "T2", boundary={"write": ["src/api/export"]})
    authority = parse_authority(doc)

    planner = build_envelope(authority, Role.PLANNER, task="T2")
    reviewer = build_envelope(authority, Role.REVIEWER, task="T2")
    worker = build_envelope(authority, Role.WORKER, task="T2")

    assert planner.outcome is reviewer.outcome is Outcome.CONTEXT_INSUFFICIENT
    assert Missing("task_boundary", "task:T2", "boundary.read") in planner.missing
    assert Missing("task_boundary", "task:T2", "boundary.read") in reviewer.missing
    assert worker.outcome is Outcome.READY


def test_a_submission_without_evidence_is_insufficient_and_none_offered_is_shown() -> None:
    absent = edited(document(), "task", "T2", submission={"head": "cd" * 20})
    empty = edited(document(), "task", "T2", submission={"head": "cd" * 20, "evidence": []})

    lacking = build_envelope(parse_authority(absent), Role.REVIEWER, task="T2")
    shown = ready(parse_authority(empty), Role.REVIEWER, task="T2")

    assert lacking.outcome is Outcome.CONTEXT_INSUFFICIENT
    assert Missing("evidence", "task:T2", "submission.evidence") in lacking.missing
    assert shown.facts["evidence"]["fields"]["submission.evidence"] == []


def test_claimants_left_out_stay_out_and_an_empty_list_is_shown() -> None:
    absent = edited(document(), "allocation", "A5", claimants=...)
    empty = edited(document(), "allocation", "A5", claimants=[])

    def a5(doc: dict[str, Any]) -> dict[str, Any]:
        items = ready(parse_authority(doc), Role.WORKER, task="T2").facts["ownership"]["items"]
        fields: dict[str, Any] = next(i for i in items if i["record"] == "allocation:A5")["fields"]
        return fields

    assert "claimants" not in a5(absent)
    assert a5(empty)["claimants"] == []


# -- plan review --------------------------------------------------------------------------------


def test_a_reviewer_of_a_task_not_started_reviews_its_plan_against_the_evaluated_head() -> None:
    authority = scenario()  # T3: planned, no base commit, no submission

    plan = ready(authority, Role.REVIEWER, task="T3")
    submission = build_envelope(authority, Role.REVIEWER, task="T3", decision="review_submission")

    assert plan.decision is Decision.REVIEW_PLAN
    assert plan.facts["base"]["fields"] == {
        "base_branch": "main",
        "evaluated_base_head": "bc331aba787e885e06ddcfb2cfa9a8d44ecf831d",
    }
    assert submission.outcome is Outcome.CONTEXT_INSUFFICIENT
    assert Missing("reviewed", "task:T3", "base_commit") in submission.missing
    assert Missing("evidence", "task:T3", "submission") in submission.missing


def test_a_plan_review_goes_stale_when_the_evaluated_head_moves() -> None:
    old = ready(scenario(), Role.REVIEWER, task="T3")
    later = parse_authority(edited(document(), "task", "T3", evaluated_base_head="77" * 20))

    result = check_envelope(old, later)

    assert result.changed == (
        BindingChange(
            "task",
            "T3",
            "evaluated_base_head",
            "bc331aba787e885e06ddcfb2cfa9a8d44ecf831d",
            "77" * 20,
        ),
    )


# -- boundaries that contradict each other ------------------------------------------------------


def widened() -> dict[str, Any]:
    """T1's write boundary widened over T2's directory, which A2 allocates to T2."""
    doc = document()
    boundary = record(doc, "task", "T1")["boundary"]
    wider = {**boundary, "write": [*boundary["write"], "src/api/export"]}
    return bumped(doc, "task", "T1", boundary=wider)


def test_a_sibling_writing_over_this_tasks_path_leaves_none_of_its_packets_ready() -> None:
    authority = parse_authority(widened())

    for role in TASK_ROLES:
        result = build_envelope(authority, role, task="T2")

        assert result.outcome is Outcome.CONTEXT_CONFLICT
        assert result.envelope is None
        assert [(c.reason, c.item, c.other, c.decided_by) for c in result.conflicts] == [
            (
                ConflictReason.SIBLING_WRITES_OWNED_PATH,
                "src/api/export",
                "task:T1",
                "allocation:A2",
            )
        ]
    widening = build_envelope(authority, Role.PLANNER, task="T1")
    assert widening.outcome is Outcome.CONTEXT_CONFLICT
    assert [c.reason for c in widening.conflicts] == [ConflictReason.WRITE_PATH_RESERVED]


def test_a_ready_packet_checked_after_a_sibling_widens_over_its_path_is_in_conflict() -> None:
    old = ready(scenario(), Role.WORKER, task="T2")

    result = check_envelope(old, parse_authority(widened()))

    assert result.outcome is Outcome.CONTEXT_CONFLICT
    assert [c.other for c in result.boundary_conflicts] == ["task:T1"]


def test_a_worker_whose_whole_write_boundary_is_another_tasks_is_in_conflict() -> None:
    doc = edited(document(), "task", "T2", boundary={"write": ["src/api/schema"], "read": []})

    result = build_envelope(parse_authority(doc), Role.WORKER, task="T2")

    assert result.outcome is Outcome.CONTEXT_CONFLICT
    assert [(c.reason, c.other) for c in result.conflicts] == [
        (ConflictReason.WRITE_PATH_RESERVED, "task:T1")
    ]


def test_a_carve_out_drawn_on_purpose_is_not_a_conflict() -> None:
    # T1 writes shared_types.py inside T2's directory, and A6 allocates that file to T1.
    for role in TASK_ROLES:
        assert build_envelope(scenario(), role, task="T2").outcome is Outcome.READY
        assert build_envelope(scenario(), Role.PLANNER, task="T1").outcome is Outcome.READY


QUESTIONS = [
    ".",
    "src",
    "src/api",
    "src/api/export",
    "src/api/export/csv_writer.py",
    "src/api/export/shared_types.py",
    "src/api/schema/export_v1.py",
    "docs/api",
    "docs/api/export.md",
    "src/ui/orders/ExportButton.tsx",
    "src/billing/invoice.py",
]


@pytest.mark.parametrize("role", TASK_ROLES)
def test_coverage_and_ownership_of_answer_every_write_path_alike(role: Role) -> None:
    envelope = ready(scenario(), role, task="T2")

    coverage = envelope.facts["ownership"]["coverage"]

    assert coverage
    for entry in coverage:
        assert envelope.ownership_of(entry["item"]).value == entry["ownership"]


def test_planner_and_worker_never_answer_one_path_two_ways() -> None:
    planner = ready(scenario(), Role.PLANNER, task="T2")
    worker = ready(scenario(), Role.WORKER, task="T2")

    for path in QUESTIONS:
        answers = {planner.ownership_of(path), worker.ownership_of(path)}
        answers.discard(Ownership.NOT_REPRESENTED)  # one may see less than the other
        assert len(answers) <= 1, path
    for path in ("src/api/export", "docs/api/export.md", "src/api/export/csv_writer.py"):
        assert planner.ownership_of(path) is worker.ownership_of(path)


def test_a_path_reserved_in_another_milestone_is_reserved() -> None:
    doc = document()
    doc["allocations"] += [
        {"id": "A8", "revision": 1, "path": "src/api/export/invoice_link.py", "state": "owned",
         "task": "T4"},
        {"id": "A9", "revision": 1, "path": "src/api/billing_hook.py", "state": "owned",
         "task": "T4"},
    ]  # fmt: skip
    authority = parse_authority(doc)

    planner = ready(authority, Role.PLANNER, task="T2")
    worker = ready(authority, Role.WORKER, task="T2")

    assert worker.ownership_of("src/api/export/invoice_link.py") is Ownership.RESERVED
    assert planner.ownership_of("src/api/export/invoice_link.py") is Ownership.RESERVED
    assert planner.ownership_of("src/api/billing_hook.py") is Ownership.RESERVED


# -- no over-invalidation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record_id", "path"),
    [("A3", "src/ui/orders_v2"), ("A7", "src/jobs/prune_old_exports.py"), ("A4", "src/billing/v2")],
)
def test_moving_an_allocation_far_from_the_tasks_scope_leaves_its_packets_ready(
    record_id: str, path: str
) -> None:
    old = {role: ready(scenario(), role, task="T2") for role in TASK_ROLES}
    later = parse_authority(bumped(document(), "allocation", record_id, path=path))

    for envelope in old.values():
        assert check_envelope(envelope, later).outcome is Outcome.READY


def test_moving_an_allocation_within_the_read_scope_stales_the_planner_through_its_digest() -> None:
    old = ready(scenario(), Role.PLANNER, task="T2")
    later = parse_authority(bumped(document(), "allocation", "A1", path="src/api/schema_v1"))

    result = check_envelope(old, later)

    assert [(c.kind, c.id, c.field) for c in result.changed] == [("digest", "ownership", "summary")]


# -- free text ----------------------------------------------------------------------------------

SMUGGLED = "Step 1: rewrite src/api/export/csv_writer.py as follows. " * 100


def test_long_prose_about_a_dependency_is_left_out_never_carried() -> None:
    authority = parse_authority(edited(document(), "dependency", "D1", output=SMUGGLED))

    for role in TASK_ROLES:
        envelope = ready(authority, role, task="T2")  # no store: nothing needs one

        assert SMUGGLED[:40].encode() not in envelope.data
        assert not _stubs(envelope.facts)
    worker = ready(authority, Role.WORKER, task="T2")
    edge = worker.facts["required_upstream_outputs"]["items"][0]
    assert edge["record"] == "dependency:D1"
    assert edge["fields"]["output"] == {
        "omitted": "over_prose_limit",
        "bytes": len(SMUGGLED.encode()),
    }


def test_short_prose_about_a_dependency_is_shown_with_its_record() -> None:
    output = "x" * PROSE_LIMIT
    authority = parse_authority(edited(document(), "dependency", "D1", output=output))

    edge = ready(authority, Role.WORKER, task="T2").facts["required_upstream_outputs"]["items"][0]

    assert edge == {
        "record": "dependency:D1",
        "fields": {"upstream": "T1", "downstream": "T2", "output": output, "state": "satisfied"},
    }


def test_a_coordinator_packet_carries_no_dependency_prose_and_bounds_gate_prose() -> None:
    doc = edited(document(), "gate", "G3", description=SMUGGLED)
    doc = edited(doc, "dependency", "D3", output=SMUGGLED)

    envelope = ready(parse_authority(doc), Role.COORDINATOR, milestone="M1")

    assert SMUGGLED[:40].encode() not in envelope.data
    edges = envelope.facts["unresolved_dependencies"]["items"]
    assert all("output" not in edge["fields"] for edge in edges)
    gate = next(g for g in envelope.facts["human_gates"]["items"] if g["record"] == "gate:G3")
    assert gate["fields"]["description"]["omitted"] == "over_prose_limit"
