"""The HTML projector: title, heading outline, counts, the main text's start and the text's end.

The page is parsed once by lexbor (through ``selectolax``: C, a 16 MiB page in a few hundred
milliseconds). Script, style, template, svg, nav, footer, aside, noscript, the ``<head>``, and
elements marked ``role="navigation"`` (or banner, contentinfo), ``hidden`` or
``aria-hidden="true"``, and containers whose class or id names page chrome (menus, tables of
contents, banners) are dropped before the text is read; a ``<header>`` is dropped outside
``<main>``/``<article>``. The main text is the text of ``<main>`` or ``<article>`` when the page
has one, else the body's outside tables (tables are counted, and read only when the page has no
other text).

Text taken out of markup is not the body's bytes (tags dropped, entities decoded, whitespace
collapsed): the preview says so, and names the byte offset of each paragraph or title that is
found in the body exactly as shown (a quote, grep-true).
"""

from __future__ import annotations

import re
from collections import Counter
from operator import attrgetter
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from cargohold.projection._model import Builder, Detection, clip

_HEADINGS_KEPT = 400
_SKIP = (
    "script, style, template, svg, nav, footer, aside, noscript, head, [role=navigation], "
    "[role=banner], [role=contentinfo], [hidden], [aria-hidden=true]"
)
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
_CONTAINERS = ("div", "ul", "ol", "section", "table", "dl", "form")
"""Elements whose class or id may mark them as chrome (inline links are never skipped so)."""
_CHROME_SELECTOR = ", ".join(
    f"{tag}[{attribute}]" for tag in _CONTAINERS for attribute in ("class", "id")
)
"""Containers with a class or an id; their words are checked in Python (one selector part per
tag and attribute: lexbor matches it in a few tens of milliseconds on a 16 MiB page, where a
substring selector per chrome word took ten times that)."""
_WORDS = re.compile(r"[a-z]+")
_BLOCKS = "p, li, h1, h2, h3, h4, h5, h6, pre, blockquote, dd, dt, figcaption, caption, td, th, div"
"""Blocks whose innermost ones are the paragraphs (a ``div`` of text alone is one, too)."""
_SEARCH_WINDOW = 256 * 1024
"""Bytes searched, from the last paragraph found, for a paragraph shown exactly as the body
has it."""


def _chrome(node: Any) -> bool:
    marks = f"{node.attributes.get('class') or ''} {node.attributes.get('id') or ''}".lower()
    return not _CHROME.isdisjoint(_WORDS.findall(marks))


def _inside(node: Any, tags: frozenset[str]) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.tag in tags:
            return True
        parent = parent.parent
    return False


def _text(node: Any) -> str:
    """A block's text: its text nodes joined as the page shows them, whitespace collapsed."""
    return " ".join(node.text(deep=True, separator="").split())


_BLOCK_TAGS = frozenset(tag.strip() for tag in _BLOCKS.split(","))
_OWN_WORDS = 3
"""A block that holds other blocks shows its own text (a caption beside an image's block) when
that text has at least this many words; shorter is separators and labels."""


def _own_text(node: Any) -> str:
    """The text of a block that holds other blocks, without the text of any block inside it
    (those come on their own), however deep."""
    parts: list[str] = []

    def collect(parent: Any) -> None:
        for child in parent.iter(include_text=True):
            if child.tag == "-text":
                parts.append(child.text(deep=False, separator=""))
            elif child.tag not in _BLOCK_TAGS:
                collect(child)

    collect(node)
    return " ".join("".join(parts).split())


def _paragraphs(root: Any, limit: int) -> list[str]:
    """The text of the block elements under ``root``, in document order: an innermost block's
    whole text; a block that holds others, its own text only (if it has a few words)."""
    out: list[str] = []
    for node in root.css(_BLOCKS):
        if len(node.css(_BLOCKS)) > 1:  # matches itself, and the blocks it holds
            text = _own_text(node)
            if len(text.split()) < _OWN_WORDS:
                continue
        else:
            text = _text(node)
        if text:
            out.append(text)
            if len(out) >= limit:
                break
    return out


