"""The HTML projector: title, heading outline, counts, the main text's start and the text's end.

One pass of :class:`html.parser.HTMLParser` over the body, fed in pieces through an incremental
decoder (no decoded copy of the whole page). Script, style, template, svg, nav, footer, header,
aside and elements marked ``role="navigation"`` or ``hidden`` are skipped as text; the main text
is the text inside ``<main>`` or ``<article>`` when the page has one, else the body's. The
parser keeps only bounded state: the first few thousand characters of text and the last few
hundred.
"""

from __future__ import annotations

import codecs
import re
from collections import Counter, deque
from html.parser import HTMLParser

from cargohold.projection._model import Builder, Detection, clip

_FEED = 64 * 1024
_KEEP_TEXT = 12_000
"""Characters of main and body text kept from the start (more than any budget shows)."""
_KEEP_END = 80
"""Text pieces kept from the end."""
_HEADINGS_KEPT = 400
_SKIP = frozenset(
    {"script", "style", "template", "svg", "nav", "footer", "header", "aside", "noscript", "head"}
)
_VOID = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    }
)
_BLOCK = frozenset(
    {
        "p",
        "div",
        "li",
        "br",
        "tr",
        "table",
        "ul",
        "ol",
        "section",
        "article",
        "main",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "blockquote",
        "pre",
        "dd",
        "dt",
        "figcaption",
        "caption",
    }
)
_SPACE = re.compile(r"\s+")
_CHROME = frozenset(
    {
        "nav",
        "navbar",
        "navbox",
        "navigation",
        "menu",
        "sidebar",
        "footer",
        "breadcrumb",
        "breadcrumbs",
        "toc",
        "cookie",
        "banner",
        "jump",
        "skip",
    }
)
"""Class or id words of page chrome (menus, tables of contents, banners) skipped as text."""
_WORDS = re.compile(r"[a-z]+")
_CONTAINERS = frozenset({"div", "ul", "ol", "section", "table", "dl", "form"})
"""Elements whose class or id may mark them as chrome (inline links are never skipped so)."""


