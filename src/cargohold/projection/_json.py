"""The JSON projector: shape, where the bytes are, field facts, first and last records, queries.

A model must be able to act without reading the body: what the document is (its shape, with
array lengths and key sets), where its bulk lies (paths with their share of the bytes), what the
records hold (per-field types, ranges, distinct values and counts, over all records or a stated
sample), the first and the last record verbatim, the document's last bytes, and JMESPath queries
that work with ``artifact_query`` as they stand.

Walks are bounded: arrays are sampled (first, last and evenly spaced elements), so the cost
beyond parsing stays small whatever the document. A body over 256 KiB is read by simdjson, not
as Python values (ten to twenty times the body): its proxies are walked, looked up or written
out part by part, never converted whole (past 4 MiB, a top-level array, or the array that is most
of a top-level object, is parsed in pieces, of which only the elements sampled are kept), and
every figure or text a preview shows is the one orjson's Python values would give (floats
written as orjson writes them), so the preview is the same whichever parser read the body.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import orjson
import simdjson

from cargohold._text import cut_utf8_tail, fit, utf8_len
from cargohold.projection._model import JOINER, Builder, clip, quote
from cargohold.projection._spans import WINDOW_MAX, Span, Spans, _skip, _skip_back

_SAMPLE = 24
"""Elements of an array looked at to describe its element shape and size."""
_STATS_ALL = 1_000
"""Arrays of records up to this length get exact field facts; longer ones a stated sample."""
_STATS_SAMPLE = 1_000
_DISTINCT_MAX = 2_000
"""Distinct strings counted per field; past this, "over 2,000 distinct"."""
_ORJSON_MAX = 256 * 1024
"""Largest body read as Python values (orjson: ten to twenty times the body, and the fastest
walks); a larger one is read as simdjson's lazy proxies (its document: about four times the body in
resident memory, outside Python's heap), whose values are only made Python where a sample or a
shown value needs them."""
_FALLBACK_MAX = 4 * 1024 * 1024
"""Largest body read as Python values when simdjson cannot read it."""
_MAX_KEYS = 12
_LOOKUPS_MAX = 4096
_REDUMP_MAX = 64 * 1024
"""Largest simdjson value written again by orjson in one piece (as Python values, ten to twenty
times its size for a moment)."""
_PIECES_MAX = 4096
"""Elements or members of a large simdjson value measured one by one at most."""
_PIECE = 256 * 1024
"""Bytes of a large top-level array parsed by simdjson at a time (see ``_Pieced``): its
document (about four times what it reads) lives one piece at a time, not whole, and a parse
holds the GIL for one piece (a thread beside a 16 MiB projection waited 2 ms at most, not
40-45 ms: the put's hashing and fsync overlap it)."""
_PIECED_MIN = 4 * 1024 * 1024
"""Bodies up to this size are parsed whole: parsing in pieces takes two passes, which cost more
than one whole parse while its buffers (under 32 MiB) are reused by the allocator, warm (1 MiB:
about 7 ms a projection against 5); past it, the whole document is mapped and faulted in anew each
time, and the pieces are faster (16 MiB: 32-40 ms against 40-44, 0.2x the body resident against
4.1x)."""
_FIRST_MAX = 64 * 1024
"""Bytes read for the end of a top-level array's first element, which shows the bytes between
two elements (the pattern a cut is looked for at)."""
_CUT_TRIES = 8
"""Cuts that may fail (a comma inside a string or a nested value) before the array is parsed
whole instead."""
"""Members of a simdjson object looked up one by one at most (each lookup walks its members)."""
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class JsonError(ValueError):
    """The body looked like JSON but is not."""


class _Walked:
    """A large simdjson array whose sampled elements were reached in one walk, up front.

    Its elements are reached by walking its tape, so the shape, the record search and the
    field facts would each walk it again for their own samples: the indices all of them take
    (``_sample_indices`` of the counts in ``_WALKED``, the first and the last) are picked at
    once, and any other index is looked up in the array itself.
    """

    __slots__ = ("_at", "array")

    def __init__(self, array: Any) -> None:
        self.array = array
        count = len(array)
        wanted = {0, count - 1} if count else set()
        for sample in _WALKED:
            wanted.update(_sample_indices(count, sample))
        indices = sorted(wanted)
        self._at = dict(zip(indices, _walk_to(array, indices), strict=True))

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, index: int) -> Any:
        if index < 0:
            index += len(self.array)
        if index in self._at:
            return self._at[index]
        return self.array[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.array)

    @property
    def mini(self) -> bytes | str:
        mini: bytes | str = self.array.mini
        return mini


class _Pieced(_Walked):
    """A large top-level array parsed in pieces, of which only the elements ``_Walked`` picks
    are kept (as one small simdjson document of their compact JSON).

    simdjson's document of a body is about four times the body in resident memory (its padded
    copy, the structural indices, the tape and the strings), outside Python's heap, and all of
    it lives while any of its proxies does. A top-level array is cut at commas between its
    elements into pieces of about ``_PIECE`` bytes, each parsed alone by one parser, which
    checks the cut (a comma inside a string or a nested value leaves a piece that is not a list
    of values) and counts the piece's elements; the elements picked are written out as compact
    JSON on the way and parsed again together at the end. The proxies walked are of the same
    types, their values the same: the preview is the same as from the whole document. An
    element not picked is found by parsing its piece again.
    """

    __slots__ = ("_count", "_data", "_pieces")

    def __init__(self, data: bytes, pieces: list[tuple[int, int, int]], picked: bytes) -> None:
        self._data = data
        self._pieces = pieces
        self._count = sum(n for _, _, n in pieces)
        indices = _picks(self._count)
        self.array = simdjson.Parser().parse(picked)
        self._at = dict(zip(indices, self.array, strict=True))

    def _located(self, index: int) -> tuple[int, int, int]:
        """The piece (start, end) holding element ``index``, and its index in the piece."""
        offset = 0
        for start, end, length in self._pieces:
            if index < offset + length:
                return start, end, index - offset
            offset += length
        raise IndexError("array index out of range")

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: int) -> Any:
        if index < 0:
            index += self._count
        if index in self._at:
            return self._at[index]
        if not 0 <= index < self._count:
            raise IndexError("array index out of range")
        start, end, local = self._located(index)
        return self._parsed(start, end)[local]

    def __iter__(self) -> Iterator[Any]:
        for start, end, _ in self._pieces:
            yield from self._parsed(start, end)

    def _parsed(self, start: int, end: int) -> Any:
        """A piece's array, by a parser of its own (the proxies handed out keep it alive)."""
        return simdjson.Parser().parse(_piece(self._data, start, end))

    @property
    def mini(self) -> bytes:
        inner = (_mini(self._parsed(start, end))[1:-1] for start, end, _ in self._pieces)
        return b"[" + b",".join(inner) + b"]"


