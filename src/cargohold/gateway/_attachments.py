"""Attachments in a request: images and documents carried as base64, by the hold's disposition.

The parts the gateway finds, in the three APIs it speaks:

- Anthropic Messages: ``image`` and ``document`` blocks whose ``source.type`` is ``base64``, in
  a message's content and in a ``tool_result`` block's content;
- Chat Completions: ``image_url`` parts whose URL is a ``data:`` URL, ``file`` parts with
  ``file_data`` and ``input_audio`` parts (base64 ``data`` of a ``format``), in a message's
  content;
- Responses: ``input_image`` parts whose ``image_url`` is a ``data:`` URL and ``input_file``
  parts with ``file_data``, in a message's content and in a tool output's list
  (``function_call_output`` / ``custom_tool_call_output``).

A URL the provider fetches, a provider file id and anything else are pointers, not payloads:
never found. What is done with a part found is the Rewriter's (:mod:`._rewrite`); here are the
formats only: where the parts sit, their bytes, and the text part that takes one's place (one
part for one, so every other index of the message stays where it was).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cargohold._errors import UsageError
from cargohold._records import normalize_media_type

ANTHROPIC = "anthropic"
CHAT = "openai-chat"
RESPONSES = "openai-responses"

_ANTHROPIC_BLOCKS = frozenset({"image", "document"})
_RESPONSES_MESSAGE_TYPES = (None, "message")
_RESPONSES_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
_CARRIED = ("cache_control",)
"""Fields of an Anthropic block the text block in its place keeps (a cache breakpoint set on
the attachment stays a breakpoint at the same place)."""

Place = tuple[int, int | None]
"""(part index in the message's content or the item's list, index inside a tool result's
content or ``None``)."""


@dataclass(frozen=True, slots=True)
class Found:
    """One attachment a request carries inline.

    Attributes:
        place: Where it sits in its message (:data:`Place`).
        encoded: The string the request carries (the base64, or the whole ``data:`` URL):
            what the edge guard measures. Never shown in the ``repr``.
        media_type: The media type the part names, when it names one.
        result: Whether it sits inside a tool result.
        tool: The tool whose result holds it, when the request names the call.
    """

    place: Place
    encoded: str = field(repr=False)
    media_type: str | None
    result: bool
    tool: str | None

    def decoded(self) -> tuple[bytes, str] | None:
        """Its exact bytes and media type (``application/octet-stream`` when the part names
        none or an odd one), or ``None`` when what it carries is not base64."""
        media = self.media_type
        body = self.encoded
        if body.startswith("data:"):
            header, comma, body = body.partition(",")
            if not comma or not header.lower().endswith(";base64"):
                return None
            media = media or header[5:].split(";", 1)[0]
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            return None
        return raw, _media(media)


def _media(value: str | None) -> str:
    if not value:
        return "application/octet-stream"
    try:
        return normalize_media_type(value)
    except UsageError:  # a client's odd label is not worth failing a request over
        return "application/octet-stream"


def find_attachments(fmt: str, message: Any, calls: Mapping[str, str]) -> list[Found]:
    """The attachments ``message`` carries inline, in order.

    Args:
        fmt: The request format (``anthropic``, ``openai-chat``, ``openai-responses``).
        message: One message (or Responses input item); only plain dicts hold any.
        calls: Call id -> tool name, of the calls made before this message (the tool whose
            result holds an attachment).
    """
    if not isinstance(message, Mapping):
        return []
    if fmt == ANTHROPIC:
        return _anthropic(message, calls)
    if fmt == CHAT:
        content = message.get("content")
        tool = (
            calls.get(_id(message.get("tool_call_id"))) if message.get("role") == "tool" else None
        )
        return _parts(content, _chat_part, tool=tool, result=message.get("role") == "tool")
    if fmt == RESPONSES:
        kind = message.get("type")
        if kind in _RESPONSES_OUTPUTS:
            tool = calls.get(_id(message.get("call_id")))
            return _parts(message.get("output"), _responses_part, tool=tool, result=True)
        if kind in _RESPONSES_MESSAGE_TYPES:
            return _parts(message.get("content"), _responses_part, tool=None, result=False)
    return []


def _id(value: object) -> str:
    return value if isinstance(value, str) else ""


def _anthropic(message: Mapping[str, Any], calls: Mapping[str, str]) -> list[Found]:
    blocks = message.get("content")
    if not isinstance(blocks, list):
        return []
    found: list[Found] = []
    for index, block in enumerate(blocks):
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "tool_result":
            tool = calls.get(_id(block.get("tool_use_id")))
            inner = block.get("content")
            if isinstance(inner, list):
                for position, part in enumerate(inner):
                    payload = _anthropic_part(part)
                    if payload is not None:
                        found.append(Found((index, position), *payload, True, tool))
            continue
        payload = _anthropic_part(block)
        if payload is not None:
            found.append(Found((index, None), *payload, False, None))
    return found


def _anthropic_part(block: object) -> tuple[str, str | None] | None:
    if not isinstance(block, Mapping) or block.get("type") not in _ANTHROPIC_BLOCKS:
        return None
    source = block.get("source")
    if not isinstance(source, Mapping) or source.get("type") != "base64":
        return None
    data, media = source.get("data"), source.get("media_type")
    if not isinstance(data, str):
        return None
    return data, media if isinstance(media, str) else None


def _chat_part(part: Mapping[str, Any]) -> str | None:
    kind = part.get("type")
    if kind == "input_audio":
        audio = part.get("input_audio")
        data = audio.get("data") if isinstance(audio, Mapping) else None
        return data if isinstance(data, str) else None
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else image
        return url if isinstance(url, str) and url.startswith("data:") else None
    if kind == "file":
        file = part.get("file")
        data = file.get("file_data") if isinstance(file, Mapping) else None
        return data if isinstance(data, str) else None
    return None


def _responses_part(part: Mapping[str, Any]) -> str | None:
    kind = part.get("type")
    if kind == "input_image":
        url = part.get("image_url")
        return url if isinstance(url, str) and url.startswith("data:") else None
    if kind == "input_file":
        data = part.get("file_data")
        return data if isinstance(data, str) else None
    return None


def _parts(content: object, payload_of: Any, *, tool: str | None, result: bool) -> list[Found]:
    if not isinstance(content, list):
        return []
    found: list[Found] = []
    for index, part in enumerate(content):
        if not isinstance(part, Mapping):
            continue
        encoded = payload_of(part)
        if encoded is not None:
            found.append(Found((index, None), encoded, _audio_type(part), result, tool))
    return found


_AUDIO_FORMATS = {"wav": "audio/wav", "mp3": "audio/mpeg"}
"""Chat Completions' ``input_audio`` formats, as media types (its bytes carry no other)."""


