"""One MCP tool result in, the same result with every heavy part kept out of context.

Each part of a ``CallToolResult`` is one offload decision (one event), judged by the hold's
heavy threshold for the producing tool:

- text, and the text of an embedded resource: at or above the threshold, the exact text is
  stored and the part becomes the stub (text) plus a ``resource_link`` to the artifact;
- images, audio and embedded blobs: by the attachment disposition policy (``ref`` by default:
  stored whatever their size, the stub and a link in their place; ``inline``: passed unchanged
  while under the threshold; ``tool:<name>``: stored and routed; ``provider_native`` has no
  meaning in MCP and is carried out as ``ref``);
- ``structured_content``: at or above the threshold it is stored as JSON and replaced by a small
  object ``{"cargohold": {"outcome", "ref", "size", "media_type", "redacted"}}`` (the stub text
  joins the content). A server that sends one payload twice gets it stored once: structured
  content equal (as JSON) to an offloaded text part, or that only wraps that text
  (``{"result": text}``, as ``MCPServer`` sends a ``str`` result), points at that text's
  artifact. fastmcp's wrapper of a value (``{"result": value}``, marked ``fastmcp.wrap_result``
  in the result's ``_meta``) stays: the stub stands for the value, under ``result``.

A credential in a part is redacted by default (the secrets policy): a part kept inline stays in
place as its redacted copy (an embedded resource keeps its URI and type) and a text part
follows it with the note of what was redacted (``credentials redacted from this result:
<kinds and lines>``), apart, so text that is JSON still parses; redacted structured content is
handed on as data, its note in the content. A stub names the redaction itself, and the
structured stub object carries it as ``redacted`` (each kind with its first line numbers).

What is refused (a credential under the ``reject`` policy, a quota) or cannot be stored leaves
a bounded notice in its place, never the raw part. ``resource_link`` parts pass (they are
pointers). Every other string of every part (a link's uri, name, title and description, a
resource's uri, each ``_meta``) and the result's ``_meta`` go under the secrets policy in place.

A stub cannot satisfy a tool's declared output schema, so :func:`rewrite_output_schema` widens
each schema to "the original, or a cargohold stub" (or drops one it cannot widen safely).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

import orjson
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    CreateMessageRequestParams,
    EmbeddedResource,
    GetPromptResult,
    ImageContent,
    PromptMessage,
    ReadResourceResult,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolResultContent,
)
from pydantic import BaseModel

from cargohold._errors import UsageError
from cargohold._events import OffloadOutcome
from cargohold._records import normalize_media_type
from cargohold._secrets import screen_text

if TYPE_CHECKING:
    from cargohold._hold import Hold
    from cargohold._offload import OffloadResult
    from cargohold.guard import Disposition

STUB_KEY: Final = "cargohold"
"""The one key of the structured content that stands for an offloaded payload."""

STUB_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        STUB_KEY: {
            "type": "object",
            "description": "The payload was kept out of context by cargohold; read it by ref.",
            "properties": {
                "outcome": {"type": "string"},
                "reason": {"type": "string"},
                "ref": {"type": "string"},
                "size": {"type": "integer"},
                "media_type": {"type": "string"},
                "redacted": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "kind": {"type": "string"},
                            "lines": {"type": "array", "items": {"type": "integer"}},
                        },
                    },
                },
            },
            "required": ["outcome"],
        }
    },
    "required": [STUB_KEY],
}
"""The JSON Schema of a stub standing for structured content."""

_LINK_DESCRIPTION = (
    "Exact bytes kept out of context by cargohold. Read them in pages with artifact_read "
    "(or artifact_grep, artifact_query), or with resources/read when they fit 1 MiB."
)


@dataclass(frozen=True, slots=True)
class ResultPolicy:
    """How the binary parts of tool results reach the model.

    Attributes:
        default: The runtime default disposition (``ref`` unless configured otherwise).
        tools: Per-tool dispositions (the producing tool's choice is the attachment's hint,
            which wins over the default).
    """

    default: str = "ref"
    tools: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from cargohold.guard import Disposition

        Disposition.parse(self.default)  # a bad value fails here, not at the first image
        for value in self.tools.values():
            Disposition.parse(value)
        object.__setattr__(self, "tools", dict(self.tools))

    @classmethod
    def from_settings(cls, hold: Hold) -> ResultPolicy:
        """The policy the hold's configuration names (``attachment_disposition``,
        ``tool_dispositions``)."""
        settings = hold.settings
        return cls(settings.attachment_disposition, settings.tool_dispositions)

    def disposition_for(self, tool: str | None) -> Disposition:
        """The disposition of ``tool``'s attachments: its own, else the default."""
        from cargohold.guard import Attachment, DispositionPolicy

        hint = self.tools.get(tool) if tool is not None else None
        probe = Attachment(b"", hint=hint, tool=tool)
        return DispositionPolicy(default=self.default).resolve(probe).disposition


