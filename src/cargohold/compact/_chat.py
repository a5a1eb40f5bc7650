"""OpenAI Chat Completions: ``{"messages": [...]}``; results are ``role: tool`` messages,
inputs are the ``function.arguments`` of an assistant message's ``tool_calls``."""

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


class ChatFormat:
    """Chat Completions messages (plain dicts, as ``chat.completions.create`` takes them)."""

    name = RequestFormat.OPENAI_CHAT
    key = "messages"

    def messages(self, request: Any) -> Sequence[Any] | None:
        value = request.get(self.key) if isinstance(request, Mapping) else None
        return value if isinstance(value, list | tuple) else None

    def rebuild(self, request: Any, messages: list[Any]) -> Any:
        return {**request, self.key: messages}

    def slots(self, index: int, message: Any, calls: dict[str, str]) -> list[Slot]:
        if not isinstance(message, Mapping):  # an SDK message passed back: its calls' names
            for call in field_of(message, "tool_calls") or ():
                call_id = name_of(field_of(call, "id"))
                tool = name_of(field_of(field_of(call, "function"), "name"))
                if call_id is not None and tool is not None:
                    calls[call_id] = tool
            return []
        role = message.get("role")
        found: list[Slot] = []
        if role == "assistant":
            for part, call in enumerate(message.get("tool_calls") or ()):
                function = call.get("function") if isinstance(call, Mapping) else None
                if not isinstance(function, Mapping):
                    continue
                call_id, tool = name_of(call.get("id")), name_of(function.get("name"))
                if call_id is not None and tool is not None:
                    calls[call_id] = tool
                arguments = function.get("arguments")
                if isinstance(arguments, str):
                    found.append(Slot(index, part, INPUT, call_id, tool, arguments, None))
        elif role == "tool":
            call_id = name_of(message.get("tool_call_id"))
            body = body_of(message.get("content"))
            if body is not None:
                tool = calls.get(call_id) if call_id else None
                found.append(Slot(index, 0, RESULT, call_id, tool, body[0], body[1]))
        return found

    def replace(self, message: Any, stubs: Mapping[tuple[str, int], str]) -> Any:
        new = dict(message)
        if (RESULT, 0) in stubs:
            new["content"] = stubs[RESULT, 0]
        if any(kind == INPUT for kind, _ in stubs):
            calls = list(new.get("tool_calls") or ())
            for part, call in enumerate(calls):
                stub = stubs.get((INPUT, part))
                if stub is not None:
                    function = {**call["function"], "arguments": cleared_arguments(stub)}
                    calls[part] = {**call, "function": function}
            new["tool_calls"] = calls
        return new

    def tokens(self, message: Any, counter: Counter | None = None) -> int:
        return count(self.name, {self.key: [message]}, counter)

    def fixed_tokens(self, request: Any, counter: Counter | None = None) -> int:
        return count(self.name, {k: v for k, v in request.items() if k != self.key}, counter)

    def from_model(self, message: Any) -> bool:
        return bool(field_of(message, "role") == "assistant")
