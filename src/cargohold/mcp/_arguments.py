"""References as tool arguments: the round trip by reference, for tools that opt in.

A model cannot re-emit a 300 KB body it never saw; it can pass the reference. For the upstream
tools named in ``ref_arguments``, every string argument (at any depth) that is exactly a
canonical ``artifact://sha256/<hex>`` is replaced by that artifact's exact content for that one
upstream call: the bytes are read through the hold's scope (owner-checked, SHA-256 verified, one
``rehydrate`` event each, content kind ``tool_arguments``) and are kept nowhere afterwards.

Text travels as text; bytes that are not UTF-8 travel as base64. Where the tool's input schema
declares the top-level argument an ``object`` or ``array``, a JSON artifact travels parsed.
A reference that does not resolve stops the call before anything reaches the upstream server:
the model gets an error result naming the argument and the outcome.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cargohold._events import READ_REASONS, ContentKind, Operation, RehydrateOutcome, record
from cargohold._records import ReadOutcome
from cargohold._ref import Ref, is_ref

if TYPE_CHECKING:
    from cargohold._hold import Hold


_WHY = {
    ReadOutcome.MISSING: "no artifact with this reference is visible to this session",
    ReadOutcome.UNAUTHORIZED: "it belongs to another session",
    ReadOutcome.STALE: "its stored bytes no longer match their SHA-256",
    ReadOutcome.EXPIRED: "it expired",
}


class Unresolved(Exception):
    """A reference argument that did not resolve; the message is for the model."""


def resolve_arguments(
    hold: Hold, arguments: Mapping[str, Any], *, tool: str, input_schema: Mapping[str, Any] | None
) -> dict[str, Any]:
    """``arguments`` with every reference replaced by its artifact's exact content.

    Synchronous (it reads the store): call it from a worker thread in async code.

    Raises:
        Unresolved: a reference that is missing, unauthorized, stale or expired here.
    """
    read: dict[Ref, bytes] = {}
    properties = (input_schema or {}).get("properties")
    shapes = properties if isinstance(properties, Mapping) else {}
    resolved: dict[str, Any] = {}
    for name, value in arguments.items():
        shape = shapes.get(name)
        wants = shape.get("type") if isinstance(shape, Mapping) else None
        structured = wants in ("object", "array")
        resolved[name] = _walk(hold, value, name, tool, read, parse_json=structured)
    return resolved


def _walk(
    hold: Hold, value: Any, path: str, tool: str, read: dict[Ref, bytes], *, parse_json: bool
) -> Any:
    if isinstance(value, str) and is_ref(value):
        data = _content(hold, Ref.parse(value), path, tool, read)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(data).decode("ascii")
        if parse_json:
            try:
                return json.loads(text)
            except (ValueError, RecursionError):
                return text
        return text
    if isinstance(value, Mapping):
        return {
            key: _walk(hold, item, f"{path}.{key}", tool, read, parse_json=False)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [
            _walk(hold, item, f"{path}[{index}]", tool, read, parse_json=False)
            for index, item in enumerate(value)
        ]
    return value


def _content(hold: Hold, ref: Ref, path: str, tool: str, read: dict[Ref, bytes]) -> bytes:
    if ref in read:
        return read[ref]
    result = hold.store.read(ref)
    size = result.record.size if result.record is not None else 0
    record(
        hold.reporter,
        Operation.REHYDRATE,
        RehydrateOutcome(result.outcome.value),
        ContentKind.TOOL_ARGUMENTS,
        READ_REASONS[result.outcome],
        observed_bytes=size,
        limit_bytes=hold.settings.limits.max_artifact_bytes,
        ref=str(ref),
        tool=tool,
    )
    if not result.ok or result.data is None:
        why = _WHY.get(result.outcome, result.outcome.value)
        raise Unresolved(
            f"argument {path[:80]}: {ref} is {result.outcome.value} ({why}); nothing was sent "
            f"to {tool}. Pass a reference from a stub of this session."
        )
    read[ref] = result.data
    return result.data
