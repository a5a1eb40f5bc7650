"""The proxy in front of an upstream that hangs, crashes, answers garbage or cannot start.

Each failure reaches the client as one MCP error with a stable ``reason`` code, within the
configured timeout (2 s here); the proxy keeps serving, restarts a crashed upstream on the next
request, and what it stored before stays readable. Cancellation travels upstream.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import anyio
import pytest

from _require import require

require("mcp", "mcp")

from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402 - after the extra's check
from mcp_types import TextContent  # noqa: E402

from mcp_fixtures import (  # noqa: E402
    FAULTY_SERVER,
    TIMEOUT,
    Connected,
    child_env,
    cli,
    connect,
    stdio,
    stubbed_parts,
)

UPSTREAM_TIMEOUT = "2"


def stdio_transport(params: Any, errlog: TextIO) -> Any:
    """The SDK's stdio transport, with the server's stderr written to ``errlog``."""
    return stdio_client(params, errlog=errlog)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("faulty")


@pytest.fixture(scope="module")
def proxied(workdir: Path) -> Iterator[Connected]:
    command = cli(
        workdir / "store",
        "faulty",
        "proxy",
        "--timeout",
        UPSTREAM_TIMEOUT,
        "--",
        sys.executable,
        str(FAULTY_SERVER),
    )
    env = child_env(workdir, FAULTY_STARTS=str(workdir / "starts"))
    with connect(stdio(command, env), mode="legacy") as client:
        yield client


def reason_of(failure: pytest.ExceptionInfo[MCPError]) -> str:
    data = failure.value.error.data
    assert isinstance(data, dict)
    return str(data["reason"])


def assert_serving(proxied: Connected) -> None:
    assert proxied.call("ok").content == [TextContent(text="fine")]


def cancelled_upstream(proxied: Connected, tool: str) -> bool:
    """Whether the upstream saw ``tool``'s call cancelled; asks a bounded number of times, each
    a round trip through the same pipe (no sleeping)."""
    for _ in range(50):
        answer = proxied.call("cancelled")
        if tool in json.loads(answer.content[0].text):  # type: ignore[union-attr]
            return True
    return False


def test_a_hanging_upstream_call_times_out_with_a_clear_error_and_is_cancelled_there(
    proxied: Connected,
) -> None:
    with pytest.raises(MCPError) as failure:
        proxied.call("hang")

    assert reason_of(failure) == "upstream_timeout"
    assert "2 s" in failure.value.error.message
    assert_serving(proxied)
    assert cancelled_upstream(proxied, "hang")


def test_a_malformed_upstream_result_is_a_clear_error_and_the_proxy_keeps_serving(
    proxied: Connected,
) -> None:
    with pytest.raises(MCPError) as failure:
        proxied.call("malformed")

    assert reason_of(failure) == "upstream_malformed"
    assert "not a list" not in failure.value.error.message
    assert_serving(proxied)


def test_a_crashed_upstream_is_a_clear_error_then_restarted_and_nothing_stored_is_lost(
    proxied: Connected, workdir: Path
) -> None:
    (before,) = stubbed_parts(proxied.call("big"))
    body = proxied.read_all(before.ref)

    with pytest.raises(MCPError) as failure:
        proxied.call("crash")

    assert reason_of(failure) == "upstream_closed"
    starts = (workdir / "starts").read_text().count("start")
    assert_serving(proxied)
    assert (workdir / "starts").read_text().count("start") == starts + 1
    assert proxied.read_all(before.ref) == body


def wait_for_exit(pid: int) -> None:
    """Return once process ``pid`` has exited (a pidfd turns readable then); bounded."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # gone already
    try:
        ready, _, _ = select.select([handle], [], [], TIMEOUT)
        assert ready, "the upstream did not exit in time"
    finally:
        os.close(handle)


def test_the_first_request_after_an_idle_upstream_crash_restarts_it_and_is_answered(
    proxied: Connected, workdir: Path
) -> None:
    # The proxy's SDK client lists an upstream's tools before it accepts a first result of
    # one (to check its output schema): listed now, not after the upstream is gone.
    proxied.run(proxied.client.list_tools)
    answer = proxied.call("quit")  # answers, then the upstream exits while nothing is asked
    wait_for_exit(int(answer.content[0].text))  # type: ignore[union-attr]
    starts = (workdir / "starts").read_text().count("start")
    proxied.call("artifact_info", {"ref": "artifact://sha256/" + "0" * 64})  # the proxy's own

    assert_serving(proxied)  # the first upstream request after the crash: answered
    assert (workdir / "starts").read_text().count("start") == starts + 1


def test_a_call_the_client_cancels_is_cancelled_upstream(proxied: Connected) -> None:
    async def cancel_once_started() -> None:
        started = anyio.Event()

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            started.set()

        async with anyio.create_task_group() as tasks:

            async def call() -> None:
                await proxied.client.call_tool("stall", {}, progress_callback=progress)

            tasks.start_soon(call)
            with anyio.fail_after(TIMEOUT):
                await started.wait()
            tasks.cancel_scope.cancel()

    proxied.run(cancel_once_started)

    assert cancelled_upstream(proxied, "stall")
    assert_serving(proxied)


def test_an_upstream_that_cannot_start_stops_the_proxy_with_one_clear_line(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "no-such-server"
    command = cli(tmp_path / "store", "s", "proxy", "--timeout", "5", "--", str(missing))

    done = subprocess.run(
        command, input="", capture_output=True, text=True, timeout=TIMEOUT, env=child_env(tmp_path)
    )

    assert done.returncode == 1
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "could not be started" in done.stderr
    assert str(missing) not in done.stderr
    assert "Traceback" not in done.stderr


def test_an_upstream_printing_lines_that_are_not_mcp_gets_one_clear_line_and_is_served(
    tmp_path: Path,
) -> None:
    command = cli(tmp_path / "store", "s", "proxy", "--", sys.executable, str(FAULTY_SERVER))
    env = child_env(tmp_path, FAULTY_NOISE="3")
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as errlog:
        params = stdio(command, env)
        with connect(stdio_transport(params, errlog), mode="legacy") as client:
            assert_serving(client)

    lines = errors.read_text().splitlines()
    assert len(lines) == 1, lines
    assert "not MCP" in lines[0]
    assert "step" not in lines[0]  # what the upstream printed is not repeated
