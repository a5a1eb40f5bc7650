"""Properties of role packets over generated authorities: deterministic, within budget, fresh."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import cargohold
from cargohold.envelopes import (
    Authority,
    BuildResult,
    Envelope,
    Outcome,
    Role,
    build_envelope,
    check_envelope,
    parse_authority,
)

PATHS = [".", "src", "src/a", "src/a/x.py", "src/b", "docs", "docs/readme.md", "tests/t.py"]
HASHES = ["sha256:" + c * 64 for c in "0123456789abcdef"]
COMMITS = [c * 40 for c in "0123456789abcdef"]
STATUSES = ["planned", "runnable", "running", "blocked", "in_review", "done"]

_short = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40
)
# Texts from a few bytes to well over every fact limit, without generating kilobytes per char.
texts = st.one_of(_short, st.builds(lambda s, n: s * n, _short, st.integers(1, 300)))


def _maybe(draw: st.DrawFn, value: Any) -> Any:
    return value if draw(st.floats(0, 1)) < 0.85 else None


@st.composite
def authorities(draw: st.DrawFn) -> dict[str, Any]:
    """A valid authority document: any mix of present and absent facts, or (half the time) a
    complete one, where every role of every task can be ready."""
    complete = draw(st.booleans())

    def maybe(value: Any) -> Any:
        return value if complete else _maybe(draw, value)

    def represented() -> bool:
        return complete or draw(st.booleans()) or draw(st.booleans())

    n = draw(st.integers(1, 5))
    ids = [f"T{i}" for i in range(n)]
    member_of = [
        draw(st.sampled_from(["M0", "M1"] if complete else ["M0", "M1", None])) for _ in ids
    ]
    milestones = [
        {
            "id": m,
            "revision": draw(st.integers(0, 9)),
            "membership_revision": draw(st.integers(0, 9)),
            "tasks": [t for t, mm in zip(ids, member_of, strict=True) if mm == m],
            "objective": maybe(draw(texts)),
            "plan_hash": maybe(draw(st.sampled_from(HASHES))),
        }
        for m in ("M0", "M1")
    ]
    doc: dict[str, Any] = {"format": "cargohold.authority/1", "milestones": milestones}
    dependencies = None
    if represented():
        # Distinct ends by construction: the downstream is a non-zero step away in the list.
        edges = st.tuples(st.integers(0, n - 1), st.integers(1, max(n - 1, 1)))
        drawn = draw(st.lists(edges, max_size=6)) if n > 1 else []
        pairs = [(ids[i], ids[(i + k) % n]) for i, k in drawn]
        dependencies = [
            {
                "id": f"D{i}",
                "revision": draw(st.integers(0, 9)),
                "upstream": up,
                "downstream": down,
                "output": draw(texts),
                "state": draw(st.sampled_from(["satisfied", "pending"])),
            }
            for i, (up, down) in enumerate(pairs)
        ]
        doc["dependencies"] = dependencies
    tasks = []
    for task_id in ids:
        into = [d["id"] for d in dependencies or [] if d["downstream"] == task_id]
        steps = draw(st.lists(st.sampled_from(into), max_size=2, unique=True)) if into else []
        task: dict[str, Any] = {
            "id": task_id,
            "revision": draw(st.integers(0, 9)),
            "status": maybe(draw(st.sampled_from(STATUSES))),
            "objective": maybe(draw(texts)),
            "brief_hash": maybe(draw(st.sampled_from(HASHES))),
            "plan_hash": maybe(draw(st.sampled_from(HASHES))),
            "base_branch": maybe("main"),
            "evaluated_base_head": maybe(draw(st.sampled_from(COMMITS))),
            "base_commit": maybe(draw(st.sampled_from(COMMITS))),
            "boundary": maybe(
                {
                    "write": draw(st.lists(st.sampled_from(PATHS), max_size=3, unique=True)),
                    "read": draw(st.lists(st.sampled_from(PATHS), max_size=2, unique=True)),
                },
            ),
            "submission": maybe(
                {
                    "head": draw(st.sampled_from(COMMITS)),
                    "evidence": draw(st.lists(texts, max_size=2)),
                },
            ),
        }
        if complete or draw(st.booleans()):
            task["steps"] = [
                {"id": "S0", "title": draw(texts), "requires": []},
                {"id": "S1", "requires": steps},
            ]
            if not complete and draw(st.booleans()):
                del task["steps"][0]["requires"]  # not represented: never "needs nothing"
            task["current_step"] = draw(st.sampled_from(["S0", "S1"]))
        tasks.append({k: v for k, v in task.items() if v is not None})
    doc["tasks"] = tasks
    for m in doc["milestones"]:
        for name in ("objective", "plan_hash"):
            if m[name] is None:
                del m[name]
    if represented():
        paths = draw(st.lists(st.sampled_from(PATHS), unique=True, max_size=len(PATHS)))
        if complete and "." not in paths:
            paths.append(".")  # the root covers every write path: nothing unrepresented
        allocations = []
        for i, path in enumerate(paths):
            owner = draw(st.sampled_from([*ids, None]))
            alloc: dict[str, Any] = {
                "id": f"A{i}",
                "revision": draw(st.integers(0, 9)),
                "path": path,
                "state": "owned" if owner else "unresolved",
            }
            if owner:
                alloc["task"] = owner
            else:
                alloc["claimants"] = draw(st.lists(st.sampled_from(ids), unique=True, max_size=2))
            allocations.append(alloc)
        doc["allocations"] = allocations
    for kind, prefix, states in (
        ("prerequisites", "P", ["unresolved", "satisfied"]),
        ("blockers", "B", ["open", "cleared"]),
    ):
        if represented():
            doc[kind] = [
                {
                    "id": f"{prefix}{i}",
                    "revision": draw(st.integers(0, 9)),
                    "task": draw(st.sampled_from(ids)),
                    "state": draw(st.sampled_from(states)),
                    "description": draw(texts),
                }
                for i in range(draw(st.integers(0, 3)))
            ]
    if represented():
        gates = []
        for i in range(draw(st.integers(0, 3))):
            gate: dict[str, Any] = {
                "id": f"G{i}",
                "revision": draw(st.integers(0, 9)),
                "state": draw(st.sampled_from(["required", "passed"])),
            }
            target = draw(st.sampled_from([*ids, "M0", "M1"]))
            gate["milestone" if target.startswith("M") else "task"] = target
            gates.append(gate)
        doc["gates"] = gates
    return doc


requests = st.tuples(
    st.sampled_from(list(Role)),
    st.integers(0, 4),
    st.sampled_from([1024, 4096, 16384]),
    st.sampled_from([128, 512, 2048]),
)

PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _store() -> cargohold.ScopedStore:
    return cargohold.ScopedStore(cargohold.MemoryStore(), cargohold.Scope("t", "u", "s"))


def _build(
    authority: Authority, request: tuple[Role, int, int, int], *, store: bool
) -> BuildResult:
    role, index, budget, fact_limit = request
    task = authority.tasks[index % len(authority.tasks)].id
    return build_envelope(
        authority,
        role,
        task=task,
        budget=budget,
        fact_limit=fact_limit,
        store=_store() if store else None,
    )


@PROPERTY_SETTINGS
@given(doc=authorities(), request=requests)
def test_packets_are_deterministic_and_within_budget_for_any_authority(
    doc: dict[str, Any], request: tuple[Role, int, int, int]
) -> None:
    first = _build(parse_authority(doc), request, store=True)
    again = _build(parse_authority(copy.deepcopy(doc)), request, store=True)

    assert first == again
    event(f"{first.outcome.value} {first.reason or ''}")
    if first.envelope is not None:
        assert first.outcome is Outcome.READY
        assert first.envelope.size <= request[2]
        assert Envelope.parse(first.envelope.data) == first.envelope
    elif first.outcome is Outcome.CONTEXT_INSUFFICIENT:
        assert first.missing
    elif first.outcome is Outcome.CONTEXT_CONFLICT:
        assert first.conflicts
    else:
        assert first.outcome is Outcome.OVER_BUDGET
        assert first.reason == "too_large"


@PROPERTY_SETTINGS
@given(doc=authorities(), request=requests)
def test_a_fresh_packet_checks_ready_and_a_bumped_subject_makes_it_stale(
    doc: dict[str, Any], request: tuple[Role, int, int, int]
) -> None:
    authority = parse_authority(doc)
    result = _build(authority, request, store=True)
    if result.envelope is None:
        return
    envelope = result.envelope

    assert check_envelope(envelope, authority).outcome is Outcome.READY
    if envelope.task is not None:
        bumped = copy.deepcopy(doc)
        task = next(t for t in bumped["tasks"] if t["id"] == envelope.task)
        task["revision"] += 1
        stale = check_envelope(envelope, parse_authority(bumped))
        assert stale.outcome is Outcome.CONTEXT_STALE
        assert ("task", envelope.task, "revision") in {
            (c.kind, c.id, c.field) for c in stale.changed
        }


@PROPERTY_SETTINGS
@given(doc=authorities(), request=requests)
def test_a_store_changes_nothing_for_a_packet_that_needs_no_reference(
    doc: dict[str, Any], request: tuple[Role, int, int, int]
) -> None:
    authority = parse_authority(doc)

    without = _build(authority, request, store=False)
    with_store = _build(authority, request, store=True)

    if without.envelope is not None:
        assert with_store == without
    elif without.reason == "needs_store":
        assert with_store.outcome in (Outcome.READY, Outcome.OVER_BUDGET)
    else:
        assert with_store.outcome is without.outcome
