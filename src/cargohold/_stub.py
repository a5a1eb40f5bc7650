"""Stubs: what a conversation carries in place of a heavy body.

One renderer. A stub is plain text that starts with one stable marker line holding the canonical
reference and ends with one closing line naming its budget and a check of everything before that
line: the first 16 hex digits of its HMAC-SHA256 under the store's marker key (see
:mod:`cargohold._marks`: a tool cannot forge it), or of its plain SHA-256 when rendered without a
key (tests and documentation; no guard trusts that). Between them: what the thing is (tool, media
type, size, estimated tokens, complete or truncated), when the bytes hold redaction markers a
line naming what was redacted before storing (``credentials redacted before storing: jwt (line
12)``, kinds and lines, never a value; whatever the preview shows), a preview within the budget,
and the exact names of the read tools the surface offers. The whole stub, in UTF-8 bytes, never
exceeds its budget, and the budget shrinks with the body (:func:`stub_limit`: at most a tenth of
the body, never below 2 KiB), so a stub always saves most of what it replaces.

"about N tokens" is what the body would cost a model if it entered the context as it is, counted
the way the edge guard counts it: text with the o200k tokenizer (three samples scaled to the
body past 16 KiB); an image (PNG, JPEG, GIF, WebP) as one image part, ``IMAGE_TOKENS`` (1,600,
"as an image"); other binary bytes as their base64 encoding ("as base64").

Same bytes, same metadata, same budget and the same store give the same stub, byte for byte: no
clock, no randomness, no model call.

Example (abridged)::

    [cargohold] artifact://sha256/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    tool list_orders | application/json | 2,431,907 bytes | about 748,280 tokens | complete
    kept out of context | kind json | class compressible
    --- preview ---
    ...
    --- end of preview ---
    read more: artifact_read(ref, offset, length) | artifact_grep(ref, pattern) | ...
    [cargohold] end of stub | budget balanced | check 1a2b3c4d5e6f7a8b
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from dataclasses import dataclass, field

from cargohold._errors import UsageError
from cargohold._marks import check_key, same, tag
from cargohold._ref import PREFIX, Ref
from cargohold._secrets import redaction_note
from cargohold._text import cut_utf8, fit, looks_textual, utf8_len
from cargohold._tokens import Family, body_tokens, estimate_tokens, family_of
from cargohold.projection import Detection, Projection, ProjectionClass, detect, project

MARKER = "[cargohold]"
"""The stable first token of every stub and notice cargohold puts into a conversation."""

_FIRST = re.compile(r"\[cargohold\] (artifact://sha256/[0-9a-f]{64})")
_LAST = re.compile(
    r"\[cargohold\] end of stub \| budget (light|balanced|strong|max) \| check ([0-9a-f]{16})"
)


class Budget(enum.IntEnum):
    """Byte budgets for a whole stub (UTF-8)."""

    LIGHT = 4 * 1024
    BALANCED = 8 * 1024
    STRONG = 12 * 1024
    MAX = 16 * 1024

    @classmethod
    def parse(cls, value: Budget | str | int) -> Budget:
        """A budget from its name (``light``...) or its exact byte count."""
        if isinstance(value, Budget):
            return value
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                pass
        elif isinstance(value, int) and not isinstance(value, bool):
            for budget in cls:
                if budget.value == value:
                    return budget
        raise UsageError("budget must be one of: light, balanced, strong, max")

    @property
    def label(self) -> str:
        """The budget's lower-case name."""
        return self.name.lower()


STUB_FLOOR = 2 * 1024
"""The least a stub may take, whatever the body's size: room for its facts and a preview."""
STUB_SHARE = 10
"""A stub takes at most one ``STUB_SHARE``-th of its body (above :data:`STUB_FLOOR`)."""


