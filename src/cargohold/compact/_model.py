"""What the compaction engine sees of a conversation, whatever its format: slots.

A slot is one tool result, or one tool call's input, at a position (message index, part
index) of the message list. Each format (:mod:`._chat`, :mod:`._anthropic`,
:mod:`._responses`, :mod:`._langchain`) finds its slots, rebuilds a message with some of them
replaced, and counts a message's tokens the way the edge guard estimates them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cargohold.guard import RequestFormat, count_request_tokens, estimate_request_tokens

RESULT = "result"
INPUT = "input"

Position = tuple[int, int]
"""(message index, part index): where a slot sits; positions compare in conversation order."""


@dataclass(frozen=True, slots=True)
class Slot:
    """One tool result or tool input of a conversation.

    Attributes:
        message: The message's index in the list.
        part: The part's index in the message (the block, the call; 0 for a whole message).
        kind: ``result`` or ``input``.
        call_id: The tool call's id, when the format names one.
        tool: The tool's name, when known (from the call the result answers).
        body: The text stored when the slot is cleared: a string content as it is, any other
            content as compact JSON. Never shown in the ``repr``.
        media_type: ``application/json`` for a JSON body; ``None`` for text (its media type
            is sniffed from its bytes, as an offload's is).
    """

    message: int
    part: int
    kind: str
    call_id: str | None
    tool: str | None
    body: str = field(repr=False)
    media_type: str | None

    @property
    def position(self) -> Position:
        """Where the slot sits."""
        return (self.message, self.part)


def body_of(value: object) -> tuple[str, str | None] | None:
    """The text a content value is stored as, and its media type; ``None`` when it has none
    (an SDK object, a value JSON cannot hold): such a slot is never cleared.

    A string is itself; a list of exactly one plain text part (``{"type": "text", "text"}``,
    or ``input_text`` / ``output_text``) is that text; anything else is its compact JSON (key
    order kept), which reads back byte for byte as what the conversation held.
    """
    if isinstance(value, str):
        return value, None
    if (
        isinstance(value, list)
        and len(value) == 1
        and isinstance(value[0], dict)
        and len(value[0]) == 2
        and value[0].get("type") in ("text", "input_text", "output_text")
        and isinstance(value[0].get("text"), str)
    ):
        text: str = value[0]["text"]
        return text, None
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")), "application/json"
    except (TypeError, ValueError, RecursionError):
        return None


def cleared_input(stub: str) -> dict[str, str]:
    """What a cleared tool call's input becomes: an object holding its stub (every provider
    requires an object there, or a JSON text of one)."""
    return {"cargohold": stub}


def cleared_arguments(stub: str) -> str:
    """A cleared input as a JSON text (Chat Completions and Responses ``arguments``)."""
    return json.dumps(cleared_input(stub), ensure_ascii=False, separators=(",", ":"))


Counter = Callable[[str], int | None]
"""Counts one text with the real tokenizer (``None``: none is installed)."""


def count(fmt: RequestFormat, request: Any, counter: Counter | None = None) -> int:
    """The tokens of ``request``: the real tokenizer's count through ``counter`` when given
    and a tokenizer is installed, else the edge guard's estimate (leaks are not judged here:
    compaction runs before the guard, which judges them on the request that is sent)."""
    if counter is not None:
        counted = count_request_tokens(request, format=fmt, count=counter)
        if counted is not None:
            return counted
    return estimate_request_tokens(request, format=fmt)


class Format(Protocol):
    """One request format, as the compaction engine uses it."""

    name: RequestFormat
    key: str
    """The request field that holds the conversation (``messages``, ``input``)."""

    def messages(self, request: Any) -> Sequence[Any] | None:
        """The request's message list, or ``None`` when it has none to compact."""
        ...

    def rebuild(self, request: Any, messages: list[Any]) -> Any:
        """A new request: ``request`` with its message list replaced (never mutated)."""
        ...

    def slots(self, index: int, message: Any, calls: dict[str, str]) -> list[Slot]:
        """The slots of one message, in order; the calls it makes are added to ``calls``
        (call id -> tool name) for the results that follow."""
        ...

    def replace(self, message: Any, stubs: Mapping[tuple[str, int], str]) -> Any:
        """A new message: ``message`` with the slots ``(kind, part)`` replaced by their stubs."""
        ...

    def tokens(self, message: Any, counter: Counter | None = None) -> int:
        """The tokens of one message (:func:`count`)."""
        ...

    def fixed_tokens(self, request: Any, counter: Counter | None = None) -> int:
        """The tokens of everything but the messages (system, tools, settings)."""
        ...

    def from_model(self, message: Any) -> bool:
        """Whether the message is the model's (an assistant turn, a call it made)."""
        ...


def field_of(value: object, name: str) -> Any:
    """``value[name]`` of a mapping, else the attribute ``name`` of an SDK object (a response's
    message or block passed back as it came: ``ChatCompletionMessage``, ``ToolUseBlock``), else
    ``None``. Such objects name their calls for the results that follow; they are never
    rewritten (only plain dicts are)."""
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


def name_of(value: object) -> str | None:
    """A tool name or call id when it is a non-empty string."""
    return value if isinstance(value, str) and value else None
