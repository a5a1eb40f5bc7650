"""Authority files: the documented format, its validation, and the source protocol."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import cargohold
from cargohold.envelopes import (
    AllocationState,
    Authority,
    AuthorityError,
    AuthoritySource,
    FileAuthority,
    Outcome,
    Role,
    build_envelope,
    decode_authority,
    load_authority,
    parse_authority,
)
from envelopes_fixtures import (
    SCENARIO_JSON,
    SCENARIO_TOML,
    document,
    edited,
    ready,
    record,
)


def test_the_toml_and_json_forms_of_one_authority_load_equal() -> None:
    from_toml = load_authority(SCENARIO_TOML)
    from_json = load_authority(SCENARIO_JSON)

    assert from_toml == from_json
    assert [t.id for t in from_toml.tasks] == ["T1", "T2", "T3", "T4", "T5"]
    allocation = from_toml.allocations[4] if from_toml.allocations else None
    assert allocation is not None
    assert allocation.state is AllocationState.UNRESOLVED
    assert allocation.claimants == ("T2", "T3")


def test_a_file_without_a_known_suffix_is_read_as_json_or_toml_by_its_content(
    tmp_path: Path,
) -> None:
    as_json = tmp_path / "workflow-state"
    as_json.write_bytes(SCENARIO_JSON.read_bytes())
    as_toml = tmp_path / "workflow.conf"
    as_toml.write_bytes(SCENARIO_TOML.read_bytes())

    assert load_authority(as_json) == load_authority(as_toml) == load_authority(SCENARIO_TOML)


def test_an_absent_collection_is_not_represented_and_an_empty_one_is_known_empty() -> None:
    absent = document()
    del absent["blockers"]
    empty = document()
    empty["blockers"] = []

    assert parse_authority(absent).blockers is None
    assert parse_authority(empty).blockers == ()


def test_a_file_source_reads_the_current_file_on_every_load(tmp_path: Path) -> None:
    path = tmp_path / "workflow.json"
    doc = document()
    path.write_text(json.dumps(doc))
    source = FileAuthority(path)
    first = source.load()

    path.write_text(json.dumps(edited(doc, "task", "T2", revision=9)))

    assert isinstance(source, AuthoritySource)
    task = source.load().task("T2")
    assert task is not None
    assert task.revision == 9
    assert first.task("T2") != task


class _WorkflowEngine:
    """Another authority source: state held by a workflow engine, not a file."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def load(self) -> Authority:
        return parse_authority(self.state)


def test_another_source_plugs_in_through_the_protocol() -> None:
    engine = _WorkflowEngine(document())

    assert isinstance(engine, AuthoritySource)
    envelope = ready(engine.load(), Role.PLANNER, task="T2")
    assert envelope.digest == ready(load_authority(SCENARIO_TOML), Role.PLANNER, task="T2").digest


def test_an_authority_built_in_code_is_checked_like_a_file() -> None:
    from cargohold.envelopes import Milestone, Task

    with pytest.raises(AuthorityError):
        Authority(
            milestones=(Milestone("M1", 1, 1, tasks=("T1", "T9")),),
            tasks=(Task("T1", 1),),
        )
    authority = Authority(
        milestones=(Milestone("M1", 1, 1, tasks=("T1",)),), tasks=(Task("T1", 1),)
    )
    result = build_envelope(authority, Role.PLANNER, task="T1")
    assert result.outcome is Outcome.CONTEXT_INSUFFICIENT


def _set(path: tuple[Any, ...], value: Any) -> Any:
    def change(doc: dict[str, Any]) -> None:
        target: Any = doc
        for key in path[:-1]:
            target = record(doc, *key) if isinstance(key, tuple) and len(key) == 2 else target[key]
        if value is ...:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return change


def _append(collection: str, item: dict[str, Any]) -> Any:
    def change(doc: dict[str, Any]) -> None:
        doc[collection].append(item)

    return change


