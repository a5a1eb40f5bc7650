"""Full-text search logic every backend shares: terms, the indexed text, matching and scoring.

Each backend finds its candidates its own way (a scan in memory, an SQLite FTS5 table in the
local store, a PostgreSQL full-text column); this module decides what a term is and what text of
a body is indexed. The memory and local backends also decide here whether a candidate holds every
term and how it scores (:func:`score`), so they answer alike; PostgreSQL matches and ranks in the
database (``ts_rank``) over at most :data:`WORDS_CHARS` of each body's words, so its scores, and
for a long body its hits, may differ. Every score reads the candidate's own text only, never
figures of the whole index (as FTS5's bm25 would: its document counts and average length span
every tenant), so another session's or tenant's artifacts can change neither which artifacts
answer nor their scores.
"""

from __future__ import annotations

import codecs
import math
import re
from collections import Counter
from dataclasses import dataclass

from cargohold._errors import UsageError
from cargohold._records import MiB, Sensitivity
from cargohold._ref import Ref
from cargohold._secrets import mask_secrets
from cargohold._text import looks_binary

INDEX_BYTES = 1 * MiB
"""A body is indexed by its first this many bytes: words past them are not found by search."""

WORDS_CHARS = 256 * 1024
"""The most bytes (UTF-8) of words the PostgreSQL index holds per body (its tsvector must stay
under PostgreSQL's 1 MB limit): a body with more words is found by its first ones only."""

MAX_LIMIT = 100
"""The most hits one search answers."""

_WORD = re.compile(r"[^\W_]+")
"""A token: a run of letters and digits (as FTS5's unicode61 tokenizer splits)."""

