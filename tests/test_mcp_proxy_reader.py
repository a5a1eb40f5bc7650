"""The proxy's reader of a stdio upstream hands on every line the upstream wrote, in order,
whether a pipe read holds one line's end (a long result, not split again) or several (small
messages written together, or a long one's end and the next message)."""

from __future__ import annotations

import sys

import anyio

from _require import require

require("mcp", "mcp")

from mcp.client.stdio import StdioServerParameters  # noqa: E402 - after the extra's check
from mcp.shared.message import SessionMessage  # noqa: E402
from mcp_types import JSONRPCNotification  # noqa: E402

from cargohold.mcp._transport import stdio_upstream  # noqa: E402

_WRITER = """
import json, sys
def line(n, size):
    params = {"n": n, "data": "x" * size}
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
out = sys.stdout.buffer
out.write((line(0, 10) + "\\n" + line(1, 10) + "\\n" + line(2, 10) + "\\n").encode())
out.flush()
out.write((line(3, 300_000) + "\\n").encode())
out.flush()
out.write((line(4, 300_000) + "\\n" + line(5, 10) + "\\n" + line(6, 200_000) + "\\n").encode())
out.flush()
sys.stdin.read()
"""
_SIZES = [10, 10, 10, 300_000, 300_000, 10, 200_000]


async def _received(count: int) -> list[SessionMessage | Exception]:
    server = StdioServerParameters(command=sys.executable, args=["-c", _WRITER])
    got: list[SessionMessage | Exception] = []
    with anyio.fail_after(30):
        async with stdio_upstream(server) as (read, _write):
            while len(got) < count:
                got.append(await read.receive())
    return got


def test_each_line_of_the_upstream_is_one_message_in_the_order_written() -> None:
    got = anyio.run(_received, len(_SIZES))
    seen: list[tuple[int, int]] = []
    for item in got:
        assert isinstance(item, SessionMessage)
        message = item.message
        assert isinstance(message, JSONRPCNotification)
        params = message.params or {}
        seen.append((params["n"], len(params["data"])))
    assert seen == list(enumerate(_SIZES))
