"""Role projections: the facts each decision needs, and the bindings those facts rest on.

What each decision gets (section 3.1 of the P03 brief), and nothing more:

====================  ===========================================================================
plan_task             milestone objective; task objective, brief, boundary (write and read), base
(planner)             branch and evaluated head; upstream and downstream dependencies; ownership
                      of its scope (read boundary summarised by path prefix); sibling write
                      boundaries overlapping its own; unresolved prerequisites
execute_step          brief, plan and base commit; current step; the upstream outputs that step
(worker)              requires; write boundary and its ownership; sibling write boundaries
                      overlapping it; open execution blockers
review_submission     reviewed authority (brief, plan, base commit) and evidence (submission);
(reviewer)            milestone and task objectives; task boundary; dependencies; ownership;
                      sibling write boundaries
review_plan           as ``review_submission``, with the base branch and evaluated head in place
(reviewer)            of the base commit and the submission (the task has not started)
schedule_milestone    runnable tasks and the pending edges into them; blocked tasks; the other
(coordinator)         members and pending edges counted and bound by a digest; milestone
                      revisions; required human gates
====================  ===========================================================================

Every fact names its source record and field. A fact the authority does not hold is reported
as :class:`~cargohold.envelopes.Missing`, never projected as an empty value. A sibling's plan,
brief, objective or revisions are never read; prose written about other tasks (dependency
outputs, gate descriptions) is bounded to :data:`PROSE_LIMIT` bytes or left out.
"""

from __future__ import annotations

import hashlib
import json
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
    record_key,
)
from cargohold.envelopes._ownership import answer
from cargohold.envelopes._paths import covers, depth, path_parts, truncate
from cargohold.envelopes._types import (
    DIGEST_KIND,
    BindingValue,
    BoundaryConflict,
    ConflictReason,
    Decision,
    Missing,
    Ownership,
    Role,
)

KNOWN = "known"
_AUTHORITY = "authority"
DETAIL_FORMAT = "cargohold.envelope-detail/1"
PROSE_LIMIT = 256
"""Prose about other tasks (a dependency's ``output``, a gate's ``description``) longer than
this many UTF-8 bytes is left out of a packet, so that a sibling's plan cannot travel in it."""
GROUPS_PER_PATH = 16
"""A read path with more sub-directories holding allocations than this is summarised whole."""
TASKS_PER_GROUP = 8
"""A summary group names at most this many tasks (``tasks_total`` counts them all)."""


class Prose(str):
    """A text of the authority's own prose (an objective, a title, a description, evidence):
    the only kind of value that may travel as an ``artifact://`` reference. Paths, ids, hashes,
    commits, states and revisions are structure and never leave the packet."""

    __slots__ = ()


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
    """A record's projected fields. A field the authority leaves out (``None``) is left out
    here too; an empty list is shown as the empty list it is."""
    return {name: _json(value) for name, value in pairs if value is not None}


def _prose(value: str | None) -> Prose | None:
    return None if value is None else Prose(value)


def bounded(value: str | None) -> Any:
    """Prose about another task: shown when short, else left out (its size is kept)."""
    if value is None:
        return None
    size = len(value.encode("utf-8"))
    if size <= PROSE_LIMIT:
        return value
    return {"omitted": "over_prose_limit", "bytes": size}