def _picks(count: int) -> list[int]:
    """The indices ``_Walked`` takes of an array of ``count`` elements, ascending."""
    wanted = {0, count - 1}
    for sample in _WALKED:
        wanted.update(_sample_indices(count, sample))
    return sorted(wanted)


def _piece(data: bytes, start: int, end: int) -> bytes:
    """``data[start:end]`` as an array of its own."""
    return b"".join((b"[", memoryview(data)[start:end], b"]"))


def _read(parser: Any, piece: bytes, indices: list[int], offset: int) -> tuple[int, list[bytes]]:
    """A piece's element count (0 when it is not a list of values: a cut at a comma inside a
    string or a nested value, or a body that is not JSON), and the compact JSON of its elements
    at ``indices`` (ascending, counted from ``offset``), as simdjson writes its proxies (and
    orjson a scalar: both read back as the same value). No proxy outlives the call (the parser
    parses the next piece).

    Raises:
        RuntimeError: simdjson cannot read a value in it (an integer past 64 bits, which no
            cut changes).
    """
    try:
        array = parser.parse(piece)
    except ValueError:
        return 0, []
    count = len(array)
    local = [i - offset for i in indices[bisect_left(indices, offset) :] if i < offset + count]
    return count, [
        _mini(element) if isinstance(element, _PROXIES) else orjson.dumps(element)
        for element in _walk_to(array, local)
    ]


_CLOSERS = (b"}", b"]", b'"')
_OPENERS = (b"{", b"[", b'"')


def _separator(data: bytes, first: int) -> bytes | None:
    """The bytes between a top-level array's first two elements (the comma, and the closing
    and opening brackets or quotes around it when the elements are containers or strings: a
    comma alone is mostly inside them), or ``None`` when the
    first element does not end within ``_FIRST_MAX`` bytes."""
    window = data[first : first + _FIRST_MAX]
    window = window[: window.rfind(b",") + 1]  # a whole character at the end (commas are ASCII)
    if not window:
        return None
    try:
        orjson.loads(window)
        return None
    except orjson.JSONDecodeError as exc:
        at = exc.pos  # in characters: after the first element, its whitespace skipped
    if not window.isascii():
        try:
            at = len(window.decode()[:at].encode())
        except UnicodeDecodeError:
            return None
    comma = first + at
    if data[comma : comma + 1] != b",":
        return None
    last = _skip_back(data, comma, first) - 1
    following = _skip(data, comma + 1, len(data))
    if data[last : last + 1] in _CLOSERS and data[following : following + 1] in _OPENERS:
        return data[last : following + 1]
    return b","


def _balanced(
    data: bytes, separator: bytes, at_comma: int, start: int, probe: int, closing: int
) -> int:
    """The first cut at a separator from ``probe`` on where as many brackets have opened as
    closed since ``start`` (a cut between elements, unless brackets inside strings mislead the
    count: the piece's parse checks it), or ``closing`` when there is none."""
    depth = 0
    at = start
    while probe < closing:
        found = data.find(separator, probe, closing)
        if found < 0:
            break
        end = found + at_comma
        depth += (
            data.count(b"{", at, end)
            + data.count(b"[", at, end)
            - data.count(b"}", at, end)
            - data.count(b"]", at, end)
        )
        if depth == 0:
            return end
        at = end
        probe = found + 1
    return closing


def _parse_pieces(data: bytes) -> _Pieced | None:
    """A large top-level array of over ``_STATS_ALL`` elements read in pieces (see
    ``_Pieced``), or ``None`` for any other body, or when no cut can be found or trusted:
    that body is parsed whole (and a body that is not JSON is refused there).

    A cut is made at the first separator past ``_PIECE`` bytes; once one has failed, at the
    first there where the brackets pair (counting them costs about as much as parsing, so only
    where the separator is known to mislead). The picks depend on the element count, known only
    at the end: a first pass over the pieces
    finds the cuts and counts, a second takes the picks (a count of the separator would take
    longer than parsing, and be wrong where the separator occurs inside elements too).
    """
    opening = _skip(data, 0, len(data))
    closing = _skip_back(data, len(data), opening) - 1
    if data[opening : opening + 1] != b"[" or data[closing : closing + 1] != b"]":
        return None
    return _pieced(data, opening, closing)


def _pieced(data: bytes, opening: int, closing: int) -> _Pieced | None:
    """The array from ``data[opening]`` (its ``[``) to ``data[closing]`` (its ``]``) read in
    pieces, as ``_parse_pieces`` says."""
    first = _skip(data, opening + 1, closing)
    separator = _separator(data, first)
    if separator is None:
        return None
    at_comma = separator.index(b",")
    parser = simdjson.Parser()
    pieces: list[tuple[int, int, int]] = []
    tries = total = 0
    balanced = False
    start = first
    try:
        while start < closing:
            probe = start + _PIECE
            while True:
                if balanced:
                    end = _balanced(data, separator, at_comma, start, probe, closing)
                else:
                    found = data.find(separator, probe, closing) if probe < closing else -1
                    end = closing if found < 0 else found + at_comma
                count = _read(parser, _piece(data, start, end), [], 0)[0]
                if count:
                    break
                tries += 1
                if end == closing or tries >= _CUT_TRIES:
                    return None
                balanced = True  # the separator occurs inside elements: cut where brackets pair
                probe = end - at_comma + 1
            if not pieces and count * (closing - first) <= 2 * _STATS_ALL * (end - start):
                return None  # few, large elements: all of them would be picked
            pieces.append((start, end, count))
            total += count
            start = end + 1
        if total <= _STATS_ALL:
            return None
        indices = _picks(total)
        picked: list[bytes] = []
        offset = 0
        for start, end, count in pieces:
            if offset <= indices[-1] and indices[bisect_left(indices, offset)] < offset + count:
                picked.extend(_read(parser, _piece(data, start, end), indices, offset)[1])
            offset += count
    except RuntimeError:
        return None
    del parser  # its buffers: four times the largest piece
    joined = b"[" + b",".join(picked) + b"]"
    del picked
    return _Pieced(data, pieces, joined)


