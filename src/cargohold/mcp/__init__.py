"""cargohold for MCP: a read-tools server, a proxy in front of any MCP server, and a decorator.

- :func:`build_read_server` (``cargohold mcp``): an MCP server exposing the read tools
  (``artifact_info``, ``artifact_read``, ...) and ``artifact://`` resources of one scope.
- :class:`Proxy` (``cargohold proxy -- <command>`` or ``--url``): starts or connects to an
  upstream MCP server, forwards everything, adds the read tools, and replaces every heavy part of
  every tool result (text, structured content, embedded resources, images, audio, blobs) with a
  stub and a ``resource_link`` to the artifact holding the exact bytes.
- :func:`offload_results`: a decorator for tools of the SDK's own ``MCPServer`` that does the same
  inside a server.

Needs the MCP SDK: ``pip install 'cargohold[mcp]'``. Importing this package without it raises
:class:`cargohold.ConfigError` naming the extra.

Example (a server author)::

    import cargohold
    from cargohold.mcp import offload_results
    from mcp.server.mcpserver import MCPServer

    hold = cargohold.open(session="my-server")
    server = MCPServer("logs")

    @server.tool()
    @offload_results(hold)
    def fetch_log(name: str) -> str:
        return read_a_big_log(name)  # 5 MB in, a stub and a resource_link out
"""

try:
    import mcp as _mcp  # noqa: F401 - the extra's presence, checked once here
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the SDK
    if getattr(exc, "name", None) not in ("mcp", "mcp_types"):
        raise
    from cargohold._errors import ConfigError

    raise ConfigError("cargohold.mcp needs the MCP SDK: pip install 'cargohold[mcp]'") from exc

from cargohold.mcp._content import (
    STUB_KEY,
    ResultPolicy,
    offload_prompt,
    offload_resource,
    offload_result,
    offload_sampling,
    rewrite_output_schema,
)
from cargohold.mcp._decorator import offload_results
from cargohold.mcp._errors import UpstreamError, UpstreamFailure
from cargohold.mcp._proxy import Proxy, Upstream
from cargohold.mcp._readtools import call_read_tool, read_artifact, read_tools
from cargohold.mcp._server import build_read_server
from cargohold.mcp._transport import serve

__all__ = [
    "STUB_KEY",
    "Proxy",
    "ResultPolicy",
    "Upstream",
    "UpstreamError",
    "UpstreamFailure",
    "build_read_server",
    "call_read_tool",
    "offload_prompt",
    "offload_resource",
    "offload_result",
    "offload_results",
    "offload_sampling",
    "read_artifact",
    "read_tools",
    "rewrite_output_schema",
    "serve",
]
