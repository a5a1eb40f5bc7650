"""Owner scopes: who an artifact belongs to, and who may read it."""

from __future__ import annotations

from dataclasses import dataclass

from cargohold._errors import InvalidScopeError

_MAX_PART = 256


def check_part(name: str, value: object, *, required: bool) -> None:
    """Raise :class:`InvalidScopeError` unless ``value`` may be the scope part ``name``."""
    if value is None:
        if required:
            raise InvalidScopeError(f"scope {name} is required (no global reads)")
        return
    if not isinstance(value, str):
        raise InvalidScopeError(f"scope {name} must be a string")
    if not value or value != value.strip():
        raise InvalidScopeError(f"scope {name} must be non-empty with no surrounding whitespace")
    if len(value) > _MAX_PART or any(ord(ch) < 0x20 or ch == "\x7f" for ch in value):
        raise InvalidScopeError(
            f"scope {name} must be at most {_MAX_PART} characters, without control characters "
            "(NUL among them)"
        )
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate: what Python makes of bytes that are not UTF-8 in an environment
            # variable or an argument (surrogateescape). No store, event or log can write it.
            raise InvalidScopeError(
                f"scope {name} must be valid UTF-8 text; it holds bytes that are not "
                "(an undecodable environment variable or argument?)"
            ) from None


@dataclass(frozen=True, slots=True)
class Scope:
    """The owner binding stamped on every write and checked on every read.

    ``tenant``, ``user`` and ``session`` are required: a missing part is an error, never a global
    read. Tenants are hard partitions (bytes are deduplicated within a tenant only, and another
    tenant's artifact reads as missing); inside a tenant, an artifact recorded for another
    ``(user, session)`` reads as unauthorized. ``task``, ``worker`` and ``agent`` are attribution:
    recorded on writes, never used to grant or deny a read.

    The ``repr`` names no part of the scope: owner identities never reach logs or models.
    """

    tenant: str
    user: str
    session: str
    task: str | None = None
    worker: str | None = None
    agent: str | None = None

    def __post_init__(self) -> None:
        for name in ("tenant", "user", "session"):
            check_part(name, getattr(self, name), required=True)
        for name in ("task", "worker", "agent"):
            check_part(name, getattr(self, name), required=False)

    @property
    def owner(self) -> tuple[str, str, str]:
        """The owner key, compared as a tuple (never as a concatenated string)."""
        return (self.tenant, self.user, self.session)

    def __repr__(self) -> str:
        return "Scope(<redacted>)"

    __str__ = __repr__
