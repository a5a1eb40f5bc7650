"""Canonical artifact references: ``artifact://sha256/<64 lowercase hex>``."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from cargohold._errors import InvalidReferenceError

PREFIX = "artifact://sha256/"
_DIGEST = re.compile(r"[0-9a-f]{64}")
_REF = re.compile(r"artifact://sha256/([0-9a-f]{64})")


@dataclass(frozen=True, slots=True)
class Ref:
    """A content-addressed reference to stored bytes.

    The digest is the SHA-256 of the exact bytes stored. A reference never holds a path, an owner
    or content, so it may appear anywhere, including in a model's context, where it is inert.

    Attributes:
        digest: 64 lowercase hex characters.
    """

    digest: str

    def __post_init__(self) -> None:
        if not isinstance(self.digest, str) or _DIGEST.fullmatch(self.digest) is None:
            raise InvalidReferenceError("a digest is exactly 64 lowercase hex characters")

    @classmethod
    def parse(cls, text: str) -> Ref:
        """Parse the canonical form exactly; anything else is an error.

        Raises:
            InvalidReferenceError: upper case, another prefix or algorithm, another length,
                path pieces, surrounding whitespace, or a non-string.
        """
        if not isinstance(text, str):
            raise InvalidReferenceError("a reference is a string")
        match = _REF.fullmatch(text)
        if match is None:
            raise InvalidReferenceError(
                "not a canonical reference: expected artifact://sha256/ and 64 lowercase hex"
            )
        return cls(match.group(1))

    @classmethod
    def of(cls, data: bytes) -> Ref:
        """The reference of ``data``: its SHA-256."""
        return cls(hashlib.sha256(data).hexdigest())

    def __str__(self) -> str:
        return PREFIX + self.digest


def is_ref(text: str) -> bool:
    """Whether ``text`` is exactly a canonical reference."""
    return isinstance(text, str) and _REF.fullmatch(text) is not None
