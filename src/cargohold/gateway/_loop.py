"""The gateway running the read tools itself, for clients that cannot add tools (``--read-tools``).

Once a request's history carries a cargohold reference (a stub the gateway or an earlier surface
put there), the six read tools (``artifact_read``, ``artifact_read_lines``, ``artifact_grep``,
``artifact_query``, ``artifact_info``, ``artifact_search``; not ``artifact_patch``, which stores)
are added to the request's tools. When the model's answer calls only those, the gateway runs the
calls in the request's scope and continues the conversation upstream, up to ``rounds`` times;
the client sees only the final answer. The last round allowed is sent with ``tool_choice`` set to
``none``, so it ends in an answer.

What the client receives is the provider's own answer, spliced: the text, thinking and client
tool calls of every round, in order, without the read-tool calls and their results (the client
cannot run those, and a call it cannot answer would break its conversation). A streamed request
is streamed: each round's events are relayed as they arrive, the read-tool calls held back and
the later rounds' blocks renumbered after the earlier ones, so the client sees one answer. The
final round's stop reason and usage end it. An answer that calls both a read tool and one of the
client's own tools goes to the client without the read-tool calls: the client answers its own,
and the model can read on its next turn.

The rounds the gateway ran are not in the client's history: on its next turn the model sees its
earlier answer, not what it read to write it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from cargohold._toolspecs import SPECS

READ_TOOLS = tuple(spec for spec in SPECS if spec.read_only)
"""The tools the gateway adds: every read tool, not ``artifact_patch`` (it stores)."""

NAMES = frozenset(spec.name for spec in READ_TOOLS)

CLIENT_ITEMS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "computer_call",
        "local_shell_call",
        "shell_call",
        "apply_patch_call",
        "mcp_approval_request",
    }
)
"""Responses output items the client must answer (the provider runs the rest itself: web and
file search, code interpreter, image generation, its own MCP calls): an answer holding one
goes to the client."""

REFERENCE = b"artifact://sha256/"
"""What a request carries once it holds a cargohold reference (every stub names one)."""

# SSE (WHATWG HTML, server-sent events): events end at a blank line, lines end in CRLF, LF or CR.
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r|\r\n\n|\n\r\n")
_LINE = re.compile(rb"\r\n|\n|\r")


@dataclass(frozen=True, slots=True)
class Call:
    """One read-tool call the model made: its id, the tool, and its arguments (JSON text or an
    object, as the API gives them)."""

    id: str
    name: str
    arguments: Any


@dataclass(frozen=True, slots=True)
class Event:
    """One server-sent event: its ``event:`` name, its data, and its exact bytes."""

    name: str | None
    data: str
    raw: bytes


MAX_EVENT_BYTES = 64 * 1024 * 1024
"""The largest server-sent event read whole (a Responses ``response.completed`` event holds the
whole answer); a longer one ends the stream."""


class EventTooLarge(Exception):
    """An event (or a body that is not a stream of events) past :data:`MAX_EVENT_BYTES`."""


class EventReader:
    """The server-sent events of a byte stream, each once its blank line has arrived.

    Each search starts where the last one stopped (less the three bytes a blank line may
    straddle), so reading is linear in the stream however the upstream cuts it.
    """

    __slots__ = ("_buffer", "_limit", "_scanned")

    def __init__(self, limit: int = MAX_EVENT_BYTES) -> None:
        self._buffer = bytearray()
        self._scanned = 0
        self._limit = limit

    def feed(self, chunk: bytes) -> Iterator[Event]:
        """The events ``chunk`` completes.

        Raises:
            EventTooLarge: the event being read is past the limit.
        """
        self._buffer += chunk
        while True:
            end = _EVENT_END.search(self._buffer, max(0, self._scanned - 3))
            if end is None:
                self._scanned = len(self._buffer)
                if self._scanned > self._limit:
                    raise EventTooLarge
                return
            block = bytes(self._buffer[: end.end()])
            del self._buffer[: end.end()]
            self._scanned = 0
            yield _event(block, end.start())

    def close(self) -> Iterator[Event]:
        """The last event, when the stream ended without its blank line."""
        if self._buffer.strip():
            block = bytes(self._buffer)
            yield _event(block + b"\n\n", len(block))
        self._buffer.clear()


def _event(block: bytes, end: int) -> Event:
    """The event of ``block`` (its exact bytes), whose fields end at ``end``."""
    name: str | None = None
    data: list[str] = []
    for line in _LINE.split(block[:end]):
        text = line.decode("utf-8", "replace")
        if not text or text.startswith(":"):
            continue
        key, _, value = text.partition(":")
        value = value.removeprefix(" ")
        if key == "event":
            name = value
        elif key == "data":
            data.append(value)
    if name is None and not data:
        return Event(None, "", block)  # a comment or keep-alive: relayed as it came
    return Event(name, "\n".join(data), block)


def sse(name: str | None, data: Any) -> bytes:
    """One event, written as the providers write theirs."""
    line = b"" if name is None else b"event: " + name.encode() + b"\n"
    return line + b"data: " + orjson.dumps(data) + b"\n\n"


class Splice(Protocol):
    """One streamed answer's rounds, spliced into one stream for the client."""

    def feed(self, event: Event) -> list[bytes]:
        """The bytes to relay for one upstream event (none: held back or dropped)."""
        ...

    def calls(self) -> list[Call] | None:
        """At the end of a round: the read-tool calls to run before the next one, or ``None``
        when the round was the last (no read-tool calls, or the client's calls beside them, or
        an answer that cannot be continued)."""
        ...

    def next_round(self) -> None:
        """Forget the ended round; the next one's events follow."""
        ...

    def finish(self) -> list[bytes]:
        """The held end of the last round (its stop reason, usage, end of stream)."""
        ...

    def turn(self) -> Any:
        """What the model answered in the ended round, as the request's next turn holds it."""
        ...

    def answer_id(self) -> str | None:
        """The ended round's answer id, where the API continues from one (Responses)."""
        ...


