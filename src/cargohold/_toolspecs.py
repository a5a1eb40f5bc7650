"""The read tools' specifications: name, a description for a model, and the JSON Schema of the
arguments of each, exportable as an OpenAI function tool (chat and responses), an Anthropic tool
and an MCP tool. :mod:`cargohold._tools` runs them; every surface (MCP, LangChain, the Agents SDK)
serves exactly :data:`SPECS`, so a tool added here appears everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from cargohold import _patch
from cargohold._records import MAX_READ_BYTES

MAX_HITS: Final = 100
"""The most hits one ``artifact_search`` answers."""
MAX_QUERY_CHARS: Final = 1000
"""The longest ``artifact_search`` query, in characters."""

PATCH_TOOL: Final = "artifact_patch"
SEARCH_TOOL: Final = "artifact_search"

_REF_ARG = {
    "type": "string",
    "description": "The artifact reference from the stub, artifact://sha256/<64 hex>.",
}
_BUDGET_ARG = {
    "type": "integer",
    "minimum": 1,
    "maximum": MAX_READ_BYTES,
    "description": "Most bytes the answer may take (default 16384, at most 1048576).",
}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One read tool: its name, a description for a model, and its arguments' JSON Schema.

    Attributes:
        read_only: ``False`` for a tool that stores something (``artifact_patch`` stores the
            artifact it derives; it changes nothing already stored).
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    read_only: bool = True

    def openai(self) -> dict[str, Any]:
        """As an OpenAI Chat Completions function tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }

    def openai_responses(self) -> dict[str, Any]:
        """As an OpenAI Responses API (and Agents SDK) function tool."""
        return {
            "type": "function",
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
            "strict": False,
        }

    def anthropic(self) -> dict[str, Any]:
        """As an Anthropic Messages API tool."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.parameters),
        }

    def mcp(self) -> dict[str, Any]:
        """As an MCP ``Tool`` (``tools/list`` item): idempotent, closed-world, and read-only
        unless it stores (then non-destructive: it only adds)."""
        annotations: dict[str, bool] = {"readOnlyHint": self.read_only}
        if not self.read_only:
            annotations["destructiveHint"] = False
        annotations.update(idempotentHint=True, openWorldHint=False)
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": dict(self.parameters),
            "annotations": annotations,
        }


def _schema(required: list[str], **properties: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: dict(value) for name, value in properties.items()},
        "required": required,
        "additionalProperties": False,
    }


SPECS: Final[tuple[ToolSpec, ...]] = (
    ToolSpec(
        "artifact_info",
        "Facts about an artifact kept out of the context: size in bytes, media type, kind, "
        "whether it is complete, and when it expires. Reads no content.",
        _schema(["ref"], ref=_REF_ARG),
    ),
    ToolSpec(
        "artifact_read",
        "Read exact bytes of an artifact: `length` bytes from byte `offset` (0-based). Text "
        "comes back as text, binary as base64. The answer names the byte span it covers and "
        "where the next page starts; keep reads within the budget.",
        _schema(
            ["ref"],
            ref=_REF_ARG,
            offset={"type": "integer", "minimum": 0, "description": "First byte, 0-based."},
            length={
                "type": "integer",
                "minimum": 0,
                "description": "How many bytes; omit to read to the end (if it fits).",
            },
            budget=_BUDGET_ARG,
        ),
    ),
    ToolSpec(
        "artifact_read_lines",
        "Read lines `start_line` to `end_line` of a text artifact, 1-based and inclusive, as "
        "an editor numbers them (the stub's line numbers).",
        _schema(
            ["ref", "start_line"],
            ref=_REF_ARG,
            start_line={"type": "integer", "minimum": 1, "description": "First line, from 1."},
            end_line={
                "type": "integer",
                "minimum": 1,
                "description": "Last line, inclusive; omit to read to the end (if it fits).",
            },
            budget=_BUDGET_ARG,
        ),
    ),
    ToolSpec(
        "artifact_grep",
        "Lines of an artifact matching a regular expression (RE2 syntax: no lookaround or "
        "backreferences), with their line numbers; on a very long single line, excerpts around "
        "each match with its byte offset. States how many lines matched in all.",
        _schema(
            ["ref", "pattern"],
            ref=_REF_ARG,
            pattern={"type": "string", "description": "A regular expression (RE2)."},
            ignore_case={"type": "boolean", "description": "Match case-insensitively."},
            max_matches={
                "type": "integer",
                "minimum": 1,
                "description": "Most matches to show (default 100); all are counted.",
            },
            budget=_BUDGET_ARG,
        ),
    ),
    ToolSpec(
        "artifact_query",
        "Evaluate a JMESPath expression on a JSON artifact and return the result as compact "
        "JSON, e.g. `length(items)`, `items[?status=='failed'].id`, `items[:5]`.",
        _schema(
            ["ref", "expression"],
            ref=_REF_ARG,
            expression={"type": "string", "description": "A JMESPath expression."},
            budget=_BUDGET_ARG,
        ),
    ),
    ToolSpec(
        SEARCH_TOOL,
        "Find artifacts of this session by the words they hold: ranked full-text search over "
        "every artifact kept out of the context (a cleared tool result too). Give plain words, "
        "no operators: an artifact matches when it holds every word (case-insensitive). "
        "Answers each hit, best first, with its reference, size and the first lines that hold "
        "a word, with line numbers; read a hit further with artifact_read_lines or "
        "artifact_grep on its reference.",
        _schema(
            ["query"],
            query={
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
                "description": "The words to find, separated by spaces, e.g. "
                "`TimeoutError payments`.",
            },
            limit={
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_HITS,
                "description": f"Most hits to answer (default 10, at most {MAX_HITS}).",
            },
            budget=_BUDGET_ARG,
        ),
    ),
    ToolSpec(
        PATCH_TOOL,
        "Change an artifact without reading or re-sending it: give `json_patch` (RFC 6902 "
        "operations: add, remove, replace, move, copy, test) for a JSON artifact, or `edits` "
        "(replace lines start_line..end_line, 1-based and inclusive, with `lines`; or bytes "
        "offset..offset+length with `text`) for any artifact. Every coordinate refers to the "
        "artifact as `ref` names it; put a `test` first to check the value you change. Answers "
        "with a NEW reference (the old one stays as it was) and what changed: operations, "
        "bytes and lines before and after, the changed lines. Pass the new reference to a tool "
        "that takes artifact:// arguments.",
        _schema(
            ["ref"],
            ref={
                "type": "string",
                "description": "The artifact to change, artifact://sha256/<64 hex>: the patch "
                "applies to exactly those bytes.",
            },
            json_patch={
                "type": "array",
                "description": "A JSON Patch (RFC 6902), applied all or nothing, e.g. "
                '[{"op": "test", "path": "/rows/3/status", "value": "open"}, {"op": '
                '"replace", "path": "/rows/3/status", "value": "paid"}]. The result keeps '
                "the document's formatting (indentation, separators).",
                "items": {
                    "type": "object",
                    "properties": {
                        "op": {"type": "string", "enum": list(_patch.JSON_PATCH_OPS)},
                        "path": {"type": "string", "description": "A JSON Pointer."},
                        "from": {"type": "string", "description": "move and copy: a JSON Pointer."},
                        "value": {"description": "add, replace, test: any JSON value."},
                    },
                    "required": ["op", "path"],
                },
                "minItems": 1,
                "maxItems": _patch.MAX_OPERATIONS,
            },
            edits={
                "type": "array",
                "description": "Edits applied together; they must not overlap. A line edit "
                "replaces lines start_line..end_line (end_line defaults to start_line; "
                "end_line = start_line - 1 inserts before start_line) with `lines`, one string "
                "per line without its line break ([] deletes them). A byte edit replaces "
                "`length` bytes (default 0) at `offset` with `text`.",
                "items": {
                    "type": "object",
                    "properties": {
                        "start_line": {"type": "integer", "minimum": 1},
                        "end_line": {"type": "integer", "minimum": 0},
                        "lines": {"type": "array", "items": {"type": "string"}},
                        "offset": {"type": "integer", "minimum": 0},
                        "length": {"type": "integer", "minimum": 0},
                        "text": {"type": "string"},
                    },
                    "additionalProperties": False,
                    "anyOf": [
                        {"required": ["start_line", "lines"]},
                        {"required": ["offset", "text"]},
                    ],
                },
                "minItems": 1,
                "maxItems": _patch.MAX_OPERATIONS,
            },
        ),
        read_only=False,
    ),
)
"""The read tools, in the order a stub names them (``artifact_patch``, which derives, last)."""

TOOL_NAMES: Final = tuple(spec.name for spec in SPECS)
