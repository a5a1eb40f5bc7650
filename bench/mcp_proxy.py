"""MCP proxy benchmark: ``python -m bench.mcp_proxy [--quick] [--markdown FILE]``.

Also the ``mcp_proxy`` section of ``python -m bench``. An upstream MCP server (the SDK's
``MCPServer``, started from this file with ``--upstream``) has one tool that returns a 2 MB log
(distinct bytes on every call, so every call through the proxy is a fresh offload: the write,
the fsync, the stub). The SDK client calls it over stdio:

- **direct**: client -> upstream. The baseline.
- **via proxy**: client -> ``cargohold proxy`` -> upstream, on the embedded local store in a
  scratch directory: the 2 MB are stored and the client gets the stub and a resource_link.

The figure is the client's time from sending ``tools/call`` to holding the parsed result
(median over the calls, direct and proxied calls interleaved), and the bytes delivered to the
client in each case (the result as JSON on the wire). Process start-up is not timed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mcp_types import CallToolResult, TextContent

from bench._util import Row, report, scratch_dir

if TYPE_CHECKING:
    from bench.store import Config

RESULT_BYTES = 2 * 1024 * 1024
"""The size of the upstream tool's result."""
_CLI = "import sys; from cargohold.cli import main; sys.exit(main())"


def _log(seed: int, size: int) -> str:
    lines: list[str] = []
    total = 0
    index = 0
    while total < size:
        line = f"2026-01-01 00:00:{index % 60:02d} INFO call {seed} request {index} served in 3 ms"
        lines.append(line)
        total += len(line) + 1
        index += 1
    return "\n".join(lines)[:size]


def _upstream() -> None:
    """Serve the benchmark's upstream on stdio (run in a child process)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench-upstream")

    @server.tool()
    def big(seed: int) -> CallToolResult:
        """A 2 MB log, different for each seed."""
        return CallToolResult(content=[TextContent(text=_log(seed, RESULT_BYTES))])

    server.run()


async def _measure(root: Path, calls: int) -> dict[str, list[float]]:
    from mcp import Client, StdioServerParameters

    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGOHOLD_")}
    env["CARGOHOLD_EVENTS_LOG"] = str(root / "events.jsonl")
    env["XDG_CACHE_HOME"] = str(root / "cache")
    upstream = [sys.executable, "-m", "bench.mcp_proxy", "--upstream"]
    direct = StdioServerParameters(command=upstream[0], args=upstream[1:], env=env, cwd=os.getcwd())
    proxy_args = ["-c", _CLI, "--store", str(root / "store"), "--session", "bench", "proxy", "--"]
    proxied = StdioServerParameters(
        command=sys.executable, args=[*proxy_args, *upstream], env=env, cwd=os.getcwd()
    )
    figures: dict[str, list[float]] = {
        "direct": [],
        "proxy": [],
        "direct_bytes": [],
        "proxy_bytes": [],
    }
    async with Client(direct, mode="legacy") as a, Client(proxied, mode="legacy") as b:
        # one untimed call each: the tokenizer load and first-call costs are not the steady state
        await a.call_tool("big", {"seed": -1})
        await b.call_tool("big", {"seed": -1})
        for seed in range(calls):
            for name, client in (
                (("direct", a), ("proxy", b))
                if seed % 2
                else (
                    ("proxy", b),
                    ("direct", a),
                )
            ):
                began = time.perf_counter()
                result = await client.call_tool("big", {"seed": seed})
                figures[name].append(time.perf_counter() - began)
                wire = result.model_dump_json(by_alias=True, exclude_none=True)
                figures[f"{name}_bytes"].append(float(len(wire.encode())))
    return figures


def bench_mcp_proxy(root: Path, cfg: Config) -> list[Row]:
    """The ``mcp_proxy`` section: one tool call with a 2 MB result, via the proxy vs direct."""
    import anyio

    root.mkdir(parents=True, exist_ok=True)
    figures = anyio.run(_measure, root, 5 if cfg.quick else 20)
    direct = statistics.median(figures["direct"]) * 1000
    proxied = statistics.median(figures["proxy"]) * 1000
    direct_bytes = statistics.median(figures["direct_bytes"])
    proxy_bytes = statistics.median(figures["proxy_bytes"])
    # Bytes are not milliseconds: stated beside the table, not in it.
    print(
        f"mcp_proxy: bytes delivered to the client per call: direct {direct_bytes:,.0f}, "
        f"via proxy {proxy_bytes:,.0f} ({direct_bytes / proxy_bytes:,.0f}x fewer)",
        flush=True,
    )
    return [
        Row(
            "mcp_proxy",
            "tools/call, 2 MB result, via cargohold proxy",
            RESULT_BYTES,
            proxied,
            "the same call direct",
            direct,
        )
    ]


SECTIONS: dict[str, Callable[[Path, Config], list[Row]]] = {"mcp_proxy": bench_mcp_proxy}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mcp_proxy", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="5 calls each instead of 20")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    parser.add_argument("--upstream", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.upstream:
        _upstream()
        return 0

    from bench._util import machine
    from bench.store import Config

    info = machine()
    for key, value in info.items():
        print(f"{key:>14}: {value}")
    print()
    began = time.perf_counter()
    with scratch_dir() as root:
        rows = bench_mcp_proxy(root / "mcp_proxy", Config(quick=args.quick))
    took = time.perf_counter() - began
    report(
        "python -m bench.mcp_proxy",
        rows,
        took=took,
        quick=args.quick,
        markdown=args.markdown,
        info=info,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
