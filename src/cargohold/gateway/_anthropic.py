"""Anthropic Messages (``POST /v1/messages`` and ``/v1/messages/count_tokens``)."""

from __future__ import annotations

import json

from cargohold.compact._anthropic import AnthropicFormat
from cargohold.gateway._provider import Provider

# The error types the Anthropic API documents, by HTTP status; the SDK maps them to its classes.
_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error(status: int, code: str, message: str) -> bytes:
    """An Anthropic error body: ``{"type": "error", "error": {"type", "message"}}``.

    The categorical ``code`` goes in the message's first words (the API's shape has no code
    field), so a person reading it knows it is the gateway's, not the provider's.
    """
    kind = _TYPES.get(status, "api_error")
    body = {
        "type": "error",
        "error": {"type": kind, "message": f"cargohold gateway ({code}): {message}"},
    }
    return json.dumps(body).encode()


ANTHROPIC = Provider(
    name="anthropic",
    suffixes=("/messages", "/messages/count_tokens"),
    format=AnthropicFormat(),
    default_upstream="https://api.anthropic.com",
    error=error,
)
