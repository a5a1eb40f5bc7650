"""Checkpoints and handoffs: a working context as metadata and references only.

A checkpoint is canonical JSON (sorted keys, no insignificant whitespace, UTF-8, integers and
strings only, no clock, nothing random)::

    {"checkpoint":{"budget":"balanced","format":"cargohold.working-checkpoint/1",
                   "results":[...],"state":{...}},"mac":"<64 hex>"}

Each result is its :meth:`~cargohold.working.WorkerResult.as_dict`: status, bounded summary,
findings and errors, the proposed state delta, and the references with their roles,
association ids and the store's size and media type. No byte of any worker's output is in it,
nor any preview of one; a new primary reads the evidence through the references.

``mac`` is an HMAC-SHA256 of the ``checkpoint`` object's canonical bytes under the store's marker
key (:mod:`cargohold._marks`): a primary that opens the same store verifies that the checkpoint
was written by a holder of that store and not edited since (a forged "passed" is refused, never
believed). The checkpoint names no owner: the new primary opens the store with its own scope,
and every reference is checked against that scope when read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cargohold._errors import UsageError
from cargohold._marks import check_key, same, tag
from cargohold._records import MiB
from cargohold._ref import Ref
from cargohold._stub import Budget
from cargohold.working._result import (
    Scalar,
    WorkerResult,
    WorkerResultError,
    _check_scalar,
    check_id,
)

FORMAT = "cargohold.working-checkpoint/1"
"""The checkpoint format this version writes and reads."""
MAX_CHECKPOINT_BYTES = 8 * MiB
"""The largest checkpoint document :meth:`Checkpoint.parse` reads."""
MAX_RESULTS = 1024
"""The most worker results one checkpoint carries."""
STATE_MAX = 256
"""The most keys of the primary's state one checkpoint carries."""

_DOMAIN = b"cargohold checkpoint"


class CheckpointError(UsageError):
    """Bytes that are not a checkpoint of this version, or a checkpoint that was edited or
    written for another store. Refused whole: never repaired, never partly believed.

    Attributes:
        reason: A stable code: ``too_large``, ``not_json``, ``format``, ``mac_mismatch``,
            ``invalid_result`` or ``invalid_state``.
    """

    code = "checkpoint"

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def _canonical(value: Any) -> bytes:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def check_state(state: object) -> dict[str, Scalar]:
    """The primary's state as a plain dict, if it is at most :data:`STATE_MAX` short keys of
    bounded scalar values (text, integer, boolean, null).

    Raises:
        WorkerResultError: a key or value out of bounds.
    """
    if not isinstance(state, Mapping):
        raise WorkerResultError("state: expected an object", reason="wrong_type", field="state")
    if len(state) > STATE_MAX:
        raise WorkerResultError(
            f"state: at most {STATE_MAX} keys", reason="too_many", field="state"
        )
    return {check_id(key, "state"): _check_scalar(value, "state") for key, value in state.items()}


