"""Role projections: the facts each role's decision needs, and the bindings those facts rest on.

What each role gets (section 3.1 of the P03 brief), and nothing more:

=============  ==================================================================================
planner        milestone objective; task objective and boundary; base branch and evaluated head;
               upstream and downstream dependencies; ownership, including reservations held by
               sibling tasks (the milestone's other members); unresolved prerequisites
worker         brief and plan hashes; current step; the upstream outputs that step requires;
               write boundary and ownership; open execution blockers
reviewer       reviewed authority (brief and plan hashes, base commit) and evidence (submission);
               milestone objective; task objective and boundary; dependencies; ownership
coordinator    runnable and blocked tasks of the milestone; its pending dependency edges;
               milestone and task revisions; required human gates
=============  ==================================================================================

Every fact names its source: ``{"record": "task:T1", "fields": {"objective": ...}}``; a
collection is ``{"source": ..., "state": "known" | "known_empty", "items": [...]}``. A fact
the authority does not hold is reported as :class:`~cargohold.envelopes.Missing`, never projected
as an empty value. A sibling's plan, brief, objective or revisions are never read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from cargohold.envelopes._authority import (
    Allocation,
    AllocationState,
    Authority,
    BlockerState,
    Dependency,
    DependencyState,
    GateState,
    Milestone,
    PrerequisiteState,
    Task,
    TaskStatus,
    covers,
    overlaps,
    path_parts,
    record_key,
)
from cargohold.envelopes._types import BindingValue, Missing, Ownership, Role

KNOWN = "known"
_AUTHORITY = "authority"


class _Record(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def revision(self) -> int: ...


_R = TypeVar("_R", bound=_Record)


def _json(value: object) -> Any:
    if isinstance(value, tuple | list):
        return [_json(item) for item in value]
    return value  # str, int (StrEnum members are str and dump as their value)


def _fields(pairs: Iterable[tuple[str, object]]) -> dict[str, Any]:
    """A record's projected fields: absent (``None``) and empty optional fields are left out."""
    return {name: _json(value) for name, value in pairs if value is not None and value != ()}


def dependency_fields(dep: Dependency) -> dict[str, Any]:
    """The fields a packet shows of a dependency edge."""
    return _fields(
        (
            ("upstream", dep.upstream),
            ("downstream", dep.downstream),
            ("output", dep.output),
            ("state", dep.state),
        )
    )


def allocation_fields(alloc: Allocation) -> dict[str, Any]:
    """The fields a packet shows of an ownership allocation."""
    return _fields(
        (
            ("path", alloc.path),
            ("state", alloc.state),
            ("task", alloc.task),
            ("claimants", alloc.claimants),
        )
    )


def relation(alloc: Allocation, task_id: str) -> Ownership:
    """What ``alloc`` means to ``task_id``: owned, reserved by another, or unresolved."""
    if alloc.state is AllocationState.UNRESOLVED:
        return Ownership.UNRESOLVED
    return Ownership.OWNED if alloc.task == task_id else Ownership.RESERVED


@dataclass(slots=True)
class Projection:
    """The facts, bindings and missing facts of one role for one subject.

    Attributes:
        subject: ``{"task": id}``, or ``{"milestone": id}`` for the coordinator.
        facts: Fact name -> fact (JSON values).
        bindings: ``(kind, id, field)`` -> value.
        missing: Required facts the authority does not hold, in the order found.
    """

    subject: dict[str, str]
    facts: dict[str, Any] = field(default_factory=dict)
    bindings: dict[tuple[str, str, str], BindingValue] = field(default_factory=dict)
    missing: list[Missing] = field(default_factory=list)


