"""Anthropic Messages: ``{"messages": [...]}``; results are the ``tool_result`` blocks of a user
message, inputs the ``input`` of an assistant message's ``tool_use`` blocks. A server's or an MCP
connector's calls and results are typed blocks the API checks: left as they are (their ids still
name their tools for the results that follow)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cargohold.compact._model import (
    INPUT,
    RESULT,
    Counter,
    Slot,
    body_of,
    cleared_input,
    count,
    field_of,
    name_of,
)
from cargohold.guard import RequestFormat


class AnthropicFormat:
    """Anthropic Messages (plain dicts, as ``messages.create`` takes them)."""

    name = RequestFormat.ANTHROPIC
    key = "messages"

    def messages(self, request: Any) -> Sequence[Any] | None:
        value = request.get(self.key) if isinstance(request, Mapping) else None
        return value if isinstance(value, list | tuple) else None

    def rebuild(self, request: Any, messages: list[Any]) -> Any:
        return {**request, self.key: messages}

    def slots(self, index: int, message: Any, calls: dict[str, str]) -> list[Slot]:
        if not isinstance(message, Mapping):
            return []
        blocks = message.get("content")
        if not isinstance(blocks, list | tuple):
            return []
        found: list[Slot] = []
        for part, block in enumerate(blocks):
            kind = field_of(block, "type")
            if not isinstance(kind, str):
                continue
            if not isinstance(block, Mapping):  # an SDK block passed back: its call's name
                call_id, tool = name_of(field_of(block, "id")), name_of(field_of(block, "name"))
                if kind.endswith("tool_use") and call_id is not None and tool is not None:
                    calls[call_id] = tool
                continue
            if kind == "tool_use" or kind == "server_tool_use" or kind == "mcp_tool_use":
                call_id, tool = name_of(block.get("id")), name_of(block.get("name"))
                if call_id is not None and tool is not None:
                    calls[call_id] = tool
                if kind == "tool_use":  # a server's call is the server's: left as it is
                    body = body_of(block.get("input"))
                    if body is not None:
                        found.append(Slot(index, part, INPUT, call_id, tool, body[0], body[1]))
            elif kind == "tool_result":
                call_id = name_of(block.get("tool_use_id"))
                body = body_of(block.get("content"))
                if body is not None and "content" in block:
                    tool = calls.get(call_id) if call_id else None
                    found.append(Slot(index, part, RESULT, call_id, tool, body[0], body[1]))
        return found

    def replace(self, message: Any, stubs: Mapping[tuple[str, int], str]) -> Any:
        blocks = list(message["content"])
        for (kind, part), stub in stubs.items():
            if kind == RESULT:
                blocks[part] = {**blocks[part], "content": stub}
            else:
                blocks[part] = {**blocks[part], "input": cleared_input(stub)}
        return {**message, "content": blocks}

    def tokens(self, message: Any, counter: Counter | None = None) -> int:
        return count(self.name, {self.key: [message]}, counter)

    def fixed_tokens(self, request: Any, counter: Counter | None = None) -> int:
        return count(self.name, {k: v for k, v in request.items() if k != self.key}, counter)

    def from_model(self, message: Any) -> bool:
        return isinstance(message, Mapping) and message.get("role") == "assistant"
