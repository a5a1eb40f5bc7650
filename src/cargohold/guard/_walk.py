"""One pass over a request: every leaf string measured, raw heavy parts located.

A walker knows each format's places (messages, content parts, tool calls and results, system
prompts, attachments) and walks every other key of the request generically, so content put where
no format expects it is still seen. For each leaf string it adds the UTF-8 size to a tally by
token family (text, JSON, base64, image) and, only when the leaf is at or above the heavy
threshold, checks whether it is a genuine stub or recovered segment. Stubs never exceed 16 KiB,
so under the default 32 KiB threshold no stub is ever parsed and the pass costs one ``len`` per
leaf; paths are rendered only for findings.

A tool result (and a structured tool input, measured as compact JSON) is also judged as a whole,
so a raw result split into many small parts is still a leak; so are the parts of one message (its
content list, a system prompt's blocks), images excepted: they cost pixels, not bytes.

Payloads an SDK encodes itself (``bytes``, a path, an open binary file: Anthropic's base64
sources take all three) are measured as the base64 they become, from their length, ``stat`` or
``fstat``/``seek``, never by reading them (a stream is left where it was). Keys are content too:
a long key is measured like a string, and a path names a key only when it is a short identifier.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, MappingView, Sequence, Set
from typing import Any, cast

import orjson

from cargohold._errors import UsageError
from cargohold._segment import OPEN as SEGMENT_OPEN
from cargohold._segment import parse_segment
from cargohold._stub import MARKER, parse_stub
from cargohold.guard._errors import LeakFinding

TEXT, JSON, B64, IMAGE, OPAQUE = range(5)
"""Token families of a leaf. IMAGE bytes are not tokens (an image costs a flat amount);
OPAQUE (reasoning signatures, encrypted reasoning) is neither counted nor judged."""

_STUB_START = MARKER + " artifact://"
_DATA_URL_MIN = 256
"""Shorter strings are tallied as text even if they are data URLs (a rounding error)."""
_B64_KEYS = frozenset({"data", "base64", "file_data", "b64_json", "image_data"})
_JSON_KEYS = frozenset({"arguments", "input", "args", "partial_json", "parameters"})
_IMAGE_TYPES = frozenset({"image_url", "image", "input_image"})
_OPAQUE_KEYS = frozenset({"signature", "encrypted_content"})
_TOOL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")
_KEY_MAX = 41
"""Keys up to this many characters are short enough to leave unmeasured (a rounding error)."""
_KEY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,40}")
"""The only keys a path shows verbatim; any other key is described, never shown."""
_PAYLOADS = (bytes, bytearray, memoryview, os.PathLike, io.IOBase)
"""What the SDKs accept in place of a base64 string and encode themselves."""
# LangChain fields that are never sent to a model (ToolMessage.artifact is documented as such).
_LANGCHAIN_SKIP = frozenset(
    {"artifact", "response_metadata", "usage_metadata", "id", "example", "lc_attributes"}
)

Node = tuple[Any, Any] | None
"""A path as a linked list of (parent, key or index); rendered only when a finding needs it."""


def render_path(node: Node, root: object = None) -> str:
    """``messages[3].content[1].image_url.url`` from its linked pieces, naming no content.

    A key is shown only when it matches ``[A-Za-z_][A-Za-z0-9_]{0,40}``; any other key (a
    sentence, a credential, 40 KiB of text) is described by its position among its mapping's
    keys, found again from ``root``, its type and its length: ``metadata.<key 3: str, 19 chars>``.
    """
    pieces: list[Any] = []
    while node is not None:
        node, piece = node
        pieces.append(piece)
    pieces.reverse()
    out: list[str] = []
    current: object = root
    known = root is not None
    for number, piece in enumerate(pieces):
        mapping = None
        if known:
            try:
                mapping, current = _step(current, piece, number == 0)
            except Exception:  # an object that does not answer as it did to the walk: unknown
                known = False
        if isinstance(piece, int) and not isinstance(piece, bool) and mapping is None:
            out.append(f"[{piece}]")
        elif isinstance(piece, str) and _KEY_NAME.fullmatch(piece):
            out.append(f".{piece}" if out else piece)
        else:
            name = _describe_key(piece, mapping)
            out.append(f".{name}" if out else name)
    return "".join(out)


def _step(current: object, piece: Any, first: bool) -> tuple[Mapping[Any, Any] | None, object]:
    """One step of a path from the request: the mapping ``piece`` is a key of (when it is one)
    and the value it leads to."""
    if first and piece == "messages" and not isinstance(current, Mapping):
        return None, current  # a LangChain request is the message list itself
    if isinstance(piece, int) and not isinstance(piece, bool) and not isinstance(current, Mapping):
        items = current if isinstance(current, Sequence) else list(cast("Iterable[Any]", current))
        return None, items[piece]  # a list, or a set or view the walk enumerated
    if not isinstance(current, Mapping) or piece not in current:
        view = _langchain_view(current)
        current = view if view is not None and piece in view else _plain(current)
    if not isinstance(current, Mapping):
        raise LookupError("not a mapping")
    return current, current[piece]


def _describe_key(key: object, mapping: Mapping[Any, Any] | None) -> str:
    position = ""
    if mapping is not None:
        try:
            position = next((f" {i}" for i, k in enumerate(mapping) if k is key or k == key), "")
        except Exception:  # a key whose comparison fails: described without its position
            position = ""
    if isinstance(key, str):
        return f"<key{position}: str, {len(key):,} chars>"
    return f"<key{position}: {type(key).__name__}>"


KeySource = Callable[[], "bytes | None"]
"""Gives the marker key the guard checks with, when a marker is first met (``None``: none
could be had, and no marker is trusted)."""


def marked(text: str) -> bool:
    """Whether ``text`` starts like a stub or a recovered segment (genuine or not)."""
    return text.startswith(_STUB_START) or text.startswith(SEGMENT_OPEN)


def genuine(text: str, key: bytes | None) -> bool:
    """Whether ``text`` is a stub or recovered segment made under ``key`` (its HMAC matches).

    No key, no trust: without one, nothing is genuine (a plain digest anyone can compute).
    """
    if key is None:
        return False
    if text.startswith(_STUB_START):
        return parse_stub(text, key=key) is not None
    if text.startswith(SEGMENT_OPEN):
        return parse_segment(text, key=key) is not None
    return False


def _utf8(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _json_size(value: object) -> int:
    """UTF-8 bytes of ``value`` as compact JSON (orjson; the standard library for what it
    refuses: integers over 64 bits)."""
    try:
        return len(orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS))
    except (TypeError, orjson.JSONEncodeError):
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        return _utf8(text)


def _tool_name(value: object) -> str | None:
    if isinstance(value, str) and _TOOL_NAME.fullmatch(value):
        return value
    return None


def _encoded(size: int) -> int:
    """Bytes of the base64 of ``size`` bytes: what goes on the wire."""
    return (size + 2) // 3 * 4


def _payload_size(value: object, cap: int) -> int | None:
    """Bytes an SDK would read from a payload it encodes itself; ``None`` when only reading it
    could tell. ``cap`` is enough to decide: a bounded read stops there."""
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, memoryview):
        return value.nbytes
    if isinstance(value, os.PathLike):
        return _path_size(value, cap)
    if isinstance(value, io.IOBase):
        return _stream_size(value)
    return None


def _path_size(path: os.PathLike[Any], cap: int) -> int | None:
    try:
        name = os.fspath(path)
        info = os.stat(name)
    except (OSError, TypeError, ValueError):
        return 0  # the SDK cannot read it either: it raises before sending anything
    if stat.S_ISDIR(info.st_mode):
        return 0
    if not stat.S_ISREG(info.st_mode):
        return None  # a FIFO or a device: opening or reading it may never end; never touched
    if info.st_size:
        return info.st_size
    try:  # some regular files report no size (procfs, sysfs): a bounded read settles it
        with open(name, "rb") as handle:
            return len(handle.read(cap))
    except OSError:
        return 0


def _stream_size(stream: io.IOBase) -> int | None:
    """What ``stream.read()`` would return, from ``fstat`` or seek/tell; the position is kept."""
    if stream.closed:
        return 0  # the SDK's read raises: nothing is sent
    try:
        position = stream.tell()
    except (OSError, ValueError):
        return None
    if isinstance(stream, io.StringIO):
        return len(stream.getvalue()[position:].encode("utf-8", "surrogatepass"))
    try:
        info: os.stat_result | None = os.fstat(stream.fileno())
    except (OSError, ValueError):
        info = None
    if info is not None and stat.S_ISREG(info.st_mode) and info.st_size:
        # a text stream's tell() is an opaque cookie: count its whole file (an upper bound)
        return (
            info.st_size if isinstance(stream, io.TextIOBase) else max(0, info.st_size - position)
        )
    try:
        if isinstance(stream, io.TextIOBase) or not stream.seekable():
            return None  # a pipe or socket: only reading it would tell
        try:
            end = stream.seek(0, io.SEEK_END)
        finally:
            stream.seek(position)
        peek = getattr(stream, "peek", None)
        if end <= position and callable(peek) and peek(1):
            return None  # reports no size yet has bytes (procfs)
    except (OSError, ValueError):
        return None
    return max(0, end - position)


def _plain(value: object) -> object:
    """A pydantic model (an SDK response item passed back as input) as plain data."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json", exclude_none=True)
        except Exception:  # not a pydantic v2 model after all: judged as nothing to walk
            return None
    return None


