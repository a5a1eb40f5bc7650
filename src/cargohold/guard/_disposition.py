"""Attachment disposition: how an image, document or file reaches the model, as policy.

Four dispositions:

- ``ref`` (the default): the bytes are stored and the message carries a stub, a pointer.
- ``inline``: the content goes into the message itself; small payloads only (what enters the
  message must stay under the heavy threshold, base64 included), else refused.
- ``provider_native`` (opt-in): the bytes are uploaded through the provider's files API and the
  message references the provider's file id. Opt-in because it sends bytes to a third party.
- ``tool:<name>``: the bytes are stored and routed to the named tool; the message carries a short
  routing notice, the returned :class:`ToolRoute` tells the caller which tool gets which ref.

Resolution: per-attachment hint > per-agent policy > runtime default (``ref``). A media type
never decides: the resolver does not look at it. It only shapes the part (an image goes in an
image part, a document in a document part) once the disposition is chosen.
"""

from __future__ import annotations

import base64
import enum
import mimetypes
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cargohold._errors import UsageError
from cargohold._offload import Offloader, OffloadResult
from cargohold._records import normalize_media_type
from cargohold._ref import Ref
from cargohold._stub import MARKER, Budget
from cargohold._text import looks_textual
from cargohold.guard._errors import DispositionRefusedError
from cargohold.guard._guard import RequestFormat

_TOOL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")


class DispositionKind(enum.StrEnum):
    """The four ways an attachment can reach a model."""

    REF = "ref"
    INLINE = "inline"
    PROVIDER_NATIVE = "provider_native"
    TOOL = "tool"


@dataclass(frozen=True, slots=True)
class Disposition:
    """One disposition; ``tool`` names the tool for ``tool:<name>``.

    Written as text: ``ref``, ``inline``, ``provider_native`` or ``tool:<name>``.
    """

    kind: DispositionKind
    tool: str | None = None

    def __post_init__(self) -> None:
        if (self.kind is DispositionKind.TOOL) != (self.tool is not None):
            raise UsageError("a tool disposition names its tool, and only it does")
        if self.tool is not None and _TOOL.fullmatch(self.tool) is None:
            raise UsageError("a tool name is 1-128 letters, digits and ._:/-")

    def __str__(self) -> str:
        return f"tool:{self.tool}" if self.kind is DispositionKind.TOOL else self.kind.value

    @classmethod
    def parse(cls, value: Disposition | str) -> Disposition:
        """``ref``, ``inline``, ``provider_native`` or ``tool:<name>`` as a disposition."""
        if isinstance(value, Disposition):
            return value
        if not isinstance(value, str):
            raise UsageError("a disposition is ref, inline, provider_native or tool:<name>")
        text = value.strip()
        if text.startswith("tool:"):
            return cls(DispositionKind.TOOL, text[5:])
        try:
            kind = DispositionKind(text)
        except ValueError:
            raise UsageError(
                "a disposition is ref, inline, provider_native or tool:<name>"
            ) from None
        if kind is DispositionKind.TOOL:
            raise UsageError("a tool disposition is written tool:<name>")
        return cls(kind)


REF = Disposition(DispositionKind.REF)
INLINE = Disposition(DispositionKind.INLINE)
PROVIDER_NATIVE = Disposition(DispositionKind.PROVIDER_NATIVE)


class DispositionSource(enum.StrEnum):
    """Which level of the precedence chose a disposition."""

    HINT = "hint"
    AGENT = "agent"
    DEFAULT = "default"


@dataclass(frozen=True, slots=True)
class Attachment:
    """Bytes a message wants to carry.

    Attributes:
        data: The exact bytes (never shown in the ``repr``).
        media_type: Their media type; shapes the part, never chooses the disposition.
        filename: A name for the provider's files API and file parts.
        hint: This attachment's own disposition, which wins over any policy.
        tool: The tool that produced the bytes, when one did (shown in the stub).
    """

    data: bytes = field(repr=False)
    media_type: str = "application/octet-stream"
    filename: str | None = None
    hint: Disposition | str | None = None
    tool: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.data, bytes | bytearray | memoryview):
            raise UsageError("attachment data is bytes")
        object.__setattr__(self, "data", bytes(self.data))
        object.__setattr__(self, "media_type", normalize_media_type(self.media_type))
        if self.hint is not None:
            object.__setattr__(self, "hint", Disposition.parse(self.hint))


