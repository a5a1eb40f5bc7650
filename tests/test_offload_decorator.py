"""``@cargohold.offload_tool``: plain Python tool functions, sync and async, with a hold given or
the configured one. What a decorated call returns is asserted, and what the store holds is read
back: the exact bytes, under the SHA-256 of those bytes."""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cargohold
from cargohold import ListSink

ROOT = Path(__file__).resolve().parents[1]
LOG = "\n".join(f"2026-01-01 00:00:{i % 60:02d} INFO request {i} served" for i in range(30_000))
ROWS = [{"id": i, "status": "refunded" if i % 13 == 0 else "paid"} for i in range(5_000)]


def _ref(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return "artifact://sha256/" + hashlib.sha256(raw).hexdigest()


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


@pytest.fixture
def hold(sink: ListSink) -> Iterator[cargohold.Hold]:
    with cargohold.open("memory://", tenant="acme", user="ana", session="run-1", sinks=[sink]) as h:
        yield h


def test_a_heavy_result_of_a_sync_function_becomes_its_stub_and_the_exact_bytes_are_kept(
    hold: cargohold.Hold,
) -> None:
    @cargohold.offload_tool(hold)
    def read_log() -> str:
        return LOG

    text = read_log()

    assert text.startswith(f"[cargohold] {_ref(LOG)}\n")
    assert len(text.encode()) <= 8 * 1024
    assert hold.store.read(_ref(LOG)).data == LOG.encode()


def test_a_small_result_is_returned_as_the_value_itself(
    hold: cargohold.Hold, sink: ListSink
) -> None:
    answer = {"service": "billing", "status": "ok"}

    @cargohold.offload_tool(hold)
    def status() -> dict[str, str]:
        return answer

    assert status() is answer
    (event,) = sink.events
    assert (event.outcome, event.tool, event.ref) == ("inline", "status", None)


def test_a_dict_is_stored_as_its_compact_json_and_answers_a_query(hold: cargohold.Hold) -> None:
    @cargohold.offload_tool(hold)
    def orders() -> list[dict[str, Any]]:
        return ROWS

    stub = orders()

    body = json.dumps(ROWS, separators=(",", ":"))
    assert isinstance(stub, str)
    assert stub.split()[1] == _ref(body)
    count = hold.call_tool("artifact_query", {"ref": _ref(body), "expression": "length(@)"})
    assert count.content == "5000"


def test_a_tool_declared_exact_required_gets_verbatim_excerpts_sync_and_async(
    hold: cargohold.Hold,
) -> None:
    @cargohold.offload_tool(hold, classification="exact_required")
    def read_policy() -> list[dict[str, Any]]:
        return ROWS

    @cargohold.offload_tool(hold, tool="read_policy_async", classification="exact_required")
    async def read_policy_async() -> list[dict[str, Any]]:
        return ROWS[:4000]

    for stub in (read_policy(), asyncio.run(read_policy_async())):
        assert isinstance(stub, str)
        assert "kind json | class exact_required" in stub
    with pytest.raises(cargohold.UsageError):
        cargohold.offload_tool(hold, classification="compressible")


def test_an_async_function_stays_async_and_offloads_off_the_event_loop(
    hold: cargohold.Hold,
) -> None:
    @cargohold.offload_tool(hold, tool="fetch_log")
    async def fetch() -> bytes:
        await asyncio.sleep(0)
        return LOG.encode()

    assert inspect.iscoroutinefunction(fetch)
    text = asyncio.run(fetch())

    assert text.startswith(f"[cargohold] {_ref(LOG)}\ntool fetch_log |")


def test_the_decorated_function_keeps_its_name_docstring_and_signature(
    hold: cargohold.Hold,
) -> None:
    def search(query: str, limit: int = 10) -> str:
        """Search the docs."""
        return query * limit

    decorated = cargohold.offload_tool(hold)(search)

    assert decorated.__name__ == "search"
    assert decorated.__doc__ == "Search the docs."
    assert inspect.signature(decorated) == inspect.signature(search)
    assert decorated("ab", limit=2) == "abab"


def test_the_options_name_the_tool_and_choose_the_budget_and_media_type(
    hold: cargohold.Hold, sink: ListSink
) -> None:
    csv = "id,total\n" + "\n".join(f"{i},{i * 1.5}" for i in range(20_000))

    @cargohold.offload_tool(hold, tool="query_orders", budget="light", media_type="text/csv")
    def run_query() -> str:
        return csv

    stub = run_query()

    assert stub.splitlines()[1].startswith("tool query_orders | text/csv")
    assert "budget light" in stub.splitlines()[-1]
    assert len(stub.encode()) <= 4 * 1024
    assert sink.events[0].tool == "query_orders"


def test_a_result_holding_a_credential_returns_it_redacted_never_the_value(
    hold: cargohold.Hold,
) -> None:
    key = "AKIA" + "Q" * 16

    @cargohold.offload_tool(hold)
    def env_dump() -> str:
        return f"AWS_ACCESS_KEY_ID={key}\n" + "x = 1\n" * 10

    returned = env_dump()

    assert returned == (
        "AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key_id]\n"
        + "x = 1\n" * 10
        + "[cargohold] credentials redacted from this result: aws_access_key_id (line 1)"
    )
    assert key not in returned


def test_data_holding_a_credential_returns_as_data_redacted_with_no_note_field(
    hold: cargohold.Hold,
) -> None:
    key = "AKIA" + "Q" * 16

    @cargohold.offload_tool(hold)
    def sts() -> dict[str, Any]:
        return {"AccessKeyId": key, "Expiration": 3600}

    # Data stays data of the caller's own shape: a note field could clash with its keys.
    assert sts() == {"AccessKeyId": "[REDACTED:aws_access_key_id]", "Expiration": 3600}


def test_an_exception_of_the_function_propagates_and_nothing_is_decided(
    hold: cargohold.Hold, sink: ListSink
) -> None:
    @cargohold.offload_tool(hold)
    def broken() -> str:
        raise LookupError("no such service")

    with pytest.raises(LookupError):
        broken()
    assert sink.events == []


def test_without_a_hold_the_configured_one_is_opened_at_the_first_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "configured-store"
    monkeypatch.setenv("CARGOHOLD_STORE", str(store))
    monkeypatch.setenv("CARGOHOLD_SESSION", "tools-1")

    @cargohold.offload_tool
    def read_log() -> str:
        return LOG

    @cargohold.offload_tool(tool="read_log_async")
    async def read_log_async() -> str:
        return LOG

    assert not store.exists()  # decorating opens nothing
    text, again = read_log(), asyncio.run(read_log_async())

    assert text.split()[1] == again.split()[1] == _ref(LOG)
    with cargohold.open() as configured:  # any process with the same configuration reads it
        assert configured.read(_ref(LOG), length=37).content == LOG[:37]


def test_functions_decorated_by_one_call_share_one_configured_hold_opened_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cargohold._hold

    monkeypatch.setenv("CARGOHOLD_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("CARGOHOLD_SESSION", "tools-2")
    opened: list[cargohold.Hold] = []
    real_open = cargohold._hold.open

    def counting_open(*args: Any, **kwargs: Any) -> cargohold.Hold:
        opened.append(real_open(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(cargohold._hold, "open", counting_open)
    auto = cargohold.offload_tool(budget="light")

    @auto
    def first() -> str:
        return LOG

    @auto
    def second() -> str:
        return LOG + "\n"

    assert opened == []
    first_stub, second_stub = first(), second()

    assert len(opened) == 1
    assert "budget light" in first_stub.splitlines()[-1]
    assert second_stub.split()[1] == _ref(LOG + "\n")
    assert "offload:offloaded 2" in opened[0].summary.lines()[0]
    opened[0].close()


def test_a_value_that_is_not_text_bytes_or_json_is_a_usage_error(hold: cargohold.Hold) -> None:
    @cargohold.offload_tool(hold)
    def odd() -> object:
        return object()

    with pytest.raises(cargohold.UsageError):
        odd()


def test_what_is_not_a_function_or_a_hold_is_refused(hold: cargohold.Hold) -> None:
    def numbers() -> Iterator[int]:
        yield 1

    with pytest.raises(cargohold.UsageError):
        cargohold.offload_tool(hold)(numbers)
    with pytest.raises(cargohold.UsageError):
        cargohold.offload_tool("memory://")  # type: ignore[call-overload]


def test_the_example_runs_offline_and_reads_back_the_error_lines(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGOHOLD_")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")

    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "plain_python_tools.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert out.startswith("[cargohold] artifact://sha256/")
    assert "{'service': 'billing', 'status': 'degraded'}" in out
    assert "grep 5 matching lines" in out
    assert "16001: 00:40 ERROR billing request 16000" in out
    assert "decisions: offload:inline 1, offload:offloaded 1, rehydrate:resolved 1" in out
    assert (tmp_path / "cache" / "cargohold").is_dir()  # the configured default store
