"""One pass over a request: every leaf string measured, raw heavy parts located.

The formats' walks (:mod:`cargohold.guard._formats`) know each format's places (messages,
content parts, tool calls and results, system prompts, attachments); the :class:`Walker` they
drive walks every other key of the request generically, so content put where no format expects
it is still seen. For each leaf string it adds the UTF-8 size to a tally by
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
import math
import os
import re
import stat
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, MappingView, Sequence, Set
from typing import Any, cast

import orjson

from cargohold._errors import UsageError
from cargohold._segment import OPEN as SEGMENT_OPEN
from cargohold._segment import parse_segment
from cargohold._stub import MARKER, parse_stub
from cargohold._tokens import BYTES_PER_TOKEN, Family
from cargohold.guard._errors import LeakFinding

TEXT, JSON, B64, IMAGE = range(4)
"""Token families of a leaf. IMAGE bytes are not tokens (an image costs a flat amount)."""

_STUB_START = MARKER + " artifact://"
_DATA_URL_MIN = 256
"""Shorter strings are tallied as text even if they are data URLs (a rounding error)."""
_B64_KEYS = frozenset({"data", "base64", "file_data", "b64_json", "image_data"})
_JSON_KEYS = frozenset({"arguments", "input", "args", "partial_json", "parameters"})
_IMAGE_TYPES = frozenset({"image_url", "image", "input_image"})
_TOOL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")
_KEY_MAX = 41
"""Keys up to this many characters are short enough to leave unmeasured (a rounding error)."""
_KEY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,40}")
"""The only keys a path shows verbatim; any other key is described, never shown."""
_PROSE_BYTES = BYTES_PER_TOKEN[Family.PROSE]
"""Bytes of text a token id stands for, as the estimate reckons them."""
_PAYLOADS = (bytes, bytearray, memoryview, os.PathLike, io.IOBase)
"""What the SDKs accept in place of a base64 string and encode themselves."""
# LangChain fields that are never sent to a model (ToolMessage.artifact is documented as such).
_LANGCHAIN_SKIP = frozenset(
    {"artifact", "response_metadata", "usage_metadata", "id", "example", "lc_attributes"}
)

Node = tuple[Any, Any] | None
"""A path as a linked list of (parent, key or index); rendered only when a finding needs it."""

Opaque = Mapping[str, "Opaque | None"]
"""Keys of one mapping whose value only the provider can read (reasoning signatures, encrypted
reasoning): ``None``, the key's string value is neither counted nor judged; a nested table, the
key's mapping value is walked with that table. Given only where a provider's schema puts such a
value (see :mod:`cargohold.guard._formats`); the same key anywhere else is content."""

_NO_OPAQUE: Opaque = types.MappingProxyType({})


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
        "tokens",
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
        self.tokens = 0
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

    def token_ids(self, count: int, node: Node) -> None:
        """A prompt given as ``count`` token ids (the legacy completions API takes them): counted
        as tokens, exactly; judged as the text they stand for, at the calibrated bytes per token
        of prose (never a stub: a stub is text)."""
        self.tokens += count
        size = math.ceil(count * _PROSE_BYTES)
        if size >= self.threshold:
            self.find(node, size, self.where)
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
        self,
        value: Mapping[Any, Any],
        node: Node,
        family: int = TEXT,
        *,
        parts: str | None = None,
        opaque: Opaque = _NO_OPAQUE,
    ) -> None:
        """Walk a mapping, choosing each key's family from what the key and block type mean.

        Args:
            value: The mapping.
            node: Where it sits.
            family: The family of its place.
            parts: A key whose non-string value is a message's parts, judged as a whole.
            opaque: Its keys whose values only the provider reads (see :data:`Opaque`), given
                by a format's walk where the provider's schema puts them; none by default.
        """
        kind = value.get("type")
        if type(kind) is str and kind in _IMAGE_TYPES:  # a type that is not a string: content
            self.images += 1
            family = IMAGE
        for key, item in value.items():
            if type(key) is not str or len(key) > _KEY_MAX:
                self.key(key, node, family)
            sub = family
            if family == TEXT:
                if key in _B64_KEYS and kind != "text":
                    sub = B64
                elif key in _JSON_KEYS:
                    sub = JSON
            if opaque and type(key) is str and key in opaque:
                inner = opaque[key]
                if inner is None and type(item) is str:
                    continue  # opaque where the schema says so: neither counted nor judged
                if inner is not None and isinstance(item, Mapping):
                    self.mapping(item, (node, key), sub, opaque=inner)
                    continue
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


# -- shared by the formats' fast paths ------------------------------------------------------

_FLAT = (str, int, float, bool, type(None))


def _small_text(value: object, floor: int) -> int:
    """UTF-8 bytes of ``value`` if it is a string the fast paths may tally (under ``floor``,
    not a data URL), else -1."""
    if type(value) is not str:
        return -1
    size = len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    if size >= floor or (size > _DATA_URL_MIN and value.startswith("data:")):
        return -1
    return size


def _is_image_type(kind: object) -> bool:
    return type(kind) is str and kind in _IMAGE_TYPES


def _flat_input(value: object, floor: int) -> int:
    """Compact-JSON bytes of a tool call's input if the fast paths may tally it (an object of
    short keys and scalar values, not typed as an image, under ``floor``), else -1."""
    if (
        type(value) is not dict
        or _is_image_type(value.get("type"))
        or not all(
            type(k) is str and len(k) <= _KEY_MAX and type(v) in _FLAT for k, v in value.items()
        )
    ):
        return -1
    size = _json_size(value)
    return size if size < floor else -1


# -- LangChain messages as data -----------------------------------------------------------------


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
