"""The run report of a big events log: ``python -m bench.report [--events N] [--repeat R]``.

Issue 28 asks that the report of a 100,000-event log builds in under 2 s and that the page stays
usable (it aggregates; it does not draw a row per event). This writes a synthetic JSON-lines log
of N events (default 100,000) of a three-level agent tree (offloads of 40 tools, read-backs,
guard stops, compactions, refusals), then times, as medians over interleaved runs:

- ``report``: what ``cargohold report --events FILE --html OUT`` does past start-up: read the
  log, aggregate it, render the page;
- ``parse``: the baseline, reading the same log and ``json.loads`` of every line (what any
  report of it must do at least).

It prints both, their ratio, the page's size, and whether the report is under the 2 s target.
Figures belong to a quiet machine; the lead takes them.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cargohold.cli._decisions import _load_events
from cargohold.report import build_report, render_html

TARGET_SECONDS = 2.0


def write_log(path: Path, count: int, seed: int = 28) -> None:
    """A log of ``count`` events: a planner, 5 workers under it, 4 readers under each."""
    rng = random.Random(seed)
    agents = [("planner", None, 0)]
    for w in range(5):
        agents.append((f"worker-{w}", "planner", 1))
        agents += [(f"reader-{w}-{r}", f"worker-{w}", 2) for r in range(4)]
    refs = [f"artifact://sha256/{rng.getrandbits(256):064x}" for _ in range(5000)]
    with path.open("w", encoding="utf-8") as out:
        for sequence in range(count):
            agent, parent, depth = agents[rng.randrange(len(agents))]
            roll = rng.random()
            event: dict[str, object] = {
                "time": "2026-12-01T23:00:00.000Z",
                "agent_id": agent,
                "parent_agent_id": parent,
                "depth": depth,
                "sequence": sequence,
                "limit_bytes": 32768,
                "limit_tokens": None,
                "cleared": 0,
                "tokens_after": None,
                "content_kind": "tool_result",
                "tool": f"tool_{rng.randrange(40)}",
            }
            if roll < 0.6:
                size = rng.randrange(100, 2_000_000)
                heavy = size >= 32768
                event |= {
                    "operation": "offload",
                    "outcome": "offloaded" if heavy else "inline",
                    "reason": "at_or_above_threshold" if heavy else "below_threshold",
                    "observed_bytes": size,
                    "context_bytes": min(size, 8192) if heavy else size,
                    "estimated_tokens": size // 4,
                    "ref": rng.choice(refs) if heavy else None,
                }
            elif roll < 0.9:
                event |= {
                    "operation": "rehydrate",
                    "outcome": "resolved" if rng.random() < 0.9 else "stale",
                    "reason": "verified",
                    "observed_bytes": 4096,
                    "context_bytes": 4096,
                    "estimated_tokens": 1024,
                    "ref": rng.choice(refs),
                    "content_kind": "recovered_context",
                }
            elif roll < 0.95:
                event |= {
                    "operation": "guard",
                    "outcome": "llm.context_leak",
                    "reason": "raw_tool_output",
                    "observed_bytes": 50_000,
                    "context_bytes": 0,
                    "estimated_tokens": 12_000,
                    "ref": None,
                    "content_kind": "message_text",
                }
            elif roll < 0.98:
                event |= {
                    "operation": "compact",
                    "outcome": "compacted",
                    "reason": "over_trigger",
                    "observed_bytes": 400_000,
                    "context_bytes": 4000,
                    "estimated_tokens": 100_000,
                    "tokens_after": 20_000,
                    "cleared": 12,
                    "ref": None,
                    "content_kind": "request",
                }
            else:
                event |= {
                    "operation": "offload",
                    "outcome": "failed",
                    "reason": "store_unavailable",
                    "observed_bytes": 60_000,
                    "context_bytes": 300,
                    "estimated_tokens": 15_000,
                    "ref": None,
                }
            out.write(json.dumps(event, separators=(",", ":"), sort_keys=True) + "\n")


def _report(path: Path) -> int:
    log = _load_events(path, named=True)
    return len(render_html(build_report(log.events, skipped=log.skipped)))


def _parse(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for line in handle if json.loads(line))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cargohold-bench-report-") as scratch:
        path = Path(scratch) / "events.jsonl"
        write_log(path, args.events)
        report_s: list[float] = []
        parse_s: list[float] = []
        page = _report(path)  # warm-up
        _parse(path)
        for _ in range(args.repeat):  # interleaved: a busy neighbour slows both alike
            start = time.perf_counter()
            page = _report(path)
            report_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            _parse(path)
            parse_s.append(time.perf_counter() - start)
        size = path.stat().st_size
    report_m, parse_m = statistics.median(report_s), statistics.median(parse_s)
    verdict = "ok" if report_m < TARGET_SECONDS else "OVER"
    print(f"events: {args.events:,} ({size / 1e6:,.1f} MB of JSON lines)")
    print(f"report (read, aggregate, render): {report_m * 1000:,.0f} ms median of {args.repeat}")
    print(f"parse only (baseline):            {parse_m * 1000:,.0f} ms")
    print(f"ratio report / parse: {report_m / parse_m:.2f}x")
    print(f"page: {page:,} characters")
    print(f"target: under {TARGET_SECONDS:.0f} s: {verdict}")
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
