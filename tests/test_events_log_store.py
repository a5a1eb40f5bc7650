"""``events_log = "store"`` where no PostgreSQL store is at hand: a bare guard (a library
caller's, given no reporter) has no store to write to, so it logs to the default events file,
never to a file named ``store``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cargohold import ContextLeakError
from cargohold.cli._context import default_events_path
from cargohold.guard import Guard

HEAVY_RESULT = "".join(f"row {i}: a raw tool result nobody offloaded\n" for i in range(2000))


def test_a_bare_guard_with_events_log_store_logs_to_the_default_events_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where an events file named "store" would appear
    monkeypatch.setenv("CARGOHOLD_EVENTS_LOG", "store")
    request = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "read the table"},
            {"role": "tool", "tool_call_id": "call_1", "content": HEAVY_RESULT},
        ],
    }

    with pytest.raises(ContextLeakError):
        Guard().check(request, format="openai-chat")

    logged = [json.loads(line) for line in default_events_path().read_text().splitlines()]
    assert [event["outcome"] for event in logged] == ["llm.context_leak"]
    assert not (tmp_path / "store").exists()
