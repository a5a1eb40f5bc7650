"""LangChain messages: a list of ``BaseMessage`` (or a mapping whose ``messages`` key holds
one); results are ``ToolMessage`` contents, inputs the ``args`` of an ``AIMessage``'s
``tool_calls`` (and the same call's input where the provider's form of it is kept too: a
``tool_use`` block of the content, ``additional_kwargs["tool_calls"]``).

langchain-core is imported only when a message is met; messages of another kind (plain
dicts) are left as they are.
"""

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
    cleared_input,
    count,
    name_of,
)
from cargohold.guard import RequestFormat


def _kind(message: Any) -> str | None:
    """``tool``, ``ai``... of a LangChain message object; ``None`` for anything else."""
    try:
        from langchain_core.messages import BaseMessage
    except ImportError:  # no langchain installed: nothing here is a LangChain message
        return None
    return message.type if isinstance(message, BaseMessage) else None


class LangChainFormat:
    """LangChain message objects, as a chat model or a middleware receives them."""

    name = RequestFormat.LANGCHAIN
    key = "messages"

    def messages(self, request: Any) -> Sequence[Any] | None:
        if isinstance(request, Mapping):
            request = request.get(self.key)
        return request if isinstance(request, list | tuple) else None

    def rebuild(self, request: Any, messages: list[Any]) -> Any:
        if isinstance(request, Mapping):
            return {**request, self.key: messages}
        return messages

    def slots(self, index: int, message: Any, calls: dict[str, str]) -> list[Slot]:
        kind = _kind(message)
        found: list[Slot] = []
        if kind == "ai":
            for part, call in enumerate(message.tool_calls):
                call_id, tool = name_of(call.get("id")), name_of(call.get("name"))
                if call_id is not None and tool is not None:
                    calls[call_id] = tool
                body = body_of(call.get("args"))
                if body is not None:
                    found.append(Slot(index, part, INPUT, call_id, tool, body[0], body[1]))
        elif kind == "tool":
            call_id = name_of(message.tool_call_id)
            body = body_of(message.content)
            if body is not None:
                tool = name_of(message.name) or (calls.get(call_id) if call_id else None)
                found.append(Slot(index, 0, RESULT, call_id, tool, body[0], body[1]))
        return found

    def replace(self, message: Any, stubs: Mapping[tuple[str, int], str]) -> Any:
        if (RESULT, 0) in stubs:
            return message.model_copy(update={"content": stubs[RESULT, 0]})
        calls = [dict(call) for call in message.tool_calls]
        by_id: dict[str, str] = {}
        for part, call in enumerate(calls):
            stub = stubs.get((INPUT, part))
            if stub is not None:
                call["args"] = cleared_input(stub)
                if isinstance(call.get("id"), str):
                    by_id[call["id"]] = stub
        update: dict[str, Any] = {"tool_calls": calls}
        content = message.content
        if isinstance(content, list) and by_id:
            update["content"] = [
                {**block, "input": cleared_input(by_id[block["id"]])}
                if isinstance(block, dict)
                and block.get("type") == "tool_use"
                and block.get("id") in by_id
                else block
                for block in content
            ]
        raw = message.additional_kwargs.get("tool_calls")
        if isinstance(raw, list) and by_id:
            kept = []
            for call in raw:
                function = call.get("function") if isinstance(call, dict) else None
                if isinstance(function, dict) and call.get("id") in by_id:
                    stub = by_id[call["id"]]
                    call = {**call, "function": {**function, "arguments": cleared_arguments(stub)}}
                kept.append(call)
            update["additional_kwargs"] = {**message.additional_kwargs, "tool_calls": kept}
        return message.model_copy(update=update)

    def tokens(self, message: Any, counter: Counter | None = None) -> int:
        return count(self.name, [message], counter)

    def fixed_tokens(self, request: Any, counter: Counter | None = None) -> int:
        if isinstance(request, Mapping):
            return count(self.name, {k: v for k, v in request.items() if k != self.key}, counter)
        return 0

    def from_model(self, message: Any) -> bool:
        return _kind(message) == "ai"