@dataclass(frozen=True, slots=True)
class Resolution:
    """A chosen disposition and the precedence level that chose it."""

    disposition: Disposition
    source: DispositionSource


@dataclass(frozen=True, slots=True)
class DispositionPolicy:
    """Per-agent policy over a runtime default.

    Attributes:
        default: The runtime default (``ref`` unless configured otherwise).
        agents: Agent id -> that agent's disposition.
    """

    default: Disposition | str = REF
    agents: Mapping[str, Disposition | str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "default", Disposition.parse(self.default))
        object.__setattr__(
            self, "agents", {k: Disposition.parse(v) for k, v in dict(self.agents).items()}
        )

    def resolve(self, attachment: Attachment, *, agent: str | None = None) -> Resolution:
        """Hint > the agent's policy > the default. The media type is not consulted."""
        if attachment.hint is not None:
            return Resolution(Disposition.parse(attachment.hint), DispositionSource.HINT)
        if agent is not None and agent in self.agents:
            return Resolution(Disposition.parse(self.agents[agent]), DispositionSource.AGENT)
        return Resolution(Disposition.parse(self.default), DispositionSource.DEFAULT)


@dataclass(frozen=True, slots=True)
class ToolRoute:
    """An attachment handed to a named tool: the tool reads it by reference.

    Attributes:
        tool: The tool to route to.
        ref: The stored bytes' reference (``None`` if the store refused or failed).
        media_type: Their media type.
        size: Their size in bytes.
        filename: Their name, if any.
    """

    tool: str
    ref: Ref | None
    media_type: str
    size: int
    filename: str | None


@dataclass(frozen=True, slots=True)
class DisposedAttachment:
    """What one attachment became.

    Attributes:
        disposition: The disposition carried out.
        source: The precedence level that chose it.
        part: The content part to put into the message, in the request's format.
        ref: The reference, for ``ref`` and ``tool:<name>`` (when stored).
        file_id: The provider's file id, for ``provider_native``.
        route: The routing record, for ``tool:<name>``.
        offload: The offload decision behind ``ref`` and ``tool:<name>``.
    """

    disposition: Disposition
    source: DispositionSource
    part: Mapping[str, Any] = field(repr=False)
    ref: Ref | None = None
    file_id: str | None = None
    route: ToolRoute | None = None
    offload: OffloadResult | None = field(default=None, repr=False)


def _text_part(fmt: RequestFormat, text: str) -> dict[str, Any]:
    kind = "input_text" if fmt is RequestFormat.OPENAI_RESPONSES else "text"
    return {"type": kind, "text": text}


def _filename(attachment: Attachment) -> str:
    if attachment.filename:
        return attachment.filename
    extension = mimetypes.guess_extension(attachment.media_type.split(";")[0]) or ".bin"
    return f"attachment{extension}"


def _is_image(attachment: Attachment) -> bool:
    return attachment.media_type.startswith("image/")


def _inline_part(fmt: RequestFormat, attachment: Attachment) -> tuple[dict[str, Any], int]:
    """The inline part and the size of its largest string (what the guard will measure)."""
    media = attachment.media_type.split(";")[0]
    if not _is_image(attachment) and looks_textual(attachment.data):
        text = attachment.data.decode("utf-8", "replace")
        return _text_part(fmt, text), len(text.encode("utf-8", "surrogatepass"))
    encoded = base64.b64encode(attachment.data).decode("ascii")
    url = f"data:{media};base64,{encoded}"
    name = _filename(attachment)
    if fmt is RequestFormat.ANTHROPIC:
        block = "image" if _is_image(attachment) else "document"
        source = {"type": "base64", "media_type": media, "data": encoded}
        return {"type": block, "source": source}, len(encoded)
    if _is_image(attachment):
        if fmt is RequestFormat.OPENAI_RESPONSES:
            return {"type": "input_image", "image_url": url}, len(url)
        return {"type": "image_url", "image_url": {"url": url}}, len(url)
    if fmt is RequestFormat.OPENAI_RESPONSES:
        return {"type": "input_file", "filename": name, "file_data": url}, len(url)
    if fmt is RequestFormat.LANGCHAIN:
        return {"type": "file", "base64": encoded, "mime_type": media}, len(encoded)
    return {"type": "file", "file": {"filename": name, "file_data": url}}, len(url)


