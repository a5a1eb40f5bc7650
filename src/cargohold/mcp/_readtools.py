"""The read tools and ``artifact://`` resources, as MCP serves them.

Every tool of :data:`cargohold._toolspecs.SPECS` is served, so a read tool added there appears in
``cargohold mcp`` and in every proxy without a change here. An answer carries the tool's text
(a recovered segment, or what to fix) and its structured part (outcome, exact byte span, size,
SHA-256 of the returned bytes, and the same text again, for a client that gives the model only
the structured part); it is bounded by the caller's budget (1 MiB at most) and is
never offloaded again.
"""

from __future__ import annotations

import base64
import hashlib
from typing import TYPE_CHECKING, Any, Final

from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    BlobResourceContents,
    CallToolResult,
    ReadResourceResult,
    ResourceTemplate,
    TextContent,
    TextResourceContents,
    Tool,
)

from cargohold._errors import InvalidReferenceError, StoreError
from cargohold._records import MAX_READ_BYTES, ReadOutcome
from cargohold._ref import PREFIX, Ref
from cargohold._toolspecs import SPECS
from cargohold.mcp._content import STUB_KEY
from cargohold.mcp._errors import RESOURCE_NOT_FOUND

if TYPE_CHECKING:
    from cargohold._hold import Hold

RESOURCE_BOUND: Final = MAX_READ_BYTES
"""The most bytes one ``resources/read`` of an artifact returns (1 MiB); larger artifacts are
read in pages with ``artifact_read``."""

ARTIFACT_TEMPLATE: Final = ResourceTemplate(
    name="cargohold artifact",
    uri_template=PREFIX + "{digest}",
    description="Exact bytes kept out of context by cargohold, by their SHA-256 "
    "(at most 1 MiB per read; larger ones are read in pages with artifact_read).",
)


def read_tool_names() -> frozenset[str]:
    """The names of the read tools (looked up each time: :data:`SPECS` is the one list)."""
    return frozenset(spec.name for spec in SPECS)


def read_tools() -> list[Tool]:
    """Every read tool as an MCP ``Tool`` (read-only, idempotent)."""
    return [Tool.model_validate(spec.mcp()) for spec in SPECS]


async def call_read_tool(hold: Hold, name: str, arguments: dict[str, Any] | None) -> CallToolResult:
    """Run the read tool ``name`` for the model: its answer as text plus the structured part.

    The model's mistakes are answers (``is_error``) that say how to fix the call; a store that
    cannot be reached is one too, stated by category only.
    """
    try:
        answer = await hold.acall_tool(name, arguments or {})
    except StoreError as exc:
        text = f"{name}: {exc.code}: the store could not answer; try again later."
        return CallToolResult(content=[TextContent(text=text)], is_error=True)
    # A client may hand the model only structuredContent (Claude Code does), so the answer's
    # text (the recovered segment with its marker lines, or what to fix) is in it too: the
    # same string as the text part, not a second read, so each holds the budget once.
    structured = {**answer.structured(), "text": answer.text}
    return CallToolResult(
        content=[TextContent(text=answer.text)],
        structured_content=structured,
        is_error=answer.is_error,
    )


async def read_artifact(hold: Hold, uri: str, *, bound: int = RESOURCE_BOUND) -> ReadResourceResult:
    """``resources/read`` of ``artifact://sha256/<hex>``: the exact body when it fits ``bound``
    (its credentials masked, as every read's are: then ``_meta`` says ``masked``).

    The body is verified and owner-checked like every read (one event). The ``_meta`` of the
    contents names the SHA-256 and span of the returned bytes.

    Raises:
        MCPError: the URI is not a canonical reference (invalid params); the artifact does not
            resolve for this scope (``missing``, ``unauthorized``, ``stale``, ``expired``); or
            it is larger than ``bound`` (``over_budget``: page it with ``artifact_read``).
    """
    try:
        ref = Ref.parse(uri)
    except InvalidReferenceError:
        raise MCPError(
            code=INVALID_PARAMS,
            message="not an artifact reference: artifact://sha256/ then 64 lowercase hex digits",
            data={"outcome": "invalid_arguments"},
        ) from None
    try:
        result = await hold.aread(ref, budget=bound)
    except StoreError as exc:
        raise MCPError(
            code=RESOURCE_NOT_FOUND,
            message="the store could not answer; try again later",
            data={"outcome": exc.code},
        ) from None
    if result.outcome.value == ReadOutcome.OVER_BUDGET.value:
        size = f"{result.size:,} bytes" if result.size is not None else "too large"
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"{ref} is {size}, over the {bound:,}-byte bound of resources/read; read it "
            "in pages with the artifact_read tool (offset, length)",
            data={"outcome": result.outcome.value, "size": result.size, "bound": bound},
        )
    if not result.ok or result.content is None:
        raise MCPError(
            code=RESOURCE_NOT_FOUND,
            message=f"{ref}: {result.outcome.value}",
            data={"outcome": result.outcome.value},
        )
    info = await hold.ainfo(ref)
    media_type = info.record.media_type if info.record is not None else None
    facts: dict[str, Any] = {
        "sha256": ref.digest,
        "size": result.size,
        "start": result.start,
        "end": result.end,
    }
    if result.masked:  # not the exact body: its credentials are masked; the digest says so
        returned = (
            base64.b64decode(result.content)
            if result.encoding == "base64"
            else result.content.encode("utf-8", "surrogatepass")
        )
        facts["sha256"] = hashlib.sha256(returned).hexdigest()
        facts["masked"] = True
    meta = {STUB_KEY: facts}
    if result.encoding == "base64":
        return ReadResourceResult(
            contents=[
                BlobResourceContents(
                    uri=str(ref), blob=result.content, mime_type=media_type, _meta=meta
                )
            ]
        )
    return ReadResourceResult(
        contents=[
            TextResourceContents(
                uri=str(ref), text=result.content, mime_type=media_type, _meta=meta
            )
        ]
    )


def is_artifact_uri(uri: str) -> bool:
    """Whether ``uri`` is cargohold's to answer (it names an artifact, well-formed or not)."""
    return uri.startswith("artifact://")


__all__ = [
    "ARTIFACT_TEMPLATE",
    "RESOURCE_BOUND",
    "call_read_tool",
    "is_artifact_uri",
    "read_artifact",
    "read_tool_names",
    "read_tools",
]
