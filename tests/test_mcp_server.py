"""``cargohold mcp`` over stdio with the SDK client: the read tools and ``artifact://``
resources of one scope, bounded answers with their span, size and SHA-256."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from _require import require

require("mcp", "mcp")

from mcp.shared.exceptions import MCPError  # noqa: E402 - after the extra's check
from mcp_types import TextResourceContents  # noqa: E402

import cargohold  # noqa: E402
from cargohold._toolspecs import SPECS  # noqa: E402
from mcp_fixtures import Connected, child_env, cli, connect, stdio  # noqa: E402

SCOPE = {"tenant": "acme", "user": "ana", "session": "reads"}
BODY = "".join(f"{i},customer-{i % 41},{i * 0.5}\n" for i in range(20_000)).encode()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("read-server")


@pytest.fixture(scope="module")
def stored(workdir: Path) -> dict[str, str]:
    """Two artifacts: one of the server's session, one of another session of the same user."""
    with cargohold.open(workdir / "store", **SCOPE) as hold:
        mine = hold.store.put(BODY, media_type="text/csv", tool="export").ref
        theirs = hold.derive(session="elsewhere").store.put(b"x" * 50_000).ref
    return {"mine": str(mine), "theirs": str(theirs)}


@pytest.fixture(scope="module")
def server(workdir: Path, stored: dict[str, str]) -> Iterator[Connected]:
    command = cli(
        workdir / "store",
        SCOPE["session"],
        "--tenant",
        SCOPE["tenant"],
        "--user",
        SCOPE["user"],
        "mcp",
    )
    with connect(stdio(command, child_env(workdir)), mode="legacy") as client:
        yield client


def test_the_read_server_lists_exactly_the_read_tools_of_the_specs(server: Connected) -> None:
    tools = server.run(server.client.list_tools).tools

    assert [tool.name for tool in tools] == [spec.name for spec in SPECS]
    for tool in tools:
        assert tool.annotations is not None
        # every one reads only, but artifact_patch, which stores what it derives
        assert tool.annotations.read_only_hint is (tool.name != "artifact_patch")
        assert tool.annotations.destructive_hint in (None, False)


def test_an_artifact_pages_back_exactly_with_its_span_size_and_digest(
    server: Connected, stored: dict[str, str]
) -> None:
    body = server.read_all(stored["mine"], page=100_000)

    assert body == BODY
    assert stored["mine"].endswith(hashlib.sha256(body).hexdigest())


@pytest.mark.parametrize(
    ("tool", "arguments", "shown"),
    [
        ("artifact_grep", {"pattern": "^19999,"}, "19999,customer-32,9999.5"),
        ("artifact_read_lines", {"start_line": 5, "end_line": 6}, "4,customer-4,2.0"),
        ("artifact_read", {"offset": 0, "length": 40}, "1,customer-1,0.5"),
        ("artifact_info", {}, "text/csv"),
    ],
)
def test_the_structured_part_of_a_read_carries_the_answers_text_for_structured_only_clients(
    server: Connected, stored: dict[str, str], tool: str, arguments: dict[str, object], shown: str
) -> None:
    answer = server.call(tool, {"ref": stored["mine"], **arguments})

    assert not answer.is_error
    assert answer.structured_content is not None
    text = answer.content[0].text  # type: ignore[union-attr]
    assert answer.structured_content["text"] == text
    assert shown in answer.structured_content["text"]


def test_an_answer_over_the_callers_budget_returns_nothing_and_names_a_range_that_fits(
    server: Connected, stored: dict[str, str]
) -> None:
    answer = server.call("artifact_read", {"ref": stored["mine"], "length": 5000, "budget": 1000})

    assert answer.is_error
    assert answer.structured_content is not None
    assert answer.structured_content["outcome"] == "over_budget"
    assert answer.structured_content["sha256"] is None
    assert "offset=0" in answer.content[0].text  # type: ignore[union-attr]


def test_an_artifact_of_another_session_is_unauthorized_and_shows_nothing(
    server: Connected, stored: dict[str, str]
) -> None:
    answer = server.call("artifact_read", {"ref": stored["theirs"]})

    assert answer.is_error
    assert answer.structured_content is not None
    assert answer.structured_content["outcome"] == "unauthorized"
    assert "xxxx" not in answer.content[0].text  # type: ignore[union-attr]


def test_resources_list_names_the_scopes_artifacts_and_read_returns_one_whole(
    server: Connected, stored: dict[str, str]
) -> None:
    listed = server.run(server.client.list_resources).resources
    read = server.run(server.client.read_resource, stored["mine"])

    assert [str(resource.uri) for resource in listed] == [stored["mine"]]
    (contents,) = read.contents
    assert isinstance(contents, TextResourceContents)
    assert contents.text.encode() == BODY
    assert contents.mime_type == "text/csv"


def test_resources_read_of_a_malformed_reference_is_an_invalid_params_error(
    server: Connected,
) -> None:
    with pytest.raises(MCPError) as refused:
        server.run(server.client.read_resource, "artifact://sha256/NOT-HEX")

    assert refused.value.error.code == -32602


def test_a_tool_that_is_not_a_read_tool_is_refused(server: Connected) -> None:
    with pytest.raises(MCPError):
        server.call("rm_rf", {})


def test_artifact_patch_is_served_and_checks_the_scope_before_deriving_anything(
    server: Connected, stored: dict[str, str]
) -> None:
    edits = [{"start_line": 1, "end_line": 1, "lines": ["id,customer,total"]}]

    refused = server.call("artifact_patch", {"ref": stored["theirs"], "edits": edits})

    assert refused.is_error
    assert refused.structured_content is not None
    assert refused.structured_content["outcome"] == "unauthorized"
    listed = server.run(server.client.list_resources).resources
    assert stored["theirs"] not in [str(resource.uri) for resource in listed]
    assert len(listed) == 1  # nothing was derived
