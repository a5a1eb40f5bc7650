"""Claude Code itself (npm ``@anthropic-ai/claude-code``, ``-p``) through the gateway to the
scripted fake provider: its ``<persisted-output>`` spill of a heavy shell output reaches the
provider as a cargohold stub of the file it wrote, whose artifact reads back byte for byte.

Needs ``make mcp-servers`` (npm registry only, cached between runs); skips without it, fails
without it under CI=true.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.gateway_fixtures import FakeProvider, serve

import cargohold
from _require import unavailable
from cargohold.gateway import GatewayConfig, build_app

CLAUDE_CODE_VERSION = "2.1.332"
"""The pinned version (the Makefile's mcp-servers target installs the same)."""
PREFIX = Path(
    os.environ.get("CLAUDE_CODE_PREFIX")
    or Path.home() / ".cache" / "cargohold-test" / f"claude-code-{CLAUDE_CODE_VERSION}"
)
REF = re.compile(r"artifact://sha256/[0-9a-f]{64}")
LINES = 100_000  # `seq 1 100000`: 588,895 bytes, far over Claude Code's ~30 KB spill size


def claude() -> Path:
    binary = PREFIX / "node_modules" / ".bin" / "claude"
    if not binary.exists():
        unavailable("@anthropic-ai/claude-code is not installed: run `make mcp-servers`")
    return binary


def tool_results(request: dict[str, Any]) -> list[str]:
    """The text of every tool_result in an Anthropic request."""
    found: list[str] = []
    for message in request.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") != "tool_result":
                continue
            value = block.get("content")
            if isinstance(value, list):
                value = "".join(part.get("text", "") for part in value)
            found.append(value)
    return found


def script(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The fake model: run the shell command once, then say it is done."""
    if tool_results(request):
        return [{"type": "text", "text": "done: the numbers were printed"}]
    command = {"command": f"seq 1 {LINES}", "description": "Print the numbers"}
    return [{"type": "tool_use", "id": "toolu_seq", "name": "Bash", "input": command}]


def test_claude_code_spill_reaches_the_provider_as_a_stub_of_the_file_it_wrote(
    tmp_path: Path,
) -> None:
    binary = claude()
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir()
    project.mkdir()
    fake = FakeProvider(anthropic_reply=script)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-the-fake-provider",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    with (
        cargohold.open("memory://", tenant="t", user="u", session="cc") as hold,
        serve(fake.app()) as upstream,
        serve(
            build_app(
                hold,
                GatewayConfig(
                    upstream=upstream, tool_results=home / ".claude" / "projects", timeout=60
                ),
            )
        ) as url,
    ):
        env["ANTHROPIC_BASE_URL"] = url
        done = subprocess.run(
            [str(binary), "-p", "Print the numbers from 1 to 100000.", "--allowedTools", "Bash"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )
        answered = [r.json() for r in fake.received if r.path.endswith("/v1/messages")]
        results = [text for request in answered for text in tool_results(request)]
        assert done.returncode == 0, done.stderr[-2000:]
        assert "done: the numbers were printed" in done.stdout
        assert results, "Claude Code sent no tool result"
        stub = results[-1]
        assert stub.startswith("[cargohold]")
        assert "<persisted-output>" not in stub
        (ref,) = set(REF.findall(stub))
        expected = "".join(f"{i}\n" for i in range(1, LINES + 1))
        read = hold.read(ref, length=1024 * 1024, budget=1024 * 1024)
        assert read.content is not None
        assert read.content.rstrip("\n") == expected.rstrip("\n")
        assert hold.grep(ref, "^99999$").outcome == "resolved"


GREP_LINES = 300_000  # `seq 1 300000`: about 2 MB


def grep_script(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The fake model: run the shell command; then grep the stub's artifact through the
    cargohold MCP server Claude Code started; then say what the grep returned."""
    results = tool_results(request)
    if not results:
        command = {"command": f"seq 1 {GREP_LINES}", "description": "Print the numbers"}
        return [{"type": "tool_use", "id": "toolu_seq", "name": "Bash", "input": command}]
    if len(results) == 1:
        (ref,) = set(REF.findall(results[0]))
        grep = {"ref": ref, "pattern": "^2999[0-9]{2}$"}
        return [
            {
                "type": "tool_use",
                "id": "toolu_grep",
                "name": "mcp__cargohold__artifact_grep",
                "input": grep,
            }
        ]
    return [{"type": "text", "text": "grep returned its lines"}]


def test_claude_codes_artifact_grep_through_cargohold_mcp_returns_the_exact_lines(
    tmp_path: Path,
) -> None:
    binary = claude()
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir()
    project.mkdir()
    store = tmp_path / "store"
    scope = ["--store", str(store), "--tenant", "t", "--user", "u", "--session", "cc"]
    mcp_config = tmp_path / "mcp.json"
    server = {
        "command": sys.executable,
        "args": [
            "-c",
            "import sys; from cargohold.cli import main; sys.exit(main())",
            *scope,
            "mcp",
        ],
        "env": {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CACHE_HOME": str(tmp_path / "c")},
    }
    mcp_config.write_text(json.dumps({"mcpServers": {"cargohold": server}}))
    fake = FakeProvider(anthropic_reply=grep_script)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-the-fake-provider",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    with (
        cargohold.open(str(store), tenant="t", user="u", session="cc") as hold,
        serve(fake.app()) as upstream,
    ):
        app = build_app(
            hold,
            GatewayConfig(
                upstream=upstream, tool_results=home / ".claude" / "projects", timeout=60
            ),
        )
        with serve(app) as url:
            env["ANTHROPIC_BASE_URL"] = url
            done = subprocess.run(
                [
                    str(binary),
                    "-p",
                    "Print the numbers, then grep them.",
                    "--allowedTools",
                    "Bash",
                    "mcp__cargohold__artifact_grep",
                    "--mcp-config",
                    str(mcp_config),
                ],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
                stdin=subprocess.DEVNULL,
            )
    answered = [r.json() for r in fake.received if r.path.endswith("/v1/messages")]
    final = [tool_results(request) for request in answered if len(tool_results(request)) == 2]
    assert done.returncode == 0, done.stderr[-2000:]
    assert "grep returned its lines" in done.stdout
    assert final, "Claude Code never sent the grep's result"
    grep_result = final[-1][1]
    numbers = re.findall(r"\b(2999\d\d)\b", grep_result)
    assert numbers == [str(n) for n in range(299900, 300000)]
    # Claude Code resends its history as canonical JSON, its cache mark moved to the new last
    # message: each later turn's resent messages were reused, not read again.
    requests = len(answered)
    assert requests >= 3
    assert app.state.rewriter.totals.resent == requests - 1


CALLS = 40


def seq_lines(call: int) -> int:
    """`seq 1 N` for call ``call``: 8.9 KB to 24 KB, below Claude Code's spill size and the
    32 KiB heavy threshold, so only compaction keeps them out."""
    return 2000 + call * 75


def many_calls_script(request: dict[str, Any]) -> list[dict[str, Any]]:
    done = len(tool_results(request))
    if done >= CALLS:
        return [{"type": "text", "text": "all forty ran"}]
    command = {"command": f"seq 1 {seq_lines(done)}", "description": f"Step {done}"}
    return [{"type": "tool_use", "id": f"toolu_{done:02d}", "name": "Bash", "input": command}]


def test_a_forty_call_claude_code_run_of_medium_outputs_is_compacted_losslessly(
    tmp_path: Path,
) -> None:
    binary = claude()
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir()
    project.mkdir()
    config_file = tmp_path / "cargohold.toml"
    config_file.write_text("compaction_trigger_tokens = 30000\ncompaction_clear_at_least = 5000\n")
    fake = FakeProvider(anthropic_reply=many_calls_script)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_API_KEY": "sk-ant-fake-key-for-the-fake-provider",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    with (
        cargohold.open(
            "memory://", tenant="t", user="u", session="cc", config_file=config_file
        ) as hold,
        serve(fake.app()) as upstream,
        serve(
            build_app(
                hold,
                GatewayConfig(
                    upstream=upstream,
                    compact=True,
                    tool_results=home / ".claude" / "projects",
                    timeout=60,
                ),
            )
        ) as url,
    ):
        env["ANTHROPIC_BASE_URL"] = url
        done = subprocess.run(
            [str(binary), "-p", "Run the forty steps.", "--allowedTools", "Bash"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        answered = [r.json() for r in fake.received if r.path.endswith("/v1/messages")]
        assert done.returncode == 0, done.stderr[-2000:]
        assert "all forty ran" in done.stdout
        last = tool_results(answered[-1])
        assert len(last) == CALLS
        cleared = [(call, text) for call, text in enumerate(last) if REF.search(text)]
        assert len(cleared) >= 10
        assert REF.search(last[-1]) is None  # the newest results are kept as they are
        for call, stub in cleared:
            (ref,) = set(REF.findall(stub))
            read = hold.read(ref, length=1024 * 1024, budget=1024 * 1024)
            expected = "".join(f"{i}\n" for i in range(1, seq_lines(call) + 1))
            assert read.content is not None
            assert read.content.rstrip("\n") == expected.rstrip("\n")
