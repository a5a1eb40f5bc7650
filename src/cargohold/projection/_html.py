"""The HTML projector: title, heading outline, counts, the main text's start and the text's end.

A page of up to 2 MiB is parsed once, whole, by lexbor (through ``selectolax``: C); its DOM
takes nine to twenty times the page. A larger page is read in bounded parts (its start, its end,
and its tags counted in windows spread over it), and the preview says which of its figures are
estimated. Script, style, template, svg, nav, footer, aside, noscript, the ``<head>``, and
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
from dataclasses import dataclass
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
_WHOLE_MAX = 2 * 1024 * 1024
"""Largest page parsed whole. Lexbor's DOM takes about nine times the page, and its parse and
walks most of a projection's time: a larger page is read in bounded parts instead."""
_HEAD = 256 * 1024
"""Bytes parsed from the start of a larger page (title, outline, text from the start), at most a
sixteenth of it."""
_TAIL = 128 * 1024
"""Bytes parsed from the end of a larger page (the text's end)."""
_SAMPLES = 32
_SAMPLE_BYTES = 16 * 1024
"""Windows spread over a larger page whose tags are counted, and their size."""
_GOLDEN = (5**0.5 - 1) / 2
_NESTING_MAX = 10_000
"""Unclosed containers past which a page is not parsed (see ``_read``): lexbor's parse of
10,000 nested ``div`` takes about 0.4 s; a real page nests a few dozen."""
_CONTAINERS_NESTED = (
    "div|section|article|aside|nav|main|header|footer|blockquote|ul|ol|dl|menu|fieldset|"
    "figure|details|dialog|address|center|hgroup|search|table|form"
)
_CONTAINER_OPEN = re.compile(rb"<(?:" + _CONTAINERS_NESTED.encode() + rb")[\s/>]", re.I)
_CONTAINER_CLOSE = re.compile(rb"</(?:" + _CONTAINERS_NESTED.encode() + rb")[\s>]", re.I)
_COUNTED = ("form", "table", "img", "script")
_TAG = re.compile(rb"<([A-Za-z][A-Za-z0-9-]*)")
_LINK = re.compile(rb"<a\s(?:[^>]*?\s)?href\s*=", re.IGNORECASE)
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


def _holds(node: Any, other: Any, root: Any) -> bool:
    """Whether ``other`` lies inside ``node`` (nodes under ``root``, compared by identity)."""
    target = node.mem_id
    stop = root.mem_id
    parent = other.parent
    while parent is not None:
        at = parent.mem_id
        if at == target:
            return True
        if at == stop:
            return False
        parent = parent.parent
    return False


def _paragraphs(root: Any, limit: int) -> list[str]:
    """The text of the block elements under ``root``, in document order: an innermost block's
    whole text; a block that holds others, its own text only (if it has a few words).

    A block holds others exactly when the next block in document order lies inside it (its
    first descendant block comes right after it): one walk up from that block, where asking
    each block for the blocks it holds made Python nodes of a wrapper's whole subtree.
    """
    out: list[str] = []
    blocks = root.css(_BLOCKS)
    for index, node in enumerate(blocks):
        following = blocks[index + 1] if index + 1 < len(blocks) else None
        if following is not None and _holds(node, following, root):
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


@dataclass(slots=True)
class _Page:
    """What a parse of (part of) a page shows: counts, title, outline, text."""

    elements: int
    counted: dict[str, int]
    """Elements of the tags the preview counts by name (``_COUNTED``)."""
    links: int
    title: str
    lang: str | None
    characters: int
    end_text: str
    headings: list[tuple[int, str]]
    heading_counts: dict[int, int]
    source: str
    paragraphs: list[str]


def _nesting(data: bytes) -> int:
    """An upper bound of how deep ``data`` nests the containers a parser must look through at
    each new one (``div``, ``section``, lists...): those opened less those closed. The common
    case is settled by two byte counts (every tag opened less twice those closed, so void
    elements and a script's ``<`` count too); only past ``_NESTING_MAX`` are the containers
    themselves counted."""
    rough = data.count(b"<") - 2 * data.count(b"</")
    if rough <= _NESTING_MAX:
        return rough
    opened = sum(1 for _ in _CONTAINER_OPEN.finditer(data))
    closed = sum(1 for _ in _CONTAINER_CLOSE.finditer(data))
    return opened - closed


def _read(data: bytes, *, ending_only: bool = False) -> _Page:
    """Parse ``data`` whole (lexbor's DOM: about nine times its size) and read the page.

    With ``ending_only``, only the counts and the text's end are read (the last part of a page
    too large to parse whole).

    Raises:
        ValueError: the markup nests containers deeper than ``_NESTING_MAX`` (lexbor's parse
            looks through the open ones at each new one: 20,000 unclosed ``div`` take a second,
            2 MiB of them minutes); the caller falls back to the verbatim head and tail.
    """
    if _nesting(data) > _NESTING_MAX:
        raise ValueError("markup nested too deep to parse in bounded time")
    tree = LexborHTMLParser(data)
    elements = len(tree.css("*"))
    # By name, each from lexbor's own list of the tag (a Counter of every element's tag took
    # twice as long again as listing them).
    counted = {name: len(tree.tags(name)) for name in _COUNTED}
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
    page = _Page(elements, counted, links, title, lang, characters, end_text, [], {}, "", [])
    if ending_only:
        return page
    left = tree.css("h1, h2, h3, h4, h5, h6")  # those left once chrome and hidden parts went
    levels = Counter(int(str(node.tag)[1]) for node in left)
    headings = [(int(str(node.tag)[1]), _text(node)) for node in left if str(node.tag) < "h4"]
    page.headings = [(level, text) for level, text in headings if text][:_HEADINGS_KEPT]
    page.heading_counts = {level: levels.get(level, 0) for level in range(1, 7)}

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
    page.source, page.paragraphs = source, paragraphs
    return page