class _Projector:
    def __init__(self, authority: Authority, subject: dict[str, str]) -> None:
        self.authority = authority
        self.out = Projection(subject)

    # -- primitives ------------------------------------------------------------------------

    def lack(self, fact: str, record: str, name: str, item: str | None = None) -> None:
        self.out.missing.append(Missing(fact, record, name, item))

    def bind(self, kind: str, record_id: str, name: str, value: BindingValue | None) -> None:
        if value is not None:
            self.out.bindings[(kind, record_id, name)] = value

    def need_bound(
        self, fact: str, kind: str, record_id: str, name: str, value: BindingValue | None
    ) -> None:
        """A binding the role requires: bound when present, missing when not."""
        if value is None:
            self.lack(fact, record_key(kind, record_id), name)
        self.bind(kind, record_id, name, value)

    def single(self, fact: str, kind: str, record_id: str, values: Mapping[str, object]) -> None:
        """A fact of one record; every value is required."""
        for name, value in values.items():
            if value is None:
                self.lack(fact, record_key(kind, record_id), name)
        self.out.facts[fact] = {
            "record": record_key(kind, record_id),
            "fields": _fields(values.items()),
        }

    def collection(
        self,
        fact: str,
        source: tuple[str, str],
        items: Sequence[dict[str, Any]],
    ) -> None:
        self.out.facts[fact] = {
            "source": {"record": source[0], "field": source[1]},
            "state": KNOWN if items else Ownership.KNOWN_EMPTY.value,
            "items": list(items),
        }

    def records(
        self,
        fact: str,
        name: str,
        kind: str,
        records: Sequence[_R] | None,
        select: Callable[[_R], bool],
        fields_of: Callable[[_R], dict[str, Any]],
    ) -> list[_R] | None:
        """A collection fact of records of one kind; each selected record is bound."""
        if records is None:
            self.lack(fact, _AUTHORITY, name)
            return None
        chosen = sorted((r for r in records if select(r)), key=lambda r: r.id)
        for record in chosen:
            self.bind(kind, record.id, "revision", record.revision)
        self.collection(
            fact,
            (_AUTHORITY, name),
            [{"record": record_key(kind, r.id), "fields": fields_of(r)} for r in chosen],
        )
        return chosen

    # -- shared facts ----------------------------------------------------------------------

    def membership(self, fact: str, task: Task) -> Milestone | None:
        milestone = self.authority.milestone_of(task.id)
        if milestone is None:
            self.lack(fact, record_key("task", task.id), "milestone")
        return milestone

    def milestone_objective(self, milestone: Milestone) -> None:
        self.bind("milestone", milestone.id, "revision", milestone.revision)
        self.single(
            "milestone_objective", "milestone", milestone.id, {"objective": milestone.objective}
        )

    def boundary(self, fact: str, task: Task, *, read: bool) -> None:
        key = record_key("task", task.id)
        if task.boundary is None:
            self.lack(fact, key, "boundary")
            self.out.facts[fact] = {"record": key, "fields": {}}
            return
        values: dict[str, object] = {"boundary.write": task.boundary.write}
        if read:
            values["boundary.read"] = task.boundary.read
        self.out.facts[fact] = {
            "record": key,
            "fields": {name: _json(value) for name, value in values.items()},
        }

    def edges(self, fact: str, select: Callable[[Dependency], bool]) -> None:
        self.records(
            fact,
            "dependencies",
            "dependency",
            self.authority.dependencies,
            select,
            dependency_fields,
        )

    def ownership(self, task: Task, *, siblings: frozenset[str]) -> None:
        """Allocations that matter to ``task``, what each means to it, and who decides each of
        its write paths. A write path no allocation covers is ``not_represented``: missing."""
        fact = "ownership"
        allocations = self.authority.allocations
        if allocations is None:
            self.lack(fact, _AUTHORITY, "allocations")
            return
        if task.boundary is None:
            self.lack(fact, record_key("task", task.id), "boundary")
            return
        write = task.boundary.write

        def relevant(alloc: Allocation) -> bool:
            return (
                alloc.task == task.id
                or task.id in alloc.claimants
                or any(overlaps(alloc.path, path) for path in write)
                or (alloc.state is AllocationState.OWNED and alloc.task in siblings)
            )

        chosen = sorted((a for a in allocations if relevant(a)), key=lambda a: a.id)
        for alloc in chosen:
            self.bind("allocation", alloc.id, "revision", alloc.revision)
        coverage = []
        for path in write:
            covering = [a for a in allocations if covers(a.path, path)]
            if not covering:
                self.lack(fact, record_key("task", task.id), "boundary.write", path)
                continue
            decided = max(covering, key=lambda a: len(path_parts(a.path)))
            coverage.append(
                {
                    "record": record_key("task", task.id),
                    "field": "boundary.write",
                    "item": path,
                    "ownership": relation(decided, task.id).value,
                    "decided_by": record_key("allocation", decided.id),
                }
            )
        items = [
            {
                "record": record_key("allocation", a.id),
                "fields": allocation_fields(a),
                "ownership": relation(a, task.id).value,
            }
            for a in chosen
        ]
        self.collection(fact, (_AUTHORITY, "allocations"), items)
        self.out.facts[fact]["coverage"] = coverage


