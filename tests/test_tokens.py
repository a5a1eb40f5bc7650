"""Token counts: the compiled tokenizer loaded alone counts what bpe-openai's public API counts.

``cargohold._tokens`` loads bpe-openai's Rust bindings without the package (which builds a
Python table of every vocabulary it ships as it is imported: ten times the load). These tests
hold that shortcut to the public ``Encoding.encode_ordinary``, so a bpe-openai release that
changed either would fail here rather than move a stub's "about N tokens".
"""

from __future__ import annotations

from pathlib import Path

import bpe_openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cargohold._tokens import _CHUNK_CHARS, count_tokens
from code_fixtures import CODE_FIXTURES

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
PUBLIC = bpe_openai.get_encoding("o200k_base")


def _public(text: str) -> int:
    return sum(
        len(PUBLIC.encode_ordinary(text[start : start + _CHUNK_CHARS]))
        for start in range(0, len(text), _CHUNK_CHARS)
    )


def _texts() -> list[tuple[str, str]]:
    texts = [
        (name, fixture.read().decode("utf-8", "replace")) for name, fixture in CODE_FIXTURES.items()
    ]
    if CORPUS.is_dir():
        texts += [
            (path.name, path.read_bytes()[: 2 * _CHUNK_CHARS].decode("utf-8", "replace"))
            for path in sorted(CORPUS.iterdir())
            if path.is_file()
        ]
    return texts


@pytest.mark.parametrize(("name", "text"), _texts(), ids=[name for name, _ in _texts()])
def test_counts_of_the_corpus_are_the_public_encodings(name: str, text: str) -> None:
    assert count_tokens(text) == _public(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_counts_of_any_text_are_the_public_encodings(text: str) -> None:
    assert count_tokens(text) == _public(text)


def test_a_lone_surrogate_counts_as_the_public_encoding_counts_it() -> None:
    text = "before \udc80 after \ud83d end"
    assert count_tokens(text) == _public(text) > 0


def test_text_longer_than_one_tokenizer_call_is_counted_in_its_chunks_as_the_public_api() -> None:
    text = "word " * (_CHUNK_CHARS // 2)  # two and a half chunks of characters
    assert count_tokens(text) == _public(text)
