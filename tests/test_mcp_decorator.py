"""``@offload_results(hold)`` on tools of the SDK's own MCPServer, driven in process by the SDK
client: heavy results become stubs and links, small ones pass, each part is one event."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator

import pytest

from _require import require

require("mcp", "mcp")

from mcp.server.mcpserver import Context, MCPServer  # noqa: E402 - after the extra's check
from mcp_types import CallToolResult, ImageContent, TextContent  # noqa: E402
from pydantic import BaseModel  # noqa: E402

import cargohold  # noqa: E402
from cargohold import ListSink  # noqa: E402
from cargohold.mcp import offload_results  # noqa: E402
from mcp_fixtures import STUB_BUDGET, Connected, connect, stubbed_parts  # noqa: E402

LOG = "\n".join(f"2026-01-01 00:00:{i % 60:02d} INFO request {i} served" for i in range(6000))


class Report(BaseModel):
    lines: list[str]


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


@pytest.fixture
def hold(sink: ListSink) -> Iterator[cargohold.Hold]:
    with cargohold.open("memory://", session="server", sinks=[sink]) as opened:
        yield opened


@pytest.fixture
def served(hold: cargohold.Hold) -> Iterator[Connected]:
    server = MCPServer("decorated")

    @server.tool()
    @offload_results(hold)
    async def fetch_log(lines: int, ctx: Context) -> str:
        """The first `lines` lines of the log."""
        await ctx.report_progress(1, 1)
        return "\n".join(LOG.splitlines()[:lines])

    @server.tool()
    @offload_results(hold)
    def report(lines: int) -> Report:
        """A structured report (a sync tool)."""
        return Report(lines=LOG.splitlines()[:lines])

    @server.tool()
    @offload_results(hold, tool="snapshot")
    def screenshot() -> CallToolResult:
        data = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40_000).decode()
        return CallToolResult(content=[ImageContent(data=data, mime_type="image/png")])

    with connect(server) as client:
        yield client


def test_a_heavy_result_of_a_decorated_tool_is_a_stub_with_a_link_to_its_exact_bytes(
    served: Connected, hold: cargohold.Hold
) -> None:
    result = served.call("fetch_log", {"lines": 6000})

    (part,) = stubbed_parts(result)
    assert len(part.stub.encode()) <= STUB_BUDGET
    stored = hold.store.read(part.ref).raise_for_outcome()
    assert stored == LOG.encode()
    assert part.ref.endswith(hashlib.sha256(stored).hexdigest())


def test_a_small_result_of_a_decorated_tool_passes_unchanged(served: Connected) -> None:
    result = served.call("fetch_log", {"lines": 2})

    assert result.content == [TextContent(text="\n".join(LOG.splitlines()[:2]))]


def test_the_decorated_tool_keeps_its_input_schema_and_publishes_no_output_schema(
    served: Connected,
) -> None:
    tools = {tool.name: tool for tool in served.run(served.client.list_tools).tools}

    assert set(tools["fetch_log"].input_schema["properties"]) == {"lines"}
    assert tools["fetch_log"].description == "The first `lines` lines of the log."
    assert tools["report"].output_schema is None


def test_structured_output_of_a_sync_decorated_tool_is_stored_once(
    served: Connected, hold: cargohold.Hold
) -> None:
    result = served.call("report", {"lines": 5000})

    (part,) = stubbed_parts(result)
    assert result.structured_content is not None
    assert result.structured_content["cargohold"]["ref"] == part.ref


def test_an_image_of_a_decorated_tool_is_stored_under_the_given_tool_name(
    served: Connected, sink: ListSink
) -> None:
    result = served.call("screenshot")

    (part,) = stubbed_parts(result)
    assert part.link.mime_type == "image/png"
    assert [(e.outcome.value, e.tool) for e in sink.events] == [("offloaded", "snapshot")]


def test_each_part_of_a_decorated_result_is_one_event(served: Connected, sink: ListSink) -> None:
    served.call("fetch_log", {"lines": 6000})
    served.call("fetch_log", {"lines": 1})

    outcomes = [(e.operation.value, e.outcome.value, e.tool) for e in sink.events]
    assert ("offload", "offloaded", "fetch_log") in outcomes
    assert ("offload", "inline", "fetch_log") in outcomes
