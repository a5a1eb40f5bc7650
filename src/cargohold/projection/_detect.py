"""Kind detection: the media type hint and the bytes decide, deterministically and fail-safe.

The bytes outrank the hint where they disagree about being binary (a PNG labelled ``text/plain``
is a PNG); the hint breaks ties between text kinds (``text/csv`` makes a comma-separated body CSV
even when a sniff would hesitate). Anything unrecognised is ``text``, which is ``exact_required``.
"""

from __future__ import annotations

import binascii
import itertools
import re

import re2

from cargohold._re2 import byte_options
from cargohold._text import looks_textual
from cargohold.projection._model import Detection, ProjectionClass

SNIFF = 64 * 1024
"""Detection looks at no more than the first 64 KiB."""

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"\xff\xd8\xff", "jpeg"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"%PDF-", "pdf"),
    (b"\x1f\x8b", "gzip"),
    (b"PK\x03\x04", "zip"),
    (b"PK\x05\x06", "zip"),
    (b"RIFF", "riff"),
    (b"\x7fELF", "elf"),
    (b"SQLite format 3\x00", "sqlite"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
)

_CODE_MEDIA = {
    "text/x-python": "python",
    "text/x-script.python": "python",
    "text/x-c": "c",
    "text/x-csrc": "c",
    "text/x-chdr": "c",
    "text/x-c++": "cpp",
    "text/x-c++src": "cpp",
    "text/x-java": "java",
    "text/x-java-source": "java",
    "text/javascript": "javascript",
    "application/javascript": "javascript",
    "application/x-javascript": "javascript",
    "text/x-go": "go",
    "text/x-rust": "rust",
    "text/x-ruby": "ruby",
    "text/x-sh": "shell",
    "application/x-sh": "shell",
    "text/x-typescript": "typescript",
    "application/typescript": "typescript",
}

_TIMESTAMP = re.compile(
    rb"^\s*(?:\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}|\d{6} \d{6}|\d{2}/\d{2}/\d{2,4} \d{2}:\d{2}"
    rb"|[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2}|- \d{10} |\d{10}(?:\.\d+)? |\[\d{2}/[A-Z][a-z]{2})"
)
_LEVEL = re.compile(rb"\b(?:INFO|WARN|WARNING|ERROR|DEBUG|TRACE|FATAL|CRITICAL|SEVERE|NOTICE)\b")
_FAILURE = re2.compile(
    rb"(?m)Traceback \(most recent call last\):|^\s+at [\w$.<>]+\([\w$.]*(?::\d+)?\)"
    rb"|^--- [\w.$]+::\w+|^FAILED [\w/.\-]+::|^=+ FAILURES =+|^Tests run: \d+, Failures: [1-9]"
    rb"|^\w+(?:\.\w+)*(?:Error|Exception|Failure)(?::|$)"
)
"""RE2 (a DFA): a 64 KiB head without a failure in it is cleared in a fraction of a millisecond,
where a backtracking engine tries every alternative at every byte."""
_HUNK = re.compile(rb"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@", re.M)
_DIFF_FILE = re2.compile(rb"(?m)^(?:diff --git |\+\+\+ \S)")
_SEARCH = re.compile(rb"^[^\s:]{1,300}:\d+:")
_BASE64_LINE = re.compile(rb"^[A-Za-z0-9+/]+={0,2}$")
_DATA_URI = re.compile(rb"^data:[\w.+-]+/[\w.+-]+(?:;[\w.+-]+=[\w.+-]+)*;base64,")
_HTML = re.compile(rb"^\s*(?:<!doctype html|<html[\s>]|<head[\s>]|<body[\s>])", re.I)
_CODE_HINTS: tuple[tuple[str, re.Pattern[bytes]], ...] = (
    ("python", re.compile(rb"^(?:def |class |import |from \S+ import |async def )", re.M)),
    ("c", re.compile(rb"^(?:#include [<\"]|static \w|int \w+\(|void \w+\(|typedef )", re.M)),
    ("java", re.compile(rb"^(?:package [\w.]+;|import [\w.]+;|public (?:final )?class )", re.M)),
    ("go", re.compile(rb"^(?:package \w+$|func \w|import \()", re.M)),
    ("rust", re.compile(rb"^(?:use \w+::|fn \w|pub fn |impl\b|mod \w+;)", re.M)),
    ("javascript", re.compile(rb"^(?:function \w|const \w+ = |export |import .* from )", re.M)),
)


def _binary_format(head: bytes) -> str:
    for magic, name in _MAGIC:
        if head.startswith(magic):
            if name == "riff" and head[8:12] == b"WEBP":
                return "webp"  # a RIFF container of the WebP form: an image a model can take
            return name
    return "unknown"


