"""References parse exactly their canonical form; scopes fail closed and never show an owner."""

from __future__ import annotations

import dataclasses
import hashlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cargohold import InvalidReferenceError, InvalidScopeError, Ref, Scope, UsageError

CANONICAL = re.compile(r"artifact://sha256/[0-9a-f]{64}")
DIGEST = hashlib.sha256(b"cargohold").hexdigest()
TEXT = "artifact://sha256/" + DIGEST


# -- references -----------------------------------------------------------------------------


def test_the_canonical_form_parses_and_prints_back_unchanged() -> None:
    ref = Ref.parse(TEXT)

    assert ref.digest == DIGEST
    assert str(ref) == TEXT
    assert ref == Ref(DIGEST) == Ref.of(b"cargohold")


@pytest.mark.parametrize(
    "text",
    [
        TEXT.upper(),
        "artifact://sha256/" + DIGEST.upper(),
        "artifact://sha256/" + DIGEST[:-1] + "A",
        "Artifact://sha256/" + DIGEST,
        "artifact://SHA256/" + DIGEST,
        "artifact://sha512/" + DIGEST,
        "artifact://blake3/" + DIGEST,
        "sha256:" + DIGEST,
        "artifacts://sha256/" + DIGEST,
        "artifact:/sha256/" + DIGEST,
        "ref://sha256/" + DIGEST,
        DIGEST,
        "artifact://sha256/" + DIGEST[:-1],
        "artifact://sha256/" + DIGEST + "0",
        "artifact://sha256/",
        "",
        " " + TEXT,
        TEXT + " ",
        TEXT + "\n",
        "\n" + TEXT,
        TEXT[:30] + " " + TEXT[30:],
        TEXT + "/",
        TEXT + "/../etc/passwd",
        "artifact://sha256/../" + DIGEST,
        "artifact://sha256//" + DIGEST,
        "artifact://sha256/" + DIGEST + "?x=1",
        "artifact://sha256/" + DIGEST + "#frag",
        "artifact://sha256/" + "g" * 64,
        "artifact://sha256/" + "٣" * 64,
        "artifact://sha256/" + "\uff10" * 64,  # fullwidth zero: a unicode digit
    ],
)
def test_anything_but_the_canonical_form_is_refused(text: str) -> None:
    with pytest.raises(InvalidReferenceError):
        Ref.parse(text)


