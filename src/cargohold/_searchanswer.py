"""What an ``artifact_search`` answer holds and how it reads: the hits, their lines, the notes.

The :class:`~cargohold._rehydrate.Rehydrator` decides (owner, digest, budget) and reads each hit
verified; this module holds the answer's types and turns verified hits into the answer's text
within a budget, the way :mod:`cargohold._grep` does for grep.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cargohold._errors import UsageError
from cargohold._events import DecisionEvent, Reason, RehydrateOutcome
from cargohold._ref import Ref
from cargohold._text import is_text, utf8_len
from cargohold._toolspecs import MAX_QUERY_CHARS

MAX_SEARCH_TERMS = 32
"""The most words one search query may hold."""


@dataclass(frozen=True, slots=True)
class SearchMatch:
    """One hit a search shows: an artifact of the scope that holds every term, read verified.

    Attributes:
        ref: The artifact.
        score: The store's relevance, higher is better; comparable within one answer only.
        size: The body's size in bytes.
        media_type: Its media type.
        tool: The tool that produced it, when known.
        lines: The line numbers shown (1-based): lines that hold a term, first ones first.
        matched: How many lines hold a term in all (0 when the store matched words that no
            line holds verbatim, e.g. split across a line break).
        masked: The excerpts were made from a copy with the body's credentials masked.
    """

    ref: Ref
    score: float
    size: int
    media_type: str
    tool: str | None
    lines: tuple[int, ...]
    matched: int
    masked: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The hit as JSON-ready facts (never content)."""
        return {
            "ref": str(self.ref),
            "score": self.score,
            "size": self.size,
            "media_type": self.media_type,
            "tool": self.tool,
            "lines": list(self.lines),
            "matched_lines": self.matched,
            "masked": self.masked,
        }


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One search decision (:meth:`Rehydrator.search`).

    Attributes:
        outcome: ``resolved`` (with hits, or with none: reason ``no_match``) or
            ``over_budget`` (not even the first hit's head line fits the budget).
        reason: ``verified``, ``no_match`` or ``budget_exceeded``.
        terms: The query's words, as searched.
        hits: The hits shown, best first.
        segment: The recovered segment to put into the conversation (hits shown only; it
            names the best hit).
        content: The answer's text without the segment markers (``None`` when over budget).
        budget: The byte budget applied to ``content``.
        event: The decision's one event: the very instance the reporter received.
        left_out: Hits the store answered whose verified read did not resolve (stale, expired,
            collected) or whose body is binary: never shown.
        not_shown: Hits past the budget: counted, not read.
    """

    outcome: RehydrateOutcome
    reason: Reason
    terms: tuple[str, ...] = field(repr=False)
    hits: tuple[SearchMatch, ...]
    segment: str | None = field(repr=False)
    content: str | None = field(repr=False)
    budget: int
    event: DecisionEvent = field(repr=False)
    left_out: int = 0
    not_shown: int = 0

    @property
    def ok(self) -> bool:
        """Whether the search answered (with hits or with none)."""
        return self.outcome is RehydrateOutcome.RESOLVED

    @property
    def text(self) -> str:
        """What to put into the conversation: the segment, the plain no-hits answer, or a
        one-line statement of the outcome."""
        if self.segment is not None:
            return self.segment
        if self.content is not None:
            return self.content
        return (
            f"[cargohold] artifact_search: {self.outcome.value} ({self.reason.value}); "
            f"no content within the budget of {self.budget:,} bytes"
        )


def search_terms(query: str) -> tuple[str, ...]:
    """The words of a search query: its whitespace-separated terms, as the store matches them.

    Raises:
        UsageError: a query that is not text, is blank, or is over its bounds.
    """
    if not isinstance(query, str) or not query.strip():
        raise UsageError("a search query must be non-blank text: the words to find")
    if len(query) > MAX_QUERY_CHARS:
        raise UsageError(f"a search query has at most {MAX_QUERY_CHARS:,} characters")
    if not is_text(query):
        raise UsageError("a search query holds a lone surrogate (no character); give text")
    terms = tuple(dict.fromkeys(query.split()))  # a repeated word adds nothing
    if len(terms) > MAX_SEARCH_TERMS:
        raise UsageError(f"a search query has at most {MAX_SEARCH_TERMS} words")
    return terms


def quoted(terms: tuple[str, ...]) -> str:
    return json.dumps(" ".join(terms), ensure_ascii=False)


def search_head(terms: tuple[str, ...], count: int) -> str:
    noun = "hit" if count == 1 else "hits"
    return f"artifact_search {quoted(terms)}: {count} {noun}, best first\n"


def no_hits(terms: tuple[str, ...], left_out: int, cut: int, budget: int) -> str | None:
    """The no-hits answer within ``budget``: the query quoted whole, else its longest start
    that fits (ending in an ellipsis); ``None`` when even the fixed text is over the budget."""
    none = "" if left_out else " no artifact of this session holds every word."
    tail = search_notes(left_out, cut, budget)

    def text(quoted: str) -> str:
        return (
            f"artifact_search {quoted}: no hits:{none}{tail}\nTry fewer or other words (every "
            "word must appear; case does not matter)."
        )

    whole = text(quoted(terms))
    if utf8_len(whole) <= budget:
        return whole
    joined = " ".join(terms)

    def cut_to(count: int) -> str:
        return text(json.dumps(joined[:count] + "\u2026", ensure_ascii=False))

    if utf8_len(cut_to(0)) > budget:
        return None
    low, high = 0, len(joined) - 1  # cut_to(low) fits; the longest that fits is at most high
    while low < high:
        middle = (low + high + 1) // 2
        if utf8_len(cut_to(middle)) <= budget:
            low = middle
        else:
            high = middle - 1
    return cut_to(low)


def search_notes(left_out: int, cut: int, budget: int) -> str:
    """The closing lines of a search answer: the hits it could not or did not show."""
    notes: list[str] = []
    if left_out:
        notes.append(
            f"{left_out} matched but {'is' if left_out == 1 else 'are'} left out: not read "
            "back verified (stale or expired) or binary"
        )
    if cut:
        notes.append(
            f"{cut} more not shown: over this call's budget of {budget:,} bytes; pass a larger "
            "budget or a smaller limit"
        )
    return "".join(f"\n[{note}]" for note in notes)


def hit_block(number: int, match: SearchMatch, excerpts: list[str]) -> str:
    """One hit as the model reads it: its reference and facts, then its matching lines."""
    tool = f", tool {match.tool}" if match.tool else ""
    masked = ", credentials masked" if match.masked else ""
    count = match.matched
    noun = "matching line" if count == 1 else "matching lines"
    lines = [
        f"{number}. {match.ref} ({match.media_type}, {match.size:,} bytes{tool}{masked}): "
        f"{count:,} {noun}\n"
    ]
    lines.extend(f"   {entry}" for entry in excerpts)
    more = count - len(match.lines)
    if more > 0:
        lines.append(f"   [{more:,} more: artifact_grep on this ref]\n")
    elif not count:
        lines.append("   [no single line holds a word as written: artifact_read_lines]\n")
    return "".join(lines)