class _Grafted:
    """A large top-level object whose bulk is one array member, read in pieces (``_Pieced``):
    its other members are a small document of their own (the body with that array as ``[]``),
    looked up as the whole document's would be."""

    __slots__ = ("_data", "_key", "_object", "_pieced")

    def __init__(self, data: bytes, skeleton: Any, key: str, pieced: _Pieced) -> None:
        self._data = data
        self._object = skeleton
        self._key = key
        self._pieced = pieced

    def __len__(self) -> int:
        return len(self._object)

    def __iter__(self) -> Iterator[str]:
        return iter(self._object)

    def __contains__(self, key: object) -> bool:
        return key in self._object

    def __getitem__(self, key: str) -> Any:
        return self._pieced if key == self._key else self._object[key]

    def keys(self) -> list[str]:
        return list(self._object)

    def items(self) -> Iterator[tuple[str, Any]]:
        """The members as proxies (a simdjson object's ``items()`` converts them to Python)."""
        return ((key, self[key]) for key in self._object)

    @property
    def mini(self) -> bytes:
        """The whole document's compact JSON, by parsing it whole (no walk of a preview needs
        it: a large root is measured member by member)."""
        return _mini(simdjson.Parser().parse(self._data))


def _parse_grafted(data: bytes) -> _Grafted | None:
    """A top-level object with one array member holding most of it, from its first ``[`` to its
    last ``]``, that array read in pieces; or ``None`` (parsed whole). The rest, with ``[]`` in
    the array's place, must parse alone, and the array's pieces alone: then the body is that
    object with that array in it (a prefix that leaves the parser expecting a value, a value,
    and what follows one), whatever the brackets in its other members."""
    opening = _skip(data, 0, len(data))
    closing = _skip_back(data, len(data), opening) - 1
    if data[opening : opening + 1] != b"{" or data[closing : closing + 1] != b"}":
        return None
    start = data.find(b"[", opening, closing)
    end = data.rfind(b"]", opening, closing)
    if start < 0 or 2 * (end - start) < len(data):
        return None
    skeleton = data[:start] + b"[]" + data[end + 1 :]
    try:
        document: Any = simdjson.Parser().parse(skeleton)
    except (ValueError, RuntimeError):
        return None
    if not isinstance(document, simdjson.Object):
        return None
    keys = list(document)
    if len(set(keys)) < len(keys):
        return None  # a lookup finds a duplicate key's first member, which may not be this one
    spans = Spans(skeleton)
    root = spans.root()
    if root is None:
        return None
    members = spans.members(root, keys)
    key = next((k for k, (at, _) in members.items() if at == start), None)
    if key is None:
        return None
    hollow = document[key]
    if not isinstance(hollow, simdjson.Array) or len(hollow):
        return None  # the member at the array's place is not the ``[]`` put there
    pieced = _pieced(data, start, end)
    if pieced is None:
        return None
    return _Grafted(data, document, key, pieced)


_WALKED = (24, 8, 3, 1_000, 200)
"""The sample counts taken of a top-level array: the shape's (``_SAMPLE``), the record
search's, the field facts' (``_STATS_SAMPLE``) and their key picks'."""
_SIMD_ARRAYS = (simdjson.Array, _Walked)
_ARRAYS = (list, simdjson.Array, _Walked)
_OBJECTS = (dict, simdjson.Object, _Grafted)
_SIMD_OBJECTS = (simdjson.Object, _Grafted)
_PROXIES = (simdjson.Object, simdjson.Array, _Walked, _Grafted)
"""Tuples, not ``dict | simdjson.Object``: a union is built anew at each call of these, which
run for every sampled value."""


def _is_obj(value: Any) -> bool:
    return isinstance(value, _OBJECTS)


def _is_arr(value: Any) -> bool:
    return isinstance(value, _ARRAYS)


def _mini(value: Any) -> bytes:
    """simdjson's own compact JSON of one of its proxies (no Python copy)."""
    mini: bytes | str = value.mini  # bytes at run time; the stubs say str
    return mini if isinstance(mini, bytes) else mini.encode()


def _dumps(value: Any) -> bytes:
    """Compact JSON of a value, as orjson writes it.

    A simdjson proxy of up to ``_REDUMP_MAX`` bytes is minified by simdjson and written again
    by orjson (simdjson writes a float with all its digits, orjson with the fewest that read
    back the same: the preview is the same whichever parser read the body); a larger one is
    simdjson's minified text as it is.
    """
    if isinstance(value, _PROXIES):
        mini = _mini(value)
        if len(mini) <= _REDUMP_MAX:
            return orjson.dumps(orjson.loads(mini))
        return mini
    return orjson.dumps(value)


def _pieces(value: Any) -> Iterator[bytes]:
    """The value's compact JSON as orjson writes it, in pieces: a large simdjson proxy part by
    part (each part written by orjson, none of them more than ``_REDUMP_MAX`` bytes of Python
    values at a time); past ``_PIECES_MAX`` parts in one container, as simdjson minifies it."""
    if not isinstance(value, _PROXIES):
        yield orjson.dumps(value)
        return
    mini = _mini(value)
    if len(mini) <= _REDUMP_MAX:
        yield orjson.dumps(orjson.loads(mini))
        return
    if len(value) > _PIECES_MAX:
        yield mini
        return
    del mini
    if isinstance(value, _SIMD_ARRAYS):
        yield b"["
        for index, element in enumerate(value):
            if index:
                yield b","
            yield from _pieces(element)
        yield b"]"
        return
    yield b"{"
    for index, key in enumerate(value):
        yield (b",%s:" if index else b"%s:") % orjson.dumps(key)
        yield from _pieces(value[key])
    yield b"}"


def _compact_len(value: Any) -> int:
    """``len(_dumps(value))`` as orjson would write the whole value, whatever its size."""
    return sum(map(len, _pieces(value)))


def _shown(value: Any, limit: int) -> str:
    """``clip`` of the value's compact JSON as orjson writes it, whatever its size: a large
    simdjson proxy is written in pieces, of which only the first ``limit`` characters are
    kept and the rest counted."""
    head: list[str] = []
    kept = total = 0
    for piece in _pieces(value):
        text = piece.decode()
        total += len(text)
        if kept <= limit:
            head.append(text)
            kept += len(text)
    shown = "".join(head)
    if total <= limit:
        return clip(shown, limit)
    return shown[: limit - 12] + f" [+{total - limit + 12} chars]"


def _type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if _is_arr(value):
        return "array"
    return "object"


def _sample_indices(length: int, count: int = _SAMPLE) -> list[int]:
    if length <= count:
        return list(range(length))
    head = count // 3
    tail = count // 3
    middle = count - head - tail
    step = (length - head - tail) / (middle + 1)
    picks = set(range(head)) | set(range(length - tail, length))
    picks |= {head + int(step * (k + 1)) for k in range(middle)}
    return sorted(picks)