# -- the roles -----------------------------------------------------------------------------


def _planner(p: _Projector, task: Task) -> None:
    milestone = p.membership("milestone_objective", task)
    siblings: frozenset[str] = frozenset()
    if milestone is not None:
        p.milestone_objective(milestone)
        p.need_bound(
            "milestone_objective", "milestone", milestone.id, "plan_hash", milestone.plan_hash
        )
        p.bind("milestone", milestone.id, "membership_revision", milestone.membership_revision)
        siblings = frozenset(milestone.tasks) - {task.id}
    p.bind("task", task.id, "revision", task.revision)
    p.single("task_objective", "task", task.id, {"objective": task.objective})
    p.boundary("task_boundary", task, read=True)
    p.single(
        "base",
        "task",
        task.id,
        {"base_branch": task.base_branch, "evaluated_base_head": task.evaluated_base_head},
    )
    p.bind("task", task.id, "base_branch", task.base_branch)
    p.bind("task", task.id, "evaluated_base_head", task.evaluated_base_head)
    p.edges("upstream_dependencies", lambda d: d.downstream == task.id)
    p.edges("downstream_dependencies", lambda d: d.upstream == task.id)
    p.ownership(task, siblings=siblings)
    p.records(
        "unresolved_prerequisites",
        "prerequisites",
        "prerequisite",
        p.authority.prerequisites,
        lambda r: r.task == task.id and r.state is PrerequisiteState.UNRESOLVED,
        lambda r: _fields((("task", r.task), ("state", r.state), ("description", r.description))),
    )


def _worker(p: _Projector, task: Task) -> None:
    p.bind("task", task.id, "revision", task.revision)
    p.single("brief", "task", task.id, {"brief_hash": task.brief_hash})
    p.bind("task", task.id, "brief_hash", task.brief_hash)
    p.single("plan", "task", task.id, {"plan_hash": task.plan_hash})
    p.bind("task", task.id, "plan_hash", task.plan_hash)
    step = None
    if task.steps is None:
        p.lack("current_step", record_key("task", task.id), "steps")
    elif task.current_step is None:
        p.lack("current_step", record_key("task", task.id), "current_step")
    else:
        step = next(s for s in task.steps if s.id == task.current_step)
        values: dict[str, object] = {"current_step": step.id}
        if step.title is not None:
            values[f"steps.{step.id}.title"] = step.title
        values[f"steps.{step.id}.requires"] = step.requires
        p.out.facts["current_step"] = {
            "record": record_key("task", task.id),
            "fields": {name: _json(value) for name, value in values.items()},
        }
    required = frozenset(step.requires) if step is not None else frozenset()
    if step is not None and not required:
        # The step needs no upstream output: known empty, whatever the authority represents.
        p.collection("required_upstream_outputs", (_AUTHORITY, "dependencies"), [])
    elif step is not None:
        p.edges("required_upstream_outputs", lambda d: d.id in required)
    p.boundary("write_boundary", task, read=False)
    p.ownership(task, siblings=frozenset())
    p.records(
        "execution_blockers",
        "blockers",
        "blocker",
        p.authority.blockers,
        lambda r: r.task == task.id and r.state is BlockerState.OPEN,
        lambda r: _fields((("task", r.task), ("state", r.state), ("description", r.description))),
    )


