"""The proxy seen by a typed client: fastmcp's ``Client`` turns structured content into the type
the tool's output schema declares (``result.data``). Through the proxy a small result must arrive
as that same type, and a stubbed one as a typed value that names its reference.

The upstream is our fixture server (the SDK's MCPServer); fastmcp talks to it directly and
through ``cargohold proxy``, over stdio, so the two ``data`` can be compared.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _require import require

require("mcp", "mcp")
require("fastmcp", "dev")

from anyio.from_thread import BlockingPortal, start_blocking_portal  # noqa: E402
from fastmcp import Client  # noqa: E402 - after the extra's check
from fastmcp.client.transports import StdioTransport  # noqa: E402

from mcp_fixtures import HEAVY_SERVER, TIMEOUT, child_env, cli, stubbed_parts  # noqa: E402

sys.path.insert(0, str(HEAVY_SERVER.parent))
import heavy_server  # noqa: E402 - the fixture's own generators

SESSION = "fastmcp-tests"


class Typed:
    """A fastmcp client connected to a server, driven from synchronous test code."""

    def __init__(self, portal: BlockingPortal, client: Client[Any]) -> None:
        self.portal = portal
        self.client = client

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        async def call() -> Any:
            return await self.client.call_tool(name, arguments or {}, timeout=TIMEOUT)

        return self.portal.call(call)

    def tools(self) -> dict[str, Any]:
        listed = self.portal.call(self.client.list_tools)
        return {tool.name: tool for tool in listed}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fastmcp")


def _typed(command: list[str], env: dict[str, str]) -> Iterator[Typed]:
    transport = StdioTransport(command[0], command[1:], env=env, keep_alive=False)
    with start_blocking_portal() as portal:
        client: Client[Any] = Client(transport, timeout=TIMEOUT)
        with portal.wrap_async_context_manager(client) as entered:
            yield Typed(portal, entered)


@pytest.fixture(scope="module")
def direct(workdir: Path) -> Iterator[Typed]:
    yield from _typed([sys.executable, str(HEAVY_SERVER)], child_env(workdir))


@pytest.fixture(scope="module")
def proxied(workdir: Path) -> Iterator[Typed]:
    command = cli(workdir / "store", SESSION, "proxy", "--", sys.executable, str(HEAVY_SERVER))
    yield from _typed(command, child_env(workdir))


def test_a_small_structured_result_reaches_fastmcp_as_the_type_the_upstream_declared(
    direct: Typed, proxied: Typed
) -> None:
    expected = direct.call("heavy_json", {"rows": 3}).data
    got = proxied.call("heavy_json", {"rows": 3}).data

    assert dataclasses.is_dataclass(got)
    assert type(got).__name__ == type(expected).__name__ == "Page"
    assert [type(row).__name__ for row in got.rows] == ["Row"] * 3
    # each generated class is the conversion's own: compare the values, field by field
    assert [dataclasses.asdict(row) for row in got.rows] == [
        dataclasses.asdict(row) for row in expected.rows
    ]
    sent = heavy_server.page(3).model_dump()["rows"]
    assert [dataclasses.asdict(row) for row in got.rows] == sent


def test_a_small_wrapped_string_reaches_fastmcp_as_the_type_the_upstream_declared(
    direct: Typed, proxied: Typed
) -> None:
    expected = direct.call("small").data
    got = proxied.call("small").data

    assert type(got).__name__ == type(expected).__name__
    assert got.result == expected.result == "all good"


def test_a_stubbed_structured_result_reaches_fastmcp_typed_with_its_reference(
    proxied: Typed,
) -> None:
    result = proxied.call("heavy_json", {"rows": 3000})

    (part,) = stubbed_parts(result)
    assert type(result.data).__name__ == "Page"  # the declared type, with the stub's field set
    assert result.data.rows is None
    assert result.data.cargohold.outcome == "offloaded"
    assert result.data.cargohold.ref == part.ref


def test_the_listed_output_schema_keeps_the_upstreams_properties_and_definitions(
    direct: Typed, proxied: Typed
) -> None:
    declared = direct.tools()["heavy_json"].output_schema
    listed = proxied.tools()["heavy_json"].output_schema

    assert listed["type"] == "object"
    assert listed["title"] == declared["title"]
    assert listed["$defs"] == declared["$defs"]
    assert {k: v for k, v in listed["properties"].items() if k != "cargohold"} == (
        declared["properties"]
    )


FASTMCP_SERVER = HEAVY_SERVER.parent / "fastmcp_server.py"


@pytest.fixture(scope="module")
def wrapped(workdir: Path) -> Iterator[Typed]:
    """fastmcp behind the proxy, in front of a fastmcp server (whose results it wraps)."""
    command = cli(workdir / "store", SESSION, "proxy", sys.executable, str(FASTMCP_SERVER))
    yield from _typed(command, child_env(workdir))


def test_a_small_wrapped_result_of_a_fastmcp_server_reaches_fastmcp_as_its_type(
    wrapped: Typed,
) -> None:
    import fastmcp_server

    assert wrapped.call("text", {"size": 10}).data == fastmcp_server.text_of(10)
    rows = wrapped.call("rows", {"n": 2}).data
    assert [(row.id, row.name) for row in rows] == [(0, "row-0"), (1, "row-1")]


def test_a_stubbed_wrapped_result_of_a_fastmcp_server_reaches_fastmcp_as_a_typed_stub(
    wrapped: Typed,
) -> None:
    for tool, arguments in (("text", {"size": 60_000}), ("rows", {"n": 3000})):
        result = wrapped.call(tool, arguments)

        (part,) = stubbed_parts(result)
        assert result.data.cargohold.outcome == "offloaded"
        assert result.data.cargohold.ref == part.ref
        assert result.structured_content is not None
        assert list(result.structured_content) == ["result"]  # still wrapped, as declared
        assert result.structured_content["result"]["cargohold"]["ref"] == part.ref
