"""The front door: cargohold.open() and Hold, configuration honoured, deriving, threads, async."""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st

import cargohold
from cargohold import (
    Hold,
    ListSink,
    LocalStore,
    MemoryStore,
    Offloader,
    OffloadOutcome,
    RehydrateOutcome,
    Scope,
    ScopedStore,
    UsageError,
)

pytest_plugins = ["pg_cluster"]

KiB = 1024


def _log(size: int, seed: int = 0) -> str:
    line = f"2026-01-01 00:00:00 INFO worker {seed} handled request"
    text = "\n".join(f"{line} {i}" for i in range(size // len(line) + 1))[:size]
    assert len(text) == size
    return text


@pytest.fixture
def hold() -> Iterator[Hold]:
    with cargohold.open("memory://", tenant="acme", user="ana", session="run-1") as opened:
        yield opened


def test_open_offloads_at_the_default_threshold_and_reads_back_the_exact_bytes(hold: Hold) -> None:
    body = _log(40 * KiB)

    result = hold.offload(body, tool="read_log")

    assert result.outcome is OffloadOutcome.OFFLOADED
    assert result.ref is not None
    answer = hold.read(result.ref, offset=0, length=len(body), budget=64 * KiB)
    assert answer.content == body
    assert hold.offload(_log(32 * KiB - 1), tool="read_log").outcome is OffloadOutcome.INLINE


def test_open_reads_the_store_and_threshold_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CARGOHOLD_STORE", "memory://")
    monkeypatch.setenv("CARGOHOLD_HEAVY_THRESHOLD", "1000")
    monkeypatch.setenv("CARGOHOLD_TENANT", "acme")

    with cargohold.open(user="ana", session="s") as hold:
        assert isinstance(hold.store.store, MemoryStore)
        assert hold.scope.tenant == "acme"
        assert hold.offload("x" * 1000, tool="t").outcome is OffloadOutcome.OFFLOADED
        assert hold.offload("x" * 999, tool="t").outcome is OffloadOutcome.INLINE


def test_explicit_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARGOHOLD_HEAVY_THRESHOLD", "1000")
    monkeypatch.setenv("CARGOHOLD_READ_BUDGET", "100")

    with cargohold.open("memory://", session="s", threshold=5000, read_budget=2000) as hold:
        assert hold.offload("x" * 4999).outcome is OffloadOutcome.INLINE
        ref = hold.offload("y" * 6000).ref
        assert ref is not None
        assert hold.read(ref, length=1500).outcome is RehydrateOutcome.RESOLVED
        assert hold.read(ref, length=2001).outcome is RehydrateOutcome.OVER_BUDGET


def test_open_reads_a_configuration_file_in_the_working_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    store_dir = tmp_path / "store"
    (tmp_path / "cargohold.toml").write_text(
        f'store = "{store_dir}"\nheavy_threshold = 2048\ntenant = "filed"\n', encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)

    with cargohold.open(user="ana", session="s") as hold:
        assert isinstance(hold.store.store, LocalStore)
        assert hold.scope.tenant == "filed"
        assert hold.offload("z" * 2048).outcome is OffloadOutcome.OFFLOADED
    assert store_dir.is_dir()


def test_open_without_a_session_anywhere_refuses_and_says_how_to_give_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_dir = tmp_path / "never-opened"
    monkeypatch.chdir(tmp_path)  # no configuration file, no CARGOHOLD_SESSION

    with pytest.raises(cargohold.InvalidScopeError) as raised:
        cargohold.open(store_dir, tenant="acme", user="ana")

    # The message is the behaviour: it names each way to give a session.
    assert "session=" in str(raised.value)
    assert "CARGOHOLD_SESSION" in str(raised.value)
    assert "cargohold.toml" in str(raised.value)
    assert not store_dir.exists()  # refused before any store was opened


def test_a_bare_decorated_tool_without_a_configured_session_refuses_at_its_first_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARGOHOLD_STORE", "memory://")
    monkeypatch.chdir(tmp_path)

    @cargohold.offload_tool
    def read_log() -> str:
        return _log(40 * KiB)

    with pytest.raises(cargohold.InvalidScopeError):
        read_log()


@pytest.mark.parametrize("how", ["environment", "file"])
def test_open_takes_its_session_from_the_environment_or_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    monkeypatch.chdir(tmp_path)
    if how == "environment":
        monkeypatch.setenv("CARGOHOLD_SESSION", "run-7")
    else:
        (tmp_path / "cargohold.toml").write_text('session = "run-7"\n', encoding="utf-8")

    with cargohold.open("memory://", tenant="acme", user="ana") as hold:
        assert hold.scope == Scope("acme", "ana", "run-7")


def test_unrelated_runs_that_name_their_sessions_do_not_share_a_scope() -> None:
    store = MemoryStore()
    body = _log(40 * KiB)
    with cargohold.open(store, tenant="acme", user="ana", session="run-a") as first:
        ref = first.offload(body, tool="read_log").ref
        assert ref is not None
    with cargohold.open(store, tenant="acme", user="ana", session="run-b") as second:
        assert second.read(ref).outcome is RehydrateOutcome.UNAUTHORIZED


def _nested(depth: int, container: str, leaf: object) -> object:
    value = leaf
    for _ in range(depth):  # built iteratively: the test itself must not recurse
        value = [value] if container == "list" else {"a": value}
    return value


@examples(max_examples=40, deadline=None)
@given(
    depth=st.integers(0, 100_000),
    container=st.sampled_from(["list", "dict"]),
    heavy=st.booleans(),
)
def test_offloading_a_value_nested_to_any_depth_answers_or_raises_a_usage_error(
    depth: int, container: str, heavy: bool
) -> None:
    # A 100,000-deep dict raised RecursionError out of hold.offload.
    value = _nested(depth, container, "y" * (40 * KiB if heavy else 10))
    with cargohold.open("memory://", tenant="acme", user="ana", session="deep") as hold:
        try:
            result = hold.offload(value, tool="nested")
        except UsageError:
            assert depth >= 500  # only a value too deep for the JSON encoder is refused
        else:
            assert result.outcome in (OffloadOutcome.INLINE, OffloadOutcome.OFFLOADED)
            assert result.stub is None or result.stub.size_bytes <= 8 * KiB


def test_offloading_a_100000_deep_dict_is_a_usage_error_that_stores_nothing() -> None:
    store = MemoryStore()
    with cargohold.open(store, tenant="acme", user="ana", session="deep") as hold:
        with pytest.raises(UsageError):
            hold.offload(_nested(100_000, "dict", "leaf"), tool="nested")
        with pytest.raises(UsageError):
            asyncio.run(hold.aoffload(_nested(100_000, "list", "leaf"), tool="nested"))

        assert hold.store.artifacts() == []
        assert hold.summary.lines()[0] == "decisions: none"  # a usage error is no decision


def test_open_store_with_no_argument_honours_the_configured_store(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CARGOHOLD_STORE", "memory://")

    store = cargohold.open_store()

    assert isinstance(store, MemoryStore)
    store.close()


def test_an_offloader_built_without_a_threshold_uses_the_configured_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CARGOHOLD_HEAVY_THRESHOLD", "100")
    scoped = ScopedStore(MemoryStore(), Scope("t", "u", "s"))

    offloader = Offloader(scoped)

    assert offloader.threshold_for(None) == 100
    assert offloader.offload("x" * 100).outcome is OffloadOutcome.OFFLOADED


def test_a_derived_hold_shares_the_store_and_reads_as_another_session(hold: Hold) -> None:
    ref = hold.offload(_log(40 * KiB)).ref
    assert ref is not None

    other = hold.derive(session="run-2")

    assert other.store.store is hold.store.store
    assert other.scope.session == "run-2"
    refused = other.read(ref, length=10)
    assert refused.outcome is RehydrateOutcome.UNAUTHORIZED
    assert refused.text.endswith("unauthorized (owner_mismatch); no content")
    resolved = hold.for_session("run-1").read(ref, length=10)
    assert resolved.outcome is RehydrateOutcome.RESOLVED
    assert resolved.text == resolved.segment


def test_a_derived_agent_reports_its_parent_and_depth_in_one_sequence() -> None:
    sink = ListSink()
    with cargohold.open("memory://", session="s", agent="planner", sinks=[sink]) as hold:
        worker = hold.derive(agent="worker-1")

        hold.offload("a" * 100)
        worker.offload("b" * 100)
        hold.offload("c" * 100)

    events = sink.events
    assert [e.sequence for e in events] == [1, 2, 3]
    assert (events[1].agent_id, events[1].parent_agent_id, events[1].depth) == (
        "worker-1",
        "planner",
        1,
    )
    assert hold.summary.decisions["offload:inline"] == 3


def test_closing_a_hold_closes_the_store_it_opened_but_not_one_it_was_given(
    tmp_path: Path,
) -> None:
    given = LocalStore(tmp_path / "given")
    with cargohold.open(given, session="s") as hold:
        hold.offload("q" * 40 * KiB)
    assert given.artifacts(Scope("local", hold.scope.user, "s"))  # still open and usable
    given.close()


def test_a_closed_hold_refuses_async_work() -> None:
    hold = cargohold.open("memory://", session="s")
    hold.close()
    hold.close()  # idempotent

    with pytest.raises(UsageError):
        asyncio.run(hold.aoffload("x"))


def test_a_hold_is_safe_to_use_from_many_threads(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    refs: list[str] = []
    lock = threading.Lock()
    with cargohold.open(tmp_path / "store", session="s") as hold:

        def work(seed: int) -> None:
            try:
                for i in range(20):
                    body = _log(33 * KiB + i, seed)
                    result = hold.offload(body, tool="t")
                    assert result.ref is not None
                    read = hold.read(result.ref, length=len(body), budget=64 * KiB)
                    assert read.content == body
                    with lock:
                        refs.append(str(result.ref))
            except BaseException as exc:  # collected: a thread's failure must fail the test
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)

        assert errors == []
        assert len(refs) == 120
        assert len(set(refs)) == 120
        assert hold.summary.decisions["offload:offloaded"] == 120
        assert hold.summary.decisions["rehydrate:resolved"] == 120


def test_async_twins_give_the_same_answers_as_the_sync_verbs(hold: Hold) -> None:
    body = '{"items": [' + ",".join(f'{{"id": {i}}}' for i in range(5000)) + "]}"

    async def run() -> None:
        result = await hold.aoffload(body, tool="list", media_type="application/json")
        assert result.ref is not None
        ref = result.ref
        assert (await hold.aread(ref, length=50)).content == hold.read(ref, length=50).content
        assert (await hold.aread_lines(ref, 1, 1, budget=1024 * KiB)).content == body
        assert (await hold.agrep(ref, '"id": 4999')).content == hold.grep(ref, '"id": 4999').content
        assert (await hold.aquery(ref, "length(items)")).content == "5000"
        assert (await hold.ainfo(ref)).record == hold.info(ref).record
        answer = await hold.acall_tool(
            "artifact_query", {"ref": str(ref), "expression": "items[0]"}
        )
        assert answer.content == '{"id":0}'

    asyncio.run(run())


# -- the async stress: 1,000 concurrent tasks, no error, no blocking work on the event loop ---


def _on_the_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _stress(hold: Hold, monkeypatch: pytest.MonkeyPatch) -> None:
    # What would stall the loop is blocking work on its thread: a store call (disk, fsync,
    # PostgreSQL) or a scan or projection of a body. Each of them records whether it ran on the
    # event loop's thread; none may. (Not a stopwatch: a loop-stall timer measures the host's
    # load as much as the code, and flaked on a loaded machine.)
    on_loop: list[str] = []

    def watched(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if _on_the_loop():
                on_loop.append(name)
            return function(*args, **kwargs)

        return call

    backend = hold.store.store
    for name in ("put", "read", "stat", "touch", "marker_key", "artifacts", "usage"):
        monkeypatch.setattr(backend, name, watched(name, getattr(backend, name)))
    for module, name in (
        ("cargohold._offload", "render_stub"),
        ("cargohold._offload", "find_secrets"),
        ("cargohold._rehydrate", "find_secrets"),
    ):
        target = importlib.import_module(module)
        monkeypatch.setattr(target, name, watched(name, getattr(target, name)))
    bodies = [_log(34 * KiB + (i % 50) * 97, i % 50) for i in range(1000)]

    async def one(i: int) -> None:
        result = await hold.aoffload(bodies[i], tool="stress")
        assert result.outcome in (OffloadOutcome.OFFLOADED, OffloadOutcome.EXISTING_REFERENCE)
        assert result.ref is not None
        read = await hold.aread(result.ref, offset=100, length=200)
        assert read.content == bodies[i].encode()[100:300].decode()

    async def main() -> None:
        await hold.awarmup()  # what a server does at start: the tokenizer loads once
        tasks = []
        for i in range(1000):  # requests arrive over time, as at a server, not in one step
            tasks.append(asyncio.create_task(one(i)))
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert on_loop == []
    assert hold.summary.decisions["rehydrate:resolved"] == 1000
    assert hold.summary.decisions["offload:offloaded"] == 50  # 50 distinct bodies, then reuse


@pytest.mark.slow
def test_a_thousand_concurrent_tasks_on_the_local_store_never_block_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with cargohold.open(tmp_path / "store", session="stress") as hold:
        _stress(hold, monkeypatch)


@pytest.mark.slow
def test_a_thousand_concurrent_tasks_on_postgresql_never_block_the_loop(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cargohold.store._postgres import upgrade_schema

    upgrade_schema(pg_url)
    with cargohold.open(pg_url, session="stress") as hold:
        _stress(hold, monkeypatch)


def test_a_hold_redacts_a_credential_unless_the_tools_configured_policy_masks_or_rejects_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import random
    import string

    from cargohold import Reason

    alphabet = string.ascii_uppercase + string.digits
    key_id = "AKIA" + "".join(random.Random(3).choices(alphabet, k=16))
    log = _log(40 * KiB) + f"\nINFO using aws_access_key_id={key_id}\n"
    monkeypatch.setenv("CARGOHOLD_SECRETS_POLICY", "fetch_logs=mask,strict_tool=reject")

    with cargohold.open("memory://", session="s") as hold:
        masked = hold.offload(log, tool="fetch_logs")
        rejected = hold.offload(log, tool="strict_tool")
        redacted = hold.offload(log, tool="other_tool")
        assert redacted.ref is not None
        stored = hold.store.read(redacted.ref).raise_for_outcome()

    assert (masked.outcome, masked.reason) == (OffloadOutcome.OFFLOADED, Reason.CREDENTIAL_MASKED)
    assert key_id not in masked.text
    assert (rejected.outcome, rejected.reason) == (
        OffloadOutcome.REJECTED,
        Reason.CREDENTIAL_DETECTED,
    )
    assert key_id not in rejected.text
    assert (redacted.outcome, redacted.reason) == (
        OffloadOutcome.OFFLOADED,
        Reason.CREDENTIAL_REDACTED,
    )
    assert key_id not in redacted.text
    assert stored == log.replace(key_id, "[REDACTED:aws_access_key_id]").encode()
