"""Conversations of tool calls in each format compaction reads, and checks of what comes out:
each SDK's own request types, call/result pairing, and the way back to every cleared byte."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cargohold import Hold, Ref

FORMATS = ("openai-chat", "anthropic", "openai-responses", "langchain")


@dataclass(frozen=True)
class Turn:
    """One tool call and its result."""

    tool: str
    call_id: str
    arguments: dict[str, Any]
    result: str


def body(index: int, size: int, *, tool: str = "read_file") -> str:
    """A realistic, distinct result of about ``size`` bytes (a source file, a log...)."""
    line = f"{tool} {index:04d}: value = compute({index}, step) # result line\n"
    text = f"# {tool} result {index}\n" + line * max(1, size // len(line))
    return text[:size] if len(text) > size else text


def turns(sizes: Sequence[int], *, tools: Sequence[str] = ("read_file",)) -> list[Turn]:
    """One turn per size, the tools taken in turn."""
    out = []
    for index, size in enumerate(sizes):
        tool = tools[index % len(tools)]
        arguments = {"path": f"src/module_{index}.py", "note": "n" * (index % 3)}
        out.append(Turn(tool, f"call_{index:03d}", arguments, body(index, size, tool=tool)))
    return out


def _chat(history: Sequence[Turn]) -> dict[str, Any]:
    messages: list[Any] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Find the bug in the parser."},
    ]
    for turn in history:
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": turn.call_id,
                        "type": "function",
                        "function": {"name": turn.tool, "arguments": json.dumps(turn.arguments)},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": turn.call_id, "content": turn.result})
    return {"model": "gpt-4o", "messages": messages}


def _anthropic(history: Sequence[Turn]) -> dict[str, Any]:
    messages: list[Any] = [{"role": "user", "content": "Find the bug in the parser."}]
    for turn in history:
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading it."},
                    {
                        "type": "tool_use",
                        "id": turn.call_id,
                        "name": turn.tool,
                        "input": turn.arguments,
                    },
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": turn.call_id, "content": turn.result}
                ],
            }
        )
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": "You are a careful coding agent.",
        "messages": messages,
    }


def _responses(history: Sequence[Turn]) -> dict[str, Any]:
    items: list[Any] = [{"role": "user", "content": "Find the bug in the parser."}]
    for turn in history:
        items.append(
            {
                "type": "function_call",
                "call_id": turn.call_id,
                "name": turn.tool,
                "arguments": json.dumps(turn.arguments),
            }
        )
        items.append(
            {"type": "function_call_output", "call_id": turn.call_id, "output": turn.result}
        )
    return {"model": "gpt-4o", "instructions": "You are a careful coding agent.", "input": items}


def _langchain(history: Sequence[Turn]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    messages: list[Any] = [
        SystemMessage("You are a careful coding agent."),
        HumanMessage("Find the bug in the parser."),
    ]
    for turn in history:
        messages.append(
            AIMessage(
                content="",
                tool_calls=[{"name": turn.tool, "args": turn.arguments, "id": turn.call_id}],
            )
        )
        messages.append(ToolMessage(turn.result, tool_call_id=turn.call_id, name=turn.tool))
    return messages


BUILDERS: dict[str, Callable[[Sequence[Turn]], Any]] = {
    "openai-chat": _chat,
    "anthropic": _anthropic,
    "openai-responses": _responses,
    "langchain": _langchain,
}


def request(fmt: str, history: Sequence[Turn]) -> Any:
    """The request a client of ``fmt`` sends after ``history``."""
    return BUILDERS[fmt](history)


def messages_of(fmt: str, built: Any) -> list[Any]:
    """The message list of a request."""
    if fmt == "langchain":
        return list(built)
    return list(built["input" if fmt == "openai-responses" else "messages"])


def dump(fmt: str, built: Any) -> list[str]:
    """Each message as canonical bytes (JSON; LangChain messages by their fields)."""
    out = []
    for message in messages_of(fmt, built):
        if fmt == "langchain":
            message = message.model_dump()
        out.append(json.dumps(message, sort_keys=False, ensure_ascii=False))
    return out


def results_of(fmt: str, built: Any) -> list[tuple[str, str]]:
    """(call id, result text) of every tool result, in order."""
    found = []
    for message in messages_of(fmt, built):
        if fmt != "langchain" and not isinstance(message, dict):
            continue  # an SDK object passed back: the model's turn, not a result
        if fmt == "openai-chat" and message.get("role") == "tool":
            found.append((message["tool_call_id"], message["content"]))
        elif fmt == "anthropic" and isinstance(message.get("content"), list):
            for block in message["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    found.append((block["tool_use_id"], block["content"]))
        elif fmt == "openai-responses" and message.get("type") == "function_call_output":
            found.append((message["call_id"], message["output"]))
        elif fmt == "langchain" and message.type == "tool":
            found.append((message.tool_call_id, message.content))
    return found


def calls_of(fmt: str, built: Any) -> list[tuple[str, str, str]]:
    """(call id, tool name, input as JSON text) of every tool call, in order."""
    found = []
    for message in messages_of(fmt, built):
        if fmt == "openai-chat" and message.get("role") == "assistant":
            for call in message.get("tool_calls") or ():
                function = call["function"]
                found.append((call["id"], function["name"], function["arguments"]))
        elif fmt == "anthropic" and message.get("role") == "assistant":
            for block in message["content"]:
                if block.get("type") == "tool_use":
                    found.append((block["id"], block["name"], json.dumps(block["input"])))
        elif fmt == "openai-responses" and message.get("type") == "function_call":
            found.append((message["call_id"], message["name"], message["arguments"]))
        elif fmt == "langchain" and message.type == "ai":
            for call in message.tool_calls:
                found.append((call["id"], call["name"], json.dumps(call["args"])))
    return found


def validate(fmt: str, built: Any) -> None:
    """The request passes its SDK's own request types, and every call has exactly one result
    after it, every result exactly one call before it (no orphan, nothing dangling)."""
    from pydantic import TypeAdapter

    if fmt == "openai-chat":
        from openai.types.chat import ChatCompletionMessageParam

        for message in TypeAdapter(list[ChatCompletionMessageParam]).validate_python(
            built["messages"]
        ):
            list(message.get("tool_calls") or ())  # the SDK's Iterable fields validate lazily
            content = message.get("content")
            if isinstance(content, list | tuple) or not isinstance(content, str | None):
                list(content or ())
    elif fmt == "anthropic":
        from anthropic.types import ContentBlockParam, MessageParam

        TypeAdapter(list[MessageParam]).validate_python(built["messages"])
        blocks = TypeAdapter(ContentBlockParam)  # each block too: the SDK's lists are lazy
        for message in built["messages"]:
            if not isinstance(message["content"], str):
                for block in message["content"]:
                    blocks.validate_python(block)
    elif fmt == "openai-responses":
        from openai.types.responses import ResponseInputParam

        list(TypeAdapter(ResponseInputParam).validate_python(built["input"]))
    else:
        from langchain_core.messages import BaseMessage, convert_to_openai_messages
        from openai.types.chat import ChatCompletionMessageParam

        assert all(isinstance(message, BaseMessage) for message in built)
        converted = convert_to_openai_messages(list(built))
        for message in TypeAdapter(list[ChatCompletionMessageParam]).validate_python(converted):
            list(message.get("tool_calls") or ())
    pending: list[str] = []
    seen_calls: set[str] = set()
    answered: set[str] = set()
    calls = {call_id for call_id, _, _ in calls_of(fmt, built)}
    for call_id, _ in results_of(fmt, built):
        assert call_id in calls, "a result whose call is gone"
        assert call_id not in answered, "a call answered twice"
        answered.add(call_id)
    for call_id, _, _ in calls_of(fmt, built):
        assert call_id not in seen_calls
        seen_calls.add(call_id)
        pending.append(call_id)
    assert set(pending) == answered, "a call without its result"


def read_back(hold: Hold, ref: Ref) -> bytes:
    """The whole artifact, page by page, through the model-facing ``artifact_read`` tool."""
    data = b""
    offset: int | None = 0
    while offset is not None:
        answer = hold.call_tool(
            "artifact_read", {"ref": str(ref), "offset": offset, "length": 12_000}
        )
        assert answer.outcome == "resolved"
        assert answer.content is not None
        if answer.encoding == "base64":
            data += base64.b64decode(answer.content)
        else:
            data += answer.content.encode("utf-8", "surrogatepass")
        offset = answer.next_offset
    return data