@dataclass(frozen=True, slots=True, eq=False)
class Checkpoint:
    """A working context's results and the primary's state: metadata and references only.

    Equal when their bytes are equal. Build one with
    :meth:`cargohold.working.WorkingContext.checkpoint`; a new primary gives it (or its
    :meth:`to_json`) to :meth:`cargohold.working.WorkingContext.restore`.

    Attributes:
        data: The canonical document bytes (what to write to a file or hand over).
        budget: The projection budget of the context it came from.
        results: The worker results, in sequence order.
        state: The primary's consolidated state at the checkpoint.
    """

    data: bytes = field(repr=False)
    budget: Budget
    results: tuple[WorkerResult, ...] = field(repr=False)
    state: Mapping[str, Scalar] = field(repr=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and other.data == self.data

    def __hash__(self) -> int:
        return hash(self.data)

    def __repr__(self) -> str:
        return f"Checkpoint({len(self.results)} results, {len(self.data):,} bytes)"

    @property
    def refs(self) -> tuple[Ref, ...]:
        """Every distinct reference the checkpoint names, in order of first appearance."""
        seen: dict[Ref, None] = {}
        for result in self.results:
            for entry in result.refs:
                seen.setdefault(entry.ref)
        return tuple(seen)

    def to_json(self) -> str:
        """The document as text."""
        return self.data.decode("utf-8")

    @classmethod
    def build(
        cls,
        results: Sequence[WorkerResult],
        *,
        budget: Budget,
        state: Mapping[str, Scalar],
        key: bytes,
    ) -> Checkpoint:
        """The checkpoint of ``results`` and ``state``, bound to the store's marker ``key``.

        Raises:
            UsageError: too many results, or a state out of bounds.
        """
        if len(results) > MAX_RESULTS:
            raise UsageError(f"a checkpoint carries at most {MAX_RESULTS} worker results")
        try:
            plain_state = check_state(state)
        except WorkerResultError as exc:
            raise UsageError(f"the primary's state is out of bounds ({exc.reason})") from None
        body = {
            "format": FORMAT,
            "budget": Budget.parse(budget).label,
            "results": [result.as_dict() for result in results],
            "state": plain_state,
        }
        return cls._from_body(body, check_key(key))

    @classmethod
    def _from_body(cls, body: dict[str, Any], key: bytes) -> Checkpoint:
        """The checkpoint of a body whose budget and state are checked; validates the results."""
        canonical = _canonical(body)
        mac = tag(key, _DOMAIN, canonical)
        document = b'{"checkpoint":' + canonical + b',"mac":"' + mac.encode() + b'"}'
        results = tuple(WorkerResult.from_dict(item) for item in body["results"])
        return cls(document, Budget.parse(body["budget"]), results, dict(body["state"]))

    @classmethod
    def parse(cls, data: bytes | str, *, key: bytes) -> Checkpoint:
        """Read a checkpoint document and verify it against the store's marker ``key``.

        Raises:
            CheckpointError: not a checkpoint of this version, or one whose MAC does not match
                (edited, or written for another store); results or state that do not validate.
        """
        secret = check_key(key)
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
        if len(raw) > MAX_CHECKPOINT_BYTES:
            raise CheckpointError(
                f"a checkpoint is at most {MAX_CHECKPOINT_BYTES:,} bytes", reason="too_large"
            )
        try:
            document = json.loads(raw.decode("utf-8"), parse_float=_refuse, parse_constant=_refuse)
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise CheckpointError("not a checkpoint: expected JSON", reason="not_json") from None
        if (
            not isinstance(document, dict)
            or set(document) != {"checkpoint", "mac"}
            or not isinstance(document["checkpoint"], dict)
            or not isinstance(document["mac"], str)
        ):
            raise CheckpointError("not a checkpoint: expected checkpoint and mac", reason="format")
        body = document["checkpoint"]
        if set(body) != {"format", "budget", "results", "state"} or body["format"] != FORMAT:
            raise CheckpointError(f"not a checkpoint of format {FORMAT}", reason="format")
        if not same(tag(secret, _DOMAIN, _canonical(body)), document["mac"]):
            raise CheckpointError(
                "the checkpoint does not match its MAC: edited, or written for another store",
                reason="mac_mismatch",
            )
        results, budget = body["results"], body["budget"]
        if not isinstance(results, list) or len(results) > MAX_RESULTS:
            raise CheckpointError("the checkpoint's results are not a list", reason="format")
        if not isinstance(budget, str) or budget not in {b.label for b in Budget}:
            raise CheckpointError("the checkpoint's budget is unknown", reason="format")
        try:
            check_state(body["state"])
        except WorkerResultError:
            raise CheckpointError(
                "the checkpoint's state is invalid", reason="invalid_state"
            ) from None
        try:
            parsed = cls._from_body(body, secret)
        except WorkerResultError as exc:
            raise CheckpointError(
                f"the checkpoint holds an invalid result ({exc.reason} at {exc.field})",
                reason="invalid_result",
            ) from None
        sequences = [result.sequence for result in parsed.results]
        if sequences != sorted(set(sequences)):
            raise CheckpointError(
                "the checkpoint's results are not in sequence order", reason="invalid_result"
            )
        return parsed


def _refuse(text: str) -> Any:
    raise ValueError("a checkpoint holds integers, never floats or constants")
