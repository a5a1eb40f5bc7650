"""Plain formatting shared by the commands: sizes, times, records as dicts, the media type a
put names, and how to spell a command the user can paste. No rich here."""

from __future__ import annotations

import datetime as dt
import mimetypes
import os
import sys
from typing import Any

from cargohold._records import ArtifactRecord, ReadOutcome
from cargohold._ref import Ref

_UNITS = ("KiB", "MiB", "GiB", "TiB")


def iso_utc(timestamp: float) -> str:
    """``2026-01-02T08:14:03Z``: seconds since the epoch as an ISO 8601 UTC time."""
    moment = dt.datetime.fromtimestamp(timestamp, tz=dt.UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def human_bytes(size: int) -> str:
    """``512 B``, ``47.6 KiB``, ``16.0 MiB``: binary units, one decimal."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in _UNITS:
        value /= 1024
        if value < 1024 or unit == _UNITS[-1]:
            break
    return f"{value:.1f} {unit}"


def record_fields(record: ArtifactRecord, *, now: float) -> dict[str, Any]:
    """What an owner may see of a record, JSON-ready. Never the owner scope nor attribution ids."""
    return {
        "ref": str(record.ref),
        "size": record.size,
        "media_type": record.media_type,
        "kind": record.kind,
        "tool": record.tool,
        "sensitivity": record.sensitivity.value,
        "complete": record.complete,
        "created": iso_utc(record.created),
        "expires": iso_utc(record.expires),
        "expired": record.expires <= now,
        "classification": record.classification,
        "parent": None if record.parent is None else str(record.parent),
    }


def outcome_message(outcome: ReadOutcome, ref: Ref) -> str:
    """The one stderr line for a read that did not resolve. A reference holds no owner or path."""
    texts = {
        ReadOutcome.MISSING: f"no artifact {ref} in this scope (missing)",
        ReadOutcome.UNAUTHORIZED: f"artifact {ref} is not readable in this session (unauthorized)",
        ReadOutcome.STALE: (
            f"the stored bytes of {ref} no longer match its digest (stale); nothing was returned;"
            " run `cargohold verify`"
        ),
        ReadOutcome.EXPIRED: f"artifact {ref} has expired; `cargohold gc` will remove it",
        ReadOutcome.OVER_BUDGET: f"the answer from {ref} is longer than --max-bytes (over budget)",
    }
    return "cargohold: error: " + texts.get(outcome, f"read of {ref} was {outcome.value}")


_COMPRESSED = {
    "gzip": "application/gzip",
    "bzip2": "application/x-bzip2",
    "xz": "application/x-xz",
    "br": "application/x-brotli",
    "compress": "application/x-compress",
}


_BY_SUFFIX = {
    ".log": "text/plain",
    ".out": "text/plain",
    ".err": "text/plain",
    ".txt": "text/plain",
    ".json": "application/json",
    ".jsonl": "application/x-ndjson",
    ".ndjson": "application/x-ndjson",
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".diff": "text/x-diff",
    ".patch": "text/x-diff",
    ".md": "text/markdown",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
    ".py": "text/x-python",
    ".ts": "text/x-typescript",
    ".rs": "text/x-rust",
    ".go": "text/x-go",
}
"""Suffixes of tool output whose type the host's mime.types names wrongly or not at all (``.log``
is unknown to Python; ``.ts`` is a Qt translation and ``.rs`` an XML format on many hosts)."""

_BY_KIND = {
    "log": "text/plain",
    "text": "text/plain",
    "csv": "text/csv",
    "tsv": "text/tab-separated-values",
    "diff": "text/x-diff",
    "patch": "text/x-diff",
    "markdown": "text/markdown",
    "html": "text/html",
    "xml": "application/xml",
    "yaml": "application/yaml",
}
"""``put --kind`` labels that name a text format its bytes cannot prove. JSON is not here: the
bytes prove it or not (a Python ``repr`` is not JSON, whatever its label)."""


def guess_media_type(name: str) -> str | None:
    """The media type a file name suggests, naming the bytes as stored (gzip, not JSON)."""
    lowered = name.lower()
    media_type, encoding = mimetypes.guess_type(lowered, strict=False)
    if encoding is not None:
        # `report.json.gz` holds gzip bytes, not JSON: the media type names the bytes stored.
        return _COMPRESSED.get(encoding, "application/octet-stream")
    dot = lowered.rfind(".")
    return _BY_SUFFIX.get(lowered[dot:], media_type) if dot > lowered.rfind("/") else media_type


def fitting_media_type(data: bytes, *, name: str | None, kind: str | None) -> str:
    """The media type ``put`` stores for bytes given no ``--media-type``.

    In order: the file's name (unless it claims text and the bytes are not: a ``.log`` that
    holds gzip); for bytes that are not text, their magic number; for text, a ``--kind`` that
    names a text format (``log``, ``csv``, ``diff``...), else what the bytes prove (JSON,
    NDJSON), else ``text/plain``. ``application/octet-stream`` only for binary of no known
    format.

    The sniffer (:func:`cargohold.projection.sniff_media_type`) is imported only when the name
    says nothing and the bytes are binary or start as JSON does: importing the projectors costs
    a put about as much again as its whole start-up.
    """
    from cargohold._text import looks_textual  # already loaded by the store

    textual = looks_textual(data)
    guessed = guess_media_type(name) if name is not None else None
    if guessed is not None and (textual or not guessed.startswith("text/")):
        return guessed
    if textual and kind is not None and kind.strip().lower() in _BY_KIND:
        return _BY_KIND[kind.strip().lower()]
    if textual and data.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")[:1] not in (b"{", b"["):
        # The sniffer names no text but JSON and NDJSON, which start so: a log or a CSV from
        # stdin need not import it.
        return "text/plain" if data else "application/octet-stream"
    from cargohold.projection import sniff_media_type

    sniffed = sniff_media_type(data)
    if sniffed is not None:
        return sniffed
    return "text/plain" if textual and data else "application/octet-stream"


def program() -> str:
    """How to run this same ``cargohold`` again from the user's shell, pasted as printed.

    ``make demo`` runs ``.venv/bin/cargohold``, which is not on ``PATH``: a suggestion that says
    plain ``cargohold`` would fail when pasted. The script's own path is given instead (relative
    to the working directory when it lies below it), unless ``cargohold`` on ``PATH`` is this
    very script.
    """
    import shlex  # only when a command is suggested: not at every start of `put`
    import shutil

    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) != "cargohold" or not os.path.isfile(argv0):
        return "cargohold"  # run some other way (python -m, a test runner): the usual name
    found = shutil.which("cargohold")
    if found is not None and os.path.samefile(found, argv0):
        return "cargohold"
    path = os.path.abspath(argv0)
    relative = os.path.relpath(path)
    shown = relative if not relative.startswith("..") else path
    if os.sep not in shown:
        shown = os.path.join(".", shown)  # a bare name would be looked up on PATH
    return shlex.quote(shown)
