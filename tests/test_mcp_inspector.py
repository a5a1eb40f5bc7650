"""The JSON configs docs/mcp.md shows for MCP clients, run as written by the MCP Inspector's CLI
mode (``--cli --config FILE --server NAME``), which reads the same ``mcpServers`` format as
Claude Desktop, Claude Code and Cursor.

Both Inspector generations: v1 splits a config's ``args`` at a ``--`` (so a config with
``"proxy", "--", ...`` breaks there), v2 does not. Each documented config gets only its upstream
command swapped for our fixture server (a ``--`` before it, were the docs to show one, stays).

Needs ``make mcp-servers`` (npm registry only, cached between runs); skips without it, fails
without it under CI=true.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _require import require, unavailable

require("mcp", "mcp")

from mcp_fixtures import HEAVY_SERVER, MARKER, NPM_PREFIX, TIMEOUT, child_env, node  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs" / "mcp.md"
INSPECTORS = {
    "v1": ("mcp-inspector-v1", "1.0.3"),
    "v2": ("@modelcontextprotocol/inspector", "2.12.0"),
}
"""Each Inspector the Makefile's ``mcp-servers`` installs: its folder and pinned version."""


def documented_configs() -> list[tuple[str, dict[str, Any]]]:
    """Every ``mcpServers`` JSON block of docs/mcp.md that runs ``cargohold ... proxy``."""
    found = []
    for block in re.findall(r"```json\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.S):
        if '"mcpServers"' not in block:
            continue
        config = json.loads(block)
        for name, server in config["mcpServers"].items():
            if "proxy" in server.get("args", []):
                found.append((name, server))
    return found


CONFIGS = documented_configs()


def inspector_script(version: str) -> Path:
    folder, pinned = INSPECTORS[version]
    package = NPM_PREFIX / "node_modules" / folder / "package.json"
    if not package.is_file():
        unavailable(f"the MCP Inspector {pinned} is not installed: run `make mcp-servers`")
    facts = json.loads(package.read_text(encoding="utf-8"))
    if facts["version"] != pinned:
        unavailable(f"the MCP Inspector {pinned} is not installed: run `make mcp-servers`")
    bin_entry = facts["bin"]
    script = bin_entry if isinstance(bin_entry, str) else bin_entry["mcp-inspector"]
    return package.parent / script


def cargohold_command() -> str:
    script = Path(sys.executable).with_name("cargohold")
    if not script.is_file():
        unavailable("the cargohold console script is not installed beside this Python")
    return str(script)


def test_the_docs_show_the_client_configs_the_inspector_runs() -> None:
    assert len(CONFIGS) >= 3  # Claude Desktop, .mcp.json, Cursor


@pytest.mark.parametrize("version", sorted(INSPECTORS))
@pytest.mark.parametrize(
    "documented", CONFIGS, ids=[f"config{index}" for index in range(len(CONFIGS))]
)
def test_a_documented_client_config_runs_the_proxy_under_the_inspector_cli(
    version: str, documented: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    script = inspector_script(version)
    name, server = documented
    args = list(server["args"])
    at = args.index("proxy")
    upstream = args[at + 1 :]
    separator = upstream[:1] if upstream[:1] == ["--"] else []
    env = child_env(tmp_path, CARGOHOLD_STORE=str(tmp_path / "store"))
    env.update(server.get("env", {}))
    config = {
        "mcpServers": {
            name: {
                "command": cargohold_command(),
                "args": [*args[: at + 1], *separator, sys.executable, str(HEAVY_SERVER)],
                "env": {
                    key: env[key]
                    for key in env
                    if key.startswith(("CARGOHOLD_", "XDG_")) or key in ("PATH", "HOME")
                },
            }
        }
    }
    config_file = tmp_path / "client.json"
    config_file.write_text(json.dumps(config), encoding="utf-8")

    done = subprocess.run(
        [
            node(),
            str(script),
            "--cli",
            "--config",
            str(config_file),
            "--server",
            name,
            "--method",
            "tools/call",
            "--tool-name",
            "heavy_text",
            "--tool-arg",
            "size=60000",
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**env, "MCP_INSPECTOR_SECRET_STORE": "memory"},
        stdin=subprocess.DEVNULL,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout[done.stdout.index("{") :])
    stub, link = result["content"]
    assert stub["text"].startswith(MARKER)
    assert link["type"] == "resource_link"
    assert link["uri"] in stub["text"]
