"""Tool outputs in OpenAI Responses input items, with what is heavy kept out of context.

Framework-free (no SDK is imported here): the OpenAI Agents SDK adapter uses it at two places.

- At a tool's own seam (``producer=True``): every text result is one offload decision, and images
  and files carried inline (data URLs, base64) follow the attachment disposition, whatever their
  size (``ref`` by default: stored, a stub in their place; ``inline``: kept while under the heavy
  threshold; ``tool:<name>``: stored and routed; ``provider_native`` needs a provider client,
  which a tool result has not, and is carried out as ``ref``).
- As the net over a request about to be sent (``producer=False``, :func:`offload_items`): only
  what is heavy is acted on (a tool result whose raw strings add up to its tool's threshold, as
  the edge guard sums them), and nothing else is decided or reported. Genuine stubs and recovered
  segments are never offloaded again.

Which items the net covers: ``*_output`` items (function, custom, shell, apply-patch... tool
results), ``mcp_call`` results, ``code_interpreter_call`` logs, ``file_search_call`` result texts
and ``image_generation_call`` images. Left to the edge guard: ``computer_call_output`` (a
screenshot the model must see; a stub in its place would break the computer-use loop), messages,
and tool-call arguments (what the model wrote itself).

A tool result is attributed to the tool the request names for it (the ``name`` of the call whose
``call_id`` it answers), the same rule the edge guard follows, so the two judge it at the same
per-tool threshold.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from cargohold._errors import StoreError
from cargohold._events import OffloadOutcome
from cargohold._offload import with_note
from cargohold._secrets import find_secrets
from cargohold._segment import OPEN as SEGMENT_OPEN
from cargohold._segment import parse_segment
from cargohold._stub import MARKER, parse_stub
from cargohold._text import looks_textual, utf8_len
from cargohold.guard import REF, Attachment, Disposition, DispositionKind, dispose

if TYPE_CHECKING:
    from cargohold._hold import Hold

_PAYLOAD_FIELDS: Final = {"input_image": "image_url", "input_file": "file_data"}
"""The field of a content part that may carry its bytes inline."""

_PART_TYPES: Final = frozenset({"input_text", *_PAYLOAD_FIELDS})

_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")
"""A tool name cargohold repeats in a stub or an event (the model wrote it; anything else is
not named)."""

_UNSET: Final = object()


class ToolOutputs:
    """What one hold's tools put into a conversation, with what is heavy offloaded.

    Args:
        hold: The hold of the agent the output belongs to (scope, thresholds, reporter).
        producer: ``True`` at the tool's own seam, ``False`` for the net over a request (see
            the module).
    """

    __slots__ = ("_hold", "_key", "_producer")

    def __init__(self, hold: Hold, *, producer: bool) -> None:
        self._hold = hold
        self._producer = producer
        self._key: object = _UNSET

    def __repr__(self) -> str:
        return f"ToolOutputs(producer={self._producer})"

    def threshold(self, tool: str | None) -> int:
        """The heavy threshold of ``tool``'s results (the offloader's, which the guard shares)."""
        return self._hold.offloader.threshold_for(tool)

    def genuine(self, text: str) -> bool:
        """Whether ``text`` is a stub or recovered segment made under this store's key."""
        if not (text.startswith(MARKER) or text.startswith(SEGMENT_OPEN)):
            return False
        if self._key is _UNSET:
            try:
                self._key = self._hold.store.marker_key()
            except StoreError:  # no key, no trust: the text is judged as content
                self._key = None
        key = self._key
        if not isinstance(key, bytes):
            return False
        return parse_stub(text, key=key) is not None or parse_segment(text, key=key) is not None

    def raw_size(self, value: object) -> int:
        """Bytes of the strings in ``value`` that are not genuine stubs or segments: what the edge
        guard adds up for one tool result."""
        if isinstance(value, str):
            return 0 if self.genuine(value) else utf8_len(value)
        if isinstance(value, Mapping):
            return sum(self.raw_size(item) for item in value.values())
        if isinstance(value, list | tuple):
            return sum(self.raw_size(item) for item in value)
        return 0

    async def text(self, text: str, tool: str | None) -> str:
        """What enters the conversation for ``text``: itself, its redacted copy (credentials
        replaced by markers, under the default secrets policy), or its stub (or the bounded
        notice of a refusal or a store failure, never the raw text)."""
        if not self._producer:
            if self.genuine(text):
                return text
            # The net decides on a light text only when it holds a credential: the secrets
            # policy is the same for every size (one scan, about 2 ms per MiB).
            if utf8_len(text) < self.threshold(tool) and not _holds_credential(text):
                return text
        decided = await self._hold.aoffload(text, tool=tool)
        return str(decided.value_for(text))

    async def data(self, value: object, tool: str | None) -> str:
        """What enters the conversation for a value that is not text: its stub, or, below the
        threshold, its compact JSON (the bytes measured; never Python's ``repr``)."""
        decided = await self._hold.aoffload(value, tool=tool)
        content = decided.content
        if isinstance(content, bytes):  # small binary: text if it is text, else described
            text = content.decode("utf-8") if looks_textual(content) else decided.text
        else:
            text = content
        return with_note(text, decided.note)  # what was redacted: the JSON's final line

    async def payload(
        self, encoded: str, tool: str | None, *, media_type: str | None, force: bool = False
    ) -> str | None:
        """The text to put in place of bytes carried inline (a data URL or bare base64), or
        ``None`` to leave them.

        Args:
            encoded: The payload as the request carries it.
            tool: The producing tool.
            media_type: Its media type when the carrier says it and the payload does not.
            force: The net only: store it even below the threshold (it belongs to a heavy
                tool result whose parts add up).
        """
        heavy = utf8_len(encoded) >= self.threshold(tool)
        if not (self._producer or heavy or force):
            return None
        decoded = _decode(encoded)
        if decoded is None:  # not base64 after all: what the request carries is text
            replaced = await self.text(encoded, tool)
            return None if replaced is encoded else replaced
        raw, carried = decoded
        media = carried or media_type or "application/octet-stream"
        disposition = self._disposition(tool)
        if disposition.kind is DispositionKind.INLINE and not heavy:
            if not self._producer:
                return None if not force else await self._store(raw, media, tool, REF)
            decided = await self._hold.aoffload(raw, tool=tool, media_type=media)
            unchanged = decided.outcome is OffloadOutcome.INLINE and not decided.redacted
            # Redacted bytes: described (with the note of what was redacted), never sent.
            return None if unchanged else decided.model_text
        if disposition.kind is not DispositionKind.TOOL:
            disposition = REF  # inline over the threshold, and provider_native: by ref
        return await self._store(raw, media, tool, disposition)

    async def _store(
        self, raw: bytes, media: str, tool: str | None, disposition: Disposition
    ) -> str:
        """Store ``raw`` by ``disposition`` (``ref`` or ``tool:<name>``) whatever its size; the
        stub (or routing notice) that stands for it."""
        attachment = Attachment(raw, media_type=media, hint=disposition, tool=tool)
        call = functools.partial(
            dispose, attachment, format="openai-responses", offloader=self._hold.offloader
        )
        disposed = await self._hold.arun(call)  # stores bytes and renders a stub: off the loop
        return str(disposed.part.get("text", ""))

    def _disposition(self, tool: str | None) -> Disposition:
        settings = self._hold.settings
        chosen = settings.tool_dispositions.get(tool) if tool is not None else None
        return Disposition.parse(chosen or settings.attachment_disposition)

    async def parts(self, parts: Sequence[Any], tool: str | None) -> list[Any] | None:
        """A tool result given as content parts (``input_text``, ``input_image``,
        ``input_file``), with what is heavy replaced by ``input_text`` stubs; ``None`` when
        nothing changed.

        Inline images and files are stored by their disposition (the producer) or, in the net,
        all of them once the result adds up to the threshold. The text parts are one decision:
        one part's text exactly, several joined by newlines, replaced by one stub part.
        """
        light = not self._producer and self.raw_size(parts) < self.threshold(tool)
        if light and not any(
            _holds_credential(str(part["text"])) for part in parts if _is_text_part(part)
        ):
            return None
        result = list(parts)
        stored: set[int] = set()
        for index, part in enumerate(parts):
            payload = _payload_of(part)
            if payload is None or light:  # light: only its credentials are acted on
                continue
            stub = await self.payload(payload, tool, media_type=None, force=not self._producer)
            if stub is not None:
                result[index] = {"type": "input_text", "text": stub}
                stored.add(index)
        changed = bool(stored)
        texts = [
            index
            for index, part in enumerate(result)
            if index not in stored and _is_text_part(part) and not self.genuine(part["text"])
        ]
        if texts:
            pieces = [str(result[index]["text"]) for index in texts]
            joined = pieces[0] if len(pieces) == 1 else "\n".join(pieces)
            if (
                self._producer
                or self.raw_size(result) >= self.threshold(tool)
                or _holds_credential(joined)
            ):
                replaced = await self.text(joined, tool)
                if replaced is not joined:
                    result[texts[0]] = {"type": "input_text", "text": replaced}
                    for index in reversed(texts[1:]):
                        del result[index]
                    changed = True
        return result if changed else None


