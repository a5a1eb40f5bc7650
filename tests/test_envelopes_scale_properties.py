"""Properties of role packets over generated authorities of up to thousands of allocations.

* No packet answers ``owned`` for a path another task owns (or that is explicitly unresolved),
  and every ``reserved`` or ``unresolved`` answer is true of the authority.
* Every binding, changed alone, makes stale exactly the packets that rest on it: those that
  list it, and those that bind it through the digest of a set they summarise. No other packet.
  Every revision and hash the P03 brief lists for a decision is among those its packet lists.

Authorities are built as records (not parsed from documents) so that thousands of allocations
cost milliseconds; hypothesis draws their shape and a seed for the bulk.
"""

from __future__ import annotations

import bisect
import dataclasses
import random
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cargohold.envelopes import (
    Allocation,
    AllocationState,
    Authority,
    Boundary,
    Decision,
    Dependency,
    DependencyState,
    Envelope,
    Milestone,
    Outcome,
    Ownership,
    Role,
    Step,
    Submission,
    Task,
    TaskStatus,
    build_envelope,
    check_envelope,
)
from cargohold.envelopes._paths import overlaps

TASK_ROLES = (Role.PLANNER, Role.WORKER, Role.REVIEWER)
NAMES = ("api", "ui", "db", "jobs", "docs", "lib", "cli", "web")
STATUSES = list(TaskStatus)

SCALE = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _path(rng: random.Random, depth: int) -> str:
    return "/".join(
        f"{rng.choice(NAMES)}{rng.randrange(12 if level else 4)}" for level in range(depth)
    )


def _hash(rng: random.Random) -> str:
    return "sha256:" + rng.randbytes(32).hex()


@st.composite
def large_authorities(draw: st.DrawFn, most: int = 3000) -> Authority:
    """Two milestones of tasks over a tree of up to ``most`` allocations. Most tasks write
    only paths of their own allocations (their packets can be ready); some write elsewhere
    too (packets that are insufficient, or in conflict)."""
    tasks_count = draw(st.integers(2, 24))
    allocations_count = draw(st.integers(0, most))
    unresolved_share = draw(st.sampled_from([0.0, 0.05, 0.3]))
    stray_share = draw(st.sampled_from([0.0, 0.2]))
    rng = random.Random(draw(st.integers(0, 2**32)))
    ids = [f"T{i}" for i in range(tasks_count)]
    paths: set[str] = set()
    while len(paths) < allocations_count:
        paths.add(_path(rng, rng.randint(1, 4)))
    allocations = []
    own: dict[str, list[str]] = {task_id: [] for task_id in ids}
    for index, path in enumerate(sorted(paths)):
        if rng.random() < unresolved_share:
            claimants = tuple(sorted(rng.sample(ids, rng.randint(0, 2))))
            allocations.append(
                Allocation(
                    f"A{index}",
                    rng.randint(0, 5),
                    path,
                    AllocationState.UNRESOLVED,
                    claimants=claimants,
                )
            )
            continue
        owner = rng.choice(ids)
        own[owner].append(path)
        allocations.append(
            Allocation(f"A{index}", rng.randint(0, 5), path, AllocationState.OWNED, owner)
        )
    edges = [
        Dependency(
            f"D{i}",
            rng.randint(0, 5),
            ids[i],
            ids[i + 1],
            "an interface",
            rng.choice(list(DependencyState)),
        )
        for i in range(tasks_count - 1)
    ]
    tasks = []
    for i, task_id in enumerate(ids):
        mine = own[task_id]
        write = rng.sample(mine, min(len(mine), rng.randint(1, 3)))
        if not write or rng.random() < stray_share:
            write.append(_path(rng, rng.randint(1, 3)))
        read = [_path(rng, rng.randint(1, 2)) for _ in range(rng.randint(0, 2))]
        requires = (f"D{i - 1}",) if i else ()
        tasks.append(
            Task(
                task_id,
                rng.randint(0, 5),
                status=rng.choice(STATUSES),
                objective=f"Task {i}.",
                brief_hash=_hash(rng),
                plan_hash=_hash(rng),
                base_branch="main",
                evaluated_base_head=rng.randbytes(20).hex(),
                base_commit=rng.randbytes(20).hex(),
                boundary=Boundary(tuple(dict.fromkeys(write)), tuple(dict.fromkeys(read))),
                steps=(Step("S1", "Do it.", requires),),
                current_step="S1",
                submission=Submission(rng.randbytes(20).hex(), ()),
            )
        )
    half = tasks_count // 2
    return Authority(
        milestones=(
            Milestone("M0", 1, 1, tuple(ids[:half]), "First.", _hash(rng)),
            Milestone("M1", 1, 1, tuple(ids[half:]), "Second.", _hash(rng)),
        ),
        tasks=tuple(tasks),
        dependencies=tuple(edges),
        allocations=tuple(allocations),
        prerequisites=(),
        blockers=(),
        gates=(),
    )


