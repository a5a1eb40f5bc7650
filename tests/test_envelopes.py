"""Coordination envelopes: role facts, ownership values, freshness, budgets and determinism.

The acceptance points of section 7 of the P03 brief and the fresh role-separated scenario of its
section 4.1 are tested by name near the end of this file.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest

import cargohold
from cargohold.envelopes import (
    DEFAULT_BUDGET,
    AuthorityError,
    BindingChange,
    ContextNotReadyError,
    Decision,
    Envelope,
    EnvelopeError,
    Missing,
    Outcome,
    Ownership,
    Role,
    build_envelope,
    canonical_json,
    check_envelope,
    load_authority,
    load_facts,
    parse_authority,
    require_ready,
)
from envelopes_fixtures import (
    SCENARIO_JSON,
    SCENARIO_TOML,
    SNAPSHOTS,
    SUCCESSFUL_TOML,
    TASK_ROLES,
    bumped,
    document,
    edited,
    ready,
    record,
    resolve,
    scenario,
)

ROLE_FACTS = {
    Role.PLANNER: {
        "milestone_objective",
        "task_objective",
        "brief",
        "task_boundary",
        "base",
        "upstream_dependencies",
        "downstream_dependencies",
        "ownership",
        "sibling_boundaries",
        "unresolved_prerequisites",
    },
    Role.WORKER: {
        "brief",
        "plan",
        "base",
        "current_step",
        "required_upstream_outputs",
        "write_boundary",
        "ownership",
        "sibling_boundaries",
        "execution_blockers",
    },
    Role.REVIEWER: {
        "reviewed",
        "evidence",
        "milestone_objective",
        "task_objective",
        "task_boundary",
        "upstream_dependencies",
        "downstream_dependencies",
        "ownership",
        "sibling_boundaries",
    },
    Role.COORDINATOR: {
        "milestone_revisions",
        "runnable_tasks",
        "blocked_tasks",
        "other_members",
        "unresolved_dependencies",
        "human_gates",
    },
}

SIBLINGS = ("T1", "T3", "T5")
SIBLING_INTERNALS = ("plan_hash", "brief_hash", "objective", "evaluated_base_head", "base_commit")


def packet_of(role: Role, authority: cargohold.envelopes.Authority | None = None) -> Envelope:
    return ready(authority or scenario(), role, task="T2")


def binding_keys(envelope: Envelope) -> set[tuple[str, str, str]]:
    return {(b.kind, b.id, b.field) for b in envelope.bindings}


def entries(envelope: Envelope) -> list[dict[str, Any]]:
    """Every single fact and every collection item of a packet that names a record and its
    fields (a sibling boundary names one field and lists its items; a summary holds counts)."""
    found = []
    for fact in envelope.facts.values():
        found.extend([fact] if "record" in fact else fact.get("items", []))
    return [entry for entry in found if "fields" in entry]


def sourced_values(envelope: Envelope) -> dict[tuple[str, str], Any]:
    return {
        (entry["record"], name): value
        for entry in entries(envelope)
        for name, value in entry["fields"].items()
    }


# -- what each role receives --------------------------------------------------------------------


@pytest.mark.parametrize("role", list(Role))
def test_each_role_receives_exactly_the_facts_of_its_decision(role: Role) -> None:
    envelope = packet_of(role)

    assert set(envelope.facts) == ROLE_FACTS[role]
    assert envelope.role is role


@pytest.mark.parametrize("role", list(Role))
def test_every_fact_names_its_source_record_and_field_and_holds_the_authority_value(
    role: Role,
) -> None:
    doc = document()
    envelope = packet_of(role)

    values = sourced_values(envelope)

    assert values
    for (record_name, name), value in values.items():
        assert resolve(doc, record_name, name) == value
    for fact in envelope.facts.values():
        if "items" in fact:
            assert set(fact["source"]) == {"record", "field"}
            summarised = fact.get("summary", {}).get("records", 0)
            assert fact["state"] == ("known" if fact["items"] or summarised else "known_empty")
    for item in envelope.facts.get("sibling_boundaries", {}).get("items", []):
        assert set(item["items"]) <= set(resolve(doc, item["record"], item["field"]))


def test_a_planner_binds_only_what_its_facts_rest_on() -> None:
    envelope = packet_of(Role.PLANNER)

    assert binding_keys(envelope) == {
        ("allocation", "A2", "revision"),
        ("allocation", "A5", "revision"),
        ("allocation", "A6", "revision"),
        ("dependency", "D1", "revision"),
        ("dependency", "D2", "revision"),
        ("dependency", "D3", "revision"),
        ("digest", "ownership", "summary"),
        ("digest", "sibling_boundaries", "boundary.write"),
        ("milestone", "M1", "membership_revision"),
        ("milestone", "M1", "plan_hash"),
        ("milestone", "M1", "revision"),
        ("prerequisite", "P1", "revision"),
        ("task", "T2", "base_branch"),
        ("task", "T2", "brief_hash"),
        ("task", "T2", "evaluated_base_head"),
        ("task", "T2", "plan_hash"),
        ("task", "T2", "revision"),
    }


def test_bindings_are_ordered_by_kind_id_and_field_as_tuples() -> None:
    envelope = packet_of(Role.PLANNER)

    keys = [(b.kind, b.id, b.field) for b in envelope.bindings]

    assert keys == sorted(keys)


def test_a_worker_gets_its_current_step_and_the_upstream_outputs_that_step_requires() -> None:
    envelope = packet_of(Role.WORKER)

    step = envelope.facts["current_step"]["fields"]
    outputs = envelope.facts["required_upstream_outputs"]["items"]
    blockers = envelope.facts["execution_blockers"]["items"]

    assert step["current_step"] == "S2"
    assert step["steps.S2.requires"] == ["D1"]
    assert [o["record"] for o in outputs] == ["dependency:D1"]
    assert outputs[0]["fields"]["state"] == "satisfied"
    assert [b["record"] for b in blockers] == ["blocker:B1"]  # B2 is cleared


def test_a_step_that_requires_nothing_has_known_empty_upstream_outputs() -> None:
    authority = parse_authority(edited(document(), "task", "T2", current_step="S1"))

    outputs = ready(authority, Role.WORKER, task="T2").facts["required_upstream_outputs"]

    assert outputs["state"] == Ownership.KNOWN_EMPTY.value
    assert outputs["items"] == []


def test_a_coordinator_sees_runnable_and_blocked_tasks_pending_edges_and_required_gates() -> None:
    envelope = ready(scenario(), Role.COORDINATOR, milestone="M1")

    facts = envelope.facts
    assert facts["runnable_tasks"]["records"] == ["task:T5"]
    assert facts["blocked_tasks"]["records"] == ["task:T3"]
    assert [i["record"] for i in facts["unresolved_dependencies"]["items"]] == ["dependency:D3"]
    assert facts["unresolved_dependencies"]["rest"]["records"] == 1  # D2, into blocked T3
    assert [i["record"] for i in facts["human_gates"]["items"]] == ["gate:G1", "gate:G3"]
    assert facts["other_members"]["records"] == 3
    assert facts["other_members"]["by_status"] == {"blocked": 1, "done": 1, "running": 1}
    assert ("task", "T5", "revision") in binding_keys(envelope)
    assert ("digest", "other_members", "tasks") in binding_keys(envelope)


def test_a_coordinator_given_a_task_works_on_that_tasks_milestone() -> None:
    authority = scenario()

    by_task = ready(authority, Role.COORDINATOR, task="T3")
    by_milestone = ready(authority, Role.COORDINATOR, milestone="M1")

    assert by_task.data == by_milestone.data
    assert by_task.milestone == "M1"
    assert by_task.task is None


@pytest.mark.parametrize(
    ("role", "task", "milestone"),
    [
        ("planner", None, None),
        ("planner", "T2", "M1"),
        ("worker", None, "M1"),
        ("coordinator", None, None),
        ("coordinator", "T2", "M1"),
        ("reviewer", "T:2", None),
        ("auditor", "T2", None),
    ],
)
def test_a_bad_role_or_subject_is_a_usage_error(
    role: str, task: str | None, milestone: str | None
) -> None:
    with pytest.raises(cargohold.UsageError):
        build_envelope(scenario(), role, task=task, milestone=milestone)


@pytest.mark.parametrize(("budget", "fact_limit"), [(1023, 2048), (16384, 127), (2**21, 2048)])
def test_a_budget_or_fact_limit_out_of_range_is_a_usage_error(budget: int, fact_limit: int) -> None:
    with pytest.raises(cargohold.UsageError):
        build_envelope(scenario(), "planner", task="T2", budget=budget, fact_limit=fact_limit)


@pytest.mark.parametrize("role", list(Role))
def test_each_role_packet_matches_its_snapshot(role: Role) -> None:
    envelope = packet_of(role)

    expected = (SNAPSHOTS / f"{role.value}-T2.json").read_bytes()

    assert envelope.data + b"\n" == expected


def test_a_plan_review_packet_matches_its_snapshot() -> None:
    envelope = ready(scenario(), Role.REVIEWER, task="T3")  # planned: no base commit yet

    expected = (SNAPSHOTS / "reviewer-T3-review_plan.json").read_bytes()

    assert envelope.decision is Decision.REVIEW_PLAN
    assert envelope.data + b"\n" == expected


# -- the five ownership values ------------------------------------------------------------------


def test_a_write_path_is_owned_when_its_deepest_allocation_is_the_tasks() -> None:
    envelope = packet_of(Role.WORKER)

    assert envelope.ownership_of("src/api/export/csv_writer.py") is Ownership.OWNED
    assert envelope.ownership_of("src/api/export") is Ownership.RESERVED  # holds T1's file


def test_a_path_allocated_to_another_task_is_reserved() -> None:
    envelope = packet_of(Role.WORKER)

    assert envelope.ownership_of("src/api/export/shared_types.py") is Ownership.RESERVED


def test_an_explicitly_unresolved_allocation_is_unresolved() -> None:
    envelope = packet_of(Role.WORKER)

    coverage = {c["item"]: c["ownership"] for c in envelope.facts["ownership"]["coverage"]}

    assert coverage["docs/api/export.md"] == "unresolved"
    assert envelope.ownership_of("docs/api/export.md") is Ownership.UNRESOLVED


def test_a_path_the_packet_says_nothing_about_is_not_represented_never_permitted() -> None:
    worker = packet_of(Role.WORKER)
    coordinator = ready(scenario(), Role.COORDINATOR)

    assert worker.ownership_of("README.md") is Ownership.NOT_REPRESENTED
    assert worker.ownership_of("src/billing/invoice.py") is Ownership.NOT_REPRESENTED
    assert coordinator.ownership_of("src/api/export/x.py") is Ownership.NOT_REPRESENTED


def test_a_task_with_nothing_allocated_or_bounded_has_known_empty_ownership() -> None:
    doc = edited(document(), "task", "T4", boundary={"write": [], "read": []})
    doc["allocations"] = [a for a in doc["allocations"] if a["id"] != "A4"]

    envelope = ready(parse_authority(doc), Role.PLANNER, task="T4")

    assert envelope.facts["ownership"]["state"] == Ownership.KNOWN_EMPTY.value
    assert envelope.facts["ownership"]["items"] == []


def test_an_unrepresented_ownership_collection_is_insufficient_not_an_empty_list() -> None:
    doc = document()
    del doc["allocations"]

    result = build_envelope(parse_authority(doc), Role.WORKER, task="T2")

    assert result.outcome is Outcome.CONTEXT_INSUFFICIENT
    assert result.envelope is None
    assert Missing("ownership", "authority", "allocations") in result.missing


def test_an_empty_ownership_collection_does_not_cover_a_write_boundary() -> None:
    doc = document()
    doc["allocations"] = []

    result = build_envelope(parse_authority(doc), Role.WORKER, task="T2")

    assert result.outcome is Outcome.CONTEXT_INSUFFICIENT
    assert set(result.missing) == {
        Missing("ownership", "task:T2", "boundary.write", "src/api/export"),
        Missing("ownership", "task:T2", "boundary.write", "docs/api/export.md"),
    }


def test_ownership_of_a_malformed_path_is_an_error() -> None:
    with pytest.raises(AuthorityError):
        packet_of(Role.WORKER).ownership_of("../etc/passwd")


# -- freshness ----------------------------------------------------------------------------------


def test_a_packet_checked_against_its_own_authority_is_ready() -> None:
    for role in Role:
        envelope = packet_of(role)
        assert check_envelope(envelope, scenario()).outcome is Outcome.READY
        assert check_envelope(envelope.data, scenario()).outcome is Outcome.READY


def test_a_changed_binding_is_reported_with_its_old_and_new_value() -> None:
    envelope = packet_of(Role.PLANNER)
    later = parse_authority(bumped(document(), "task", "T2", objective="Stream TSV instead."))

    result = check_envelope(envelope, later)

    assert result.outcome is Outcome.CONTEXT_STALE
    assert result.changed == (BindingChange("task", "T2", "revision", 4, 5),)


def test_a_newly_relevant_record_makes_the_packet_stale() -> None:
    envelope = packet_of(Role.PLANNER)
    doc = document()
    doc["prerequisites"].append(
        {"id": "P9", "revision": 1, "task": "T2", "state": "unresolved", "description": "x"}
    )

    result = check_envelope(envelope, parse_authority(doc))

    assert result.outcome is Outcome.CONTEXT_STALE
    assert result.changed == (BindingChange("prerequisite", "P9", "revision", None, 1),)


def test_a_record_that_stops_being_relevant_makes_the_packet_stale() -> None:
    envelope = packet_of(Role.PLANNER)
    later = parse_authority(bumped(document(), "prerequisite", "P1", state="satisfied"))

    result = check_envelope(envelope, later)

    assert result.changed == (BindingChange("prerequisite", "P1", "revision", 1, None),)


def test_a_fact_changed_without_its_revision_is_a_conflict_and_stale() -> None:
    envelope = packet_of(Role.PLANNER)
    later = parse_authority(edited(document(), "task", "T2", objective="Quietly different."))

    result = check_envelope(envelope, later)

    assert result.outcome is Outcome.CONTEXT_STALE
    assert result.changed == ()
    assert result.conflicts == ("task_objective",)


def test_a_check_against_an_authority_that_lost_a_required_fact_is_insufficient() -> None:
    envelope = packet_of(Role.WORKER)
    doc = document()
    del doc["blockers"]

    result = check_envelope(envelope, parse_authority(doc))

    assert result.outcome is Outcome.CONTEXT_INSUFFICIENT
    assert result.missing == (Missing("execution_blockers", "authority", "blockers"),)


def test_a_stale_packet_is_never_repaired_only_replaced_by_a_rebuild() -> None:
    envelope = packet_of(Role.REVIEWER)
    original = envelope.data
    later = parse_authority(bumped(document(), "task", "T2", base_commit="ab" * 20))

    first = check_envelope(envelope, later)
    second = check_envelope(envelope, later)
    rebuilt = ready(later, Role.REVIEWER, task="T2")

    assert first.outcome is second.outcome is Outcome.CONTEXT_STALE
    assert envelope.data == original
    assert rebuilt.digest != envelope.digest
    assert check_envelope(rebuilt, later).outcome is Outcome.READY


def test_require_ready_refuses_a_stale_packet_and_returns_a_fresh_one() -> None:
    envelope = packet_of(Role.WORKER)
    later = parse_authority(bumped(document(), "task", "T2", plan_hash="sha256:" + "ab" * 32))

    assert require_ready(envelope.data, scenario()) == envelope
    with pytest.raises(ContextNotReadyError) as caught:
        require_ready(envelope, later)
    assert caught.value.outcome is Outcome.CONTEXT_STALE


# -- the packet document ------------------------------------------------------------------------


def test_the_digest_is_the_sha256_of_the_canonical_packet_bytes() -> None:
    envelope = packet_of(Role.PLANNER)
    document_ = json.loads(envelope.data)

    body = json.dumps(
        document_["packet"], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode()

    assert envelope.digest == "sha256:" + hashlib.sha256(body).hexdigest()
    assert envelope.data == canonical_json(document_)
    assert document_["digest"] == envelope.digest


def test_a_reformatted_packet_parses_to_the_same_envelope() -> None:
    envelope = packet_of(Role.PLANNER)

    pretty = json.dumps(json.loads(envelope.data), indent=2)

    assert Envelope.parse(pretty) == envelope
    assert Envelope.parse(pretty).data == envelope.data


def test_an_edited_packet_is_refused_not_checked() -> None:
    document_ = json.loads(packet_of(Role.PLANNER).data)
    document_["packet"]["facts"]["task_objective"]["fields"]["objective"] = "Anything goes."

    with pytest.raises(EnvelopeError) as caught:
        check_envelope(json.dumps(document_), scenario())
    assert caught.value.code == "envelope"


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"not json",
        b"[]",
        b'{"digest": "sha256:00", "packet": {}}',
        b'{"packet": {}}',
        "\udcff".encode("utf-8", "surrogatepass"),
    ],
)
def test_bytes_that_are_not_a_packet_are_an_envelope_error(text: bytes) -> None:
    with pytest.raises(EnvelopeError):
        Envelope.parse(text)


def test_a_packet_of_another_format_or_with_a_float_is_refused() -> None:
    def resealed(packet: dict[str, Any]) -> bytes:
        body = json.dumps(packet, sort_keys=True, separators=(",", ":")).encode()
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        return json.dumps({"digest": digest, "packet": packet}).encode()

    packet = json.loads(packet_of(Role.PLANNER).data)["packet"]
    other = {**packet, "format": "cargohold.envelope/1"}
    floating = {**packet, "budget": 16384.5}

    for data in (resealed(other), resealed(floating)):
        with pytest.raises(EnvelopeError):
            Envelope.parse(data)


def test_the_repr_of_a_packet_shows_no_fact() -> None:
    envelope = packet_of(Role.PLANNER)

    text = repr(envelope)

    assert "Serve GET" not in text
    assert "src/api" not in text


# -- budgets and references ---------------------------------------------------------------------


@pytest.fixture
def scoped() -> cargohold.ScopedStore:
    return cargohold.ScopedStore(
        cargohold.MemoryStore(), cargohold.Scope("tenant-e", "user-e", "session-e")
    )


def long_objective_authority(size: int = 6000) -> tuple[cargohold.envelopes.Authority, str]:
    text = "Export every order field the schema allows. " * (size // 44 + 1)
    return parse_authority(edited(document(), "task", "T2", objective=text)), text


def test_a_long_text_travels_as_a_reference_to_its_exact_bytes(
    scoped: cargohold.ScopedStore,
) -> None:
    authority, text = long_objective_authority()

    envelope = ready(authority, Role.PLANNER, task="T2", store=scoped)

    value = envelope.facts["task_objective"]["fields"]["objective"]
    assert set(value) == {"artifact", "bytes", "media_type"}
    assert value["bytes"] == len(text.encode())
    assert scoped.read(value["artifact"]).raise_for_outcome() == text.encode()
    assert envelope.size <= DEFAULT_BUDGET


def test_a_packet_that_needs_a_reference_without_a_store_is_refused_not_truncated() -> None:
    authority, _ = long_objective_authority()

    result = build_envelope(authority, Role.PLANNER, task="T2")

    assert result.outcome is Outcome.OVER_BUDGET
    assert result.reason == "needs_store"
    assert result.envelope is None


def many_allocations_authority(count: int = 300) -> cargohold.envelopes.Authority:
    doc = document()
    doc["allocations"].extend(
        {
            "id": f"N{i:03d}",
            "revision": 1,
            "path": f"src/api/export/generated/part_{i:03d}.py",
            "state": "owned",
            "task": "T2",
        }
        for i in range(count)
    )
    return parse_authority(doc)


def test_ownership_too_large_for_the_budget_is_refused_never_moved_out(
    scoped: cargohold.ScopedStore,
) -> None:
    authority = many_allocations_authority(150)

    refused = build_envelope(authority, Role.WORKER, task="T2", budget=16384, store=scoped)
    roomier = ready(authority, Role.WORKER, task="T2", budget=65536, store=scoped)

    assert refused.outcome is Outcome.OVER_BUDGET
    assert refused.reason == "too_large"
    assert len(roomier.facts["ownership"]["items"]) == 153
    assert roomier.ownership_of("src/api/export/x.py") is Ownership.OWNED
    assert roomier.ownership_of("src/api/export/shared_types.py") is Ownership.RESERVED
    assert "artifact" not in json.dumps(roomier.facts["ownership"])


def test_a_packet_whose_bindings_alone_exceed_the_budget_is_over_budget(
    scoped: cargohold.ScopedStore,
) -> None:
    result = build_envelope(
        many_allocations_authority(300), Role.WORKER, task="T2", budget=4096, store=scoped
    )

    assert result.outcome is Outcome.OVER_BUDGET
    assert result.reason == "too_large"
    assert result.size is not None
    assert result.size > 4096


def test_a_check_only_hashes_large_facts_and_writes_nothing(
    scoped: cargohold.ScopedStore,
) -> None:
    authority, _ = long_objective_authority()
    envelope = ready(authority, Role.PLANNER, task="T2", store=scoped)
    stored = len(scoped.artifacts())

    result = check_envelope(envelope, authority)

    assert result.outcome is Outcome.READY
    # The objective, and the detail behind the packet's two digest bindings.
    assert len(scoped.artifacts()) == stored == 3


# -- the fresh role-separated scenario (section 4.1) --------------------------------------------


def test_fresh_role_separated_scenario() -> None:
    # 1-2. A fresh authority with semantic boundaries and canonical dependencies.
    doc = document()
    authority = parse_authority(doc)

    # 3. Planner, Worker and Reviewer packets, built independently (any order, same bytes).
    packets = {role: ready(authority, role, task="T2") for role in TASK_ROLES}
    reversed_order = {role: ready(authority, role, task="T2") for role in reversed(TASK_ROLES)}
    assert packets == reversed_order
    assert len({p.digest for p in packets.values()}) == 3

    # 4-5. A planner proposal entering a sibling's scope sees the boundary, not the sibling plan.
    planner = packets[Role.PLANNER]
    proposal = [
        "src/api/export/csv_writer.py",
        "src/api/export/shared_types.py",  # T1's file inside T2's directory
        "src/api/schema/export_v1.py",  # T1's directory, in T2's read scope
        "src/ui/orders/ExportButton.tsx",  # T3's, outside T2's scope: never permitted
    ]
    assert [planner.ownership_of(path) for path in proposal] == [
        Ownership.OWNED,
        Ownership.RESERVED,
        Ownership.RESERVED,
        Ownership.NOT_REPRESENTED,
    ]
    boundary = next(
        item for item in planner.facts["ownership"]["items"] if item["record"] == "allocation:A6"
    )
    assert boundary["fields"] == {
        "path": "src/api/export/shared_types.py",
        "state": "owned",
        "task": "T1",
    }
    assert planner.facts["sibling_boundaries"]["items"] == [
        {
            "record": "task:T1",
            "field": "boundary.write",
            "items": ["src/api/export/shared_types.py"],
        }
    ]
    for sibling in ("T1", "T3"):
        internals = record(doc, "task", sibling)
        for name in SIBLING_INTERNALS:
            if name in internals:
                assert internals[name].encode() not in planner.data

    # 6. A relevant revision change: the old result can no longer authorize a transition.
    moved = parse_authority(bumped(doc, "allocation", "A6"))
    assert check_envelope(planner, moved).changed == (
        BindingChange("allocation", "A6", "revision", 1, 2),
    )
    with pytest.raises(ContextNotReadyError):
        require_ready(planner, moved)

    # 7. An irrelevant sibling change leaves the local context usable.
    sibling = bumped(
        doc, "task", "T3", plan_hash="sha256:" + "cd" * 32, objective="Now a dropdown."
    )
    for packet in packets.values():
        assert check_envelope(packet, parse_authority(sibling)).outcome is Outcome.READY


# -- section 7: implementation acceptance -------------------------------------------------------

RELEVANT_CHANGES = [
    ("planner", "milestone", "M1", {"objective": "Export as XLSX."}, "revision"),
    ("planner", "milestone", "M1", {"plan_hash": "sha256:" + "01" * 32}, "plan_hash"),
    ("planner", "milestone", "M1", {"membership_revision": 3}, "membership_revision"),
    ("planner", "task", "T2", {"evaluated_base_head": "ef" * 20}, "evaluated_base_head"),
    ("planner", "task", "T2", {"base_branch": "release"}, "base_branch"),
    ("planner", "dependency", "D1", {"state": "pending"}, "revision"),
    ("planner", "dependency", "D3", {"output": "export file names v2"}, "revision"),
    ("planner", "allocation", "A1", {"path": "src/api"}, "revision"),
    (
        "planner",
        "allocation",
        "A1",
        {"path": "src/api/schema_v1"},
        ("digest", "ownership", "summary"),
    ),
    ("planner", "prerequisite", "P1", {"description": "Legal and DPO approve."}, "revision"),
    ("worker", "task", "T2", {"brief_hash": "sha256:" + "02" * 32}, "brief_hash"),
    ("worker", "task", "T2", {"plan_hash": "sha256:" + "03" * 32}, "plan_hash"),
    ("worker", "task", "T2", {"current_step": "S1"}, "revision"),
    ("worker", "task", "T2", {"base_commit": "ab" * 20}, "base_commit"),
    ("worker", "dependency", "D1", {"state": "pending"}, "revision"),
    ("worker", "allocation", "A6", {}, "revision"),
    ("worker", "blocker", "B1", {"state": "cleared"}, "revision"),
    ("reviewer", "task", "T2", {"base_commit": "ab" * 20}, "base_commit"),
    (
        "reviewer",
        "task",
        "T2",
        {"submission": {"head": "cd" * 20, "evidence": []}},
        "submission.head",
    ),
    ("reviewer", "milestone", "M1", {"objective": "Export as XLSX."}, "revision"),
    ("reviewer", "dependency", "D2", {"state": "satisfied"}, "revision"),
    ("reviewer", "allocation", "A5", {"state": "owned", "task": "T2", "claimants": []}, "revision"),
    ("coordinator", "task", "T3", {"status": "runnable"}, "revision"),
    (
        "coordinator",
        "task",
        "T1",
        {"objective": "Schema v1.1"},
        ("digest", "other_members", "tasks"),
    ),
    ("coordinator", "milestone", "M1", {"plan_hash": "sha256:" + "04" * 32}, "plan_hash"),
    ("coordinator", "dependency", "D3", {"state": "satisfied"}, "revision"),
    (
        "coordinator",
        "dependency",
        "D2",
        {"state": "satisfied"},
        ("digest", "unresolved_dependencies", "rest"),
    ),
    ("coordinator", "gate", "G3", {"state": "passed"}, "revision"),
]


@pytest.mark.parametrize(
    ("role", "kind", "record_id", "changes", "field"),
    RELEVANT_CHANGES,
    ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[4]}" for c in RELEVANT_CHANGES],
)
def test_acceptance_1_relevant_authority_changes_invalidate_the_old_result(
    role: str, kind: str, record_id: str, changes: dict[str, Any], field: Any
) -> None:
    doc = document()
    old = ready(parse_authority(doc), role, task=None if role == "coordinator" else "T2")
    # A hash or membership change comes with a revision bump, as an authority records it.
    later = parse_authority(bumped(doc, kind, record_id, **changes))
    # A record summarised in the packet is bound through the digest of the summarised set.
    expected = field if isinstance(field, tuple) else (kind, record_id, field)

    result = check_envelope(old, later)

    assert result.outcome is Outcome.CONTEXT_STALE
    assert expected in {(c.kind, c.id, c.field) for c in result.changed}
    with pytest.raises(ContextNotReadyError):
        result.raise_for_outcome()


IRRELEVANT_CHANGES = [
    # Sibling internals: plans, briefs, objectives, heads of T1, T3, T5.
    *[
        ("task", sibling, {"plan_hash": "sha256:" + "aa" * 32, "objective": "Elsewhere."})
        for sibling in SIBLINGS
    ],
    ("task", "T3", {"evaluated_base_head": "99" * 20, "status": "running"}),
    # The other milestone and everything in it.
    ("milestone", "M2", {"objective": "Invoices weekly.", "plan_hash": "sha256:" + "bb" * 32}),
    ("task", "T4", {"objective": "Weekly invoices.", "brief_hash": "sha256:" + "cc" * 32}),
    ("allocation", "A4", {"path": "src/billing/v2"}),
    ("gate", "G4", {"state": "passed"}),
    # Siblings' prerequisites, blockers and gates.
    ("prerequisite", "P3", {"state": "satisfied"}),
    ("blocker", "B3", {"state": "cleared"}),
    ("gate", "G3", {"description": "Accessibility and i18n review."}),
    # Records of this task that none of its roles read.
    ("prerequisite", "P2", {"description": "Replica with 30-day retention."}),
    ("blocker", "B2", {"description": "Schema v1 was merged late."}),
    ("gate", "G2", {"description": "Security review done twice."}),
]


@pytest.mark.parametrize("role", TASK_ROLES)
@pytest.mark.parametrize(
    ("kind", "record_id", "changes"),
    IRRELEVANT_CHANGES,
    ids=[f"{c[0]}-{c[1]}-{'-'.join(c[2])}" for c in IRRELEVANT_CHANGES],
)
def test_acceptance_2_irrelevant_authority_changes_do_not_create_false_staleness(
    role: Role, kind: str, record_id: str, changes: dict[str, Any]
) -> None:
    doc = document()
    old = ready(parse_authority(doc), role, task="T2")

    result = check_envelope(old, parse_authority(bumped(doc, kind, record_id, **changes)))

    assert result.outcome is Outcome.READY


@pytest.mark.parametrize(
    ("role", "change"),
    [
        (Role.WORKER, ("milestone", "M1", {"objective": "Export as XLSX."})),
        (Role.WORKER, ("dependency", "D2", {"state": "satisfied"})),
        (Role.WORKER, ("prerequisite", "P1", {"state": "satisfied"})),
        (Role.WORKER, ("allocation", "A3", {"path": "src/ui"})),
        (Role.REVIEWER, ("prerequisite", "P1", {"state": "satisfied"})),
        (Role.REVIEWER, ("blocker", "B1", {"state": "cleared"})),
        (Role.REVIEWER, ("allocation", "A1", {"path": "src/api/schema/v2"})),
        (Role.PLANNER, ("blocker", "B1", {"state": "cleared"})),
        (Role.COORDINATOR, ("allocation", "A2", {"path": "src/api/export/v2"})),
        (Role.COORDINATOR, ("prerequisite", "P1", {"state": "satisfied"})),
        (Role.COORDINATOR, ("task", "T4", {"status": "done"})),
    ],
)
def test_acceptance_2_a_change_outside_a_roles_facts_does_not_stale_that_role(
    role: Role, change: tuple[str, str, dict[str, Any]]
) -> None:
    doc = document()
    kind, record_id, changes = change
    old = ready(parse_authority(doc), role, task=None if role is Role.COORDINATOR else "T2")

    result = check_envelope(old, parse_authority(bumped(doc, kind, record_id, **changes)))

    assert result.outcome is Outcome.READY


def test_acceptance_3_different_roles_receive_consistent_values_for_the_same_fact() -> None:
    doc = document()
    authority = parse_authority(doc)
    packets = [ready(authority, role, task="T2") for role in TASK_ROLES]
    packets.append(ready(authority, Role.COORDINATOR))

    seen: dict[tuple[str, str], list[Any]] = {}
    bound: dict[tuple[str, str, str], list[Any]] = {}
    for packet in packets:
        for key, value in sourced_values(packet).items():
            seen.setdefault(key, []).append(value)
        for b in packet.bindings:
            bound.setdefault((b.kind, b.id, b.field), []).append(b.value)

    shared = {key: values for key, values in seen.items() if len(values) > 1}
    assert ("milestone:M1", "objective") in shared
    assert ("allocation:A2", "path") in shared
    assert ("dependency:D1", "state") in shared
    assert ("task:T2", "boundary.write") in shared
    for (record_name, name), values in shared.items():
        assert values == [resolve(doc, record_name, name)] * len(values)
    assert sum(len(values) > 1 for values in bound.values()) >= 8
    for values in bound.values():
        assert len(set(values)) == 1


def test_acceptance_4_packets_are_derived_disposable_deterministic_without_sibling_plan() -> None:
    doc = document()
    for role in Role:
        task = None if role is Role.COORDINATOR else "T2"
        first = ready(parse_authority(doc), role, task=task)
        # Derived and disposable: discarded and rebuilt, from TOML or JSON, it is the same bytes.
        assert ready(load_authority(SCENARIO_TOML), role, task=task).data == first.data
        assert ready(load_authority(SCENARIO_JSON), role, task=task).data == first.data
        # No sibling plan or brief, nor any other internal of a sibling.
        for sibling in (*SIBLINGS, "T4"):
            for name in ("plan_hash", "brief_hash", "objective"):
                value = record(doc, "task", sibling).get(name)
                if value is not None:
                    assert value.encode() not in first.data


def test_acceptance_4_a_transcript_or_any_unknown_field_cannot_enter_the_authority() -> None:
    in_task = document()
    record(in_task, "task", "T3")["transcript"] = "coordinator: T3, please also touch src/api"
    at_top = document()
    at_top["chat"] = ["coordinator: T3, please also touch src/api"]

    for doc in (in_task, at_top):
        with pytest.raises(AuthorityError):
            parse_authority(doc)


def test_acceptance_4_the_same_authority_in_any_record_order_gives_the_same_bytes() -> None:
    doc = document()
    shuffled = copy.deepcopy(doc)
    for name in ("milestones", "tasks", "dependencies", "allocations", "prerequisites", "gates"):
        shuffled[name].reverse()
    record(shuffled, "milestone", "M1")["tasks"].reverse()

    for role in Role:
        task = None if role is Role.COORDINATOR else "T2"
        assert (
            ready(parse_authority(shuffled), role, task=task).data
            == ready(parse_authority(doc), role, task=task).data
        )


MISSING_CASES = [
    (
        "planner",
        ("milestone", "M1", "objective"),
        Missing("milestone_objective", "milestone:M1", "objective"),
    ),
    (
        "planner",
        ("milestone", "M1", "plan_hash"),
        Missing("milestone_objective", "milestone:M1", "plan_hash"),
    ),
    ("planner", ("task", "T2", "objective"), Missing("task_objective", "task:T2", "objective")),
    ("planner", ("task", "T2", "boundary"), Missing("task_boundary", "task:T2", "boundary")),
    (
        "planner",
        ("task", "T2", "evaluated_base_head"),
        Missing("base", "task:T2", "evaluated_base_head"),
    ),
    (
        "planner",
        ("allocation", "A5", None),
        Missing("ownership", "task:T2", "boundary.write", "docs/api/export.md"),
    ),
    ("planner", "dependencies", Missing("upstream_dependencies", "authority", "dependencies")),
    ("planner", "prerequisites", Missing("unresolved_prerequisites", "authority", "prerequisites")),
    ("planner", "allocations", Missing("ownership", "authority", "allocations")),
    ("planner", "membership", Missing("milestone_objective", "task:T2", "milestone")),
    ("worker", ("task", "T2", "brief_hash"), Missing("brief", "task:T2", "brief_hash")),
    ("worker", ("task", "T2", "plan_hash"), Missing("plan", "task:T2", "plan_hash")),
    ("worker", ("task", "T2", "current_step"), Missing("current_step", "task:T2", "current_step")),
    ("worker", "dependencies", Missing("required_upstream_outputs", "authority", "dependencies")),
    ("worker", "blockers", Missing("execution_blockers", "authority", "blockers")),
    ("reviewer", ("task", "T2", "base_commit"), Missing("reviewed", "task:T2", "base_commit")),
    ("reviewer", ("task", "T2", "submission"), Missing("evidence", "task:T2", "submission")),
    ("reviewer", "allocations", Missing("ownership", "authority", "allocations")),
    ("coordinator", ("task", "T3", "status"), Missing("task_statuses", "task:T3", "status")),
    (
        "coordinator",
        ("milestone", "M1", "plan_hash"),
        Missing("milestone_revisions", "milestone:M1", "plan_hash"),
    ),
    ("coordinator", "gates", Missing("human_gates", "authority", "gates")),
    (
        "coordinator",
        "dependencies",
        Missing("unresolved_dependencies", "authority", "dependencies"),
    ),
]


def without(doc: dict[str, Any], removal: Any) -> dict[str, Any]:
    result = copy.deepcopy(doc)
    if removal == "membership":
        record(result, "milestone", "M1")["tasks"].remove("T2")
    elif isinstance(removal, str):
        del result[removal]
    else:
        kind, record_id, name = removal
        if name is None:
            collection = {"allocation": "allocations"}[kind]
            result[collection] = [r for r in result[collection] if r["id"] != record_id]
        else:
            del record(result, kind, record_id)[name]
    return result


@pytest.mark.parametrize(
    ("role", "removal", "expected"),
    MISSING_CASES,
    ids=[f"{c[0]}-{c[2].fact}-{c[2].field}" for c in MISSING_CASES],
)
def test_acceptance_5_missing_authority_fails_closed_as_context_insufficient(
    role: str, removal: Any, expected: Missing
) -> None:
    task = None if role == "coordinator" else "T2"
    doc = document()
    old = ready(parse_authority(doc), role, task=task)
    lacking = parse_authority(without(doc, removal))

    built = build_envelope(
        lacking,
        role,
        task=task,
        milestone="M1" if task is None else None,
        decision=old.decision,  # a reviewer whose task lost its base commit still reviews it
    )
    checked = check_envelope(old, lacking)

    assert built.outcome is Outcome.CONTEXT_INSUFFICIENT
    assert built.envelope is None
    assert expected in built.missing
    assert checked.outcome is Outcome.CONTEXT_INSUFFICIENT
    assert expected in checked.missing


def test_acceptance_5_an_unknown_subject_is_insufficient() -> None:
    for role in Role:
        result = build_envelope(scenario(), role, task="T9")
        assert result.outcome is Outcome.CONTEXT_INSUFFICIENT
        assert result.missing == (Missing("subject", "task:T9", "id"),)
    result = build_envelope(scenario(), Role.COORDINATOR, milestone="M9")
    assert result.missing == (Missing("subject", "milestone:M9", "id"),)


def test_acceptance_6_no_new_mandatory_agent_call_or_lifecycle_stage_is_introduced() -> None:
    authority = scenario()
    pristine = scenario()

    # A build is one pure call: no registration, no prior stage, any order; with no long text
    # it needs no store at all.
    built = {
        role: build_envelope(
            authority, role, task=None if role is Role.COORDINATOR else "T2",
            milestone="M1" if role is Role.COORDINATOR else None,
        ).envelope
        for role in reversed(list(Role))
    }  # fmt: skip
    assert all(envelope is not None for envelope in built.values())
    # A check needs only the packet's bytes and the authority: no session, token or callback.
    for envelope in built.values():
        assert envelope is not None
        assert check_envelope(bytes(envelope.data), pristine).outcome is Outcome.READY
    # Nothing about the authority changed by deriving packets from it.
    assert authority == pristine


FORBIDDEN_KEYS = ("token", "credential", "expires", "expiry", "time", "nonce", "signature", "ttl")


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for item in value.values() for k in _keys(item)}
    if isinstance(value, list):
        return {k for item in value for k in _keys(item)}
    return set()


def test_acceptance_7_no_graph_registry_ownership_or_dependency_model_or_credential() -> None:
    doc = document()
    authority = parse_authority(doc)
    for role in Role:
        store = cargohold.ScopedStore(cargohold.MemoryStore(), cargohold.Scope("t", "u", "s"))
        task = None if role is Role.COORDINATOR else "T2"
        envelope = ready(authority, role, task=task, store=store)
        packet = json.loads(envelope.data)["packet"]
        # Only the packet's own structure; nothing minted: no credential, expiry or timestamp.
        assert set(packet) == {
            "format", "role", "decision", "subject", "budget", "fact_limit", "facts", "bindings",
        }  # fmt: skip
        assert not any(word in key for key in _keys(packet) for word in FORBIDDEN_KEYS)
        # Freshness reuses the authority's own revisions and hashes; a digest binding is the
        # hash of the records it binds, each with its own revision.
        details = load_facts(envelope, store).details
        for b in envelope.bindings:
            if b.kind != "digest":
                assert resolve(doc, b.record, b.field) == b.value
                continue
            detail = details[b.value]
            assert "sha256:" + hashlib.sha256(canonical_json(detail)).hexdigest() == b.value
            for item in detail["items"]:
                if "revision" in item:
                    assert resolve(doc, item["record"], "revision") == item["revision"]
        # Ownership and dependency facts are the authority's records, projected verbatim (a
        # coordinator leaves out what an edge provides: prose its decision does not need).
        for fact in envelope.facts.values():
            for item in fact.get("items", []):
                if item["record"].split(":")[0] in ("allocation", "dependency"):
                    kind, _, record_id = item["record"].partition(":")
                    raw = dict(record(doc, kind, record_id))
                    del raw["id"], raw["revision"]
                    if role is Role.COORDINATOR:
                        del raw["output"]
                    assert item["fields"] == raw


def test_acceptance_8_successful_task_replay_passes_without_false_blockers() -> None:
    doc = document(SUCCESSFUL_TOML)
    authority = parse_authority(doc)
    packets = {}
    for task in ("U1", "U2", "U3", "U4"):
        for role in Role:
            result = build_envelope(authority, role, task=task)
            assert result.outcome is Outcome.READY, (task, role, result.missing)
            assert result.envelope is not None
            assert result.envelope.size <= DEFAULT_BUDGET
            packets[(task, role)] = result.envelope
    for task in ("U1", "U2", "U3", "U4"):
        worker = packets[(task, Role.WORKER)]
        assert worker.facts["execution_blockers"]["state"] == "known_empty"
        assert packets[(task, Role.PLANNER)].facts["unresolved_prerequisites"]["items"] == []
    # Work elsewhere (the other milestone) leaves every packet of this milestone usable.
    elsewhere = parse_authority(
        bumped(
            bumped(doc, "task", "U4", status="done", base_commit="77" * 20),
            "milestone",
            "MX",
            objective="Backups are verified hourly.",
        )
    )
    for (task, _role), envelope in packets.items():
        if task != "U4":
            assert check_envelope(envelope, elsewhere).outcome is Outcome.READY


def test_acceptance_8_the_fresh_scenario_end_to_end_over_files(tmp_path: Any) -> None:
    path = tmp_path / "workflow.json"
    doc = document()
    path.write_text(json.dumps(doc))
    envelopes = {
        role: ready(load_authority(path), role, task=None if role is Role.COORDINATOR else "T2")
        for role in Role
    }

    path.write_text(json.dumps(bumped(doc, "task", "T3", plan_hash="sha256:" + "ee" * 32)))
    after_sibling = {role: check_envelope(e, load_authority(path)) for role, e in envelopes.items()}
    path.write_text(json.dumps(bumped(doc, "task", "T2", objective="Stream JSON lines.")))
    after_own = {role: check_envelope(e, load_authority(path)) for role, e in envelopes.items()}

    assert {role: r.outcome for role, r in after_sibling.items()} == {
        Role.PLANNER: Outcome.READY,
        Role.WORKER: Outcome.READY,
        Role.REVIEWER: Outcome.READY,
        Role.COORDINATOR: Outcome.CONTEXT_STALE,  # it binds every member's revision
    }
    assert all(r.outcome is Outcome.CONTEXT_STALE for r in after_own.values())