def dependency_fields(dep: Dependency, *, output: bool = True) -> dict[str, Any]:
    """The fields a packet shows of a dependency edge (the output is bounded prose)."""
    return _fields(
        (
            ("upstream", dep.upstream),
            ("downstream", dep.downstream),
            ("output", bounded(dep.output) if output else None),
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


def _id(record: _Record) -> str:
    return record.id


def _summary_item(authority: Authority, alloc: Allocation) -> bytes:
    """The canonical detail item of a summarised allocation. What it means never depends on
    the task (the task's own allocations are listed, never summarised), so it is encoded once
    per authority: a milestone's planners summarise the same allocations again and again."""

    def make() -> bytes:
        state = alloc.state is AllocationState.UNRESOLVED
        return canonical(
            {
                "record": record_key("allocation", alloc.id),
                "revision": alloc.revision,
                "fields": allocation_fields(alloc),
                "ownership": (Ownership.UNRESOLVED if state else Ownership.RESERVED).value,
            }
        )

    return authority._memoize(("summary-item", alloc.id), make)


def canonical(value: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, no whitespace, UTF-8)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def detail_document(fact: str, name: str, items: Sequence[bytes]) -> bytes:
    """The canonical bytes of a detail document from its items' canonical bytes: exactly
    ``canonical({"fact": fact, "field": name, "format": DETAIL_FORMAT, "items": [...]})``,
    without encoding thousands of items again for every packet."""
    head = canonical({"fact": fact, "field": name, "format": DETAIL_FORMAT})
    return head[:-1] + b',"items":[' + b",".join(items) + b"]}"


def relation(alloc: Allocation, task_id: str) -> Ownership:
    """What ``alloc`` means to ``task_id``: owned, reserved by another, or unresolved."""
    if alloc.state is AllocationState.UNRESOLVED:
        return Ownership.UNRESOLVED
    return Ownership.OWNED if alloc.task == task_id else Ownership.RESERVED


@dataclass(slots=True)
class Projection:
    """The facts, bindings, missing facts and conflicts of one decision about one subject.

    Attributes:
        subject: ``{"task": id}``, or ``{"milestone": id}`` for the coordinator.
        decision: The decision the facts are for.
        facts: Fact name -> fact (JSON values; own prose as :class:`Prose`).
        bindings: ``(kind, id, field)`` -> value.
        missing: Required facts the authority does not hold, in the order found.
        conflicts: Boundaries that contradict each other over a path the decision rests on.
        details: Digest -> canonical bytes of each set of records a digest binding covers.
    """

    subject: dict[str, str]
    decision: Decision
    facts: dict[str, Any] = field(default_factory=dict)
    bindings: dict[tuple[str, str, str], BindingValue] = field(default_factory=dict)
    missing: list[Missing] = field(default_factory=list)
    conflicts: list[BoundaryConflict] = field(default_factory=list)
    details: dict[str, bytes] = field(default_factory=dict)


class _Projector:
    def __init__(self, authority: Authority, subject: dict[str, str], decision: Decision):
        self.authority = authority
        self.out = Projection(subject, decision)

    # -- primitives ------------------------------------------------------------------------

    def lack(self, fact: str, record: str, name: str, item: str | None = None) -> None:
        self.out.missing.append(Missing(fact, record, name, item))

    def bind(self, kind: str, record_id: str, name: str, value: BindingValue | None) -> None:
        if value is not None:
            self.out.bindings[(kind, record_id, name)] = value

    def need_bound(
        self, fact: str, kind: str, record_id: str, name: str, value: BindingValue | None
    ) -> None:
        """A binding the decision requires: bound when present, missing when not."""
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

    def bound_single(
        self, fact: str, kind: str, record_id: str, values: Mapping[str, BindingValue | None]
    ) -> None:
        """A fact of one record whose every value is also a binding (hashes, commits)."""
        self.single(fact, kind, record_id, values)
        for name, value in values.items():
            self.bind(kind, record_id, name, value)

    def collection(
        self, fact: str, source: tuple[str, str], items: Sequence[dict[str, Any]]
    ) -> dict[str, Any]:
        value: dict[str, Any] = {
            "source": {"record": source[0], "field": source[1]},
            "state": KNOWN if items else Ownership.KNOWN_EMPTY.value,
            "items": list(items),
        }
        self.out.facts[fact] = value
        return value

    def digest(self, fact: str, name: str, items: Sequence[dict[str, Any] | bytes]) -> str:
        """Bind a set of records by the digest of their canonical detail, kept to be stored."""
        encoded = [item if isinstance(item, bytes) else canonical(item) for item in items]
        data = detail_document(fact, name, encoded)
        value = "sha256:" + hashlib.sha256(data).hexdigest()
        self.out.details[value] = data
        self.bind(DIGEST_KIND, fact, name, value)
        return value

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
        return self.chosen(fact, name, kind, [r for r in records if select(r)], fields_of)

    def chosen(
        self,
        fact: str,
        name: str,
        kind: str,
        records: Iterable[_R],
        fields_of: Callable[[_R], dict[str, Any]],
    ) -> list[_R]:
        chosen = sorted(records, key=lambda r: r.id)
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
            "milestone_objective",
            "milestone",
            milestone.id,
            {"objective": _prose(milestone.objective)},
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
        self.single(fact, "task", task.id, values)

    def edges(self, fact: str, found: Iterable[Dependency] | None) -> None:
        if self.authority.dependencies is None or found is None:
            self.lack(fact, _AUTHORITY, "dependencies")
            return
        self.chosen(fact, "dependencies", "dependency", found, dependency_fields)

    def ownership(self, task: Task, *, read_scope: bool) -> None:
        """The ownership of ``task``'s scope, who decides each of its write paths, and the
        boundaries that contradict each other over them.

        Listed one by one (and each bound by its revision): the allocations the task owns or
        claims, and every allocation overlapping its write boundary. With ``read_scope`` (the
        planner), the other allocations overlapping its read boundary are summarised by path
        prefix and bound together by a digest. Allocations outside the scope are not in the
        packet at all, so moving one never makes it stale, and a path there is
        ``not_represented``. A write path no allocation covers is missing.
        """
        fact = "ownership"
        key = record_key("task", task.id)
        if self.authority.allocations is None:
            self.lack(fact, _AUTHORITY, "allocations")
            return
        if task.boundary is None:
            self.lack(fact, key, "boundary")
            return
        write = task.boundary.write
        read: tuple[str, ...] = ()
        if read_scope:
            if task.boundary.read is None:
                self.lack(fact, key, "boundary.read")
                return
            read = task.boundary.read
        listed = {a.id: a for a in self.authority.allocations_of(task.id)}
        for path in write:
            listed.update((a.id, a) for a in self.authority.allocations_overlapping(path))
        items = sorted(listed.values(), key=lambda a: a.id)
        for alloc in items:
            self.bind("allocation", alloc.id, "revision", alloc.revision)
        value: dict[str, Any] = {
            "source": {"record": _AUTHORITY, "field": "allocations"},
            "state": KNOWN,
            "scope": {
                "record": key,
                "fields": {"boundary.write": list(write), "boundary.read": list(read)}
                if read_scope
                else {"boundary.write": list(write)},
            },
            "items": [
                {
                    "record": record_key("allocation", a.id),
                    "fields": allocation_fields(a),
                    "ownership": relation(a, task.id).value,
                }
                for a in items
            ],
        }
        summarised = 0
        if read_scope:
            summarised = self.summary(value, task, read, listed)
        if not items and not summarised:
            value["state"] = Ownership.KNOWN_EMPTY.value
        value["coverage"] = self.coverage(value, task, write, listed)
        self.out.facts[fact] = value

    def summary(
        self,
        value: dict[str, Any],
        task: Task,
        read: Sequence[str],
        listed: Mapping[str, Allocation],
    ) -> int:
        """Summarise by path prefix the allocations overlapping ``read`` not listed already."""
        rest: dict[str, Allocation] = {}
        cut_of: dict[str, str] = {}  # an allocation -> the deepest read path strictly above it
        for path in read:
            for alloc in self.authority.allocations_covering(path):
                if alloc.id not in listed:
                    rest[alloc.id] = alloc
            for alloc in self.authority.allocations_below(path):
                if alloc.id not in listed:
                    rest[alloc.id] = alloc
                    cut = cut_of.get(alloc.id)
                    if cut is None or depth(path) > depth(cut):
                        cut_of[alloc.id] = path
        keyed: dict[str, list[Allocation]] = {}
        origin: dict[str, str] = {}  # a key -> the read path it was cut from
        for alloc in sorted(rest.values(), key=lambda a: a.id):
            cut = cut_of.get(alloc.id)
            if cut is not None:
                prefix = truncate(alloc.path, depth(cut) + 1)
                origin.setdefault(prefix, cut)
            else:
                prefix = alloc.path  # at or above a read path: its own group, exactly
            keyed.setdefault(prefix, []).append(alloc)
        by_origin: dict[str, list[str]] = {}
        for prefix, cut in origin.items():
            if prefix != cut:
                by_origin.setdefault(cut, []).append(prefix)
        for cut, prefixes in by_origin.items():
            if len(prefixes) > GROUPS_PER_PATH:  # too many sub-directories: summarise it whole
                merged = keyed.setdefault(cut, [])
                for prefix in prefixes:
                    merged.extend(keyed.pop(prefix))
        groups = []
        for prefix in sorted(keyed, key=path_parts):
            members = keyed[prefix]
            tasks = sorted({a.task for a in members if a.task is not None})
            group: dict[str, Any] = {
                "prefix": prefix,
                "allocations": len(members),
                "reserved": sum(relation(a, task.id) is Ownership.RESERVED for a in members),
                "unresolved": sum(a.state is AllocationState.UNRESOLVED for a in members),
                "tasks": tasks[:TASKS_PER_GROUP],
                "tasks_total": len(tasks),
            }
            at_prefix = [a for a in members if a.path == prefix]
            if at_prefix:
                group["at_prefix"] = relation(at_prefix[0], task.id).value
            groups.append(group)
        summary: dict[str, Any] = {
            "source": {"record": record_key("task", task.id), "field": "boundary.read"},
            "records": len(rest),
            "groups": groups,
        }
        if rest:
            # What a summarised allocation means never depends on the task (it is not the
            # task's own: those are listed), so its detail item is made once per authority.
            detail = [_summary_item(self.authority, a) for a in sorted(rest.values(), key=_id)]
            summary["digest"] = self.digest("ownership", "summary", detail)
        value["summary"] = summary
        return len(rest)

    def coverage(
        self,
        value: dict[str, Any],
        task: Task,
        write: Sequence[str],
        listed: Mapping[str, Allocation],
    ) -> list[dict[str, Any]]:
        """Who decides each write path, answered as :func:`answer` answers it, and the
        contradictions between boundaries over it."""
        key = record_key("task", task.id)
        coverage = []
        for path in write:
            covering = self.authority.allocations_covering(path)
            if not covering:
                self.lack("ownership", key, "boundary.write", path)
                continue
            decided = covering[-1]  # paths are unique: the last is the deepest
            within = sorted(
                record_key("allocation", a.id)
                for a in listed.values()
                if covers(path, a.path)
                and a.path != path
                and relation(a, task.id) is not Ownership.OWNED
            )
            entry: dict[str, Any] = {
                "record": key,
                "field": "boundary.write",
                "item": path,
                "ownership": answer(value, path).value,
                "decided_by": record_key("allocation", decided.id),
            }
            if within:
                entry["within"] = within
            coverage.append(entry)
            self.conflicts(task, path, decided)
        return coverage

    def conflicts(self, task: Task, path: str, decided: Allocation) -> None:
        key = record_key("task", task.id)
        if decided.state is AllocationState.OWNED and decided.task != task.id:
            assert decided.task is not None
            self.out.conflicts.append(
                BoundaryConflict(
                    ConflictReason.WRITE_PATH_RESERVED,
                    key,
                    "boundary.write",
                    path,
                    record_key("task", decided.task),
                    record_key("allocation", decided.id),
                )
            )
        for other, other_path in sorted(self.authority.writers_overlapping(path)):
            if other == task.id:
                continue
            # A sibling whose own allocation backs its write path (a directory of its own
            # holding this task's carve-out, or its carve-out inside this task's directory)
            # is a boundary drawn on purpose; one that reaches into this task's allocation
            # without such backing contradicts it.
            backing = self.authority.allocations_covering(other_path)
            if backing and backing[-1].task == other:
                continue
            region = other_path if covers(path, other_path) else path
            owners = self.authority.allocations_covering(region)
            if owners and owners[-1].task == task.id:
                self.out.conflicts.append(
                    BoundaryConflict(
                        ConflictReason.SIBLING_WRITES_OWNED_PATH,
                        key,
                        "boundary.write",
                        path,
                        record_key("task", other),
                        record_key("allocation", owners[-1].id),
                    )
                )

    def sibling_boundaries(self, task: Task) -> None:
        """The write paths of other tasks that overlap this task's write boundary: the
        normalized constraint a sibling's boundary puts on this decision, never its plan."""
        fact = "sibling_boundaries"
        if task.boundary is None:
            self.lack(fact, record_key("task", task.id), "boundary")
            return
        found: dict[str, set[str]] = {}
        for path in task.boundary.write:
            for other, other_path in self.authority.writers_overlapping(path):
                if other != task.id:
                    found.setdefault(other, set()).add(other_path)
        items = [
            {
                "record": record_key("task", other),
                "field": "boundary.write",
                "items": sorted(found[other], key=path_parts),
            }
            for other in sorted(found)
        ]
        value = self.collection(fact, (_AUTHORITY, "tasks"), items)
        if items:
            value["digest"] = self.digest(fact, "boundary.write", items)


# -- the decisions ---------------------------------------------------------------------------


def _milestone_bindings(p: _Projector, task: Task, fact: str) -> None:
    milestone = p.membership(fact, task)
    if milestone is not None:
        p.milestone_objective(milestone)
        p.need_bound(fact, "milestone", milestone.id, "plan_hash", milestone.plan_hash)
        p.bind("milestone", milestone.id, "membership_revision", milestone.membership_revision)


def _dependencies(p: _Projector, task: Task) -> None:
    p.edges("upstream_dependencies", p.authority.edges_into(task.id))
    p.edges("downstream_dependencies", p.authority.edges_out_of(task.id))


def _plan_task(p: _Projector, task: Task) -> None:
    _milestone_bindings(p, task, "milestone_objective")
    p.bind("task", task.id, "revision", task.revision)
    p.single("task_objective", "task", task.id, {"objective": _prose(task.objective)})
    p.single("brief", "task", task.id, {"brief_hash": task.brief_hash})
    if task.plan_hash is not None:  # re-planning: the plan in force is part of the decision
        p.out.facts["brief"]["fields"]["plan_hash"] = task.plan_hash
    p.bind("task", task.id, "brief_hash", task.brief_hash)
    p.bind("task", task.id, "plan_hash", task.plan_hash)
    p.boundary("task_boundary", task, read=True)
    p.bound_single(
        "base",
        "task",
        task.id,
        {"base_branch": task.base_branch, "evaluated_base_head": task.evaluated_base_head},
    )
    _dependencies(p, task)
    p.ownership(task, read_scope=True)
    p.sibling_boundaries(task)
    p.records(
        "unresolved_prerequisites",
        "prerequisites",
        "prerequisite",
        p.authority.prerequisites,
        lambda r: r.task == task.id and r.state is PrerequisiteState.UNRESOLVED,
        lambda r: _fields(
            (("task", r.task), ("state", r.state), ("description", _prose(r.description)))
        ),
    )


def _execute_step(p: _Projector, task: Task) -> None:
    key = record_key("task", task.id)
    p.bind("task", task.id, "revision", task.revision)
    p.bound_single("brief", "task", task.id, {"brief_hash": task.brief_hash})
    p.bound_single("plan", "task", task.id, {"plan_hash": task.plan_hash})
    p.bound_single("base", "task", task.id, {"base_commit": task.base_commit})
    step = None
    if task.steps is None:
        p.lack("current_step", key, "steps")
    elif task.current_step is None:
        p.lack("current_step", key, "current_step")
    else:
        step = next(s for s in task.steps if s.id == task.current_step)
        values: dict[str, object] = {
            "current_step": step.id,
            f"steps.{step.id}.title": _prose(step.title),
            f"steps.{step.id}.requires": step.requires,
        }
        if step.requires is None:
            p.lack("current_step", key, f"steps.{step.id}.requires")
        p.out.facts["current_step"] = {"record": key, "fields": _fields(values.items())}
    if step is not None and step.requires is not None:
        required = frozenset(step.requires)
        p.edges(
            "required_upstream_outputs",
            [d for d in p.authority.edges_into(task.id) if d.id in required],
        )
    p.boundary("write_boundary", task, read=False)
    p.ownership(task, read_scope=False)
    p.sibling_boundaries(task)
    p.records(
        "execution_blockers",
        "blockers",
        "blocker",
        p.authority.blockers,
        lambda r: r.task == task.id and r.state is BlockerState.OPEN,
        lambda r: _fields(
            (("task", r.task), ("state", r.state), ("description", _prose(r.description)))
        ),
    )


def _review(p: _Projector, task: Task) -> None:
    milestone = p.membership("milestone_objective", task)
    if milestone is not None:
        p.milestone_objective(milestone)
    p.bind("task", task.id, "revision", task.revision)
    if p.out.decision is Decision.REVIEW_SUBMISSION:
        p.bound_single(
            "reviewed",
            "task",
            task.id,
            {
                "brief_hash": task.brief_hash,
                "plan_hash": task.plan_hash,
                "base_commit": task.base_commit,
            },
        )
        submission = task.submission
        if submission is None:
            p.lack("evidence", record_key("task", task.id), "submission")
        else:
            evidence = (
                None
                if submission.evidence is None
                else tuple(Prose(text) for text in submission.evidence)
            )
            p.single(
                "evidence",
                "task",
                task.id,
                {"submission.head": submission.head, "submission.evidence": evidence},
            )
            p.bind("task", task.id, "submission.head", submission.head)
    else:
        p.bound_single(
            "reviewed",
            "task",
            task.id,
            {"brief_hash": task.brief_hash, "plan_hash": task.plan_hash},
        )
        p.bound_single(
            "base",
            "task",
            task.id,
            {"base_branch": task.base_branch, "evaluated_base_head": task.evaluated_base_head},
        )
    p.single("task_objective", "task", task.id, {"objective": _prose(task.objective)})
    p.boundary("task_boundary", task, read=True)
    _dependencies(p, task)
    p.ownership(task, read_scope=False)
    p.sibling_boundaries(task)


def _schedule_milestone(p: _Projector, milestone: Milestone) -> None:
    """What the coordinator decides on: which member to start next.

    Listed one by one and each bound by its revision: the runnable members, and the pending
    edges into them (a runnable task with a pending upstream is a contradiction the coordinator
    must see). The blocked members are listed by id. Every other member (blocked ones
    included) and every other pending edge touching the milestone is bound through the digest
    of its set, with counts in the packet and the records as loadable detail: a change to any
    of them still makes the packet stale, and a milestone of hundreds of tasks still fits.
    """
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
        if member.status is None:
            p.lack("task_statuses", record_key("task", member.id), "status")

    def status_set(fact: str, status: TaskStatus) -> list[Task]:
        chosen = [t for t in members if t.status is status]
        p.out.facts[fact] = {
            "source": {"record": key, "field": "tasks"},
            "field": "status",
            "value": status.value,
            "state": KNOWN if chosen else Ownership.KNOWN_EMPTY.value,
            "records": [record_key("task", t.id) for t in chosen],
        }
        return chosen

    runnable = status_set("runnable_tasks", TaskStatus.RUNNABLE)
    status_set("blocked_tasks", TaskStatus.BLOCKED)
    for t in runnable:
        p.bind("task", t.id, "revision", t.revision)
    others = [t for t in members if t.status is not TaskStatus.RUNNABLE]
    by_status: dict[str, int] = {}
    for t in others:
        if t.status is not None:
            by_status[t.status.value] = by_status.get(t.status.value, 0) + 1
    rest: dict[str, Any] = {
        "source": {"record": key, "field": "tasks"},
        "records": len(others),
        "by_status": by_status,
    }
    if others:
        rest["digest"] = p.digest(
            "other_members",
            "tasks",
            [
                {
                    "record": record_key("task", t.id),
                    "revision": t.revision,
                    "fields": _fields((("status", t.status),)),
                }
                for t in others
            ],
        )
    p.out.facts["other_members"] = rest
    ids = frozenset(milestone.tasks)
    if p.authority.dependencies is None:
        p.lack("unresolved_dependencies", _AUTHORITY, "dependencies")
    else:
        into_runnable = frozenset(t.id for t in runnable)
        pending = [
            d
            for d in p.authority.dependencies
            if d.state is DependencyState.PENDING and (d.upstream in ids or d.downstream in ids)
        ]
        p.chosen(
            "unresolved_dependencies",
            "dependencies",
            "dependency",
            [d for d in pending if d.downstream in into_runnable],
            lambda d: dependency_fields(d, output=False),
        )
        later = sorted((d for d in pending if d.downstream not in into_runnable), key=_id)
        fact = p.out.facts["unresolved_dependencies"]
        fact["rest"] = {"records": len(later)}
        if later:
            fact["rest"]["digest"] = p.digest(
                "unresolved_dependencies",
                "rest",
                [
                    {
                        "record": record_key("dependency", d.id),
                        "revision": d.revision,
                        "fields": dependency_fields(d, output=False),
                    }
                    for d in later
                ],
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
                ("description", bounded(g.description)),
            )
        ),
    )


