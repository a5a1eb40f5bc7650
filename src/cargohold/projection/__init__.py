"""Projection: what a stub's preview shows of a body, deterministically and within a budget.

:func:`sniff_media_type` names the media type a body's own bytes prove, for a producer that gave
none. Then two steps: :func:`detect` names the kind and the projection class from the media type
hint and the bytes; :func:`project` renders a preview of at most ``budget`` UTF-8 bytes with the
projector of that kind. Classes (fail-safe):

- ``compressible``: a structure-aware preview (JSON, CSV/TSV, logs, HTML, code, diffs, search
  results);
- ``exact_required``: verbatim excerpts only, head and tail, omitted bytes stated, never a summary
  (errors, stack traces, test failures, unknown text, and anything from a failed call);
- ``bypass``: never projected (recovered context segments);
- ``unsupported``: binary, base64 and data URIs: what the bytes say of themselves, no preview.

A projector that fails, or breaks its budget, falls back to the verbatim head and tail, and the
projection says ``exact_required``: a preview is never over budget and never a guess.
"""

from __future__ import annotations

from collections.abc import Callable

from cargohold._text import utf8_len
from cargohold.projection._binary import describe_base64, describe_binary
from cargohold.projection._code import project_code
from cargohold.projection._csv import project_csv
from cargohold.projection._detect import detect
from cargohold.projection._diff import project_diff
from cargohold.projection._failure import project_failure
from cargohold.projection._html import project_html
from cargohold.projection._json import project_json
from cargohold.projection._log import project_log
from cargohold.projection._model import Builder, Detection, Projection, ProjectionClass
from cargohold.projection._ndjson import project_ndjson
from cargohold.projection._search import project_search
from cargohold.projection._sniff import BINARY_MEDIA_TYPES, sniff_media_type
from cargohold.projection._text import head_tail

Projector = Callable[[bytes, Detection, int], str]
"""``(data, detection, budget) -> preview``: at most ``budget`` UTF-8 bytes, deterministic."""


def _json(data: bytes, found: Detection, budget: int) -> str:
    return project_json(data, budget)


def _log(data: bytes, found: Detection, budget: int) -> str:
    return project_log(data, budget)


PROJECTORS: dict[str, Projector] = {
    "json": _json,
    "log": _log,
    "csv": project_csv,
    "tsv": project_csv,
    "ndjson": project_ndjson,
    "html": project_html,
    "code": project_code,
    "diff": project_diff,
    "search": project_search,
}
"""Structure-aware projectors by kind; kinds without one get the verbatim head and tail."""

UNSUPPORTED_DESCRIBERS: dict[str, Projector] = {
    "binary": describe_binary,
    "base64": describe_base64,
    "data_uri": describe_base64,
}
"""Describers of binary kinds (``binary``, ``base64``, ``data_uri``) by kind."""

EXACT_PROJECTORS: dict[str, Projector] = {"failure": project_failure}
"""Verbatim-excerpt projectors of ``exact_required`` kinds (``failure``)."""


def _describe_binary(data: bytes, found: Detection, budget: int) -> str:
    magic = " ".join(f"{byte:02x}" for byte in data[:16])
    what = found.detail or "unknown"
    return f"{found.kind} ({what}), {len(data):,} bytes; no preview. First bytes: {magic}"


def project(
    data: bytes,
    *,
    media_type: str,
    budget: int,
    failed: bool = False,
    detection: Detection | None = None,
) -> Projection:
    """A preview of ``data`` in at most ``budget`` UTF-8 bytes.

    Args:
        data: The exact stored bytes.
        media_type: The normalized media type hint.
        budget: The preview's byte budget.
        failed: The producing call failed or was cancelled.
        detection: A detection already made for these bytes (saves sniffing twice).
    """
    found = detection or detect(data, media_type=media_type, failed=failed)
    kind, classification = found.kind, found.classification
    table = {
        ProjectionClass.UNSUPPORTED: UNSUPPORTED_DESCRIBERS,
        ProjectionClass.EXACT_REQUIRED: EXACT_PROJECTORS,
        ProjectionClass.COMPRESSIBLE: PROJECTORS,
    }.get(classification, {})
    projector = table.get(kind)
    if classification is ProjectionClass.UNSUPPORTED and projector is None:
        projector = _describe_binary
    preview: str | None = None
    if projector is not None:
        try:
            preview = projector(data, found, budget)
        except (ValueError, TypeError, KeyError, IndexError, RecursionError, MemoryError):
            preview = None  # a projector that cannot read the body never guesses
        if preview is not None and utf8_len(preview) > budget:
            preview = None
    if preview is None:
        if classification is ProjectionClass.UNSUPPORTED:
            preview = _describe_binary(data, found, budget)[:budget]
        else:
            preview = head_tail(data, budget)
            if projector is not None:
                classification = ProjectionClass.EXACT_REQUIRED
    return Projection(kind, classification, preview, found.detail)


__all__ = [
    "BINARY_MEDIA_TYPES",
    "EXACT_PROJECTORS",
    "PROJECTORS",
    "UNSUPPORTED_DESCRIBERS",
    "Builder",
    "Detection",
    "Projection",
    "ProjectionClass",
    "Projector",
    "detect",
    "head_tail",
    "project",
    "sniff_media_type",
]
