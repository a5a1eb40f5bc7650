"""Media type sniffing: the type a body's own bytes prove, for a producer that named none.

Conservative by contract: a media type is returned only where the bytes leave no doubt (a
format's magic number; a body that parses as JSON, or whose every line does), and ``None``
otherwise, so a caller keeps its own default (``text/plain`` or ``application/octet-stream``)
rather than a guess. Delimited text, logs and code are never named here: their kinds are a
projection's judgement (:func:`cargohold.projection.detect`), not a property of the bytes.
"""

from __future__ import annotations

import json

import simdjson

from cargohold._text import looks_textual
from cargohold.projection._detect import SNIFF, _binary_format

BINARY_MEDIA_TYPES: dict[str, str] = {
    "png": "image/png",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
    "pdf": "application/pdf",
    "gzip": "application/gzip",
    "zip": "application/zip",
    "bzip2": "application/x-bzip2",
    "xz": "application/x-xz",
    "zstd": "application/zstd",
    "sqlite": "application/vnd.sqlite3",
    "elf": "application/x-elf",
}
"""The media type of each binary format :func:`detect` names by its magic number."""

_JSON_FALLBACK_MAX = 4 * 1024 * 1024
"""Largest body the standard library re-parses when simdjson cannot (integers past 64 bits)."""


def _reject_constant(name: str) -> object:
    raise ValueError("NaN and Infinity are not JSON")


def _is_json(data: bytes) -> bool:
    """Whether ``data`` is one whole JSON document (RFC 8259; a UTF-8 BOM allowed).

    A string escaping a lone surrogate (``"\\ud800"``) does not count: neither simdjson nor
    orjson, which the JSON projector and queries read with, accepts it.
    """
    body = data.removeprefix(b"\xef\xbb\xbf")
    try:
        simdjson.Parser().parse(body)
    except (ValueError, RuntimeError) as exc:
        # simdjson refuses integers past 64 bits, which JSON allows: ask the standard library
        # then, within bounded memory. Its other errors (structure, strings) are final.
        if not str(exc).startswith(("NUMBER_ERROR", "BIGINT_ERROR")):
            return False
        if len(body) > _JSON_FALLBACK_MAX:
            return False
        try:
            json.loads(body, parse_constant=_reject_constant)
        except (ValueError, RecursionError):  # nested past the interpreter's stack: not proven
            return False
    return True


def _is_ndjson(data: bytes) -> bool:
    """Whether ``data`` holds two or more lines, each one JSON object (blank lines allowed)."""
    lines = [line for line in data.split(b"\n") if line.strip()]
    if len(lines) < 2 or not all(line.lstrip()[:1] == b"{" for line in lines):
        return False
    # One array of the lines parses them all in one C-speed step; as many elements as lines
    # means no line held two values or half of one.
    try:
        values = simdjson.Parser().parse(b"[" + b",".join(lines) + b"]")
    except (ValueError, RuntimeError):
        return False
    return isinstance(values, simdjson.Array) and len(values) == len(lines)


def sniff_media_type(data: bytes) -> str | None:
    """The media type ``data`` proves of itself, or ``None`` when the bytes leave doubt.

    Binary formats by their magic number (PNG, JPEG, GIF, WebP, PDF, gzip, zip, bzip2, xz,
    zstd, SQLite, ELF); ``application/json`` for a body that parses whole as JSON (a Python
    ``repr`` with single quotes or ``None`` does not); ``application/x-ndjson`` for two or more
    lines that are each a JSON object. Anything else, text or binary, is ``None``: the caller's
    default stands. Deterministic, no model call; JSON costs one parse of the body.

    Args:
        data: The exact bytes.
    """
    if not data:
        return None
    if not looks_textual(data):
        return BINARY_MEDIA_TYPES.get(_binary_format(data[:SNIFF]))
    start = data.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")[:1]
    if start not in (b"{", b"["):
        return None
    if _is_json(data):
        return "application/json"
    if _is_ndjson(data):
        return "application/x-ndjson"
    return None
