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
