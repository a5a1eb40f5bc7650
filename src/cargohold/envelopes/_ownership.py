"""The one answer a packet gives about a path: which of the five ownership values holds.

A packet's ``ownership`` fact represents ownership exactly inside its ``scope`` (the task's
write boundary, and for a planner its read boundary too) and nowhere else:

* ``items`` are allocations listed one by one (those the task owns or claims, and every one
  overlapping its write boundary), each with what it means to the task;
* ``summary.groups`` (planner only) summarise the other allocations overlapping the read
  boundary by path prefix: how many lie under the prefix, how many are reserved or unresolved,
  and, when one allocation sits exactly at the prefix, what it means.

The answer is computed from those facts alone, the same way for a ``coverage`` entry and for
:meth:`~cargohold.envelopes.Envelope.ownership_of`, so one packet never answers one path two
ways. It is ``owned`` only when everything that overlaps the path is known and the deepest
allocation covering it is this task's; whatever the packet cannot see (outside its scope, or
hidden inside a summarised prefix) is ``not_represented``, which never permits a write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cargohold.envelopes._paths import covers, depth, overlaps
from cargohold.envelopes._types import Ownership

_RELATIONS = frozenset({Ownership.OWNED, Ownership.RESERVED, Ownership.UNRESOLVED})


@dataclass(frozen=True, slots=True)
class _Group:
    prefix: str
    allocations: int
    reserved: int
    unresolved: int
    at_prefix: Ownership | None

    @property
    def hidden(self) -> int:
        """Allocations strictly below the prefix, whose paths the packet does not show."""
        return self.allocations - (self.at_prefix is not None)


def _relation(value: object) -> Ownership | None:
    try:
        relation = Ownership(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return relation if relation in _RELATIONS else None


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _paths(value: object) -> list[str] | None:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        return None
    return value


def _read(
    fact: Mapping[str, Any],
) -> tuple[list[str], list[str], list[tuple[str, Ownership]], list[_Group]] | None:
    """The exact scope (write paths), summarised scope (read paths), items and groups of an
    ownership fact, or ``None`` if it is malformed (a packet whose ownership fact is not in
    this shape answers ``not_represented``)."""
    scope = fact.get("scope")
    fields = scope.get("fields") if isinstance(scope, Mapping) else None
    if not isinstance(fields, Mapping):
        return None
    exact = _paths(fields.get("boundary.write"))
    summarised = _paths(fields.get("boundary.read", []))
    if exact is None or summarised is None:
        return None
    raw_items = fact.get("items")
    if not isinstance(raw_items, list):
        return None
    items: list[tuple[str, Ownership]] = []
    for item in raw_items:
        fields = item.get("fields") if isinstance(item, Mapping) else None
        path = fields.get("path") if isinstance(fields, Mapping) else None
        relation = _relation(item.get("ownership")) if isinstance(item, Mapping) else None
        if not isinstance(path, str) or relation is None:
            return None
        items.append((path, relation))
    groups: list[_Group] = []
    summary = fact.get("summary")
    if summary is not None:
        raw_groups = summary.get("groups") if isinstance(summary, Mapping) else None
        if not isinstance(raw_groups, list):
            return None
        for group in raw_groups:
            if not isinstance(group, Mapping) or not isinstance(group.get("prefix"), str):
                return None
            counts = [_count(group.get(k)) for k in ("allocations", "reserved", "unresolved")]
            at_prefix = group.get("at_prefix")
            relation = None if at_prefix is None else _relation(at_prefix)
            if None in counts or (at_prefix is not None and relation is None):
                return None
            allocations, reserved, unresolved = (c or 0 for c in counts)
            groups.append(_Group(group["prefix"], allocations, reserved, unresolved, relation))
    return exact, summarised, items, groups


def answer(fact: object, path: str) -> Ownership:
    """What an ownership fact says about ``path`` (already a normal path).

    ``reserved`` when an allocation of another task certainly overlaps ``path``; otherwise
    ``not_represented`` unless everything overlapping ``path`` is known; then ``unresolved``
    when an explicitly unresolved allocation overlaps it; then ``owned`` when the deepest
    allocation covering it is this task's; else ``not_represented``.
    """
    parsed = _read(fact) if isinstance(fact, Mapping) else None
    if parsed is None:
        return Ownership.NOT_REPRESENTED  # no ownership fact, or not one this version reads
    exact, summarised, items, groups = parsed
    if any(r is Ownership.RESERVED and overlaps(p, path) for p, r in items):
        return Ownership.RESERVED
    for group in groups:
        if covers(path, group.prefix) and group.reserved:
            return Ownership.RESERVED  # every allocation of the group lies inside the path
        if covers(group.prefix, path) and group.at_prefix is Ownership.RESERVED:
            return Ownership.RESERVED  # the allocation at the prefix covers the path
    if not any(covers(outer, path) for outer in exact):
        # Outside the write boundary, where every overlapping allocation is listed: known
        # only inside the summarised read boundary, and only where no summary hides anything.
        if not any(covers(outer, path) for outer in summarised):
            return Ownership.NOT_REPRESENTED  # outside the packet's scope: it does not know
        if any(covers(g.prefix, path) and g.prefix != path and g.hidden for g in groups):
            return Ownership.NOT_REPRESENTED  # an allocation hidden in a summary may overlap it
    if any(r is Ownership.UNRESOLVED and overlaps(p, path) for p, r in items):
        return Ownership.UNRESOLVED
    for group in groups:
        if covers(path, group.prefix) and group.unresolved:
            return Ownership.UNRESOLVED
        if covers(group.prefix, path) and group.at_prefix is Ownership.UNRESOLVED:
            return Ownership.UNRESOLVED
    covering = [(p, r) for p, r in items if covers(p, path)]
    if covering:
        _, deepest = max(covering, key=lambda pair: depth(pair[0]))
        if deepest is Ownership.OWNED:
            return Ownership.OWNED
    return Ownership.NOT_REPRESENTED