def _reviewer(p: _Projector, task: Task) -> None:
    milestone = p.membership("milestone_objective", task)
    if milestone is not None:
        p.milestone_objective(milestone)
    p.bind("task", task.id, "revision", task.revision)
    reviewed = {
        "brief_hash": task.brief_hash,
        "plan_hash": task.plan_hash,
        "base_commit": task.base_commit,
    }
    p.single("reviewed", "task", task.id, reviewed)
    for name, value in reviewed.items():
        p.bind("task", task.id, name, value)
    submission = task.submission
    if submission is None:
        p.lack("evidence", record_key("task", task.id), "submission")
    else:
        p.single(
            "evidence",
            "task",
            task.id,
            {"submission.head": submission.head, "submission.evidence": submission.evidence},
        )
        p.bind("task", task.id, "submission.head", submission.head)
    p.single("task_objective", "task", task.id, {"objective": task.objective})
    p.boundary("task_boundary", task, read=True)
    p.edges("upstream_dependencies", lambda d: d.downstream == task.id)
    p.edges("downstream_dependencies", lambda d: d.upstream == task.id)
    p.ownership(task, siblings=frozenset())


def _coordinator(p: _Projector, milestone: Milestone) -> None:
    key = record_key("milestone", milestone.id)
    p.bind("milestone", milestone.id, "revision", milestone.revision)
    p.need_bound("milestone_revisions", "milestone", milestone.id, "plan_hash", milestone.plan_hash)
    p.bind("milestone", milestone.id, "membership_revision", milestone.membership_revision)
    p.single(
        "milestone_revisions",
        "milestone",
        milestone.id,
        {
            "revision": milestone.revision,
            "plan_hash": milestone.plan_hash,
            "membership_revision": milestone.membership_revision,
        },
    )
    members: list[Task] = []
    for member_id in sorted(milestone.tasks):
        member = p.authority.task(member_id)
        assert member is not None  # the authority checked its membership on construction
        members.append(member)
        p.bind("task", member.id, "revision", member.revision)
        if member.status is None:
            p.lack("task_statuses", record_key("task", member.id), "status")
    source = (key, "tasks")

    def with_status(status: TaskStatus) -> list[dict[str, Any]]:
        return [
            {"record": record_key("task", t.id), "fields": {"status": status.value}}
            for t in members
            if t.status is status
        ]

    p.collection("runnable_tasks", source, with_status(TaskStatus.RUNNABLE))
    p.collection("blocked_tasks", source, with_status(TaskStatus.BLOCKED))
    p.collection(
        "task_revisions",
        source,
        [{"record": record_key("task", t.id), "fields": {"revision": t.revision}} for t in members],
    )
    ids = frozenset(milestone.tasks)
    p.edges(
        "unresolved_dependencies",
        lambda d: d.state is DependencyState.PENDING and (d.upstream in ids or d.downstream in ids),
    )
    p.records(
        "human_gates",
        "gates",
        "gate",
        p.authority.gates,
        lambda g: g.state is GateState.REQUIRED and (g.milestone == milestone.id or g.task in ids),
        lambda g: _fields(
            (
                ("task", g.task),
                ("milestone", g.milestone),
                ("state", g.state),
                ("description", g.description),
            )
        ),
    )


def project(
    authority: Authority, role: Role, *, task: str | None, milestone: str | None
) -> Projection:
    """Project ``authority`` for ``role``: the facts, their bindings, and what is missing.

    The subject is ``task`` for a planner, worker or reviewer; for a coordinator it is
    ``milestone``, or the milestone ``task`` belongs to.
    """
    if role is Role.COORDINATOR:
        if milestone is None and task is not None:
            member = authority.task(task)
            found = None if member is None else authority.milestone_of(task)
            if found is None:
                p = _Projector(authority, {"task": task})
                p.lack("subject", record_key("task", task), "id" if member is None else "milestone")
                return p.out
            milestone = found.id
        assert milestone is not None
        p = _Projector(authority, {"milestone": milestone})
        record = authority.milestone(milestone)
        if record is None:
            p.lack("subject", record_key("milestone", milestone), "id")
        else:
            _coordinator(p, record)
        return p.out
    assert task is not None
    p = _Projector(authority, {"task": task})
    subject = authority.task(task)
    if subject is None:
        p.lack("subject", record_key("task", task), "id")
        return p.out
    {Role.PLANNER: _planner, Role.WORKER: _worker, Role.REVIEWER: _reviewer}[role](p, subject)
    return p.out
