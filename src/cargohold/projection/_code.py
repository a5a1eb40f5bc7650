"""The source-code projector: language, line count, imports, a definitions outline, the last lines.

Definitions are found by per-language regular expressions over the bytes (no decoded copy of the
body, no parser that could fail on a fragment): Python ``class``/``def`` with their nesting, C and
C++ function definitions, structs, unions and enums, JavaScript/TypeScript, Java, Go, Rust, Ruby
and shell functions and types. The outline shows each definition's own line, with its number, as
written; when the outline does not fit it keeps the top level, then its start and its end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import compress
from operator import methodcaller

from cargohold.projection._model import Builder, Detection, clip, last_lines, quote

_KEYWORDS = frozenset(
    b"if for while switch return else do case catch sizeof new throw typeof defined elif"
    b" synchronized foreach using".split()
)
_MAX_DEFS = 20_000
_TAIL_LINES = 6


@dataclass(frozen=True, slots=True)
class _Def:
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


_PY_STARTS = (b"def ", b"def\t", b"class ", b"class\t", b"async ", b"async\t")
_PY_IMPORTS = (b"import ", b"import\t", b"from ", b"from\t")


_PY_CHUNK = 256 * 1024
"""Bytes of lines split at once (the lines of a whole body took more than its size again)."""


def _python(data: bytes) -> tuple[list[_Def], list[str]]:
    """Python's definitions and imports in C-speed steps: the lines whose text starts with a
    keyword are picked by ``map`` and ``compress`` (no Python loop over every line); only those
    are matched against the patterns. The body is split 256 KiB of lines at a time, each
    piece ending at a line break (its lines are exactly the body's)."""
    out: list[_Def] = []
    seen: dict[str, None] = {}
    pattern = _IMPORTS["python"]
    first_line = 0  # the index of the piece's first line among all the body's lines
    start = 0
    while start <= len(data):
        end = data.find(b"\n", start + _PY_CHUNK)
        lines = (data[start:] if end < 0 else data[start:end]).split(b"\n")
        starts = list(
            map(methodcaller("startswith", _PY_STARTS + _PY_IMPORTS), map(bytes.lstrip, lines))
        )
        for index in compress(range(len(lines)), starts):
            raw = lines[index]
            number = first_line + index
            if _PY_DEF.match(raw):
                if len(out) < _MAX_DEFS:
                    text = raw.decode("utf-8", "replace").rstrip()  # as written: tabs stay
                    shown = text.expandtabs(4)
                    out.append(_Def(number + 1, len(shown) - len(shown.lstrip()), text))
                continue
            match = pattern.match(raw)
            if match is not None:
                name = match.group(1) or match.group(2)
                if name:
                    seen.setdefault(name.decode("utf-8", "replace"), None)
        if end < 0:
            break
        first_line += len(lines)
        start = end + 1
    return out, list(seen)


def _definitions(data: bytes, language: str) -> list[_Def]:
    """Definition lines in file order (line numbers from 1), deduplicated by line."""
    found: dict[int, tuple[int, int]] = {}
    for pattern in _DEFS.get(language, (_PY_DEF, _C_FUNC, _JS_DEF, _RUST_DEF)):
        for match in pattern.finditer(data):
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
    entries = full or [_entry(d, width) for d in definitions]
    title = "outline (line: definition):"
    if any(d.indent for d in definitions):
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