class Api(Protocol):
    """What mode (b) needs of one provider API."""

    def defined(self, request: Mapping[str, Any]) -> set[str]:
        """The names of the tools the client defined."""
        ...

    def with_tools(self, request: dict[str, Any]) -> dict[str, Any]:
        """The request with the read tools added."""
        ...

    def last_round(self, request: dict[str, Any]) -> dict[str, Any]:
        """The request of the last round allowed: it must end in an answer."""
        ...

    def follow_up(
        self, request: dict[str, Any], turn: Any, answer_id: str | None, results: list[Result]
    ) -> dict[str, Any]:
        """The next round's request: the answer, then the read tools' results."""
        ...

    def split(self, answer: dict[str, Any]) -> tuple[list[Call], int, Any, str | None]:
        """A whole (non-streamed) answer: its read-tool calls, how many client tool calls it
        makes, its turn (for the follow-up) and its id."""
        ...

    def merged(self, answer: dict[str, Any], earlier: list[Any]) -> dict[str, Any]:
        """The final answer as the client gets it: the earlier rounds' parts the client may see,
        then its own, without read-tool calls."""
        ...

    def visible(self, turn: Any) -> list[Any]:
        """The parts of a round's turn the client may see (not the read-tool calls)."""
        ...

    def splice(self) -> Splice:
        """A splice for a streamed answer."""
        ...


@dataclass(frozen=True, slots=True)
class Result:
    """A read tool's answer to one call."""

    call: Call
    text: str
    is_error: bool


def _with_tools(request: dict[str, Any], tools: list[Any], conversation: str) -> dict[str, Any]:
    """``request`` with ``tools`` after the client's own. A request without tools gets them
    just before its conversation, so the conversation stays the end of the body and each turn's
    request is still a byte prefix of the next one's."""
    if "tools" in request or conversation not in request:
        return {**request, "tools": [*_tools(request), *tools]}
    out: dict[str, Any] = {}
    for key, value in request.items():
        if key == conversation:
            out["tools"] = tools
        out[key] = value
    return out


def _tools(request: Mapping[str, Any]) -> list[Any]:
    tools = request.get("tools")
    return list(tools) if isinstance(tools, list) else []


# -- Anthropic Messages -------------------------------------------------------------------------


