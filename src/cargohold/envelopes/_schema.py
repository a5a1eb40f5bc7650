"""The validating schema of an authority file (pydantic, at the file boundary only).

Imported on first load, never at ``import cargohold``: pydantic costs a CLI start-up ~150 ms.
The schema checks shapes and value forms; :class:`~cargohold.envelopes.Authority` checks that
the records agree with each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from cargohold.envelopes._authority import (
    ID_PATTERN,
    Allocation,
    AllocationState,
    Authority,
    AuthorityError,
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

AUTHORITY_FORMAT = "cargohold.authority/1"

Id = Annotated[str, StringConstraints(pattern=f"^{ID_PATTERN}$")]
Revision = Annotated[int, Field(ge=0)]
Hash = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]{1,16}:[0-9a-f]{8,128}$")]
Commit = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{7,64}$")]
Branch = Annotated[str, StringConstraints(pattern=r"^[^\s\x00-\x1f\x7f]{1,255}$")]
Text = Annotated[str, StringConstraints(min_length=1)]
Path = Annotated[str, StringConstraints(min_length=1, max_length=1024)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class _Milestone(_Model):
    id: Id
    revision: Revision
    membership_revision: Revision
    tasks: list[Id]
    objective: Text | None = None
    plan_hash: Hash | None = None


# An optional list left out is *not represented* (None), never an empty list: the authority
# saying "reads nothing" and saying nothing about what a task reads are different facts.
class _Boundary(_Model):
    write: list[Path]
    read: list[Path] | None = None


class _Step(_Model):
    id: Id
    title: Text | None = None
    requires: list[Id] | None = None


class _Submission(_Model):
    head: Commit
    evidence: list[Text] | None = None


class _Task(_Model):
    id: Id
    revision: Revision
    status: Literal["planned", "runnable", "running", "blocked", "in_review", "done"] | None = None
    objective: Text | None = None
    brief_hash: Hash | None = None
    plan_hash: Hash | None = None
    base_branch: Branch | None = None
    evaluated_base_head: Commit | None = None
    base_commit: Commit | None = None
    boundary: _Boundary | None = None
    steps: list[_Step] | None = None
    current_step: Id | None = None
    submission: _Submission | None = None


class _Dependency(_Model):
    id: Id
    revision: Revision
    upstream: Id
    downstream: Id
    output: Text
    state: Literal["satisfied", "pending"]


class _Allocation(_Model):
    id: Id
    revision: Revision
    path: Path
    state: Literal["owned", "unresolved"]
    task: Id | None = None
    claimants: list[Id] | None = None


class _Prerequisite(_Model):
    id: Id
    revision: Revision
    task: Id
    state: Literal["unresolved", "satisfied"]
    description: Text | None = None


class _Blocker(_Model):
    id: Id
    revision: Revision
    task: Id
    state: Literal["open", "cleared"]
    description: Text | None = None


class _Gate(_Model):
    id: Id
    revision: Revision
    state: Literal["required", "passed"]
    task: Id | None = None
    milestone: Id | None = None
    description: Text | None = None


class _Authority(_Model):
    format: Literal["cargohold.authority/1"]
    milestones: list[_Milestone]
    tasks: list[_Task]
    dependencies: list[_Dependency] | None = None
    allocations: list[_Allocation] | None = None
    prerequisites: list[_Prerequisite] | None = None
    blockers: list[_Blocker] | None = None
    gates: list[_Gate] | None = None


def _describe(exc: ValidationError) -> str:
    # Location and message only: include_input=False keeps the authority's values out.
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    shown = [
        "{}: {}".format(".".join(str(part) for part in error["loc"]) or "authority", error["msg"])
        for error in errors[:5]
    ]
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "invalid authority: " + "; ".join(shown) + more


def _tuple(items: list[Any] | None) -> tuple[Any, ...] | None:
    return None if items is None else tuple(items)


def _task(model: _Task) -> Task:
    boundary = model.boundary
    return Task(
        id=model.id,
        revision=model.revision,
        status=None if model.status is None else TaskStatus(model.status),
        objective=model.objective,
        brief_hash=model.brief_hash,
        plan_hash=model.plan_hash,
        base_branch=model.base_branch,
        evaluated_base_head=model.evaluated_base_head,
        base_commit=model.base_commit,
        boundary=None
        if boundary is None
        else Boundary(write=tuple(boundary.write), read=_tuple(boundary.read)),
        steps=None
        if model.steps is None
        else tuple(Step(s.id, s.title, _tuple(s.requires)) for s in model.steps),
        current_step=model.current_step,
        submission=None
        if model.submission is None
        else Submission(model.submission.head, _tuple(model.submission.evidence)),
    )


def _check_text(value: Any, where: str = "authority") -> None:
    # JSON may hold lone surrogates, which no UTF-8 packet can carry.
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise AuthorityError(f"invalid authority: {where}: not valid Unicode text") from None
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _check_text(key, where)
            _check_text(item, f"{where}.{key}" if isinstance(key, str) else where)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_text(item, f"{where}.{index}")


def parse_authority(data: Mapping[str, Any]) -> Authority:
    """Validate a decoded authority document (the JSON or TOML top-level table).

    Raises:
        AuthorityError: the document does not follow the format, or its records disagree.
    """
    if not isinstance(data, Mapping):
        raise AuthorityError("invalid authority: the document is a table / object")
    _check_text(data)
    try:
        model = _Authority.model_validate(dict(data))
    except ValidationError as exc:
        raise AuthorityError(_describe(exc)) from None

    def optional(records: list[Any] | None, build: Any) -> tuple[Any, ...] | None:
        return None if records is None else tuple(build(r) for r in records)

    return Authority(
        milestones=tuple(
            Milestone(
                id=m.id,
                revision=m.revision,
                membership_revision=m.membership_revision,
                tasks=tuple(m.tasks),
                objective=m.objective,
                plan_hash=m.plan_hash,
            )
            for m in model.milestones
        ),
        tasks=tuple(_task(t) for t in model.tasks),
        dependencies=optional(
            model.dependencies,
            lambda d: Dependency(
                d.id, d.revision, d.upstream, d.downstream, d.output, DependencyState(d.state)
            ),
        ),
        allocations=optional(
            model.allocations,
            lambda a: Allocation(
                a.id, a.revision, a.path, AllocationState(a.state), a.task, _tuple(a.claimants)
            ),
        ),
        prerequisites=optional(
            model.prerequisites,
            lambda p: Prerequisite(
                p.id, p.revision, p.task, PrerequisiteState(p.state), p.description
            ),
        ),
        blockers=optional(
            model.blockers,
            lambda b: Blocker(b.id, b.revision, b.task, BlockerState(b.state), b.description),
        ),
        gates=optional(
            model.gates,
            lambda g: Gate(
                g.id, g.revision, GateState(g.state), g.task, g.milestone, g.description
            ),
        ),
    )
