"""What can go wrong between the proxy and its upstream server, as stable codes.

An upstream failure reaches the MCP client as one JSON-RPC error whose message is written for a
person and whose ``data`` carries the stable ``reason`` code (tests and clients read the code,
never the message). Neither ever holds an exception's text, a command line or a path.
"""

from __future__ import annotations

import enum

from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR

from cargohold._errors import CargoholdError

CONNECTION_CLOSED = -32000
"""JSON-RPC code of an upstream that is gone (the SDK's own code for a closed connection)."""
REQUEST_TIMEOUT = -32001
"""JSON-RPC code of an upstream that did not answer in time (the SDK's own code for it)."""
RESOURCE_NOT_FOUND = -32002
"""JSON-RPC code MCP gives a resource that cannot be read (``resources/read``)."""


class UpstreamFailure(enum.StrEnum):
    """Why a request forwarded to the upstream server got no answer."""

    TIMEOUT = "upstream_timeout"
    """It did not answer within ``upstream_timeout`` seconds (a hang)."""
    CLOSED = "upstream_closed"
    """Its process exited or its connection dropped; the next request starts it again."""
    UNAVAILABLE = "upstream_unavailable"
    """It could not be started or connected to."""
    MALFORMED = "upstream_malformed"
    """It answered with something that is not a valid MCP result."""


_MESSAGES = {
    UpstreamFailure.TIMEOUT: "the upstream MCP server did not answer within {timeout:g} s; the "
    "request was cancelled there. The proxy keeps serving: retry, or ask for less.",
    UpstreamFailure.CLOSED: "the upstream MCP server exited or dropped the connection while "
    "answering; nothing stored was lost, and the next request starts it again.",
    UpstreamFailure.UNAVAILABLE: "the upstream MCP server could not be started or reached "
    "within {timeout:g} s; the next request tries again.",
    UpstreamFailure.MALFORMED: "the upstream MCP server returned a result that is not valid "
    "MCP; it was dropped. The proxy keeps serving.",
}

_START_MESSAGE = (
    "the upstream MCP server could not be started or reached within {timeout:g} s; check the "
    "command after `--` (or --url) and that it speaks MCP on stdio."
)

_CODES = {
    UpstreamFailure.TIMEOUT: REQUEST_TIMEOUT,
    UpstreamFailure.CLOSED: CONNECTION_CLOSED,
    UpstreamFailure.UNAVAILABLE: CONNECTION_CLOSED,
    UpstreamFailure.MALFORMED: INTERNAL_ERROR,
}


class UpstreamError(CargoholdError):
    """A request the upstream MCP server did not answer usefully.

    Attributes:
        reason: Why, as a stable code.
        timeout: The configured timeout in seconds, for the message.
    """

    code = "upstream"

    def __init__(self, reason: UpstreamFailure, *, timeout: float, starting: bool = False) -> None:
        """``starting``: the proxy's own start failed (it stops: no "next request" follows)."""
        message = _START_MESSAGE if starting else _MESSAGES[reason]
        super().__init__(message.format(timeout=timeout))
        self.reason = reason
        self.timeout = timeout

    def to_mcp(self) -> MCPError:
        """The JSON-RPC error the MCP client receives."""
        return MCPError(code=_CODES[self.reason], message=str(self), data={"reason": self.reason})