def _items(value: Any, limit: int | None = None) -> list[tuple[str, Any]]:
    """An object's first ``limit`` members (all by default) as ``(key, value)`` pairs.

    A simdjson object's ``items()`` and ``values()`` convert every value to Python, deeply (for
    the root, the whole document: ten to twenty times its size): its values are looked up by
    key instead, each a proxy (a lookup walks the members from the first, so callers keep
    ``limit`` small or the object known to be small).
    """
    if isinstance(value, _SIMD_OBJECTS):
        return [(key, value[key]) for key in islice(value, limit)]
    return list(islice(value.items(), limit))


def _head(array: Any, count: int) -> list[Any]:
    """An array's first ``count`` elements (a simdjson array's slice converts them deeply)."""
    if isinstance(array, _SIMD_ARRAYS):
        return list(islice(array, count))
    return list(array[:count])


class _Values:
    """A simdjson map's values by position, each looked up by its key when asked for (its
    ``values()`` would convert them all to Python)."""

    __slots__ = ("_keys", "_map")

    def __init__(self, mapping: Any) -> None:
        self._map = mapping
        self._keys = list(mapping)

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, index: int) -> Any:
        return self._map[self._keys[index]]

    def pick(self, indices: Iterable[int]) -> list[Any]:
        """The values at ``indices`` (ascending). A lookup walks the members from the first, so
        many picks from a large map are made in one walk of ``items()`` instead, which writes
        each value as Python on its way (one at a time: only the picked ones are kept)."""
        wanted = sorted(set(indices))
        if not wanted:
            return []
        if len(self._keys) <= 4 * len(wanted) or len(wanted) <= 32:
            return [self[i] for i in wanted]
        picked: list[Any] = []
        position = 0
        for index, (_, value) in enumerate(self._map.items()):
            if index == wanted[position]:
                picked.append(value)
                position += 1
                if position == len(wanted):
                    break
        return picked


def _values(mapping: Any) -> Any:
    """A map's values as a sequence, lazily for a simdjson object."""
    if isinstance(mapping, _SIMD_OBJECTS):
        return _Values(mapping)
    return list(mapping.values())


def _pick(array: Any, indices: Iterable[int]) -> list[Any]:
    """The elements of ``array`` at ``indices`` (ascending). A simdjson array is walked once,
    front to back: its elements are reached by walking its tape, so indexing each one would
    walk from the front every time (a thousand samples of a 150,000-element array: a second)."""
    if isinstance(array, _Values):
        return array.pick(indices)
    if isinstance(array, _Walked):
        return [array[i] for i in sorted(set(indices))]
    if not isinstance(array, _SIMD_ARRAYS):
        return [array[i] for i in indices]
    return _walk_to(array, indices)


def _walk_to(array: Any, indices: Iterable[int]) -> list[Any]:
    """The elements of a simdjson array at ``indices``, in one walk from its front."""
    wanted = sorted(set(indices))
    if not wanted:
        return []
    picked: list[Any] = []
    position = 0
    for index, element in enumerate(array):
        if index == wanted[position]:
            picked.append(element)
            position += 1
            if position == len(wanted):
                break
    return picked


def _key(name: str) -> str:
    """A JMESPath identifier for ``name``: bare when it can be, else quoted (a JSON string, so
    quotes, backslashes and control characters are escaped as JMESPath expects)."""
    if _IDENT.fullmatch(name):
        return name
    return orjson.dumps(name).decode()


def _join(path: str, part: str) -> str:
    """``path`` extended by a key or an ``[index]``, as JMESPath writes it."""
    if part.startswith("["):
        return path + part
    return f"{path}.{part}" if path else part


def _size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON; for arrays of over 1,000 entries, an estimate from
    a sample of them."""
    if _is_arr(value) and len(value) > 1000:
        picks = _sample_indices(len(value))
        total = sum(_compact_len(element) + 1 for element in _pick(value, picks))
        return int(total / len(picks) * len(value)) + 1
    if _is_obj(value) and len(value) > 4 * _SAMPLE:
        keys = list(value)
        picks = _sample_indices(len(keys))
        total = sum(_compact_len(value[keys[i]]) + len(keys[i]) + 4 for i in picks)
        return int(total / len(picks) * len(keys)) + 1
    return _compact_len(value)


def _shape(value: Any, depth: int = 0) -> str:
    """A compact type signature: ``array[12034] of {id: int, status: str}``."""
    kind = _type(value)
    if kind == "array":
        if not value:
            return "array[0]"
        element = _merge(_pick(value, _sample_indices(len(value))), depth + 1)
        return f"array[{len(value):,}] of {element}"
    if kind == "object":
        if depth >= 6:
            return f"object({len(value)} keys)"
        if _is_map(value):
            return _map_shape(value, depth)
        parts = [f"{_key(k)}: {_shape(v, depth + 1)}" for k, v in _items(value, _MAX_KEYS)]
        if len(value) > _MAX_KEYS:
            parts.append(f"... +{len(value) - _MAX_KEYS} keys")
        return "{" + ", ".join(parts) + "}"
    return kind


_ID_KEY = re.compile(r"[0-9]+|[0-9a-fA-F-]{8,}|[A-Z0-9_]+")


def _is_map(value: Any) -> bool:
    """An object used as a map (id-keyed, or with very many keys), not as a record."""
    if len(value) <= 4:
        return False
    if len(value) > 4 * _MAX_KEYS:
        return True
    return all(_ID_KEY.fullmatch(k) for k in _sampled_keys(value, 16))


def _sampled_keys(value: Any, count: int) -> list[str]:
    """An object's keys at ``_sample_indices(len(value), count)``, in one walk of its keys (no
    list of them all: a map's keys may be most of a document)."""
    wanted = _sample_indices(len(value), count)
    if not wanted:
        return []
    picked: list[str] = []
    position = 0
    for index, key in enumerate(value):
        if index == wanted[position]:
            picked.append(key)
            position += 1
            if position == len(wanted):
                break
    return picked


def _map_shape(value: Any, depth: int) -> str:
    return _map_shape_of(len(value), _sampled_keys(value, _SAMPLE), value.__getitem__, depth)


def _map_shape_of(count: int, picked: list[str], lookup: Callable[[str], Any], depth: int) -> str:
    """A map's signature from its key count and the keys picked as its sample."""
    example = ", ".join(_key(k) for k in picked[:2])
    inner = _merge([lookup(k) for k in picked], depth + 1)
    return f"map{{{count:,} keys, e.g. {example}}} of {inner}"


