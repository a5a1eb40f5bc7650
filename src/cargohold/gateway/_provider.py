"""What the gateway knows of one provider's API: the paths it rewrites, where the conversation
sits in a request (the compaction formats' slots), and the shape of its errors.

Nothing of a provider's protocol beyond what the rewrite needs: every other field, header and
endpoint passes through as the client sent it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cargohold.compact._model import Format


@dataclass(frozen=True, slots=True)
class Provider:
    """One provider API the gateway rewrites.

    Attributes:
        name: The request format's name, as :meth:`cargohold.Hold.guard` and
            :meth:`cargohold.Hold.compact` take it (``anthropic``, ``openai-chat``,
            ``openai-responses``).
        suffixes: The request paths (their ends, so a base URL with a prefix works) whose
            ``POST`` bodies are rewritten.
        format: Where the tool results and tool inputs sit in a request.
        default_upstream: The provider's own base URL, used when no upstream is configured.
        error: Builds an error body in the provider's own shape from an HTTP status, a
            categorical code and a message (the message never holds content or a credential).
    """

    name: str
    suffixes: tuple[str, ...]
    format: Format
    default_upstream: str
    error: Callable[[int, str, str], bytes]