def default_decision(authority: Authority, role: Role, task: str | None) -> Decision:
    """The decision a role takes when none is named: the reviewer reviews the submission of a
    started task (one with a base commit) and the plan of one not started yet."""
    if role is Role.PLANNER:
        return Decision.PLAN_TASK
    if role is Role.WORKER:
        return Decision.EXECUTE_STEP
    if role is Role.COORDINATOR:
        return Decision.SCHEDULE_MILESTONE
    subject = None if task is None else authority.task(task)
    if subject is not None and subject.base_commit is None:
        return Decision.REVIEW_PLAN
    return Decision.REVIEW_SUBMISSION


_TASK_DECISIONS: dict[Decision, Callable[[_Projector, Task], None]] = {
    Decision.PLAN_TASK: _plan_task,
    Decision.EXECUTE_STEP: _execute_step,
    Decision.REVIEW_SUBMISSION: _review,
    Decision.REVIEW_PLAN: _review,
}


def project(
    authority: Authority,
    role: Role,
    *,
    task: str | None,
    milestone: str | None,
    decision: Decision | None = None,
) -> Projection:
    """Project ``authority`` for ``role``'s ``decision``: the facts, their bindings, what is
    missing, and what contradicts itself.

    The subject is ``task`` for a planner, worker or reviewer; for a coordinator it is
    ``milestone``, or the milestone ``task`` belongs to.
    """
    if decision is None:
        decision = default_decision(authority, role, task)
    if role is Role.COORDINATOR:
        if milestone is None and task is not None:
            member = authority.task(task)
            found = None if member is None else authority.milestone_of(task)
            if found is None:
                p = _Projector(authority, {"task": task}, decision)
                p.lack("subject", record_key("task", task), "id" if member is None else "milestone")
                return p.out
            milestone = found.id
        assert milestone is not None
        p = _Projector(authority, {"milestone": milestone}, decision)
        record = authority.milestone(milestone)
        if record is None:
            p.lack("subject", record_key("milestone", milestone), "id")
        else:
            _schedule_milestone(p, record)
        return p.out
    assert task is not None
    p = _Projector(authority, {"task": task}, decision)
    subject = authority.task(task)
    if subject is None:
        p.lack("subject", record_key("task", task), "id")
        return p.out
    _TASK_DECISIONS[decision](p, subject)
    return p.out