class Walker:
    """The state of one pass: tallies, findings and the tool-call names seen so far.

    Args:
        threshold: The heavy threshold in bytes.
        collect: A list to append every countable leaf string to (for the real tokenizer), or
            ``None`` for the fast pass.
        root: The request walked, to find a described key's position again for a finding.
        tool_thresholds: Per-tool thresholds for the results of the tools they name (the
            offloader's, so a result it kept inline is not a leak here).
        key: Gives the marker key stubs and segments must verify under, asked only when a
            heavy leaf carries a marker.
    """

    __slots__ = (
        "b64_bytes",
        "base",
        "calls",
        "collect",
        "findings",
        "floor",
        "group",
        "group_all",
        "group_hit",
        "image_bytes",
        "images",
        "index",
        "json_bytes",
        "key_source",
        "keyed",
        "messages",
        "payload_bytes",
        "root",
        "text_bytes",
        "threshold",
        "tool",
        "tool_thresholds",
        "where",
    )

    def __init__(
        self,
        threshold: int,
        collect: list[str] | None = None,
        *,
        root: object = None,
        tool_thresholds: Mapping[str, int] | None = None,
        key: KeySource | None = None,
    ) -> None:
        self.threshold = threshold
        self.base = threshold
        # Read only, never changed: the guard's own validated table is used as it is.
        self.tool_thresholds: Mapping[str, int] = tool_thresholds or {}
        # What the fast paths compare with: below every threshold that may apply.
        self.floor = min(threshold, *tool_thresholds.values()) if tool_thresholds else threshold
        self.key_source = key
        self.keyed: tuple[bytes | None] | None = None
        self.collect = collect
        self.root = root
        self.text_bytes = 0
        self.json_bytes = 0
        self.b64_bytes = 0
        self.image_bytes = 0
        self.payload_bytes = 0
        self.images = 0
        self.messages = 0
        self.findings: list[LeakFinding] = []
        self.calls: dict[str, str] = {}
        self.index: int | None = None
        self.tool: str | None = None
        self.where = "other"
        self.group: list[tuple[str, int]] | None = None
        self.group_all = True
        self.group_hit = False

    @property
    def request_bytes(self) -> int:
        """Bytes of every leaf string walked."""
        return self.text_bytes + self.json_bytes + self.b64_bytes + self.image_bytes

    # -- leaves and generic structure ------------------------------------------------------

    def leaf(self, text: str, node: Node, family: int) -> None:
        """Measure one leaf string; record a finding if it is raw and heavy."""
        size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        # A message's group sums all but images (they cost pixels, not bytes); a tool
        # result's sums everything.
        if self.group is not None and (family <= B64 or (self.group_all and family == IMAGE)):
            self.group.append((text, size))
        if family == TEXT:
            if size > _DATA_URL_MIN and text.startswith("data:"):
                family = B64
                self.b64_bytes += size
            else:
                self.text_bytes += size
        elif family == JSON:
            self.json_bytes += size
        elif family == B64:
            self.b64_bytes += size
        elif family == IMAGE:
            self.image_bytes += size
        else:
            return
        if self.collect is not None and family != IMAGE:
            self.collect.append(text)
        if size >= self.threshold:
            self.judge(text, size, node, "attachment" if family in (B64, IMAGE) else self.where)

    def judge(self, text: str, size: int, node: Node, where: str) -> None:
        """A leaf at or above the threshold: a finding unless a genuine stub or segment."""
        if not self.genuine(text):
            self.find(node, size, where, forged=marked(text))
            self.group_hit = True

    def genuine(self, text: str) -> bool:
        """Whether ``text`` is a stub or segment made under the guard's key."""
        if not marked(text):
            return False
        if self.keyed is None:  # the key is asked for once per pass, at the first marker
            self.keyed = (None if self.key_source is None else self.key_source(),)
        return genuine(text, self.keyed[0])

    def find(self, node: Node, size: int, where: str, *, forged: bool = False) -> None:
        """Record a finding at ``node`` (``forged``: it carries a marker that did not verify)."""
        path = render_path(node, self.root)
        finding = LeakFinding(path, self.index, size, self.tool, where, forged, self.threshold)
        self.findings.append(finding)

    def payload(self, value: object, node: Node, family: int) -> None:
        """Measure bytes, a path or a file the SDK will base64-encode, as that encoding."""
        if family == OPAQUE:
            return
        cap = (self.threshold // 4 + 1) * 3  # raw bytes whose encoding passes the threshold
        raw = _payload_size(value, cap)
        size = self.threshold if raw is None else _encoded(raw)
        if self.group is not None and (family <= B64 or self.group_all):
            self.group.append(("", size))
        if family == IMAGE:
            self.image_bytes += size
        else:
            self.b64_bytes += size
            self.payload_bytes += size
        if raw is None or size >= self.threshold:  # never a stub: a stub is text
            self.find(node, size, "attachment")
            self.group_hit = True

    def leaf_alone(self, text: str, node: Node, family: int) -> None:
        """A leaf judged on its own, outside the group being collected."""
        group, self.group = self.group, None
        self.leaf(text, node, family)
        self.group = group

    def key(self, key: object, node: Node, family: int = TEXT) -> None:
        """Measure a long key of the mapping at ``node`` as the text it is sent as."""
        if isinstance(key, str) and len(key) > _KEY_MAX:
            self.leaf(key, (node, key), JSON if family == JSON else TEXT)

    def any(self, value: object, node: Node, family: int = TEXT) -> None:
        """Walk any value: strings are leaves, mappings and sequences are descended."""
        if isinstance(value, str):
            self.leaf(value, node, family)
        elif type(value) is dict or isinstance(value, Mapping):
            self.mapping(value, node, family)
        elif type(value) is list or isinstance(value, list | tuple):
            for index, item in enumerate(value):
                if isinstance(item, str):
                    self.leaf(item, (node, index), family)
                else:
                    self.any(item, (node, index), family)
        elif value is None or isinstance(value, int | float):
            return
        elif isinstance(value, _PAYLOADS):  # before iterators: a file is one
            self.payload(value, node, family)
        elif isinstance(value, Set | Sequence | MappingView):  # the SDKs send these as lists
            for index, item in enumerate(cast("Iterable[Any]", value)):
                self.any(item, (node, index), family)
        elif isinstance(value, Iterator):
            raise UsageError(
                f"the request holds a one-shot iterator at {render_path(node, self.root)}; the "
                "guard cannot check it without consuming it: pass a list"
            )
        else:
            plain = _plain(value)
            if plain is not None:
                self.any(plain, node, family)

    def mapping(
        self, value: Mapping[Any, Any], node: Node, family: int = TEXT, *, parts: str | None = None
    ) -> None:
        """Walk a mapping, choosing each key's family from what the key and block type mean.

        Args:
            value: The mapping.
            node: Where it sits.
            family: The family of its place.
            parts: A key whose non-string value is a message's parts, judged as a whole.
        """
        kind = value.get("type")
        if kind in _IMAGE_TYPES and family != OPAQUE:
            self.images += 1
            family = IMAGE
        for key, item in value.items():
            if key in _OPAQUE_KEYS or (kind == "redacted_thinking" and key == "data"):
                continue
            if type(key) is not str or len(key) > _KEY_MAX:
                self.key(key, node, family)
            sub = family
            if family == TEXT:
                if key in _B64_KEYS and kind != "text":
                    sub = B64
                elif key in _JSON_KEYS:
                    sub = JSON
            if isinstance(item, str):
                if key == "type" and not self.group_all and self.group is not None:
                    self.leaf_alone(item, (node, key), sub)  # a part's kind, not its text
                else:
                    self.leaf(item, (node, key), sub)
            elif parts is not None and key == parts and item is not None:
                self.parts(item, (node, key), sub)
            elif item is not None:
                self.any(item, (node, key), sub)

    # -- groups: a tool result, a structured tool input, a message's parts ------------------

    def begin_group(
        self, *, attachments: bool = True
    ) -> tuple[list[tuple[str, int]] | None, bool, bool]:
        """Start collecting the leaves of one group; returns the outer state.

        Args:
            attachments: Whether images count toward the group (a tool result's do; a
                message's images are judged each alone: they cost pixels, not bytes, and a
                message may carry several small ones inline). Text, JSON and base64 always do.
        """
        outer = (self.group, self.group_hit, self.group_all)
        self.group, self.group_hit, self.group_all = [], False, attachments
        return outer

    def end_group(
        self,
        node: Node,
        outer: tuple[list[tuple[str, int]] | None, bool, bool],
        *,
        total: int | None = None,
    ) -> None:
        """Judge the group as a whole unless one of its parts was already a finding.

        Args:
            node: Where the group sits.
            outer: What :meth:`begin_group` returned.
            total: The group's size when it is not the sum of its leaves (compact JSON).
        """
        leaves, hit = self.group or [], self.group_hit
        self.group, self.group_hit, self.group_all = outer
        if hit:
            self.group_hit = True
            return
        size = sum(n for _, n in leaves) if total is None else total
        if size < self.threshold:
            return
        raw = size - sum(n for text, n in leaves if self.genuine(text))
        if raw >= self.threshold:
            self.find(node, raw, self.where)
            self.group_hit = True

    def parts(self, value: object, node: Node, family: int = TEXT) -> None:
        """Walk a message's content (or a system prompt) whose text parts add up: their text,
        not their ``type``, so that text in parts weighs what the same text as one string does."""
        outer = self.begin_group(attachments=False)
        self.any(value, node, family)
        self.end_group(node, outer)

    def tool_result(self, value: object, node: Node, tool: str | None) -> None:
        """Walk one tool result (any shape) as a group attributed to ``tool``, judged at the
        tool's own threshold when it has one."""
        saved = (self.tool, self.where, self.threshold)
        self.tool, self.where = tool, "tool_result"
        if tool is not None:
            self.threshold = self.tool_thresholds.get(tool, self.base)
        outer = self.begin_group()
        self.any(value, node, TEXT)
        self.end_group(node, outer)
        self.tool, self.where, self.threshold = saved

    def tool_input(self, value: object, node: Node, tool: str | None) -> None:
        """Walk a tool call's input: a JSON string is a leaf, an object is measured as JSON."""
        saved = (self.tool, self.where)
        self.tool, self.where = tool, "tool_arguments"
        if isinstance(value, str):
            self.leaf_alone(value, node, JSON)  # a call's input is judged alone, not summed
        elif value is not None:
            total = _json_size(value)
            outer = self.begin_group()
            before = self.json_bytes + self.text_bytes + self.b64_bytes + self.image_bytes
            self.any(value, node, JSON)
            after = self.json_bytes + self.text_bytes + self.b64_bytes + self.image_bytes
            self.json_bytes += max(0, total - (after - before))  # keys and punctuation
            self.end_group(node, outer, total=total)
        self.tool, self.where = saved

    def remember_call(self, call_id: object, name: object) -> str | None:
        """Note a tool call's id -> name, so its result can name the tool; the name, if safe."""
        tool = _tool_name(name)
        if isinstance(call_id, str) and tool is not None:
            self.calls[call_id] = tool
        return tool

    def called(self, call_id: object) -> str | None:
        """The tool a result answers, when its call was seen (and its name is a safe name)."""
        return _tool_name(self.calls.get(call_id)) if isinstance(call_id, str) else None

    def other(self, key: str, value: object) -> None:
        """A top-level request key that is not a message list: walked generically."""
        self.index, self.tool = None, None
        if type(key) is not str or len(key) > _KEY_MAX:
            self.where = "other"
            self.key(key, None)
        if key in ("tools", "functions", "tool_choice", "response_format", "text"):
            self.where = "tool_definitions" if key in ("tools", "functions") else "other"
            self.any(value, (None, key), JSON)
        elif key in ("system", "instructions"):
            self.where = "system"
            self.messages += 1
            self.parts(value, (None, key), TEXT)
        else:
            self.where = "other"
            self.any(value, (None, key), TEXT)


# -- OpenAI Chat Completions ------------------------------------------------------------------

_SYSTEM_ROLES = frozenset({"system", "developer"})
_OTHER_KEYS = frozenset(
    {"tools", "functions", "tool_choice", "response_format", "text", "system", "instructions"}
)
"""Top-level keys :meth:`Walker.other` gives a meaning of their own (JSON, a system prompt)."""


def walk_openai_chat(walker: Walker, request: Mapping[str, Any]) -> None:
    """``{"model", "messages": [...], "tools": [...], ...}`` of ``chat.completions.create``."""
    floor = walker.floor
    for key, value in request.items():
        if key == "messages" and (
            type(value) is list or (isinstance(value, Sequence) and not isinstance(value, str))
        ):
            _chat_messages(walker, value, (None, "messages"))
        elif type(key) is not str or len(key) > _KEY_MAX or key in _OTHER_KEYS:
            walker.other(key, value)
        elif (
            type(value) is str
            and value.isascii()
            and len(value) <= _DATA_URL_MIN
            and len(value) < floor
        ):
            walker.text_bytes += len(value)  # the model's name and such: a short string
            if walker.collect is not None:
                walker.collect.append(value)
        elif value is None or type(value) in (int, float, bool):
            continue  # a number or a flag: nothing to measure
        else:
            walker.other(key, value)


def _chat_messages(walker: Walker, messages: Sequence[Any], base: Node) -> None:
    if walker.collect is not None:  # the counting pass: the general path, collecting texts
        walker.messages += len(messages)
        for index, message in enumerate(messages):
            _chat_other(walker, message, index, base)
        walker.index, walker.tool = None, None
        return
    try:
        _chat_loop(walker, messages, base)
    except TypeError as exc:  # len() of a key that is not a string (see _chat_loop)
        for message in messages:
            if type(message) is dict and not all(type(key) is str for key in message):
                raise UsageError("a chat message's keys are strings") from exc
        raise


def _chat_loop(walker: Walker, messages: Sequence[Any], base: Node) -> None:
    # The hot path of the benchmark, in one function (after a 2 MiB dump has evicted the
    # caches, every other function it would call costs a cache miss): plain string leaves are
    # measured into local tallies, the usual tool call {id, type, function: {name, arguments}}
    # too; anything else (a heavy or data-URL string, a long key, parts, an unusual call) goes
    # to the general path, _chat_value. A key is checked by its len() alone, the cheapest test
    # there is: a key that is not a string (no chat message has one) raises TypeError, made a
    # UsageError by the caller. The floor: a tool result under its own (lower) threshold must
    # reach the general path. The counting pass (collect) never comes here.
    threshold = walker.floor
    calls = walker.calls
    text_bytes = 0
    json_bytes = 0
    walker.messages += len(messages)
    for index, message in enumerate(messages):
        if type(message) is not dict:
            _chat_other(walker, message, index, base)
            continue
        for key, value in message.items():
            if type(value) is str:
                if value.isascii():
                    size = len(value)
                else:
                    size = len(value.encode("utf-8", "surrogatepass"))
                if (
                    size < threshold
                    # value[0] first: one index is cheaper than a startswith call
                    and (size <= _DATA_URL_MIN or value[0] != "d" or not value.startswith("data:"))
                    and len(key) <= _KEY_MAX  # a long key is content: measured by the helper
                ):
                    text_bytes += size
                    continue
            elif value is None:
                if len(key) <= _KEY_MAX:
                    continue
            elif key == "tool_calls" and type(value) is list:
                for position, call in enumerate(value):
                    # Exactly {id, type, function: {name, arguments}}, short ASCII strings (at
                    # most a quarter of the threshold in characters, so under it in bytes).
                    if type(call) is dict and len(call) == 3:
                        try:
                            function, call_id, kind = call["function"], call["id"], call["type"]
                            if type(function) is dict and len(function) == 2:
                                name, arguments = function["name"], function["arguments"]
                            else:
                                name = arguments = None
                        except KeyError:
                            name = arguments = None
                        if (
                            type(arguments) is str
                            and type(name) is str
                            and type(call_id) is str
                            and type(kind) is str
                            and arguments.isascii()
                            and (len(call_id) + len(kind) + len(name) + len(arguments)) * 4
                            < threshold
                        ):
                            calls[call_id] = name  # validated when a finding names it
                            text_bytes += len(call_id) + len(kind) + len(name)
                            json_bytes += len(arguments)
                            continue
                    walker.index, walker.tool, walker.where = index, None, "text"
                    _chat_tool_call(walker, call, (((base, index), key), position))
                continue
            _chat_value(walker, message, index, (base, index), key, value)
    walker.text_bytes += text_bytes
    walker.json_bytes += json_bytes
    walker.index, walker.tool = None, None


def _chat_other(walker: Walker, message: Any, index: int, base: Node) -> None:
    plain = message if isinstance(message, Mapping) else _plain(message)
    if isinstance(plain, Mapping):
        for key, value in plain.items():
            if value is not None:
                _chat_value(walker, plain, index, (base, index), key, value)
            else:
                walker.key(key, (base, index))
    else:
        walker.index, walker.tool, walker.where = index, None, "other"
        walker.any(message, (base, index))


def _chat_value(
    walker: Walker, message: Mapping[str, Any], index: int, node: Node, key: str, value: Any
) -> None:
    role = message.get("role")
    walker.index, walker.tool = index, None
    walker.where = "system" if role in _SYSTEM_ROLES else "text"
    if type(key) is not str or len(key) > _KEY_MAX:
        walker.key(key, node)
    if key == "content" and role in ("tool", "function"):
        tool = walker.called(message.get("tool_call_id")) if role == "tool" else None
        walker.tool_result(value, (node, key), tool or _tool_name(message.get("name")))
    elif key == "content" and type(value) is list:
        _chat_parts(walker, value, (node, key))
    elif key == "content" and not isinstance(value, str):
        walker.parts(value, (node, key))
    elif key == "tool_calls" and type(value) is list:
        for position, call in enumerate(value):
            _chat_tool_call(walker, call, ((node, key), position))
    elif key == "function_call" and isinstance(value, Mapping):
        _chat_tool_call(walker, {"function": value}, (node, key), bare=True)
    else:
        walker.any(value, (node, key))


def _chat_parts(walker: Walker, parts: list[Any], node: Node) -> None:
    """A message's content parts: text parts inline, the rest generically; then the message
    judged as a whole (the texts of its parts and its non-image attachments)."""
    threshold = walker.threshold
    collect = walker.collect
    found = len(walker.findings)
    outer = None  # a group, begun at the first part walked generically (most parts are text)
    text_bytes = 0
    texts = 0  # the text of the text parts, not their "type"
    for position, part in enumerate(parts):
        if type(part) is not dict or part.get("type") != "text":
            if outer is None:
                outer = walker.begin_group(attachments=False)
            walker.any(part, (node, position))
            continue
        plain = len(part) == 2 and "text" in part  # exactly {"type", "text"}: no key to check
        for key, value in part.items():
            if not plain and (type(key) is not str or len(key) > _KEY_MAX):
                walker.key(key, (node, position))
            if type(value) is str:
                size = len(value) if value.isascii() else _utf8(value)
                text_bytes += size
                if key != "type":
                    texts += size
                if collect is not None:
                    collect.append(value)
                if size >= threshold:
                    walker.judge(value, size, ((node, position), key), walker.where)
            elif value is not None:
                walker.any(value, ((node, position), key))
    walker.text_bytes += text_bytes
    leaves: list[tuple[str, int]] = []
    if outer is not None:
        leaves = walker.group or []
        walker.group, walker.group_hit, walker.group_all = outer
    if len(walker.findings) > found:  # a part was a finding already: not judged twice
        return
    size = texts + sum(n for _, n in leaves) if leaves else texts
    if size < threshold:
        return
    # Rare: at or over the threshold as a whole; genuine stubs and segments do not count.
    inline = [
        (value, _utf8(value))
        for part in parts
        if type(part) is dict and part.get("type") == "text"
        for key, value in part.items()
        if key != "type" and type(value) is str
    ]
    raw = size - sum(n for text, n in [*inline, *leaves] if walker.genuine(text))
    if raw >= threshold:
        walker.find(node, raw, walker.where)


def _chat_tool_call(walker: Walker, call: Any, node: Node, *, bare: bool = False) -> None:
    if type(call) is not dict and not isinstance(call, Mapping):
        walker.any(call, node)
        return
    threshold = walker.threshold
    function = call.get("function")
    name = function.get("name") if type(function) is dict or isinstance(function, Mapping) else None
    call_id = call.get("id")
    if type(call_id) is str and type(name) is str:
        walker.calls[call_id] = name  # validated when a finding names it
    for key, value in call.items():
        if type(key) is not str or len(key) > _KEY_MAX:
            walker.key(key, node)
        if key == "function" and (type(value) is dict or isinstance(value, Mapping)):
            fnode = node if bare else (node, key)
            for fkey, fvalue in value.items():
                if type(fkey) is not str or len(fkey) > _KEY_MAX:
                    walker.key(fkey, fnode)
                if fkey == "arguments":
                    if type(fvalue) is str and len(fvalue) * 4 < threshold and fvalue.isascii():
                        walker.json_bytes += len(fvalue)
                        if walker.collect is not None:
                            walker.collect.append(fvalue)
                    else:
                        walker.tool_input(fvalue, (fnode, fkey), _tool_name(name))
                elif type(fvalue) is str and len(fvalue) * 4 < threshold:
                    walker.text_bytes += len(fvalue)
                    if walker.collect is not None:
                        walker.collect.append(fvalue)
                else:
                    walker.any(fvalue, (fnode, fkey))
        elif type(value) is str and len(value) * 4 < threshold:
            walker.text_bytes += len(value)  # ids and types: short, tallied as characters
            if walker.collect is not None:
                walker.collect.append(value)
        else:
            walker.any(value, (node, key))


# -- OpenAI Responses -------------------------------------------------------------------------


def walk_openai_responses(walker: Walker, request: Mapping[str, Any]) -> None:
    """``{"model", "input": str | [...], "instructions", "tools", ...}`` of ``responses.create``."""
    for key, value in request.items():
        if key == "input":
            walker.where = "text"
            if isinstance(value, str):
                walker.index, walker.tool = 0, None
                walker.messages += 1
                walker.leaf(value, (None, key), TEXT)
            elif isinstance(value, Sequence):
                for index, item in enumerate(value):
                    _response_item(walker, item, index, ((None, key), index))
            else:
                walker.other(key, value)
        else:
            walker.other(key, value)


def _response_item(walker: Walker, item: Any, index: int, node: Node) -> None:
    walker.index, walker.tool = index, None
    walker.messages += 1
    if not isinstance(item, Mapping):
        plain = _plain(item)
        if not isinstance(plain, Mapping):
            walker.where = "other"
            walker.any(item, node)
            return
        item = plain
    kind = item.get("type")
    role = item.get("role")
    walker.where = "system" if role in _SYSTEM_ROLES else "text"
    if isinstance(kind, str) and kind.endswith("_output"):
        tool = walker.called(item.get("call_id"))
        for key, value in item.items():
            walker.key(key, node)
            if key == "output":
                walker.tool_result(value, (node, key), tool)
            else:
                walker.any(value, (node, key))
        return
    if isinstance(kind, str) and kind.endswith("_call"):
        tool = walker.remember_call(item.get("call_id") or item.get("id"), item.get("name"))
        walker.tool = tool
        for key, value in item.items():
            walker.key(key, node)
            if key in ("arguments", "input", "action"):
                walker.tool_input(value, (node, key), tool)
            elif key == "output":  # mcp_call carries its own result
                walker.tool_result(value, (node, key), tool)
            else:
                walker.any(value, (node, key))
        return
    walker.mapping(item, node, parts="content")


# -- Anthropic Messages -----------------------------------------------------------------------


def walk_anthropic(walker: Walker, request: Mapping[str, Any]) -> None:
    """``{"model", "system", "messages": [...], "tools", ...}`` of ``messages.create``."""
    for key, value in request.items():
        if key == "messages" and isinstance(value, Sequence) and not isinstance(value, str):
            base: Node = (None, "messages")
            if walker.collect is None:  # the counting pass takes the general path
                _anthropic_loop(walker, value, base)
                continue
            for index, message in enumerate(value):
                _anthropic_message(walker, message, index, (base, index))
        else:
            walker.other(key, value)


_FLAT = (str, int, float, bool, type(None))


def _anthropic_loop(walker: Walker, messages: Sequence[Any], base: Node) -> None:
    # The usual messages measured inline, as _chat_loop does for chat: a string content, or
    # blocks that are exactly {type: text, text}, {type: tool_use, id, name, input: a flat
    # object} or {type: tool_result, tool_use_id, content: a string}, with short keys, no
    # string at or over the lowest threshold or holding a data URL, and the message's parts
    # summing under it (so no finding is possible). Anything else takes the general path,
    # _anthropic_message, message by message; tests/test_guard_paths.py holds the two to the
    # same tallies and findings.
    floor = walker.floor
    text_bytes = 0
    plain = 0
    for index, message in enumerate(messages):
        if type(message) is dict and len(message) == 2:
            # The commonest: exactly {role, content}, two strings (inline, no call).
            role, content = message.get("role"), message.get("content")
            if type(role) is str and type(content) is str and role.isascii():
                if content.isascii():
                    size = len(content)
                else:
                    size = len(content.encode("utf-8", "surrogatepass"))
                if (
                    size < floor
                    and len(role) <= _DATA_URL_MIN
                    and len(role) < floor
                    and (size <= _DATA_URL_MIN or not content.startswith("data:"))
                ):
                    text_bytes += len(role) + size
                    plain += 1
                    continue
        if type(message) is not dict or not _anthropic_plain(walker, message, floor):
            _anthropic_message(walker, message, index, (base, index))
    walker.text_bytes += text_bytes
    walker.messages += plain


def _small_text(value: object, floor: int) -> int:
    """UTF-8 bytes of ``value`` if it is a string the fast paths may tally (under ``floor``,
    not a data URL), else -1."""
    if type(value) is not str:
        return -1
    size = len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    if size >= floor or (size > _DATA_URL_MIN and value.startswith("data:")):
        return -1
    return size


def _flat_input(value: object, floor: int) -> int:
    """Compact-JSON bytes of a tool call's input if the fast paths may tally it (an object of
    short keys and scalar values, not typed as an image, under ``floor``), else -1."""
    if (
        type(value) is not dict
        or value.get("type") in _IMAGE_TYPES
        or not all(
            type(k) is str and len(k) <= _KEY_MAX and type(v) in _FLAT for k, v in value.items()
        )
    ):
        return -1
    size = _json_size(value)
    return size if size < floor else -1


def _anthropic_plain(walker: Walker, message: dict[Any, Any], floor: int) -> bool:
    """Tally ``message`` if it has the usual shape (see :func:`_anthropic_loop`); ``False``,
    with nothing tallied, if not."""
    text = 0  # text-family bytes
    group = 0  # what the message's group sums: the parts, not the text blocks' kind
    data = 0  # JSON bytes of tool inputs
    calls: list[tuple[object, object]] = []
    for key, value in message.items():
        if type(key) is not str or len(key) > _KEY_MAX:
            return False
        if type(value) is str:
            size = _small_text(value, floor)
            if size < 0:
                return False
            text += size
        elif key == "content" and type(value) is list:
            for block in value:
                if type(block) is not dict:
                    return False
                kind = block.get("type")
                strings: tuple[object, ...]
                if kind == "text" and len(block) == 2:
                    strings = (block.get("text"),)
                    text += 4  # "text", the block's kind: measured, not summed
                elif kind == "tool_use" and len(block) == 4:
                    size = _flat_input(block.get("input"), floor)
                    if size < 0:
                        return False
                    data += size  # measured as compact JSON, judged alone
                    strings = (kind, block.get("id"), block.get("name"))
                    calls.append((block.get("id"), block.get("name")))
                elif kind == "tool_result" and len(block) == 3:
                    size = _small_text(block.get("content"), floor)
                    if size < 0:
                        return False
                    text += size  # a group of its own: one string under the floor
                    strings = (kind, block.get("tool_use_id"))
                else:
                    return False
                for string in strings:
                    if (
                        type(string) is str
                        and string.isascii()
                        and len(string) <= _DATA_URL_MIN
                        and len(string) < floor
                    ):
                        size = len(string)  # an id, a name, a kind: short ASCII, inline
                    else:
                        size = _small_text(string, floor)
                        if size < 0:
                            return False
                    text += size
                    group += size
            if group >= floor:
                return False
        elif value is not None:
            return False
    walker.messages += 1
    walker.text_bytes += text
    walker.json_bytes += data
    for call_id, name in calls:
        walker.remember_call(call_id, name)
    return True


def _anthropic_message(walker: Walker, message: Any, index: int, node: Node) -> None:
    walker.index, walker.tool = index, None
    walker.where = "text"
    walker.messages += 1
    if not isinstance(message, Mapping):
        plain = _plain(message)
        if not isinstance(plain, Mapping):
            walker.any(message, node)
            return
        message = plain
    for key, value in message.items():
        walker.key(key, node)
        if key == "content" and isinstance(value, list | tuple):
            outer = walker.begin_group(attachments=False)
            for position, block in enumerate(value):
                _anthropic_block(walker, block, ((node, key), position))
            walker.where, walker.tool = "text", None
            walker.end_group((node, key), outer)
        elif key == "content" and value is not None and not isinstance(value, str):
            walker.parts(value, (node, key))
        elif isinstance(value, str):
            walker.leaf(value, (node, key), TEXT)
        elif value is not None:
            walker.any(value, (node, key))


def _anthropic_block(walker: Walker, block: Any, node: Node) -> None:
    walker.tool, walker.where = None, "text"
    if not isinstance(block, Mapping):
        walker.any(block, node)
        return
    kind = block.get("type")
    if kind == "text":
        for key, value in block.items():
            walker.key(key, node)
            if key == "type" and isinstance(value, str):
                walker.leaf_alone(value, (node, key), TEXT)  # a block's kind, not its text
            elif isinstance(value, str):
                walker.leaf(value, (node, key), TEXT)
            elif value is not None:
                walker.any(value, (node, key))
    elif isinstance(kind, str) and kind.endswith("tool_use"):
        tool = walker.remember_call(block.get("id"), block.get("name"))
        for key, value in block.items():
            walker.key(key, node)
            if key == "input":
                walker.tool_input(value, (node, key), tool)
            else:
                walker.any(value, (node, key))
    elif isinstance(kind, str) and kind.endswith("tool_result"):
        tool = walker.called(block.get("tool_use_id"))
        for key, value in block.items():
            walker.key(key, node)
            if key == "content":
                walker.tool_result(value, (node, key), tool)
            else:
                walker.any(value, (node, key))
    else:
        walker.mapping(block, node)


# -- LangChain messages -----------------------------------------------------------------------

_LC_TOOL_KINDS = frozenset({"tool", "function"})


def _langchain_base() -> type | None:
    """langchain-core's ``BaseMessage``, when langchain-core is loaded (never imported here)."""
    module = sys.modules.get("langchain_core.messages")
    base = getattr(module, "BaseMessage", None) if module is not None else None
    return base if isinstance(base, type) else None


_LC_FIELDS = ("name", "tool_call_id", "tool_calls", "invalid_tool_calls")


def _langchain_view(message: Any, base: type | None = None) -> Mapping[str, Any] | None:
    """A LangChain message (object, dict form, ``(role, content)`` tuple or string) as a dict.

    ``base`` is :func:`_langchain_base` (looked up once per walk by the caller)."""
    if base is None:
        base = _langchain_base()
    if base is not None and isinstance(message, base):
        # A pydantic model's fields are in its __dict__: reading them there skips pydantic's
        # __getattr__, which a missing attribute (tool_call_id on a HumanMessage) goes through.
        fields = message.__dict__
        view: dict[str, Any] = {"type": fields.get("type"), "content": fields.get("content")}
        for name in _LC_FIELDS:
            found = fields.get(name)
            if found:
                view[name] = found
        extra = fields.get("additional_kwargs")
        if extra:
            view["additional_kwargs"] = extra
        return view
    if isinstance(message, str):
        return {"type": "human", "content": message}
    if isinstance(message, tuple) and len(message) == 2:
        return {"type": message[0], "content": message[1]}
    if isinstance(message, Mapping):
        data = message.get("data")
        if "content" not in message and isinstance(data, Mapping) and "type" in message:
            return {"type": message["type"], **data}
        return message
    return None


def walk_langchain(walker: Walker, request: Any) -> None:
    """A list of LangChain messages, or a mapping whose ``messages`` key holds one."""
    if isinstance(request, Mapping):
        for key, value in request.items():
            if key == "messages" and isinstance(value, Sequence) and not isinstance(value, str):
                _langchain_messages(walker, value, (None, "messages"))
            else:
                walker.other(key, value)
    else:
        _langchain_messages(walker, request, (None, "messages"))


def _langchain_plain(walker: Walker, message: Any, message_type: type, floor: int) -> bool:
    """Tally a LangChain message object of the usual shape inline, as the general path would
    (its kind, a string content, name, tool_call_id, tool calls with a flat ``args``), when no
    part of it can be a finding; ``False``, with nothing tallied, for anything else (a list
    content, additional_kwargs, invalid tool calls, a string over the lowest threshold).
    tests/test_guard_paths.py holds it to the general path."""
    if not isinstance(message, message_type):
        return False
    fields = message.__dict__
    if fields.get("additional_kwargs") or fields.get("invalid_tool_calls"):
        return False
    text = 0
    data = 0
    for value in (fields.get("type"), fields.get("content")):
        size = _small_text(value, floor)
        if size < 0:
            return False
        text += size
    for name in ("name", "tool_call_id"):
        value = fields.get(name)
        if value:
            size = _small_text(value, floor)
            if size < 0:
                return False
            text += size
    pairs: list[tuple[object, object]] = []
    calls = fields.get("tool_calls")
    if calls:
        if type(calls) is not list:
            return False
        for call in calls:
            if type(call) is not dict or len(call) != 4:  # {name, args, id, type}
                return False
            size = _flat_input(call.get("args"), floor)
            if size < 0:
                return False
            data += size
            for value in (call.get("name"), call.get("id"), call.get("type")):
                size = _small_text(value, floor)
                if size < 0:
                    return False
                text += size
            pairs.append((call.get("id"), call.get("name")))
    walker.messages += 1
    walker.text_bytes += text
    walker.json_bytes += data
    for call_id, call_name in pairs:
        walker.remember_call(call_id, call_name)
    return True


def _langchain_messages(walker: Walker, messages: Sequence[Any], base: Node) -> None:
    message_type = _langchain_base()
    floor = walker.floor
    fast = walker.collect is None and message_type is not None  # counting: the general path
    for index, message in enumerate(messages):
        if (
            fast
            and message_type is not None
            and _langchain_plain(walker, message, message_type, floor)
        ):
            continue
        node = (base, index)
        walker.index, walker.tool = index, None
        walker.messages += 1
        view = _langchain_view(message, message_type)
        if view is None:
            walker.where = "other"
            walker.any(message, node)
            continue
        kind = view.get("type") or view.get("role")
        walker.where = "system" if kind in ("system", "developer") else "text"
        for call in view.get("tool_calls") or ():
            if isinstance(call, Mapping):
                walker.remember_call(call.get("id"), call.get("name"))
        for key, value in view.items():
            walker.key(key, node)
            if key in _LANGCHAIN_SKIP or value is None:
                continue
            if key == "content" and kind in _LC_TOOL_KINDS:
                tool = _tool_name(view.get("name")) or walker.called(view.get("tool_call_id"))
                walker.tool_result(value, (node, key), tool)
            elif key in ("tool_calls", "invalid_tool_calls") and isinstance(value, Sequence):
                for position, call in enumerate(value):
                    _langchain_tool_call(walker, call, ((node, key), position))
            elif key == "additional_kwargs" and isinstance(value, Mapping):
                _langchain_kwargs(walker, value, (node, key))
            elif isinstance(value, str):
                walker.leaf(value, (node, key), TEXT)
            elif key == "content":
                walker.parts(value, (node, key))
            else:
                walker.any(value, (node, key))
            walker.where = "system" if kind in ("system", "developer") else "text"


def _langchain_tool_call(walker: Walker, call: Any, node: Node) -> None:
    if not isinstance(call, Mapping):
        walker.any(call, node)
        return
    tool = _tool_name(call.get("name"))
    for key, value in call.items():
        walker.key(key, node)
        if key == "args":
            walker.tool_input(value, (node, key), tool)
        else:
            walker.any(value, (node, key))


def _langchain_kwargs(walker: Walker, kwargs: Mapping[str, Any], node: Node) -> None:
    for key, value in kwargs.items():
        walker.key(key, node)
        if key == "tool_calls" and isinstance(value, Sequence):
            for position, call in enumerate(value):
                _chat_tool_call(walker, call, ((node, key), position))
        elif key == "function_call" and isinstance(value, Mapping):
            _chat_tool_call(walker, {"function": value}, (node, key), bare=True)
        else:
            walker.any(value, (node, key))
