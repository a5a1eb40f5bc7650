"""Properties of compaction over generated runs: same input, same bytes; what is not cleared is
untouched; calls keep their results; between compactions a run only appends; a compact stub
never exceeds its size."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import cargohold
from cargohold import CompactionPolicy, Ref
from cargohold._stub import COMPACT_STUB_BYTES, parse_compact_stub, render_compact_stub
from compact_fixtures import FORMATS, calls_of, dump, request, results_of, turns, validate

TOOLS = ("read_file", "grep", "memory")

runs = st.lists(st.integers(min_value=100, max_value=12_000), min_size=1, max_size=14)
policies = st.builds(
    CompactionPolicy,
    trigger_tokens=st.integers(min_value=500, max_value=25_000),
    keep_last=st.integers(min_value=0, max_value=4),
    clear_at_least=st.integers(min_value=0, max_value=4_000),
    exclude_tools=st.frozensets(st.sampled_from(TOOLS), max_size=2),
    clear_tool_inputs=st.booleans(),
    min_result_bytes=st.integers(min_value=0, max_value=8_000),
)


@settings(max_examples=40, deadline=None)
@given(sizes=runs, policy=policies, fmt=st.sampled_from(FORMATS))
def test_the_same_request_compacts_to_the_same_bytes_and_keeps_what_it_does_not_clear(
    sizes: list[int], policy: CompactionPolicy, fmt: str
) -> None:
    history = turns(sizes, tools=TOOLS)
    with cargohold.open("memory://", tenant="t", user="u", session="s") as hold:
        first, report = hold.compact(request(fmt, history), format=fmt, policy=policy)
        again, _ = hold.compact(request(fmt, history), format=fmt, policy=policy)
        other = hold.derive(agent="other")  # another hold of the same store
        third, _ = other.compact(request(fmt, history), format=fmt, policy=policy)
        key = hold.store.marker_key()

        assert dump(fmt, first) == dump(fmt, again) == dump(fmt, third)
        validate(fmt, first)
        originals = results_of(fmt, request(fmt, history))
        out = results_of(fmt, first)
        assert [c for c, _ in out] == [c for c, _ in originals]
        tools = [tool for _, tool, _ in calls_of(fmt, request(fmt, history))]
        cleared = 0
        for index, ((_, text), (_, original), tool) in enumerate(
            zip(out, originals, tools, strict=True)
        ):
            info = parse_compact_stub(text, key=key)
            if info is None:
                assert text == original  # untouched, byte for byte
                continue
            cleared += 1
            assert tool not in policy.exclude_tools
            assert index < len(out) - policy.keep_last
            assert len(original.encode()) >= policy.min_result_bytes
            assert hold.read(info.ref, budget=1 << 20).content == original
        assert cleared == report.cleared
        if report.tokens_before < policy.trigger_tokens:
            assert cleared == 0


@settings(max_examples=15, deadline=None)
@given(sizes=runs, policy=policies, fmt=st.sampled_from(FORMATS))
def test_a_run_only_appends_to_what_it_sent_until_its_next_compaction(
    sizes: list[int], policy: CompactionPolicy, fmt: str
) -> None:
    history = turns(sizes, tools=TOOLS)
    previous: list[str] = []
    with cargohold.open("memory://", tenant="t", user="u", session="s") as hold:
        for turn in range(1, len(history) + 1):
            out, report = hold.compact(request(fmt, history[:turn]), format=fmt, policy=policy)
            sent = dump(fmt, out)
            if report.compactions == 0:
                assert sent[: len(previous)] == previous
            else:
                assert report.tokens_before >= policy.trigger_tokens
            previous = sent


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(max_size=3000) | st.text(max_size=3000).map(str.encode),
    tool=st.none() | st.text(max_size=100),
    call_id=st.none() | st.text(max_size=100),
    media_type=st.sampled_from(
        ["text/plain; charset=utf-8", "application/json", "image/png", "x/" + "y" * 200]
    ),
    what=st.sampled_from(["result", "input"]),
    size=st.none() | st.integers(min_value=0, max_value=10**12),
)
def test_a_compact_stub_never_exceeds_its_size_and_reads_as_itself(
    data: bytes, tool: str | None, call_id: str | None, media_type: str, what: str, size: Any
) -> None:
    key = b"k" * 32
    ref = Ref.of(data)
    stub = render_compact_stub(
        data, ref, media_type=media_type, tool=tool, call_id=call_id, what=what, key=key, size=size
    )
    again = render_compact_stub(
        data, ref, media_type=media_type, tool=tool, call_id=call_id, what=what, key=key, size=size
    )
    assert stub.text == again.text
    assert len(stub.text.encode("utf-8", "surrogatepass")) <= COMPACT_STUB_BYTES
    info = parse_compact_stub(stub.text, key=key)
    assert info is not None
    assert (info.ref, info.what) == (ref, what)
    assert parse_compact_stub(stub.text, key=b"x" * 32) is None  # another store's key


@settings(max_examples=100, deadline=None)
@given(
    tool=st.from_regex(r"[A-Za-z0-9_.:/-]{40,64}", fullmatch=True),
    call_id=st.from_regex(r"[A-Za-z0-9_.:-]{40,64}", fullmatch=True),
    media_type=st.text(min_size=60, max_size=300),
    size=st.integers(min_value=10**9, max_value=10**18),
    data=st.binary(max_size=500) | st.text(max_size=500).map(str.encode),
)
def test_the_longest_facts_still_fit_a_compact_stub(
    tool: str, call_id: str, media_type: str, size: int, data: bytes
) -> None:
    stub = render_compact_stub(
        data, Ref.of(data), media_type=media_type, tool=tool, call_id=call_id, size=size
    )

    assert len(stub.text.encode("utf-8", "surrogatepass")) <= COMPACT_STUB_BYTES
    assert parse_compact_stub(stub.text) is not None
