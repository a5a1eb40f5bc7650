"""Authority files (JSON or TOML) as an :class:`~cargohold.envelopes.AuthoritySource`."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cargohold.envelopes._authority import Authority, AuthorityError

MAX_AUTHORITY_BYTES = 16 * 1024 * 1024
"""The largest authority file read; a larger one is refused, not read whole."""


def parse_authority(data: Mapping[str, Any]) -> Authority:
    """Validate a decoded authority document (the top-level JSON object or TOML table).

    Raises:
        AuthorityError: the document does not follow the format, or its records disagree.
    """
    from cargohold.envelopes._schema import parse_authority as parse

    return parse(data)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise AuthorityError("invalid authority: a key is given twice in one object")
        result[key] = value
    return result


def _no_constant(name: str) -> Any:
    raise AuthorityError("invalid authority: NaN and Infinity are not JSON")


def decode_authority(data: bytes, *, kind: str | None = None) -> Authority:
    """Decode and validate the bytes of an authority file.

    Args:
        data: The file's bytes (UTF-8).
        kind: ``"json"`` or ``"toml"``; ``None`` guesses: JSON when the first non-blank
            character is ``{``, else TOML.

    Raises:
        AuthorityError: not UTF-8, not JSON or TOML, or not a valid authority.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthorityError("invalid authority: the file is not UTF-8 text") from None
    if kind is None:
        kind = "json" if text.lstrip().startswith("{") else "toml"
    document: Any
    if kind == "json":
        try:
            document = json.loads(
                text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant
            )
        except json.JSONDecodeError as exc:
            raise AuthorityError(
                f"invalid authority: not JSON (line {exc.lineno}, column {exc.colno})"
            ) from None
    elif kind == "toml":
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            raise AuthorityError("invalid authority: not TOML") from None
    else:
        raise AuthorityError("an authority file is JSON or TOML")
    if not isinstance(document, Mapping):
        raise AuthorityError("invalid authority: the document is a table / object")
    return parse_authority(document)


def load_authority(path: str | os.PathLike[str]) -> Authority:
    """Read and validate an authority file: ``.json`` is JSON, ``.toml`` is TOML, else guessed.

    Raises:
        AuthorityError: the file cannot be read, is too large, or is not a valid authority.
    """
    target = Path(path)
    try:
        with target.open("rb") as handle:
            data = handle.read(MAX_AUTHORITY_BYTES + 1)
    except OSError as exc:
        # The file is the caller's own; the OS text (its strerror) names no store path.
        reason = exc.strerror or type(exc).__name__
        raise AuthorityError(f"cannot read the authority file: {reason}") from None
    if len(data) > MAX_AUTHORITY_BYTES:
        raise AuthorityError(f"the authority file is over {MAX_AUTHORITY_BYTES} bytes")
    suffix = target.suffix.lower()
    kind = {".json": "json", ".toml": "toml"}.get(suffix)
    return decode_authority(data, kind=kind)


class FileAuthority:
    """An :class:`~cargohold.envelopes.AuthoritySource` reading one JSON or TOML file.

    The file is read again on every :meth:`load`, so a check always sees its current state.

    Args:
        path: The authority file.
    """

    __slots__ = ("_path",)

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)

    def __repr__(self) -> str:
        return "FileAuthority(...)"

    def load(self) -> Authority:
        """Read and validate the file now."""
        return load_authority(self._path)
