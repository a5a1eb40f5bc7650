"""The compaction policy: when old tool results are cleared, and which."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cargohold._errors import UsageError

DEFAULT_TRIGGER_TOKENS = 100_000
DEFAULT_KEEP_LAST = 3
DEFAULT_CLEAR_AT_LEAST = 20_000
DEFAULT_MIN_RESULT_BYTES = 1024


def _count(name: str, value: object, *, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        shape = "a positive integer" if least > 0 else "an integer of 0 or more"
        raise UsageError(f"CompactionPolicy.{name} must be {shape}")
    return value


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When a conversation's old tool results are cleared, and which (see
    :meth:`cargohold.Hold.compact`).

    The defaults are Anthropic's ``clear_tool_uses_20250919`` and LangChain's
    ``ClearToolUsesEdit`` (trigger 100,000 tokens, keep 3), with a ``clear_at_least`` of
    their own (below). Configured as ``compaction_*`` keys of ``cargohold.toml`` or
    ``CARGOHOLD_COMPACTION_*`` (:meth:`from_settings`); per agent, give a policy to
    :meth:`cargohold.Hold.compact`.

    Raises:
        UsageError: a count that is not an integer in range, a tool name that is not a
            non-empty string.
    """

    trigger_tokens: int = DEFAULT_TRIGGER_TOKENS
    """Compact once the conversation's estimated tokens reach this (the edge guard's estimate
    of each message)."""
    keep_last: int = DEFAULT_KEEP_LAST
    """The most recent tool results that are never cleared (0: clear up to the newest)."""
    clear_at_least: int = DEFAULT_CLEAR_AT_LEAST
    """The least a compaction may save, in estimated tokens; below it nothing is cleared.

    A compaction breaks the provider's prompt cache once, at the oldest result it clears:
    what stays behind that point is written to the cache again (Anthropic: 1.25 times the
    input price, against 0.1 for a cached read) and each later request reads ``X`` fewer
    tokens. With a kept tail of about 10,000 tokens behind the break (three results of
    12-30 KB and their turns) the write costs about 11,500 token-equivalents more than
    reading on; clearing ``X`` = 20,000 saves 2,000 of them per later cached request, so the
    compaction has paid for itself after about five requests (10,000 would need ten, 5,000
    twenty-two). It also keeps a conversation that stays over the trigger after a compaction
    (a large system prompt, large kept results) from breaking the cache on every turn for a
    few hundred tokens each time: the next compaction waits until 20,000 are clearable.
    """
    exclude_tools: frozenset[str] = field(default_factory=frozenset)
    """Tools whose results (and inputs) are never cleared."""
    clear_tool_inputs: bool = False
    """Clear the arguments of the calls whose results are cleared too (stored first, as the
    results are), when they are at least ``min_result_bytes``."""
    min_result_bytes: int = DEFAULT_MIN_RESULT_BYTES
    """Results (and inputs) smaller than this stay as they are: a compact stub takes up to
    512 bytes, so the default, 1 KiB, clears only what its stub at least halves. A result no
    larger than its stub is never cleared, whatever this says."""

    def __post_init__(self) -> None:
        _count("trigger_tokens", self.trigger_tokens, least=1)
        _count("keep_last", self.keep_last, least=0)
        _count("clear_at_least", self.clear_at_least, least=0)
        _count("min_result_bytes", self.min_result_bytes, least=0)
        if not isinstance(self.clear_tool_inputs, bool):
            raise UsageError("CompactionPolicy.clear_tool_inputs must be true or false")
        tools: object = self.exclude_tools
        if isinstance(tools, str) or not isinstance(tools, Iterable):
            raise UsageError("CompactionPolicy.exclude_tools must be a set of tool names")
        names = tuple(tools)
        if not all(isinstance(name, str) and name for name in names):
            raise UsageError("CompactionPolicy.exclude_tools must be a set of tool names")
        object.__setattr__(self, "exclude_tools", frozenset(names))

    @classmethod
    def from_settings(cls, settings: Any) -> CompactionPolicy:
        """The policy the ``compaction_*`` settings of a :class:`cargohold.Settings` name."""
        return cls(
            trigger_tokens=settings.compaction_trigger_tokens,
            keep_last=settings.compaction_keep_last,
            clear_at_least=settings.compaction_clear_at_least,
            exclude_tools=frozenset(settings.compaction_exclude_tools),
            clear_tool_inputs=settings.compaction_clear_tool_inputs,
            min_result_bytes=settings.compaction_min_result_bytes,
        )

    def as_dict(self) -> Mapping[str, object]:
        """The policy as JSON-ready data (the tools sorted)."""
        return {
            "trigger_tokens": self.trigger_tokens,
            "keep_last": self.keep_last,
            "clear_at_least": self.clear_at_least,
            "exclude_tools": sorted(self.exclude_tools),
            "clear_tool_inputs": self.clear_tool_inputs,
            "min_result_bytes": self.min_result_bytes,
        }