@dataclass(frozen=True, slots=True)
class _Estimate:
    """The figures of a page too large to parse whole, and how they were found."""

    size: int
    head: int
    tail: int
    elements: int
    links: int
    characters: int


def _about(value: float) -> str:
    """An estimated count: exact below 100, else rounded to three significant digits."""
    count = round(value)
    if count < 100:
        return f"{count:,}"
    step = 10 ** (len(str(count)) - 3)
    return f"{round(count / step) * step:,}"


def _sampled_tags(data: bytes) -> tuple[int, int, int]:
    """Start tags and links counted in the markup of ``_SAMPLES`` windows spread over the page
    (a tag cut by a window's edge is missed), and the bytes the windows cover. The windows
    start at a low-discrepancy sequence's points (multiples of the golden ratio, modulo 1), not
    at even steps, which would hit the same place of every repeat of a repetitive page."""
    tags = links = scanned = 0
    room = max(0, len(data) - _SAMPLE_BYTES)
    for index in range(_SAMPLES):
        start = int(room * ((index * _GOLDEN) % 1.0))
        end = min(len(data), start + _SAMPLE_BYTES)
        tags += len(_TAG.findall(data, start, end))
        links += len(_LINK.findall(data, start, end))
        scanned += end - start
    return tags, links, scanned


def project_html(data: bytes, detection: Detection, budget: int) -> str:
    """A preview of an HTML page within ``budget`` bytes.

    A page of up to ``_WHOLE_MAX`` bytes is parsed whole. A larger one is read in bounded
    parts, so memory and time stay bounded whatever its size: its first ``_HEAD`` bytes give the
    counts shown exactly, the title, the outline and the text from the start, its last
    ``_TAIL`` the text's end; the whole page's elements, links and visible characters are
    estimated (tags counted in windows spread over it, text scaled from the two parts), and the
    preview says so.
    """
    if len(data) <= _WHOLE_MAX:
        return _render(data, _read(data), budget, None)
    # A sixteenth of the page at most: a DOM takes up to twenty times markup dense with tags.
    # The parts are cut before a tag, so none is cut inside one; where the bytes near the cut
    # hold no tag (a long text or script), they are cut where the size says.
    head = min(_HEAD, len(data) // 16)
    head_end = data.rfind(b"<", head // 2, head)
    head_end = head_end if head_end > 0 else head
    page = _read(data[:head_end])
    tail_start = data.find(b"<", len(data) - _TAIL, len(data) - _TAIL // 2)
    tail_start = tail_start if tail_start >= 0 else len(data) - _TAIL
    ending = _read(data[tail_start:], ending_only=True)
    tags, links, scanned = _sampled_tags(data)
    scale = len(data) / max(1, scanned)
    read = head_end + len(data) - tail_start
    estimate = _Estimate(
        size=len(data),
        head=head_end,
        tail=len(data) - tail_start,
        elements=round(tags * scale),
        links=round(links * scale),
        characters=round((page.characters + ending.characters) * len(data) / read),
    )
    page.end_text = ending.end_text
    return _render(data, page, budget, estimate)


def _render(data: bytes, page: _Page, budget: int, estimate: _Estimate | None) -> str:
    """The preview of a page read whole (``estimate`` is ``None``) or in parts."""
    counted = page.counted
    out = Builder(budget)
    end_text = page.end_text
    tail = [f"text ends with: ...{clip(end_text, 300)}" if end_text else "text ends: (no text)"]
    reserve = sum(len(t.encode()) + 1 for t in tail)
    finder = _Finder(data)
    counts = (
        f"{page.links:,} links, {counted['form']:,} forms, "
        f"{counted['table']:,} tables, {counted['img']:,} images, "
        f"{counted['script']:,} scripts; {page.elements:,} elements; "
        f"{page.characters:,} characters of visible text"
    )
    lang = f" (lang {page.lang})" if page.lang else ""
    part = ""
    if estimate is None:
        out.add_cut(f"html{lang}: {counts}", reserve=reserve)
    else:
        part = f" in the first {estimate.head:,} bytes"
        out.add_cut(
            f"html{lang}: {estimate.size:,} bytes, too large to parse whole: about "
            f"{_about(estimate.elements)} elements, about {_about(estimate.links)} links, about "
            f"{_about(estimate.characters)} characters of visible text (estimated: tags counted "
            f"in {_SAMPLES} windows of {_SAMPLE_BYTES:,} bytes spread over the page, text scaled "
            "from its first and last parts)",
            reserve=reserve,
        )
        out.add_cut(
            f"in its first {estimate.head:,} bytes (read for the title, headings, outline and "
            f"text below; the text's end is read from its last {estimate.tail:,}): {counts}",
            reserve=reserve,
        )
    title = page.title
    if title:
        at = finder.find(title)
        label = "title" if at is None else f"title (byte {at:,})"
        out.add_cut(f"{label}: {clip(title, 200)}", reserve=reserve)
    else:
        out.add(f"title{part}: (none)", reserve=reserve)
    listed = ", ".join(f"h{k} {n:,}" for k, n in sorted(page.heading_counts.items()) if n)
    if listed:
        out.add_cut(f"headings{part}: {listed}", reserve=reserve)
    outline_room = max(0, out.room - reserve) // 3
    headings = page.headings
    if headings:
        out.add(f"outline (h1-h3){part}:", reserve=reserve)
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
    if page.paragraphs:
        out.add(
            f"text ({page.source}, from the start; this text and its end below are taken out of "
            "the markup: a paragraph is the body's own text only where its byte offset is named):",
            reserve=reserve,
        )
        finder.reset()
        for paragraph in page.paragraphs:
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