def _native_part(fmt: RequestFormat, attachment: Attachment, file_id: str) -> dict[str, Any]:
    image = _is_image(attachment)
    if fmt is RequestFormat.ANTHROPIC:
        block = "image" if image else "document"
        return {"type": block, "source": {"type": "file", "file_id": file_id}}
    if fmt is RequestFormat.OPENAI_RESPONSES:
        return {"type": "input_image" if image else "input_file", "file_id": file_id}
    if fmt is RequestFormat.LANGCHAIN:
        return {"type": "image" if image else "file", "file_id": file_id}
    return {"type": "file", "file": {"file_id": file_id}}


def _upload_call(client: Any, attachment: Attachment) -> tuple[Any, dict[str, Any]]:
    """The SDK's upload method and its arguments: Anthropic ``files.upload``, OpenAI
    ``files.create`` (purpose ``user_data``)."""
    files = getattr(client, "files", None)
    upload = (attachment.filename or _filename(attachment), attachment.data, attachment.media_type)
    if files is not None and callable(getattr(files, "upload", None)):
        return files.upload, {"file": upload}
    if files is not None and callable(getattr(files, "create", None)):
        return files.create, {"file": upload, "purpose": "user_data"}
    raise DispositionRefusedError(
        "provider_native needs an openai or anthropic client to upload through",
        reason="no_provider_client",
    )


def _stored(
    attachment: Attachment, offloader: Offloader | None, budget: Budget | str | None
) -> OffloadResult:
    """Store the bytes and get their stub, whatever their size (a ref is a ref, even small)."""
    if offloader is None:
        raise DispositionRefusedError(
            "ref and tool dispositions need an Offloader to store through", reason="no_offloader"
        )
    if len(attachment.data) < offloader.threshold_for(attachment.tool):
        offloader = Offloader(
            offloader.store,
            threshold=1,
            tool_thresholds={},
            budget=offloader.budget,
            reporter=offloader.reporter,
            read_tools=offloader.read_tools,
            ttl=offloader.ttl,
            secrets_policy=offloader.secrets_policy,
        )
    return offloader.offload(
        attachment.data, tool=attachment.tool, media_type=attachment.media_type, budget=budget
    )


def _route_notice(route: ToolRoute, stored: OffloadResult) -> str:
    if route.ref is None:
        return stored.text
    return (
        f"{MARKER} attachment {route.ref} ({route.media_type}, {route.size:,} bytes) was routed "
        f"to tool {route.tool}; it is not in this context."
    )


def _local(
    resolution: Resolution,
    attachment: Attachment,
    fmt: RequestFormat,
    offloader: Offloader | None,
    threshold: int,
    budget: Budget | str | None,
) -> DisposedAttachment:
    disposition = resolution.disposition
    if disposition.kind is DispositionKind.INLINE:
        part, size = _inline_part(fmt, attachment)
        if size >= threshold:
            raise DispositionRefusedError(
                f"inline is for small payloads: this one would put {size:,} bytes into the "
                f"message, at or above the {threshold:,}-byte heavy threshold; use ref",
                reason="inline_too_large",
            )
        return DisposedAttachment(disposition, resolution.source, part)
    stored = _stored(attachment, offloader, budget)
    if disposition.kind is DispositionKind.REF:
        part = _text_part(fmt, stored.text)
        return DisposedAttachment(
            disposition, resolution.source, part, ref=stored.ref, offload=stored
        )
    assert disposition.tool is not None
    route = ToolRoute(
        disposition.tool,
        stored.ref,
        attachment.media_type,
        len(attachment.data),
        attachment.filename,
    )
    part = _text_part(fmt, _route_notice(route, stored))
    return DisposedAttachment(
        disposition, resolution.source, part, ref=stored.ref, route=route, offload=stored
    )


