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

    def add_cut(self, line: str, *, reserve: int = 0) -> bool:
        """Add one line, cut on a character edge to the room left, ``[+N chars]`` stating the
        characters cut (what stays of a quote is still the body's text)."""
        if self.add(line, reserve=reserve):
            return True
        room = self.budget - self.used - reserve - 1 - 20
        if room < 16:
            return False
        kept = fit(line, room)
        return self.add(f"{kept} [+{len(line) - len(kept)} chars]", reserve=reserve)

    def add_quote(self, label: str, text: str, *, reserve: int = 0) -> bool:
        """Add ``label: text``, the text cut to the room left with ``[+N chars]`` stating the
        rest (so what stays is still the body's text, grep-true)."""
        line = f"{label}: {text}"
        if self.add(line, reserve=reserve):
            return True
        room = self.budget - self.used - reserve - 1 - utf8_len(label) - 2 - 20
        if room < 16:
            return False
        kept = fit(text, room)
        return self.add(f"{label}: {kept} [+{len(text) - len(kept)} chars]", reserve=reserve)

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


JOINER = "\u21b5"
"""``↵``: where a quote of several body lines joins them (each line stripped of its indentation)."""


def quote(raw: bytes | str, limit: int = 160, *, strip: bool = False) -> str:
    """Body text as one preview line, grep-true: what a quote shows is in the body as it stands.

    A quote of one line is the body's own characters (tabs included), cut at ``limit``
    characters with ``[+N chars]`` stating the rest. A quote of several lines shows each line
    without its indentation (and without a carriage return at its end), joined by ``↵``: every
    piece between two ``↵`` is then found in the body by a plain substring search, which is what
    an agent's grep does. ``strip`` drops the spaces around a one-line quote too.
    """
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    if "\n" in text or "\r" in text:
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        text = JOINER.join(piece for piece in (line.strip() for line in lines) if piece)
    elif strip:
        text = text.strip()
    if len(text) <= limit:
        return text
    keep = max(1, limit - 12)
    return text[:keep] + f" [+{len(text) - keep} chars]"


def clip(text: str, limit: int = 160) -> str:
    """One line of at most ``limit`` characters, the cut stated (a summary, not a quote: tabs and
    line breaks become spaces)."""
    text = text.replace("\r", "").replace("\n", " ").replace("\t", " ")
    if len(text) <= limit:
        return text
    return text[: limit - 12] + f" [+{len(text) - limit + 12} chars]"


def stripped_end(data: bytes, chars: bytes = b"\r\n") -> int:
    """``len(data.rstrip(chars))``, reading only the bytes at the end (no copy of the body)."""
    end = len(data)
    while end:
        start = max(0, end - 4096)
        kept = len(data[start:end].rstrip(chars))
        if kept:
            return start + kept
        end = start
    return 0


def last_lines(data: bytes, count: int, end: int | None = None) -> list[bytes]:
    """``data[:end].rsplit(b"\\n", count)[-count:]`` (``count`` at least 1), found from the end:
    a split of a large body copies all of it."""
    pos = len(data) if end is None else end
    found: list[bytes] = []
    for _ in range(count):
        at = data.rfind(b"\n", 0, pos)
        if at < 0:
            found.append(data[:pos])
            break
        found.append(data[at + 1 : pos])
        pos = at
    found.reverse()
    return found
