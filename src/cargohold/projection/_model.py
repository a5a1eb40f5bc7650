"""The projection's values, and the builder every projector fills within its byte budget."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from cargohold._text import fit, utf8_len


class ProjectionClass(enum.StrEnum):
    """How a body may be projected into a preview."""

    COMPRESSIBLE = "compressible"
    """A structure-aware preview is allowed (JSON, CSV/TSV, logs, HTML, code, diffs, search)."""
    EXACT_REQUIRED = "exact_required"
    """Verbatim excerpts only, head and tail, omitted bytes stated; never a summary."""
    BYPASS = "bypass"
    """Never projected (a recovered context segment)."""
    UNSUPPORTED = "unsupported"
    """Binary: kind, size, media type and what the bytes say of themselves; no preview."""


@dataclass(frozen=True, slots=True)
class Detection:
    """What a body is, and how it may be projected.

    Attributes:
        kind: ``json``, ``ndjson``, ``csv``, ``tsv``, ``log``, ``html``, ``code``, ``diff``,
            ``search``, ``failure``, ``base64``, ``data_uri``, ``binary`` or ``text``.
        classification: The projection class.
        detail: A refinement: the language of code, the format of binary (``png``...).
    """

    kind: str
    classification: ProjectionClass
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class Projection:
    """A rendered preview.

    Attributes:
        kind: The detected kind.
        classification: The projection class applied.
        preview: The preview text, within the budget it was rendered for.
        detail: The detection's refinement (language, binary format), if any.
    """

    kind: str
    classification: ProjectionClass
    preview: str
    detail: str | None = None


class Builder:
    """Collects preview lines while they fit a byte budget (UTF-8, newlines included).

    Projectors reserve room for what must be there (the tail) before they spend the rest on
    what merely helps, so a preview is never over budget and never loses its end.
    """

    __slots__ = ("_lines", "budget", "used")

    def __init__(self, budget: int) -> None:
        self.budget = max(0, budget)
        self.used = 0
        self._lines: list[str] = []

    @property
    def room(self) -> int:
        """Bytes still free."""
        return self.budget - self.used

    def add(self, line: str, *, reserve: int = 0) -> bool:
        """Add one line if it fits with ``reserve`` bytes left over; say whether it did."""
        cost = utf8_len(line) + 1
        if self.used + cost + reserve > self.budget:
            return False
        self._lines.append(line)
        self.used += cost
        return True

    def add_cut(self, line: str, *, reserve: int = 0, marker: str = " [...]") -> bool:
        """Add one line, cut (on a character edge, with ``marker``) to the room left."""
        if self.add(line, reserve=reserve):
            return True
        room = self.budget - self.used - reserve - 1 - utf8_len(marker)
        if room < 16:
            return False
        return self.add(fit(line, room) + marker, reserve=reserve)

    def add_all(self, lines: Iterable[str], *, reserve: int = 0) -> int:
        """Add lines in order until one does not fit; return how many were added."""
        count = 0
        for line in lines:
            if not self.add(line, reserve=reserve):
                break
            count += 1
        return count

    def text(self) -> str:
        """The preview: the lines joined by newlines."""
        return "\n".join(self._lines)


def clip(text: str, limit: int = 160) -> str:
    """One line of at most ``limit`` characters, the cut stated."""
    text = text.replace("\r", "").replace("\n", " ").replace("\t", " ")
    if len(text) <= limit:
        return text
    return text[: limit - 12] + f" [+{len(text) - limit + 12} chars]"
