"""MCP proxy benchmark: ``python -m bench.mcp_proxy [--quick] [--markdown FILE]``.

Also the ``mcp_proxy`` section of ``python -m bench``. An upstream MCP server (the SDK's
``MCPServer``, started from this file with ``--upstream``) has two tools, one returning a 2 MB
log as text, one a 2 MB JSON document (an array of records) as text, with distinct bytes on
every call, so every call through the proxy is a fresh offload: the write, the fsync, the stub.
The SDK client calls them over stdio:

- **direct**: client -> upstream. The baseline.
- **via proxy**: client -> ``cargohold proxy`` -> upstream, on the embedded local store in a
  scratch directory: the 2 MB are stored and the client gets the stub and a resource_link.

Figures (issue 27's goals):

- each kind, steady state: the client's time from sending ``tools/call`` to holding the parsed
  result, median over the calls, direct and proxied calls interleaved (goal: via proxy at most
  1.3x direct), and the bytes delivered to the client (the result as JSON on the wire);
- the first heavy call after start: fresh processes each trial (client, upstream, and for the
  proxied case the proxy), the first ``tools/call`` of the 2 MB log sent as soon as the
  handshake is done, timed the same way; the figure is the proxied first call less the direct
  first call, medians over the trials (goal: under 0.3 s added), as a ratio to 300 ms.

Process start-up and the handshake are not timed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


def _records(seed: int, size: int) -> str:
    """A JSON array of flat records of about ``size`` bytes (compact, as an API returns it)."""
    records: list[str] = []
    total = 2
    index = 0
    while total < size - 200:
        record = (
            f'{{"id":{index},"seed":{seed},"customer":"c-{index * 7919 % 99991:05d}",'
            f'"status":"{("paid", "open", "void", "refunded")[index % 4]}",'
            f'"total":{index * 37 % 100000 / 100},"created_at":"2026-11-{index % 28 + 1:02d}"}}'
        )
        records.append(record)
        total += len(record) + 1
        index += 1
    return "[" + ",".join(records) + "]"


TOOLS = {"text": "big", "json": "big_json"}
"""The upstream's tool of each kind of result."""


def _upstream() -> None:
    """Serve the benchmark's upstream on stdio (run in a child process)."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench-upstream")

    @server.tool()
    def big(seed: int) -> CallToolResult:
        """A 2 MB log, different for each seed."""
        return CallToolResult(content=[TextContent(text=_log(seed, RESULT_BYTES))])

    @server.tool()
    def big_json(seed: int) -> CallToolResult:
        """A 2 MB JSON array of records, different for each seed."""
        return CallToolResult(content=[TextContent(text=_records(seed, RESULT_BYTES))])

    server.run()


def _parameters(root: Path) -> tuple[Any, Any]:
    """The stdio parameters of the upstream direct and of the upstream behind the proxy."""
    from mcp import StdioServerParameters

    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGOHOLD_")}
    env["CARGOHOLD_EVENTS_LOG"] = str(root / "events.jsonl")
    env["XDG_CACHE_HOME"] = str(root / "cache")
    upstream = [sys.executable, "-m", "bench.mcp_proxy", "--upstream"]
    direct = StdioServerParameters(command=upstream[0], args=upstream[1:], env=env, cwd=os.getcwd())
    proxy_args = ["-c", _CLI, "--store", str(root / "store"), "--session", "bench", "proxy", "--"]
    proxied = StdioServerParameters(
        command=sys.executable, args=[*proxy_args, *upstream], env=env, cwd=os.getcwd()
    )
    return direct, proxied


async def _timed_call(client: Any, tool: str, seed: int) -> tuple[float, float]:
    """Seconds from sending ``tools/call`` to the parsed result, and its bytes on the wire."""
    began = time.perf_counter()
    result = await client.call_tool(tool, {"seed": seed})
    took = time.perf_counter() - began
    wire = result.model_dump_json(by_alias=True, exclude_none=True)
    return took, float(len(wire.encode()))


async def _measure(root: Path, calls: int) -> dict[str, list[float]]:
    from mcp import Client

    direct, proxied = _parameters(root)
    figures: dict[str, list[float]] = {}
    async with Client(direct, mode="legacy") as a, Client(proxied, mode="legacy") as b:
        # one untimed call each: the first call after start is measured apart (_first_calls)
        for tool in TOOLS.values():
            await a.call_tool(tool, {"seed": -1})
            await b.call_tool(tool, {"seed": -1})
        for seed in range(calls):
            for kind, tool in TOOLS.items():
                pair = (("direct", a), ("proxy", b))
                for name, client in pair if (seed + len(kind)) % 2 else pair[::-1]:
                    took, size = await _timed_call(client, tool, seed)
                    figures.setdefault(f"{kind} {name}", []).append(took)
                    figures.setdefault(f"{kind} {name} bytes", []).append(size)
    return figures


async def _first_calls(root: Path, trials: int) -> dict[str, list[float]]:
    """The first ``tools/call`` (the 2 MB log) of fresh processes, direct and via the proxy,
    alternating which goes first; each trial's seed is new, so the proxy offloads fresh bytes."""
    from mcp import Client

    direct, proxied = _parameters(root)
    figures: dict[str, list[float]] = {"direct": [], "proxy": []}
    for trial in range(trials):
        pair = (("direct", direct), ("proxy", proxied))
        for name, parameters in pair if trial % 2 else pair[::-1]:
            async with Client(parameters, mode="legacy") as client:
                took, _ = await _timed_call(client, TOOLS["text"], 1_000_000 + trial)
            figures[name].append(took)
    return figures


