"""Deriving a new body from an old one without the model emitting it: JSON Patch and exact edits.

Pure functions on bytes: they know nothing of stores, scopes or events. ``artifact_patch`` (see
:mod:`cargohold._tools`) reads the old artifact, verified and owner-checked, derives the new body
here, and stores it with its parent.

Two ways to say what changes:

- **JSON Patch** (RFC 6902: ``add``, ``remove``, ``replace``, ``move``, ``copy``, ``test``) on a
  body that parses as JSON, applied with the ``jsonpatch`` library, all or nothing. The result is
  written back in the original's style, detected from its bytes: indentation (spaces or a tab,
  and how many), separators, escaped or raw non-ASCII, CRLF line breaks, and the whitespace
  around the document. When the untouched document re-serializes to exactly its own bytes
  (true of JSON written by Python's ``json``, by ``JSON.stringify`` and most serializers),
  formatting is ``preserved``: the new body differs from the old only where the patch changed
  values. Otherwise (numbers written as ``1.50`` or ``1e3``, irregular whitespace) it is
  ``reformatted``: the same data, re-serialized in the detected style, and the answer says so.
  A document with a repeated member name is refused: a patch cannot say which one it means.
- **Edits** on any body, every coordinate referring to the original: replace lines
  ``start_line`` to ``end_line`` (1-based, inclusive; ``end_line = start_line - 1`` inserts
  before ``start_line``) with ``lines``, each written with the body's own line break; or replace
  the bytes ``[offset, offset + length)`` with the UTF-8 of ``text``. Edits must not overlap; in
  a UTF-8 body a byte edit must not cut a character.

Every failure is a :class:`PatchError`: ``invalid_arguments`` (the call is wrong whatever the
body), ``conflict`` (the patch does not apply to these exact bytes: a ``test`` that fails, a path
or a line range that is not there, a body that is not JSON) or ``rejected`` (the result would be
over the store's per-artifact limit). Its message says how to fix the call and never holds the
body's content or a library's exception text.
"""

from __future__ import annotations

import difflib
import itertools
import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

import jsonpatch
import jsonpointer

from cargohold._text import line_offset

INVALID_ARGUMENTS: Final = "invalid_arguments"
CONFLICT: Final = "conflict"
REJECTED: Final = "rejected"

MAX_OPERATIONS: Final = 1000
"""The most JSON Patch operations, or edits, one call may carry."""

JSON_PATCH_OPS: Final = ("add", "remove", "replace", "move", "copy", "test")
"""The operations of RFC 6902 (and no extension of a library's)."""

_DIFF_LINES = 2000
"""Changed regions of at most this many lines on each side are diffed with :mod:`difflib`;
larger ones by a walk that re-synchronizes within :data:`_WINDOW` lines after each change."""
_WINDOW = 32
_ANCHOR = 3
"""Lines that must match in a row for the walk to take two places as the same again."""
_MAX_HUNKS = 1000
"""Past this many separate changes the walk stops and counts the rest whole (an upper bound)."""
_HEAD = 64 * 1024
"""How much of a JSON body its separators are guessed from (the round trip then checks)."""
_BOM = "\ufeff"
_JSON_SPACE = " \t\r\n"


