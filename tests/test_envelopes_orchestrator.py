"""What an orchestrator needs from envelopes: machine-readable outcomes, ownership questions,
authority from stdin or any source, a whole milestone per call, the decision a packet
authorizes, a compare-and-swap transition, and moved-out facts an agent in another session can
load."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import cargohold
from cargohold.cli import ExitCode, cli
from cargohold.envelopes import (
    ContextNotReadyError,
    Decision,
    Envelope,
    EnvelopeError,
    FileAuthority,
    Outcome,
    Ownership,
    Role,
    build_envelope,
    build_milestone,
    canonical_json,
    check_envelope,
    check_envelopes,
    load_facts,
    parse_authority,
)
from envelopes_fixtures import (
    SCENARIO_TOML,
    ScenarioSource,
    bumped,
    document,
    edited,
    ready,
    record,
    scenario,
)


def run(store: Path, *args: str, input: bytes | None = None, session: str = "s-orch") -> Result:
    scope = ["--store", str(store), "--tenant", "t-orch", "--user", "u-orch", "--session", session]
    return CliRunner().invoke(cli, [*scope, *args], input=input, catch_exceptions=False)


def write_json(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


# -- machine-readable builds --------------------------------------------------------------------


def test_build_json_reports_the_missing_facts_as_data(store: Path, tmp_path: Path) -> None:
    doc = document()
    del doc["blockers"]
    authority = write_json(tmp_path / "a.json", doc)

    result = run(store, "envelope", "build", "--authority", str(authority), "--role", "worker",
                 "--task", "T2", "--json")  # fmt: skip

    assert result.exit_code == ExitCode.CONTEXT_INSUFFICIENT
    report = json.loads(result.stdout)
    assert report["outcome"] == "context-insufficient"
    assert report["packet"] is None
    assert report["decision"] == "execute_step"
    assert report["missing"] == [
        {"fact": "execution_blockers", "record": "authority", "field": "blockers"}
    ]


def test_build_json_of_a_conflict_names_the_contradicting_boundaries(
    store: Path, tmp_path: Path
) -> None:
    doc = edited(document(), "task", "T2", boundary={"write": ["src/api/schema"], "read": []})
    authority = write_json(tmp_path / "a.json", doc)

    result = run(store, "envelope", "build", "--authority", str(authority), "--role", "worker",
                 "--task", "T2", "--json")  # fmt: skip

    assert result.exit_code == ExitCode.CONTEXT_CONFLICT == 13
    assert json.loads(result.stdout)["conflicts"] == [
        {
            "reason": "write_path_reserved",
            "record": "task:T2",
            "field": "boundary.write",
            "item": "src/api/schema",
            "other": "task:T1",
            "decided_by": "allocation:A1",
        }
    ]


def test_build_json_of_a_ready_packet_embeds_it_with_its_digest(store: Path) -> None:
    result = run(store, "envelope", "build", "--authority", str(SCENARIO_TOML), "--role",
                 "planner", "--task", "T2", "--json")  # fmt: skip

    report = json.loads(result.stdout)
    envelope = Envelope.from_document(report["packet"])
    assert result.exit_code == ExitCode.OK
    assert envelope == ready(scenario(), Role.PLANNER, task="T2")
    assert report["digest"] == envelope.digest
    assert report["size"] == envelope.size


# -- the decision a packet authorizes -----------------------------------------------------------


def test_a_packet_names_the_decision_it_authorizes() -> None:
    authority = scenario()

    decisions = {
        role: json.loads(ready(authority, role, task="T2" if role is not Role.COORDINATOR
                               else None).data)["packet"]["decision"]
        for role in Role
    }  # fmt: skip

    assert decisions == {
        Role.PLANNER: "plan_task",
        Role.WORKER: "execute_step",
        Role.REVIEWER: "review_submission",
        Role.COORDINATOR: "schedule_milestone",
    }


def test_a_decision_the_role_does_not_take_is_refused() -> None:
    with pytest.raises(cargohold.UsageError):
        build_envelope(scenario(), Role.WORKER, task="T2", decision=Decision.PLAN_TASK)
    packet = json.loads(ready(scenario(), Role.WORKER, task="T2").data)["packet"]
    packet["decision"] = "review_plan"
    body = canonical_json(packet)

    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    with pytest.raises(EnvelopeError):
        Envelope.from_document({"digest": digest, "packet": packet})


# -- ownership questions on the command line ----------------------------------------------------


def test_envelope_ownership_answers_each_path_from_the_packet(store: Path, tmp_path: Path) -> None:
    packet = tmp_path / "worker.json"
    packet.write_bytes(ready(scenario(), Role.WORKER, task="T2").data)

    text = run(store, "envelope", "ownership", "src/api/export/csv.py",
               "src/api/export/shared_types.py", "README.md", "--packet", str(packet))  # fmt: skip
    as_json = run(store, "envelope", "ownership", "docs/api/export.md", "--packet", "-",
                  "--json", input=packet.read_bytes())  # fmt: skip

    assert text.exit_code == as_json.exit_code == ExitCode.OK
    assert text.stdout.split() == [
        "owned", "src/api/export/csv.py",
        "reserved", "src/api/export/shared_types.py",
        "not_represented", "README.md",
    ]  # fmt: skip
    assert json.loads(as_json.stdout)["answers"] == [
        {"path": "docs/api/export.md", "ownership": "unresolved"}
    ]


def test_envelope_ownership_checks_first_and_answers_nothing_for_a_stale_packet(
    store: Path, tmp_path: Path
) -> None:
    packet = tmp_path / "worker.json"
    packet.write_bytes(ready(scenario(), Role.WORKER, task="T2").data)
    later = write_json(tmp_path / "later.json", bumped(document(), "allocation", "A2"))

    result = run(store, "envelope", "ownership", "src/api/export/csv.py", "--packet",
                 str(packet), "--authority", str(later), "--json")  # fmt: skip

    assert result.exit_code == ExitCode.CONTEXT_STALE
    report = json.loads(result.stdout)
    assert report["answers"] == []
    assert report["check"]["outcome"] == "context-stale"


def test_envelope_ownership_of_a_malformed_path_exits_2(store: Path, tmp_path: Path) -> None:
    packet = tmp_path / "worker.json"
    packet.write_bytes(ready(scenario(), Role.WORKER, task="T2").data)

    result = run(store, "envelope", "ownership", "../etc", "--packet", str(packet))

    assert result.exit_code == ExitCode.USAGE


# -- where the authority comes from -------------------------------------------------------------


def test_build_and_check_read_the_authority_from_stdin(store: Path, tmp_path: Path) -> None:
    state = json.dumps(document()).encode()

    built = run(store, "envelope", "build", "--authority", "-", "--role", "reviewer", "--task",
                "T2", input=state)  # fmt: skip
    packet = tmp_path / "reviewer.json"
    packet.write_bytes(built.stdout_bytes)
    checked = run(store, "envelope", "check", str(packet), "--authority", "-", input=state)
    both = run(store, "envelope", "check", "-", "--authority", "-", input=state)

    assert built.exit_code == checked.exit_code == ExitCode.OK
    assert built.stdout_bytes == ready(scenario(), Role.REVIEWER, task="T2").data + b"\n"
    assert both.exit_code == ExitCode.USAGE


def test_check_loads_the_authority_through_a_source(store: Path, tmp_path: Path) -> None:
    packet = tmp_path / "planner.json"
    packet.write_bytes(ready(scenario(), Role.PLANNER, task="T2").data)

    result = run(store, "envelope", "check", str(packet), "--source",
                 "envelopes_fixtures:ScenarioSource", "--json")  # fmt: skip
    neither = run(store, "envelope", "check", str(packet))
    bogus = run(store, "envelope", "check", str(packet), "--source", "json:dumps")

    assert result.exit_code == ExitCode.OK
    assert json.loads(result.stdout)["outcome"] == "ready"
    assert neither.exit_code == bogus.exit_code == ExitCode.USAGE


def test_the_library_checks_and_builds_against_a_source_loaded_now(tmp_path: Path) -> None:
    path = write_json(tmp_path / "workflow.json", document())
    source = FileAuthority(path)
    packet = ready(source.load(), Role.WORKER, task="T2")

    before = check_envelope(packet, source)
    write_json(path, bumped(document(), "task", "T2"))
    after = check_envelope(packet, source)

    assert before.outcome is Outcome.READY
    assert after.outcome is Outcome.CONTEXT_STALE
    assert build_envelope(ScenarioSource(), Role.WORKER, task="T2").envelope == packet


# -- a whole milestone in one call --------------------------------------------------------------


def test_build_milestone_builds_every_packet_of_a_milestone_from_one_load() -> None:
    results = build_milestone(scenario(), "M1")

    assert [(r.role, dict(r.subject)) for r in results[:4]] == [
        (Role.COORDINATOR, {"milestone": "M1"}),
        (Role.PLANNER, {"task": "T1"}),
        (Role.WORKER, {"task": "T1"}),
        (Role.REVIEWER, {"task": "T1"}),
    ]
    assert len(results) == 1 + 3 * 4
    by_subject = {(r.role, r.subject.get("task")): r for r in results}
    assert by_subject[(Role.WORKER, "T2")].outcome is Outcome.READY
    # T1 is done and has no steps: its worker packet says what is missing, the others build.
    assert by_subject[(Role.WORKER, "T1")].outcome is Outcome.CONTEXT_INSUFFICIENT
    checked = check_envelopes([r.envelope for r in results if r.envelope is not None], scenario())
    assert {c.outcome for c in checked} == {Outcome.READY}


def test_build_all_and_check_all_on_the_command_line(store: Path, tmp_path: Path) -> None:
    authority = write_json(tmp_path / "workflow.json", document())
    out = tmp_path / "packets"

    built = run(store, "envelope", "build-all", "--authority", str(authority), "--milestone",
                "M1", "--role", "worker", "--role", "reviewer", "--out", str(out),
                "--json")  # fmt: skip
    fresh = run(store, "envelope", "check-all", str(out), "--authority", str(authority))
    write_json(authority, bumped(document(), "task", "T2"))
    stale = run(store, "envelope", "check-all", str(out), "--authority", str(authority), "--json")

    report = json.loads(built.stdout)
    outcomes = {(p["role"], p["subject"]["task"]): p["outcome"] for p in report["packets"]}
    assert built.exit_code == ExitCode.CONTEXT_INSUFFICIENT  # the most severe of the batch
    assert outcomes[("worker", "T2")] == outcomes[("reviewer", "T2")] == "ready"
    assert outcomes[("worker", "T1")] == "context-insufficient"
    written = sorted(p.name for p in out.iterdir())
    assert "worker-T2.json" in written
    assert "worker-T1.json" not in written
    assert fresh.exit_code == ExitCode.OK
    assert stale.exit_code == ExitCode.CONTEXT_STALE
    stale_files = {
        Path(p["file"]).name for p in json.loads(stale.stdout)["packets"]
        if p["outcome"] == "context-stale"
    }  # fmt: skip
    assert stale_files == {"worker-T2.json", "reviewer-T2.json"}


# -- compare and swap ---------------------------------------------------------------------------


def _start_review(doc: dict[str, Any]) -> dict[str, Any]:
    """A transition the worker's packet authorizes: T2 goes to review, its revision bumped."""
    task = record(doc, "task", "T2")
    task["status"] = "in_review"
    task["revision"] += 1
    return doc