def offload_result(
    hold: Hold, result: CallToolResult, *, tool: str, policy: ResultPolicy | None = None
) -> CallToolResult:
    """``result`` with each heavy part replaced by its stub and a link (see the module).

    Synchronous (it stores bytes and renders stubs): call it from a worker thread in async code.
    A result marked ``is_error`` is projected as a failure (verbatim excerpts, never a summary).
    """
    policy = policy or ResultPolicy.from_settings(hold)
    failed = result.is_error
    structured = result.structured_content
    offloaded_texts: list[_Offloaded] = []
    content: list[ContentBlock] = []
    for block in result.content:
        content.extend(
            _block(
                hold,
                block,
                tool,
                policy,
                failed,
                offloaded_texts if structured is not None else None,
            )
        )
    update: dict[str, Any] = {"content": content}
    if structured is not None:
        if _wrapped(result):  # fastmcp's {"result": value}: the value is the payload
            inner, extra = _structured(hold, structured[WRAP_KEY], tool, failed, offloaded_texts)
            update["structured_content"] = {WRAP_KEY: inner}
        else:
            replaced, extra = _structured(hold, structured, tool, failed, offloaded_texts)
            update["structured_content"] = replaced
        # A note on structured content that repeats a redacted text part (MCPServer sends a
        # str result as both) would name the same credentials again: the text's note says it.
        content.extend(
            part for part in extra if not (_is_note(part) and any(map(_is_note, content)))
        )
    secrets = hold.offloader.secrets_policy_for(tool)
    update["content"] = [_screen_part(part, secrets) for part in content]
    if result.meta is not None:
        update["meta"] = _screen_value(result.meta, secrets)
    return result.model_copy(update=update)


WRAP_KEY: Final = "result"
"""The key under which fastmcp wraps a value that is not an object (a string, a list)."""
_WRAP_SCHEMA_FLAG: Final = "x-fastmcp-wrap-result"


def _wrapped(result: CallToolResult) -> bool:
    """Whether ``result``'s structured content is fastmcp's wrapper of a value: the result's
    ``_meta`` says ``fastmcp.wrap_result``, and the content is ``{"result": value}``."""
    meta = result.meta or {}
    fastmcp = meta.get("fastmcp")
    structured = result.structured_content
    return (
        isinstance(fastmcp, dict)
        and fastmcp.get("wrap_result") is True
        and isinstance(structured, dict)
        and list(structured) == [WRAP_KEY]
    )


RESOURCES_TOOL: Final = "resources/read"
"""The producer an upstream resource's offload is attributed to (its threshold, its events)."""
PROMPTS_TOOL: Final = "prompts/get"
"""The producer an upstream prompt's offload is attributed to."""


def offload_resource(
    hold: Hold, result: ReadResourceResult, *, policy: ResultPolicy | None = None
) -> ReadResourceResult:
    """An upstream ``resources/read`` answer with each heavy item kept out of context.

    Judged as a tool result's embedded resources are (text by the heavy threshold, blobs by the
    attachment disposition), attributed to :data:`RESOURCES_TOOL`. A replaced item keeps its
    URI and becomes text: the stub (or the notice of what was refused), which names the
    artifact; a resource's contents cannot hold a link. Synchronous, like
    :func:`offload_result`.
    """
    policy = policy or ResultPolicy.from_settings(hold)
    contents: list[TextResourceContents | BlobResourceContents] = []
    for item in result.contents:
        embedded = EmbeddedResource(resource=item)
        kept = _block(hold, embedded, RESOURCES_TOOL, policy, False, None)
        if len(kept) == 1 and kept[0] is embedded:  # below the threshold: as it came
            contents.append(item)
        else:
            text = next(part.text for part in kept if isinstance(part, TextContent))
            contents.append(TextResourceContents(uri=item.uri, mime_type="text/plain", text=text))
    secrets = hold.offloader.secrets_policy_for(RESOURCES_TOOL)
    update: dict[str, Any] = {"contents": [_screen_part(item, secrets) for item in contents]}
    if result.meta is not None:
        update["meta"] = _screen_value(result.meta, secrets)
    return result.model_copy(update=update)