class _Page(HTMLParser):
    """Collects the facts of one page with bounded memory."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: str | None = None
        self.lang: str | None = None
        self.tags: Counter[str] = Counter()
        self.headings: list[tuple[int, str]] = []
        self.heading_counts: Counter[int] = Counter()
        self.links = 0
        self.forms = 0
        self.tables = 0
        self.images = 0
        self.scripts = 0
        self.body_text: list[str] = []
        self.main_text: list[str] = []
        self.body_chars = 0
        self.main_chars = 0
        self.total_chars = 0
        self.end: deque[str] = deque(maxlen=_KEEP_END)
        self._skip: list[str] = []  # the open skipped elements (innermost last)
        self._main_depth = 0
        self._table_depth = 0
        self.table_text: list[str] = []
        self.table_chars = 0
        self._in_title = False
        self._title_parts: list[str] = []
        self._heading: int | None = None
        self._heading_parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        if tag == "a" and any(name == "href" for name, _ in attrs):
            self.links += 1
        elif tag == "form":
            self.forms += 1
        elif tag == "table":
            self.tables += 1
        elif tag == "img":
            self.images += 1
        elif tag == "script":
            self.scripts += 1
        elif tag == "html" and self.lang is None:
            self.lang = next((v for k, v in attrs if k == "lang" and v), None)
        elif tag == "title" and self.title is None:
            self._in_title = True
        if tag in _VOID:
            if tag == "br":
                self._break()
            return
        if self._skip:
            if tag == self._skip[-1] or tag in _SKIP:
                self._skip.append(tag)
            return
        attributes = dict(attrs)
        marks = f"{attributes.get('class') or ''} {attributes.get('id') or ''}".lower()
        if (
            (tag in _SKIP and not (tag == "header" and self._main_depth))
            or attributes.get("role") in ("navigation", "banner", "contentinfo")
            or "hidden" in attributes
            or attributes.get("aria-hidden") == "true"
            or (
                tag in _CONTAINERS
                and marks.strip()
                and not _CHROME.isdisjoint(_WORDS.findall(marks))
            )
        ):
            self._skip.append(tag)
            return
        if tag in ("main", "article"):
            self._main_depth += 1
        elif tag == "table":
            self._table_depth += 1
        if len(tag) == 2 and tag[0] == "h" and tag[1] in "123456":
            level = int(tag[1])
            self.heading_counts[level] += 1
            if level <= 3:
                self._heading = level
                self._heading_parts = []
        if tag in _BLOCK:
            self._break()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._in_title:
            self._in_title = False
            self.title = _SPACE.sub(" ", "".join(self._title_parts)).strip()
        if self._skip:
            if tag in self._skip:
                # Close up to the matching element: unclosed children end with their parent.
                while self._skip and self._skip.pop() != tag:
                    pass
            return
        if tag in ("main", "article") and self._main_depth:
            self._main_depth -= 1
        elif tag == "table" and self._table_depth:
            self._table_depth -= 1
        if self._heading is not None and tag == f"h{self._heading}":
            text = _SPACE.sub(" ", "".join(self._heading_parts)).strip()
            if text and len(self.headings) < _HEADINGS_KEPT:
                self.headings.append((self._heading, text))
            self._heading = None
        if tag in _BLOCK:
            self._break()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            if sum(map(len, self._title_parts)) < 2000:
                self._title_parts.append(data)
            return
        if self._skip:
            return
        text = _SPACE.sub(" ", data)
        if not text.strip():
            if text and self.body_text and not self.body_text[-1].endswith((" ", "\n")):
                self._add(" ")
            return
        if self._heading is not None and len(self._heading_parts) < 50:
            self._heading_parts.append(text)
        self._add(text)

    def _add(self, text: str) -> None:
        self.total_chars += len(text.strip())
        self.end.append(text)
        if self._table_depth:  # tables (infoboxes, data) are counted, not excerpted as prose
            if self.table_chars < _KEEP_TEXT:
                self.table_text.append(text)
                self.table_chars += len(text)
            return
        if self.body_chars < _KEEP_TEXT:
            self.body_text.append(text)
            self.body_chars += len(text)
        if self._main_depth and self.main_chars < _KEEP_TEXT:
            self.main_text.append(text)
            self.main_chars += len(text)

    def _break(self) -> None:
        for parts in (self.body_text, self.end, self.table_text):
            if parts and parts[-1] != "\n":
                parts.append("\n")
        if self._main_depth and self.main_text and self.main_text[-1] != "\n":
            self.main_text.append("\n")


def _paragraphs(parts: list[str] | deque[str]) -> list[str]:
    text = "".join(parts)
    return [line.strip() for line in text.split("\n") if line.strip()]


def project_html(data: bytes, detection: Detection, budget: int) -> str:
    """A preview of an HTML page within ``budget`` bytes."""
    page = _Page()
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    for start in range(0, len(data), _FEED):
        page.feed(decoder.decode(data[start : start + _FEED]))
    page.feed(decoder.decode(b"", final=True))
    page.close()

    out = Builder(budget)
    end_lines = _paragraphs(page.end)
    end_text = " / ".join(end_lines)[-300:] if end_lines else ""
    tail = [f"text ends with: ...{clip(end_text, 300)}" if end_text else "text ends: (no text)"]
    reserve = sum(len(t.encode()) + 1 for t in tail)

    title = clip(page.title, 200) if page.title else "(none)"
    lang = f", lang {page.lang}" if page.lang else ""
    out.add_cut(f"html: title {title}{lang}", reserve=reserve)
    counts = (
        f"{page.links:,} links, {page.forms:,} forms, {page.tables:,} tables, "
        f"{page.images:,} images, {page.scripts:,} scripts; {sum(page.tags.values()):,} elements; "
        f"{page.total_chars:,} characters of visible text"
    )
    out.add_cut(counts, reserve=reserve)
    if page.heading_counts:
        listed = ", ".join(f"h{k} {n:,}" for k, n in sorted(page.heading_counts.items()))
        out.add_cut(f"headings: {listed}", reserve=reserve)
    outline_room = max(0, out.room - reserve) // 3
    if page.headings:
        out.add("outline (h1-h3):", reserve=reserve)
        spent = 0
        shown = 0
        for level, text in page.headings:
            line = f"{'  ' * level}h{level} {clip(text, 100)}"
            cost = len(line.encode()) + 1
            if spent + cost > outline_room or not out.add(line, reserve=reserve):
                break
            spent += cost
            shown += 1
        if shown < len(page.headings):
            more = len(page.headings) - shown
            out.add(f"  ... +{more:,} more headings", reserve=reserve)
    paragraphs = _paragraphs(page.main_text)
    source = "main/article"
    if not paragraphs:
        paragraphs, source = _paragraphs(page.body_text), "body, outside tables"
    if not paragraphs:
        paragraphs, source = _paragraphs(page.table_text), "tables"
    if paragraphs:
        out.add(f"text ({source}, from the start):", reserve=reserve)
        for paragraph in paragraphs:
            if not out.add_cut(f"  {clip(paragraph, 600)}", reserve=reserve):
                break
    out.add_all(tail)
    return out.text()