def test_a_transition_is_written_while_the_packet_holds(tmp_path: Path) -> None:
    path = write_json(tmp_path / "workflow.json", document())
    packet = ready(scenario(), Role.WORKER, task="T2")

    written = FileAuthority(path).transition(packet, _start_review)

    task = written.task("T2")
    assert task is not None
    assert task.status is not None
    assert task.status.value == "in_review"
    assert FileAuthority(path).load() == written


def test_a_transition_fails_when_a_binding_moved_between_check_and_write(tmp_path: Path) -> None:
    path = write_json(tmp_path / "workflow.json", document())
    source = FileAuthority(path)
    packet = ready(source.load(), Role.WORKER, task="T2")
    assert check_envelope(packet, source).ready
    write_json(path, edited(document(), "task", "T2", base_commit="ab" * 20))  # someone else
    moved = path.read_bytes()

    with pytest.raises(ContextNotReadyError) as caught:
        source.transition(packet, _start_review)

    assert caught.value.outcome is Outcome.CONTEXT_STALE
    assert path.read_bytes() == moved


def test_concurrent_transitions_authorized_by_one_packet_let_exactly_one_through(
    tmp_path: Path,
) -> None:
    path = write_json(tmp_path / "workflow.json", document())
    packet = ready(scenario(), Role.WORKER, task="T2")
    outcomes: list[str] = []
    barrier = threading.Barrier(6)

    def attempt() -> None:
        barrier.wait(timeout=30)
        try:
            FileAuthority(path).transition(packet, _start_review)
            outcomes.append("written")
        except ContextNotReadyError:
            outcomes.append("refused")

    threads = [threading.Thread(target=attempt) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(outcomes) == ["refused"] * 5 + ["written"]
    task = FileAuthority(path).load().task("T2")
    assert task is not None
    assert task.revision == 5  # bumped once


def test_a_transition_that_writes_an_invalid_authority_writes_nothing(tmp_path: Path) -> None:
    path = write_json(tmp_path / "workflow.json", document())
    before = path.read_bytes()

    def broken(doc: dict[str, Any]) -> dict[str, Any]:
        record(doc, "task", "T2")["status"] = "paused"
        return doc

    with pytest.raises(cargohold.envelopes.AuthorityError):
        FileAuthority(path).transition(ready(scenario(), Role.WORKER, task="T2"), broken)
    assert path.read_bytes() == before


# -- moved-out facts, read by the agent in its own session --------------------------------------

LONG = "Export every order field the schema allows, in the v1 column order. " * 60


def test_an_agent_loads_the_moved_out_facts_of_its_packet_in_its_own_session() -> None:
    authority = parse_authority(edited(document(), "task", "T2", objective=LONG))
    backend = cargohold.MemoryStore()
    with (
        cargohold.open(backend, tenant="acme", user="orch", session="orchestrator") as hold,
        cargohold.open(backend, tenant="acme", user="orch", session="planner-7") as agent,
    ):
        # The orchestrator builds in the session of the agent that will read the packet.
        packet = ready(
            authority, Role.PLANNER, task="T2", store=hold.for_session("planner-7").store
        )

        loaded = load_facts(packet, agent.store)
        elsewhere = load_facts(packet, hold.store)

    assert loaded.complete
    assert loaded.facts["task_objective"]["fields"]["objective"] == LONG
    digests = {b.value for b in packet.bindings if b.kind == "digest"}
    assert set(loaded.details) == digests
    summary = loaded.details[packet.facts["ownership"]["summary"]["digest"]]
    assert [item["record"] for item in summary["items"]] == ["allocation:A1"]
    assert set(elsewhere.failed.values()) == {"unauthorized"}


def test_envelope_load_reads_in_the_session_given_and_exits_4_elsewhere(
    store: Path, tmp_path: Path
) -> None:
    authority = write_json(tmp_path / "a.json", edited(document(), "task", "T2", objective=LONG))
    built = run(store, "envelope", "build", "--authority", str(authority), "--role", "planner",
                "--task", "T2", session="planner-7")  # fmt: skip
    packet = tmp_path / "planner.json"
    packet.write_bytes(built.stdout_bytes)

    mine = run(store, "envelope", "load", str(packet), session="planner-7")
    other = run(store, "envelope", "load", str(packet), session="worker-9")

    assert mine.exit_code == ExitCode.OK
    assert json.loads(mine.stdout)["facts"]["task_objective"]["fields"]["objective"] == LONG
    assert other.exit_code == ExitCode.UNAUTHORIZED


def test_ownership_answers_do_not_need_the_store() -> None:
    packet = ready(scenario(), Role.PLANNER, task="T2")

    assert packet.ownership_of("src/api/export/csv_writer.py") is Ownership.OWNED
