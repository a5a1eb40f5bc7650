"""The local store indexes a body by UTF-8 bytes (``index_utf8``), not by a Python str of it.

The bytes are those of ``index_text(...).encode()`` exactly (the text every backend indexes), so
what search finds is unchanged; what changes is the memory of a put: a 1 MiB body with one
character past U+FFFF made a 4 MiB str and its UTF-8 copy, and the put peaked at nine times the
body.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cargohold import LocalStore, PutRequest, Scope
from cargohold.store._search import _PIECE, INDEX_BYTES, index_text, index_utf8

OWNER = Scope("tenant-acme", "user-ana", "session-1")

_PARTS = st.sampled_from(
    [
        b"plain ascii words ",
        "caf\u00e9 ".encode(),
        "\u2192 arrow ".encode(),
        "\U0001f600 face ".encode(),
        b"\xe2\x82",  # a character's first two bytes, its last missing
        b"\xac",  # a stray continuation byte
        b"\xff\xfe",  # never valid
        b"\xf0\x90\x80",  # three of a four-byte character
        b"\x00",
        b"\n",
    ]
)


def _expected(data: bytes, media_type: str = "text/plain", sensitivity: str = "internal") -> bytes:
    text = index_text(data, media_type, sensitivity)
    assert text is not None
    return text.encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(st.lists(_PARTS, max_size=60), st.binary(max_size=40))
def test_index_bytes_are_the_index_texts_utf8_for_any_mix_of_valid_and_invalid_bytes(
    parts: list[bytes], noise: bytes
) -> None:
    data = b"".join(parts) + noise
    if index_text(data, "text/plain", "internal") is None:
        assert index_utf8(data, "text/plain", "internal") is None
        return
    assert index_utf8(data, "text/plain", "internal") == _expected(data)


@pytest.mark.parametrize("offset", [-3, -2, -1, 0, 1])
@pytest.mark.parametrize("character", ["\u00e9", "\u20ac", "\U0001f600"])
def test_a_character_cut_by_a_decoded_piece_reads_as_it_does_whole(
    offset: int, character: str
) -> None:
    data = b"a" * (_PIECE + offset) + character.encode() + b" end"
    assert index_utf8(data, "text/plain", "internal") == _expected(data)
    bad = data + b"\xff"  # invalid too, so the rebuilt path is the one cutting it
    assert index_utf8(bad, "text/plain", "internal") == _expected(bad)


@pytest.mark.parametrize("character", ["\u00e9", "\u20ac", "\U0001f600"])
def test_a_character_cut_by_the_index_bound_reads_as_the_index_text_reads_it(
    character: str,
) -> None:
    data = b"a" * (INDEX_BYTES - 1) + character.encode() + b" tail"
    assert index_utf8(data, "text/plain", "internal") == _expected(data)


def test_a_restricted_body_is_indexed_masked_as_its_text_is() -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    data = f"caf\u00e9 token={token} \U0001f600\n".encode()
    indexed = index_utf8(data, "text/plain", "restricted")
    assert indexed == _expected(data, sensitivity="restricted")
    assert indexed is not None
    assert token.encode() not in indexed


def test_a_binary_body_is_not_indexed() -> None:
    assert index_utf8(b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "image/png", "internal") is None


def test_a_valid_body_within_the_bound_is_indexed_as_itself_without_a_copy() -> None:
    data = "r\u00e9sum\u00e9 \U0001f600\n".encode() * 1000
    assert index_utf8(data, "text/plain", "internal") is data


def test_a_body_with_a_character_past_the_bmp_is_stored_by_a_put_of_about_its_own_size(
    tmp_path: Path,
) -> None:
    data = ("a line of text \U0001f600\n" * 50_000).encode()  # about 1 MiB, valid UTF-8
    store = LocalStore(tmp_path / "store")
    store.put(OWNER, b"warm the store up", PutRequest())
    tracemalloc.start()
    try:
        store.put(OWNER, data, PutRequest())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    hits = store.search(OWNER, "line", limit=5)
    store.close()
    assert peak < 1.25 * len(data)  # was 9x: a 4-byte-per-character str and its UTF-8 copy
    assert len(hits) == 1


def test_search_finds_words_of_a_body_whose_invalid_bytes_were_replaced(tmp_path: Path) -> None:
    data = b"before \xff\xfe broken \xe2\x82 bytes caf\xc3\xa9 after\n" * 50
    store = LocalStore(tmp_path / "store")
    ref = store.put(OWNER, data, PutRequest()).ref
    found = {
        hit.ref
        for word in ("broken", "caf\u00e9", "after")
        for hit in store.search(OWNER, word, limit=5)
    }
    assert store.verify() == []
    store.close()
    assert found == {ref}
