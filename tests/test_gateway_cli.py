"""``cargohold gateway`` as a process, the extra's absence, and the configured compaction."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anthropic
import httpx
import pytest
from tests.gateway_fixtures import FakeProvider, free_port_url, serve
from tests.mcp_fixtures import child_env, cli

import cargohold
from cargohold.gateway import GatewayConfig, build_app

KEY = "sk-ant-api03-secretvalue-never-in-a-log-0123456789"
TIMEOUT = 30.0


@contextmanager
def gateway_process(command: list[str], env: dict[str, str]) -> Iterator[tuple[str, list[str]]]:
    """Start ``cargohold gateway``; yield its URL and the stderr lines it writes (complete
    once the block ends). Every wait is bounded."""
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            seen.append(line)
            lines.put(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        url = None
        while url is None:
            try:
                line = lines.get(timeout=TIMEOUT)
            except queue.Empty:
                raise AssertionError("the gateway did not report its URL in time") from None
            found = re.search(r"cargohold gateway: listening on (http://\S+)", line)
            url = found.group(1) if found else None
        yield url, seen
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        reader.join(timeout=10)
        assert process.stderr is not None
        process.stderr.close()


def test_gateway_command_forwards_to_the_configured_upstream_and_never_logs_the_key(
    tmp_path: Path,
) -> None:
    fake = FakeProvider()
    env = child_env(tmp_path)
    heavy = "".join(f"line {i} of a long build log\n" for i in range(4000))
    request = {
        "model": "claude-fake",
        "max_tokens": 8,
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": heavy}],
            },
        ],
    }
    headers = {
        "x-api-key": KEY,
        "authorization": f"Bearer {KEY}",
        "anthropic-version": "2023-06-01",
    }
    with serve(fake.app()) as upstream:
        env["CARGOHOLD_GATEWAY_UPSTREAM"] = upstream
        command = cli(tmp_path / "store", "gw-cli", "gateway", "--port", "0")
        with gateway_process(command, env) as (url, stderr):
            assert url.startswith("http://127.0.0.1:")
            ok = httpx.post(url + "/v1/messages", json=request, headers=headers, timeout=TIMEOUT)
            refused = httpx.post(
                url + "/v1/messages",
                json={"messages": [{"role": "user", "content": heavy}]},
                headers=headers,
                timeout=TIMEOUT,
            )
        env["CARGOHOLD_GATEWAY_UPSTREAM"] = free_port_url()
        with gateway_process(command, env) as (down_url, down_stderr):
            down = httpx.post(
                down_url + "/v1/messages", json=request, headers=headers, timeout=TIMEOUT
            )

    assert ok.status_code == 200
    forwarded = fake.received[-1]
    assert forwarded.headers["x-api-key"] == KEY
    assert heavy.encode() not in forwarded.body
    assert refused.status_code == 400
    assert down.status_code == 502
    for text in ("".join(stderr), "".join(down_stderr), refused.text, down.text):
        assert KEY not in text
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert KEY.encode() not in stored


def test_importing_the_gateway_without_its_extra_is_a_config_error_naming_it() -> None:
    code = (
        "import sys; sys.modules['starlette'] = None\n"
        "try:\n    import cargohold.gateway\n"
        "except Exception as exc:\n    print(type(exc).__name__, str(exc))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.startswith("ConfigError")
    assert "cargohold[gateway]" in done.stdout


def test_a_gateway_configured_to_compact_clears_old_medium_results_losslessly(
    tmp_path: Path,
) -> None:
    config = tmp_path / "cargohold.toml"
    config.write_text("compaction_trigger_tokens = 20000\ncompaction_clear_at_least = 2000\n")
    fake = FakeProvider()
    messages: list[dict[str, object]] = [{"role": "user", "content": "build it"}]
    results: dict[str, str] = {}
    for call in range(40):
        call_id = f"toolu_{call}"
        # 8-30 KB each: below the 32 KiB heavy threshold, so only compaction clears them
        body = "".join(f"step {call}.{i}: compiled module_{i}.c\n" for i in range(250 + call * 12))
        results[call_id] = body
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": call_id, "name": "bash", "input": {}}],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call_id, "content": body}],
            }
        )
    with (
        cargohold.open("memory://", tenant="t", user="u", session="c", config_file=config) as hold,
        serve(fake.app()) as upstream,
        serve(build_app(hold, GatewayConfig(upstream=upstream, compact=True))) as url,
        anthropic.Anthropic(api_key="k", base_url=url, max_retries=0) as client,
    ):
        client.messages.create(model="claude-fake", max_tokens=8, messages=messages)  # type: ignore[arg-type]
        forwarded = fake.received[-1].json()["messages"]
        cleared = [
            (m["content"][0]["tool_use_id"], m["content"][0]["content"])
            for m in forwarded
            if m["role"] == "user"
            and isinstance(m["content"], list)
            and m["content"][0]["content"] != results[m["content"][0]["tool_use_id"]]
        ]
        assert len(cleared) >= 10
        for call_id, stub in cleared:
            ref = re.findall(r"artifact://sha256/[0-9a-f]{64}", json.dumps(stub))[0]
            read = hold.read(ref, length=1024 * 1024, budget=1024 * 1024)
            assert read.content == results[call_id]
    assert forwarded[-1]["content"][0]["content"] == results["toolu_39"]


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_gateway_refuses_a_port_out_of_range(tmp_path: Path, port: str) -> None:
    done = subprocess.run(
        cli(tmp_path / "store", "s", "gateway", "--port", port),
        env=child_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_gateway_command_with_read_tools_runs_the_models_read_and_returns_its_answer(
    tmp_path: Path, how: str
) -> None:
    fake = FakeProvider()
    heavy = "".join(f"line {i} of a long build log\n" for i in range(4000))

    def model(payload: dict[str, object]) -> list[dict[str, object]]:
        messages = payload["messages"]
        assert isinstance(messages, list)
        last = messages[-1]["content"]
        if isinstance(last, list) and last[0].get("tool_use_id") == "toolu_read":
            return [{"type": "text", "text": "READ:" + last[0]["content"]}]
        ref = re.findall(r"artifact://sha256/[0-9a-f]{64}", json.dumps(payload))[0]
        grep = {"ref": ref, "pattern": "^line 3999 "}
        return [{"type": "tool_use", "id": "toolu_read", "name": "artifact_grep", "input": grep}]

    fake.anthropic_reply = model
    env = child_env(tmp_path)
    args = ["gateway", "--port", "0"]
    if how == "flag":
        args.append("--read-tools")
    else:
        env["CARGOHOLD_GATEWAY_READ_TOOLS"] = "true"
    with serve(fake.app()) as upstream:
        env["CARGOHOLD_GATEWAY_UPSTREAM"] = upstream
        with gateway_process(cli(tmp_path / "store", "gw-reads", *args), env) as (url, _):
            client = anthropic.Anthropic(api_key=KEY, base_url=url, max_retries=0)
            message = client.messages.create(
                model="claude-fake",
                max_tokens=8,
                messages=[
                    {"role": "user", "content": "go"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": heavy}],
                    },
                ],
            )
            client.close()

    text = "".join(block.text for block in message.content if block.type == "text")
    assert "line 3999 of a long build log" in text
    assert "line 3998 " not in text
    assert len(fake.received) == 2
