"""Run the store benchmarks: ``python -m bench [--quick] [--markdown FILE] [SECTION ...]``.

``python -m bench soak [...]`` runs the crash soak instead (``bench/soak.py``,
``docs/reliability.md``): SIGKILL trials on the local store and PostgreSQL server kills, with
lost / corrupt / partial counts and a non-zero exit status when any is not zero.
``python -m bench compaction [--turns N] [--seed S]`` replays a 120-turn agent run through no
offload, offload, offload + compaction and lossy clearing, and prints the token figures
(``bench/compaction.py``, issue 24).
``python -m bench profile KIND [--size MIB] [--offload]`` profiles one kind's projection (or
offload) instead and prints where its time goes (``bench/decisions.py``).

Prints the machine, then one table of medians, each with its ratio to a baseline measured in
the same run and, where the design sets one, the target ratio. ``--markdown`` also writes the
same figures as markdown (``-`` for standard output), ready for ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import sys
import time

from bench._util import machine, report, scratch_dir
from bench.cli import SECTIONS as CLI_SECTIONS
from bench.credentials import SECTIONS as SECRETS_SECTIONS
from bench.decisions import SECTIONS as DECISION_SECTIONS
from bench.front_door import SECTIONS as FRONT_DOOR_SECTIONS
from bench.gateway import SECTIONS as GATEWAY_SECTIONS
from bench.grep import SECTIONS as GREP_SECTIONS
from bench.mcp_proxy import SECTIONS as MCP_SECTIONS
from bench.store import SECTIONS as STORE_SECTIONS
from bench.store import Config

SECTIONS = {
    **STORE_SECTIONS,
    **DECISION_SECTIONS,
    **SECRETS_SECTIONS,
    **CLI_SECTIONS,
    **FRONT_DOOR_SECTIONS,
    **GREP_SECTIONS,
    **MCP_SECTIONS,
    **GATEWAY_SECTIONS,
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["soak"]:
        from bench import soak

        return soak.main(argv[1:])
    if argv[:1] == ["compaction"]:
        from bench import compaction

        return compaction.main(argv[1:])
    if argv[:1] == ["profile"]:
        from bench.decisions import profile_main

        return profile_main(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "sections",
        nargs="*",
        metavar="SECTION",
        help=f"run only these sections ({', '.join(SECTIONS)}); all by default",
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer iterations and smaller stores (under a minute)"
    )
    parser.add_argument("--markdown", metavar="FILE", help="also write the figures as markdown")
    args = parser.parse_args(argv)
    unknown = [name for name in args.sections if name not in SECTIONS]
    if unknown:
        parser.error(f"unknown section {unknown[0]!r}; choose from {', '.join(SECTIONS)}")
    cfg = Config(quick=args.quick)
    chosen = args.sections or list(SECTIONS)

    info = machine()
    for key, value in info.items():
        print(f"{key:>14}: {value}")
    print()
    rows = []
    began = time.perf_counter()
    with scratch_dir() as root:
        for name in chosen:
            section_began = time.perf_counter()
            print(f"running {name} ...", file=sys.stderr, flush=True)
            rows.extend(SECTIONS[name]((root / name), cfg))
            print(
                f"  {name} took {time.perf_counter() - section_began:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    took = time.perf_counter() - began
    command = "python -m bench" + "".join(" " + name for name in args.sections or [])
    report(command, rows, took=took, quick=args.quick, markdown=args.markdown, info=info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
