"""Lossless compaction (Hold.compact): old tool results become compact stubs, every byte of them
stays one verified read away, the pairing of calls and results stays valid for every provider,
and between compactions each request extends the previous one byte for byte."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cargohold
from cargohold import CompactionPolicy, Hold, ListSink, UsageError
from cargohold._stub import COMPACT_STUB_BYTES, parse_compact_stub, parse_stub
from cargohold.guard import count_request_tokens, estimate_request_tokens
from compact_fixtures import (
    FORMATS,
    Turn,
    calls_of,
    dump,
    read_back,
    request,
    results_of,
    turns,
    validate,
)

POLICY = CompactionPolicy(trigger_tokens=12_000, keep_last=3, clear_at_least=2_000)
"""Small enough that a test conversation of a dozen 6 KB results crosses it."""


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


@pytest.fixture
def hold(sink: ListSink) -> Iterator[Hold]:
    with cargohold.open("memory://", tenant="acme", user="ana", session="run-1", sinks=[sink]) as h:
        yield h


def _tokens(hold: Hold, fmt: str, built: Any) -> int:
    """The tokens compaction compares with its trigger (read from a report: a trigger it is
    over, so they are counted, and nothing old enough to clear)."""
    policy = CompactionPolicy(trigger_tokens=1, keep_last=10**6)
    return hold.compact(built, format=fmt, policy=policy)[1].tokens_before


def _at_the_end(hold: Hold, fmt: str, built: Any, **changes: Any) -> CompactionPolicy:
    """A policy whose trigger the conversation crosses with its last message only, so one
    compaction clears every result but the newest ``keep_last``."""
    return CompactionPolicy(
        trigger_tokens=_tokens(hold, fmt, built), clear_at_least=2_000, **changes
    )


def _stubs(hold: Hold, fmt: str, built: Any) -> list[str | None]:
    """For each result, the reference of its compact stub, or None when it is whole."""
    key = hold.store.marker_key()
    found: list[str | None] = []
    for _, text in results_of(fmt, built):
        info = parse_compact_stub(text, key=key) if isinstance(text, str) else None
        found.append(None if info is None else str(info.ref))
    return found


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_conversation_below_the_trigger_is_returned_as_it_is(hold: Hold, fmt: str) -> None:
    given = request(fmt, turns([6000] * 3))
    before = dump(fmt, given)

    out, report = hold.compact(given, format=fmt, policy=POLICY)

    assert out is given
    assert dump(fmt, out) == before
    assert (report.changed, report.cleared, report.compactions) == (False, 0, 0)
    assert report.tokens_before == report.tokens_after < POLICY.trigger_tokens
    assert hold.store.artifacts() == []  # nothing stored either


@pytest.mark.parametrize("fmt", FORMATS)
def test_old_results_become_compact_stubs_and_every_call_keeps_its_result(
    hold: Hold, fmt: str
) -> None:
    given = request(fmt, turns([6000] * 12))

    out, report = hold.compact(given, format=fmt, policy=_at_the_end(hold, fmt, given))

    validate(fmt, out)  # the SDK's own request types, and the pairing
    stubs = _stubs(hold, fmt, out)
    assert len(stubs) == 12
    assert stubs[-3:] == [None, None, None]  # keep_last
    assert all(ref is not None for ref in stubs[:9])
    assert (report.cleared, report.compactions) == (9, 1)
    assert [str(ref) for ref in report.refs] == stubs[:9]
    assert report.tokens_after < report.tokens_before
    # the call ids are kept where they were, and in the stub
    assert [c for c, _ in results_of(fmt, out)] == [c for c, _ in results_of(fmt, given)]
    for (call_id, text), ref in zip(results_of(fmt, out)[:9], stubs[:9], strict=True):
        assert f"| call {call_id} |" in text
        assert "| tool read_file |" in text
        assert "artifact_search(query)" in text
        assert len(text.encode()) <= COMPACT_STUB_BYTES
        assert parse_stub(text, key=hold.store.marker_key()) is not None  # the guard trusts it
        assert ref in text


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_cleared_result_reads_back_byte_for_byte_through_artifact_read(
    hold: Hold, fmt: str
) -> None:
    given = request(fmt, turns([9000, 2500, 30_000, 7000, 6000, 6000, 6000, 6000]))
    originals = dict(results_of(fmt, given))

    out, report = hold.compact(given, format=fmt, policy=_at_the_end(hold, fmt, given))

    assert report.cleared == 5
    key = hold.store.marker_key()
    for call_id, text in results_of(fmt, out)[:5]:
        info = parse_compact_stub(text, key=key)
        assert info is not None
        assert read_back(hold, info.ref) == originals[call_id].encode()


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_input_is_never_mutated(hold: Hold, fmt: str) -> None:
    given = request(fmt, turns([6000] * 12))
    before = dump(fmt, given)
    untouched = copy.deepcopy(given) if fmt != "langchain" else None

    out, report = hold.compact(given, format=fmt, policy=POLICY)

    assert report.cleared > 0
    assert dump(fmt, given) == before
    if untouched is not None:
        assert given == untouched
    assert dump(fmt, out) != before


@pytest.mark.parametrize("keep_last", [0, 1, 5])
@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic"])
def test_the_newest_keep_last_results_are_never_cleared(
    hold: Hold, fmt: str, keep_last: int
) -> None:
    given = request(fmt, turns([6000] * 12))
    policy = _at_the_end(hold, fmt, given, keep_last=keep_last)

    out, _ = hold.compact(given, format=fmt, policy=policy)

    stubs = _stubs(hold, fmt, out)
    assert stubs.count(None) == keep_last
    assert stubs[: 12 - keep_last] == [ref for ref in stubs if ref is not None]
    kept = results_of(fmt, out)[12 - keep_last :]
    assert kept == results_of(fmt, given)[12 - keep_last :]


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_results_of_an_excluded_tool_stay_whole(hold: Hold, fmt: str) -> None:
    given = request(fmt, turns([6000] * 12, tools=("read_file", "memory")))
    policy = _at_the_end(hold, fmt, given, exclude_tools=frozenset({"memory"}))

    out, report = hold.compact(given, format=fmt, policy=policy)

    validate(fmt, out)
    tools = [tool for _, tool, _ in calls_of(fmt, given)]
    stubs = _stubs(hold, fmt, out)
    for tool, ref, (_, text), (_, original) in zip(
        tools, stubs, results_of(fmt, out), results_of(fmt, given), strict=True
    ):
        if tool == "memory":
            assert ref is None
            assert text == original
    assert report.cleared == sum(1 for t, r in zip(tools, stubs, strict=True) if r is not None)
    assert report.cleared == 5  # read_file's results but its newest (keep_last counts all)


@pytest.mark.parametrize("fmt", FORMATS)
def test_between_compactions_each_request_extends_the_previous_one_byte_for_byte(
    hold: Hold, fmt: str
) -> None:
    history = turns([5000, 7000, 3000, 9000, 6000, 4000] * 5)
    previous: list[str] | None = None
    compactions = 0
    for turn in range(1, len(history) + 1):
        out, report = hold.compact(request(fmt, history[:turn]), format=fmt, policy=POLICY)
        sent = dump(fmt, out)
        if previous is not None and report.compactions == 0:
            assert sent[: len(previous)] == previous, f"turn {turn} rewrote an earlier message"
        if previous is not None and report.compactions:
            assert report.tokens_before >= POLICY.trigger_tokens
        compactions += report.compactions
        previous = sent
    assert compactions >= 3  # the run crossed the trigger again and again


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_loop_that_keeps_the_compacted_history_gets_the_bytes_a_stateless_gateway_gets(
    hold: Hold, fmt: str
) -> None:
    history = turns([5000, 7000, 3000, 9000, 6000, 4000] * 4)
    kept: Any = None
    for turn in range(1, len(history) + 1):
        stateless, _ = hold.compact(request(fmt, history[:turn]), format=fmt, policy=POLICY)
        whole = request(fmt, history[:turn])
        if kept is None:
            carried = whole
        else:  # what the loop kept, and this turn's new messages appended
            new = dump(fmt, whole)[len(dump(fmt, kept)) :]
            assert len(new) == 2
            tail = (whole if fmt == "langchain" else _messages(fmt, whole))[-2:]
            carried = _with_messages(fmt, kept, [*_messages(fmt, kept), *tail])
        kept, _ = hold.compact(carried, format=fmt, policy=POLICY)
        assert dump(fmt, kept) == dump(fmt, stateless)


def _messages(fmt: str, built: Any) -> list[Any]:
    if fmt == "langchain":
        return list(built)
    return list(built["input" if fmt == "openai-responses" else "messages"])


def _with_messages(fmt: str, built: Any, messages: list[Any]) -> Any:
    if fmt == "langchain":
        return messages
    return {**built, ("input" if fmt == "openai-responses" else "messages"): messages}


def test_one_compact_event_per_compaction_counted_in_the_run_summary(
    hold: Hold, sink: ListSink
) -> None:
    history = turns([6000] * 12)
    policy = _at_the_end(hold, "anthropic", request("anthropic", history))
    _out, first = hold.compact(
        request("anthropic", history[:11]), format="anthropic", policy=policy
    )
    assert (first.changed, first.events) == (False, ())
    sink.events.clear()

    # the next turn appends one result and crosses the trigger: one compaction
    _, report = hold.compact(request("anthropic", history), format="anthropic", policy=policy)

    events = [e for e in sink.events if e.operation.value == "compact"]
    assert report.compactions == len(events) == 1
    event = events[0]
    assert report.events == (event,)
    assert (event.outcome.value, event.reason.value, event.ref) == (
        "compacted",
        "trigger_tokens",
        None,
    )
    assert event.cleared >= 1
    assert event.estimated_tokens >= policy.trigger_tokens > (event.tokens_after or 0)
    assert event.limit_tokens == policy.trigger_tokens
    assert event.observed_bytes > event.context_bytes > 0
    assert hold.summary.as_dict()["decisions"]["compact:compacted"] == 1
    assert not [e for e in sink.events if e.operation.value == "offload"]  # one event, no more
    shown = json.dumps(event.as_dict()) + repr(event)
    assert "result line" not in shown
    assert "module_" not in shown


@pytest.mark.parametrize("fmt", FORMATS)
def test_clear_tool_inputs_stores_the_calls_arguments_and_keeps_the_pairing(
    hold: Hold, fmt: str
) -> None:
    history = [
        turn.__class__(turn.tool, turn.call_id, {"patch": "+ line\n" * 400}, turn.result)
        for turn in turns([6000] * 10)
    ]
    given = request(fmt, history)
    policy = _at_the_end(hold, fmt, given, clear_tool_inputs=True)
    original_inputs = {c: text for c, _, text in calls_of(fmt, given)}

    out, report = hold.compact(given, format=fmt, policy=policy)

    validate(fmt, out)
    assert report.inputs_cleared == report.cleared == 7
    key = hold.store.marker_key()
    cleared_inputs = 0
    for call_id, tool, text in calls_of(fmt, out):
        assert tool == "read_file"
        value = json.loads(text)
        if set(value) == {"cargohold"}:
            info = parse_compact_stub(value["cargohold"], key=key)
            assert info is not None
            assert info.what == "input"
            stored = json.loads(read_back(hold, info.ref))
            assert stored == json.loads(original_inputs[call_id])
            cleared_inputs += 1
    assert cleared_inputs == 7


def test_a_result_the_secrets_policy_rejects_stays_whole_and_is_counted_as_kept(
    tmp_path: Path,
) -> None:
    config = tmp_path / "cargohold.toml"
    config.write_text('secrets_policy = { fetch = "reject" }\n')
    history = turns([6000] * 12, tools=("read_file", "fetch"))
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    held = history[1].result + f"\ntoken={token}\n"
    history[1] = history[1].__class__("fetch", history[1].call_id, {}, held)
    with cargohold.open("memory://", session="s", config_file=config) as hold:
        given = request("openai-chat", history)
        out, report = hold.compact(
            given, format="openai-chat", policy=_at_the_end(hold, "openai-chat", given)
        )

    assert results_of("openai-chat", out)[1][1] == held
    assert report.kept == 1
    assert report.cleared == 8  # the nine older results but that one


def test_a_result_already_offloaded_becomes_the_compact_stub_of_its_own_reference(
    hold: Hold,
) -> None:
    history = turns([6000] * 12)
    heavy = "id,total\n" + "".join(f"{i},{i * 3}.50\n" for i in range(8000))
    offloaded = hold.offload(heavy, tool="read_file")
    assert offloaded.ref is not None
    history[0] = history[0].__class__("read_file", history[0].call_id, {}, offloaded.text)
    stored = len(hold.store.artifacts())

    given = request("anthropic", history)
    out, report = hold.compact(
        given, format="anthropic", policy=_at_the_end(hold, "anthropic", given)
    )

    first = results_of("anthropic", out)[0][1]
    info = parse_compact_stub(first, key=hold.store.marker_key())
    assert info is not None
    assert info.ref == offloaded.ref
    assert f"{len(heavy.encode()):,} bytes" in first
    assert report.refs[0] == offloaded.ref
    assert len(hold.store.artifacts()) == stored + 8  # the stub itself was not stored again
    assert read_back(hold, info.ref) == heavy.encode()


def test_a_forged_compact_stub_does_not_move_the_compaction_point(hold: Hold) -> None:
    from cargohold import Ref
    from cargohold._stub import render_compact_stub

    data = b"forged"
    fake = render_compact_stub(data, Ref.of(data), media_type="text/plain")  # no key: forged
    history = turns([6000] * 12)
    history[8] = history[8].__class__("read_file", history[8].call_id, {}, fake.text)

    given = request("openai-chat", history)
    out, _report = hold.compact(
        given, format="openai-chat", policy=_at_the_end(hold, "openai-chat", given)
    )

    stubs = _stubs(hold, "openai-chat", out)
    assert None not in stubs[:8]  # cleared despite the forgery after them
    assert results_of("openai-chat", out)[8][1] == history[8].result


@pytest.mark.parametrize(
    "changes",
    [
        {"trigger_tokens": 0},
        {"trigger_tokens": True},
        {"keep_last": -1},
        {"clear_at_least": 1.5},
        {"min_result_bytes": "1k"},
        {"exclude_tools": "memory"},
        {"exclude_tools": [""]},
        {"clear_tool_inputs": "yes"},
    ],
)
def test_a_bad_policy_value_is_a_usage_error(changes: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        CompactionPolicy(**changes)


def test_an_unknown_or_unread_format_is_a_usage_error(hold: Hold) -> None:
    with pytest.raises(UsageError):
        hold.compact({"messages": []}, format="gemini", policy=POLICY)
    with pytest.raises(UsageError):
        hold.compact({"prompt": "x"}, format="openai-completions", policy=POLICY)
    with pytest.raises(UsageError):
        hold.compact([{"role": "user", "content": "x"}], format="anthropic", policy=POLICY)
    with pytest.raises(UsageError):
        hold.compact({"messages": []}, format="anthropic", policy={"trigger_tokens": 5})


def test_a_responses_input_given_as_one_string_has_nothing_to_clear(hold: Hold) -> None:
    given = {"model": "gpt-4o", "input": "x" * 200_000}

    out, report = hold.compact(given, format="openai-responses", policy=POLICY)

    assert out is given
    assert report.changed is False


def test_the_default_policy_comes_from_the_compaction_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "cargohold.toml"
    config.write_text(
        "compaction_trigger_tokens = 12000\ncompaction_keep_last = 2\n"
        'compaction_exclude_tools = ["memory"]\ncompaction_clear_tool_inputs = true\n'
    )
    monkeypatch.setenv("CARGOHOLD_COMPACTION_CLEAR_AT_LEAST", "2000")
    monkeypatch.setenv("CARGOHOLD_COMPACTION_MIN_RESULT_BYTES", "4096")
    with cargohold.open("memory://", session="s", config_file=config) as hold:
        policy = CompactionPolicy.from_settings(hold.settings)
        given = request("openai-chat", turns([6000] * 12))
        out, report = hold.compact(given, format="openai-chat")

    assert policy == CompactionPolicy(
        trigger_tokens=12_000,
        keep_last=2,
        clear_at_least=2_000,
        exclude_tools=frozenset({"memory"}),
        clear_tool_inputs=True,
        min_result_bytes=4096,
    )
    assert report.cleared > 0  # the trigger of the file, 12,000, was crossed
    assert results_of("openai-chat", out)[-2:] == results_of("openai-chat", given)[-2:]


def test_a_bad_compaction_setting_is_a_config_error_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "cargohold.toml"
    config.write_text("compaction_keep_last = -1\n")
    with pytest.raises(cargohold.ConfigError, match="compaction_keep_last"):
        cargohold.open("memory://", session="s", config_file=config)


def test_acompact_gives_what_compact_gives(hold: Hold) -> None:
    given = request("openai-responses", turns([6000] * 12))
    expected, _ = hold.compact(given, format="openai-responses", policy=POLICY)

    async def main() -> Any:
        out, _ = await hold.acompact(given, format="openai-responses", policy=POLICY)
        return out

    assert asyncio.run(main()) == expected


@pytest.mark.parametrize("fmt", FORMATS)
def test_nothing_at_or_before_the_last_compact_stub_is_rewritten_even_under_another_policy(
    hold: Hold, fmt: str
) -> None:
    history = turns([6000] * 16, tools=("read_file", "memory"))
    first = request(fmt, history[:10])
    kept, report = hold.compact(
        first, format=fmt, policy=_at_the_end(hold, fmt, first, exclude_tools={"memory"})
    )
    assert report.cleared == 4  # read_file's 0, 2, 4, 6 (keep_last keeps 7-9; memory excluded)
    point = max(i for i, ref in enumerate(_stubs(hold, fmt, kept)) if ref is not None)

    # the loop keeps the compacted history; a caller without the exclusion compacts it later
    later = request(fmt, history)
    carried = _with_messages(
        fmt, kept, [*_messages(fmt, kept), *_messages(fmt, later)[len(_messages(fmt, kept)) :]]
    )
    out, again = hold.compact(carried, format=fmt, policy=_at_the_end(hold, fmt, carried))

    assert again.cleared > 0
    sent, before = dump(fmt, out), dump(fmt, carried)
    messages_before_point = (
        1
        + [
            index
            for index, message in enumerate(_messages(fmt, kept))
            if results_of(fmt, _with_messages(fmt, kept, [message]))
        ][point]
    )
    assert sent[:messages_before_point] == before[:messages_before_point]
    assert results_of(fmt, out)[: point + 1] == results_of(fmt, kept)[: point + 1]


class _FailingPuts:
    """A backend around a MemoryStore whose puts fail while ``down`` (the store unavailable)."""

    def __init__(self, inner: cargohold.MemoryStore) -> None:
        self._inner = inner
        self.limits = inner.limits
        self.down = True

    def put(self, scope: Any, data: bytes, put: Any) -> Any:
        if self.down:
            raise cargohold.StoreUnavailableError("down")
        return self._inner.put(scope, data, put)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_results_the_store_cannot_take_stay_whole_and_nothing_is_lost() -> None:
    backend = _FailingPuts(cargohold.MemoryStore())
    given = request("anthropic", turns([6000] * 12))
    # the wrapper forwards the protocol through __getattr__, which a type checker cannot see
    with cargohold.open(backend, session="s") as hold:  # type: ignore[arg-type]
        policy = _at_the_end(hold, "anthropic", given)
        out, report = hold.compact(given, format="anthropic", policy=policy)

        assert out is given  # every result kept whole, the request as it was
        assert (report.changed, report.kept, report.compactions) == (False, 9, 0)

        backend.down = False  # back: the same request now compacts
        out, report = hold.compact(given, format="anthropic", policy=policy)
        assert report.cleared == 9


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_request_whose_heavy_results_were_all_cleared_passes_the_edge_guard(
    hold: Hold, fmt: str
) -> None:
    given = request(fmt, turns([40_000] * 4))  # each over the 32 KiB heavy threshold
    with pytest.raises(cargohold.ContextLeakError):
        hold.guard(given, format=fmt)

    out, report = hold.compact(given, format=fmt, policy=_at_the_end(hold, fmt, given, keep_last=0))

    assert report.cleared == 4
    hold.guard(out, format=fmt)  # genuine stubs under the store's key: nothing raw is left


def test_a_result_of_content_blocks_is_stored_as_their_json_and_reads_back_as_it() -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" * 400},
    }
    blocks = [{"type": "text", "text": "screenshot of the failing page"}, image]
    history = turns([6000] * 12)
    with cargohold.open("memory://", session="s") as hold:
        given = request("anthropic", history)
        given["messages"][2]["content"][0]["content"] = blocks  # the first result
        single = [{"type": "text", "text": history[1].result}]
        given["messages"][4]["content"][0]["content"] = single  # one text block: its text
        out, _ = hold.compact(
            given, format="anthropic", policy=_at_the_end(hold, "anthropic", given)
        )

        validate("anthropic", out)
        key = hold.store.marker_key()
        first, second = (
            parse_compact_stub(t, key=key) for _, t in results_of("anthropic", out)[:2]
        )
        assert first is not None
        assert second is not None
        assert json.loads(read_back(hold, first.ref)) == blocks
        assert (
            read_back(hold, first.ref)
            == json.dumps(blocks, ensure_ascii=False, separators=(",", ":")).encode()
        )
        assert read_back(hold, second.ref) == history[1].result.encode()
        assert "| application/json |" in results_of("anthropic", out)[0][1]


def test_langchain_clears_a_calls_input_in_every_form_the_message_keeps_it() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    history = turns([6000] * 10)
    messages: list[Any] = [HumanMessage("go")]
    for turn in history:
        arguments = {"patch": "+ line\n" * 400}
        messages.append(
            AIMessage(
                content=[
                    {"type": "text", "text": "patching"},
                    {"type": "tool_use", "id": turn.call_id, "name": "edit", "input": arguments},
                ],
                tool_calls=[{"name": "edit", "args": arguments, "id": turn.call_id}],
                additional_kwargs={
                    "tool_calls": [
                        {
                            "id": turn.call_id,
                            "type": "function",
                            "function": {"name": "edit", "arguments": json.dumps(arguments)},
                        }
                    ]
                },
            )
        )
        messages.append(ToolMessage(turn.result, tool_call_id=turn.call_id, name="edit"))
    with cargohold.open("memory://", session="s") as hold:
        policy = _at_the_end(hold, "langchain", messages, clear_tool_inputs=True)
        out, report = hold.compact(messages, format="langchain", policy=policy)

    assert report.inputs_cleared == 7
    validate("langchain", out)
    for message in out[1:15:2]:  # the seven older calls
        stub = message.tool_calls[0]["args"]["cargohold"]
        assert message.content[1]["input"] == {"cargohold": stub}
        raw = message.additional_kwargs["tool_calls"][0]["function"]["arguments"]
        assert json.loads(raw) == {"cargohold": stub}
        assert message.content[0] == {"type": "text", "text": "patching"}
    assert out[-2].tool_calls[0]["args"] == {"patch": "+ line\n" * 400}  # kept


def test_an_old_recovered_segment_becomes_the_compact_stub_of_the_artifact_it_was_read_from(
    hold: Hold,
) -> None:
    history = turns([6000] * 12)
    heavy = "\n".join(f"line {i}: " + "x" * 60 for i in range(2000))
    offloaded = hold.offload(heavy, tool="read_file")
    assert offloaded.ref is not None
    answer = hold.call_tool("artifact_read", {"ref": str(offloaded.ref), "length": 8000})
    assert answer.outcome == "resolved"
    history[2] = history[2].__class__("artifact_read", history[2].call_id, {}, answer.text)
    given = request("openai-chat", history)

    out, report = hold.compact(
        given, format="openai-chat", policy=_at_the_end(hold, "openai-chat", given)
    )

    text = results_of("openai-chat", out)[2][1]
    info = parse_compact_stub(text, key=hold.store.marker_key())
    assert info is not None
    assert info.ref == offloaded.ref
    assert "| tool artifact_read |" in text
    assert offloaded.ref in report.refs
    assert read_back(hold, info.ref) == heavy.encode()


def test_a_masked_credential_never_shows_in_a_compact_stub(tmp_path: Path) -> None:
    config = tmp_path / "cargohold.toml"
    config.write_text('secrets_policy = { fetch = "mask" }\n')
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    history = turns([6000] * 12, tools=("fetch",))
    raw = f"token={token}\n" + history[1].result  # the credential on the first line
    history[1] = history[1].__class__("fetch", history[1].call_id, {}, raw)
    with cargohold.open("memory://", session="s", config_file=config) as hold:
        heavy = f"token={token}\n" + "y" * 40_000
        offloaded = hold.offload(heavy, tool="fetch")  # stored exact, as restricted
        history[0] = history[0].__class__("fetch", history[0].call_id, {}, offloaded.text)
        given = request("openai-chat", history)
        out, report = hold.compact(
            given, format="openai-chat", policy=_at_the_end(hold, "openai-chat", given)
        )
        cleared = results_of("openai-chat", out)[:2]

        assert report.cleared == 9
        for _, text in cleared:
            assert parse_compact_stub(text, key=hold.store.marker_key()) is not None
            assert token not in text
            assert "first line:" in text


def test_a_restarted_caller_compacts_the_same_request_to_the_same_bytes(tmp_path: Path) -> None:
    given = request("anthropic", turns([6000] * 12))
    outputs = []
    for _ in range(2):  # two runs of a gateway over one local store: its key persists
        with cargohold.open(tmp_path / "store", session="s") as hold:
            out, report = hold.compact(
                given, format="anthropic", policy=_at_the_end(hold, "anthropic", given)
            )
            assert report.cleared == 9
            outputs.append(dump("anthropic", out))

    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("fmt", ["openai-chat", "anthropic", "openai-responses"])
def test_calls_passed_back_as_sdk_objects_still_name_the_tools_of_their_results(
    hold: Hold, fmt: str
) -> None:
    from anthropic.types import ToolUseBlock
    from openai.types.chat import ChatCompletionMessage
    from openai.types.responses import ResponseFunctionToolCall

    history = turns([6000] * 12, tools=("read_file", "memory"))
    given = request(fmt, history)
    for message in _messages(fmt, given):  # the model's turns as the SDK returned them
        if fmt == "openai-chat" and message["role"] == "assistant":
            sdk: Any = ChatCompletionMessage.model_validate(message)
        elif fmt == "anthropic" and message["role"] == "assistant":
            message["content"][1] = ToolUseBlock.model_validate(message["content"][1])
            continue
        elif fmt == "openai-responses" and message.get("type") == "function_call":
            sdk = ResponseFunctionToolCall.model_validate(message)
        else:
            continue
        messages = _messages(fmt, given)
        messages[messages.index(message)] = sdk
        given = _with_messages(fmt, given, messages)
    policy = _at_the_end(hold, fmt, given, exclude_tools=frozenset({"memory"}))

    out, report = hold.compact(given, format=fmt, policy=policy)

    assert report.cleared == 5  # read_file's older results; memory's stay whole
    for (_, text), (_, original), turn in zip(
        results_of(fmt, out), results_of(fmt, request(fmt, history)), history, strict=True
    ):
        if turn.tool == "memory":
            assert text == original
        elif parse_compact_stub(text, key=hold.store.marker_key()) is not None:
            assert "| tool read_file |" in text


def test_an_agent_derived_with_its_own_policy_compacts_by_it_and_its_parent_by_the_settings(
    tmp_path: Path,
) -> None:
    config = tmp_path / "cargohold.toml"
    config.write_text("compaction_keep_last = 5\n")
    given = request("openai-chat", turns([6000] * 12))
    with cargohold.open("memory://", session="s", config_file=config) as hold:
        trigger = _tokens(hold, "openai-chat", given)
        override = CompactionPolicy(trigger_tokens=trigger, keep_last=1, clear_at_least=2_000)
        worker = hold.derive(agent="worker", compaction=override)
        grandchild = worker.derive(agent="reviewer")  # inherits its parent's override

        _, mine = worker.compact(given, format="openai-chat")
        _, inherited = grandchild.compact(given, format="openai-chat")
        _, configured = hold.compact(given, format="openai-chat")

        assert mine.cleared == inherited.cleared == 11  # keep_last 1
        assert configured.changed is False  # the default trigger, 100,000, is far away
        with pytest.raises(UsageError):
            # a mapping where a policy belongs: the mistake under test, so no type check passes it
            hold.derive(agent="x", compaction={"keep_last": 1})  # type: ignore[arg-type]


def _dense_csv(index: int, rows: int) -> str:
    """A CSV of coordinates and ids, as GeoJSON and measurement exports run: about 2.5 bytes
    a token, where the estimate assumes text's 4.35."""
    lines = ["id,lat,lon,depth,station"]
    for row in range(rows):
        n = index * 100_003 + row * 7919
        lines.append(f"{n % 99991},{n % 89.0:.5f},-{n % 179.0:.5f},{n % 713},S{n % 97:02d}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("fmt", FORMATS)
def test_dense_results_are_compacted_at_their_real_tokens_not_at_the_estimate(
    hold: Hold, fmt: str
) -> None:
    history = [
        Turn("read_csv", f"call_{i:03d}", {"path": f"part_{i}.csv"}, _dense_csv(i, 400))
        for i in range(12)
    ]
    given = request(fmt, history)
    counted = count_request_tokens(given, format=fmt)
    estimated = estimate_request_tokens(given, format=fmt)
    assert counted is not None
    assert estimated < counted * 0.75  # the estimate undercounts them
    trigger = (estimated + counted) // 2  # under the real count, over the estimate
    policy = CompactionPolicy(trigger_tokens=trigger, keep_last=3, clear_at_least=2_000)

    out, report = hold.compact(given, format=fmt, policy=policy)

    assert report.counted
    assert report.tokens_before >= trigger > report.tokens_after
    assert report.cleared >= 1
    texts = {turn.call_id: turn.result for turn in history}
    key = hold.store.marker_key()
    cleared = [
        (call_id, info)
        for call_id, text in results_of(fmt, out)
        if (info := parse_compact_stub(text, key=key)) is not None
    ]
    assert len(cleared) == report.cleared
    for call_id, info in cleared:
        assert read_back(hold, info.ref) == texts[call_id].encode()


class _CountingStore(cargohold.MemoryStore):
    """A memory store that counts its writes."""

    def __init__(self) -> None:
        super().__init__()
        self.puts = 0

    def put(self, *args: Any, **kwargs: Any) -> Any:
        self.puts += 1
        return super().put(*args, **kwargs)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_history_sent_again_reuses_its_compact_stubs_without_storing_again(fmt: str) -> None:
    store = _CountingStore()
    given = request(fmt, turns([6000] * 12))
    with cargohold.open(store, tenant="acme", user="ana", session="run-1") as hold:
        first, report = hold.compact(given, format=fmt, policy=POLICY)
        writes = store.puts
        again, second = hold.compact(copy.deepcopy(given), format=fmt, policy=POLICY)
        # A derived hold of the same store and scope (the gateway derives one per request).
        derived, third = hold.for_session("run-1").compact(
            copy.deepcopy(given), format=fmt, policy=POLICY
        )

    assert report.cleared >= 1
    assert writes >= report.cleared
    assert store.puts == writes  # nothing stored again
    assert dump(fmt, again) == dump(fmt, first) == dump(fmt, derived)
    assert second.refs == third.refs == report.refs


def test_a_colliding_memo_key_never_gives_a_result_another_results_stub(
    hold: Hold, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cargohold.compact._memo as memo

    monkeypatch.setattr(memo, "hash", lambda value: 0, raising=False)  # every key collides
    history = turns([6000] * 12)
    other = [  # the same calls, results of the same length, other bytes
        Turn(t.tool, t.call_id, t.arguments, t.result.replace("value", "VALUE")) for t in history
    ]
    hold.compact(request("anthropic", history), format="anthropic", policy=POLICY)

    out, report = hold.compact(request("anthropic", other), format="anthropic", policy=POLICY)

    assert report.cleared == 9
    texts = {turn.call_id: turn.result for turn in other}
    key = hold.store.marker_key()
    for call_id, text in results_of("anthropic", out)[:9]:
        info = parse_compact_stub(text, key=key)
        assert info is not None
        assert read_back(hold, info.ref) == texts[call_id].encode()


def test_a_remembered_stub_whose_artifact_is_gone_is_stored_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import cargohold.compact._memo as memo

    clock = [1000.0]
    monkeypatch.setattr(memo.time, "monotonic", lambda: clock[0])
    given = request("anthropic", turns([6000] * 12))
    store = _CountingStore()
    with cargohold.open(store, tenant="acme", user="ana", session="run-1") as hold:
        first, report = hold.compact(given, format="anthropic", policy=POLICY)
        for ref in report.refs:
            store.lose_for_tests("acme", ref)
        clock[0] += 31  # past the recheck: the memo looks the artifact up again
        writes = store.puts
        again, second = hold.compact(given, format="anthropic", policy=POLICY)

        assert store.puts == writes + len(report.refs)
        assert dump("anthropic", again) == dump("anthropic", first)
        for ref in second.refs:
            assert hold.info(ref).ok


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_cleared_result_is_found_by_artifact_search_and_read_back_exactly(
    hold: Hold, fmt: str
) -> None:
    history = turns([6000] * 12)
    needle = "ZanzibarQuokkaTimeout"  # in one old result only
    history[2] = Turn(
        history[2].tool,
        history[2].call_id,
        history[2].arguments,
        history[2].result + f"ERROR {needle} while loading the parser table\n",
    )
    out, _ = hold.compact(request(fmt, history), format=fmt, policy=POLICY)
    key = hold.store.marker_key()
    stubs = {
        call_id: info.ref
        for call_id, text in results_of(fmt, out)
        if (info := parse_compact_stub(text, key=key)) is not None
    }
    assert history[2].call_id in stubs  # cleared: the conversation holds only its stub

    answer = hold.call_tool("artifact_search", {"query": needle})

    assert answer.outcome == "resolved"
    hits = answer.structured()["hits"]
    assert [hit["ref"] for hit in hits] == [str(stubs[history[2].call_id])]
    assert read_back(hold, hits[0]["ref"]) == history[2].result.encode()


def test_two_secrets_policies_on_one_store_never_share_a_compact_stub() -> None:
    from cargohold import MemoryStore, Offloader
    from cargohold.compact import compact_request
    from cargohold.compact._memo import CompactionMemo

    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    history = turns([6000] * 12, tools=("fetch",))
    history[1] = history[1].__class__(
        "fetch", history[1].call_id, {}, f"token={token}\n" + history[1].result
    )
    given = request("openai-chat", history)
    memo = CompactionMemo()  # one memo, as a hold keeps one per store
    backend = MemoryStore()
    try:
        with cargohold.open(backend, session="s") as hold:
            policy = _at_the_end(hold, "openai-chat", given)
            texts = {}
            for name in ("mask", "redact"):  # the masked (exact) stub first: never reused
                offloader = Offloader(hold.store, secrets_policy={"fetch": name})
                out, _ = compact_request(
                    given,
                    format="openai-chat",
                    policy=policy,
                    offloader=offloader,
                    reporter=None,
                    key=hold.store.marker_key(),
                    memo=memo,
                )
                texts[name] = results_of("openai-chat", out)[1][1]
            key = hold.store.marker_key()
            infos = {name: parse_compact_stub(text, key=key) for name, text in texts.items()}
            assert infos["mask"] is not None
            assert infos["redact"] is not None
            assert infos["redact"].ref != infos["mask"].ref
            assert token.encode() not in read_back(hold, infos["redact"].ref)
            masked = hold.store.stat(infos["mask"].ref).record
            assert masked is not None
            assert masked.sensitivity.value == "restricted"  # the exact bytes, kept restricted
    finally:
        backend.close()