def offload_prompt(
    hold: Hold, result: GetPromptResult, *, policy: ResultPolicy | None = None
) -> GetPromptResult:
    """An upstream ``prompts/get`` answer with each heavy message content kept out of context
    (as a tool result's parts are; attributed to :data:`PROMPTS_TOOL`). A replaced content
    becomes the stub's text, in the same message. Synchronous, like :func:`offload_result`."""
    policy = policy or ResultPolicy.from_settings(hold)
    messages: list[PromptMessage] = []
    for message in result.messages:
        kept = _block(hold, message.content, PROMPTS_TOOL, policy, False, None)
        if len(kept) == 1 and kept[0] is message.content:
            messages.append(message)
        else:
            text = next(part.text for part in kept if isinstance(part, TextContent))
            messages.append(message.model_copy(update={"content": TextContent(text=text)}))
    secrets = hold.offloader.secrets_policy_for(PROMPTS_TOOL)
    screened = [
        message.model_copy(update={"content": _screen_part(message.content, secrets)})
        for message in messages
    ]
    update: dict[str, Any] = {"messages": screened}
    if result.description is not None:
        update["description"] = _screen_value(result.description, secrets)
    if result.meta is not None:
        update["meta"] = _screen_value(result.meta, secrets)
    return result.model_copy(update=update)


SAMPLING_TOOL: Final = "sampling/createMessage"
"""The producer a forwarded sampling request's offload is attributed to."""


def offload_sampling(
    hold: Hold, params: CreateMessageRequestParams, *, policy: ResultPolicy | None = None
) -> CreateMessageRequestParams:
    """A sampling request of the upstream server, about to reach the client's model, with each
    heavy part kept out of it: message texts, images and audio, the texts of tool results, and
    the system prompt (each becomes its stub's text). Synchronous, like :func:`offload_result`.
    """
    policy = policy or ResultPolicy.from_settings(hold)

    def parts(blocks: list[Any]) -> list[Any]:
        out: list[Any] = []
        for block in blocks:
            if isinstance(block, ToolResultContent):
                inner = [b for part in block.content for b in _kept(hold, part, policy)]
                out.append(block.model_copy(update={"content": inner}))
            else:
                out.extend(_kept(hold, block, policy))
        return out

    messages = []
    for message in params.messages:
        content = message.content
        if isinstance(content, list):
            messages.append(message.model_copy(update={"content": parts(content)}))
        else:
            single = parts([content])[0]  # one block in, one out (itself or its stub)
            messages.append(message.model_copy(update={"content": single}))
    update: dict[str, Any] = {"messages": messages}
    if params.system_prompt is not None:
        decided = hold.offload(params.system_prompt, tool=SAMPLING_TOOL)
        if decided.outcome is not OffloadOutcome.INLINE or decided.redacted:
            update["system_prompt"] = decided.text
    return params.model_copy(update=update)


def _kept(hold: Hold, block: Any, policy: ResultPolicy) -> list[Any]:
    """``block`` as it may reach a model: itself, or its stub as text (no link: a model's
    message holds no resource link)."""
    if not isinstance(block, TextContent | ImageContent | AudioContent | EmbeddedResource):
        return [block]  # tool uses, links: pointers and calls, not payloads
    kept = _block(hold, block, SAMPLING_TOOL, policy, False, None)
    if len(kept) == 1 and kept[0] is block:
        return [block]
    return [part for part in kept if isinstance(part, TextContent)]


# -- every other string of a part: links, URIs, _meta ---------------------------------------------

