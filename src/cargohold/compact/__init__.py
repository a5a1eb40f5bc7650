"""Lossless compaction: old tool results of a long conversation become compact stubs.

Every major platform clears old tool results from a long agent run, and all of them lose the
result. Here a cleared result is stored first (the same store, scope, TTL and credential
policy as any offload) and replaced by a compact stub that keeps its reference, the tool's
name and the call's id; ``artifact_search`` finds it again and the read tools return it byte
for byte. Deterministic and prompt-cache friendly: see :mod:`cargohold.compact._engine`.

Use it through the hold::

    compacted, report = hold.compact(request, format="anthropic")
    compacted, report = hold.compact(messages, format="langchain",
                                     policy=cargohold.CompactionPolicy(trigger_tokens=50_000))
"""

from cargohold.compact._engine import CompactionReport, compact_request
from cargohold.compact._policy import CompactionPolicy

__all__ = ["CompactionPolicy", "CompactionReport", "compact_request"]
