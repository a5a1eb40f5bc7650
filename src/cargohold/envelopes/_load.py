"""Loading what a packet holds by reference: long texts, and the detail behind each digest.

A packet is complete for its decision without these reads; they are what an agent asks for
when it wants the text of a long objective, or the allocations a summary counts. Each read is
an ordinary verified store read in the reader's own scope: the bytes are the ones the packet's
digest names, or the read says why not (``missing``, ``unauthorized``, ``expired``...).

The agent a packet is for usually runs in another session. The orchestrator therefore builds
the packet with a store bound to that agent's session (``hold.for_session(agent_session)``,
or ``cargohold --session AGENT envelope build ...``), and the agent reads it with its own hold
(:func:`load_facts`, or ``cargohold envelope load``). A reference stored in another session of
the tenant reads as ``unauthorized``, as every cross-session read does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from cargohold._records import ReadResult
from cargohold._ref import Ref, is_ref
from cargohold.envelopes._envelope import Envelope
from cargohold.envelopes._types import DIGEST_KIND, EnvelopeError

MAX_LOAD_BYTES = 16 * 1024 * 1024
"""The most bytes one reference is read for by default."""
MAX_FACT_DEPTH = 100
"""The deepest nesting of a packet's facts :func:`load_facts` walks. The authority's schema keeps
real facts a few levels deep; a hand-made packet nested deeper is refused, not recursed into."""

_STUB_KEYS = frozenset({"artifact", "bytes", "media_type"})


class FactReader(Protocol):
    """Where an agent reads referenced facts from: :class:`cargohold.ScopedStore` is one."""

    def read(self, ref: Ref | str, *, max_bytes: int | None = None) -> ReadResult:
        """The verified bytes of ``ref``, or an outcome without content."""
        ...


@dataclass(frozen=True, slots=True)
class LoadedFacts:
    """A packet's facts with their references read.

    Attributes:
        envelope: The packet.
        facts: The facts, each ``{"artifact": ..., "bytes": ..., "media_type": ...}`` replaced
            by the text it names (or the JSON value, for ``application/json``); a reference
            that could not be read is left as it is.
        details: ``sha256:<hex>`` of each digest binding -> the detail document it binds (the
            records a summary counts, with their revisions).
        failed: Each reference that could not be read -> its read outcome (``missing``,
            ``unauthorized``, ``stale``, ``expired``, ``over_budget``).
    """

    envelope: Envelope = field(repr=False)
    facts: Mapping[str, Any] = field(repr=False)
    details: Mapping[str, Any] = field(repr=False)
    failed: Mapping[str, str]

    @property
    def complete(self) -> bool:
        """Whether every reference was read."""
        return not self.failed

    def as_dict(self) -> dict[str, Any]:
        """The JSON form ``cargohold envelope load`` prints."""
        return {
            "digest": self.envelope.digest,
            "role": self.envelope.role.value,
            "decision": self.envelope.decision.value,
            "facts": dict(self.facts),
            "details": dict(self.details),
            "failed": dict(self.failed),
        }


def _is_stub(value: object) -> bool:
    return (
        isinstance(value, Mapping)
        and set(value) == _STUB_KEYS
        and isinstance(value["artifact"], str)
        and is_ref(value["artifact"])
    )


def load_facts(
    envelope: Envelope | bytes | str,
    store: FactReader,
    *,
    details: bool = True,
    max_bytes: int = MAX_LOAD_BYTES,
) -> LoadedFacts:
    """Read every reference of a packet from ``store`` (the reading agent's own scope).

    Args:
        envelope: The packet (its digest is verified first).
        store: The reader's store, e.g. ``hold.store`` of the agent the packet is for.
        details: Also read the detail behind each digest binding.
        max_bytes: The most bytes one reference is read for.

    Raises:
        EnvelopeError: not a valid packet document, facts nested deeper than
            :data:`MAX_FACT_DEPTH`, or a referenced fact that is not the JSON or text its
            packet says.
    """
    if not isinstance(envelope, Envelope):
        envelope = Envelope.parse(envelope)
    failed: dict[str, str] = {}

    def read(ref: str, media_type: str) -> tuple[bool, Any]:
        result = store.read(ref, max_bytes=max_bytes)
        if not result.ok or result.data is None:
            failed[ref] = result.outcome.value
            return False, None
        json_fact = media_type.startswith("application/json")
        try:
            if json_fact:
                return True, json.loads(result.data)
            return True, result.data.decode("utf-8")
        except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError included
            # Only a hand-made packet names such bytes: cargohold stores what it can read back.
            what = "JSON nested no deeper than Python parses" if json_fact else "UTF-8 text"
            raise EnvelopeError(f"the fact {ref} is not {what}, as its packet says") from None

    def resolve(value: Any, depth: int = 0) -> Any:
        if depth > MAX_FACT_DEPTH:  # before Python's own recursion limit, and typed
            raise EnvelopeError(
                f"the packet's facts nest deeper than {MAX_FACT_DEPTH} levels; a packet "
                "cargohold builds nests a few"
            )
        if _is_stub(value):
            ok, loaded = read(value["artifact"], str(value["media_type"]))
            return loaded if ok else value
        if isinstance(value, Mapping):
            return {key: resolve(item, depth + 1) for key, item in value.items()}
        if isinstance(value, list):
            return [resolve(item, depth + 1) for item in value]
        return value

    facts = resolve(envelope.facts)
    found: dict[str, Any] = {}
    if details:
        for binding in envelope.bindings:
            if binding.kind == DIGEST_KIND and isinstance(binding.value, str):
                hex_digest = binding.value.removeprefix("sha256:")
                ok, loaded = read(f"artifact://sha256/{hex_digest}", "application/json")
                if ok:
                    found[binding.value] = loaded
    return LoadedFacts(envelope, facts, found, failed)