@pytest.mark.parametrize("value", [None, b"artifact://sha256/" + DIGEST.encode(), 42, ["x"]])
def test_a_reference_that_is_not_a_string_is_refused(value: object) -> None:
    with pytest.raises(InvalidReferenceError):
        Ref.parse(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("digest", [DIGEST.upper(), DIGEST[:-1], DIGEST + "a", "", 7])
def test_a_ref_built_from_a_malformed_digest_is_refused(digest: object) -> None:
    with pytest.raises(InvalidReferenceError):
        Ref(digest)  # type: ignore[arg-type]


def test_an_invalid_reference_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        Ref.parse("nope")
    assert InvalidReferenceError.code == "invalid_reference"


def test_refs_are_immutable_values() -> None:
    ref = Ref.parse(TEXT)

    with pytest.raises(dataclasses.FrozenInstanceError):
        ref.digest = "0" * 64  # type: ignore[misc]
    assert {ref, Ref(DIGEST)} == {ref}


def _near_canonical() -> st.SearchStrategy[str]:
    hexish = st.text(alphabet="0123456789abcdefABCDEFg \n/", min_size=60, max_size=68)
    prefix = st.sampled_from(["artifact://sha256/", "artifact://sha256", "ARTIFACT://sha256/", ""])
    return st.builds(lambda p, h: p + h, prefix, hexish)


@given(st.one_of(st.text(), _near_canonical(), st.from_regex(CANONICAL, fullmatch=True)))
def test_parse_succeeds_exactly_when_the_text_is_canonical(text: str) -> None:
    if CANONICAL.fullmatch(text):
        assert str(Ref.parse(text)) == text
    else:
        with pytest.raises(InvalidReferenceError):
            Ref.parse(text)


@given(st.binary(max_size=256))
def test_the_ref_of_any_bytes_round_trips_through_its_text(data: bytes) -> None:
    ref = Ref.of(data)

    assert Ref.parse(str(ref)) == ref
    assert ref.digest == hashlib.sha256(data).hexdigest()


# -- scopes ---------------------------------------------------------------------------------


def test_a_scope_holds_its_owner_as_a_tuple() -> None:
    scope = Scope("acme", "ana", "run-1", task="t", worker="w", agent="a")

    assert scope.owner == ("acme", "ana", "run-1")
    assert (scope.task, scope.worker, scope.agent) == ("t", "w", "a")


@pytest.mark.parametrize("missing", ["tenant", "user", "session"])
def test_a_scope_without_tenant_user_or_session_is_refused(missing: str) -> None:
    parts: dict[str, object] = {"tenant": "acme", "user": "ana", "session": "run-1"}
    parts[missing] = None

    with pytest.raises(InvalidScopeError):
        Scope(**parts)  # type: ignore[arg-type]


BAD_PARTS = ["", " ", "\t", " acme", "acme ", "ac\nme", "ac\x00me", "ac\x1bme", "ac\x7fme", "\r"]


@pytest.mark.parametrize("value", [*BAD_PARTS, 7, b"acme", "x" * 257])
@pytest.mark.parametrize("part", ["tenant", "user", "session", "task", "worker", "agent"])
def test_a_malformed_scope_part_is_refused(part: str, value: object) -> None:
    parts: dict[str, object] = {"tenant": "acme", "user": "ana", "session": "run-1"}
    parts[part] = value

    with pytest.raises(InvalidScopeError):
        Scope(**parts)  # type: ignore[arg-type]


# What Python makes of bytes that are not UTF-8 in an environment variable or an argument
# (surrogateescape), and a lone surrogate from JSON or a careless caller.
NOT_UTF8 = [b"\xff".decode("utf-8", "surrogateescape"), "ana\udcc3", "\ud800", "x\udfff"]


@pytest.mark.parametrize("value", NOT_UTF8, ids=ascii)
@pytest.mark.parametrize("part", ["tenant", "user", "session", "task", "worker", "agent"])
def test_a_scope_part_that_is_not_utf8_is_an_invalid_scope_not_an_encoding_crash(
    part: str, value: str
) -> None:
    parts: dict[str, object] = {"tenant": "acme", "user": "ana", "session": "run-1"}
    parts[part] = value

    with pytest.raises(InvalidScopeError) as raised:
        Scope(**parts)  # type: ignore[arg-type]

    assert raised.value.code == "invalid_scope"
    assert value not in str(raised.value)


def test_a_scope_part_in_any_script_is_accepted() -> None:
    scope = Scope("Zürich-☕", "анна", "会话-1", agent="🤖")

    assert scope.owner == ("Zürich-☕", "анна", "会话-1")


def test_a_scope_part_of_the_maximum_length_is_accepted() -> None:
    assert Scope("x" * 256, "ana", "run-1").tenant == "x" * 256


def test_an_invalid_scope_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        Scope("", "ana", "run-1")
    assert InvalidScopeError.code == "invalid_scope"


def test_a_scopes_repr_and_str_name_no_part_of_it() -> None:
    parts = ["tenant-c4n4ry", "user-c4n4ry", "session-c4n4ry", "task-c4n4ry", "w-c4n4ry", "a-c4n4"]
    scope = Scope(*parts)

    for text in (repr(scope), str(scope), f"{scope}", repr([scope]), repr({"s": scope})):
        assert "c4n4" not in text


def test_scopes_that_concatenate_alike_are_different_owners() -> None:
    one, two = Scope("a", "bc", "s"), Scope("ab", "c", "s")

    assert one != two
    assert one.owner != two.owner
    assert len({one, two}) == 2


def test_attribution_does_not_change_the_owner() -> None:
    plain = Scope("acme", "ana", "run-1")
    attributed = Scope("acme", "ana", "run-1", task="t", worker="w", agent="a")

    assert plain.owner == attributed.owner