def _file_id(uploaded: Any) -> str:
    file_id = getattr(uploaded, "id", None)
    if not isinstance(file_id, str) or not file_id:
        raise DispositionRefusedError(
            "the provider's files API returned no file id", reason="no_file_id"
        )
    return file_id


def dispose(
    attachment: Attachment,
    *,
    format: RequestFormat | str,
    policy: DispositionPolicy | None = None,
    agent: str | None = None,
    offloader: Offloader | None = None,
    client: Any = None,
    threshold: int | None = None,
    budget: Budget | str | None = None,
) -> DisposedAttachment:
    """Resolve ``attachment``'s disposition and carry it out; return the part for the message.

    Args:
        attachment: The bytes and their hint.
        format: The request format the part is shaped for.
        policy: Per-agent policy and runtime default (``ref`` when omitted).
        agent: The agent whose policy applies.
        offloader: Stores the bytes for ``ref`` and ``tool:<name>``.
        client: A sync ``openai`` or ``anthropic`` client, for ``provider_native``.
        threshold: The heavy threshold inline must stay under (the offloader's, else 32 KiB).
        budget: The stub budget for ``ref``.

    Raises:
        DispositionRefusedError: inline over the threshold; no client or offloader.
    """
    resolution, fmt, limit = _prepare(attachment, format, policy, agent, offloader, threshold)
    if resolution.disposition.kind is not DispositionKind.PROVIDER_NATIVE:
        return _local(resolution, attachment, fmt, offloader, limit, budget)
    upload, kwargs = _upload_call(client, attachment)
    file_id = _file_id(upload(**kwargs))
    part = _native_part(fmt, attachment, file_id)
    return DisposedAttachment(resolution.disposition, resolution.source, part, file_id=file_id)


async def adispose(
    attachment: Attachment,
    *,
    format: RequestFormat | str,
    policy: DispositionPolicy | None = None,
    agent: str | None = None,
    offloader: Offloader | None = None,
    client: Any = None,
    threshold: int | None = None,
    budget: Budget | str | None = None,
) -> DisposedAttachment:
    """:func:`dispose` for an async ``openai`` or ``anthropic`` client (the upload is awaited)."""
    resolution, fmt, limit = _prepare(attachment, format, policy, agent, offloader, threshold)
    if resolution.disposition.kind is not DispositionKind.PROVIDER_NATIVE:
        return _local(resolution, attachment, fmt, offloader, limit, budget)
    upload, kwargs = _upload_call(client, attachment)
    file_id = _file_id(await upload(**kwargs))
    part = _native_part(fmt, attachment, file_id)
    return DisposedAttachment(resolution.disposition, resolution.source, part, file_id=file_id)


def _prepare(
    attachment: Attachment,
    format: RequestFormat | str,
    policy: DispositionPolicy | None,
    agent: str | None,
    offloader: Offloader | None,
    threshold: int | None,
) -> tuple[Resolution, RequestFormat, int]:
    if not isinstance(attachment, Attachment):
        raise UsageError("dispose takes a cargohold.guard.Attachment")
    try:
        fmt = RequestFormat(format)
    except ValueError:
        fmt = None
    if fmt is None or fmt is RequestFormat.OPENAI_COMPLETIONS:  # a prompt has no parts
        names = (f for f in RequestFormat if f is not RequestFormat.OPENAI_COMPLETIONS)
        raise UsageError("an attachment's format must be one of: " + ", ".join(names))
    resolution = (policy or DispositionPolicy()).resolve(attachment, agent=agent)
    if threshold is None:
        threshold = offloader.threshold_for(attachment.tool) if offloader is not None else 32768
    return resolution, fmt, threshold
