"""The JSON projector: shape, where the bytes are, field facts, first and last records, queries.

A model must be able to act without reading the body: what the document is (its shape, with
array lengths and key sets), where its bulk lies (paths with their share of the bytes), what the
records hold (per-field types, ranges, distinct values and counts, over all records or a stated
sample), the first and the last record verbatim, the document's last bytes, and JMESPath queries
that work with ``artifact_query`` as they stand.

Walks are bounded: arrays are sampled (first, last and evenly spaced elements), so the cost
beyond parsing stays small whatever the document.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import simdjson

from cargohold._text import fit
from cargohold.projection._model import Builder, clip

_SAMPLE = 24
"""Elements of an array looked at to describe its element shape and size."""
_STATS_ALL = 1_000
"""Arrays of records up to this length get exact field facts; longer ones a stated sample."""
_STATS_SAMPLE = 1_000
_DISTINCT_MAX = 2_000
"""Distinct strings counted per field; past this, "over 2,000 distinct"."""
_ORJSON_MAX = 4 * 1024 * 1024
"""Largest body materialized as Python values when simdjson cannot read it."""
_MAX_KEYS = 12
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class JsonError(ValueError):
    """The body looked like JSON but is not."""


def _is_obj(value: Any) -> bool:
    return isinstance(value, dict | simdjson.Object)


def _is_arr(value: Any) -> bool:
    return isinstance(value, list | simdjson.Array)


def _dumps(value: Any) -> bytes:
    """Compact JSON of a value: simdjson's own minifier for its proxies (no Python copy)."""
    if isinstance(value, simdjson.Object | simdjson.Array):
        mini: bytes | str = value.mini  # bytes at run time; the stubs say str
        return mini if isinstance(mini, bytes) else mini.encode()
    return orjson.dumps(value)


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
        total = sum(len(_dumps(value[i])) + 1 for i in picks)
        return int(total / len(picks) * len(value)) + 1
    if _is_obj(value) and len(value) > 4 * _SAMPLE:
        keys = list(value)
        picks = _sample_indices(len(keys))
        total = sum(len(_dumps(value[keys[i]])) + len(keys[i]) + 4 for i in picks)
        return int(total / len(picks) * len(keys)) + 1
    return len(_dumps(value))


def _shape(value: Any, depth: int = 0) -> str:
    """A compact type signature: ``array[12034] of {id: int, status: str}``."""
    kind = _type(value)
    if kind == "array":
        if not value:
            return "array[0]"
        element = _merge([value[i] for i in _sample_indices(len(value))], depth + 1)
        return f"array[{len(value):,}] of {element}"
    if kind == "object":
        if depth >= 6:
            return f"object({len(value)} keys)"
        if _is_map(value):
            return _map_shape(value, depth)
        items = list(value.items())
        parts = [f"{_key(k)}: {_shape(v, depth + 1)}" for k, v in items[:_MAX_KEYS]]
        if len(items) > _MAX_KEYS:
            parts.append(f"... +{len(items) - _MAX_KEYS} keys")
        return "{" + ", ".join(parts) + "}"
    return kind


_ID_KEY = re.compile(r"[0-9]+|[0-9a-fA-F-]{8,}|[A-Z0-9_]+")


def _is_map(value: Any) -> bool:
    """An object used as a map (id-keyed, or with very many keys), not as a record."""
    if len(value) <= 4:
        return False
    keys = list(value)
    sample = [keys[i] for i in _sample_indices(len(keys), 16)]
    return len(value) > 4 * _MAX_KEYS or all(_ID_KEY.fullmatch(k) for k in sample)


def _map_shape(value: Any, depth: int) -> str:
    keys = list(value)
    picks = _sample_indices(len(keys))
    example = ", ".join(_key(keys[i]) for i in picks[:2])
    inner = _merge([value[keys[i]] for i in picks], depth + 1)
    return f"map{{{len(keys):,} keys, e.g. {example}}} of {inner}"