_K1 = 1.2
_B = 0.75
_AVERAGE_TOKENS = 512.0
"""A fixed length norm: a store-wide average would let other owners' bodies move a score."""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One artifact a search found.

    Attributes:
        ref: The artifact (of the searching scope, live, text).
        score: Higher is better; comparable within one answer only.
    """

    ref: Ref
    score: float


def tokens(text: str) -> list[str]:
    """The case-folded tokens of ``text``."""
    return [word.casefold() for word in _WORD.findall(text)]


def search_terms(query: object, limit: object) -> tuple[tuple[str, ...], ...]:
    """Each whitespace-separated term of ``query`` as its tokens (a phrase); checks ``limit``.

    A term with no letter or digit matches nothing, so it is dropped (a query of only such
    terms answers no hit).

    Raises:
        UsageError: a query that is not text or is blank, a ``limit`` outside 1..100.
    """
    if not isinstance(query, str) or not query.strip():
        raise UsageError("a search query must be non-blank text: the words to find")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise UsageError(f"a search limit must be an integer from 1 to {MAX_LIMIT}")
    terms = (tuple(tokens(term)) for term in query.split())
    return tuple(dict.fromkeys(term for term in terms if term))


def match_expression(query: str) -> str:
    """An FTS5 MATCH expression for ``query``'s terms: each one quoted (its ``"`` doubled), so
    none is read as the engine's syntax (``NEAR``, ``OR``, ``*``, a column filter), all ANDed.
    Terms with no letter or digit are left out, as :func:`search_terms` drops them."""
    quoted = ('"' + term.replace('"', '""') + '"' for term in query.split() if tokens(term))
    return " AND ".join(dict.fromkeys(quoted))


def index_text(data: bytes, media_type: str | None, sensitivity: Sensitivity | str) -> str | None:
    """The text a body is indexed by, or ``None`` for a binary body (never indexed).

    Binary is decided by :func:`cargohold._text.looks_binary`, as the line tools decide. Only
    the first :data:`INDEX_BYTES` are indexed; a ``restricted`` body is indexed by its masked
    copy (:func:`cargohold._secrets.mask_secrets`), so no credential enters the index.

    A restricted body is masked whole before it is cut (masking keeps lengths): cut first, a
    credential crossing the bound would lose its tail, match no rule and enter the index in
    clear, where a search could confirm a guess of it. ``data`` is therefore the whole body.
    """
    head = _indexed_head(data, media_type, sensitivity)
    if head is None:
        return None
    text = head.decode("utf-8", "replace")
    # A copy more only for a body holding NUL (which SQLite's text would end at).
    return text.replace("\x00", " ") if b"\x00" in head else text


def _indexed_head(
    data: bytes, media_type: str | None, sensitivity: Sensitivity | str
) -> bytes | None:
    """The bytes a body is indexed by, before they are read as text: ``None`` for a binary body,
    else its first :data:`INDEX_BYTES`, of its masked copy when it is restricted."""
    if looks_binary(data, media_type):
        return None
    if sensitivity == Sensitivity.RESTRICTED:
        data = mask_secrets(data)
    return data[:INDEX_BYTES]  # the body itself when it is no longer: no copy


_PIECE = 64 * 1024
"""Bytes decoded at a time by :func:`index_utf8` (the str of a piece is at most four times it)."""


def index_utf8(data: bytes, media_type: str | None, sensitivity: Sensitivity | str) -> bytes | None:
    """:func:`index_text` as UTF-8: ``index_text(...).encode()``, byte for byte, without the text.

    The local store hands these bytes to SQLite as text (``CAST(? AS TEXT)``). A Python str of a
    1 MiB body holding one character past U+FFFF takes 4 MiB, and binding it adds its UTF-8 copy:
    an offload of such a body peaked at six to nine times its size in the put. Here the body is
    decoded a piece at a time (an incremental decoder: a character cut between pieces decodes as
    it does whole) only to check it; a valid head is its own answer, with no copy, and only an
    invalid one is rebuilt, its bad bytes replaced as :func:`index_text` replaces them.
    """
    head = _indexed_head(data, media_type, sensitivity)
    if head is None:
        return None
    if not head.isascii() and not _valid_utf8(head):
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        pieces = [
            decoder.decode(head[start : start + _PIECE]).encode("utf-8")
            for start in range(0, len(head), _PIECE)
        ]
        pieces.append(decoder.decode(b"", final=True).encode("utf-8"))
        head = b"".join(pieces)
        del pieces
    # A copy more only for a body holding NUL (which SQLite's text would end at).
    return head.replace(b"\x00", b" ") if b"\x00" in head else head


def _valid_utf8(data: bytes) -> bool:
    """Whether ``data`` is valid UTF-8, decoded a piece at a time (no str of the whole)."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    view = memoryview(data)
    try:
        for start in range(0, len(view), _PIECE):
            decoder.decode(view[start : start + _PIECE])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def search_words(text: str | None) -> str | None:
    """The tokens of ``text`` joined by single spaces and cut to :data:`WORDS_CHARS` (at a word
    boundary): what the PostgreSQL index parses, so its words are this module's tokens."""
    if text is None:
        return None
    words = " ".join(tokens(text))
    data = words.encode("utf-8")
    if len(data) > WORDS_CHARS:
        # Cut in bytes (a character may take four), at the last space before the bound.
        data = data[: data.rfind(b" ", 0, WORDS_CHARS + 1)]
        words = data.decode("utf-8")
    return words


def score(text: str, terms: tuple[tuple[str, ...], ...]) -> float | None:
    """The score of ``text`` for ``terms``, or ``None`` when it does not hold every term.

    A BM25-shaped sum over the terms of their frequency in ``text``, normalised by its length
    against a fixed average: a figure of this text alone.
    """
    if not terms:
        return None
    words = tokens(text)
    counts = Counter(words)
    norm = _K1 * (1 - _B + _B * len(words) / _AVERAGE_TOKENS)
    total = 0.0
    for term in terms:
        count = counts[term[0]] if len(term) == 1 else _phrases(words, term)
        if count == 0:
            return None
        total += count * (_K1 + 1) / (count + norm)
    return round(total, 9) if math.isfinite(total) else 0.0


def _phrases(words: list[str], phrase: tuple[str, ...]) -> int:
    """How many times the tokens of ``phrase`` stand in a row in ``words``."""
    width = len(phrase)
    first = phrase[0]
    return sum(
        1
        for index, word in enumerate(words)
        if word == first and tuple(words[index : index + width]) == phrase
    )


def ranked(scored: list[SearchHit], limit: int) -> list[SearchHit]:
    """The best ``limit`` hits, best first, ties broken by digest."""
    return sorted(scored, key=lambda hit: (-hit.score, hit.ref.digest))[:limit]
