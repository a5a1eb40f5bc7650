"""artifact_search on every surface: ``cargohold mcp`` and ``cargohold proxy`` over stdio with the
official SDK client, the LangChain read tools and the OpenAI Agents adapter's read tools.

The process tests run the real command line against a local store; the in-process ones run on
the memory store.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _require import require

require("mcp", "mcp")

import cargohold  # noqa: E402 - after the extra's check
from cargohold import parse_segment  # noqa: E402
from mcp_fixtures import HEAVY_SERVER, Connected, child_env, cli, connect, stdio  # noqa: E402

sys.path.insert(0, str(HEAVY_SERVER.parent))
import heavy_server  # noqa: E402 - the upstream's own generators

SCOPE = {"tenant": "acme", "user": "ana", "session": "search-server"}
NOTES = b"release notes\nthe payments service retries on TimeoutError now\nnothing else\n"
THEIRS = b"a body of another session: payments ledger\n" * 100


# -- cargohold mcp ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("search-surfaces")


@pytest.fixture(scope="module")
def stored(workdir: Path) -> dict[str, str]:
    with cargohold.open(workdir / "store", **SCOPE) as hold:
        mine = hold.store.put(NOTES, media_type="text/plain", tool="notes").ref
        theirs = hold.derive(session="elsewhere").store.put(THEIRS, media_type="text/plain").ref
    return {"mine": str(mine), "theirs": str(theirs)}


@pytest.fixture(scope="module")
def server(workdir: Path, stored: dict[str, str]) -> Iterator[Connected]:
    scope = ["--tenant", SCOPE["tenant"], "--user", SCOPE["user"], "mcp"]
    command = cli(workdir / "store", SCOPE["session"], *scope)
    with connect(stdio(command, child_env(workdir)), mode="legacy") as client:
        yield client


def test_the_mcp_server_answers_artifact_search_with_the_scopes_verified_hits(
    server: Connected, stored: dict[str, str]
) -> None:
    answer = server.call("artifact_search", {"query": "payments TimeoutError"})

    assert not answer.is_error
    facts = answer.structured_content
    assert facts is not None
    assert [hit["ref"] for hit in facts["hits"]] == [stored["mine"]]
    assert facts["hits"][0]["lines"] == [2]
    text = answer.content[0].text  # type: ignore[union-attr]
    assert text.startswith("[cargohold:recovered]")
    assert "2: the payments service retries on TimeoutError now" in text
    assert stored["theirs"] not in text


def test_the_mcp_server_never_shows_another_sessions_artifact_in_a_search(
    server: Connected, stored: dict[str, str]
) -> None:
    answer = server.call("artifact_search", {"query": "ledger"})

    assert not answer.is_error
    assert answer.structured_content is not None
    assert answer.structured_content["hits"] == []
    assert answer.structured_content["left_out"] == 0
    assert stored["theirs"] not in answer.content[0].text  # type: ignore[union-attr]


def test_a_bad_search_over_mcp_is_an_error_answer_that_says_how_to_fix_it(
    server: Connected,
) -> None:
    answer = server.call("artifact_search", {"query": "x", "limit": 500})

    assert answer.is_error
    assert answer.structured_content is not None
    assert answer.structured_content["outcome"] == "invalid_arguments"


# -- cargohold proxy ----------------------------------------------------------------------------


def test_the_proxy_finds_a_stubbed_result_by_the_words_it_holds(tmp_path: Path) -> None:
    upstream = [sys.executable, str(HEAVY_SERVER)]
    command = cli(tmp_path / "store", "search-proxy", "proxy", "--", *upstream)
    with connect(stdio(command, child_env(tmp_path)), mode="legacy") as proxied:
        stubbed = proxied.call("heavy_text", {"size": 200_000})
        [link] = [part for part in stubbed.content if part.type == "resource_link"]
        answer = proxied.call("artifact_search", {"query": "worker-3 ERROR", "limit": 3})

    assert not answer.is_error
    assert answer.structured_content is not None
    [hit] = answer.structured_content["hits"]
    assert hit["ref"] == str(link.uri)
    body = heavy_server.log_text(200_000).splitlines()
    holding = [n for n, line in enumerate(body, 1) if "worker-3" in line or "ERROR" in line]
    assert hit["lines"] == holding[:5]
    assert hit["matched_lines"] == len(holding)
    text = answer.content[0].text  # type: ignore[union-attr]
    for number in holding[:5]:
        assert f"   {number}: {body[number - 1]}\n" in text


# -- LangChain ----------------------------------------------------------------------------------


def test_the_langchain_read_tools_search_in_the_scope_of_the_calling_thread() -> None:
    require("langchain.agents", "langchain")
    from cargohold.langchain import read_tools

    with cargohold.open("memory://", tenant="acme", user="ana", session="app") as hold:
        mine = hold.for_session("t-mine").store.put(NOTES, media_type="text/plain").ref
        search = {tool.name: tool for tool in read_tools(hold)}["artifact_search"]
        call = {
            "name": "artifact_search",
            "args": {"query": "retries"},
            "id": "s1",
            "type": "tool_call",
        }
        found = search.invoke(call, {"configurable": {"thread_id": "t-mine"}})
        other = search.invoke({**call, "id": "s2"}, {"configurable": {"thread_id": "t-other"}})
        key = hold.store.marker_key()

    assert found.status == "success"
    assert parse_segment(found.content, key=key) is not None
    assert [hit["ref"] for hit in found.artifact["hits"]] == [str(mine)]
    assert other.status == "success"
    assert other.artifact["hits"] == []
    assert str(mine) not in other.content


# -- OpenAI Agents SDK --------------------------------------------------------------------------


def test_the_agents_adapter_serves_artifact_search_to_the_model() -> None:
    require("agents", "openai-agents")
    from agents import Agent, Runner
    from agents.testing import ScriptedModel, assistant_message, function_call

    from cargohold.openai_agents import AgentsAdapter

    with cargohold.open("memory://", tenant="acme", user="ana", session="base") as hold:
        mine = hold.store.put(NOTES, media_type="text/plain").ref
        cargo = AgentsAdapter(hold)
        assert "artifact_search" in [tool.name for tool in cargo.read_tools()]
        model = ScriptedModel(
            [
                [function_call("artifact_search", {"query": "TimeoutError"}, call_id="s-1")],
                [assistant_message("found it")],
            ]
        )
        agent = Agent(name="ops", model=model, tools=cargo.read_tools())
        config = cargo.run_config(check_window=False, tracing_disabled=True)
        asyncio.run(Runner.run(agent, "where did payments time out?", run_config=config))
        key = hold.store.marker_key()

    outputs: list[Any] = [
        item["output"]
        for item in model.calls[1].input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    [output] = outputs
    assert parse_segment(output, key=key) is not None
    assert str(mine) in output
    assert "2: the payments service retries on TimeoutError now" in output
