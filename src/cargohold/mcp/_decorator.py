"""``@offload_results(hold)``: heavy results of an ``MCPServer`` tool kept out of context.

For server authors who want the proxy's behaviour built in. Put it under ``@server.tool()``::

    @server.tool()
    @offload_results(hold)
    async def fetch(url: str) -> str: ...

The tool keeps its name, description and input schema. Its return value is converted exactly as
``MCPServer`` would convert it (text, structured output, images...), then every heavy part is
offloaded as the proxy does it (:func:`cargohold.mcp.offload_result`): one decision and one event
per part. A declared output schema is not published (``MCPServer`` would hold a stub against
it), so structured results below the threshold still arrive, without a schema.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server.mcpserver.utilities.context_injection import find_context_parameter
from mcp.server.mcpserver.utilities.func_metadata import func_metadata
from mcp_types import CallToolResult, InputRequiredResult

from cargohold._errors import UsageError
from cargohold.mcp._content import ResultPolicy, offload_result

if TYPE_CHECKING:
    from cargohold._hold import Hold


def offload_results(
    hold: Hold, *, tool: str | None = None, policy: ResultPolicy | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate an ``MCPServer`` tool function so its heavy results are offloaded.

    Args:
        hold: Where the bytes go (its scope, thresholds, budgets and sinks).
        tool: The tool's name in stubs and events (the function's name by default; give the
            name you register it under if that differs).
        policy: How images, audio and blobs are disposed (the hold's configuration by default).

    Returns:
        A decorator; the function it returns is async and answers a ``CallToolResult``.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise UsageError("offload_results decorates a tool function")
        name: str = tool or str(getattr(fn, "__name__", "tool"))
        chosen = policy or ResultPolicy.from_settings(hold)
        context = find_context_parameter(fn)
        # The conversion MCPServer itself applies to this function's return value.
        converter = func_metadata(fn, skip_names=[context] if context else [])
        is_async = inspect.iscoroutinefunction(fn)

        @functools.wraps(fn)
        async def tool_function(*args: Any, **kwargs: Any) -> CallToolResult | InputRequiredResult:
            if is_async:
                value = await fn(*args, **kwargs)
            else:  # as MCPServer runs a sync tool: on a worker thread
                value = await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))
            converted = converter.convert_result(value)
            if isinstance(converted, InputRequiredResult):
                return converted
            offload = functools.partial(offload_result, hold, converted, tool=name, policy=chosen)
            return await anyio.to_thread.run_sync(offload)

        # What MCPServer reads: the original parameters (evaluated, so string annotations
        # resolve against the function's own module) and a CallToolResult return, which it
        # passes through unconverted and without an output schema.
        signature = inspect.signature(fn, eval_str=True)
        annotations = {
            key: parameter.annotation
            for key, parameter in signature.parameters.items()
            if parameter.annotation is not inspect.Parameter.empty
        }
        annotations["return"] = CallToolResult
        tool_function.__signature__ = signature.replace(  # type: ignore[attr-defined]  # read by inspect.signature
            return_annotation=CallToolResult
        )
        tool_function.__annotations__ = annotations
        del tool_function.__wrapped__  # inspect must see the signature above, not fn's
        return tool_function

    return decorate