def _packets(authority: Authority, tasks: list[str]) -> list[Envelope]:
    built = [build_envelope(authority, role, task=t) for t in tasks for role in TASK_ROLES]
    built += [build_envelope(authority, Role.COORDINATOR, milestone=m) for m in ("M0", "M1")]
    return [result.envelope for result in built if result.envelope is not None]


def _questions(authority: Authority, task: Task, rng: random.Random) -> list[str]:
    assert task.boundary is not None
    asked = {*task.boundary.write, *(task.boundary.read or ())}
    for alloc in rng.sample(
        list(authority.allocations or ()), min(60, len(authority.allocations or ()))
    ):
        asked.update({alloc.path, f"{alloc.path}/x.py", alloc.path.rpartition("/")[0] or "."})
    asked.update(_path(rng, rng.randint(1, 4)) for _ in range(20))
    return sorted(asked)


class _Oracle:
    """What the authority says about a path, worked out independently of the library's index:
    allocations at or above the path by its prefixes, those below it by bisecting the sorted
    paths (``/`` sorts just before ``0``)."""

    def __init__(self, authority: Authority) -> None:
        self.by_path = {a.path: a for a in authority.allocations or ()}
        self.paths = sorted(self.by_path)

    def covering(self, path: str) -> list[Allocation]:
        parts = [] if path == "." else path.split("/")
        prefixes = [".", *("/".join(parts[:end]) for end in range(1, len(parts) + 1))]
        return [self.by_path[p] for p in prefixes if p in self.by_path]

    def overlapping(self, path: str) -> list[Allocation]:
        if path == ".":
            return list(self.by_path.values())
        low = bisect.bisect_left(self.paths, path + "/")
        high = bisect.bisect_left(self.paths, path + "0")
        return self.covering(path) + [self.by_path[p] for p in self.paths[low:high]]


@SCALE
@given(authority=large_authorities(), seed=st.integers(0, 2**16))
def test_no_packet_answers_owned_for_a_path_another_task_owns(
    authority: Authority, seed: int
) -> None:
    rng = random.Random(seed)
    oracle = _Oracle(authority)
    chosen = rng.sample(list(authority.tasks), min(3, len(authority.tasks)))
    for task in chosen:
        packets = [build_envelope(authority, role, task=task.id).envelope for role in TASK_ROLES]
        for path in _questions(authority, task, rng):
            touching = oracle.overlapping(path)
            others = [a for a in touching if a.task not in (None, task.id)]
            unresolved = [a for a in touching if a.state is AllocationState.UNRESOLVED]
            covering = oracle.covering(path)
            for envelope in packets:
                if envelope is None:
                    continue
                answer = envelope.ownership_of(path)
                event(f"answered {answer.value}")
                if answer is Ownership.OWNED:
                    assert not others, (envelope.role, path)
                    assert not unresolved, (envelope.role, path)
                    assert covering
                    assert covering[-1].task == task.id
                elif answer is Ownership.RESERVED:
                    assert others, (envelope.role, path)
                elif answer is Ownership.UNRESOLVED:
                    assert unresolved, (envelope.role, path)
                    assert not others, (envelope.role, path)


def _changed(authority: Authority, kind: str, record_id: str, name: str) -> Authority:
    """``authority`` with one field of one record changed, and nothing else."""

    def bump(value: Any) -> Any:
        if isinstance(value, int):
            return value + 1
        if value.startswith("sha256:"):
            return "sha256:" + ("0" if value[-1] != "0" else "1") * 64
        if name == "base_branch":
            return value + "-next"
        return ("0" if value[-1] != "0" else "1") * len(value)

    collection = {"task": "tasks", "milestone": "milestones", "allocation": "allocations",
                  "dependency": "dependencies"}[kind]  # fmt: skip
    records = tuple(
        dataclasses.replace(r, **{name: bump(getattr(r, name))}) if r.id == record_id else r
        for r in getattr(authority, collection)
    )
    return dataclasses.replace(authority, **{collection: records})