def _merge(values: list[Any], depth: int) -> str:
    """One signature for sampled array elements: shared keys, optional ones marked ``?``."""
    kinds = Counter(_type(v) for v in values)
    if len(kinds) > 1:
        return "(" + " | ".join(sorted(kinds)) + ")"
    kind = next(iter(kinds))
    if kind != "object":
        if kind == "array" and depth < 8:
            inner = [x for v in values for x in _head(v, 4)]
            lengths = [len(v) for v in values]
            span = (
                f"{min(lengths):,}"
                if min(lengths) == max(lengths)
                else f"{min(lengths):,}..{max(lengths):,}"
            )
            return f"array[{span}] of {_merge(inner, depth + 1) if inner else 'nothing'}"
        return kind
    if depth >= 7:
        return "object"
    if all(_is_map(v) for v in values):
        # The maps merged as ``dict.update`` would (a key where it first came, the value of its
        # last map) without copying them: a simdjson map's values are looked up one by one.
        owner: dict[str, Any] = {}
        for v in values:
            for k in v:
                owner[k] = v
        keys = list(owner)
        picked = [keys[i] for i in _sample_indices(len(keys))]
        return _map_shape_of(len(keys), picked, lambda k: owner[k][k], depth)
    order: dict[str, None] = {}
    seen: Counter[str] = Counter()
    for v in values:
        for k in v:
            order.setdefault(k, None)
            seen[k] += 1
    if len(order) > 4 * _MAX_KEYS and all(len(v) > _MAX_KEYS for v in values):
        return f"object(~{len(order):,} distinct keys, e.g. {', '.join(list(order)[:3])})"
    parts = []
    for k in list(order)[:_MAX_KEYS]:
        members = [v[k] for v in values if k in v]
        optional = "?" if seen[k] < len(values) else ""
        parts.append(f"{_key(k)}{optional}: {_merge(members, depth + 1)}")
    if len(order) > _MAX_KEYS:
        parts.append(f"... +{len(order) - _MAX_KEYS} keys")
    return "{" + ", ".join(parts) + "}"


Part = str | int | None
"""A step of a path: a key, an index, or ``None`` for "the values of this map"."""


def _rank(value: Any) -> int:
    """A size to find the largest of siblings by: ``_size``, but simdjson's minified length for
    its proxies (C speed; it writes some floats with more digits than orjson, which may reorder
    near ties only)."""
    if not isinstance(value, _PROXIES):
        return _size(value)
    if (_is_arr(value) and len(value) > 1000) or (_is_obj(value) and len(value) > 4 * _SAMPLE):
        return _size(value)  # a sample, whose parts are measured as orjson writes them
    return len(_mini(value))


def _lower(value: Any, depth: int = 0) -> int:
    """A lower bound of ``_size(value)`` for a simdjson proxy, from its member counts alone
    (and the sizes of the few members of small containers): no value is written out."""
    if not isinstance(value, _PROXIES):
        return len(orjson.dumps(value))
    count = len(value)
    if count == 0:
        return 2
    if count > 4 or depth >= 8:
        return (2 if isinstance(value, _SIMD_ARRAYS) else 5) * count + 1
    if isinstance(value, _SIMD_ARRAYS):
        return 1 + sum(_lower(element, depth + 1) + 1 for element in value)
    return 1 + sum(len(orjson.dumps(k)) + _lower(value[k], depth + 1) + 2 for k in value)


def _largest(children: list[tuple[str, Any, Part]]) -> tuple[str, Any, Part]:
    """The first of the largest children (by ``_size``, as orjson writes them).

    Among simdjson proxies, the child with the largest lower bound wins outright when every
    other child is measured, part by part, to be smaller than that bound: minifying a large
    value (simdjson writes its floats anew: 17 ms for 2 MB of coordinates) is done only when
    the bounds cannot tell.
    """
    if len(children) == 1:  # an only child is the largest, whatever its size
        return children[0]
    if any(isinstance(v, _PROXIES) for _, v, _ in children):
        bounds = [_lower(v) for _, v, _ in children]
        top = bounds.index(max(bounds))
        bound = bounds[top]
        if all(i == top or _below(v, bound) for i, (_, v, _) in enumerate(children)):
            return children[top]
    ranked = sorted(((_rank(v), p, v, s) for p, v, s in children), key=lambda t: -t[0])
    _, path, child, step = ranked[0]
    return path, child, step


def _below(value: Any, bound: int) -> bool:
    """Whether ``_size(value)`` is surely under ``bound`` (a simdjson proxy measured part by
    part up to ``bound`` only)."""
    if not isinstance(value, _PROXIES):
        return len(orjson.dumps(value)) < bound
    return len(value) <= _PIECES_MAX and _fits(value, bound - 1)


def _biggest(
    value: Any, path: str = "", depth: int = 0, parts: tuple[Part, ...] = ()
) -> Iterator[tuple[str, Any, tuple[Part, ...]]]:
    """The chain of largest children from the root down, with the steps to each."""
    if depth > 8:
        return
    if (_is_arr(value) and len(value) > 1) or (_is_obj(value) and _is_map(value)):
        return  # the bulk of an array or a map is its entries as a whole, not one of them
    children: list[tuple[str, Any, Part]]
    if _is_obj(value) and len(value):
        children = [(_join(path, _key(k)), v, k) for k, v in _items(value)]
        if len(children) > 4 * _SAMPLE:
            children = [children[i] for i in _sample_indices(len(children))]
    elif _is_arr(value) and len(value):
        picks = _sample_indices(len(value), 16)
        children = [
            (_join(path, f"[{i}]"), element, i)
            for i, element in zip(picks, _pick(value, picks), strict=True)
        ]
    else:
        return
    child_path, child, step = _largest(children)
    yield child_path, child, (*parts, step)
    yield from _biggest(child, child_path, depth + 1, (*parts, step))


def _records(
    value: Any, path: str = "", depth: int = 0, parts: tuple[Part, ...] = ()
) -> tuple[str, Any, tuple[Part, ...]] | None:
    """The largest array of objects in the document (by length), found by a bounded walk: its
    JMESPath, the records, and the path as steps (to find it in the bytes)."""
    best: tuple[str, Any, tuple[Part, ...]] | None = None
    if _is_arr(value):
        shape_picks = _sample_indices(len(value), 8)
        deeper = _sample_indices(len(value), 3) if depth < 3 else []
        picks = sorted(set(shape_picks) | set(deeper))
        picked = dict(zip(picks, _pick(value, picks), strict=True))  # one walk for both
        if len(value) > 1 and all(_is_obj(picked[i]) for i in shape_picks):
            best = (path or "@", value, parts)
        if deeper:
            for i, element in ((i, picked[i]) for i in deeper):
                found = _records(element, _join(path, f"[{i}]"), depth + 1, (*parts, i))
                if found and (best is None or len(found[1]) > len(best[1])):
                    best = found
    elif _is_obj(value) and depth < 4:
        if _is_map(value):
            entries = _values(value)
            picks = _sample_indices(len(entries), 8)
            if all(_is_obj(entries[i]) for i in picks):
                return (f"values({path or '@'})", entries, (*parts, None))
        items = _items(value)
        if len(items) > 64:
            items = [items[i] for i in _sample_indices(len(items), 16)]
        for k, v in items:
            if _is_obj(v) or _is_arr(v):
                found = _records(v, _join(path, _key(k)), depth + 1, (*parts, k))
                if found and (best is None or len(found[1]) > len(best[1])):
                    best = found
    return best