class _AnthropicSplice:
    def __init__(self) -> None:
        self._sent = 0  # content blocks the client has received, every round so far
        self._round = 0
        self._map: dict[int, int | None] = {}  # this round's block index -> the client's
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self._ours: list[int] = []
        self._theirs = 0
        self._held: list[Event] = []
        self._final = False  # an error, or a block this splice cannot rebuild
        self._ended = False  # the round's message_stop arrived: it may be continued

    def feed(self, event: Event) -> list[bytes]:
        try:
            data = orjson.loads(event.data) if event.data else None
        except orjson.JSONDecodeError:
            self._final = True
            return [event.raw]
        kind = data.get("type") if isinstance(data, dict) else None
        if kind == "message_start":
            return [event.raw] if self._round == 0 else []
        if kind in ("message_delta", "message_stop"):
            self._held.append(event)
            self._ended = self._ended or kind == "message_stop"
            return []
        if kind == "error":
            self._final = True
            return [event.raw]
        if not isinstance(data, dict) or kind not in (
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
        ):
            return [event.raw]  # ping, and what a later API version adds
        index = data.get("index")
        if not isinstance(index, int):
            self._final = True
            return [event.raw]
        if kind == "content_block_start":
            block = data.get("content_block")
            block = copy.deepcopy(block) if isinstance(block, dict) else {}
            self._blocks[index] = block
            if block.get("type") == "tool_use" and block.get("name") in NAMES:
                self._map[index] = None
                self._ours.append(index)
                self._json[index] = []
                return []
            if block.get("type") in ("tool_use", "server_tool_use"):
                self._theirs += block.get("type") == "tool_use"
            if block.get("type") == "tool_use":
                self._json[index] = []
            self._map[index] = self._sent
            self._sent += 1
        elif kind == "content_block_delta":
            self._rebuild(index, data.get("delta"))
        target = self._map.get(index)
        if target is None:
            return []
        if target == index:
            return [event.raw]
        return [sse(event.name, {**data, "index": target})]

    def _rebuild(self, index: int, delta: Any) -> None:
        block = self._blocks.get(index)
        if block is None or not isinstance(delta, dict):
            self._final = True
            return
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + str(delta.get("text", ""))
        elif kind == "input_json_delta":
            self._json.setdefault(index, []).append(str(delta.get("partial_json", "")))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
        elif kind == "signature_delta":
            block["signature"] = delta.get("signature")
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))
        else:
            self._final = True  # a delta this splice cannot rebuild: the round is the last

    def calls(self) -> list[Call] | None:
        if self._final or not self._ended or not self._ours or self._theirs:
            return None
        calls = []
        for index in self._ours:
            block = self._blocks[index]
            text = "".join(self._json.get(index, [])) or "{}"
            calls.append(Call(str(block.get("id", "")), str(block.get("name")), text))
        return calls

    def turn(self) -> Any:
        content = []
        for index in sorted(self._blocks):
            block = dict(self._blocks[index])
            if index in self._json:
                try:
                    block["input"] = orjson.loads("".join(self._json[index]) or "{}")
                except orjson.JSONDecodeError:
                    block["input"] = {}
            content.append(block)
        return content

    def answer_id(self) -> str | None:
        return None

    def next_round(self) -> None:
        self._round += 1
        self._map.clear()
        self._blocks.clear()
        self._json.clear()
        self._ours.clear()
        self._theirs = 0
        self._held.clear()
        self._ended = False

    def finish(self) -> list[bytes]:
        out = []
        for event in self._held:
            data = orjson.loads(event.data) if event.data else None
            delta = data.get("delta") if isinstance(data, dict) else None
            if (
                self._ours
                and not self._theirs
                and isinstance(data, dict)
                and isinstance(delta, dict)
                and delta.get("stop_reason") == "tool_use"
            ):
                # Only read-tool calls, held back (the rounds ran out): the client gets an
                # answer that ended, not a call to a tool it does not have.
                out.append(sse(event.name, {**data, "delta": {**delta, "stop_reason": "end_turn"}}))
            else:
                out.append(event.raw)
        return out


