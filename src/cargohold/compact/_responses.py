"""OpenAI Responses input: ``{"input": [...]}``; results are ``function_call_output`` and
``custom_tool_call_output`` items (their ``output``), inputs the ``arguments`` of
``function_call`` items and the ``input`` of ``custom_tool_call`` items. Other call items
(computer, shell, MCP) hold typed values the API checks: left as they are."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cargohold.compact._model import (
    INPUT,
    RESULT,
    Counter,
    Slot,
    body_of,
    cleared_arguments,
    count,
    field_of,
    name_of,
)
from cargohold.guard import RequestFormat

_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
_CALLS = {"function_call": "arguments", "custom_tool_call": "input"}
_MODEL_ITEMS = frozenset(
    {"function_call", "custom_tool_call", "reasoning", "web_search_call", "file_search_call"}
)


class ResponsesFormat:
    """Responses input items (plain dicts, as ``responses.create`` takes them)."""

    name = RequestFormat.OPENAI_RESPONSES
    key = "input"

    def messages(self, request: Any) -> Sequence[Any] | None:
        value = request.get(self.key) if isinstance(request, Mapping) else None
        return value if isinstance(value, list | tuple) else None  # a string: nothing to clear

    def rebuild(self, request: Any, messages: list[Any]) -> Any:
        return {**request, self.key: messages}

    def slots(self, index: int, message: Any, calls: dict[str, str]) -> list[Slot]:
        if not isinstance(message, Mapping):  # an SDK item passed back: its call's name
            call_id, tool = (
                name_of(field_of(message, "call_id")),
                name_of(field_of(message, "name")),
            )
            if field_of(message, "type") in _CALLS and call_id is not None and tool is not None:
                calls[call_id] = tool
            return []
        kind = message.get("type")
        call_id = name_of(message.get("call_id"))
        if kind in _CALLS:
            tool = name_of(message.get("name"))
            if call_id is not None and tool is not None:
                calls[call_id] = tool
            value = message.get(_CALLS[kind])
            if isinstance(value, str):
                return [Slot(index, 0, INPUT, call_id, tool, value, None)]
        elif kind in _OUTPUTS:
            body = body_of(message.get("output"))
            if body is not None:
                tool = calls.get(call_id) if call_id else None
                return [Slot(index, 0, RESULT, call_id, tool, body[0], body[1])]
        return []

    def replace(self, message: Any, stubs: Mapping[tuple[str, int], str]) -> Any:
        new = dict(message)
        if (RESULT, 0) in stubs:
            new["output"] = stubs[RESULT, 0]
        stub = stubs.get((INPUT, 0))
        if stub is not None:
            if new.get("type") == "function_call":
                new["arguments"] = cleared_arguments(stub)
            else:  # a custom tool's input is free text
                new["input"] = stub
        return new

    def tokens(self, message: Any, counter: Counter | None = None) -> int:
        return count(self.name, {self.key: [message]}, counter)

    def fixed_tokens(self, request: Any, counter: Counter | None = None) -> int:
        return count(self.name, {k: v for k, v in request.items() if k != self.key}, counter)

    def from_model(self, message: Any) -> bool:
        role, kind = field_of(message, "role"), field_of(message, "type")
        return role == "assistant" or kind in _MODEL_ITEMS
