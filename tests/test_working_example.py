"""examples/orchestrator_handoff.py, executed: a primary delegates to two workers (one passes
with a huge log, one fails a test run), consolidates and checkpoints, and a new primary process
takes over and reads the same evidence by reference."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "orchestrator_handoff.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, Path]:
    workdir = tmp_path_factory.mktemp("orchestrator")
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), str(workdir)],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("RESULT ")
    return json.loads(last.removeprefix("RESULT ")), done.stdout, workdir


def test_the_example_delegates_to_a_passing_and_a_failing_worker_and_keeps_both_visible(
    run: tuple[dict[str, Any], str, Path],
) -> None:
    facts, stdout, _ = run

    assert facts["statuses"] == ["passed", "failed"]
    assert facts["associations"] == ["call-build", "call-test"]
    assert all(size <= 4096 for size in facts["projection_bytes"])
    assert "status failed" in stdout
    assert "errors: 1 (test 1)" in stdout


def test_the_example_consolidates_only_what_the_primary_accepts(
    run: tuple[dict[str, Any], str, Path],
) -> None:
    facts, _, _ = run

    # the passing worker's proposal is applied; the failed one's ("tests": "green") is not
    assert facts["state"] == {"blocked_by": "tester", "build": "green", "release": "42"}


def test_the_examples_checkpoint_holds_no_byte_of_either_output(
    run: tuple[dict[str, Any], str, Path],
) -> None:
    facts, _, _ = run

    data = Path(facts["checkpoint"]).read_bytes()

    for distinctive in (b"compiled module_", b"INFO build step", b"assert refund(order, 5)"):
        assert distinctive not in data
    for ref in facts["refs"]:
        assert ref.encode() in data


def test_the_new_primary_process_reads_the_same_evidence_by_reference_without_writing(
    run: tuple[dict[str, Any], str, Path],
) -> None:
    facts, stdout, _ = run
    taken = facts["take_over"]

    assert taken["refs"] == facts["refs"]
    assert taken["statuses"] == ["passed", "failed"]
    assert taken["available"] == ["resolved"] * 3
    assert taken["grep_outcome"] == "resolved"
    assert taken["grep_found"]
    assert taken["digest_matches"]
    assert facts["projections_identical"]
    before, after = taken["usage"]
    assert before == after == facts["usage_before_handoff"]
    assert "== the new primary's brief ==" in stdout


README = Path(__file__).resolve().parent.parent / "README.md"


def test_the_readmes_working_context_example_runs_as_printed() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    (block,) = [b for b in blocks if "WorkingContext" in b]
    out = io.StringIO()

    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {"__name__": "__readme__"})

    printed = out.getvalue()
    assert printed.startswith("failed artifact://sha256/")
    assert "[cargohold:worker-result] #1 worker tester | status failed" in printed
    assert "errors: 1 (test 1)" in printed