class PatchError(Exception):
    """A patch that cannot be applied. Nothing was stored.

    Attributes:
        outcome: ``invalid_arguments``, ``conflict`` or ``rejected``.
        reason: For ``rejected``, the store's limit code (``artifact_too_large``).
    """

    def __init__(self, outcome: str, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Derived:
    """A derived body and what was done to make it.

    Attributes:
        data: The new body.
        method: ``json_patch`` or ``edits``.
        operations: Operations applied, by name (``replace``...) or edit kind (``lines``,
            ``bytes``).
        formatting: JSON Patch only: ``preserved`` or ``reformatted`` (see the module).
        style: JSON Patch only: the style written, e.g. ``indent 2 spaces``.
    """

    data: bytes = field(repr=False)
    method: str
    operations: Mapping[str, int]
    formatting: str | None = None
    style: str | None = None


@dataclass(frozen=True, slots=True)
class LineChange:
    """How two bodies differ, by lines, without a word of either.

    Attributes:
        lines_before: Lines of the old body.
        lines_after: Lines of the new body.
        removed: Lines of the old body that are not in the new one.
        added: Lines of the new body that were not in the old one.
        exact: Whether ``removed`` and ``added`` were counted line by line; ``False`` when a
            changed region too large or too scattered to walk was counted whole (which
            overstates them).
        first_line: The first changed line of the new body (1-based).
        last_line: The last one; ``first_line - 1`` when lines were only removed.
    """

    lines_before: int
    lines_after: int
    removed: int
    added: int
    exact: bool
    first_line: int
    last_line: int


def _fail(outcome: str, message: str) -> NoReturn:
    raise PatchError(outcome, message)


def _shown(value: object, most: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return json.dumps(text[:most] + ("..." if len(text) > most else ""), ensure_ascii=False)


def _too_large(size: int, limit: int) -> PatchError:
    return PatchError(
        REJECTED,
        f"the result would be {size:,} bytes, over the store's limit of {limit:,} bytes per "
        "artifact; nothing was stored.",
        reason="artifact_too_large",
    )


# -- JSON Patch ---------------------------------------------------------------------------------


def check_json_patch(value: object) -> list[dict[str, Any]]:
    """The operations of a JSON Patch the model sent, checked before the body is read.

    Raises:
        PatchError: ``invalid_arguments``, naming the operation and how to fix it.
    """
    if isinstance(value, str):  # some models send the patch as JSON text
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            _fail(INVALID_ARGUMENTS, "json_patch is not valid JSON; send an array of operations.")
    if isinstance(value, Mapping):
        value = [value]  # one operation without its array: what else could it mean
    if not isinstance(value, list) or not value:
        _fail(
            INVALID_ARGUMENTS,
            'json_patch must be a non-empty array of operations, e.g. [{"op": "replace", '
            '"path": "/rows/3/status", "value": "paid"}].',
        )
    if len(value) > MAX_OPERATIONS:
        _fail(INVALID_ARGUMENTS, f"json_patch has {len(value):,} operations; at most 1,000.")
    operations: list[dict[str, Any]] = []
    for index, operation in enumerate(value):
        where = f"json_patch[{index}]"
        if not isinstance(operation, Mapping):
            _fail(INVALID_ARGUMENTS, f"{where} must be an object with op and path.")
        op = operation.get("op")
        if op not in JSON_PATCH_OPS:
            _fail(
                INVALID_ARGUMENTS,
                f"{where}: op {_shown(op)} is not a JSON Patch operation; use one of "
                f"{', '.join(JSON_PATCH_OPS)}.",
            )
        members = ["path"] + (["from"] if op in ("move", "copy") else [])
        for member in members:
            _check_pointer(where, member, operation.get(member))
        if op in ("add", "replace", "test") and "value" not in operation:
            _fail(INVALID_ARGUMENTS, f"{where}: the {op} operation needs a value.")
        operations.append(dict(operation))
    try:
        jsonpatch.JsonPatch(operations)  # the library's own checks, before anything is read
    except jsonpatch.JsonPatchException:
        _fail(INVALID_ARGUMENTS, "json_patch is not a valid JSON Patch (RFC 6902).")
    return operations


def _check_pointer(where: str, member: str, pointer: object) -> None:
    if not isinstance(pointer, str):
        _fail(
            INVALID_ARGUMENTS,
            f'{where}: {member} must be a JSON Pointer string, e.g. "/rows/3/status" '
            '("" is the whole document).',
        )
    try:
        jsonpointer.JsonPointer(pointer)
    except jsonpointer.JsonPointerException:
        _fail(
            INVALID_ARGUMENTS,
            f"{where}: {member} {_shown(pointer)} is not a JSON Pointer: it starts with / and "
            'escapes ~ as ~0 and / as ~1 ("" is the whole document).',
        )


@dataclass(frozen=True, slots=True)
class _Style:
    """How a JSON body is written, as :func:`json.dumps` can write it again."""

    indent: str | None
    item_separator: str
    key_separator: str
    ensure_ascii: bool
    newline: str

    def describe(self) -> str:
        if self.indent is None:
            return "one line" + (", compact" if self.item_separator == "," else "")
        if self.indent and set(self.indent) == {" "}:
            return f"indent {len(self.indent)} spaces"
        if self.indent and set(self.indent) == {"\t"}:
            return "indent tabs" if len(self.indent) > 1 else "indent a tab"
        return "indented"

    def dump(self, document: Any) -> str:
        text = json.dumps(
            document,
            indent=self.indent,
            separators=(self.item_separator, self.key_separator),
            ensure_ascii=self.ensure_ascii,
            allow_nan=False,
        )
        # JSON strings hold no raw line break, so every "\n" is the layout's own.
        return text.replace("\n", self.newline) if self.newline != "\n" else text


_KEY_SEPARATOR = re.compile(r'"([ \t]*:[ \t]*)')
_ITEM_SEPARATOR = re.compile(r'[\]}"0-9el],([ \t]*)')
_LINE_END_SEPARATOR = re.compile(r",([ \t]*)\r?\n")
_ESCAPED = re.compile(r"\\u(?!00[0-7])[0-9a-fA-F]{4}")


def _style_of(inner: str) -> _Style:
    """The style ``inner`` (the document without its surrounding whitespace) is written in: a
    guess from its first bytes, which the round trip in :func:`apply_json_patch` then checks."""
    head = inner[:_HEAD]
    found = _KEY_SEPARATOR.search(head)
    key_separator = found.group(1) if found else ": "
    newline = "\n"
    indent: str | None = None
    break_at = head.find("\n")
    if break_at >= 0:
        if break_at > 0 and head[break_at - 1] == "\r":
            newline = "\r\n"
        after = head[break_at + 1 :]
        indent = after[: len(after) - len(after.lstrip(" \t"))]
        found = _LINE_END_SEPARATOR.search(head)  # "," then the line break, or ", " then it
        item_separator = "," + (found.group(1) if found else "")
    else:
        found = _ITEM_SEPARATOR.search(head)
        if found is not None:
            item_separator = "," + found.group(1)
        else:  # one member at most: spaced like the key separator
            item_separator = ", " if key_separator.endswith(" ") else ","
    # Raw UTF-8 in the document: write new text raw too. Only escapes (\u00fc): escape it.
    # Neither: the same data either way; raw, as RFC 8259 prefers.
    escaped = inner.isascii() and _ESCAPED.search(head) is not None
    return _Style(indent, item_separator, key_separator, escaped, newline)


def _parse_json(body: bytes) -> tuple[Any, str, str, str]:
    """The document, and the text before, of and after it (whitespace and a BOM are kept).

    Raises:
        PatchError: ``conflict``: the body is not JSON.
    """
    not_json = PatchError(
        CONFLICT,
        "the artifact is not JSON, so a JSON Patch cannot apply; use edits (line or byte "
        "ranges) instead.",
    )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise not_json from None
    start = len(text) - len(text.lstrip(_BOM + _JSON_SPACE))
    stop = len(text.rstrip(_JSON_SPACE))
    inner = text[start:stop]

    def refuse(constant: str) -> NoReturn:  # NaN and Infinity: Python's, not JSON's
        raise ValueError(constant)

    try:
        document = json.loads(inner, parse_constant=refuse)
    except ValueError:
        raise not_json from None
    except RecursionError:
        raise PatchError(CONFLICT, "the JSON is nested too deeply to patch.") from None
    return document, text[:start], inner, text[stop:]


def _repeated_member(inner: str) -> bool:
    found = False

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal found
        if len({key for key, _ in items}) != len(items):
            found = True
        return dict(items)

    json.loads(inner, object_pairs_hook=pairs)
    return found


def apply_json_patch(body: bytes, operations: list[dict[str, Any]], *, max_bytes: int) -> Derived:
    """``body`` patched by ``operations`` (from :func:`check_json_patch`), all or nothing.

    Raises:
        PatchError: ``conflict`` (not JSON, a failed test, a missing path, a repeated member
            name), ``rejected`` (the result over ``max_bytes``).
    """
    document, before, inner, after = _parse_json(body)
    style = _style_of(inner)
    try:
        preserved = style.dump(document) == inner
        if not preserved and _repeated_member(inner):
            _fail(
                CONFLICT,
                "the JSON repeats a member name inside one object, so a JSON Patch path cannot "
                "say which one it means; use edits (line or byte ranges) instead.",
            )
        copied = 0
        for index, operation in enumerate(operations):
            if operation["op"] == "copy":
                # Copies are the one way a small patch makes a huge document (each may double
                # it): their bytes are counted before the copy is made.
                copied += _copied_size(document, operation["from"])
                if copied > max_bytes:
                    raise PatchError(
                        REJECTED,
                        f"json_patch copies {copied:,} bytes of values, over the store's limit "
                        f"of {max_bytes:,} bytes per artifact; nothing was stored.",
                        reason="artifact_too_large",
                    )
            document = _apply_one(document, index, operation)
        text = style.dump(document)
    except RecursionError:
        _fail(CONFLICT, "the JSON is nested too deeply to patch.")
    except ValueError:  # 1e400 parses as infinity, which JSON cannot write back
        _fail(
            CONFLICT,
            "the JSON holds a number beyond the range of a double (such as 1e400), which "
            "cannot be written back exactly; use edits (line or byte ranges) instead.",
        )
    try:
        data = (before + text + after).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, escaped in the JSON: keep it escaped
        style = _Style(style.indent, style.item_separator, style.key_separator, True, style.newline)
        data = (before + style.dump(document) + after).encode("utf-8")
        preserved = False
    if len(data) > max_bytes:
        raise _too_large(len(data), max_bytes)
    counts = Counter(operation["op"] for operation in operations)
    return Derived(
        data,
        "json_patch",
        dict(sorted(counts.items())),
        "preserved" if preserved else "reformatted",
        style.describe(),
    )


def _copied_size(document: Any, pointer: str) -> int:
    try:
        value = jsonpointer.resolve_pointer(document, pointer)
    except jsonpointer.JsonPointerException:
        return 0  # the copy itself fails, and says why
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _apply_one(document: Any, index: int, operation: dict[str, Any]) -> Any:
    op, path = operation["op"], operation["path"]
    where = f"json_patch[{index}] ({op} {_shown(path, 80)})"
    try:
        # atomic: an operation that fails halfway (a move whose add fails) is undone, so the
        # explanation below describes the document the operation was applied to
        return jsonpatch.JsonPatch([operation]).apply(document, in_place=True, atomic=True)
    except jsonpatch.JsonPatchTestFailed:
        if _resolves(document, path):
            _fail(
                CONFLICT,
                f"{where} failed: the value there is not the one tested, so this document is "
                "not the one the patch was written for. Nothing was stored; look at the value "
                "(artifact_query) and write the patch again.",
            )
        why = _missing(document, path, insert=False)
    except jsonpatch.InvalidJsonPatch:
        _fail(INVALID_ARGUMENTS, f"{where} is not a valid JSON Patch operation.")
    except (
        jsonpatch.JsonPatchException,
        jsonpointer.JsonPointerException,
        TypeError,
        KeyError,
        IndexError,
        ValueError,
    ):
        source = operation.get("from")
        if op == "move" and isinstance(source, str) and path.startswith(source + "/"):
            why = "a value cannot move into one of its own members"
        elif isinstance(source, str) and op in ("move", "copy") and not _resolves(document, source):
            why = _missing(document, source, insert=False)
        else:
            why = _missing(document, path, insert=op in ("add", "move", "copy"))
    _fail(CONFLICT, f"{where} does not apply: {why}. Nothing was stored.")


def _resolves(document: Any, pointer: object) -> bool:
    if not isinstance(pointer, str):
        return False
    try:
        jsonpointer.resolve_pointer(document, pointer)
    except (jsonpointer.JsonPointerException, TypeError, KeyError, IndexError):
        return False
    return True


def _missing(document: Any, pointer: str, *, insert: bool) -> str:
    """Where ``pointer`` stops resolving in ``document``, told by types and sizes only."""
    parts = jsonpointer.JsonPointer(pointer).parts
    node = document
    for depth, part in enumerate(parts):
        here = jsonpointer.JsonPointer.from_parts(parts[:depth]).path or "the document root"
        last = depth == len(parts) - 1
        if isinstance(node, dict):
            if part in node:
                node = node[part]
                continue
            if last and insert:
                break
            return f"{here} is an object with no member {_shown(part)}"
        if isinstance(node, list):
            size = len(node)
            span = f"indexes 0 to {size - 1}" if size else "none"
            if part == "-" and last and insert:
                break
            if not part.isdigit() or (len(part) > 1 and part[0] == "0"):
                return f"{here} is an array ({span}); {_shown(part)} is not an index"
            number = int(part)
            if number < size or (last and insert and number == size):
                if last:
                    break
                node = node[number]
                continue
            return f"{here} is an array of {size:,} items ({span}); there is no item {number}"
        kind = "a string" if isinstance(node, str) else "a number, true, false or null"
        return f"{here} is {kind}, not an object or an array"
    return "the path does not exist in this document"


# -- edits --------------------------------------------------------------------------------------

_LINE_EDIT_KEYS = frozenset({"start_line", "end_line", "lines"})
_BYTE_EDIT_KEYS = frozenset({"offset", "length", "text"})


@dataclass(frozen=True, slots=True)
class Edit:
    """One edit as the model sent it, checked for shape (not yet against a body)."""

    index: int
    kind: str  # "lines" or "bytes"
    start: int  # start_line, or offset
    end: int  # end_line (inclusive), or offset + length
    replacement: tuple[str, ...] | bytes = field(repr=False)


def _whole(where: str, name: str, value: object, minimum: int) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(INVALID_ARGUMENTS, f"{where}: {name} must be a whole number.")
    if value < minimum:
        _fail(INVALID_ARGUMENTS, f"{where}: {name} must be at least {minimum}, got {value}.")
    return value


def check_edits(value: object) -> list[Edit]:
    """The edits the model sent, checked before the body is read.

    Raises:
        PatchError: ``invalid_arguments``, naming the edit and how to fix it.
    """
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list) or not value:
        _fail(
            INVALID_ARGUMENTS,
            'edits must be a non-empty array, e.g. [{"start_line": 12, "end_line": 12, "lines": '
            '["the new line 12"]}] or [{"offset": 100, "length": 5, "text": "hello"}].',
        )
    if len(value) > MAX_OPERATIONS:
        _fail(INVALID_ARGUMENTS, f"edits has {len(value):,} edits; at most 1,000.")
    edits = []
    for index, edit in enumerate(value):
        where = f"edits[{index}]"
        if not isinstance(edit, Mapping):
            _fail(INVALID_ARGUMENTS, f"{where} must be an object.")
        keys = {str(key) for key in edit}
        if keys <= _LINE_EDIT_KEYS and "start_line" in keys:
            edits.append(_line_edit(where, index, edit))
        elif keys <= _BYTE_EDIT_KEYS and "offset" in keys:
            edits.append(_byte_edit(where, index, edit))
        else:
            _fail(
                INVALID_ARGUMENTS,
                f"{where} must be either {{start_line, end_line, lines}} (a line range) or "
                f"{{offset, length, text}} (a byte range); it has {_names(keys)}.",
            )
    return edits


def _names(keys: set[str]) -> str:
    shown = ", ".join(sorted(keys))
    return (shown[:120] + "...") if len(shown) > 120 else (shown or "no members")


def _line_edit(where: str, index: int, edit: Mapping[str, Any]) -> Edit:
    start = _whole(where, "start_line", edit["start_line"], 1)
    end = _whole(where, "end_line", edit.get("end_line", start), start - 1)
    lines = edit.get("lines")
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        _fail(
            INVALID_ARGUMENTS,
            f"{where}: lines must be an array of strings (each one line, without its line "
            "break; [] deletes the range).",
        )
    for number, line in enumerate(lines):
        if "\n" in line or "\r" in line:
            _fail(
                INVALID_ARGUMENTS,
                f"{where}: lines[{number}] holds a line break; give each line as its own string.",
            )
    return Edit(index, "lines", start, end, tuple(lines))


def _byte_edit(where: str, index: int, edit: Mapping[str, Any]) -> Edit:
    offset = _whole(where, "offset", edit["offset"], 0)
    length = _whole(where, "length", edit.get("length", 0), 0)
    text = edit.get("text")
    if not isinstance(text, str):
        _fail(INVALID_ARGUMENTS, f'{where}: text must be a string ("" deletes the range).')
    try:
        replacement = text.encode("utf-8")
    except UnicodeEncodeError:
        _fail(INVALID_ARGUMENTS, f"{where}: text holds a lone surrogate, which is not UTF-8.")
    return Edit(index, "bytes", offset, offset + length, replacement)


def count_lines(data: bytes) -> int:
    """Lines of ``data`` as the read tools number them (a last line without a break counts)."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def apply_edits(body: bytes, edits: list[Edit], *, max_bytes: int) -> Derived:
    """``body`` with ``edits`` (from :func:`check_edits`) applied together.

    Each new line is written with the body's line break (that of its first line; ``\\n`` for
    a body of one line or none). A body whose last line has no break keeps it that way when a
    line edit reaches its end; byte edits are exact and change nothing but their range.

    Raises:
        PatchError: ``conflict`` (a range outside the body, a byte edit that cuts a UTF-8
            character), ``invalid_arguments`` (overlapping edits), ``rejected`` (the result
            over ``max_bytes``).
    """
    size = len(body)
    try:
        body.decode("utf-8")
        utf8 = True
    except UnicodeDecodeError:
        utf8 = False
    total = count_lines(body)
    first_break = body.find(b"\n")
    newline = b"\r\n" if first_break > 0 and body[first_break - 1] == 0x0D else b"\n"
    open_end = size > 0 and not body.endswith(b"\n")  # the last line has no break
    spans: list[tuple[int, int, int, bytes]] = []  # (start, end, edit index, new bytes)
    lines_reach_end = False
    for edit in edits:
        where = f"edits[{edit.index}]"
        if isinstance(edit.replacement, bytes):
            if edit.end > size:
                _fail(
                    CONFLICT,
                    f"{where}: bytes {edit.start}-{edit.end} reach past the end of the body "
                    f"({size:,} bytes). Nothing was stored.",
                )
            for point in (edit.start, edit.end):
                if utf8 and point < size and (body[point] & 0xC0) == 0x80:
                    _fail(
                        CONFLICT,
                        f"{where}: byte {point} falls inside a UTF-8 character; move the edge "
                        "to where the character starts. Nothing was stored.",
                    )
            spans.append((edit.start, edit.end, edit.index, edit.replacement))
            continue
        if edit.start > total + 1 or edit.end > total:
            _fail(
                CONFLICT,
                f"{where}: lines {edit.start}-{edit.end} are outside the body's {total:,} lines "
                f"(append with start_line={total + 1} end_line={total}). Nothing was stored.",
            )
        begin = line_offset(body, edit.start)
        end = line_offset(body, edit.end + 1)
        text = b"".join(line.encode("utf-8") + newline for line in edit.replacement)
        if begin == size and open_end and text:
            text = newline + text  # after a last line without a break: break it first
        lines_reach_end = lines_reach_end or end == size
        spans.append((begin, end, edit.index, text))
    spans.sort(key=lambda span: (span[0], span[1] > span[0], span[2]))
    for (_, end_a, index_a, _), (start_b, _, index_b, _) in itertools.pairwise(spans):
        if start_b < end_a:
            _fail(
                INVALID_ARGUMENTS,
                f"edits[{index_a}] and edits[{index_b}] overlap; every edit refers to the "
                "original body, so merge them into one.",
            )
    pieces = []
    at = 0
    for start, end, _, text in spans:
        pieces.append(body[at:start])
        pieces.append(text)
        at = end
    pieces.append(body[at:])
    data = b"".join(pieces)
    if open_end and lines_reach_end:
        # The original's last line had no break: the new last line has none either.
        if data.endswith(newline):
            data = data[: -len(newline)]
        elif data.endswith(b"\n"):
            data = data[:-1]
    if len(data) > max_bytes:
        raise _too_large(len(data), max_bytes)
    counts = Counter(edit.kind for edit in edits)
    return Derived(data, "edits", dict(sorted(counts.items())))


# -- what changed -------------------------------------------------------------------------------


def _common_prefix(a: bytes, b: bytes) -> int:
    limit = min(len(a), len(b))
    step = 64 * 1024
    at = 0
    while at < limit and a[at : at + step] == b[at : at + step]:
        at += step
    if at >= limit:
        return limit
    low, high = at, min(at + step, limit)  # the first difference lies in [low, high)
    while low < high:
        middle = (low + high) // 2
        if a[low : middle + 1] == b[low : middle + 1]:
            low = middle + 1
        else:
            high = middle
    return low


def _common_suffix(a: bytes, b: bytes, floor: int) -> int:
    """Bytes at the end of both, never reaching into their first ``floor`` bytes."""
    limit = min(len(a), len(b)) - floor
    step = 64 * 1024
    got = 0
    while got < limit:
        take = min(step, limit - got)
        if a[len(a) - got - take : len(a) - got] != b[len(b) - got - take : len(b) - got]:
            break
        got += take
    else:
        return limit
    low, high = got, got + min(step, limit - got)  # the answer lies in [low, high)
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle : len(a) - got] == b[len(b) - middle : len(b) - got]:
            low = middle
        else:
            high = middle - 1
    return low


def _lines(data: bytes) -> list[bytes]:
    """``data`` cut after each ``\\n`` (the read tools' lines, breaks kept)."""
    lines = data.split(b"\n")
    last = lines.pop()
    return [line + b"\n" for line in lines] + ([last] if last else [])


def line_change(before: bytes, after: bytes) -> LineChange:
    """How ``after`` differs from ``before``, by lines (counts and line numbers only).

    The differing region is found by cutting the longest common prefix and suffix of whole
    lines (C-speed comparisons), then diffed line by line when it is small.
    """
    prefix = _common_prefix(before, after)
    prefix = before.rfind(b"\n", 0, prefix) + 1  # back to the start of its line
    suffix = _common_suffix(before, after, prefix)
    old_start, new_start = len(before) - suffix, len(after) - suffix
    starts_line = (old_start == prefix or before[old_start - 1] == 0x0A) and (
        new_start == prefix or after[new_start - 1] == 0x0A
    )
    if suffix and not starts_line:
        # Forward to the first line both share whole (the suffix's bytes are the same in both).
        inside = before.find(b"\n", old_start)
        suffix = len(before) - inside - 1 if inside >= 0 else 0
    old_lines = _lines(before[prefix : len(before) - suffix])
    new_lines = _lines(after[prefix : len(after) - suffix])
    removed, added, exact = _count_changes(old_lines, new_lines)
    first = after.count(b"\n", 0, prefix) + 1
    return LineChange(
        lines_before=count_lines(before),
        lines_after=count_lines(after),
        removed=removed,
        added=added,
        exact=exact,
        first_line=first,
        last_line=first + len(new_lines) - 1,
    )


def _count_changes(old: list[bytes], new: list[bytes]) -> tuple[int, int, bool]:
    """Lines removed from ``old`` and added in ``new``, and whether they were counted exactly.

    A small region gets :mod:`difflib`'s diff. A large one (a patch scattered over a big
    document leaves one region from its first change to its last) is walked: equal lines are
    skipped, and at each change the nearest place within :data:`_WINDOW` lines where
    :data:`_ANCHOR` lines match again ends it. Linear in the region for the few, short changes
    a patch makes; a region that does not re-synchronize (a re-serialized document) or holds
    more than :data:`_MAX_HUNKS` changes is counted whole from there on.
    """
    if len(old) <= _DIFF_LINES and len(new) <= _DIFF_LINES:
        removed = added = 0
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for tag, old_from, old_to, new_from, new_to in matcher.get_opcodes():
            if tag != "equal":
                removed += old_to - old_from
                added += new_to - new_from
        return removed, added, True
    i = j = removed = added = hunks = 0
    while i < len(old) and j < len(new):
        if old[i] == new[j]:
            i += 1
            j += 1
            continue
        hunks += 1
        step = _resync(old, new, i, j) if hunks <= _MAX_HUNKS else None
        if step is None:
            return removed + len(old) - i, added + len(new) - j, False
        removed, added = removed + step[0], added + step[1]
        i, j = i + step[0], j + step[1]
    return removed + len(old) - i, added + len(new) - j, True


def _resync(old: list[bytes], new: list[bytes], i: int, j: int) -> tuple[int, int] | None:
    """The fewest lines to skip in ``old`` and ``new`` from ``i``, ``j`` for them to match again
    (for :data:`_ANCHOR` lines, or to both ends), within :data:`_WINDOW` lines of each."""
    for distance in range(1, 2 * _WINDOW + 1):
        for skip_old in range(max(0, distance - _WINDOW), min(distance, _WINDOW) + 1):
            a, b = i + skip_old, j + distance - skip_old
            if a > len(old) or b > len(new):
                continue
            run = min(_ANCHOR, len(old) - a, len(new) - b)
            if (run == _ANCHOR or (a + run == len(old) and b + run == len(new))) and old[
                a : a + run
            ] == new[b : b + run]:
                return skip_old, distance - skip_old
    return None