def _audio_type(part: Mapping[str, Any]) -> str | None:
    audio = part.get("input_audio") if part.get("type") == "input_audio" else None
    kind = audio.get("format") if isinstance(audio, Mapping) else None
    return _AUDIO_FORMATS.get(kind) if isinstance(kind, str) else None


def replace_attachments(fmt: str, message: Any, texts: Mapping[Place, str]) -> Any:
    """A new message: ``message`` with the attachment at each place replaced by a text part
    holding its text (never mutated; one part for one)."""
    key = "output" if fmt == RESPONSES and message.get("type") in _RESPONSES_OUTPUTS else "content"
    parts = list(message[key])
    inner: dict[int, list[Any]] = {}
    for (index, position), text in texts.items():
        if position is None:
            parts[index] = _text_part(fmt, parts[index], text)
        else:
            blocks = inner.setdefault(index, list(parts[index]["content"]))
            blocks[position] = _text_part(fmt, blocks[position], text)
    for index, blocks in inner.items():
        parts[index] = {**parts[index], "content": blocks}
    return {**message, key: parts}


def _text_part(fmt: str, part: Mapping[str, Any], text: str) -> dict[str, Any]:
    if fmt == RESPONSES:
        return {"type": "input_text", "text": text}
    new: dict[str, Any] = {"type": "text", "text": text}
    if fmt == ANTHROPIC:
        new.update((name, part[name]) for name in _CARRIED if name in part)
    return new
