"""What one rewrite did, as figures (no content)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class RewriteCounts:
    """What one rewrite did (no content): the figures of a request, for its log line.

    Attributes:
        offloaded: Slots stored and replaced by a stub on this request.
        reused: Slots replaced by the stub of an earlier turn, without projecting again.
        bytes_kept_out: Bytes of the replaced slots.
        tokens_kept_out: Estimated tokens of the replaced slots (each slot's offload decision's
            estimate, the same on a turn that reuses its stub).
        compacted: Results the compaction cleared.
        screened: Inline slots forwarded with their credentials redacted or masked, or
            withheld (their tool's secrets policy).
        unstored: Heavy slots the offloader did not store (rejected, or the store failed):
            forwarded as its bounded notice, and decided again on the next turn.
    """

    offloaded: int = 0
    reused: int = 0
    bytes_kept_out: int = 0
    tokens_kept_out: int = 0
    compacted: int = 0
    screened: int = 0
    unstored: int = 0

    def add(self, other: RewriteCounts) -> None:
        """Add ``other``'s figures to these (a running total of requests)."""
        self.offloaded += other.offloaded
        self.reused += other.reused
        self.bytes_kept_out += other.bytes_kept_out
        self.tokens_kept_out += other.tokens_kept_out
        self.compacted += other.compacted
        self.screened += other.screened
        self.unstored += other.unstored