def stub_limit(size: int, budget: Budget | str | int = Budget.BALANCED) -> int:
    """The most bytes the stub of a ``size``-byte body may take under ``budget``.

    A stub is there to save context: one of 8 KiB for a 33 KB result would cost a quarter of
    what it saves. So the budget shrinks with the body, to a tenth of it, but never below 2 KiB
    (:data:`STUB_FLOOR`); a body of 80 KB or more gets the whole balanced budget.
    """
    return min(int(Budget.parse(budget)), max(STUB_FLOOR, size // STUB_SHARE))


@dataclass(frozen=True, slots=True)
class ReadTools:
    """The names of the read tools a surface offers, shown verbatim in every stub.

    Attributes:
        read: Byte-range read ``(ref, offset, length)``.
        lines: Line-range read ``(ref, start_line, end_line)``.
        grep: Regular-expression search ``(ref, pattern)``.
        query: JMESPath query on JSON ``(ref, expression)``.
        search: Ranked full-text search over the scope's artifacts ``(query)``: the way back
            to a result cleared by compaction (named in compact stubs only).
    """

    read: str = "artifact_read"
    lines: str = "artifact_read_lines"
    grep: str = "artifact_grep"
    query: str = "artifact_query"
    search: str = "artifact_search"

    def hint(self, *, json_like: bool, binary: bool = False) -> str:
        """The stub's "read more" line: the tools that answer for this body.

        Args:
            json_like: The body is JSON the query tool reads: offer it.
            binary: The body is not text: offer only the byte read (base64 pages), since the
                line and grep tools answer a binary body with a "binary" outcome, not lines.
        """
        if binary:
            return f"read more: {self.read}(ref, offset, length) (base64 pages)"
        parts = [
            f"{self.read}(ref, offset, length)",
            f"{self.lines}(ref, start_line, end_line)",
            f"{self.grep}(ref, pattern)",
        ]
        if json_like:
            parts.append(f"{self.query}(ref, expression)")
        return "read more: " + " | ".join(parts)


DEFAULT_READ_TOOLS = ReadTools()


@dataclass(frozen=True, slots=True)
class Stub:
    """A rendered stub and the facts it states.

    Attributes:
        text: The stub as it enters the conversation.
        ref: The canonical reference.
        budget: The budget the stub fits.
        projection: The preview's kind, class and text.
    """

    text: str = field(repr=False)
    ref: Ref
    size: int
    media_type: str
    tool: str | None
    complete: bool
    estimated_tokens: int
    budget: Budget
    projection: Projection = field(repr=False)
    read_tools: ReadTools = field(repr=False, default=DEFAULT_READ_TOOLS)

    @property
    def size_bytes(self) -> int:
        """The stub's own size in UTF-8 bytes."""
        return utf8_len(self.text)

    @property
    def limit(self) -> int:
        """The most bytes this stub could take: its budget scaled to its body (see
        :func:`stub_limit`)."""
        return stub_limit(self.size, self.budget)

    def as_dict(self) -> dict[str, object]:
        """The same stub as data, for callers that want JSON rather than text."""
        return {
            "marker": MARKER,
            "ref": str(self.ref),
            "tool": self.tool,
            "media_type": self.media_type,
            "size": self.size,
            "estimated_tokens": self.estimated_tokens,
            "complete": self.complete,
            "kind": self.projection.kind,
            "classification": self.projection.classification.value,
            "preview": self.projection.preview,
            "read_tools": {
                "read": self.read_tools.read,
                "lines": self.read_tools.lines,
                "grep": self.read_tools.grep,
                "query": self.read_tools.query,
            },
            "budget": self.budget.label,
            "text": self.text,
        }


_NOTE_BYTES = 512
"""The most a stub's redaction note takes (kinds and at most twenty line numbers fit)."""


def _check(text: str, key: bytes | None) -> str:
    data = text.encode("utf-8", "surrogatepass")
    if key is None:
        return hashlib.sha256(data).hexdigest()[:16]
    return tag(key, b"cargohold stub", data)[:16]


def render_stub(
    data: bytes,
    ref: Ref,
    *,
    media_type: str,
    tool: str | None = None,
    complete: bool = True,
    budget: Budget = Budget.BALANCED,
    failed: bool = False,
    read_tools: ReadTools = DEFAULT_READ_TOOLS,
    key: bytes | None = None,
    detection: Detection | None = None,
) -> Stub:
    """Render the stub of stored bytes (it may be made while they are written, but is never
    handed out before they are stored).

    Args:
        data: The exact stored bytes (the preview is made from them).
        ref: Their reference.
        media_type: The normalized media type.
        tool: The producing tool, if any.
        complete: ``False`` when the producer truncated its output.
        budget: The whole stub's byte budget, scaled down to the body's size
            (:func:`stub_limit`: at most a tenth of the body, never below 2 KiB).
        failed: The producing call failed or was cancelled: never ``compressible``.
        read_tools: The read tool names the surface offers.
        key: The store's marker key (its ``marker_key()``): the check is then one a guard
            holding the key trusts. Without one, a plain digest (tests, documentation).
        detection: ``detect(data, media_type=media_type, failed=failed)`` when the caller
            made it already (to record the kind and class on the artifact record before the
            put): the bytes are then not sniffed twice.
    """
    budget = Budget.parse(budget)
    secret = None if key is None else check_key(key)
    size = len(data)
    found = detection or detect(data, media_type=media_type, failed=failed)
    state = "complete" if complete else "truncated by its producer"
    binary = found.kind == "binary"

    def read_more(projection_kind: str, cls: ProjectionClass) -> str:
        # The query tool is offered only for JSON its projector could read: one it could not
        # (a fallback to verbatim excerpts) fails a query the same way.
        json_like = projection_kind in ("json", "ndjson") and cls is found.classification
        return f"{read_tools.hint(json_like=json_like, binary=binary)}\n"

    tail = read_more(found.kind, found.classification)
    closing_len = utf8_len(f"{MARKER} end of stub | budget {budget.label} | check ") + 16
    open_rule, close_rule = "--- preview ---\n", "--- end of preview ---\n"

    # The projection may change the class, never the kind: one count serves both headers.
    family = family_of(found.kind, media_type, found.detail)
    tokens = body_tokens(data, family)
    counted = {Family.IMAGE: " as an image", Family.BINARY: " as base64"}.get(family, "")

    # Whatever the preview shows (a marker may sit past it), the stub says what was redacted.
    note = redaction_note(data, _NOTE_BYTES)
    note_line = f"{note}\n" if note else ""

    def header(kind: str, detail: str | None, cls: ProjectionClass) -> tuple[str, int]:
        tool_part = f"tool {tool} | " if tool else ""
        what = f"{kind} ({detail})" if detail else kind
        return (
            f"{MARKER} {ref}\n"
            f"{tool_part}{media_type} | {size:,} bytes | about {tokens:,} tokens{counted} | "
            f"{state}\n"
            f"kept out of context | kind {what} | class {cls.value}\n"
            f"{note_line}"
        ), tokens

    fixed = utf8_len(tail) + closing_len + len(open_rule) + len(close_rule)
    head, tokens = header(found.kind, found.detail, found.classification)
    # The projection may fall back to another class; leave room for the longest header line.
    slack = 32
    limit = stub_limit(size, budget)
    room = limit - fixed - utf8_len(head) - slack - 1  # 1: the preview's closing newline
    if room < 64:
        raise UsageError("the budget leaves no room for a preview")
    projection = project(data, media_type=media_type, budget=room, failed=failed, detection=found)
    if projection.classification is not found.classification:
        head, tokens = header(projection.kind, projection.detail, projection.classification)
        tail = read_more(projection.kind, projection.classification)  # never longer
    preview = projection.preview
    if preview and not preview.endswith("\n"):
        preview += "\n"
    body = head + open_rule + preview + close_rule + tail
    text = f"{body}{MARKER} end of stub | budget {budget.label} | check {_check(body, secret)}"
    if utf8_len(text) > limit:  # the projector broke its contract: fail loudly, never leak
        raise AssertionError("stub over budget")
    return Stub(
        text=text,
        ref=ref,
        size=size,
        media_type=media_type,
        tool=tool,
        complete=complete,
        estimated_tokens=tokens,
        budget=budget,
        projection=projection,
        read_tools=read_tools,
    )


@dataclass(frozen=True, slots=True)
class StubInfo:
    """What a genuine stub says about itself."""

    ref: Ref
    budget: Budget


def parse_stub(text: str, *, key: bytes | None = None) -> StubInfo | None:
    """The stub's reference and budget if ``text`` is a genuine, unedited stub, else ``None``.

    Genuine means: the marker line first, the closing line last, the check matching everything
    before the closing line, and the whole within the budget the closing line names. A marker
    forged around other content, or a stub edited to carry more, fails one of these. With
    ``key`` the check must be the HMAC under it (what a tool cannot forge); without, the plain
    digest a keyless :func:`render_stub` writes.
    """
    secret = None if key is None else check_key(key)
    if not text.startswith(MARKER + " " + PREFIX) or utf8_len(text) > Budget.MAX:
        return None
    first_end = text.find("\n")
    last_start = text.rfind("\n") + 1
    if first_end < 0 or last_start <= first_end:
        return None
    first = _FIRST.fullmatch(text[:first_end])
    last = _LAST.fullmatch(text[last_start:])
    if first is None or last is None:
        return None
    budget = Budget[last.group(1).upper()]
    if utf8_len(text) > budget or not same(_check(text[:last_start], secret), last.group(2)):
        return None
    return StubInfo(Ref.parse(first.group(1)), budget)


def render_notice(
    *,
    outcome: str,
    reason: str,
    size: int,
    media_type: str,
    tool: str | None,
) -> str:
    """The bounded notice that replaces a body that could not be offloaded (no reference).

    It states what was withheld and why, never the body; well under 1 KiB.
    """
    source = f"tool {tool}" if tool else "a tool"
    what = "could not be stored" if outcome == "failed" else "was refused by the store"
    return (
        f"{MARKER} withheld ({outcome}: {reason}): {source} returned {size:,} bytes of "
        f"{media_type} that {what}; the raw output is not in this context.\n"
        "Nothing can be read back from this result. Retry the call later, or narrow it so it "
        "returns less."
    )


COMPACT_STUB_BYTES = 512
"""The most a compact stub (:func:`render_compact_stub`) takes, in UTF-8 bytes.

Sized for old results: a long run carries dozens of them at once, so each must cost about a
hundred tokens (the reference alone is about forty), not the kilobytes of a stub that stands
for a fresh result the model is about to read."""

_COMPACT_WHAT = {"result": "cleared tool result", "input": "cleared tool input"}
_CALL_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")
_PREVIEW_BYTES = 96
_FAMILY_HEAD = 2048


def _first_line(data: bytes, room: int) -> str:
    """The first non-blank line of a text body as a JSON string (quotes and control characters
    escaped: one line, whatever it holds) of at most ``room`` bytes, its text cut to at most
    :data:`_PREVIEW_BYTES` on a character edge (``...`` marks a cut); empty for a binary body
    or when not even a few characters fit."""
    if not looks_textual(data):
        return ""
    for raw in data[:4096].splitlines():
        line = raw.strip()
        if not line:
            continue
        limit = min(_PREVIEW_BYTES, room)
        while limit >= 8:
            text = cut_utf8(line, limit).decode("utf-8", "replace")
            if len(text.encode("utf-8", "surrogatepass")) < len(line):
                text += "..."
            quoted = json.dumps(text, ensure_ascii=False)
            over = utf8_len(quoted) - room
            if over <= 0:
                return quoted
            limit -= max(1, over)  # escapes take more than one byte: cut again, shorter
        return ""
    return ""


def render_compact_stub(
    data: bytes,
    ref: Ref,
    *,
    media_type: str,
    tool: str | None = None,
    call_id: str | None = None,
    what: str = "result",
    read_tools: ReadTools = DEFAULT_READ_TOOLS,
    key: bytes | None = None,
    size: int | None = None,
) -> Stub:
    """Render the compact stub of an old tool result (or tool input) cleared by compaction.

    A genuine ``light`` stub (:func:`parse_stub` accepts it, so does the guard) of at most
    :data:`COMPACT_STUB_BYTES`: the reference, the tool's name and the call's id (when they
    are short identifiers), size, media type and an estimate of the tokens, the body's first
    line (at most 96 bytes, verbatim, as a JSON string, when there is room), and the read tools,
    search first::

        [cargohold] artifact://sha256/<64 hex>
        cleared tool result | tool read_file | call toolu_01 | text/x-python | 24,310 bytes | about 5,654 tokens
        first line: "import os"
        find it: artifact_search(query) | read it: artifact_read(ref, offset, length), artifact_grep(ref, pattern)
        [cargohold] end of stub | budget light | check 1a2b3c4d5e6f7a8b

    It is handed out only once the bytes are stored under ``ref`` (it may be made while they
    are written: the offloader overlaps the two for large bodies). Same bytes, same facts,
    same key: the same stub, byte for byte (the tokens are the calibrated estimate of the media type's family,
    not a tokenizer's count, so an install with or without one gives the same text).

    Args:
        data: The exact stored bytes.
        ref: Their reference.
        media_type: The normalized media type.
        tool: The producing tool's name.
        call_id: The tool call's id (``tool_call_id``, ``tool_use_id``, ``call_id``).
        what: ``result`` (a tool's result) or ``input`` (the arguments of a tool call).
        read_tools: The read tool names the surface offers.
        key: The store's marker key (see :func:`render_stub`).
        size: The body's whole size when ``data`` is only its head (the artifact of a stub
            or segment already in the conversation, read in part: the kind, the token family
            and the first line come from the head).
    """  # noqa: E501 - the example line is the format, unbroken
    if what not in _COMPACT_WHAT:
        raise UsageError("a compact stub is of a result or an input")
    secret = None if key is None else check_key(key)
    # The kind decides the token family only: a 2 KiB head tells it (base64, binary, JSON,
    # code, prose) for a quarter of the cost of the 8 KiB a stub's projection sniffs, and a
    # stateless caller renders every cleared result's stub again on every turn.
    found = detect(data[:_FAMILY_HEAD], media_type=media_type)
    family = family_of(found.kind, media_type, found.detail)
    size = len(data) if size is None else size
    tokens = estimate_tokens(size, family)
    tools = read_tools
    # The read tools' schemas are in the request: the stub names the few that matter for an
    # old result, in as few bytes as will do (a run carries dozens of these stubs).
    if found.kind == "binary":  # lines and grep answer a binary body "unsupported"
        reads = f"{tools.read}(ref, offset, length) (base64 pages)"
    else:
        reads = f"{tools.read}(ref, offset, length), {tools.grep}(ref, pattern)"
    closing = f"{MARKER} end of stub | budget {Budget.LIGHT.label} | check "
    named = tool if tool and _TOOL_NAME.fullmatch(tool) else None
    called = call_id if call_id and _CALL_ID.fullmatch(call_id) else None
    # Long names, a long media type and a huge size could together pass the size: give up the
    # call's id, then the tool's name, then the signatures (in that order; each variant is a
    # fixed function of the facts, so the same facts still give the same stub).
    variants = [
        (named, called, f"find it: {tools.search}(query) | read it: {reads}\n"),
        (named, None, f"find it: {tools.search}(query) | read it: {reads}\n"),
        (None, None, f"find it: {tools.search}(query) | read it: {reads}\n"),
        (None, None, f"find it: {tools.search} | read it: {tools.read}, {tools.grep}\n"),
    ]
    for shown_tool, shown_call, hint in variants:
        facts = [_COMPACT_WHAT[what]]
        if shown_tool:
            facts.append(f"tool {shown_tool}")
        if shown_call:
            facts.append(f"call {shown_call}")
        facts += [fit(media_type, 80), f"{size:,} bytes", f"about {tokens:,} tokens"]
        head = f"{MARKER} {ref}\n{' | '.join(facts)}\n"
        room = COMPACT_STUB_BYTES - utf8_len(head) - utf8_len(hint) - utf8_len(closing) - 16
        if room >= 0:
            break
    else:
        raise UsageError("the read tools' names are too long for a compact stub")
    line = _first_line(data, room - 13)  # 13: "first line: " and its newline
    preview = f"first line: {line}\n" if line else ""
    body = head + preview + hint
    text = f"{body}{closing}{_check(body, secret)}"
    if utf8_len(text) > COMPACT_STUB_BYTES:  # every part is bounded above: never
        raise AssertionError("compact stub over its size")
    projection = Projection(found.kind, found.classification, preview, found.detail)
    return Stub(
        text=text,
        ref=ref,
        size=size,
        media_type=media_type,
        tool=tool,
        complete=True,
        estimated_tokens=tokens,
        budget=Budget.LIGHT,
        projection=projection,
        read_tools=read_tools,
    )


@dataclass(frozen=True, slots=True)
class CompactStubInfo:
    """What a genuine compact stub says about itself."""

    ref: Ref
    what: str
    """``result`` or ``input``."""


def parse_compact_stub(text: str, *, key: bytes | None = None) -> CompactStubInfo | None:
    """The reference and kind of ``text`` if it is a genuine compact stub
    (:func:`render_compact_stub`) under ``key``, else ``None``."""
    if not text.startswith(MARKER + " " + PREFIX) or utf8_len(text) > COMPACT_STUB_BYTES:
        return None
    info = parse_stub(text, key=key)
    if info is None or info.budget is not Budget.LIGHT:
        return None
    second = text.split("\n", 2)[1]
    for what, label in _COMPACT_WHAT.items():
        if second == label or second.startswith(label + " | "):
            return CompactStubInfo(info.ref, what)
    return None


__all__ = [
    "COMPACT_STUB_BYTES",
    "DEFAULT_READ_TOOLS",
    "MARKER",
    "STUB_FLOOR",
    "STUB_SHARE",
    "Budget",
    "CompactStubInfo",
    "Projection",
    "ProjectionClass",
    "ReadTools",
    "Stub",
    "StubInfo",
    "parse_compact_stub",
    "parse_stub",
    "render_compact_stub",
    "render_notice",
    "render_stub",
    "stub_limit",
]