def _summarised(envelope: Envelope, authority: Authority, kind: str, record_id: str) -> bool:
    """Whether ``envelope`` binds the record through the digest of a set it summarises."""
    digests = {(b.id, b.field) for b in envelope.bindings if b.kind == "digest"}
    if kind == "allocation" and ("ownership", "summary") in digests:
        alloc = next(a for a in authority.allocations or () if a.id == record_id)
        listed = {i["record"] for i in envelope.facts["ownership"]["items"]}
        read = envelope.facts["task_boundary"]["fields"]["boundary.read"]
        return f"allocation:{record_id}" not in listed and any(
            overlaps(alloc.path, r) for r in read
        )
    if kind == "task" and ("other_members", "tasks") in digests:
        milestone = authority.milestone_of(record_id)
        return milestone is not None and milestone.id == envelope.milestone
    if kind == "dependency" and ("unresolved_dependencies", "rest") in digests:
        edge = authority.dependency(record_id)
        milestone = authority.milestone(envelope.milestone or "")
        assert edge is not None
        assert milestone is not None
        decisive = {i["record"] for i in envelope.facts["unresolved_dependencies"]["items"]}
        touches = edge.upstream in milestone.tasks or edge.downstream in milestone.tasks
        pending = edge.state is DependencyState.PENDING
        return pending and touches and f"dependency:{record_id}" not in decisive
    return False


# The freshness bindings section 3.3 of the P03 brief lists, by the decision that rests on them.
RESTS_ON = {
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
        ("task", "base_commit"), ("milestone", "revision"),
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


def _rests_on(
    envelope: Envelope, authority: Authority, kind: str, record_id: str, name: str
) -> bool:
    """Whether the brief says ``envelope``'s decision rests on this field of this record."""
    if (kind, name) not in RESTS_ON[envelope.decision]:
        return False
    if kind == "task":
        return record_id == envelope.task
    subject = envelope.milestone
    if envelope.task is not None:
        milestone = authority.milestone_of(envelope.task)
        subject = None if milestone is None else milestone.id
    return record_id == subject


SEED_FIELDS = [
    ("task", "revision"),
    ("task", "brief_hash"),
    ("task", "plan_hash"),
    ("task", "base_branch"),
    ("task", "evaluated_base_head"),
    ("task", "base_commit"),
    ("milestone", "revision"),
    ("milestone", "plan_hash"),
    ("milestone", "membership_revision"),
    ("allocation", "revision"),
    ("dependency", "revision"),
]


@SCALE
@given(
    authority=large_authorities(most=2500),
    target=st.tuples(st.sampled_from(SEED_FIELDS), st.integers(0, 2**16)),
)
def test_a_binding_changed_alone_stales_exactly_the_packets_that_rest_on_it(
    authority: Authority, target: tuple[tuple[str, str], int]
) -> None:
    (kind, name), pick = target
    records = {
        "task": authority.tasks,
        "milestone": authority.milestones,
        "allocation": authority.allocations or (),
        "dependency": authority.dependencies or (),
    }[kind]
    if not records:
        return
    record_id = records[pick % len(records)].id
    tasks = sorted({t.id for t in authority.tasks})
    packets = _packets(authority, tasks)
    later = _changed(authority, kind, record_id, name)

    event(f"{len(packets)} ready packets" if len(packets) < 10 else "10+ ready packets")
    for envelope in packets:
        result = check_envelope(envelope, later)
        event(f"{result.outcome.value}")
        listed = (kind, record_id, name) in {(b.kind, b.id, b.field) for b in envelope.bindings}
        keys = {(c.kind, c.id, c.field) for c in result.changed}
        if _rests_on(envelope, authority, kind, record_id, name):
            assert listed, (envelope.decision, kind, name)
        if listed:
            assert result.outcome is Outcome.CONTEXT_STALE, (envelope.role, kind, name)
            assert (kind, record_id, name) in keys
        elif name == "revision" and _summarised(envelope, authority, kind, record_id):
            assert result.outcome is Outcome.CONTEXT_STALE, (envelope.role, kind, name)
            assert {k[0] for k in keys} == {"digest"}
        else:
            assert result.outcome is Outcome.READY, (envelope.role, kind, record_id, name, result)