def _merge(values: list[Any], depth: int) -> str:
    """One signature for sampled array elements: shared keys, optional ones marked ``?``."""
    kinds = Counter(_type(v) for v in values)
    if len(kinds) > 1:
        return "(" + " | ".join(sorted(kinds)) + ")"
    kind = next(iter(kinds))
    if kind != "object":
        if kind == "array" and depth < 8:
            inner = [x for v in values for x in v[:4]]
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
        merged: dict[str, Any] = {}
        for v in values:
            merged.update(v)
        return _map_shape(merged, depth)
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


def _biggest(value: Any, path: str = "", depth: int = 0) -> Iterator[tuple[str, int, Any]]:
    """The chain of largest children from the root down, with their sizes (bytes)."""
    if depth > 8:
        return
    children: list[tuple[str, Any]]
    if _is_obj(value) and len(value):
        children = [(_join(path, _key(k)), v) for k, v in value.items()]
        if len(children) > 4 * _SAMPLE:
            children = [children[i] for i in _sample_indices(len(children))]
    elif _is_arr(value) and len(value):
        picks = _sample_indices(len(value), 16)
        children = [(_join(path, f"[{i}]"), value[i]) for i in picks]
    else:
        return
    if (_is_arr(value) and len(value) > 1) or (_is_obj(value) and _is_map(value)):
        return  # the bulk of an array or a map is its entries as a whole, not one of them
    sized = sorted(((_size(v), p, v) for p, v in children), key=lambda t: -t[0])
    size, child_path, child = sized[0]
    yield child_path, size, child
    yield from _biggest(child, child_path, depth + 1)


def _records(value: Any, path: str = "", depth: int = 0) -> tuple[str, list[Any]] | None:
    """The largest array of objects in the document (by length), found by a bounded walk."""
    best: tuple[str, list[Any]] | None = None
    if _is_arr(value):
        picks = _sample_indices(len(value), 8)
        if len(value) > 1 and all(_is_obj(value[i]) for i in picks):
            best = (path or "@", value)
        if depth < 3:
            for i in _sample_indices(len(value), 3):
                found = _records(value[i], _join(path, f"[{i}]"), depth + 1)
                if found and (best is None or len(found[1]) > len(best[1])):
                    best = found
    elif _is_obj(value) and depth < 4:
        if _is_map(value):
            entries = list(value.values())
            picks = _sample_indices(len(entries), 8)
            if all(_is_obj(entries[i]) for i in picks):
                return (f"values({path or '@'})", entries)
        items = list(value.items())
        if len(items) > 64:
            items = [items[i] for i in _sample_indices(len(items), 16)]
        for k, v in items:
            if _is_obj(v) or _is_arr(v):
                found = _records(v, _join(path, _key(k)), depth + 1)
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
        kind = _type(value)
        self.kinds[kind] += 1
        if kind == "null":
            self.nulls += 1
        elif kind in ("int", "float"):
            if math.isfinite(value):
                self.low = value if self.low is None else min(self.low, value)
                self.high = value if self.high is None else max(self.high, value)
        elif kind == "str":
            self.longest = max(self.longest, len(value))
            if value in self.strings or len(self.strings) < _DISTINCT_MAX:
                self.strings[value] += 1
            else:
                self.overflow = True
        elif kind == "bool":
            self.trues += value is True

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
    keys: dict[str, None] = {}
    for i in _sample_indices(total, 200):
        row = records[i]
        if _is_obj(row):
            for k in row:
                keys.setdefault(k, None)
    fields = {k: _Field() for k in list(keys)[:_MAX_KEYS]}
    rows = 0
    for i in indices:
        row = records[i]
        if not _is_obj(row):
            continue
        rows += 1
        for key, value in row.items():
            facts = fields.get(key)
            if facts is not None:
                facts.add(value)
    lines = [facts.line(key, rows) for key, facts in fields.items()]
    if len(keys) > _MAX_KEYS:
        lines.append(f"  ... +{len(keys) - _MAX_KEYS} more fields")
    hints: list[tuple[str, str, int]] = []
    for key, facts in fields.items():
        distinct = len(facts.strings)
        if 2 <= distinct <= 12 and not facts.overflow and _IDENT.fullmatch(key):
            value = facts.strings.most_common(1)[0][0]
            if "'" not in value and len(value) <= 40:
                hints.append((key, value, distinct))
                break
    return lines, scope, hints


