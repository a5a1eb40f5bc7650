"""OpenAI Chat Completions (``POST /v1/chat/completions``)."""

from __future__ import annotations

from cargohold.compact._chat import ChatFormat
from cargohold.gateway._openai import DEFAULT_UPSTREAM, error
from cargohold.gateway._provider import Provider

CHAT = Provider(
    name="openai-chat",
    suffixes=("/chat/completions",),
    format=ChatFormat(),
    default_upstream=DEFAULT_UPSTREAM,
    error=error,
)