class _Anthropic:
    def defined(self, request: Mapping[str, Any]) -> set[str]:
        return {str(t.get("name")) for t in _tools(request) if isinstance(t, dict)}

    def with_tools(self, request: dict[str, Any]) -> dict[str, Any]:
        return _with_tools(request, [s.anthropic() for s in READ_TOOLS], "messages")

    def last_round(self, request: dict[str, Any]) -> dict[str, Any]:
        return {**request, "tool_choice": {"type": "none"}}

    def follow_up(
        self, request: dict[str, Any], turn: Any, answer_id: str | None, results: list[Result]
    ) -> dict[str, Any]:
        blocks = [
            {
                "type": "tool_result",
                "tool_use_id": result.call.id,
                "content": result.text,
                **({"is_error": True} if result.is_error else {}),
            }
            for result in results
        ]
        messages = list(request.get("messages") or [])
        messages += [{"role": "assistant", "content": turn}, {"role": "user", "content": blocks}]
        return {**request, "messages": messages}

    def split(self, answer: dict[str, Any]) -> tuple[list[Call], int, Any, str | None]:
        content = answer.get("content")
        content = content if isinstance(content, list) else []
        ours = [
            Call(str(b.get("id", "")), str(b["name"]), b.get("input") or {})
            for b in content
            if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") in NAMES
        ]
        theirs = sum(
            1
            for b in content
            if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") not in NAMES
        )
        answer_id = answer.get("id")
        return ours, theirs, content, answer_id if isinstance(answer_id, str) else None

    def visible(self, turn: Any) -> list[Any]:
        return [b for b in turn if not _anthropic_ours(b)]

    def merged(self, answer: dict[str, Any], earlier: list[Any]) -> dict[str, Any]:
        content = answer.get("content")
        content = content if isinstance(content, list) else []
        kept = [b for b in content if not _anthropic_ours(b)]
        merged = {**answer, "content": [*earlier, *kept]}
        if len(kept) < len(content) and not any(
            isinstance(b, dict) and b.get("type") == "tool_use" for b in kept
        ):
            merged["stop_reason"] = "end_turn"
        return merged

    def splice(self) -> Splice:
        return _AnthropicSplice()


def _anthropic_ours(block: Any) -> bool:
    return (
        isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") in NAMES
    )


# -- OpenAI Chat Completions ----------------------------------------------------------------------


