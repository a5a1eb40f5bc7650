"""``cargohold mcp``: the read tools and ``artifact://`` resources of one scope, over MCP.

For a client that already holds references (from a proxy, from ``cargohold offload``, from an
agent's own stubs) and needs the exact bytes back: ``artifact_info``, ``artifact_read``,
``artifact_read_lines``, ``artifact_grep``, ``artifact_query``, ``artifact_search`` (finds
artifacts by the words they hold), and ``artifact_patch``, which derives a changed artifact
without the body entering the context (every tool of
:data:`cargohold._toolspecs.SPECS`), and ``resources/read`` of ``artifact://sha256/<hex>``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

import anyio.to_thread
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
)

from cargohold import __version__
from cargohold._tokens import preload
from cargohold.mcp._readtools import (
    ARTIFACT_TEMPLATE,
    RESOURCE_BOUND,
    call_read_tool,
    read_artifact,
    read_tool_names,
    read_tools,
)
from cargohold.mcp._transport import Scoping, contained

if TYPE_CHECKING:
    from cargohold._hold import Hold

LISTED_ARTIFACTS: Final = 100
"""``resources/list`` names this scope's newest live artifacts, at most this many."""

INSTRUCTIONS: Final = (
    "Heavy tool results were kept out of this context by cargohold; each stub names an "
    "artifact://sha256/<hex> reference. Read exact bytes back with these tools, in pages that "
    "fit your budget: artifact_info (facts), artifact_read (bytes), artifact_read_lines, "
    "artifact_grep (RE2), artifact_query (JMESPath on JSON); artifact_search finds them by the "
    "words they hold. artifact_patch changes one "
    "(JSON Patch, or line and byte edits) without you re-sending it, and answers with a new "
    "reference."
)


def build_read_server(
    hold: Hold, *, per_session: bool = False, resource_bound: int = RESOURCE_BOUND
) -> Server[Any]:
    """The MCP server of ``cargohold mcp``, answering for ``hold``'s scope.

    Args:
        hold: The scope's hold (its reads, budgets and event sinks).
        per_session: Over streamable HTTP, give each MCP session a session scope of its own.
        resource_bound: The most bytes one ``resources/read`` returns (1 MiB at most).
    """
    scoping = Scoping(hold, per_session=per_session)
    preload()  # in the background: a patch's first stub never waits for the tokenizer

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=read_tools())

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult:
        if params.name not in read_tool_names():
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"no tool {params.name[:80]!r}; this server has "
                + ", ".join(sorted(read_tool_names())),
            )
        return await call_read_tool(scoping.hold_for(ctx), params.name, params.arguments)

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        held = scoping.hold_for(ctx)
        records = await anyio.to_thread.run_sync(held.store.artifacts)
        now = time.time()
        live = sorted(
            (r for r in records if r.expires > now), key=lambda r: r.created, reverse=True
        )
        return ListResourcesResult(
            resources=[
                Resource(
                    uri=str(record.ref),
                    name=f"artifact {record.ref.digest[:12]}",
                    title=f"{record.tool or 'artifact'} ({record.size:,} bytes)",
                    mime_type=record.media_type,
                    size=record.size,
                )
                for record in live[:LISTED_ARTIFACTS]
            ]
        )

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(resource_templates=[ARTIFACT_TEMPLATE])

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        return await read_artifact(scoping.hold_for(ctx), params.uri, bound=resource_bound)

    return Server(
        "cargohold",
        version=__version__,
        title="cargohold read tools",
        instructions=INSTRUCTIONS,
        on_list_tools=contained(list_tools),
        on_call_tool=contained(call_tool),
        on_list_resources=contained(list_resources),
        on_list_resource_templates=contained(list_templates),
        on_read_resource=contained(read_resource),
    )