def _holds_credential(text: str) -> bool:
    return bool(find_secrets(text.encode("utf-8", "surrogatepass")))


async def offload_items(
    hold: Hold, items: Sequence[Any], *, skip_tools: Collection[str] = ()
) -> list[Any]:
    """``items`` (a Responses ``input`` list) with every heavy tool output offloaded.

    The net: only what is heavy is acted on. An item that is not changed is returned as the
    same object (the SDK tracks items by identity); a changed one is a shallow copy.

    Args:
        hold: The hold of the agent about to be called.
        items: The request's input items.
        skip_tools: Function tools whose results are left to the edge guard: the agent's own
            function tools, which must be wrapped at their seam; a raw heavy result of one is a
            wiring mistake the guard reports loudly instead of the net hiding it (a light one
            that holds a credential is redacted all the same).
    """
    outputs = ToolOutputs(hold, producer=False)
    calls = _call_names(items)
    return [await _item(outputs, item, calls, skip_tools) for item in items]


async def _item(
    outputs: ToolOutputs, item: Any, calls: Mapping[str, str], skip_tools: Collection[str]
) -> Any:
    if not isinstance(item, Mapping):
        return item
    kind = item.get("type")
    if not isinstance(kind, str) or kind == "computer_call_output":
        return item
    if kind.endswith("_output"):
        call_id = item.get("call_id")
        tool = calls.get(call_id) if isinstance(call_id, str) else None
        output = item.get("output")
        if kind == "function_call_output" and tool is not None and tool in skip_tools:
            # The agent's own tool, unwrapped: a heavy result is the guard's to report; a light
            # one that holds a credential is redacted here (hiding it is the point).
            light = isinstance(output, str) and utf8_len(output) < outputs.threshold(tool)
            if not (light and _holds_credential(str(output))):
                return item
        replaced = await _output(outputs, output, tool, kind)
        return item if replaced is output else {**item, "output": replaced}
    if kind == "mcp_call":
        output = item.get("output")
        if not isinstance(output, str):
            return item
        replaced_text = await outputs.text(output, _safe_name(item.get("name")))
        return item if replaced_text is output else {**item, "output": replaced_text}
    if kind == "code_interpreter_call":
        return await _each(outputs, item, "outputs", "logs")
    if kind == "file_search_call":
        return await _each(outputs, item, "results", "text")
    if kind == "image_generation_call":
        result = item.get("result")
        if not isinstance(result, str):
            return item
        stub = await outputs.payload(result, None, media_type="image/png")
        return item if stub is None else {**item, "result": stub}
    return item