def _parse(data: bytes) -> Any:
    """The document, as Python values up to 4 MiB (orjson; walks over them are fastest), as
    simdjson's lazy proxies beyond (memory stays near the input's size, where Python values
    would take ten to fifteen times it)."""
    if len(data) <= _ORJSON_MAX:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise JsonError("not valid JSON") from exc
    try:
        return simdjson.Parser().parse(data)
    except (ValueError, RuntimeError) as exc:  # invalid, or integers past 64 bits
        raise JsonError("not JSON that can be read within bounded memory") from exc


def project_json(data: bytes, budget: int, *, read_hint: str = "artifact_query") -> str:
    """A structure-aware preview of a JSON document within ``budget`` bytes.

    Raises:
        JsonError: the body is not valid JSON (the caller falls back to a verbatim excerpt).
    """
    document = _parse(data)
    out = Builder(budget)
    tail_text = data[-600:].decode("utf-8", "replace").replace("\r", "").replace("\n", " ")
    tail_line = "ends with: " + " ".join(tail_text.split())[-150:]
    reserve = len(tail_line.encode()) + 2
    kind = _type(document)
    if kind == "array":
        out.add(f"json array of {len(document):,} items", reserve=reserve)
    elif kind == "object":
        out.add(f"json object with {len(document):,} keys", reserve=reserve)
    else:
        out.add(f"json {kind}", reserve=reserve)
    shape_room = max(200, budget * 2 // 5)
    out.add_cut("shape: " + fit(_shape(document), shape_room), reserve=reserve)

    chain = list(_biggest(document))
    total = max(1, len(data))
    if chain:
        out.add("bulk (largest part at each level, approximate bytes):", reserve=reserve)
        for path, size, value in chain[:6]:
            share = min(100, round(100 * size / total))
            what = _type(value)
            count = f"[{len(value):,}]" if _is_arr(value) else ""
            keys = f"({len(value):,} keys)" if _is_obj(value) else ""
            if not out.add(
                f"  {path}: {what}{count}{keys} ~{size:,} bytes ({share}%)", reserve=reserve
            ):
                break
    if _is_obj(document) and len(document) > 1:
        sizes = sorted(((_size(v), k) for k, v in document.items()), reverse=True)
        listed = ", ".join(f"{_key(k)} ~{s:,}" for s, k in sizes[:10])
        more = f", +{len(sizes) - 10} keys" if len(sizes) > 10 else ""
        out.add_cut(f"top-level keys by size: {listed}{more}", reserve=reserve)

    found = _records(document)

    def hint(expression: str) -> str:
        return f"{read_hint}(ref, {orjson.dumps(expression).decode()})"

    hints = [hint("keys(@)")] if _is_obj(document) else []
    if found is not None:
        path, records = found
        length_path = "@" if path == "@" else path
        hints.append(hint(f"length({length_path})"))
        facts, scope, pairs = _field_facts(records)
        out.add(f"records at {path}: {len(records):,}; fields over {scope}:", reserve=reserve)
        shown = out.add_all(facts, reserve=reserve + 600)
        if shown < len(facts):
            out.add(f"  ... {len(facts) - shown} more field lines", reserve=reserve + 600)
        base = "" if path == "@" else path
        first = clip(_dumps(records[0]).decode(), 260)
        last = clip(_dumps(records[-1]).decode(), 260)
        out.add_cut(f"first {base or '@'}[0]: {first}", reserve=reserve + 300)
        out.add_cut(f"last  {base or '@'}[-1]: {last}", reserve=reserve)
        prefix = base if base else ""
        for key, value, _ in pairs:
            hints.append(hint(f"length({prefix}[?{key}=='{value}'])"))
        hints.append(hint(f"{prefix}[-1]"))
    elif _is_arr(document) and len(document):
        out.add_cut(f"first [0]: {clip(_dumps(document[0]).decode(), 260)}", reserve=reserve)
        out.add_cut(f"last  [-1]: {clip(_dumps(document[-1]).decode(), 260)}", reserve=reserve)
        hints.append(hint("length(@)"))
    elif chain:
        deepest = chain[-1][0]
        hints.append(hint(deepest))
    out.add_cut("query: " + " | ".join(hints), reserve=reserve)
    out.add(tail_line)
    return out.text()
