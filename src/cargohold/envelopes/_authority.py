"""The authority: the workflow state every role packet is derived from.

An authority holds records (milestones, tasks, dependencies, ownership allocations,
prerequisites, blockers, human gates), each with an id and a revision. Packets project fields of
these records and bind the revisions and hashes they depend on; nothing else is authoritative.

Collections other than milestones and tasks may be *not represented*: ``None`` means the
authority holds no such facts at all, which is different from an empty tuple (the authority
knows there are none). A role that needs a collection the authority does not represent gets
``context-insufficient``, never an implicit "nothing there".

Every :class:`Authority` is checked on construction (ids unique and well formed, every reference
resolves, one allocation per path), whatever source it came from.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, runtime_checkable

from cargohold._errors import ConfigError
from cargohold.envelopes._paths import PathIndex

_T = TypeVar("_T")

ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
_ID = re.compile(ID_PATTERN)
_GLOB = frozenset("*?[]{}\\")


class AuthorityError(ConfigError):
    """An authority that cannot be used: unreadable, malformed, or inconsistent.

    The message names the record and field at fault, never a text value of the authority.
    """

    code = "authority"


class TaskStatus(enum.StrEnum):
    """Where a task is in the workflow, as the authority records it."""

    PLANNED = "planned"
    RUNNABLE = "runnable"
    RUNNING = "running"
    BLOCKED = "blocked"
    IN_REVIEW = "in_review"
    DONE = "done"


class DependencyState(enum.StrEnum):
    """Whether the upstream output a dependency edge names is available."""

    SATISFIED = "satisfied"
    PENDING = "pending"


class AllocationState(enum.StrEnum):
    """An ownership allocation either names its owning task or is explicitly unresolved."""

    OWNED = "owned"
    UNRESOLVED = "unresolved"


class PrerequisiteState(enum.StrEnum):
    """Whether a cross-task prerequisite is met."""

    UNRESOLVED = "unresolved"
    SATISFIED = "satisfied"


class BlockerState(enum.StrEnum):
    """Whether a known blocker still holds."""

    OPEN = "open"
    CLEARED = "cleared"


class GateState(enum.StrEnum):
    """Whether a human gate still has to be passed."""

    REQUIRED = "required"
    PASSED = "passed"


def check_id(kind: str, value: object) -> str:
    """Return ``value`` if it may be the id of a ``kind`` record, else raise.

    Ids never hold ``:``, so ``kind:id`` names a record unambiguously.

    Raises:
        AuthorityError: not 1-64 characters of letters, digits, ``.``, ``_``, ``-``, starting
            with a letter or digit.
    """
    if not isinstance(value, str) or _ID.fullmatch(value) is None:
        raise AuthorityError(
            f"a {kind} id is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return value


def record_key(kind: str, record_id: str) -> str:
    """The name a packet gives a record: ``kind:id`` (``task:T1``)."""
    return f"{kind}:{record_id}"


def split_record_key(key: str) -> tuple[str, str]:
    """``task:T1`` -> ``("task", "T1")``; compared as a tuple, never as a joined string."""
    kind, _, record_id = key.partition(":")
    return kind, record_id


# -- repository paths ------------------------------------------------------------------------


def check_path(value: object) -> str:
    """Return ``value`` if it is a repository path in normal form, else raise.

    A path names a file or a directory (covering everything below it) relative to the
    repository root: ``/``-separated, no empty, ``.`` or ``..`` part, no leading or trailing
    ``/``, no glob characters. ``.`` alone is the whole repository.

    Raises:
        AuthorityError: any other form.
    """
    if not isinstance(value, str) or not value:
        raise AuthorityError("a path is a non-empty string")
    if value == ".":
        return value
    parts = value.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise AuthorityError(
                "a path is relative and normal: no leading or trailing '/', no empty, '.' or "
                "'..' part ('.' alone is the repository root)"
            )
        if any(ch in _GLOB or not ch.isprintable() for ch in part):
            raise AuthorityError("a path holds no glob or control characters")
    return value


# -- records ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Milestone:
    """A milestone and its membership.

    Attributes:
        id: The milestone's id.
        revision: The milestone record's revision.
        membership_revision: The revision of its task membership.
        tasks: The ids of its member tasks (a task belongs to at most one milestone).
        objective: What the milestone is for (``None``: not represented).
        plan_hash: Hash of the milestone plan (``None``: not represented).
    """

    id: str
    revision: int
    membership_revision: int
    tasks: tuple[str, ...] = ()
    objective: str | None = None
    plan_hash: str | None = None


@dataclass(frozen=True, slots=True)
class Boundary:
    """A task's normalized boundary: the repository paths it may write and read.

    Attributes:
        write: The paths the task may write.
        read: The paths it reads (``None``: not represented, which is not "reads nothing").
    """

    write: tuple[str, ...] = ()
    read: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """A plan step.

    Attributes:
        id: The step's id, unique within its task.
        title: What the step does (``None``: not represented).
        requires: Ids of the dependency edges (into this task) whose outputs the step needs
            (``None``: not represented; ``()``: the step needs no upstream output).
    """

    id: str
    title: str | None = None
    requires: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Submission:
    """What a task submitted for review.

    Attributes:
        head: The submitted head commit.
        evidence: The evidence offered (``None``: not represented; ``()``: none offered).
    """

    head: str
    evidence: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Task:
    """A task. Every field but ``id`` and ``revision`` may be absent (``None``: not represented).

    Attributes:
        id: The task's id.
        revision: The task record's revision.
        status: Where the task is in the workflow.
        objective: What the task is for.
        brief_hash: Hash of the task's current brief.
        plan_hash: Hash of the task's current plan.
        base_branch: The branch the task starts from.
        evaluated_base_head: The head of ``base_branch`` the plan was evaluated against.
        base_commit: The commit recorded when the task started.
        boundary: The paths the task may write and read.
        steps: The plan's steps (``None``: not represented).
        current_step: The id of the step being executed.
        submission: What the task submitted for review.
    """

    id: str
    revision: int
    status: TaskStatus | None = None
    objective: str | None = None
    brief_hash: str | None = None
    plan_hash: str | None = None
    base_branch: str | None = None
    evaluated_base_head: str | None = None
    base_commit: str | None = None
    boundary: Boundary | None = None
    steps: tuple[Step, ...] | None = None
    current_step: str | None = None
    submission: Submission | None = None


@dataclass(frozen=True, slots=True)
class Dependency:
    """A dependency edge: ``downstream`` needs ``output`` from ``upstream``."""

    id: str
    revision: int
    upstream: str
    downstream: str
    output: str
    state: DependencyState


@dataclass(frozen=True, slots=True)
class Allocation:
    """An ownership allocation of a path (and everything below it).

    Attributes:
        id: The allocation's id.
        revision: The allocation record's revision.
        path: The repository path allocated.
        state: ``owned`` (by ``task``) or ``unresolved``.
        task: The owning task; set exactly when ``state`` is ``owned``.
        claimants: For an unresolved allocation, the tasks that may receive it (``None``: not
            represented).
    """

    id: str
    revision: int
    path: str
    state: AllocationState
    task: str | None = None
    claimants: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Prerequisite:
    """A cross-task prerequisite of ``task``."""

    id: str
    revision: int
    task: str
    state: PrerequisiteState
    description: str | None = None


@dataclass(frozen=True, slots=True)
class Blocker:
    """A known execution blocker of ``task``."""

    id: str
    revision: int
    task: str
    state: BlockerState
    description: str | None = None


@dataclass(frozen=True, slots=True)
class Gate:
    """A human gate on a task or a milestone (exactly one of the two)."""

    id: str
    revision: int
    state: GateState
    task: str | None = None
    milestone: str | None = None
    description: str | None = None


def _unique(kind: str, ids: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    for record_id in ids:
        check_id(kind, record_id)
        if record_id in seen:
            raise AuthorityError(f"{kind} {record_id} is defined twice")
        seen.add(record_id)
    return seen


def _revision(kind: str, record_id: str, value: object, name: str = "revision") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AuthorityError(f"{kind} {record_id}: {name} is a non-negative integer")


def _known_task(tasks: set[str], owner: str, name: str, value: str | None) -> None:
    if value is not None and value not in tasks:
        raise AuthorityError(f"{owner}: {name} names no task of this authority")


@dataclass(frozen=True, slots=True)
class Authority:
    """The workflow state packets are derived from. Checked on construction.

    Attributes:
        milestones: The milestones.
        tasks: The tasks.
        dependencies: Dependency edges (``None``: not represented).
        allocations: Ownership allocations (``None``: not represented).
        prerequisites: Cross-task prerequisites (``None``: not represented).
        blockers: Known blockers (``None``: not represented).
        gates: Human gates (``None``: not represented).

    Raises:
        AuthorityError: a malformed id, revision or path; an id defined twice; a reference to a
            record that does not exist; a task in two milestones; two allocations of one path;
            an owned allocation without its task, or an unresolved one with a task; a current
            step that is not one of the task's steps.
    """

    milestones: tuple[Milestone, ...] = ()
    tasks: tuple[Task, ...] = ()
    dependencies: tuple[Dependency, ...] | None = None
    allocations: tuple[Allocation, ...] | None = None
    prerequisites: tuple[Prerequisite, ...] | None = None
    blockers: tuple[Blocker, ...] | None = None
    gates: tuple[Gate, ...] | None = None
    _task_index: Mapping[str, Task] = field(init=False, repr=False, compare=False)
    _milestone_index: Mapping[str, Milestone] = field(init=False, repr=False, compare=False)
    _membership: Mapping[str, str] = field(init=False, repr=False, compare=False)
    _dependency_index: Mapping[str, Dependency] = field(init=False, repr=False, compare=False)
    _edges_into: Mapping[str, tuple[Dependency, ...]] = field(init=False, repr=False, compare=False)
    _edges_out: Mapping[str, tuple[Dependency, ...]] = field(init=False, repr=False, compare=False)
    _allocation_paths: PathIndex[Allocation] = field(init=False, repr=False, compare=False)
    _allocations_of: Mapping[str, tuple[Allocation, ...]] = field(
        init=False, repr=False, compare=False
    )
    _write_paths: PathIndex[tuple[str, str]] = field(init=False, repr=False, compare=False)
    _memo: dict[object, object] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        task_ids = _unique("task", (t.id for t in self.tasks))
        milestone_ids = _unique("milestone", (m.id for m in self.milestones))
        membership: dict[str, str] = {}
        for milestone in self.milestones:
            _revision("milestone", milestone.id, milestone.revision)
            _revision(
                "milestone", milestone.id, milestone.membership_revision, "membership_revision"
            )
            for member in milestone.tasks:
                _known_task(task_ids, f"milestone {milestone.id}", "tasks", member)
                if member in membership:
                    raise AuthorityError(f"task {member} is a member of two milestones")
                membership[member] = milestone.id
        dependency_index: dict[str, Dependency] = {}
        if self.dependencies is not None:
            _unique("dependency", (d.id for d in self.dependencies))
            dependency_index = {d.id: d for d in self.dependencies}
            for dep in self.dependencies:
                owner = f"dependency {dep.id}"
                _revision("dependency", dep.id, dep.revision)
                _known_task(task_ids, owner, "upstream", dep.upstream)
                _known_task(task_ids, owner, "downstream", dep.downstream)
                if dep.upstream == dep.downstream:
                    raise AuthorityError(f"{owner}: a task cannot depend on itself")
        for task in self.tasks:
            self._check_task(task, dependency_index)
        self._check_allocations(task_ids)
        for kind, records in (("prerequisite", self.prerequisites), ("blocker", self.blockers)):
            if records is not None:
                _unique(kind, (r.id for r in records))
                for record in records:
                    _revision(kind, record.id, record.revision)
                    _known_task(task_ids, f"{kind} {record.id}", "task", record.task)
        if self.gates is not None:
            _unique("gate", (g.id for g in self.gates))
            for gate in self.gates:
                _revision("gate", gate.id, gate.revision)
                if (gate.task is None) == (gate.milestone is None):
                    raise AuthorityError(f"gate {gate.id}: names exactly one task or milestone")
                _known_task(task_ids, f"gate {gate.id}", "task", gate.task)
                if gate.milestone is not None and gate.milestone not in milestone_ids:
                    raise AuthorityError(f"gate {gate.id}: milestone names no milestone")
        object.__setattr__(self, "_task_index", {t.id: t for t in self.tasks})
        object.__setattr__(self, "_milestone_index", {m.id: m for m in self.milestones})
        object.__setattr__(self, "_membership", membership)
        self._index(dependency_index)

    def _index(self, dependency_index: dict[str, Dependency]) -> None:
        """The lookups a projection makes, so that a build costs what the task touches, not
        what the authority holds."""
        into: dict[str, list[Dependency]] = {}
        out: dict[str, list[Dependency]] = {}
        for dep in self.dependencies or ():
            into.setdefault(dep.downstream, []).append(dep)
            out.setdefault(dep.upstream, []).append(dep)
        of_task: dict[str, list[Allocation]] = {}
        for alloc in self.allocations or ():
            for task_id in {alloc.task, *(alloc.claimants or ())} - {None}:
                assert task_id is not None
                of_task.setdefault(task_id, []).append(alloc)
        writes = (
            (path, (task.id, path))
            for task in self.tasks
            if task.boundary is not None
            for path in task.boundary.write
        )

        def frozen(index: dict[str, list[Dependency]]) -> dict[str, tuple[Dependency, ...]]:
            return {key: tuple(sorted(value, key=lambda d: d.id)) for key, value in index.items()}

        object.__setattr__(self, "_dependency_index", dependency_index)
        object.__setattr__(self, "_edges_into", frozen(into))
        object.__setattr__(self, "_edges_out", frozen(out))
        object.__setattr__(
            self, "_allocation_paths", PathIndex((a.path, a) for a in self.allocations or ())
        )
        object.__setattr__(
            self,
            "_allocations_of",
            {key: tuple(sorted(value, key=lambda a: a.id)) for key, value in of_task.items()},
        )
        object.__setattr__(self, "_write_paths", PathIndex(writes))
        object.__setattr__(self, "_memo", {})

    def _check_task(self, task: Task, dependency_index: Mapping[str, Dependency]) -> None:
        owner = f"task {task.id}"
        _revision("task", task.id, task.revision)
        if task.boundary is not None:
            for path in (*task.boundary.write, *(task.boundary.read or ())):
                check_path(path)
        step_ids = set()
        if task.steps is not None:
            step_ids = _unique("step", (s.id for s in task.steps))
            for step in task.steps:
                for dep_id in step.requires or ():
                    check_id("dependency", dep_id)
                    if self.dependencies is None:
                        continue  # not represented: a worker packet reports it as missing
                    edge = dependency_index.get(dep_id)
                    if edge is None:
                        raise AuthorityError(f"{owner}: step {step.id} requires no known edge")
                    if edge.downstream != task.id:
                        raise AuthorityError(
                            f"{owner}: step {step.id} requires dependency {dep_id}, "
                            "which does not lead into this task"
                        )
        if task.current_step is not None and task.current_step not in step_ids:
            raise AuthorityError(f"{owner}: current_step is not one of its steps")

    def _check_allocations(self, task_ids: set[str]) -> None:
        if self.allocations is None:
            return
        _unique("allocation", (a.id for a in self.allocations))
        paths: set[str] = set()
        for alloc in self.allocations:
            owner = f"allocation {alloc.id}"
            _revision("allocation", alloc.id, alloc.revision)
            if check_path(alloc.path) in paths:
                raise AuthorityError(f"{owner}: its path is allocated twice")
            paths.add(alloc.path)
            if (alloc.state is AllocationState.OWNED) != (alloc.task is not None):
                raise AuthorityError(f"{owner}: an owned allocation names its task, no other does")
            _known_task(task_ids, owner, "task", alloc.task)
            for claimant in alloc.claimants or ():
                _known_task(task_ids, owner, "claimants", claimant)
            if alloc.claimants and alloc.state is not AllocationState.UNRESOLVED:
                raise AuthorityError(f"{owner}: only an unresolved allocation has claimants")

    def task(self, task_id: str) -> Task | None:
        """The task ``task_id``, or ``None``."""
        return self._task_index.get(task_id)

    def milestone(self, milestone_id: str) -> Milestone | None:
        """The milestone ``milestone_id``, or ``None``."""
        return self._milestone_index.get(milestone_id)

    def milestone_of(self, task_id: str) -> Milestone | None:
        """The milestone ``task_id`` is a member of, or ``None``."""
        milestone_id = self._membership.get(task_id)
        return None if milestone_id is None else self._milestone_index[milestone_id]

    def dependency(self, dependency_id: str) -> Dependency | None:
        """The dependency edge ``dependency_id``, or ``None``."""
        return self._dependency_index.get(dependency_id)

    def edges_into(self, task_id: str) -> tuple[Dependency, ...]:
        """The dependency edges whose downstream is ``task_id``, by id."""
        return self._edges_into.get(task_id, ())

    def edges_out_of(self, task_id: str) -> tuple[Dependency, ...]:
        """The dependency edges whose upstream is ``task_id``, by id."""
        return self._edges_out.get(task_id, ())

    def allocations_covering(self, path: str) -> list[Allocation]:
        """The allocations of ``path`` or of a directory above it, shallowest first."""
        return self._allocation_paths.covering(path)

    def allocations_below(self, path: str) -> list[Allocation]:
        """The allocations strictly below ``path``."""
        return self._allocation_paths.below(path)

    def allocations_overlapping(self, path: str) -> list[Allocation]:
        """The allocations that cover ``path`` or lie below it."""
        return self._allocation_paths.overlapping(path)

    def allocations_of(self, task_id: str) -> tuple[Allocation, ...]:
        """The allocations ``task_id`` owns or is a claimant of, by id."""
        return self._allocations_of.get(task_id, ())

    def _memoize(self, key: object, make: Callable[[], _T]) -> _T:
        """``make()``, computed once per authority for ``key``: what a projection derives from
        one record alone (an authority never changes, so neither does that). For this
        package's projections only."""
        try:
            return self._memo[key]  # type: ignore[return-value]  # keys are typed by callers
        except KeyError:
            value = self._memo[key] = make()
            return value

    def writers_overlapping(self, path: str) -> list[tuple[str, str]]:
        """``(task id, write path)`` of every task whose write boundary overlaps ``path``."""
        return self._write_paths.overlapping(path)


@runtime_checkable
class AuthoritySource(Protocol):
    """Where an authority comes from: a file, a workflow engine, a database.

    ``load`` returns the current state each time it is called; a packet is checked against what
    ``load`` returns now, never against a cached copy.
    """

    def load(self) -> Authority:
        """The current authority.

        Raises:
            AuthorityError: the source cannot be read or does not hold a valid authority.
        """
        ...
