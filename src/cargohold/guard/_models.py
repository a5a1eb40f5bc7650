"""Context windows of common models, matched by the longest prefix of the model name.

Dated snapshots (``gpt-4o-2024-08-06``, ``claude-sonnet-4-5-20250929``) and provider prefixes
(``openai/gpt-4.1``, ``anthropic/claude-opus-4-1``) resolve to their family. The table is a
starting point, not an authority: providers change windows and some offer larger ones on request
(Anthropic's 1M-token beta for Sonnet 4 and 4.5), so a caller's mapping always wins. Windows count
o200k tokens here; a provider with its own tokenizer (Claude 5 counts about 30% more for the same
text) is approximated, so leave a margin.
"""

from __future__ import annotations

from collections.abc import Mapping

from cargohold._errors import UsageError

MODEL_WINDOWS: Mapping[str, int] = {
    # OpenAI
    "gpt-3.5-turbo": 16_385,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-4.5": 128_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "gpt-5": 400_000,
    "gpt-5-chat": 128_000,
    # Anthropic
    "claude-2": 100_000,
    "claude-3": 200_000,
    "claude-3-5": 200_000,
    "claude-3-7": 200_000,
    "claude-haiku-4": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-sonnet-4-6": 1_000_000,
    "claude-opus-4": 200_000,
    "claude-opus-4-6": 1_000_000,
    "claude-opus-4-7": 1_000_000,
    "claude-opus-4-8": 1_000_000,
    "claude-haiku-5": 1_000_000,
    "claude-sonnet-5": 1_000_000,
    "claude-opus-5": 1_000_000,
    "claude-fable-5": 1_000_000,
}
"""Model-name prefix -> context window in tokens (input and output together)."""


def window_for(model: str, overrides: Mapping[str, int] | None = None) -> int | None:
    """The context window of ``model``, or ``None`` when neither table knows it.

    ``overrides`` (the caller's mapping, same prefix rules) is consulted first; within a table the
    longest matching prefix wins. A prefix matches at a name boundary (``-``, ``.``, ``:``, ``@``)
    only: ``o1`` matches ``o1-2024-12-17`` and ``gpt-5`` matches ``gpt-5.1``, but ``o1`` does not
    match ``o10``.
    """
    name = model.strip().lower().rsplit("/", 1)[-1]
    for table in (overrides or {}, MODEL_WINDOWS):
        best: str | None = None
        for prefix in table:
            key = prefix.lower()
            if (name == key or name.startswith((key + "-", key + ".", key + ":", key + "@"))) and (
                best is None or len(key) > len(best)
            ):
                best = key
        if best is not None:
            window = next(v for k, v in table.items() if k.lower() == best)
            if isinstance(window, bool) or not isinstance(window, int) or window < 1:
                raise UsageError("a model's context window is a positive number of tokens")
            return window
    return None