class _ChatSplice:
    def __init__(self) -> None:
        self._sent = 0  # tool calls the client has received, every round so far
        self._map: dict[int, int | None] = {}
        self._calls: dict[int, dict[str, Any]] = {}
        self._content: list[str] = []
        self._ours: list[int] = []
        self._theirs = 0
        self._held: list[Event] = []
        self._final = False

    def feed(self, event: Event) -> list[bytes]:
        if self._held:  # after the finish reason: usage, [DONE]
            self._held.append(event)
            return []
        if event.data == "[DONE]":
            self._held.append(event)
            return []
        try:
            chunk = orjson.loads(event.data) if event.data else None
        except orjson.JSONDecodeError:
            self._final = True
            return [event.raw]
        if not isinstance(chunk, dict):
            return [event.raw]
        if "error" in chunk:
            self._final = True
            return [event.raw]
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices:
            return [event.raw]
        choice = choices[0]
        if len(choices) != 1 or not isinstance(choice, dict) or choice.get("index", 0) != 0:
            self._final = True
            return [event.raw]
        delta = choice.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        if isinstance(delta.get("content"), str):
            self._content.append(delta["content"])
        changed = False
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list):
            kept = []
            for entry in tool_calls:
                if not isinstance(entry, dict) or not isinstance(entry.get("index"), int):
                    self._final = True
                    kept.append(entry)
                    continue
                target = self._track(entry)
                if target is None:
                    changed = True
                    continue
                if target != entry["index"]:
                    entry = {**entry, "index": target}
                    changed = True
                kept.append(entry)
            if changed:
                delta = (
                    {**delta, "tool_calls": kept}
                    if kept
                    else {k: v for k, v in delta.items() if k != "tool_calls"}
                )
        if choice.get("finish_reason") is not None:
            self._held.append(
                Event(event.name, orjson.dumps(_chat_chunk(chunk, choice, delta)).decode(), b"")
                if changed
                else event
            )
            return []
        if not changed:
            return [event.raw]
        if not delta:
            return []  # a chunk that only carried a read-tool call
        return [sse(event.name, _chat_chunk(chunk, choice, delta))]

    def _track(self, entry: dict[str, Any]) -> int | None:
        index = entry["index"]
        call = self._calls.get(index)
        given = entry.get("function")
        function: dict[str, Any] = given if isinstance(given, dict) else {}
        if call is None:
            call = {
                "id": entry.get("id"),
                "type": "function",
                "function": {"name": "", "arguments": ""},
            }
            self._calls[index] = call
            name = function.get("name")
            if name in NAMES:
                self._map[index] = None
                self._ours.append(index)
            else:
                self._map[index] = self._sent
                self._sent += 1
                self._theirs += 1
        if entry.get("id"):
            call["id"] = entry["id"]
        if isinstance(function.get("name"), str):
            call["function"]["name"] += function["name"]
        if isinstance(function.get("arguments"), str):
            call["function"]["arguments"] += function["arguments"]
        return self._map[index]

    def calls(self) -> list[Call] | None:
        # Continued only once the round's finish reason arrived (self._held starts with it).
        if self._final or not self._held or not self._ours or self._theirs:
            return None
        return [
            Call(
                str(self._calls[i]["id"] or ""),
                self._calls[i]["function"]["name"],
                self._calls[i]["function"]["arguments"],
            )
            for i in self._ours
        ]

    def turn(self) -> Any:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._content) or None}
        if self._calls:
            message["tool_calls"] = [self._calls[i] for i in sorted(self._calls)]
        return message

    def answer_id(self) -> str | None:
        return None

    def next_round(self) -> None:
        self._map.clear()
        self._calls.clear()
        self._content.clear()
        self._ours.clear()
        self._theirs = 0
        self._held.clear()

    def finish(self) -> list[bytes]:
        out = []
        for event in self._held:
            if event.data == "[DONE]" or not event.data:
                out.append(event.raw)
                continue
            try:
                chunk = orjson.loads(event.data)
            except orjson.JSONDecodeError:
                out.append(event.raw)  # not this splice's to read: relayed as it came
                continue
            choices = chunk.get("choices") if isinstance(chunk, dict) else None
            choice = choices[0] if isinstance(choices, list) and choices else None
            if (
                isinstance(choice, dict)
                and choice.get("finish_reason") == "tool_calls"
                and self._ours
                and not self._theirs
            ):
                choice = {**choice, "finish_reason": "stop"}
                out.append(sse(event.name, {**chunk, "choices": [choice]}))
            elif event.raw:
                out.append(event.raw)
            else:
                out.append(sse(event.name, chunk))
        return out


def _chat_chunk(chunk: dict[str, Any], choice: dict[str, Any], delta: dict[str, Any]) -> Any:
    return {**chunk, "choices": [{**choice, "delta": delta}]}


