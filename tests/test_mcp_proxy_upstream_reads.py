"""The proxy reads its stdio upstream's output itself: each message joined once (the SDK's
client joins and splits its whole buffer again for every 64 KiB piece the pipe hands it), with
the same messages as the SDK's, and bytes that are not UTF-8 ignored as any line that is not
JSON-RPC is, instead of ending the connection."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from _require import require

require("mcp", "mcp")

from mcp.client.stdio import stdio_client  # noqa: E402 - after the extra's check
from mcp_types import TextContent  # noqa: E402

from mcp_fixtures import FIXTURES, child_env, cli, connect, stdio, stubbed_parts  # noqa: E402

WIDE_SERVER = FIXTURES / "wide_server.py"


def _fixture() -> ModuleType:
    spec = importlib.util.spec_from_file_location("wide_server", WIDE_SERVER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("size", [3 * 1024 * 1024, 200_000])
def test_a_result_of_multibyte_text_cut_by_the_pipe_is_stored_exactly(
    tmp_path: Path, size: int
) -> None:
    command = cli(tmp_path / "store", "s", "proxy", "--", sys.executable, str(WIDE_SERVER))
    expected = _fixture().wide_text(size).encode()

    with connect(stdio(command, child_env(tmp_path)), mode="legacy") as client:
        result = client.call("wide", {"size": size})
        (part,) = stubbed_parts(result)
        stored = client.read_all(part.ref)

    assert part.ref == "artifact://sha256/" + hashlib.sha256(expected).hexdigest()
    assert stored == expected


def test_an_upstream_line_that_is_not_utf8_is_ignored_and_the_upstream_is_served(
    tmp_path: Path,
) -> None:
    command = cli(tmp_path / "store", "s", "proxy", "--", sys.executable, str(WIDE_SERVER))
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as errlog:
        params = stdio(command, child_env(tmp_path, WIDE_GARBAGE="1"))
        with connect(stdio_client(params, errlog=errlog), mode="legacy") as client:
            first = client.call("ok")
            second = client.call("ok")

    assert first.content == [TextContent(text="fine")]
    assert second.content == [TextContent(text="fine")]
    lines = errors.read_text().splitlines()
    assert len(lines) == 1, lines
    assert "not MCP" in lines[0]
