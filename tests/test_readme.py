"""The README's Python examples run as printed, on the embedded default store, and its
settings table names every setting the configuration reads."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
from pathlib import Path

import pytest

import cargohold

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


def _settings_table() -> dict[str, set[str]]:
    """Each key of the README's settings table -> the variables named on its row."""
    text = README.read_text(encoding="utf-8")
    header = text.index("| key | variable | default |")
    rows: dict[str, set[str]] = {}
    for line in text[header:].splitlines()[2:]:
        if not line.startswith("| "):
            break
        keys, variables = line.split(" | ")[:2]
        names = set(re.findall(r"`(CARGOHOLD_[A-Z_]+|_[A-Z_]+)`", variables))
        # A row abbreviates its later variables to their suffix: `_SESSION_OBJECTS`.
        full = {name if name.startswith("CARGOHOLD_") else "CARGOHOLD" + name for name in names}
        for key in re.findall(r"`([a-z_]+)`", keys):
            rows[key] = full
    return rows


def _configuration_keys() -> list[str]:
    """Every key a configuration file or ``CARGOHOLD_*`` may set: the resolved settings'
    fields, with the store limits' own in place of ``limits``."""
    settings = [field.name for field in dataclasses.fields(cargohold.Settings)]
    limits = [field.name for field in dataclasses.fields(cargohold.Limits)]
    return [name for name in settings if name not in {"limits", "source"}] + limits


def test_every_configuration_key_is_in_the_readme_settings_table_with_its_variable() -> None:
    table = _settings_table()
    keys = _configuration_keys()

    assert {"store", "tenant_bytes", "compaction_keep_last", "gateway_port"} <= set(keys)
    missing = [key for key in keys if key not in table]
    unnamed = [key for key in keys if key in table and f"CARGOHOLD_{key.upper()}" not in table[key]]
    assert missing == []
    assert unnamed == []
    assert [key for key in table if key not in keys] == []  # none renamed or gone


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
