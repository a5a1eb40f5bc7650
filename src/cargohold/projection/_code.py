"""The source-code projector: language, line count, imports, a definitions outline, the last lines.

Definitions are found by per-language regular expressions over the bytes (no decoded copy of the
body, no parser that could fail on a fragment): Python ``class``/``def`` with their nesting, C and
C++ function definitions, structs, unions and enums, JavaScript/TypeScript, Java, Go, Rust, Ruby
and shell functions and types. The outline shows each definition's own line, with its number, as
written; when the outline does not fit it keeps the top level, then its start and its end.
"""

from __future__ import annotations

import functools
import itertools
import re
from typing import NamedTuple

import re2

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


_PY_LINES = re.compile(rb"\n(?=[ \t]*+(?:async[ \t]|def[ \t]|class[ \t]|import[ \t]|from[ \t]))")
"""The newline before each line that may be a definition or an import: what follows the line's
spaces and tabs is a word :data:`_PY_DEF` or the import pattern needs (a possessive run, for no
alternative starts with a space). A lookahead, so that ``finditer`` copies nothing."""


def _python(data: bytes) -> tuple[list[_Def], list[str]]:
    """Python's definitions and imports, from the lines :data:`_PY_LINES` points at (one C
    pass over the body, no split of it into lines): only those are matched against the
    patterns, each on its own line, as a split would have given it."""
    out: list[_Def] = []
    seen: dict[str, None] = {}
    pattern = _IMPORTS["python"]
    size = len(data)
    # Line 1, which no newline precedes, is matched whatever it starts with.
    starts = itertools.chain((0,), (m.start() + 1 for m in _PY_LINES.finditer(data)))
    number, counted = 1, 0
    for start in starts:
        end = data.find(b"\n", start)
        raw = data[start : end if end >= 0 else size]
        number += data.count(b"\n", counted, start)
        counted = start
        found = _PY_DEF.match(raw)
        if found is not None:
            if len(out) < _MAX_DEFS:
                text = raw.decode("utf-8", "replace").rstrip()  # as written: tabs stay
                # What precedes the keyword is the match's spaces and tabs, as written.
                out.append(_Def(number, len(found.group(1).expandtabs(4)), text))
            continue
        match = pattern.match(raw)
        if match is not None:
            name = match.group(1) or match.group(2)
            if name:
                seen.setdefault(name.decode("utf-8", "replace"), None)
    return out, list(seen)


@functools.cache
def _linear(pattern: re.Pattern[bytes]) -> re2._Regexp[bytes]:
    """``pattern`` compiled by RE2 (the same matches, in time linear in the body).

    Python's backtracking takes quadratic time and worse on lines that open a definition and
    never close it: ``_JAVA_METHOD`` took 6 s for 64 KiB of ``foo(a, b`` lines (a 1 MiB body
    would take half an hour), RE2 2 ms for 1 MiB. Compiled on first use, not at import.
    Latin-1: every byte is one character, as in the bytes pattern.
    """
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1  # type: ignore[attr-defined]  # stubs lack it
    options.max_mem = 64 << 20
    flags = b"(?m)" if pattern.flags & re.M else b""
    return re2.compile(flags + pattern.pattern, options)


def _definitions(data: bytes, language: str) -> list[_Def]:
    """Definition lines in file order (line numbers from 1), deduplicated by line."""
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
    out: list[_Def] = []
    line = 1
    previous = 0
    for begin in starts:
        line += data.count(b"\n", previous, begin)
        previous = begin
        end = data.find(b"\n", begin)
        raw = data[begin : end if end >= 0 else len(data)]
        text = raw.decode("utf-8", "replace").rstrip()  # as written: tabs stay (grep-true)
        shown = text.expandtabs(4)
        out.append(_Def(line, len(shown) - len(shown.lstrip()), text))
    return out


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
    lines_total = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    if language == "python":
        definitions, imports = _python(data)
    else:
        definitions, imports = _definitions(data, language), _imports(data, language)
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

    top = sum(1 for d in definitions if d.indent == 0)
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
    if definitions:
        _outline(out, definitions, width, reserve)
    out.add_all(tail)
    return out.text()


def _outline(out: Builder, definitions: list[_Def], width: int, reserve: int) -> None:
    """All definitions if they fit; else the top level (nested ones counted); else its ends."""
    room = out.room - reserve - 80
    # An entry takes at least a dozen bytes: past room // 12 definitions none of the listings
    # of them all can fit, and rendering thousands of them only to find that out is the cost.
    full = [_entry(d, width) for d in definitions] if len(definitions) <= room // 12 else []
    if full and sum(len(e.encode()) + 1 for e in full) <= room:
        out.add("outline (line: definition):", reserve=reserve)
        out.add_all(full, reserve=reserve)
        return
    title = "outline (line: definition):"
    nested = any(d.indent for d in definitions)
    # Every definition's entry is needed only when none is nested (the top level is shown
    # otherwise): rendering thousands of them for nothing was a third of the outline's time.
    entries = [] if nested else full or [_entry(d, width) for d in definitions]
    if nested:
        groups: list[tuple[_Def, list[_Def]]] = []
        for item in definitions:
            if item.indent and groups:
                groups[-1][1].append(item)
            else:
                groups.append((item, []))
        few = len(groups) <= room // 12
        named = [
            _entry(
                top,
                width,
                f" ({len(inner)} nested {', '.join(f'{_name(d)} {d.line}' for d in inner)})"
                if inner
                else "",
            )
            for top, inner in (groups if few else [])
        ]
        if few and sum(len(e.encode()) + 1 for e in named) <= room:
            out.add(
                "outline, top level (line: definition; nested by name and line):", reserve=reserve
            )
            out.add_all(named, reserve=reserve)
            return
        entries = [
            _entry(top, width, f" (+{len(inner)} nested)" if inner else "") for top, inner in groups
        ]
        title = "outline, top level only (line: definition; nested ones counted):"
        if sum(len(e.encode()) + 1 for e in entries) <= room:
            out.add(title, reserve=reserve)
            out.add_all(entries, reserve=reserve)
            return
    out.add(title, reserve=reserve)
    ending = entries[-3:] if len(entries) > 6 else []
    end_cost = sum(len(e.encode()) + 1 for e in ending) + 100
    shown = out.add_all(entries[: len(entries) - len(ending)], reserve=reserve + end_cost)
    hidden = len(entries) - len(ending) - shown
    if hidden > 0:
        first_hidden = entries[shown].split(":", 1)[0].split("(")[0].strip()
        last_hidden = entries[shown + hidden - 1].split(":", 1)[0].split("(")[0].strip()
        out.add(
            f"  ... {hidden:,} more between lines {first_hidden} and {last_hidden}",
            reserve=reserve,
        )
        out.add_all(ending, reserve=reserve)
    else:
        out.add_all(ending, reserve=reserve)