def bench_mcp_proxy(root: Path, cfg: Config) -> list[Row]:
    """The ``mcp_proxy`` section: a 2 MB text and a 2 MB JSON result via the proxy vs direct,
    and the first heavy call after start."""
    import anyio

    root.mkdir(parents=True, exist_ok=True)
    figures = anyio.run(_measure, root, 5 if cfg.quick else 20)
    first = anyio.run(_first_calls, root, 3 if cfg.quick else 7)
    rows: list[Row] = []
    for kind in TOOLS:
        direct = statistics.median(figures[f"{kind} direct"]) * 1000
        proxied = statistics.median(figures[f"{kind} proxy"]) * 1000
        direct_bytes = statistics.median(figures[f"{kind} direct bytes"])
        proxy_bytes = statistics.median(figures[f"{kind} proxy bytes"])
        # Bytes are not milliseconds: stated beside the table, not in it.
        print(
            f"mcp_proxy: bytes delivered to the client per {kind} call: direct "
            f"{direct_bytes:,.0f}, via proxy {proxy_bytes:,.0f} "
            f"({direct_bytes / proxy_bytes:,.0f}x fewer)",
            flush=True,
        )
        rows.append(
            Row(
                "mcp_proxy",
                f"tools/call, 2 MB {kind} result, via cargohold proxy",
                RESULT_BYTES,
                proxied,
                "the same call direct",
                direct,
                1.3,
            )
        )
    direct_first = statistics.median(first["direct"]) * 1000
    proxy_first = statistics.median(first["proxy"]) * 1000
    print(
        f"mcp_proxy: first heavy call after start: direct {direct_first:.0f} ms, "
        f"via proxy {proxy_first:.0f} ms (medians of {len(first['direct'])} fresh starts)",
        flush=True,
    )
    # A "ratio" row against a fixed 300 ms: at most 1.0x means under 0.3 s added.
    rows.append(
        Row(
            "mcp_proxy",
            "first heavy call after start (2 MB text), added by the proxy",
            RESULT_BYTES,
            proxy_first - direct_first,
            "0.3 s",
            300.0,
            1.0,
        )
    )
    return rows


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
