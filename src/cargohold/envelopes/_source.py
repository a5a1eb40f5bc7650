"""Authority files (JSON or TOML) as an :class:`~cargohold.envelopes.AuthoritySource`."""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import tempfile
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cargohold.envelopes._authority import Authority, AuthorityError

if TYPE_CHECKING:
    from cargohold.envelopes._envelope import Envelope

MAX_AUTHORITY_BYTES = 16 * 1024 * 1024
"""The largest authority file read; a larger one is refused, not read whole."""
MAX_AUTHORITY_DEPTH = 32
"""The deepest nesting of objects (tables) and arrays an authority document may have. The
format nests six levels (document, records, a task, its steps, a step, its requirements); a deeper
document is refused before any recursive walk of it, so no depth escapes as a RecursionError."""

# One refusal whether the parser or the walk met the depth: how deep a recursive parser gets
# depends on the caller's stack, the refusal does not.
_TOO_DEEP = (
    f"invalid authority: arrays or objects nest deeper than {MAX_AUTHORITY_DEPTH} levels "
    "(an authority nests a few)"
)


def nested_deeper_than(value: object, limit: int) -> bool:
    """Whether ``value`` holds dicts, mappings, lists or tuples nested more than ``limit`` deep.

    The walk is iterative and stops at the first container past ``limit``, so neither a
    100,000-deep value nor a value that contains itself exhausts the interpreter's recursion
    limit (a cycle only ever goes deeper). The value itself is level 1.
    """
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping):
            children: Iterable[object] = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if level > limit:
            return True
        stack.extend(
            (child, level + 1) for child in children if isinstance(child, Mapping | list | tuple)
        )
    return False


def parse_authority(data: Mapping[str, Any]) -> Authority:
    """Validate a decoded authority document (the top-level JSON object or TOML table).

    Raises:
        AuthorityError: the document does not follow the format, its records disagree, or its
            arrays and objects nest deeper than :data:`MAX_AUTHORITY_DEPTH` levels (a value
            that contains itself among them).
    """
    from cargohold.envelopes._schema import parse_authority as parse

    if nested_deeper_than(data, MAX_AUTHORITY_DEPTH):
        raise AuthorityError(_TOO_DEEP)
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
        AuthorityError: not UTF-8, not JSON or TOML, nested deeper than
            :data:`MAX_AUTHORITY_DEPTH` levels (at any depth: a document nested past what the
            parser recurses is this error too, never a RecursionError), or not a valid authority.
    """
    return parse_authority(_decode_document(data, kind))


def _decode_document(data: bytes, kind: str | None) -> Mapping[str, Any]:
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
        except RecursionError:  # the decoder recurses once per nested array or object
            raise AuthorityError(_TOO_DEEP) from None
    elif kind == "toml":
        try:
            document = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            raise AuthorityError("invalid authority: not TOML") from None
        except RecursionError:  # the parser recurses once per nested array or inline table
            raise AuthorityError(_TOO_DEEP) from None
    else:
        raise AuthorityError("an authority file is JSON or TOML")
    if not isinstance(document, Mapping):
        raise AuthorityError("invalid authority: the document is a table / object")
    return document


def _kind_of(path: Path) -> str | None:
    return {".json": "json", ".toml": "toml"}.get(path.suffix.lower())


def _read_file(target: Path) -> bytes:
    try:
        with target.open("rb") as handle:
            data = handle.read(MAX_AUTHORITY_BYTES + 1)
    except OSError as exc:
        # The file is the caller's own; the OS text (its strerror) names no store path.
        reason = exc.strerror or type(exc).__name__
        raise AuthorityError(f"cannot read the authority file: {reason}") from None
    if len(data) > MAX_AUTHORITY_BYTES:
        raise AuthorityError(f"the authority file is over {MAX_AUTHORITY_BYTES} bytes")
    return data


def load_authority(path: str | os.PathLike[str]) -> Authority:
    """Read and validate an authority file: ``.json`` is JSON, ``.toml`` is TOML, else guessed.

    Raises:
        AuthorityError: the file cannot be read, is too large, or is not a valid authority.
    """
    target = Path(path)
    return decode_authority(_read_file(target), kind=_kind_of(target))


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

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # A lock file beside the authority, never the authority itself: the write replaces
        # the authority's inode, and a lock on a replaced inode excludes nobody.
        lock = self._path.with_name(f".{self._path.name}.lock")
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise AuthorityError(f"cannot lock the authority file: {reason}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def transition(
        self,
        envelope: Envelope | bytes | str,
        update: Callable[[dict[str, Any]], Mapping[str, Any]],
    ) -> Authority:
        """Compare and swap: write ``update(document)`` only if ``envelope`` still holds.

        Under an exclusive lock held from the check to the write, the file is read, the packet
        is checked against it, and only if it is ``ready`` is ``update`` called with a copy of
        the authority document; its result is validated and written atomically (a temporary
        file, fsync, rename). Whoever moved a binding between an earlier check and this call
        makes the transition fail, and the file is left as it is. Every writer of the file
        must go through ``transition`` for the lock to mean anything.

        Args:
            envelope: The packet authorizing the transition.
            update: Returns the new authority document (the decoded JSON object); it should
                bump the revision of every record it changes.

        Returns:
            The authority as written.

        Raises:
            ContextNotReadyError: the packet is not ready against the file as it is now
                (nothing is written).
            AuthorityError: the file is not a JSON authority, or the update is not a valid one.
            EnvelopeError: ``envelope`` is not a valid packet document.
        """
        from cargohold.envelopes._envelope import Envelope, check_envelope

        parsed = envelope if isinstance(envelope, Envelope) else Envelope.parse(envelope)
        if _kind_of(self._path) == "toml":
            raise AuthorityError("a transition rewrites the authority as JSON: use a .json file")
        with self._locked():
            document = _decode_document(_read_file(self._path), "json")
            check_envelope(parsed, parse_authority(document)).raise_for_outcome()
            changed = update(copy.deepcopy(dict(document)))
            authority = parse_authority(changed)
            body = json.dumps(changed, indent=2, ensure_ascii=False).encode("utf-8") + b"\n"
            self._replace(body)
        return authority

    def _replace(self, body: bytes) -> None:
        try:
            self._write(body)
        except OSError as exc:
            # The file is the caller's own; the OS text (its strerror) names no store path.
            reason = exc.strerror or type(exc).__name__
            raise AuthorityError(f"cannot write the authority file: {reason}") from None

    def _write(self, body: bytes) -> None:
        directory = self._path.parent
        mode = os.stat(self._path).st_mode & 0o777
        fd, staged = tempfile.mkstemp(prefix=f".{self._path.name}.", dir=directory)
        try:
            os.fchmod(fd, mode)  # the authority keeps its permissions
            with os.fdopen(fd, "wb") as handle:
                handle.write(body)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(staged, self._path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(staged)
            raise
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