WITHHELD: Final = "[cargohold: withheld: it held a credential]"
"""What a string outside any body becomes under the ``reject`` policy when it holds one."""

_BODIES: Final = ("text", "data", "blob")
"""The fields of a part (or of its resource) that its offload decision has judged already."""

P = TypeVar("P", bound=BaseModel)


def _screen_part(part: P, policy: str) -> P:
    """``part`` with every string outside its body under the secrets policy: a resource
    link's uri, name, title and description, a resource's uri, every ``_meta`` (keys and
    values, however nested), icons. The body (text, data, blob) is its offload decision's.
    The same object when nothing in it holds a credential."""
    dumped = part.model_dump(by_alias=True, exclude_unset=True, mode="json")
    bodies = {key: dumped.pop(key) for key in _BODIES if key in dumped}
    resource = dumped.get("resource")
    inner: dict[str, Any] = {}
    if isinstance(resource, dict):
        inner = {key: resource.pop(key) for key in _BODIES if key in resource}
    screened = _screen_value(dumped, policy)
    if screened is dumped:
        return part
    screened.update(bodies)
    if inner and isinstance(screened.get("resource"), dict):
        screened["resource"].update(inner)
    return type(part).model_validate(screened)


def _screen_value(value: Any, policy: str) -> Any:
    """``value`` (JSON data) with each string in it, keys too, under the secrets policy:
    redacted, masked, or :data:`WITHHELD`. The same object when none holds a credential."""
    if isinstance(value, str):
        screened = screen_text(value, policy)
        return WITHHELD if screened is None else screened
    if isinstance(value, dict):
        pairs = [
            (_screen_value(key, policy), _screen_value(item, policy)) for key, item in value.items()
        ]
        if all(
            new_key is key and new_item is item
            for (new_key, new_item), (key, item) in zip(pairs, value.items(), strict=True)
        ):
            return value
        return dict(pairs)
    if isinstance(value, list):
        items = [_screen_value(item, policy) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items
    return value


# -- the parts ----------------------------------------------------------------------------------


def _block(
    hold: Hold,
    block: ContentBlock,
    tool: str,
    policy: ResultPolicy,
    failed: bool,
    offloaded_texts: list[_Offloaded] | None,
) -> list[ContentBlock]:
    if isinstance(block, TextContent):
        return _text(hold, block, block.text, None, tool, failed, offloaded_texts)
    if isinstance(block, ImageContent | AudioContent):
        return _binary(hold, block, block.data, block.mime_type, tool, policy)
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            media = _media_type(resource.mime_type)
            return _text(hold, block, resource.text, media, tool, failed, offloaded_texts)
        if isinstance(resource, BlobResourceContents):
            return _binary(hold, block, resource.blob, resource.mime_type, tool, policy)
    return [block]  # resource_link: a pointer already


def _text(
    hold: Hold,
    block: ContentBlock,
    text: str,
    media_type: str | None,
    tool: str,
    failed: bool,
    offloaded_texts: list[_Offloaded] | None,
) -> list[ContentBlock]:
    decided = hold.offload(text, tool=tool, media_type=media_type, failed=failed)
    if decided.outcome is OffloadOutcome.INLINE and not decided.redacted:
        return [block]
    if decided.outcome is OffloadOutcome.INLINE:  # its redacted copy, in place, then the note
        kept: ContentBlock = TextContent(text=decided.text)
        if isinstance(block, EmbeddedResource) and isinstance(block.resource, TextResourceContents):
            resource = block.resource.model_copy(update={"text": decided.text})
            kept = block.model_copy(update={"resource": resource})
        return [kept, *_note(decided)]
    if decided.ref is not None and decided.stub is not None and offloaded_texts is not None:
        offloaded_texts.append(_Offloaded(text, _json(text), decided))
    return _replacement(decided)


def _binary(
    hold: Hold,
    block: ContentBlock,
    data: str,
    media_type: str | None,
    tool: str,
    policy: ResultPolicy,
) -> list[ContentBlock]:
    from cargohold.guard import REF, Attachment, DispositionKind, dispose

    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        # Not base64 after all: the text as given is what the server sent; judge it as text.
        return _text(hold, block, data, None, tool, False, None)
    media = _media_type(media_type) or "application/octet-stream"
    disposition = policy.disposition_for(tool)
    if disposition.kind is DispositionKind.INLINE and len(data) < hold.offloader.threshold_for(
        tool
    ):
        decided = hold.offload(raw, tool=tool, media_type=media)  # one decision, one event
        if decided.outcome is OffloadOutcome.INLINE and not decided.redacted:  # else described
            return [block]
        return _replacement(decided)
    if disposition.kind is not DispositionKind.TOOL:
        disposition = REF  # inline over the threshold, and provider_native: stored, by ref
    attachment = Attachment(raw, media_type=media, hint=disposition, tool=tool)
    disposed = dispose(attachment, format="openai-chat", offloader=hold.offloader)
    stored = disposed.offload
    if stored is None:  # not reached: ref and tool dispositions always store
        raise UsageError("an attachment disposition stored nothing")
    return _replacement(stored, text=str(disposed.part.get("text", stored.text)))


def _structured(
    hold: Hold,
    structured: Any,
    tool: str,
    failed: bool,
    offloaded_texts: list[_Offloaded],
) -> tuple[Any, list[ContentBlock]]:
    for seen in offloaded_texts:
        if seen.repeated_by(structured):  # the same payload as a text part: stored once, there
            return _stub_object(seen.decided), []
    decided = hold.offload(structured, tool=tool, media_type="application/json", failed=failed)
    if decided.outcome is OffloadOutcome.INLINE:  # a redacted copy, its note in the content
        return decided.value_for(structured), _note(decided)
    return _stub_object(decided), _replacement(decided)


def _replacement(decided: OffloadResult, *, text: str | None = None) -> list[ContentBlock]:
    """The stub (or notice) as text, and a link to the artifact when there is one."""
    parts: list[ContentBlock] = [TextContent(text=decided.text if text is None else text)]
    stub = decided.stub
    if decided.ref is not None and stub is not None:
        parts.append(
            ResourceLink(
                uri=str(decided.ref),
                name=f"artifact {decided.ref.digest[:12]}",
                title=f"{stub.tool or 'tool'} result ({stub.size:,} bytes, kept out of context)",
                description=_LINK_DESCRIPTION,
                mime_type=stub.media_type,
                size=stub.size,
            )
        )
    return parts


_NOTE_PREFIX: Final = "[cargohold] credentials redacted from this result: "


def _note(decided: OffloadResult) -> list[ContentBlock]:
    """The note of what was redacted from an inline result, as its own text part (none when
    nothing was): apart from the result, so a text that is JSON still parses."""
    if not isinstance(decided.content, str):
        return []
    return [TextContent(text=decided.note)] if decided.note else []


def _is_note(part: ContentBlock) -> bool:
    return isinstance(part, TextContent) and part.text.startswith(_NOTE_PREFIX)


_REDACTED_LINES = 5
"""Line numbers per kind in a stub object's ``redacted`` (as many as a stub's note names)."""


def _stub_object(decided: OffloadResult) -> dict[str, Any]:
    facts: dict[str, Any] = {"outcome": decided.outcome.value, "reason": decided.reason.value}
    if decided.ref is not None:
        facts["ref"] = str(decided.ref)
    if decided.stub is not None:
        facts["size"] = decided.stub.size
        facts["media_type"] = decided.stub.media_type
    if decided.redacted:
        lines: dict[str, list[int]] = {}
        for finding in decided.redacted:
            seen = lines.setdefault(finding.kind.value, [])
            if finding.line not in seen and len(seen) < _REDACTED_LINES:
                seen.append(finding.line)
        facts["redacted"] = [{"kind": kind, "lines": found} for kind, found in lines.items()]
    return {STUB_KEY: facts}


_NOT_JSON: Final = object()


@dataclass(frozen=True, slots=True)
class _Offloaded:
    """A text part that was offloaded, for spotting structured content that repeats it."""

    text: str = field(repr=False)
    parsed: Any = field(repr=False)
    decided: OffloadResult

    def repeated_by(self, structured: Any) -> bool:
        if isinstance(structured, str):  # a wrapped value (fastmcp's): the text itself
            return structured == self.text
        if self.parsed is not _NOT_JSON and self.parsed == structured:
            return True
        if isinstance(structured, dict) and len(structured) == 1:
            (value,) = structured.values()
            return isinstance(value, str) and value == self.text
        return False


def _json(text: str) -> Any:
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return _NOT_JSON
    try:
        return orjson.loads(text)
    except (orjson.JSONDecodeError, RecursionError):
        return _NOT_JSON


def _media_type(value: str | None) -> str | None:
    if not value:
        return None
    try:
        return normalize_media_type(value)
    except UsageError:  # a server's odd label is not worth failing a result over
        return None


# -- output schemas -----------------------------------------------------------------------------


_STUB_PROPERTY: Final[dict[str, Any]] = STUB_SCHEMA["properties"][STUB_KEY]

_MERGEABLE: Final = frozenset(
    {
        "type",
        "title",
        "description",
        "properties",
        "required",
        "additionalProperties",
        "unevaluatedProperties",
        "$defs",
        "definitions",
        "$schema",
        "$id",
        "$comment",
        "examples",
        "default",
        "deprecated",
        "readOnly",
    }
)
"""Root keywords of an object schema that say nothing about a ``cargohold`` key, so a stub
can be admitted beside them (any other, ``patternProperties`` or ``minProperties`` say, could
reject it)."""


def rewrite_output_schema(schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A tool's output schema widened to accept a cargohold stub, or ``None`` to drop it.

    Typed clients build their result type from the root of the schema (fastmcp turns an object
    root's ``properties`` into a dataclass), so the upstream's root is kept as it is: its type,
    title, properties, definitions and every ``$ref``. The stub is admitted beside it as one
    optional property more, ``cargohold`` (:data:`STUB_SCHEMA`), and the root's ``required``
    moves into ``anyOf: [{"required": <the original's>}, {"required": ["cargohold"]}]``: a
    small result validates exactly as before, and a stub validates too. fastmcp's wrapper
    (``x-fastmcp-wrap-result``) admits the stub under ``result`` as well (see
    :func:`offload_result`).

    A root that cannot take the property safely (another keyword that constrains its keys, a
    ``cargohold`` property of its own, a root that is not ``type: object``) becomes one branch
    of ``anyOf`` beside :data:`STUB_SCHEMA` instead, with its ``$defs`` / ``definitions`` moved
    to the root; one with an ``$id`` or a ``$ref`` that points elsewhere cannot be moved and is
    dropped (a client then accepts any structured content, the stub included).
    """
    if schema is None:
        return None
    merged = _merged(schema)
    if merged is not None:
        return merged
    if "$id" in schema or not all(_local_definition(ref) for ref in _refs(schema)):
        return None
    hoisted = ("$defs", "definitions", "$schema")
    original = {key: value for key, value in schema.items() if key not in hoisted}
    widened: dict[str, Any] = {"type": "object", "anyOf": [original, STUB_SCHEMA]}
    for key in hoisted:
        if key in schema:
            widened[key] = schema[key]
    return widened


def _merged(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """The original root with the stub as one optional property more, or ``None`` when the
    root has a keyword that could reject it."""
    properties = schema.get("properties", {})
    if (
        schema.get("type") != "object"
        or not isinstance(properties, Mapping)
        or STUB_KEY in properties
        or not all(key in _MERGEABLE or key.startswith("x-") for key in schema)
    ):
        return None
    merged = dict(schema)
    merged["properties"] = {**properties, STUB_KEY: _STUB_PROPERTY}
    if schema.get(_WRAP_SCHEMA_FLAG) is True and WRAP_KEY in properties:
        # fastmcp's wrapper: a stub stands for the wrapped value, under "result"
        merged["properties"][WRAP_KEY] = {"anyOf": [properties[WRAP_KEY], STUB_SCHEMA]}
    required = merged.pop("required", None)
    if required:
        merged["anyOf"] = [{"required": required}, {"required": [STUB_KEY]}]
    return merged


def _local_definition(ref: object) -> bool:
    return isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/"))


def _refs(node: object) -> list[object]:
    found: list[object] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, value in item.items():
                if key in ("$ref", "$dynamicRef"):
                    found.append(value)
                else:
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)
    return found
