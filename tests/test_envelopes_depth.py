"""Deep JSON and TOML through the library: a typed error at every depth, never a RecursionError.

The command line has always said "nests too deeply" in one line; these drive the library calls
an orchestrator makes (``Envelope.parse``, ``Envelope.from_document``, ``decode_authority``,
``parse_authority``), over depths from one level to far past what the parsers recurse. The
depths are bounded by what the test harness builds and parses quickly (a 100,000-deep text is
a few hundred kilobytes), not by the library.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cargohold.envelopes import (
    AuthorityError,
    Envelope,
    EnvelopeError,
    Role,
    canonical_json,
    decode_authority,
    parse_authority,
)
from cargohold.envelopes._envelope import MAX_PACKET_DEPTH
from cargohold.envelopes._source import MAX_AUTHORITY_DEPTH
from envelopes_fixtures import document, ready, scenario

# From nothing to three orders of magnitude past the JSON decoder's recursion (about 1,000).
depths = st.one_of(st.integers(1, 200), st.integers(200, 3_000), st.integers(3_000, 100_000))
shapes = st.sampled_from(["array", "object"])


def _nested_text(depth: int, shape: str, leaf: str = "1") -> str:
    if shape == "array":
        return "[" * depth + leaf + "]" * depth
    return '{"a":' * depth + leaf + "}" * depth


def _nested_value(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def _sealed(packet: dict[str, Any]) -> str:
    """A packet document whose digest matches ``packet``: what a hand-made packet looks like."""
    digest = "sha256:" + hashlib.sha256(canonical_json(packet)).hexdigest()
    return json.dumps({"digest": digest, "packet": packet})


def _worker_packet() -> dict[str, Any]:
    packet: dict[str, Any] = ready(scenario(), Role.WORKER, task="T2").as_document()["packet"]
    return packet


# -- packets -------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(depth=depths, shape=shapes, where=st.sampled_from(["document", "packet", "fact"]))
def test_a_packet_document_nested_any_depth_is_an_envelope_error(
    depth: int, shape: str, where: str
) -> None:
    deep = _nested_text(depth, shape)
    text = {
        "document": deep,
        "packet": '{"digest":"sha256:00","packet":' + deep + "}",
        "fact": '{"digest":"sha256:00","packet":{"format":"x","facts":{"brief":' + deep + "}}}",
    }[where]

    with pytest.raises(EnvelopeError):
        Envelope.parse(text)


@settings(max_examples=40, deadline=None)
@given(depth=st.integers(1, 2 * MAX_PACKET_DEPTH))
def test_a_sealed_packet_parses_within_the_depth_bound_and_is_refused_past_it(depth: int) -> None:
    packet = _worker_packet()
    packet["facts"]["brief"] = _nested_value(depth, "T2")
    text = _sealed(packet)
    # The document, its packet and the facts are three levels; the brief adds one per list.
    levels = 3 + depth

    if levels <= MAX_PACKET_DEPTH:
        assert Envelope.parse(text).facts["brief"] == packet["facts"]["brief"]
    else:
        with pytest.raises(EnvelopeError):
            Envelope.parse(text)


def test_a_packet_document_that_contains_itself_is_an_envelope_error() -> None:
    packet = _worker_packet()
    packet["facts"]["brief"] = packet["facts"]

    with pytest.raises(EnvelopeError):
        Envelope.from_document({"digest": "sha256:00", "packet": packet})


def test_every_packet_cargohold_builds_nests_well_within_the_bound() -> None:
    authority = scenario()
    for role in (Role.PLANNER, Role.WORKER, Role.REVIEWER):
        envelope = ready(authority, role, task="T2")
        assert Envelope.parse(envelope.data) == envelope
    coordinator = ready(authority, Role.COORDINATOR)
    assert Envelope.parse(coordinator.data) == coordinator


# -- authorities ---------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(depth=depths, shape=shapes, kind=st.sampled_from(["json", "toml"]))
def test_an_authority_nested_any_depth_is_an_authority_error(
    depth: int, shape: str, kind: str
) -> None:
    if kind == "json":
        text = '{"format":1,"tasks":' + _nested_text(depth, shape) + "}"
    elif shape == "array":
        text = "tasks = " + _nested_text(depth, "array") + "\n"
    else:
        text = "tasks = " + "{a = " * depth + "1" + "}" * depth + "\n"

    with pytest.raises(AuthorityError):
        decode_authority(text.encode(), kind=kind)


@settings(max_examples=40, deadline=None)
@given(depth=st.one_of(st.integers(2, 2 * MAX_AUTHORITY_DEPTH), st.integers(2, 20_000)))
def test_a_path_list_nested_in_lists_is_an_authority_error_at_any_depth(depth: int) -> None:
    # One level (a list of paths) is the format; two and more are not, whatever the depth.
    doc = document()
    doc["tasks"][0]["boundary"]["write"] = "@deep@"
    text = json.dumps(doc).replace('"@deep@"', _nested_text(depth, "array", '"src/x.py"'))
    doc["tasks"][0]["boundary"]["write"] = _nested_value(depth, "src/x.py")

    with pytest.raises(AuthorityError):
        parse_authority(doc)
    with pytest.raises(AuthorityError):
        decode_authority(text.encode(), kind="json")


def test_an_authority_that_contains_itself_is_an_authority_error() -> None:
    doc = document()
    doc["tasks"][0]["boundary"]["write"] = [doc]

    with pytest.raises(AuthorityError):
        parse_authority(doc)


def test_the_authority_format_nests_well_within_the_bound() -> None:
    doc = document()
    assert decode_authority(json.dumps(doc).encode(), kind="json") == parse_authority(doc)