async def _output(outputs: ToolOutputs, output: Any, tool: str | None, kind: str) -> Any:
    """One tool result's ``output``: text, content parts, or another structure."""
    if isinstance(output, str):
        return await outputs.text(output, tool)
    if _are_parts(output):
        replaced = await outputs.parts(output, tool)
        return output if replaced is None else replaced
    if output is None or outputs.raw_size(output) < outputs.threshold(tool):
        return output
    # Another structure (a shell call's per-command streams...): stored whole as JSON, which
    # artifact_query reads; the stub takes the first text field's place.
    stub = await outputs.data(output, tool)
    if kind == "shell_call_output" and isinstance(output, list) and output:
        entries: list[Any] = []
        for index, entry in enumerate(output):
            if not isinstance(entry, Mapping):
                return stub
            entries.append({**entry, "stdout": stub if index == 0 else "", "stderr": ""})
        return entries
    return stub


async def _each(outputs: ToolOutputs, item: Mapping[str, Any], key: str, field: str) -> Any:
    """``item`` with each heavy ``item[key][i][field]`` text offloaded (judged one by one, as
    the guard judges fields of a hosted call)."""
    entries = item.get(key)
    if not isinstance(entries, list):
        return item
    replaced: list[Any] = []
    changed = False
    for entry in entries:
        text = entry.get(field) if isinstance(entry, Mapping) else None
        if isinstance(text, str):
            new = await outputs.text(text, None)
            if new is not text:
                entry = {**entry, field: new}
                changed = True
        replaced.append(entry)
    return {**item, key: replaced} if changed else item


def _call_names(items: Sequence[Any]) -> dict[str, str]:
    """``call_id`` (and ``id``) -> tool name, for every named call in the request."""
    names: dict[str, str] = {}
    for item in items:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        name = _safe_name(item.get("name"))
        if not isinstance(kind, str) or not kind.endswith("_call") or name is None:
            continue
        for key in ("call_id", "id"):
            value = item.get(key)
            if isinstance(value, str):
                names.setdefault(value, name)
    return names


def _safe_name(value: object) -> str | None:
    return value if isinstance(value, str) and _NAME.fullmatch(value) else None


def _are_parts(value: object) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) > 0
        and all(isinstance(part, Mapping) and part.get("type") in _PART_TYPES for part in value)
    )


def _is_text_part(part: object) -> bool:
    return (
        isinstance(part, Mapping)
        and part.get("type") == "input_text"
        and isinstance(part.get("text"), str)
    )


def _payload_of(part: object) -> str | None:
    """The inline bytes of an image or file part (a data URL or base64), else ``None``."""
    if not isinstance(part, Mapping):
        return None
    field = _PAYLOAD_FIELDS.get(str(part.get("type")))
    value = part.get(field) if field is not None else None
    if not isinstance(value, str):
        return None
    if field == "image_url" and not value.startswith("data:"):
        return None  # a URL the provider fetches: nothing inline
    return value


def _decode(encoded: str) -> tuple[bytes, str | None] | None:
    """The bytes and media type of a base64 data URL, or of bare base64; ``None`` if neither."""
    media: str | None = None
    body = encoded
    if encoded.startswith("data:"):
        header, comma, body = encoded.partition(",")
        if not comma or not header.endswith(";base64"):
            return None
        media = header[5:].split(";", 1)[0] or None
    try:
        return base64.b64decode(body, validate=True), media
    except (binascii.Error, ValueError):
        return None


__all__ = ["ToolOutputs", "offload_items"]
