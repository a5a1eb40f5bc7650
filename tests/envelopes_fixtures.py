"""Helpers shared by the envelope tests: the fixture authorities, and edits of their documents."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

from cargohold.envelopes import (
    Authority,
    Envelope,
    Outcome,
    Role,
    build_envelope,
    parse_authority,
)

FIXTURES = Path(__file__).parent / "fixtures" / "envelopes"
SCENARIO_TOML = FIXTURES / "scenario.toml"
SCENARIO_JSON = FIXTURES / "scenario.json"
SUCCESSFUL_TOML = FIXTURES / "successful.toml"
SNAPSHOTS = FIXTURES / "snapshots"

TASK_ROLES = (Role.PLANNER, Role.WORKER, Role.REVIEWER)

COLLECTIONS = {
    "milestone": "milestones",
    "task": "tasks",
    "dependency": "dependencies",
    "allocation": "allocations",
    "prerequisite": "prerequisites",
    "blocker": "blockers",
    "gate": "gates",
}


def document(path: Path = SCENARIO_TOML) -> dict[str, Any]:
    """A fresh, editable copy of a fixture authority's document."""
    with path.open("rb") as handle:
        return tomllib.load(handle)


def record(doc: dict[str, Any], kind: str, record_id: str) -> dict[str, Any]:
    """The record ``kind:id`` of a document (to read or edit in place)."""
    for item in doc[COLLECTIONS[kind]]:
        if item["id"] == record_id:
            return item
    raise KeyError(f"{kind}:{record_id}")


def edited(doc: dict[str, Any], kind: str, record_id: str, **changes: Any) -> dict[str, Any]:
    """A copy of ``doc`` with fields of one record changed (a value of ``...`` removes it)."""
    result = copy.deepcopy(doc)
    target = record(result, kind, record_id)
    for name, value in changes.items():
        if value is ...:
            target.pop(name, None)
        else:
            target[name] = value
    return result


def bumped(doc: dict[str, Any], kind: str, record_id: str, **changes: Any) -> dict[str, Any]:
    """Like :func:`edited`, and the record's revision goes up by one, as an authority does."""
    revision = record(doc, kind, record_id)["revision"]
    return edited(doc, kind, record_id, revision=revision + 1, **changes)


def scenario() -> Authority:
    return parse_authority(document())


def ready(
    authority: Authority, role: Role | str, *, task: str | None = None, **kwargs: Any
) -> Envelope:
    """Build a packet that must be ready."""
    if Role(role) is Role.COORDINATOR and task is None and "milestone" not in kwargs:
        kwargs["milestone"] = "M1"
    result = build_envelope(authority, role, task=task, **kwargs)
    assert result.outcome is Outcome.READY, result.missing
    assert result.envelope is not None
    return result.envelope


def resolve(doc: dict[str, Any], record_name: str, field: str) -> Any:
    """The value the authority document holds at ``record_name``'s ``field``.

    Dotted fields reach into nested tables (``boundary.write``, ``submission.head``) and into a
    task's steps by id (``steps.S2.title``).
    """
    kind, _, record_id = record_name.partition(":")
    value: Any = record(doc, kind, record_id)
    parts = field.split(".")
    while parts:
        part = parts.pop(0)
        if isinstance(value, list):
            value = next(item for item in value if item["id"] == part)
        else:
            value = value[part]
    return value


def milestone_document(tasks: int, files_per_task: int = 9, area_size: int = 10) -> dict[str, Any]:
    """A realistic milestone of ``tasks`` tasks (``tasks * (files_per_task + 2)`` allocations).

    Tasks work in areas of ``area_size``: task ``Tn`` owns and writes its module
    ``src/areaK/modN`` (and the files in it, one allocation each), one file of the shared
    package ``src/shared`` (``src/shared/tN.py``), and reads its area and the shared package.
    Every third task's module holds a file owned by the next task (a carve-out). A chain of
    dependency edges joins neighbours; a fifth of the tasks are runnable, a fifth blocked (on a
    pending edge), the rest running, in review or done. Each works on a first step that needs
    no upstream output.
    """
    statuses = ["running", "runnable", "blocked", "in_review", "done"]
    ids = [f"T{i:04d}" for i in range(tasks)]
    hashes = [f"sha256:{i:064x}" for i in range(tasks)]

    def module(i: int) -> str:
        return f"src/area{i // area_size:03d}/mod{i:04d}"

    task_docs = []
    allocations = []
    for i, task_id in enumerate(ids):
        own = module(i)
        task_docs.append(
            {
                "id": task_id,
                "revision": 1,
                "status": statuses[i % len(statuses)],
                "objective": f"Implement module {i} of the milestone.",
                "brief_hash": hashes[i],
                "plan_hash": hashes[(i + 1) % tasks],
                "base_branch": "main",
                "evaluated_base_head": "ab" * 20,
                "base_commit": "ab" * 20,
                "boundary": {
                    "write": [own, f"src/shared/t{i:04d}.py"],
                    "read": [f"src/area{i // area_size:03d}", "src/shared"],
                },
                "current_step": "S1",
                "steps": [{"id": "S1", "title": "Write the module", "requires": []}],
                "submission": {"head": "cd" * 20, "evidence": []},
            }
        )
        allocations.append(
            {"id": f"A{i:04d}", "revision": 1, "path": own, "state": "owned", "task": task_id}
        )
        allocations.append(
            {
                "id": f"S{i:04d}",
                "revision": 1,
                "path": f"src/shared/t{i:04d}.py",
                "state": "owned",
                "task": task_id,
            }
        )
        for f in range(files_per_task):
            owner = ids[(i + 1) % tasks] if i % 3 == 0 and f == 0 else task_id
            allocations.append(
                {
                    "id": f"F{i:04d}-{f:02d}",
                    "revision": 1,
                    "path": f"{own}/file{f:02d}.py",
                    "state": "owned",
                    "task": owner,
                }
            )
    for i, task_doc in enumerate(task_docs):
        # The neighbour that owns a carve-out in this module writes it too.
        if (i - 1) % 3 == 0 and i > 0:
            task_doc["boundary"]["write"].append(f"{module(i - 1)}/file00.py")
    return {
        "format": "cargohold.authority/1",
        "milestones": [
            {
                "id": "MB",
                "revision": 1,
                "membership_revision": 1,
                "tasks": ids,
                "objective": "A milestone of many tasks.",
                "plan_hash": "sha256:" + "ee" * 32,
            }
        ],
        "tasks": task_docs,
        "dependencies": [
            {
                "id": f"D{i:04d}",
                "revision": 1,
                "upstream": ids[i],
                "downstream": ids[i + 1],
                "output": f"module {i} interface",
                "state": "pending"
                if statuses[(i + 1) % len(statuses)] == "blocked"
                else "satisfied",
            }
            for i in range(tasks - 1)
        ],
        "allocations": allocations,
        "prerequisites": [],
        "blockers": [],
        "gates": [],
    }


class ScenarioSource:
    """An authority source that is not a file (``--source envelopes_fixtures:ScenarioSource``):
    the scenario, as a workflow engine would hand it over."""

    def load(self) -> Authority:
        return scenario()
