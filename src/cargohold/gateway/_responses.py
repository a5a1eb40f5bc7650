"""OpenAI Responses (``POST /v1/responses``)."""

from __future__ import annotations

from cargohold.compact._responses import ResponsesFormat
from cargohold.gateway._openai import DEFAULT_UPSTREAM, error
from cargohold.gateway._provider import Provider

RESPONSES = Provider(
    name="openai-responses",
    suffixes=("/responses",),
    format=ResponsesFormat(),
    default_upstream=DEFAULT_UPSTREAM,
    error=error,
)