def _number(value: float) -> str:
    if isinstance(value, int) or (
        isinstance(value, float) and value.is_integer() and abs(value) < 1e15
    ):
        return f"{int(value):,}"
    return f"{value:,.6g}" if abs(value) < 1e6 else f"{value:.6g}"


@dataclass(slots=True)
class _Field:
    """Running facts of one field across records."""

    present: int = 0
    nulls: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    low: float | None = None
    high: float | None = None
    strings: Counter[str] = field(default_factory=Counter)
    overflow: bool = False
    longest: int = 0
    trues: int = 0

    def add(self, value: Any) -> None:
        self.present += 1
        # The exact types orjson and simdjson give scalars, tested first (this runs once per
        # field of every sampled record); anything else is named by _type.
        exact = type(value)
        if exact is str:
            kind = "str"
            length = len(value)
            if length > self.longest:
                self.longest = length
            strings = self.strings
            if value in strings or len(strings) < _DISTINCT_MAX:
                strings[value] += 1
            else:
                self.overflow = True
        elif exact is int or (exact is float and math.isfinite(value)):
            # JSON integers are at most 64 bits here (orjson reads a longer one as a float,
            # simdjson refuses it), so an int is always finite.
            kind = "int" if exact is int else "float"
            if self.low is None or value < self.low:
                self.low = value
            if self.high is None or value > self.high:
                self.high = value
        else:
            kind = _type(value)
            if kind == "null":
                self.nulls += 1
            elif kind == "bool":
                self.trues += value is True
            elif kind in ("int", "float") and math.isfinite(value):
                self.low = value if self.low is None else min(self.low, value)
                self.high = value if self.high is None else max(self.high, value)
            elif kind == "str":
                self.longest = max(self.longest, len(value))
                if value in self.strings or len(self.strings) < _DISTINCT_MAX:
                    self.strings[value] += 1
                else:
                    self.overflow = True
        self.kinds[kind] += 1

    def line(self, key: str, rows: int) -> str:
        missing = rows - self.present
        notes = f", missing in {missing:,}" if missing else ""
        if self.nulls and self.nulls < self.present:
            notes += f", null in {self.nulls:,}"
        kinds = "|".join(k for k, _ in self.kinds.most_common())
        numeric = self.kinds["int"] + self.kinds["float"]
        if numeric and numeric >= self.present // 2 and self.low is not None:
            assert self.high is not None
            return f"  {_key(key)}: {kinds} {_number(self.low)}..{_number(self.high)}{notes}"
        texts = self.kinds["str"]
        if texts and texts >= self.present // 2:
            distinct = len(self.strings)
            if distinct <= 12 and distinct < texts and not self.overflow:
                top = ", ".join(f"{clip(v, 40)} {n:,}" for v, n in self.strings.most_common(6))
                more = f", +{distinct - 6} more" if distinct > 6 else ""
                return f"  {_key(key)}: str, {distinct} distinct ({top}{more}){notes}"
            many = f"over {_DISTINCT_MAX:,}" if self.overflow else f"{distinct:,}"
            return f"  {_key(key)}: str, {many} distinct, up to {self.longest:,} chars{notes}"
        if self.kinds["bool"]:
            falses = self.kinds["bool"] - self.trues
            return f"  {_key(key)}: bool, true {self.trues:,}, false {falses:,}{notes}"
        return f"  {_key(key)}: {kinds}{notes}"


def _field_facts(records: Any) -> tuple[list[str], str, list[tuple[str, str, int]]]:
    """Per-field facts over all records (or a stated sample), and a (key, value) for hints."""
    total = len(records)
    if total <= _STATS_ALL:
        indices: Iterable[int] = range(total)
        scope = f"all {total:,} records"
    else:
        indices = _sample_indices(total, _STATS_SAMPLE)
        scope = f"an even sample of {_STATS_SAMPLE:,} of {total:,} records"
    key_picks = _sample_indices(total, 200)
    wanted = sorted(set(key_picks) | set(indices))
    picked = dict(zip(wanted, _pick(records, wanted), strict=True))  # one walk for both
    keys: dict[str, None] = {}
    for row in (picked[i] for i in key_picks):
        if _is_obj(row):
            for k in row:
                keys.setdefault(k, None)
    fields = {k: _Field() for k in list(keys)[:_MAX_KEYS]}
    rows = 0
    for row in (picked[i] for i in indices):
        if not _is_obj(row):
            continue
        rows += 1
        if type(row) is dict:
            for key, value in row.items():
                facts = fields.get(key)
                if facts is not None:
                    facts.add(value)
        else:  # a simdjson object: its fields' values only, looked up (see _items)
            for key, facts in fields.items():
                try:
                    value = row[key]
                except KeyError:
                    continue
                facts.add(value)
    lines = [facts.line(key, rows) for key, facts in fields.items()]
    if len(keys) > _MAX_KEYS:
        lines.append(f"  ... +{len(keys) - _MAX_KEYS} more fields")
    hints: list[tuple[str, str, int]] = []
    for key, facts in fields.items():
        distinct = len(facts.strings)
        if 2 <= distinct <= 12 and not facts.overflow and _IDENT.fullmatch(key):
            value = facts.strings.most_common(1)[0][0]
            if "'" not in value and "\\" not in value and len(value) <= 40:
                hints.append((key, value, distinct))
                break
    return lines, scope, hints


def _parse(data: bytes) -> Any:
    """The document: as Python values up to ``_ORJSON_MAX`` (orjson), as simdjson's lazy
    proxies beyond (a top-level array past ``_PIECED_MIN`` parsed in pieces, of which only the
    elements picked are kept: see ``_Pieced``). A body simdjson refuses (an integer past 64
    bits, which orjson reads as a float) is read by orjson up to ``_FALLBACK_MAX``."""
    if len(data) > _PIECED_MIN:
        pieced: _Pieced | _Grafted | None = _parse_pieces(data)
        if pieced is None:
            pieced = _parse_grafted(data)
        if pieced is not None:
            return pieced
    if len(data) > _ORJSON_MAX:
        try:
            return simdjson.Parser().parse(data)
        except (ValueError, RuntimeError) as exc:  # invalid, or integers past 64 bits
            if len(data) > _FALLBACK_MAX:
                raise JsonError("not JSON that can be read within bounded memory") from exc
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise JsonError("not valid JSON") from exc


