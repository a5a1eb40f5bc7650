"""Codex CLI (npm ``@openai/codex``, ``codex exec``) through the gateway to the scripted fake
provider, offline: a provider entry in a throwaway ``CODEX_HOME`` points it at the gateway
(Responses API over HTTPS; the gateway speaks no WebSocket, and Codex falls back without one).

What it sends, measured with 0.171.0: Codex cuts a shell output to about 12 KB itself (head and
tail, "Warning: truncated output"), whatever ``max_output_tokens`` the model asks for, and keeps
the whole output nowhere on disk, so there is no spill for the gateway to recover; its results
arrive below the heavy threshold and pass unchanged. A long run of them is what compaction is for.

Needs ``make mcp-servers``; skips without it, fails without it under CI=true.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.gateway_fixtures import FakeProvider, serve

import cargohold
from _require import unavailable
from cargohold.gateway import GatewayConfig, build_app

CODEX_VERSION = "0.171.0"
"""The pinned version (the Makefile's mcp-servers target installs the same)."""
PREFIX = Path(
    os.environ.get("CODEX_PREFIX")
    or Path.home() / ".cache" / "cargohold-test" / f"codex-{CODEX_VERSION}"
)
KEY = "sk-codex-fake-key-0123456789"


def codex() -> Path:
    binary = PREFIX / "node_modules" / ".bin" / "codex"
    if not binary.exists():
        unavailable("@openai/codex is not installed: run `make mcp-servers`")
    return binary


def outputs(request: dict[str, Any]) -> list[str]:
    return [
        item["output"]
        for item in request.get("input", [])
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


def script(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The fake model: one shell command, then a final message."""
    if outputs(request):
        text = {"type": "output_text", "text": "done: printed", "annotations": []}
        return [
            {
                "type": "message",
                "id": "m1",
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        ]
    arguments = json.dumps({"cmd": "seq 1 100000"})
    return [
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_seq",
            "name": "exec_command",
            "arguments": arguments,
            "status": "completed",
        }
    ]


def test_codex_exec_runs_through_the_gateway_and_its_own_cut_output_passes_unchanged(
    tmp_path: Path,
) -> None:
    binary = codex()
    home = tmp_path / "home"
    codex_home = home / ".codex"
    project = tmp_path / "project"
    codex_home.mkdir(parents=True)
    project.mkdir()
    fake = FakeProvider(responses_reply=script)
    with (
        cargohold.open("memory://", tenant="t", user="u", session="codex") as hold,
        serve(fake.app()) as upstream,
    ):
        app = build_app(hold, GatewayConfig(upstream=upstream, timeout=60))
        with serve(app) as url:
            (codex_home / "config.toml").write_text(
                'model = "gpt-fake"\nmodel_provider = "gateway"\n[model_providers.gateway]\n'
                f'name = "gateway"\nbase_url = "{url}/v1"\nenv_key = "OPENAI_API_KEY"\n'
                'wire_api = "responses"\nsupports_websockets = false\n'
            )
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": str(home),
                "CODEX_HOME": str(codex_home),
                "OPENAI_API_KEY": KEY,
            }
            done = subprocess.run(
                [str(binary), "exec", "--skip-git-repo-check", "Print the numbers."],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
                stdin=subprocess.DEVNULL,
            )
    requests = [r for r in fake.received if r.path == "/v1/responses"]
    assert done.returncode == 0, done.stderr[-2000:]
    assert "done: printed" in done.stdout
    assert requests[-1].headers["authorization"] == f"Bearer {KEY}"
    (output,) = outputs(requests[-1].json())
    assert len(output.encode()) < 32 * 1024  # Codex's own cut: nothing heavy on the wire
    assert re.search(r"truncated output", output)
    assert output.rstrip().endswith("100000")
    # Codex resends its input as canonical JSON: the later turn's resent items were reused.
    assert len(requests) >= 2
    assert app.state.rewriter.totals.resent == len(requests) - 1