def project_html(data: bytes, detection: Detection, budget: int) -> str:
    """A preview of an HTML page within ``budget`` bytes."""
    tree = LexborHTMLParser(data)
    elements = Counter(map(attrgetter("tag"), tree.css("*")))
    links = len(tree.css("a[href]"))
    title_node = tree.css_first("title")
    title = " ".join(title_node.text().split()) if title_node is not None else ""
    html = tree.css_first("html")
    lang = (html.attributes.get("lang") or None) if html is not None else None
    for node in tree.css(_SKIP):
        node.decompose()
    for node in tree.css(_CHROME_SELECTOR):
        if _chrome(node):
            node.decompose()
    main = tree.css_first("main") or tree.css_first("article")
    for node in tree.css("header"):
        if main is None or not _inside(node, frozenset({"main", "article"})):
            node.decompose()
    body = tree.body
    # Each text node stripped, one a line: the visible characters are the text less its line
    # breaks (C speed, no Python loop over a page's hundreds of thousands of text nodes).
    text = body.text(deep=True, separator="\n", strip=True) if body is not None else ""
    characters = len(text) - text.count("\n")
    last_lines = text[-20_000:].split("\n")
    if len(text) > 20_000 and len(last_lines) > 1:
        last_lines = last_lines[1:]  # the first is cut
    ending = [shown for shown in (" ".join(line.split()) for line in last_lines) if shown]
    end_text = " / ".join(ending[-40:])[-300:]
    del text
    left = tree.css("h1, h2, h3, h4, h5, h6")  # those left once chrome and hidden parts went
    levels = Counter(int(str(node.tag)[1]) for node in left)
    headings = [(int(str(node.tag)[1]), _text(node)) for node in left if str(node.tag) < "h4"]
    headings = [(level, text) for level, text in headings if text][:_HEADINGS_KEPT]
    heading_counts = {level: levels.get(level, 0) for level in range(1, 7)}

    tables = tree.css("table")
    table_text = _paragraphs(tables[0], 80) if len(tables) == 1 else []
    if len(tables) > 1:
        for table in tables[:40]:
            table_text.extend(_paragraphs(table, 80 - len(table_text)))
            if len(table_text) >= 80:
                break
    for table in tables:
        table.decompose()
    source, paragraphs = "main/article", []
    if main is not None:
        paragraphs = _paragraphs(main, 80)
    if not paragraphs and body is not None:
        source, paragraphs = "body, outside tables", _paragraphs(body, 80)
    if not paragraphs:
        source, paragraphs = "tables", table_text

    out = Builder(budget)
    tail = [f"text ends with: ...{clip(end_text, 300)}" if end_text else "text ends: (no text)"]
    reserve = sum(len(t.encode()) + 1 for t in tail)
    finder = _Finder(data)
    counts = (
        f"{links:,} links, {elements.get('form', 0):,} forms, {elements.get('table', 0):,} tables, "
        f"{elements.get('img', 0):,} images, {elements.get('script', 0):,} scripts; "
        f"{sum(elements.values()):,} elements; {characters:,} characters of visible text"
    )
    out.add_cut(f"html{f' (lang {lang})' if lang else ''}: {counts}", reserve=reserve)
    if title:
        at = finder.find(title)
        label = "title" if at is None else f"title (byte {at:,})"
        out.add_cut(f"{label}: {clip(title, 200)}", reserve=reserve)
    else:
        out.add("title: (none)", reserve=reserve)
    listed = ", ".join(f"h{k} {n:,}" for k, n in sorted(heading_counts.items()) if n)
    if listed:
        out.add_cut(f"headings: {listed}", reserve=reserve)
    outline_room = max(0, out.room - reserve) // 3
    if headings:
        out.add("outline (h1-h3):", reserve=reserve)
        spent = 0
        shown = 0
        for level, text in headings:
            line = f"{'  ' * level}h{level} {clip(text, 100)}"
            cost = len(line.encode()) + 1
            if spent + cost > outline_room or not out.add(line, reserve=reserve):
                break
            spent += cost
            shown += 1
        if shown < len(headings):
            out.add(f"  ... +{len(headings) - shown:,} more headings", reserve=reserve)
    if paragraphs:
        out.add(
            f"text ({source}, from the start; this text and its end below are taken out of the "
            "markup: a paragraph is the body's own text only where its byte offset is named):",
            reserve=reserve,
        )
        finder.reset()
        for paragraph in paragraphs:
            found = finder.find(paragraph)
            if found is not None:
                if not out.add_quote(f"  at byte {found:,}", paragraph, reserve=reserve):
                    break
            elif not out.add_cut(f"  {clip(paragraph, 600)}", reserve=reserve):
                break
    out.add_all(tail)
    return out.text()


class _Finder:
    """Finds shown text in the body as it stands, searching forward from the last find."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def reset(self) -> None:
        self._at = 0

    def find(self, text: str) -> int | None:
        needle = text.encode("utf-8")
        if len(needle) < 16:  # short texts recur: an offset would be a guess
            return None
        at = self._data.find(needle, self._at, self._at + _SEARCH_WINDOW + len(needle))
        if at < 0:
            return None
        self._at = at + len(needle)
        return at