class _Where:
    """Byte spans of a document's parts, and how a preview names them."""

    def __init__(self, data: bytes, document: Any) -> None:
        self.data = data
        self.document = document
        self.spans = Spans(data)
        self.one_line = data.find(b"\n", 0, len(data) - 1) < 0  # stops at a first line break
        self._members: dict[Span, dict[str, Span]] = {}

    def members(self, span: Span | None, value: Any) -> dict[str, Span]:
        if span is None or not _is_obj(value) or len(value) > 4096:
            return {}
        if span not in self._members:
            self._members[span] = self.spans.members(span, list(value.keys()))
        return self._members[span]

    def locate(self, parts: tuple[Part, ...]) -> Span | None:
        """The span of the value at ``parts`` (keys, indices 0 or -1, map values), if found."""
        span = self.spans.root()
        value = self.document
        for part in parts:
            if span is None:
                return None
            if isinstance(part, str):
                span = self.members(span, value).get(part)
                value = value[part]
            elif part is None:  # a map's values: only used for the first and last record
                return span
            elif part == 0 and len(value) == 1:
                # The only element: the array's inside, however large (``first`` confirms a
                # value by parsing it in a window).
                start = _skip(self.data, span[0] + 1, span[1])
                end = _skip_back(self.data, span[1] - 1, start)
                span = (start, end) if end > start else None
                value = value[0]
            elif part == 0 and len(value):
                span = self.spans.first(span)
                value = value[0]
            elif part == len(value) - 1:
                span = self.element_last(span, value)
                value = value[part]
            else:
                return None
        return span

    def element_last(self, span: Span, array: Any) -> Span | None:
        last = array[-1]
        opener = (
            b"{"
            if _is_obj(last)
            else b"["
            if _is_arr(last)
            else b'"'
            if _type(last) == "str"
            else None
        )
        compact = len(_dumps(last)) if opener is not None else 0
        return self.spans.last(span, opener, compact)

    def label(self, span: Span) -> str:
        """``byte N`` on one line; ``bytes A-B, lines X-Y`` (or ``line X``) on several."""
        start, end = span
        if self.one_line:
            return f"byte {start:,}"
        first = self.spans.line(start)
        last = self.spans.line(end)
        lines = f"line {first:,}" if first == last else f"lines {first:,}-{last:,}"
        return f"bytes {start:,}-{end:,}, {lines}"

    def quote(self, span: Span, limit: int) -> str | None:
        """The span's bytes as a grep-true quote; ``None`` past a window (its cut unknown)."""
        start, end = span
        if end - start > WINDOW_MAX:
            return None
        return quote(self.data[start:end], limit)


def _small(value: Any) -> bool:
    """A value worth showing verbatim near the top: a scalar or a small container."""
    if isinstance(value, _PROXIES):
        return len(value) <= 12 and _fits(value, 240)
    if _is_obj(value) or _is_arr(value):
        return len(value) <= 12 and len(_dumps(value)) <= 240
    return not (isinstance(value, str) and len(value) > 240)


def _fits(value: Any, limit: int) -> bool:
    """Whether a simdjson proxy takes at most ``limit`` bytes as orjson writes it."""
    return _measure(value, limit) is not None


def _measure(value: Any, limit: int) -> int | None:
    """``_size`` of a simdjson proxy measured part by part (each scalar written by orjson),
    or ``None`` as soon as it passes ``limit`` (where minifying a large value whole would
    write all of it)."""
    spent = 1
    array = isinstance(value, _SIMD_ARRAYS)
    for item in value:  # an element, or a key
        if array:
            part, spent = item, spent + 1
        else:
            part = value[item]
            spent += len(orjson.dumps(item)) + 2
        if isinstance(part, _PROXIES):
            size = _measure(part, limit - spent)
            if size is None:
                return None
            spent += size
        else:
            spent += len(orjson.dumps(part))
        if spent > limit:
            return None
    spent = max(spent, 2)
    return spent if spent <= limit else None


def _small_values(where: _Where, budget: int) -> list[str]:
    """Small members of the top-level object, and of its objects (metadata, pagination, totals,
    status and error blocks), verbatim from the body with their offsets, in document order."""
    document = where.document
    if not _is_obj(document):
        return []
    lines: list[str] = []
    spent = 0
    root = where.spans.root()
    top = where.members(root, document)

    def add(path: str, span: Span) -> bool:
        nonlocal spent
        text = where.quote(span, 200)
        if text is None:
            return True
        line = f"  {path} ({where.label(span)}): {text}"
        if spent + len(line.encode()) + 1 > budget:
            return False
        lines.append(line)
        spent += len(line.encode()) + 1
        return True

    for key, value in _items(document, 64):
        if ":" in key or "\n" in key:
            continue
        span = top.get(key)
        if span is None:
            continue
        if _small(value):
            if not add(_key(key), span):
                break
        elif _is_obj(value) and not _is_map(value):
            inner = where.members(span, value)
            for name, member in _items(value, 32):
                if ":" in name or "\n" in name or name not in inner:
                    continue
                scalar = not (_is_obj(member) or _is_arr(member))
                if scalar and _small(member) and not add(_join(_key(key), _key(name)), inner[name]):
                    return lines
    return lines


def _tail(data: bytes, limit: int) -> tuple[str, int]:
    """The body's last characters as a grep-true quote of at most ``limit`` bytes, and the byte
    offset where the quoted text starts."""
    window = data[-(limit * 8 + 64) :]
    base = len(data) - len(window)
    pieces: list[str] = []
    used = 0
    start = len(data)
    end = len(window)
    while end > 0:
        cut = window.rfind(b"\n", 0, end)
        line = window[cut + 1 : end].rstrip(b"\r")
        stripped = line.strip()
        end = cut if cut >= 0 else 0
        if cut < 0:
            end = 0
        if not stripped:
            if cut < 0:
                break
            continue
        lead = len(line) - len(line.lstrip())
        at = base + cut + 1 + lead
        cost = len(stripped) + (3 if pieces else 0)
        if used + cost > limit:
            room = limit - used - (3 if pieces else 0)
            if room >= 16 or not pieces:  # the end of a long line: a substring all the same
                part = cut_utf8_tail(stripped, max(room, 16))
                pieces.insert(0, part.decode("utf-8", "replace"))
                start = at + len(stripped) - len(part)
            break
        pieces.insert(0, stripped.decode("utf-8", "replace"))
        used += cost
        start = at
        if cut < 0:
            break
    return JOINER.join(pieces), start


