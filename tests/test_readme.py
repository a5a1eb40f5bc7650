"""The README's Python example runs as printed, on the embedded default store."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_python_example_runs_and_offloads_then_reads_back() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks, "the README has no Python example"
    out = io.StringIO()

    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], "README.md", "exec"), {})

    printed = out.getvalue()
    assert printed.startswith("offloaded\n[cargohold] artifact://sha256/")
    assert "csv: 20,000 data rows" in printed
    assert "\nresolved\n[cargohold:recovered]" in printed
    assert "'start': 0, 'end': 4096, 'next_offset': 4096" in printed
    assert "offload:offloaded 1" in printed


def test_the_readme_async_example_runs_and_reads_lines_back() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 2, "the README has no async example"
    out = io.StringIO()

    with contextlib.redirect_stdout(out):
        exec(compile(blocks[1], "README.md", "exec"), {"__name__": "__readme__"})

    assert out.getvalue().splitlines()[:3] == [
        f"2026-01-01 00:00:00 INFO request {i} served" for i in range(3)
    ]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