def _is_base64(head: bytes) -> bool:
    lines = [line.strip() for line in head.split(b"\n")[:200] if line.strip()]
    if len(lines) < 1 or sum(len(line) for line in lines) < 256:
        return False
    # A corrupted line or two must not turn base64 into text shown verbatim: tolerate 2%.
    clean = [line for line in lines[:-1] if _BASE64_LINE.fullmatch(line)]
    if len(lines) - 1 - len(clean) > max(0, (len(lines) - 1) // 50):
        return False
    if not clean and not _BASE64_LINE.fullmatch(lines[0]):
        return False  # a lone line must be all base64 alphabet (non-ASCII prose is not)
    sample = b"".join(clean[:40] or lines[:1])
    try:
        binascii.a2b_base64(sample[: len(sample) // 4 * 4], strict_mode=True)
    except binascii.Error:
        return False
    # English words are base64-clean too; real base64 mixes cases and digits densely. Count
    # ASCII only: read as Latin-1, UTF-8 lead bytes would pass for capitals and digits.
    letters = sum(65 <= c <= 90 for c in sample)
    digits = sum(48 <= c <= 57 for c in sample)
    return letters > len(sample) // 8 and digits > len(sample) // 50


_JSON_TOKENS = re2.compile(
    rb'(?:[ \t\r\n,:\[\]{}]+|"(?:[^"\\\x00-\x1f]|\\["\\/bfnrtu])*"'
    rb"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)*",
    byte_options(),
)
"""A run of JSON's tokens: what a JSON text (or NDJSON) is made of, and a Python ``repr`` is not
(its single quotes, ``None``, ``True``, ``False``, tuples' parentheses stop the run). RE2: 0.13 ms
over a 64 KiB head, where ``re`` takes one to three milliseconds."""
_JSON_CUT = re.compile(
    rb'"(?:[^"\\\x00-\x1f]|\\.)*\\?|-?[\d.eE+-]*|t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?'
    rb"|n(?:u(?:ll?)?)?"
)
"""A token cut by the end of the sniff window: a string, number or literal not yet closed."""


def _json_tokens(head: bytes, whole: bool, *, bad_lines: int = 0) -> bool:
    """Whether ``head`` is made of JSON's tokens only, but for up to ``bad_lines`` lines (NDJSON
    names its invalid lines); unless it is the ``whole`` body, its last token may be cut.

    Structure is left to the parser: this tells JSON from text that merely opens with a bracket,
    in one C-speed pass over at most the sniff window (one more per line forgiven).
    """
    pos = 0
    while True:
        run = _JSON_TOKENS.match(head, pos)
        end = pos if run is None else run.end()
        if end == len(head) or (not whole and _JSON_CUT.fullmatch(head, end) is not None):
            return True
        if bad_lines <= 0:
            return False
        bad_lines -= 1
        newline = head.find(b"\n", end)
        if newline < 0:
            return True  # the last line was the one forgiven
        pos = newline + 1


def _json_kind(head: bytes, media: str, whole: bool) -> str | None:
    """``json`` or ``ndjson`` when the head is made of JSON's tokens and opens as a container
    (or the media type says JSON); else ``None``, whatever the media type says."""
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if stripped[:1] not in (b"{", b"[") and not media.endswith(("json", "+json")):
        return None
    if not stripped:
        return None
    first, _, rest = stripped.partition(b"\n")
    first = first.strip()
    if first.startswith(b"{") and first.endswith(b"}") and rest.lstrip()[:1] == b"{":
        # One line in fifty may be invalid: the NDJSON preview names them.
        forgiven = max(1, stripped.count(b"\n") // 50)
        return "ndjson" if _json_tokens(stripped, whole, bad_lines=forgiven) else None
    return "json" if _json_tokens(stripped, whole) else None


def _delimited(head: bytes, media: str) -> str | None:
    if media in ("text/csv", "application/csv"):
        return "csv"
    if media in ("text/tab-separated-values", "text/tsv"):
        return "tsv"
    lines = [line for line in head.split(b"\n")[:40] if line.strip()]
    if len(lines) < 3:
        return None
    if not head.endswith(b"\n") and len(head) >= SNIFF:
        lines = lines[:-1]  # the sniff window may cut the last line
    for delimiter, kind in ((b"\t", "tsv"), (b",", "csv"), (b";", "csv")):
        counts = [line.count(delimiter) for line in lines]
        if min(counts) >= 1 and counts.count(counts[0]) >= len(counts) * 0.9:
            return kind
    return None


_CODE_STARTS = re2.compile(
    rb"(?m)^(?:def |class |import |from |async def |#include|static |int |void |typedef |package "
    rb"|public |func |use |fn |pub |impl|mod |function |const |export )"
)
"""Some line starting as a definition or an import of one of ``_CODE_HINTS``' languages: without
one (prose, tables), the six hint patterns are not run over the head."""


def _code_language(head: bytes, media: str) -> str | None:
    if media in _CODE_MEDIA:
        return _CODE_MEDIA[media]
    if head.startswith(b"#!"):
        first = head.split(b"\n", 1)[0]
        for name in (b"python", b"node", b"bash", b"sh", b"ruby", b"perl"):
            if name in first:
                return {b"node": "javascript", b"bash": "shell", b"sh": "shell"}.get(
                    name, name.decode()
                )
    if _CODE_STARTS.search(head) is None:
        return None
    best: tuple[int, str] | None = None
    for language, pattern in _CODE_HINTS:
        hits = len(pattern.findall(head))
        if hits >= 3 and (best is None or hits > best[0]):
            best = (hits, language)
    return None if best is None else best[1]


def _few_paths(lines: list[bytes]) -> bool:
    """grep output repeats its paths, and its line numbers climb within each path; a log whose
    lines merely look like ``name:13:53`` (a time) does neither."""
    pairs = []
    for line in lines:
        path, _, rest = line.partition(b":")
        number = rest.split(b":", 1)[0]
        pairs.append((path, int(number) if number.isdigit() else -1))
    if len({path for path, _ in pairs}) > max(2, len(lines) // 2):
        return False
    same = [(a[1], b[1]) for a, b in itertools.pairwise(pairs) if a[0] == b[0]]
    return not same or sum(1 for x, y in same if y > x) >= 0.8 * len(same)


def _ratio(pattern: re.Pattern[bytes], lines: list[bytes]) -> float:
    return sum(1 for line in lines if pattern.search(line)) / max(1, len(lines))


def detect(data: bytes, *, media_type: str, failed: bool = False) -> Detection:
    """The kind and class of ``data``.

    Binary is ``unsupported``; failures, stack traces and unknown text are ``exact_required``;
    a failed or cancelled result is never ``compressible``.
    """
    head = data[:SNIFF]
    media = media_type.split(";")[0].strip()
    if not looks_textual(data):
        return Detection("binary", ProjectionClass.UNSUPPORTED, _binary_format(head))
    kind, detail = _text_kind(head, media, whole=len(data) <= SNIFF)
    if kind in ("base64", "data_uri"):
        return Detection(kind, ProjectionClass.UNSUPPORTED, detail)
    if kind in ("failure", "text") or failed:
        return Detection(kind, ProjectionClass.EXACT_REQUIRED, detail)
    return Detection(kind, ProjectionClass.COMPRESSIBLE, detail)


def _text_kind(head: bytes, media: str, *, whole: bool) -> tuple[str, str | None]:
    stripped = head.lstrip()
    if _DATA_URI.match(stripped):
        return "data_uri", None
    # A JSON media type is a hint, not a proof: a Python repr of rows sent as JSON is text (the
    # JSON projector and queries could not read it).
    json_kind = _json_kind(head, media, whole)
    if json_kind is not None:
        return json_kind, None
    if media in ("text/html", "application/xhtml+xml") or _HTML.match(head):
        return "html", None
    if _is_base64(stripped):
        return "base64", None
    if media in ("text/x-diff", "text/x-patch") or (
        _DIFF_FILE.search(head) and len(_HUNK.findall(head)) >= 2
    ):
        return "diff", None
    if _FAILURE.search(head):
        return "failure", None
    if media in _CODE_MEDIA:
        return "code", _CODE_MEDIA[media]
    lines = [line for line in head.split(b"\n")[:200] if line.strip()]
    if len(head) >= SNIFF and not head.endswith(b"\n"):
        lines = lines[:-1]  # the sniff window may cut the last line
    if len(lines) >= 5 and _ratio(_TIMESTAMP, lines) >= 0.6:
        return "log", None
    searchy = len(lines) >= 5 and _ratio(_SEARCH, lines) >= 0.8 and _few_paths(lines)
    if searchy and media not in ("text/csv", "text/tab-separated-values"):
        return "search", None  # `x.py:3:f(a, b)` lines hold commas alike: not CSV
    delimited = _delimited(head, media)
    if delimited is not None:
        return delimited, None
    if len(lines) >= 5 and _ratio(_LEVEL, lines) >= 0.6:
        return "log", None
    language = _code_language(head, media)
    if language:
        return "code", language
    return "text", None