def project_json(data: bytes, budget: int, *, read_hint: str = "artifact_query") -> str:
    """A structure-aware preview of a JSON document within ``budget`` bytes.

    Raises:
        JsonError: the body is not valid JSON (the caller falls back to a verbatim excerpt).
    """
    document = _parse(data)
    if isinstance(document, simdjson.Array) and len(document) > _STATS_ALL:
        document = _Walked(document)
    where = _Where(data, document)
    out = Builder(budget)
    tail_text, tail_at = _tail(data, 150)
    tail_label = f"byte {tail_at:,}"
    if not where.one_line:
        tail_label += f", line {where.spans.line(tail_at):,}"
    tail_line = f"ends with ({tail_label}): {tail_text}"
    reserve = len(tail_line.encode()) + 2
    kind = _type(document)
    if where.one_line:
        layout = f"; one line of {len(data):,} bytes (offsets below are byte offsets)"
    else:
        lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
        layout = f"; {lines:,} lines (a quote joins a value's lines with {JOINER})"
    if kind == "array":
        out.add(f"json array of {len(document):,} items{layout}", reserve=reserve)
    elif kind == "object":
        out.add(f"json object with {len(document):,} keys{layout}", reserve=reserve)
    else:
        out.add(f"json {kind}{layout}", reserve=reserve)
    small = _small_values(where, max(300, budget // 5))
    if small and out.add("small values (verbatim, in document order):", reserve=reserve):
        out.add_all(small, reserve=reserve)
    shape_room = max(200, budget * 2 // 5)
    out.add_cut("shape: " + fit(_shape(document), shape_room), reserve=reserve)

    chain = list(_biggest(document))
    total = max(1, len(data))
    if chain:
        out.add(
            "bulk (largest part at each level; bytes, ~ where estimated as compact JSON):",
            reserve=reserve,
        )
        for path, value, steps in chain[:6]:
            span = where.locate(steps)
            size = span[1] - span[0] if span is not None else _size(value)
            about = "" if span is not None else "~"
            share = min(100, round(100 * size / total))
            what = _type(value)
            count = f"[{len(value):,}]" if _is_arr(value) else ""
            keys = f"({len(value):,} keys)" if _is_obj(value) else ""
            if not out.add(
                f"  {path}: {what}{count}{keys} {about}{size:,} bytes ({share}%)", reserve=reserve
            ):
                break
    if _is_obj(document) and len(document) > 1:
        spans = where.members(where.spans.root(), document)
        names: list[str] = list(document)
        # A simdjson object's values are looked up by key, each lookup walking its members
        # from the first: past _LOOKUPS_MAX keys, a stated sample of them is sized.
        sample = isinstance(document, _SIMD_OBJECTS) and len(names) > _LOOKUPS_MAX
        sized = [names[i] for i in _sample_indices(len(names), 4 * _SAMPLE)] if sample else names
        sizes = sorted(
            (
                (spans[k][1] - spans[k][0] if k in spans else _size(document[k]), k in spans, k)
                for k in sized
            ),
            key=lambda t: (-t[0], t[2]),
        )
        listed = ", ".join(
            f"{_key(k)} {s:,} at {spans[k][0]:,}" if exact else f"{_key(k)} ~{s:,}"
            for s, exact, k in sizes[:10]
        )
        more = f", +{len(names) - 10} keys" if len(names) > 10 else ""
        of = f" of an even sample of {len(sized):,} of the {len(names):,} keys" if sample else ""
        del names, sized  # a map's keys may be most of the document
        out.add_cut(
            f"top-level keys{of} by size (bytes; ~ estimated; at = byte offset of the value): "
            f"{listed}{more}",
            reserve=reserve,
        )

    found = _records(document)

    def hint(expression: str) -> str:
        return f"{read_hint}(ref, {orjson.dumps(expression).decode()})"

    def record(title: str, path: str, span: Span | None, value: Any, room: int) -> None:
        text = None if span is None else where.quote(span, 260)
        if span is not None and text is not None:
            line = f"{title} ({where.label(span)}): {text}"
        else:
            line = (
                f"{title}, re-serialised compactly (not located in the bytes; "
                f"query {path} for it): {_shown(value, 260)}"
            )
        out.add_cut(line, reserve=room)

    hints = [hint("keys(@)")] if _is_obj(document) else []
    if found is not None:
        path, records, parts = found
        length_path = "@" if path == "@" else path
        hints.append(hint(f"length({length_path})"))
        facts, scope, pairs = _field_facts(records)
        out.add(f"records at {path}: {len(records):,}; fields over {scope}:", reserve=reserve)
        shown = out.add_all(facts, reserve=reserve + 600)
        if shown < len(facts):
            out.add(f"  ... {len(facts) - shown} more field lines", reserve=reserve + 600)
        base = "" if path == "@" else path
        where_records = where.locate(parts[:-1] if parts and parts[-1] is None else parts)
        first_span = last_span = None
        if where_records is not None:
            if parts and parts[-1] is None:
                container = _walk(document, parts[:-1])
                members = where.spans.members(where_records, list(container.keys()), ends=True)
                names = list(container.keys())
                first_span = members.get(names[0]) if names else None
                last_span = members.get(names[-1]) if names else None
            else:
                first_span = where.spans.first(where_records)
                last_span = where.element_last(where_records, records)
        first_path = f"{base or '@'}[0]"
        last_path = f"{base or '@'}[-1]"
        prefix = base if base else ""
        for key, value, _ in pairs:
            hints.append(hint(f"length({prefix}[?{key}=='{value}'])"))
        hints.append(hint(f"{prefix}[-1]"))
        queries = utf8_len(" | ".join(hints)) + 8  # the queries keep their room
        record(f"first {first_path}", first_path, first_span, records[0], reserve + 300 + queries)
        record(f"last  {last_path}", last_path, last_span, records[-1], reserve + queries)
    elif _is_arr(document) and len(document):
        root = where.spans.root()
        first_span = where.spans.first(root) if root else None
        last_span = where.element_last(root, document) if root else None
        hints.append(hint("length(@)"))
        queries = utf8_len(" | ".join(hints)) + 8
        record("first [0]", "[0]", first_span, document[0], reserve + queries)
        record("last  [-1]", "[-1]", last_span, document[-1], reserve + queries)
    elif chain:
        deepest = chain[-1][0]
        hints.append(hint(deepest))
    out.add_cut("query: " + " | ".join(hints), reserve=reserve)
    out.add(tail_line)
    return out.text()


def _walk(document: Any, parts: tuple[Part, ...]) -> Any:
    value = document
    for part in parts:
        value = value[part]
    return value
