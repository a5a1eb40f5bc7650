"""The source-code projector: language, line count, imports, a definitions outline, the last lines.

Definitions are found by per-language regular expressions over the bytes (no decoded copy of the
body, no parser that could fail on a fragment): Python ``class``/``def`` with their nesting, C and
C++ function definitions, structs, unions and enums, JavaScript/TypeScript, Java, Go, Rust, Ruby
and shell functions and types. The outline shows each definition's own line, with its number, as
written; when the outline does not fit it keeps the top level, then its start and its end.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

import re2

from cargohold._re2 import byte_options
from cargohold.projection._model import Builder, Detection, clip, last_lines, quote

_KEYWORDS = frozenset(
    b"if for while switch return else do case catch sizeof new throw typeof defined elif"
    b" synchronized foreach using".split()
)
_MAX_DEFS = 20_000
_TAIL_LINES = 6


class _Def(NamedTuple):
    # A named tuple, not a frozen dataclass: one is made for every definition, at a third of
    # the cost.
    line: int
    indent: int
    text: str


_PY_DEF = re.compile(rb"^([ \t]*)(?:async[ \t]+)?(?:def|class)[ \t]+\w+", re.M)
_C_FUNC = re.compile(
    rb"^(?:[A-Za-z_][^;\n{}=()#]*?[\s*&])?([A-Za-z_][\w:~]*)[ \t]*\([^;{}]*?\)[\s]*"
    rb"(?:const[\s]*)?(?:noexcept[\s]*)?\{",
    re.M,
)
_C_TYPE = re.compile(
    rb"^(?:typedef[ \t]+)?(?:struct|union|enum|class|namespace)[ \t]+\w+[^;\n]*\{?[ \t]*$", re.M
)
_JS_DEF = re.compile(
    rb"^([ \t]*)(?:export[ \t]+(?:default[ \t]+)?)?(?:declare[ \t]+)?(?:abstract[ \t]+)?"
    rb"(?:(?:async[ \t]+)?function\*?[ \t]+\w+|class[ \t]+\w+|interface[ \t]+\w+|type[ \t]+\w+"
    rb"[ \t]*(?:<[^>\n]*>)?[ \t]*=|enum[ \t]+\w+|(?:const|let|var)[ \t]+\w+[ \t]*(?::[^=\n]+)?="
    rb"[ \t]*(?:async[ \t]+)?(?:function\b|\([^)\n]*\)[ \t]*(?::[^=\n]+)?=>|\w+[ \t]*=>))",
    re.M,
)
_JS_METHOD = re.compile(
    rb"^([ \t]+)(?:(?:static|async|public|private|protected|readonly|get|set|override)[ \t]+)*"
    rb"(\w+)[ \t]*\([^)\n]*\)[ \t]*(?::[^{\n]+)?\{[ \t]*$",
    re.M,
)
_JAVA_TYPE = re.compile(
    rb"^([ \t]*)(?:(?:public|protected|private|static|final|abstract|sealed|non-sealed|strictfp)"
    rb"[ \t]+)*(?:class|interface|enum|record|@interface)[ \t]+\w+",
    re.M,
)
_JAVA_METHOD = re.compile(
    rb"^([ \t]+)(?:(?:public|protected|private|static|final|abstract|synchronized|native|default)"
    rb"[ \t]+)*(?:<[^>\n]+>[ \t]+)?[\w<>\[\],.? ]+[ \t]+(\w+)[ \t]*\([^;{]*?\)[ \t]*"
    rb"(?:throws[ \t]+[\w., \t]+)?\{",
    re.M,
)
_GO_DEF = re.compile(rb"^()(?:func[ \t]|type[ \t]+\w+[ \t]+(?:struct|interface)\b)", re.M)
_RUST_DEF = re.compile(
    rb"^([ \t]*)(?:pub(?:\([^)\n]*\))?[ \t]+)?(?:(?:async|unsafe|const|default)[ \t]+)*"
    rb"(?:extern[ \t]+\"[^\"\n]*\"[ \t]+)?(?:fn|struct|enum|trait|union|mod|impl\b|type)[ \t<]",
    re.M,
)
_RUBY_DEF = re.compile(rb"^([ \t]*)(?:def|class|module)[ \t]+\S", re.M)
_SHELL_DEF = re.compile(rb"^()(?:function[ \t]+[\w-]+|[\w-]+[ \t]*\([ \t]*\))[ \t]*\{?", re.M)

_IMPORTS: dict[str, re.Pattern[bytes]] = {
    "python": re.compile(
        rb"^[ \t]*(?:import[ \t]+([\w.]+)|from[ \t]+([\w.]+)[ \t]+import\b)", re.M
    ),
    "c": re.compile(rb"^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"\n]+)[>\"]", re.M),
    "javascript": re.compile(
        rb"(?:^[ \t]*import\b[^'\"\n]*?(?:from[ \t]*)?['\"]([^'\"\n]+)['\"]"
        rb"|\brequire\([ \t]*['\"]([^'\"\n]+)['\"][ \t]*\))",
        re.M,
    ),
    "java": re.compile(rb"^import[ \t]+(?:static[ \t]+)?([\w.*]+)[ \t]*;", re.M),
    "go": re.compile(rb"^(?:import[ \t]+|[ \t]+)(?:\w+[ \t]+)?\"([\w./-]+)\"[ \t]*$", re.M),
    "rust": re.compile(rb"^[ \t]*(?:pub[ \t]+)?use[ \t]+([\w:]+)", re.M),
    "ruby": re.compile(rb"^[ \t]*require(?:_relative)?[ \t(]+['\"]([^'\"\n]+)['\"]", re.M),
}
_IMPORTS["cpp"] = _IMPORTS["c"]
_IMPORTS["typescript"] = _IMPORTS["javascript"]
_DEFINE = re.compile(rb"^[ \t]*#[ \t]*define[ \t]", re.M)

_DEFS: dict[str, tuple[re.Pattern[bytes], ...]] = {
    "python": (_PY_DEF,),
    "c": (_C_FUNC, _C_TYPE),
    "cpp": (_C_FUNC, _C_TYPE),
    "javascript": (_JS_DEF, _JS_METHOD),
    "typescript": (_JS_DEF, _JS_METHOD),
    "java": (_JAVA_TYPE, _JAVA_METHOD),
    "go": (_GO_DEF,),
    "rust": (_RUST_DEF,),
    "ruby": (_RUBY_DEF,),
    "shell": (_SHELL_DEF,),
}


_PY_SCAN = re.compile(
    rb"\n([ \t]*+)(?:(?:async[ \t]+)?(?:def|class)[ \t]+\w|import[ \t]+([\w.]+)"
    rb"|from[ \t]+([\w.]+)[ \t]+import\b)"
)
"""A newline and the line after it when that line is a definition (:data:`_PY_DEF`, group 1
its indent) or an import (the import pattern's name in group 2 or 3): one pass of the body
that finds both, each match within its line. The literal newline first lets the scan jump
from line to line; the spaces and tabs are a possessive run, for no alternative starts with a
space."""


def _python(data: bytes, newlines: int) -> tuple[_Found, list[str]]:
    """Python's definitions and imports, in one C pass over the body (:data:`_PY_SCAN`), with
    no split of it into lines and no per-line match in Python: each match is a definition
    line or an import line, as :data:`_PY_DEF` and the import pattern match a split's lines."""
    starts: list[int] = []
    indents: list[int] = []
    names: dict[bytes, None] = {}
    # Line 1, which no newline precedes, is matched on its own.
    found = _PY_DEF.match(data)
    if found is not None:
        starts.append(0)
        indents.append(len(found.group(1).expandtabs(4)))
    else:
        first = _IMPORTS["python"].match(data)
        if first is not None:
            names[first.group(1) or first.group(2)] = None
    for match in _PY_SCAN.finditer(data):
        which = match.lastindex  # 1: a definition (its indent); 2 or 3: an import's name
        if which == 1:
            if len(starts) < _MAX_DEFS:
                starts.append(match.start() + 1)
                # What precedes the keyword is the match's spaces and tabs, as written.
                indents.append(len(match.group(1).expandtabs(4)))
        elif which is not None:
            names.setdefault(match.group(which), None)
    # The names are ASCII (``[\w.]+`` of bytes): deduplicated as bytes, as they decode.
    return _Found(data, newlines, starts, indents), [name.decode() for name in names]


class _Found:
    """Definitions found in a body: where each one's line starts and its indent, for all of
    them; the line numbers and texts only of those a preview shows (a few hundred of up to
    :data:`_MAX_DEFS`), for counting lines before each of them was a C call per definition
    and decoding each line a Python string per definition, most of them never shown."""

    __slots__ = ("_data", "_known", "_lines", "_texts", "indents", "starts")

    def __init__(
        self,
        data: bytes,
        newlines: int,
        starts: list[int],
        indents: list[int],
        texts: list[str] | None = None,
    ) -> None:
        self._data = data
        self.starts = starts
        self.indents = indents
        self._texts = texts
        # Offsets whose line numbers are known, ascending, and those numbers.
        self._known = [0, len(data)]
        self._lines = [1, newlines + 1]

    def __len__(self) -> int:
        return len(self.starts)

    def line(self, index: int) -> int:
        """The 1-based line number of definition ``index``, counted from the nearest offset
        whose number is known (the preview asks in order from each end)."""
        offset = self.starts[index]
        at = bisect.bisect_right(self._known, offset)
        below, above = self._known[at - 1], self._known[at] if at < len(self._known) else None
        if above is None or offset - below <= above - offset:
            number = self._lines[at - 1] + self._data.count(b"\n", below, offset)
        else:
            number = self._lines[at] - self._data.count(b"\n", offset, above)
        if offset != below:
            self._known.insert(at, offset)
            self._lines.insert(at, number)
        return number

    def text(self, index: int) -> str:
        """Definition ``index``'s line as written (tabs stay: grep-true)."""
        if self._texts is not None:
            return self._texts[index]
        start = self.starts[index]
        end = self._data.find(b"\n", start)
        raw = self._data[start : end if end >= 0 else len(self._data)]
        return raw.decode("utf-8", "replace").rstrip()

    def get(self, index: int) -> _Def:
        return _Def(self.line(index), self.indents[index], self.text(index))


@functools.cache
def _linear(pattern: re.Pattern[bytes]) -> re2._Regexp[bytes]:
    """``pattern`` compiled by RE2 (the same matches, in time linear in the body).

    Python's backtracking takes quadratic time and worse on lines that open a definition and
    never close it: ``_JAVA_METHOD`` took 6 s for 64 KiB of ``foo(a, b`` lines (a 1 MiB body
    would take half an hour), RE2 2 ms for 1 MiB. Compiled on first use, not at import.
    Latin-1: every byte is one character, as in the bytes pattern.
    """
    options = byte_options(max_mem=64 << 20)
    flags = b"(?m)" if pattern.flags & re.M else b""
    return re2.compile(flags + pattern.pattern, options)


def _definitions(data: bytes, language: str, newlines: int) -> _Found:
    """Definition lines in file order, deduplicated by line."""
    found: dict[int, tuple[int, int]] = {}
    for pattern in _DEFS.get(language, (_PY_DEF, _C_FUNC, _JS_DEF, _RUST_DEF)):
        for match in _linear(pattern).finditer(data):
            if len(found) >= _MAX_DEFS:
                break
            start = match.start()
            if pattern is _C_FUNC or pattern is _JAVA_METHOD or pattern is _JS_METHOD:
                name = match.group(match.lastindex or 0)
                if name in _KEYWORDS or name.split(b"::")[-1] in _KEYWORDS:
                    continue
                if pattern is _C_FUNC:
                    start = match.start(1)  # the line that names the function
            begin = data.rfind(b"\n", 0, start) + 1
            found.setdefault(begin, (begin, 0))
    starts = sorted(found)
    indents: list[int] = []
    texts: list[str] = []
    for begin in starts:
        end = data.find(b"\n", begin)
        raw = data[begin : end if end >= 0 else len(data)]
        text = raw.decode("utf-8", "replace").rstrip()  # as written: tabs stay (grep-true)
        shown = text.expandtabs(4)
        indents.append(len(shown) - len(shown.lstrip()))
        texts.append(text)
    return _Found(data, newlines, starts, indents, texts)


def _imports(data: bytes, language: str) -> list[str]:
    pattern = _IMPORTS.get(language)
    if pattern is None:
        return []
    seen: dict[str, None] = {}
    for match in pattern.finditer(data):
        name = next((g for g in match.groups() if g), b"")
        if name:
            seen.setdefault(name.decode("utf-8", "replace"), None)
    return list(seen)


_NAME = re.compile(
    r"\b(?:def|class|function\*?|fn|func|struct|enum|trait|interface|type|module|impl)\s+"
    r"(?:\([^)]*\)\s*)?([\w:.<>$]+)"
)


def _name(item: _Def) -> str:
    match = _NAME.search(item.text)
    if match:
        return match.group(1)
    return clip(item.text.strip(), 30)


def _entry(item: _Def, width: int, note: str = "") -> str:
    """``  12: def name(...)``, the definition's line as written (cut stated); ``note`` (nested
    definitions) goes before the colon, so the text after it stays the body's."""
    return f"  {item.line:>{width}}{note}: {quote(item.text, 140)}"


def project_code(data: bytes, detection: Detection, budget: int) -> str:
    """A preview of a source file within ``budget`` bytes."""
    language = detection.detail or "unknown"
    newlines = data.count(b"\n")
    lines_total = newlines + (0 if data.endswith(b"\n") or not data else 1)
    if language == "python":
        definitions, imports = _python(data, newlines)
    else:
        definitions = _definitions(data, language, newlines)
        imports = _imports(data, language)
    width = len(str(lines_total))

    out = Builder(budget)
    tail_start = max(1, lines_total - _TAIL_LINES + 1)
    tail_bytes = last_lines(data, _TAIL_LINES + 1)  # not a split: that copies the body
    if data.endswith(b"\n"):
        tail_bytes = tail_bytes[:-1]
    tail_bytes = tail_bytes[-_TAIL_LINES:]
    tail = [f"last lines ({tail_start:,}-{lines_total:,}):"] + [
        f"  {tail_start + k:>{width}}: {quote(raw.rstrip(), 160)}"
        for k, raw in enumerate(tail_bytes)
    ]
    reserve = sum(len(t.encode()) + 1 for t in tail)

    top = definitions.indents.count(0)
    what = f"{len(definitions):,} definitions ({top:,} at top level)"
    extra = ""
    if language in ("c", "cpp"):
        extra = f", {len(_DEFINE.findall(data)):,} #defines"
    out.add_cut(
        f"code ({language}): {lines_total:,} lines, {len(data):,} bytes; {what}{extra}",
        reserve=reserve,
    )
    if imports:
        listed = ", ".join(imports[:40])
        more = f", +{len(imports) - 40} more" if len(imports) > 40 else ""
        out.add_cut(f"imports ({len(imports):,}): {listed}{more}", reserve=reserve)
    if len(definitions):
        _outline(out, definitions, width, reserve)
    out.add_all(tail)
    return out.text()


def _fits(entries: Iterable[str], room: int) -> bool:
    """Whether ``entries``, a line each, take at most ``room`` bytes (made until they do not)."""
    used = 0
    for entry in entries:
        used += len(entry.encode()) + 1
        if used > room:
            return False
    return True


def _outline(out: Builder, found: _Found, width: int, reserve: int) -> None:
    """All definitions if they fit; else the top level (nested ones counted); else its ends.

    Entries are made as they are needed (each definition's line number and text with them):
    of thousands of definitions, a listing that does not fit is found out after the entries
    that fill the room, and a cut one shows its start and its end only.
    """
    room = out.room - reserve - 80
    count = len(found)

    def entry(index: int, note: str = "") -> str:
        return _entry(found.get(index), width, note)

    # An entry takes at least a dozen bytes: past room // 12 definitions none of the listings
    # of them all can fit, and rendering thousands of them only to find that out is the cost.
    if count <= room // 12 and _fits(map(entry, range(count)), room):
        out.add("outline (line: definition):", reserve=reserve)
        out.add_all(map(entry, range(count)), reserve=reserve)
        return
    title = "outline (line: definition):"
    indents = found.indents
    if any(indents):
        # A group is a definition at the top (or the first one) and the nested ones after it.
        tops = [0, *(i for i in range(1, count) if not indents[i])]
        ends = [*tops[1:], count]
        if len(tops) <= room // 12:

            def named(group: int) -> str:
                top, end = tops[group], ends[group]
                inner = range(top + 1, end)
                listed = ", ".join(f"{_name(found.get(i))} {found.line(i)}" for i in inner)
                return entry(top, f" ({len(inner)} nested {listed})" if len(inner) else "")

            if _fits(map(named, range(len(tops))), room):
                out.add(
                    "outline, top level (line: definition; nested by name and line):",
                    reserve=reserve,
                )
                out.add_all(map(named, range(len(tops))), reserve=reserve)
                return

        def counted(group: int) -> str:
            inner = ends[group] - tops[group] - 1
            return entry(tops[group], f" (+{inner} nested)" if inner else "")

        title = "outline, top level only (line: definition; nested ones counted):"
        if _fits(map(counted, range(len(tops))), room):
            out.add(title, reserve=reserve)
            out.add_all(map(counted, range(len(tops))), reserve=reserve)
            return
        _ends(out, title, counted, len(tops), lambda group: found.line(tops[group]), reserve)
        return
    _ends(out, title, entry, count, found.line, reserve)


def _ends(
    out: Builder,
    title: str,
    entry: Callable[[int], str],
    count: int,
    line: Callable[[int], int],
    reserve: int,
) -> None:
    """The ``count`` entries' start, as many as fit, then how many are left out between which
    lines, then their last three."""
    out.add(title, reserve=reserve)
    ending = [entry(i) for i in range(count - 3, count)] if count > 6 else []
    end_cost = sum(len(e.encode()) + 1 for e in ending) + 100
    shown = out.add_all(map(entry, range(count - len(ending))), reserve=reserve + end_cost)
    hidden = count - len(ending) - shown
    if hidden > 0:
        out.add(
            f"  ... {hidden:,} more between lines {line(shown)} and {line(shown + hidden - 1)}",
            reserve=reserve,
        )
    out.add_all(ending, reserve=reserve)
