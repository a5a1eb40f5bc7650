"""The compaction replay benchmark's invariants, on a short run (the figures are the bench's).

Whatever the figures come to, compaction loses no byte (every result it cleared reads back
exactly through ``artifact_read``), offloading never raises the peak and compaction never
raises it further, an arm that only appends never breaks the prompt cache's prefix, and the
same seed gives the same run and the same counts.
"""

from __future__ import annotations

from typing import Any

import pytest
from bench.compaction import Figures, Turn, build_run, replay

KiB = 1024
# Short: 20 turns of results up to 256 KiB, with a trigger the run crosses more than once.
TURNS = 20
MAX_RESULT_BYTES = 256 * KiB
TRIGGER = 20_000
CLEAR_AT_LEAST = 5_000


def _replay(seed: int = 24) -> Figures:
    run = build_run(TURNS, seed=seed, max_result_bytes=MAX_RESULT_BYTES)
    return replay(run, trigger_tokens=TRIGGER, clear_at_least=CLEAR_AT_LEAST)


def _counts(figures: Figures) -> dict[str, Any]:
    found = figures.as_dict()
    for arm in found["arms"]:
        del arm["seconds"]  # the one figure that depends on the machine
    return found


@pytest.fixture(scope="module")
def figures() -> Figures:
    return _replay()


def test_every_result_compaction_cleared_reads_back_byte_exact(figures: Figures) -> None:
    compacted = figures.arms["c"]

    assert compacted.cleared > 0  # the short run does compact: the check is not vacuous
    assert compacted.read_back == compacted.cleared
    assert compacted.bytes_lost == 0


def test_offload_lowers_the_peak_and_compaction_lowers_it_no_further_than_offload_allows(
    figures: Figures,
) -> None:
    nothing, offload, compacted = (figures.arms[name] for name in ("a", "b", "c"))

    assert nothing.peak_tokens >= offload.peak_tokens >= compacted.peak_tokens
    assert nothing.total_tokens >= offload.total_tokens >= compacted.total_tokens


def test_arms_that_only_append_never_break_the_prefix(figures: Figures) -> None:
    assert figures.arms["a"].prefix_breaks == 0
    assert figures.arms["b"].prefix_breaks == 0
    # Compaction breaks it where it compacts, and only there.
    assert figures.arms["c"].compactions > 0
    assert figures.arms["c"].prefix_breaks == figures.arms["c"].compactions


def test_every_arm_measures_every_turn(figures: Figures) -> None:
    assert {arm.requests for arm in figures.arms.values()} == {TURNS}


def test_the_same_seed_gives_the_same_run_and_the_same_counts(figures: Figures) -> None:
    first = build_run(TURNS, seed=24, max_result_bytes=MAX_RESULT_BYTES)
    again = build_run(TURNS, seed=24, max_result_bytes=MAX_RESULT_BYTES)

    assert first == again
    assert [turn.text for turn in first] == [turn.text for turn in again]
    assert _counts(_replay()) == _counts(figures)


def test_the_run_holds_small_and_heavy_results_repeated_reads_and_errors() -> None:
    run = build_run(120, seed=24)
    sizes = [len(turn.text.encode("utf-8")) for turn in run]

    assert min(sizes) >= 2 * KiB
    assert max(sizes) <= 2 * 1024 * KiB
    assert any(size < 32 * KiB for size in sizes)
    assert any(size >= 256 * KiB for size in sizes)
    assert any(turn.repeat_of is not None for turn in run)
    assert any(turn.is_error for turn in run)


def test_a_cleared_result_that_does_not_read_back_as_the_tool_returned_it_counts_as_lost() -> None:
    # The default secrets policy stores a result with its credential redacted: what reads back
    # is not what the tool returned, and the benchmark must say so rather than count it exact.
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    run = [
        Turn(
            f"toolu_{index:03d}",
            "read_file",
            {"part": index},
            "".join(f"part {index} line {line}: value {line * index}\n" for line in range(200))
            + (f"token = {token}\n" if index == 0 else ""),
        )
        for index in range(8)
    ]

    compacted = replay(run, trigger_tokens=3_000, clear_at_least=1_000).arms["c"]

    assert compacted.cleared >= 2
    assert compacted.read_back == compacted.cleared - 1
    assert compacted.bytes_lost == len(run[0].text.encode("utf-8"))
