"""A scripted fake provider, and servers that misbehave, for the gateway's tests.

The fake speaks just enough of the Anthropic Messages, Chat Completions and Responses APIs for
the official SDKs: it records every request it receives (method, path, headers, exact body)
and answers with a tool call, as JSON or as a server-sent event stream when the request asks
for one. Everything runs on loopback in threads of the test process; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

MODELS_BODY = b'{"object":"list","data":[{"id":"fake-1","object":"model","created":0}],"x":1.50}'
START_TIMEOUT = 10.0


@dataclass(frozen=True)
class Received:
    """One request as the fake provider received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class FakeProvider:
    """The scripted upstream. ``fail_with`` set to a status answers every request with that
    status and a provider-shaped error body."""

    received: list[Received] = field(default_factory=list)
    fail_with: int | None = None
    stream_chunks: int = 1  # extra filler events in a stream (a long stream: many)
    # The content of an Anthropic answer, from the request (a scripted agent's next step);
    # by default one tool_use block.
    anthropic_reply: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None
    # The output items of a Responses answer, likewise; by default one function_call.
    responses_reply: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None
    # The message of a Chat Completions answer (``content`` and ``tool_calls``), likewise; by
    # default one tool call.
    chat_reply: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self._handle, methods=["GET", "POST"])])

    async def _handle(self, request: Request) -> Response:
        body = await request.body()
        with self._lock:
            self.received.append(
                Received(request.method, request.url.path, dict(request.headers), body)
            )
        path = request.url.path
        if self.fail_with is not None:
            error = {"type": "error", "error": {"type": "api_error", "message": "scripted"}}
            if not path.endswith("/messages"):
                error = {"error": {"message": "scripted", "type": "server_error", "code": None}}
            return Response(
                json.dumps(error), status_code=self.fail_with, media_type="application/json"
            )
        if request.method == "GET" and path == "/v1/models":
            return Response(MODELS_BODY, media_type="application/json", headers={"x-fake": "1"})
        payload = json.loads(body) if body else {}
        stream = bool(payload.get("stream"))
        if path.endswith("/messages/count_tokens"):
            return _json({"input_tokens": len(body) // 4})
        if path.endswith("/messages"):
            content = None if self.anthropic_reply is None else self.anthropic_reply(payload)
            if stream:
                return self._sse(_anthropic_events(content))
            return _json(_anthropic_message(content))
        if path.endswith("/chat/completions"):
            message = None if self.chat_reply is None else self.chat_reply(payload)
            return self._sse(_chat_events(message)) if stream else _json(_chat_completion(message))
        if path.endswith("/responses"):
            output = None if self.responses_reply is None else self.responses_reply(payload)
            if stream:
                return self._sse(_responses_events(output))
            return _json(_response("completed", output))
        return Response(b"not found", status_code=404)

    def _sse(self, events: list[tuple[str | None, Any]]) -> StreamingResponse:
        chunks = self.stream_chunks

        async def produce() -> AsyncIterator[bytes]:
            for _ in range(chunks - 1):
                yield b": filler comment, ignored by SSE parsers\n\n"
            for name, data in events:
                line = f"event: {name}\n" if name else ""
                text = data if isinstance(data, str) else json.dumps(data)
                yield f"{line}data: {text}\n\n".encode()

        return StreamingResponse(produce(), media_type="text/event-stream")


def _json(value: Any) -> Response:
    return Response(json.dumps(value), media_type="application/json")


CALL_INPUT = {"cmd": "cat big.log"}
# Each answer its own message id, as the API's: Claude Code merges the blocks of answers that
# share one (a streamed message arrives in parts) into one assistant message.
_MESSAGE_IDS = itertools.count(1)


def _anthropic_message(content: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    if content is None:
        content = [{"type": "tool_use", "id": "toolu_1", "name": "run", "input": CALL_INPUT}]
    calls = any(block["type"] == "tool_use" for block in content)
    return {
        "id": f"msg_{next(_MESSAGE_IDS)}",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def _anthropic_events(
    content: list[dict[str, Any]] | None = None,
) -> list[tuple[str | None, Any]]:
    message = _anthropic_message(content)
    start = {**message, "content": [], "stop_reason": None}
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for index, block in enumerate(message["content"]):
        extra: list[dict[str, Any]] = []
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        elif block["type"] == "thinking":  # as extended thinking streams: text, then signature
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            delta = {"type": "thinking_delta", "thinking": block["thinking"]}
            extra = [{"type": "signature_delta", "signature": block["signature"]}]
        else:
            opening = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events += [
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            ),
            *(
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
                for d in (delta, *extra)
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    return [
        *events,
        (
            "message_delta",
            {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 5}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def _call() -> dict[str, Any]:
    return {
        "id": "call_1",
        "type": "function",
        "function": {"name": "run", "arguments": json.dumps(CALL_INPUT)},
    }


def _chat_completion(message: dict[str, Any] | None = None) -> dict[str, Any]:
    if message is None:
        message = {"role": "assistant", "content": None, "tool_calls": [_call()]}
    calls = bool(message.get("tool_calls"))
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-fake",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
    }


def _chat_events(message: dict[str, Any] | None = None) -> list[tuple[str | None, Any]]:
    base = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "gpt-fake",
    }
    if message is None:
        message = {"role": "assistant", "content": None, "tool_calls": [_call()]}
    deltas: list[dict[str, Any]] = [{"role": "assistant"}]
    if message.get("content"):
        deltas.append({"content": message["content"]})
    for index, call in enumerate(message.get("tool_calls") or []):
        # As OpenAI streams a call: its id and name first, its arguments after.
        opening = {**call, "function": {"name": call["function"]["name"], "arguments": ""}}
        deltas.append({"tool_calls": [{"index": index, **opening}]})
        arguments = {"function": {"arguments": call["function"]["arguments"]}}
        deltas.append({"tool_calls": [{"index": index, **arguments}]})
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return [
        *(
            (None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
            for delta in deltas
        ),
        (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
        (None, "[DONE]"),
    ]


def _response(status: str, items: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    output = items or [
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "run",
            "arguments": json.dumps(CALL_INPUT),
            "status": "completed",
        }
    ]
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "gpt-fake",
        "status": status,
        "output": output if status == "completed" else [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


def _responses_events(
    items: list[dict[str, Any]] | None = None,
) -> list[tuple[str | None, Any]]:
    done = _response("completed", items)
    events: list[tuple[str | None, Any]] = [
        (
            "response.created",
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": _response("in_progress"),
            },
        )
    ]
    for index, item in enumerate(done["output"]):
        events.append(
            (
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "sequence_number": len(events),
                    "output_index": index,
                    "item": {**item, "arguments": ""} if "arguments" in item else item,
                },
            )
        )
        events.append(
            (
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "sequence_number": len(events),
                    "output_index": index,
                    "item": item,
                },
            )
        )
    completed = {
        "type": "response.completed",
        "sequence_number": len(events),
        "response": done,
    }
    return [*events, ("response.completed", completed)]


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run an ASGI app with uvicorn on a free loopback port; yields its base URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as cargohold gateway's
    port = listener.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="critical", lifespan="on", ws="none", access_log=False)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    started = threading.Event()
    for _ in range(int(START_TIMEOUT / 0.01)):
        if server.started:
            started.set()
            break
        thread.join(0.01)
    assert started.is_set(), "server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(START_TIMEOUT)
        listener.close()


@contextmanager
def raw_server(reply: bytes | None) -> Iterator[str]:
    """A TCP server on loopback that reads a request and answers ``reply`` (garbage), or
    never answers (``None``: a hanging upstream) until the test ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(START_TIMEOUT)
    port = listener.getsockname()[1]
    done = threading.Event()
    held: list[socket.socket] = []

    def run() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.settimeout(START_TIMEOUT)
            try:
                conn.recv(65536)
                if reply is not None:
                    conn.sendall(reply)
                    conn.close()
                else:
                    held.append(conn)
            except OSError:
                conn.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        done.set()
        with contextlib.suppress(OSError):  # wakes the accept that is waiting
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        for conn in held:
            conn.close()
        thread.join(START_TIMEOUT)


def free_port_url() -> str:
    """The URL of a loopback port nothing listens on (an upstream that is down)."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return f"http://127.0.0.1:{port}"
