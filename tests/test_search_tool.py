"""artifact_search, the read tool: verified hits with line numbers, within the budget, one event.

The store side (ranking, the index, isolation in every backend) is tested by the conformance
suite; these tests drive the tool as a model calls it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import cargohold
from cargohold import (
    DecisionEvent,
    Hold,
    MemoryStore,
    Ref,
    ToolAnswer,
    UsageError,
    parse_segment,
)
from cargohold._toolspecs import SPECS
from cargohold.cli import ExitCode, cli

TENANT, USER, SESSION = "tenant-acme", "user-ana", "session-1"

LOG = "".join(
    f"2026-03-01T10:{index // 60:02d}:{index % 60:02d}Z "
    f"{'ERROR payments TimeoutError' if index % 50 == 0 else 'INFO'} request {index}\n"
    for index in range(1, 1001)
).encode()
NOTES = b"release notes\nthe payments service retries on TimeoutError now\nnothing else\n"
OTHER = b"an unrelated body about cache sizes\n" * 40


class Events:
    """A sink that keeps what it is given."""

    def __init__(self) -> None:
        self.events: list[DecisionEvent] = []

    def emit(self, event: DecisionEvent) -> None:
        self.events.append(event)


def open_hold(store: Any = "memory://", *, session: str = SESSION, sinks: Any = ()) -> Hold:
    return cargohold.open(store, tenant=TENANT, user=USER, session=session, sinks=sinks)


@pytest.fixture
def backend() -> Iterator[MemoryStore]:
    store = MemoryStore()
    try:
        yield store
    finally:
        store.close()


def put(hold: Hold, data: bytes, media_type: str = "text/plain", tool: str = "fixture") -> Ref:
    return hold.store.put(data, media_type=media_type, tool=tool).ref


def search(hold: Hold, query: str, **arguments: Any) -> ToolAnswer:
    return hold.call_tool("artifact_search", {"query": query, **arguments})


def test_search_answers_each_hit_with_its_ref_and_the_lines_that_hold_the_words(
    backend: MemoryStore,
) -> None:
    with open_hold(backend) as hold:
        log, notes = put(hold, LOG, tool="tail_log"), put(hold, NOTES)
        put(hold, OTHER)
        answer = search(hold, "timeouterror PAYMENTS")
    assert answer.outcome == "resolved"
    facts = answer.structured()
    assert {hit["ref"] for hit in facts["hits"]} == {str(log), str(notes)}
    by_ref = {hit["ref"]: hit for hit in facts["hits"]}
    log_lines = [n for n, line in enumerate(LOG.decode().splitlines(), 1) if "Timeout" in line]
    assert by_ref[str(log)]["lines"] == log_lines[:5]
    assert by_ref[str(log)]["matched_lines"] == len(log_lines) == 20
    assert by_ref[str(notes)]["lines"] == [2]
    assert by_ref[str(log)]["tool"] == "tail_log"
    content = answer.content or ""
    assert str(log) in content
    assert str(notes) in content
    for number in log_lines[:5]:
        line = LOG.decode().splitlines()[number - 1]
        assert f"   {number}: {line}\n" in content
    assert "2: the payments service retries on TimeoutError now" in content
    assert "cache sizes" not in content


def test_a_search_answer_is_a_genuine_recovered_segment_the_guard_and_seam_trust(
    backend: MemoryStore,
) -> None:
    with open_hold(backend) as hold:
        put(hold, NOTES)
        answer = search(hold, "retries")
        info = parse_segment(answer.text, key=hold.store.marker_key())
        assert info is not None
        assert answer.content is not None
        assert info.text_bytes == len(answer.content.encode())
        assert hold.offload(answer.text, tool="artifact_search").outcome.value == "bypass"


def test_a_search_that_finds_nothing_resolves_and_says_so_plainly(backend: MemoryStore) -> None:
    events = Events()
    with open_hold(backend, sinks=[events]) as hold:
        put(hold, NOTES)
        answer = search(hold, "retries nowhere-to-be-found")
    assert answer.outcome == "resolved"
    assert answer.structured()["hits"] == []
    assert "no hits" in answer.text
    [event] = events.events
    assert (event.operation.value, event.outcome.value, event.reason.value) == (
        "rehydrate",
        "resolved",
        "no_match",
    )
    assert (event.ref, event.tool) == (None, "artifact_search")


def test_one_search_is_one_rehydrate_event_naming_its_best_hit(backend: MemoryStore) -> None:
    events = Events()
    with open_hold(backend, sinks=[events]) as hold:
        put(hold, LOG)
        put(hold, NOTES)
        answer = search(hold, "TimeoutError")
    [event] = events.events
    assert event is answer.event
    assert (event.operation.value, event.outcome.value, event.reason.value) == (
        "rehydrate",
        "resolved",
        "verified",
    )
    assert event.ref == answer.structured()["hits"][0]["ref"]
    assert event.tool == "artifact_search"
    assert event.observed_bytes == len((answer.content or "").encode())
    assert event.context_bytes == len(answer.text.encode())


def test_a_hit_whose_bytes_went_stale_is_left_out_and_counted_never_shown(
    backend: MemoryStore,
) -> None:
    with open_hold(backend) as hold:
        log, notes = put(hold, LOG), put(hold, NOTES)
        backend.corrupt_for_tests(TENANT, notes, offset=0)
        answer = search(hold, "TimeoutError")
    facts = answer.structured()
    assert [hit["ref"] for hit in facts["hits"]] == [str(log)]
    assert facts["left_out"] == 1
    assert str(notes) not in answer.text
    assert "retries" not in answer.text


def test_a_search_answer_stays_within_its_budget_and_counts_the_hits_it_leaves_out(
    backend: MemoryStore,
) -> None:
    bodies = [f"body {n}: the needle word sits here\n".encode() * 60 for n in range(30)]
    with open_hold(backend) as hold:
        for body in bodies:
            put(hold, body)
        whole = search(hold, "needle", limit=30, budget=1_048_576)
        for budget in (500, 1000, 4096):
            answer = search(hold, "needle", limit=30, budget=budget)
            assert answer.content is not None
            assert len(answer.content.encode()) <= budget
            shown = answer.structured()["hits"]
            assert 1 <= len(shown) < 30
            assert f"{30 - len(shown)} more not shown" in answer.content
    assert len(whole.structured()["hits"]) == 30


def test_a_budget_too_small_for_one_heading_is_over_budget_with_nothing_shown(
    backend: MemoryStore,
) -> None:
    with open_hold(backend) as hold:
        put(hold, NOTES)
        answer = search(hold, "retries", budget=60)
    assert answer.outcome == "over_budget"
    assert answer.content is None
    assert "retries" not in answer.text.replace("artifact_search", "")


def test_another_sessions_artifacts_never_appear_and_change_nothing_in_the_answer() -> None:
    def answer_facts(with_other: bool) -> tuple[str, dict[str, Any]]:
        store = MemoryStore()
        try:
            if with_other:
                with open_hold(store, session="session-2") as other:
                    put(other, NOTES.replace(b"retries", b"retries retries retries"))
                    put(other, LOG)
            with open_hold(store) as hold:
                put(hold, NOTES)
                answer = search(hold, "retries TimeoutError")
                return answer.text.split("\n", 1)[1], answer.structured()
        finally:
            store.close()

    alone, with_other = answer_facts(False), answer_facts(True)
    assert alone == with_other
    assert len(alone[1]["hits"]) == 1


def test_a_restricted_artifacts_credentials_are_masked_in_its_excerpts(
    backend: MemoryStore,
) -> None:
    secret = "AKIA" + "Q3EGRV5X7MNB2WPT"
    body = f"deploy log\naws key {secret} used by payments\n".encode()
    with open_hold(backend) as hold:
        hold.store.put(body, media_type="text/plain", tool="deploy", sensitivity="restricted")
        answer = search(hold, "payments")
    assert answer.outcome == "resolved"
    assert secret not in answer.text
    assert answer.structured()["hits"][0]["masked"] is True


@pytest.mark.parametrize(
    ("arguments", "fix"),
    [
        ({"query": "   "}, "query"),
        ({"query": 7}, "query"),
        ({}, "query is required"),
        ({"query": "x", "limit": 0}, "limit"),
        ({"query": "x", "limit": 101}, "limit"),
        ({"query": "x", "budget": 0}, "budget"),
        ({"query": "x", "ref": "artifact://sha256/" + "0" * 64}, "unknown argument"),
        ({"query": " ".join(f"w{n}" for n in range(40))}, "words"),
    ],
)
def test_bad_search_arguments_answer_invalid_arguments_with_the_fix(
    backend: MemoryStore, arguments: dict[str, Any], fix: str
) -> None:
    with open_hold(backend) as hold:
        put(hold, NOTES)
        answer = hold.call_tool("artifact_search", arguments)
    assert answer.outcome == "invalid_arguments"
    assert fix in answer.text  # the message is the behaviour: it names what to fix
    assert answer.content is None


def test_every_spec_export_has_artifact_search(backend: MemoryStore) -> None:
    with open_hold(backend) as hold:
        exports = {
            "openai": [tool["function"]["name"] for tool in hold.tools.openai()],
            "responses": [tool["name"] for tool in hold.tools.openai_responses()],
            "anthropic": [tool["name"] for tool in hold.tools.anthropic()],
            "mcp": [tool["name"] for tool in hold.tools.mcp()],
        }
    for names in exports.values():
        assert "artifact_search" in names
    [spec] = [spec for spec in SPECS if spec.name == "artifact_search"]
    assert spec.parameters["required"] == ["query"]
    assert spec.mcp()["annotations"]["readOnlyHint"] is True
    json.dumps(spec.openai())  # JSON-ready


def test_hold_search_and_asearch_give_the_same_verified_hits(backend: MemoryStore) -> None:
    with open_hold(backend) as hold:
        notes = put(hold, NOTES)
        put(hold, OTHER)
        found = hold.search("Retries", limit=5)
        again = asyncio.run(hold.asearch("Retries", limit=5))
    assert found.ok
    assert [hit.ref for hit in found.hits] == [hit.ref for hit in again.hits] == [notes]
    assert found.hits[0].lines == (2,)
    assert found.content == again.content
    for shown in (repr(found), repr(found.hits), str(found.event)):
        assert "retries" not in shown.lower()


def test_hold_search_refuses_a_blank_query_with_a_usage_error(backend: MemoryStore) -> None:
    with open_hold(backend) as hold, pytest.raises(UsageError):
        hold.search("  \t ")


# -- the command line ---------------------------------------------------------------------------


def cli_run(root: Path, *args: str, input: bytes | None = None) -> Any:
    scope = ["--tenant", TENANT, "--user", USER, "--session", SESSION]
    return CliRunner().invoke(
        cli, ["--store", str(root), *scope, *args], input=input, catch_exceptions=False
    )


def test_cargohold_search_prints_the_verified_hits_with_line_numbers(tmp_path: Path) -> None:
    root = tmp_path / "store"
    stored = cli_run(root, "put", "-", "--media-type", "text/plain", input=NOTES)
    assert stored.exit_code == ExitCode.OK
    ref = stored.stdout.strip()
    cli_run(root, "put", "-", input=OTHER)

    raw = cli_run(root, "search", "payments", "TimeoutError", "--raw")
    facts = cli_run(root, "search", "payments", "--limit", "1", "--json")
    none = cli_run(root, "search", "nowhere-at-all")

    assert raw.exit_code == ExitCode.OK
    assert ref in raw.stdout
    assert "   2: the payments service retries on TimeoutError now" in raw.stdout
    assert "[cargohold:recovered]" not in raw.stdout
    assert facts.exit_code == ExitCode.OK
    document = json.loads(facts.stdout)
    assert [hit["ref"] for hit in document["hits"]] == [ref]
    assert document["event"]["operation"] == "rehydrate"
    assert (none.exit_code, json.loads(cli_run(root, "search", "zz", "--json").stdout)["hits"]) == (
        ExitCode.OK,
        [],
    )


def test_cargohold_search_over_its_budget_exits_7_and_prints_nothing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    cli_run(root, "put", "-", input=NOTES)

    over = cli_run(root, "search", "retries", "--budget", "40")

    assert over.exit_code == ExitCode.OVER_BUDGET
    assert over.stdout == ""


def test_cargohold_search_with_a_limit_out_of_range_is_a_usage_error(tmp_path: Path) -> None:
    assert cli_run(tmp_path / "store", "search", "x", "--limit", "0").exit_code == ExitCode.USAGE


def test_the_same_store_state_gives_the_same_search_answer_byte_for_byte(
    backend: MemoryStore,
) -> None:
    with open_hold(backend) as hold:
        put(hold, LOG)
        put(hold, NOTES)
        first = search(hold, "TimeoutError payments", budget=2048)
        second = search(hold, "TimeoutError payments", budget=2048)
    assert first.text == second.text
    assert first.structured() == second.structured()


def test_a_word_inside_a_very_long_line_is_shown_as_an_excerpt_naming_its_byte_offset(
    backend: MemoryStore,
) -> None:
    rows = [{"id": n, "note": "ok" if n != 700 else "payment Declined"} for n in range(2000)]
    body = json.dumps(rows, separators=(",", ":")).encode()  # one line of about 50 KB
    with open_hold(backend) as hold:
        ref = put(hold, body, media_type="application/json")
        answer = search(hold, "declined")
    assert answer.structured()["hits"][0]["lines"] == [1]
    offset = body.lower().index(b"declined")
    content = answer.content or ""
    assert f"1: [byte {offset}; line of {len(body):,} chars]" in content
    assert len(content.encode()) < 2000  # an excerpt, not the 50 KB line
    assert hold.read(ref, offset=offset, length=8).content == "Declined"


def test_a_rehydrate_event_names_its_reference_unless_it_is_a_search_that_found_nothing() -> None:
    from cargohold import ContentKind, Operation, Reason, RehydrateOutcome

    fields: dict[str, Any] = {
        "operation": Operation.REHYDRATE,
        "outcome": RehydrateOutcome.RESOLVED,
        "content_kind": ContentKind.RECOVERED_CONTEXT,
        "observed_bytes": 10,
        "limit_bytes": 100,
        "ref": None,
        "tool": "artifact_search",
        "agent_id": "main",
        "parent_agent_id": None,
        "depth": 0,
        "sequence": 1,
    }
    assert DecisionEvent(reason=Reason.NO_MATCH, **fields).ref is None
    with pytest.raises(UsageError):
        DecisionEvent(reason=Reason.VERIFIED, **fields)


WEIRD = "weird \\ \\E [ (?i) \x01x a|b 😀 café Straße \u0130 text\n".encode() * 30


@settings(max_examples=150, deadline=None)
@given(
    query=st.text(min_size=1, max_size=40),
    budget=st.integers(min_value=1, max_value=6000),
)
def test_any_query_is_an_answer_within_its_budget_or_invalid_arguments(
    query: str, budget: int
) -> None:
    store = MemoryStore()
    try:
        with open_hold(store) as hold:
            put(hold, WEIRD)
            put(hold, NOTES)
            answer = hold.call_tool("artifact_search", {"query": query, "budget": budget})
    finally:
        store.close()
    assert answer.outcome in {"resolved", "over_budget", "invalid_arguments"}
    if answer.structured().get("hits"):  # excerpts of stored bodies: never over the budget
        assert len((answer.content or "").encode()) <= budget


def test_a_no_hits_answer_quotes_as_much_of_the_query_as_its_budget_holds(
    backend: MemoryStore,
) -> None:
    query = " ".join(f"absentword{n}" for n in range(30))
    with open_hold(backend) as hold:
        put(hold, NOTES)
        whole = search(hold, query, budget=4096)
        for budget in (200, 300, 500):
            answer = search(hold, query, budget=budget)
            assert answer.outcome == "resolved"
            assert answer.structured()["hits"] == []
            assert answer.content is not None
            assert len(answer.content.encode()) <= budget
            quoted = answer.content.split(": no hits", 1)[0].removeprefix("artifact_search ")
            assert query.startswith(json.loads(quoted).removesuffix("\u2026"))
    assert json.loads(whole.content.split(": no hits", 1)[0].removeprefix("artifact_search ")) == (  # type: ignore[union-attr]
        query
    )


def test_a_no_hits_answer_whose_fixed_text_is_over_the_budget_is_over_budget(
    backend: MemoryStore,
) -> None:
    events = Events()
    with open_hold(backend, sinks=[events]) as hold:
        put(hold, NOTES)
        answer = search(hold, "nowhere-to-be-found", budget=40)
    assert answer.outcome == "over_budget"
    assert answer.content is None
    assert answer.structured()["hits"] == []
    [event] = events.events
    assert (event.outcome.value, event.reason.value, event.ref) == ("over_budget", "no_match", None)
