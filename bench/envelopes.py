"""Coordination envelopes at scale: ``python -m bench.envelopes [--quick] [--markdown FILE]``.

One milestone of 500 tasks and 5,000 ownership allocations (issue 19): each task owns its
module directory (``src/areaK/modN``) and eight files in it, and one file of a shared package
(``src/shared/tN.py``) that every task reads; every third module holds a file another task owns
and writes (a carve-out); a chain of dependency edges, a fifth of the tasks runnable and a fifth
blocked on a pending edge. The planner of such a task summarises about 580 allocations of its
read scope by path prefix, bound by one digest.

Timed (medians, interleaved with their baselines):

* ``build ROLE``: one packet of a sampled task, against the canonical JSON encoding of that same
  packet (the least work of producing its bytes);
* ``check ROLE``: checking that packet against the same authority, against building it (a check
  is a rebuild and a comparison);
* ``build_milestone``: all 1,501 packets of the milestone (the coordinator's, and a planner,
  worker and reviewer packet per task), against parsing the authority document (pydantic);
* ``check_envelopes``: checking all of them against one authority, against building them.

The packet sizes (median and largest, per role, over the whole milestone) are printed under the
table: every packet must fit the default 16 KiB budget.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._util import Case, Row, interleave, report, scratch_dir
from bench.store import Config
from cargohold.envelopes import (
    DEFAULT_BUDGET,
    Authority,
    Envelope,
    Role,
    build_envelope,
    build_milestone,
    canonical_json,
    check_envelope,
    check_envelopes,
    parse_authority,
)

TASKS = 500
FILES_PER_MODULE = 8
AREA = 10
STATUSES = ("running", "runnable", "blocked", "in_review", "done")
TASK_ROLES = (Role.PLANNER, Role.WORKER, Role.REVIEWER)


def milestone(tasks: int = TASKS, seed: int = 19) -> dict[str, Any]:
    """The authority document: one milestone of ``tasks`` tasks, ``10 * tasks`` allocations."""
    rng = random.Random(seed)
    ids = [f"T{i:04d}" for i in range(tasks)]

    def module(i: int) -> str:
        return f"src/area{i // AREA:03d}/mod{i:04d}"

    def digest() -> str:
        return "sha256:" + rng.randbytes(32).hex()

    task_docs: list[dict[str, Any]] = []
    allocations: list[dict[str, Any]] = []
    for i, task_id in enumerate(ids):
        write = [module(i), f"src/shared/t{i:04d}.py"]
        if i % 3 == 1:
            write.append(f"{module(i - 1)}/file00.py")  # the carve-out it owns in a neighbour
        task_docs.append(
            {
                "id": task_id,
                "revision": rng.randint(1, 9),
                "status": STATUSES[i % len(STATUSES)],
                "objective": f"Implement module {i}: parse, validate and store its records.",
                "brief_hash": digest(),
                "plan_hash": digest(),
                "base_branch": "main",
                "evaluated_base_head": rng.randbytes(20).hex(),
                "base_commit": rng.randbytes(20).hex(),
                "boundary": {"write": write, "read": [f"src/area{i // AREA:03d}", "src/shared"]},
                "current_step": "S2",
                "steps": [
                    {"id": "S1", "title": "Write the parser", "requires": []},
                    {
                        "id": "S2",
                        "title": "Validate against the upstream schema",
                        "requires": [f"D{i - 1:04d}"] if i else [],
                    },
                ],
                "submission": {"head": rng.randbytes(20).hex(), "evidence": []},
            }
        )
        allocations.append(
            {"id": f"A{i:04d}", "revision": 1, "path": module(i), "state": "owned", "task": task_id}
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
        for f in range(FILES_PER_MODULE):
            owner = ids[i + 1] if i % 3 == 0 and f == 0 and i + 1 < tasks else task_id
            allocations.append(
                {
                    "id": f"F{i:04d}-{f}",
                    "revision": 1,
                    "path": f"{module(i)}/file{f:02d}.py",
                    "state": "owned",
                    "task": owner,
                }
            )
    return {
        "format": "cargohold.authority/1",
        "milestones": [
            {
                "id": "M1",
                "revision": 3,
                "membership_revision": 2,
                "tasks": ids,
                "objective": "Import every legacy record format.",
                "plan_hash": digest(),
            }
        ],
        "tasks": task_docs,
        "dependencies": [
            {
                "id": f"D{i:04d}",
                "revision": 1,
                "upstream": ids[i],
                "downstream": ids[i + 1],
                "output": f"the schema of module {i}",
                "state": "pending"
                if STATUSES[(i + 1) % len(STATUSES)] == "blocked"
                else "satisfied",
            }
            for i in range(tasks - 1)
        ],
        "allocations": allocations,
        "prerequisites": [],
        "blockers": [],
        "gates": [{"id": "G1", "revision": 1, "milestone": "M1", "state": "required"}],
    }


def _sizes(envelopes: list[Envelope]) -> dict[str, tuple[int, int]]:
    by_role: dict[str, list[int]] = {}
    for envelope in envelopes:
        by_role.setdefault(envelope.role.value, []).append(envelope.size)
    return {role: (int(statistics.median(s)), max(s)) for role, s in by_role.items()}


SIZES: list[str] = []


def bench_envelopes(root: Path, cfg: Config) -> list[Row]:
    document = milestone()
    authority: Authority = parse_authority(document)
    repeat = 5 if cfg.quick else 25
    sample = [f"T{i:04d}" for i in range(1, TASKS, TASKS // 20)]
    rows: list[Row] = []
    for role in TASK_ROLES:
        packets = {}
        for task in sample:
            built = build_envelope(authority, role, task=task)
            assert built.envelope is not None, (role, task, built.outcome)
            packets[task] = built.envelope

        def build(i: int, role: Role = role) -> object:
            return build_envelope(authority, role, task=sample[i % len(sample)])

        def encode(i: int, role: Role = role, packets: dict[str, Envelope] = packets) -> object:
            return canonical_json(json.loads(packets[sample[i % len(sample)]].data))

        def check(i: int, packets: dict[str, Envelope] = packets) -> object:
            return check_envelope(packets[sample[i % len(sample)]], authority)

        medians = interleave(
            [Case("build", build), Case("encode", encode), Case("check", check)],
            repeat=repeat * len(sample) // 5,
        )
        rows.append(
            Row("envelopes", f"build {role.value}", None, medians["build"],
                "canonical JSON of that packet", medians["encode"])
        )  # fmt: skip
        rows.append(
            Row("envelopes", f"check {role.value}", None, medians["check"],
                f"build {role.value}", medians["build"])
        )  # fmt: skip
    built_all: list[Any] = []

    def whole(i: int) -> object:
        built_all[:] = build_milestone(authority, "M1")
        return built_all

    def parse(i: int) -> object:
        return parse_authority(document)

    def check_all(i: int) -> object:
        return check_envelopes([r.envelope for r in built_all], authority)

    medians = interleave(
        [Case("milestone", whole), Case("parse", parse), Case("check", check_all)],
        repeat=2 if cfg.quick else 5,
    )
    rows.append(
        Row("envelopes", f"build_milestone ({len(built_all)} packets)", None,
            medians["milestone"], "parse_authority of the document", medians["parse"])
    )  # fmt: skip
    rows.append(
        Row("envelopes", f"check_envelopes ({len(built_all)} packets)", None, medians["check"],
            "build_milestone", medians["milestone"])
    )  # fmt: skip
    envelopes = [r.envelope for r in built_all if r.envelope is not None]
    sizes = _sizes(envelopes)
    SIZES[:] = [
        f"{TASKS} tasks, {len(document['allocations']):,} allocations, "
        f"{len(document['dependencies'])} edges; {len(envelopes)} of {len(built_all)} packets "
        f"ready, largest {max(e.size for e in envelopes):,} bytes "
        f"(budget {DEFAULT_BUDGET:,})",
        "packet bytes, median / largest: "
        + "; ".join(f"{role} {med:,} / {top:,}" for role, (med, top) in sorted(sizes.items())),
    ]
    return rows


SECTIONS: dict[str, Callable[[Path, Config], list[Row]]] = {"envelopes": bench_envelopes}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.envelopes", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    args = parser.parse_args(argv)

    from bench._util import machine

    info = machine()
    info["load average"] = " ".join(f"{load:.2f}" for load in os.getloadavg())
    for key, value in info.items():
        print(f"{key:>14}: {value}")
    print()
    began = time.perf_counter()
    with scratch_dir() as root:
        rows = bench_envelopes(root / "envelopes", Config(quick=args.quick))
    took = time.perf_counter() - began
    after = " ".join(f"{load:.2f}" for load in os.getloadavg())
    report(
        "python -m bench.envelopes",
        rows,
        took=took,
        quick=args.quick,
        markdown=args.markdown,
        summary=[*SIZES, f"load average at the end: {after}"],
        info=info,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