T2 = ("task", "T2")
INVALID = {
    "format missing": _set(("format",), ...),
    "format of another version": _set(("format",), "cargohold.authority/2"),
    "tasks missing": _set(("tasks",), ...),
    "unknown top-level key": _set(("transcript",), "..."),
    "unknown task field": _set((T2, "plan"), "the whole plan text"),
    "revision negative": _set((T2, "revision"), -1),
    "revision as text": _set((T2, "revision"), "4"),
    "revision as float": _set((T2, "revision"), 4.0),
    "revision as bool": _set((T2, "revision"), True),
    "id with a colon": _set((T2, "id"), "T:2"),
    "id empty": _set((T2, "id"), ""),
    "unknown status": _set((T2, "status"), "paused"),
    "malformed hash": _set((T2, "plan_hash"), "f43b28d0"),
    "malformed commit": _set((T2, "base_commit"), "HEAD~1"),
    "branch with spaces": _set((T2, "base_branch"), "my branch"),
    "empty objective": _set((T2, "objective"), ""),
    "boundary path with trailing slash": _set((T2, "boundary"), {"write": ["src/api/"]}),
    "boundary path escaping the repo": _set((T2, "boundary"), {"write": ["../secrets"]}),
    "boundary path with a glob": _set((T2, "boundary"), {"write": ["src/**"]}),
    "absolute boundary path": _set((T2, "boundary"), {"write": ["/etc"]}),
    "current step that is not a step": _set((T2, "current_step"), "S9"),
    "step requiring an unknown edge": _set(
        (T2, "steps"), [{"id": "S2", "requires": ["D9"]}, {"id": "S1"}]
    ),
    "step requiring an edge out of the task": _set(
        (T2, "steps"), [{"id": "S2", "requires": ["D2"]}, {"id": "S1"}]
    ),
    "duplicate step": _set((T2, "steps"), [{"id": "S2"}, {"id": "S2"}]),
    "duplicate task": _append("tasks", {"id": "T2", "revision": 1}),
    "member that is not a task": _set((("milestone", "M1"), "tasks"), ["T1", "T9"]),
    "task in two milestones": _set((("milestone", "M2"), "tasks"), ["T4", "T2"]),
    "dependency on an unknown task": _set((("dependency", "D1"), "upstream"), "T9"),
    "dependency on itself": _set((("dependency", "D1"), "upstream"), "T2"),
    "unknown dependency state": _set((("dependency", "D1"), "state"), "done"),
    "owned allocation without its task": _set((("allocation", "A1"), "task"), ...),
    "unresolved allocation with a task": _set((("allocation", "A5"), "task"), "T2"),
    "claimants of an owned allocation": _set((("allocation", "A1"), "claimants"), ["T3"]),
    "claimant that is not a task": _set((("allocation", "A5"), "claimants"), ["T9"]),
    "two allocations of one path": _set((("allocation", "A4"), "path"), "src/api/schema"),
    "prerequisite of an unknown task": _set((("prerequisite", "P1"), "task"), "T9"),
    "blocker of an unknown task": _set((("blocker", "B1"), "task"), "T9"),
    "gate on a task and a milestone": _set((("gate", "G1"), "task"), "T2"),
    "gate on nothing": _set((("gate", "G1"), "milestone"), ...),
    "gate on an unknown milestone": _set((("gate", "G1"), "milestone"), "M9"),
    "collection that is not a list": _set(("blockers",), {"B1": "open"}),
}


@pytest.mark.parametrize("change", INVALID.values(), ids=INVALID.keys())
def test_a_malformed_or_inconsistent_authority_is_a_typed_usage_error(change: Any) -> None:
    doc = copy.deepcopy(document())
    change(doc)

    with pytest.raises(AuthorityError) as caught:
        parse_authority(doc)

    assert caught.value.code == "authority"
    assert isinstance(caught.value, cargohold.ConfigError)
    assert isinstance(caught.value, cargohold.UsageError)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b'{"format": "cargohold.authority/1", "format": "x"}', "json"),
        (b'{"format": NaN}', "json"),
        (b'{"format": ', "json"),
        (b"format = ", "toml"),
        (b"\xff\xfe", None),
        (b"[1, 2]", "json"),
        (b'{"format": "cargohold.authority/1", "milestones": [], "tasks": "\\ud800"}', "json"),
        (b"{}", "yaml"),
    ],
)
def test_bytes_that_are_not_an_authority_document_are_refused(
    data: bytes, kind: str | None
) -> None:
    with pytest.raises(AuthorityError):
        decode_authority(data, kind=kind)


def test_lone_surrogates_in_json_text_are_refused() -> None:
    doc = document()
    text = json.dumps(doc).replace("Serve GET", "Serve \\ud800 GET")

    with pytest.raises(AuthorityError):
        decode_authority(text.encode(), kind="json")


def test_an_unreadable_authority_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(AuthorityError):
        load_authority(tmp_path / "missing.toml")
    with pytest.raises(AuthorityError):
        load_authority(tmp_path)


def test_validation_messages_never_echo_the_authoritys_values() -> None:
    canary = "CANARY-7f3a-objective-text"
    doc = edited(document(), "task", "T2", base_commit=canary, objective=canary)
    doc["tasks"][0]["revision"] = canary

    with pytest.raises(AuthorityError) as caught:
        parse_authority(doc)

    assert canary not in str(caught.value)


def test_importing_the_envelopes_package_does_not_import_pydantic() -> None:
    code = (
        "import sys, cargohold.envelopes, cargohold.cli._envelope; print('pydantic' in sys.modules)"
    )

    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )

    assert result.stdout.strip() == "False"


def test_the_documented_example_is_a_valid_authority() -> None:
    text = (Path(__file__).parents[1] / "docs" / "envelopes.md").read_text()
    example = text.split("```toml\n", 1)[1].split("```", 1)[0]

    authority = decode_authority(example.encode(), kind="toml")

    worker = build_envelope(authority, Role.WORKER, task="T2")
    planner = build_envelope(authority, Role.PLANNER, task="T2")
    assert worker.outcome is Outcome.READY
    assert worker.envelope is not None
    assert worker.envelope.facts["execution_blockers"]["state"] == "known_empty"
    assert planner.outcome is Outcome.CONTEXT_INSUFFICIENT
    assert [(m.fact, m.record, m.field) for m in planner.missing] == [
        ("unresolved_prerequisites", "authority", "prerequisites")
    ]