class _Chat:
    def defined(self, request: Mapping[str, Any]) -> set[str]:
        names = set()
        for tool in _tools(request):
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict):
                names.add(str(function.get("name")))
        return names

    def with_tools(self, request: dict[str, Any]) -> dict[str, Any]:
        return _with_tools(request, [s.openai() for s in READ_TOOLS], "messages")

    def last_round(self, request: dict[str, Any]) -> dict[str, Any]:
        return {**request, "tool_choice": "none"}

    def follow_up(
        self, request: dict[str, Any], turn: Any, answer_id: str | None, results: list[Result]
    ) -> dict[str, Any]:
        messages = list(request.get("messages") or [])
        messages.append(turn)
        messages += [
            {"role": "tool", "tool_call_id": result.call.id, "content": result.text}
            for result in results
        ]
        return {**request, "messages": messages}

    def split(self, answer: dict[str, Any]) -> tuple[list[Call], int, Any, str | None]:
        choices = answer.get("choices")
        if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
            return [], 0, None, None
        message = choices[0].get("message")
        if not isinstance(message, dict):
            return [], 0, None, None
        calls = message.get("tool_calls")
        calls = calls if isinstance(calls, list) else []
        ours = []
        theirs = 0
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and function.get("name") in NAMES:
                ours.append(
                    Call(str(call.get("id", "")), function["name"], function.get("arguments"))
                )
            else:
                theirs += 1
        return ours, theirs, message, None

    def visible(self, turn: Any) -> list[Any]:
        content = turn.get("content") if isinstance(turn, dict) else None
        return [content] if isinstance(content, str) and content else []

    def merged(self, answer: dict[str, Any], earlier: list[Any]) -> dict[str, Any]:
        choices = answer.get("choices")
        choice = choices[0] if isinstance(choices, list) and len(choices) == 1 else None
        if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
            return answer  # not an answer this can merge into: the upstream's, as it came
        message = dict(choice["message"])
        calls = [
            call
            for call in message.get("tool_calls") or []
            if not (
                isinstance(call, dict)
                and isinstance(call.get("function"), dict)
                and call["function"].get("name") in NAMES
            )
        ]
        finish = choice.get("finish_reason")
        if message.get("tool_calls"):
            if calls:
                message["tool_calls"] = calls
            else:
                message.pop("tool_calls")
                finish = "stop" if finish == "tool_calls" else finish
        if earlier:
            own = message.get("content")
            message["content"] = "".join([*earlier, own if isinstance(own, str) else ""])
        return {**answer, "choices": [{**choice, "message": message, "finish_reason": finish}]}

    def splice(self) -> Splice:
        return _ChatSplice()


# -- OpenAI Responses ------------------------------------------------------------------------------


class _ResponsesSplice:
    def __init__(self) -> None:
        self._round = 0
        self._sequence = 0  # the next sequence number the client sees
        self._sent = 0  # output items the client has received, every round so far
        self._items: list[Any] = []  # the client's output items, every round so far
        self._map: dict[int, int | None] = {}
        self._ours: dict[int, Call] = {}
        self._theirs = 0
        self._output: list[Any] = []
        self._id: str | None = None
        self._held: list[Event] = []
        self._final = False
        self._ended = False  # the round's response.completed arrived

    def feed(self, event: Event) -> list[bytes]:
        try:
            data = orjson.loads(event.data) if event.data else None
        except orjson.JSONDecodeError:
            self._final = True
            return [event.raw]
        if not isinstance(data, dict):
            return [event.raw]
        kind = data.get("type")
        if kind in ("response.created", "response.in_progress", "response.queued"):
            return [self._out(event, data)] if self._round == 0 else []
        if kind == "response.completed":
            self._ended = True
            response = data.get("response")
            if isinstance(response, dict):
                self._output = list(response.get("output") or [])
                answer_id = response.get("id")
                self._id = answer_id if isinstance(answer_id, str) else None
            self._held.append(event)
            return []
        if kind in ("response.failed", "response.incomplete", "error"):
            self._final = True
            return [self._out(event, data)]
        index = data.get("output_index")
        if not isinstance(index, int):
            return [self._out(event, data)]
        if index not in self._map and kind in (
            "response.output_item.added",
            "response.output_item.done",
        ):
            item = data.get("item")
            item = item if isinstance(item, dict) else {}
            if item.get("type") == "function_call" and item.get("name") in NAMES:
                self._map[index] = None
            else:
                self._map[index] = self._sent
                self._sent += 1
                self._theirs += item.get("type") in CLIENT_ITEMS
        target = self._map.get(index, index)
        if kind == "response.output_item.done":
            item = data.get("item")
            if target is None and isinstance(item, dict):
                self._ours[index] = Call(
                    str(item.get("call_id", "")), str(item.get("name")), item.get("arguments")
                )
            elif target is not None:
                self._items.append(item)
        if target is None:
            return []
        return [self._out(event, data, index=target)]

    def _out(
        self,
        event: Event,
        data: dict[str, Any],
        *,
        index: int | None = None,
        rewrite: bool = False,
    ) -> bytes:
        """An event as the client gets it: renumbered when earlier events were held back."""
        changes: dict[str, Any] = {}
        if "sequence_number" in data:
            if data["sequence_number"] != self._sequence:
                changes["sequence_number"] = self._sequence
            self._sequence += 1
        if index is not None and index != data.get("output_index"):
            changes["output_index"] = index
        if not changes and not rewrite:
            return event.raw
        return sse(event.name, {**data, **changes})

    def calls(self) -> list[Call] | None:
        if self._final or not self._ended or not self._ours or self._theirs:
            return None
        return [self._ours[i] for i in sorted(self._ours)]

    def turn(self) -> Any:
        return self._output

    def answer_id(self) -> str | None:
        return self._id

    def next_round(self) -> None:
        self._round += 1
        self._map.clear()
        self._ours.clear()
        self._theirs = 0
        self._output = []
        self._held.clear()
        self._ended = False

    def finish(self) -> list[bytes]:
        out = []
        for event in self._held:
            data = orjson.loads(event.data)
            response = data.get("response") if isinstance(data, dict) else None
            if isinstance(response, dict) and (self._round or self._ours):
                # The client's items of every round, in order, without the read-tool calls.
                data = {**data, "response": {**response, "output": list(self._items)}}
                out.append(self._out(event, data, rewrite=True))
            else:
                out.append(self._out(event, data))
        return out


