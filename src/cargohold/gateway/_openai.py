"""OpenAI's error shape, shared by Chat Completions and Responses."""

from __future__ import annotations

import json

_TYPES = {400: "invalid_request_error", 413: "invalid_request_error", 404: "not_found_error"}


def error(status: int, code: str, message: str) -> bytes:
    """An OpenAI error body: ``{"error": {"message", "type", "param", "code"}}``."""
    kind = _TYPES.get(status, "server_error")
    body = {
        "error": {
            "message": f"cargohold gateway: {message}",
            "type": kind,
            "param": None,
            "code": code,
        }
    }
    return json.dumps(body).encode()


DEFAULT_UPSTREAM = "https://api.openai.com"