class _Responses:
    def defined(self, request: Mapping[str, Any]) -> set[str]:
        return {
            str(t.get("name"))
            for t in _tools(request)
            if isinstance(t, dict) and t.get("type") == "function"
        }

    def with_tools(self, request: dict[str, Any]) -> dict[str, Any]:
        return _with_tools(request, [s.openai_responses() for s in READ_TOOLS], "input")

    def last_round(self, request: dict[str, Any]) -> dict[str, Any]:
        return {**request, "tool_choice": "none"}

    def follow_up(
        self, request: dict[str, Any], turn: Any, answer_id: str | None, results: list[Result]
    ) -> dict[str, Any]:
        outputs = [
            {"type": "function_call_output", "call_id": result.call.id, "output": result.text}
            for result in results
        ]
        if request.get("previous_response_id") and answer_id:
            return {**request, "previous_response_id": answer_id, "input": outputs}
        if request.get("conversation"):
            # The provider's conversation holds the history and now this answer: only the
            # results go on (the history again would be added to it twice).
            return {**request, "input": outputs}
        given = request.get("input")
        history = (
            [{"role": "user", "content": given}] if isinstance(given, str) else list(given or [])
        )
        return {**request, "input": [*history, *(turn or []), *outputs]}

    def split(self, answer: dict[str, Any]) -> tuple[list[Call], int, Any, str | None]:
        output = answer.get("output")
        output = output if isinstance(output, list) else []
        ours = [
            Call(str(item.get("call_id", "")), item["name"], item.get("arguments"))
            for item in output
            if _responses_ours(item)
        ]
        theirs = sum(
            1
            for item in output
            if isinstance(item, dict)
            and item.get("type") in CLIENT_ITEMS
            and not _responses_ours(item)
        )
        answer_id = answer.get("id")
        return ours, theirs, output, answer_id if isinstance(answer_id, str) else None

    def visible(self, turn: Any) -> list[Any]:
        return [item for item in turn or [] if not _responses_ours(item)]

    def merged(self, answer: dict[str, Any], earlier: list[Any]) -> dict[str, Any]:
        output = answer.get("output")
        output = output if isinstance(output, list) else []
        return {**answer, "output": [*earlier, *(i for i in output if not _responses_ours(i))]}

    def splice(self) -> Splice:
        return _ResponsesSplice()


def _responses_ours(item: Any) -> bool:
    return (
        isinstance(item, dict) and item.get("type") == "function_call" and item.get("name") in NAMES
    )


APIS: dict[str, Api] = {
    "anthropic": _Anthropic(),
    "openai-chat": _Chat(),
    "openai-responses": _Responses(),
}
"""Mode (b) by the provider's format name (:attr:`Provider.name`)."""


def engages(api: Api, request: Mapping[str, Any], body: bytes) -> bool:
    """Whether mode (b) runs for this request: it holds a reference, asks one answer, and the
    client defines no tool of a read tool's name (then the client runs the reads itself)."""
    if REFERENCE not in body:
        return False
    n = request.get("n")
    if isinstance(n, int) and n > 1:
        return False
    return not (api.defined(request) & NAMES)
