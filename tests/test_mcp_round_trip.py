"""The round trip by reference through ``cargohold proxy``, end to end over stdio.

The official SDK client (standing in for the model's client) fetches a ~300 KB JSON page from
our fixture server through the proxy, changes one row with ``artifact_patch`` and passes the new
reference to ``update_page``, an opted-in tool (``--ref-arguments update_page``). The fixture
writes what it received to a file: it must be exactly the patched document, while every byte the
client sent and received on the wire for the whole exchange stays under 10 KB.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _require import require

require("mcp", "mcp")

from mcp_types import CallToolResult, TextContent  # noqa: E402 - after the extra's check

from cargohold._toolspecs import SPECS  # noqa: E402
from mcp_fixtures import (  # noqa: E402
    HEAVY_SERVER,
    Connected,
    Wire,
    child_env,
    cli,
    connect,
    counted_stdio,
    stdio,
    stubbed_parts,
)

sys.path.insert(0, str(HEAVY_SERVER.parent))
import heavy_server  # noqa: E402 - the fixture's own generators: the bytes the upstream sent

SESSION = "round-trip-tests"
ROWS = 4000
ROW = 1234
WIRE_LIMIT = 10_000


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("round-trip")


@pytest.fixture(scope="module")
def wire() -> Wire:
    return Wire()


@pytest.fixture(scope="module")
def proxied(workdir: Path, wire: Wire) -> Iterator[Connected]:
    command = cli(
        workdir / "store",
        SESSION,
        "proxy",
        "--ref-arguments",
        "update_page",
        "--",
        sys.executable,
        str(HEAVY_SERVER),
    )
    env = child_env(workdir, HEAVY_FIXTURE_RECEIVED=str(workdir / "received.jsonl"))
    with connect(counted_stdio(stdio(command, env), wire), mode="legacy") as client:
        yield client


def received(workdir: Path) -> list[dict[str, Any]]:
    """What the upstream's update_page got, as it recorded it (size and SHA-256 per call)."""
    path = workdir / "received.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def the_page_ref(proxied: Connected) -> str:
    (part,) = stubbed_parts(proxied.call("get_page", {"rows": ROWS}))
    return part.ref


def test_a_row_patched_by_reference_reaches_the_upstream_exactly_within_10_kb_on_the_wire(
    proxied: Connected, workdir: Path, wire: Wire
) -> None:
    document = heavy_server.page(ROWS).model_dump()
    original = heavy_server.page_text(ROWS).encode()
    status = document["rows"][ROW]["status"]
    patched = copy.deepcopy(document)
    patched["rows"][ROW]["status"] = "disputed"
    expected = json.dumps(patched, indent=2).encode()  # the page as the upstream writes it
    assert len(original) > 300_000
    already = len(received(workdir))

    proxied.run(proxied.client.list_tools)  # the tool definitions: the client's, once a session
    wire.reset()
    wire.counting = True
    try:
        fetched = proxied.call("get_page", {"rows": ROWS})
        (part,) = stubbed_parts(fetched)
        looked = proxied.call("artifact_query", {"ref": part.ref, "expression": f"rows[{ROW}]"})
        patch = proxied.call(
            "artifact_patch",
            {
                "ref": part.ref,
                "json_patch": [
                    {"op": "test", "path": f"/rows/{ROW}/status", "value": status},
                    {"op": "replace", "path": f"/rows/{ROW}/status", "value": "disputed"},
                ],
            },
        )
        assert patch.structured_content is not None
        new_ref = patch.structured_content["ref"]
        written = proxied.call("update_page", {"body": new_ref})
    finally:
        wire.counting = False

    assert part.ref == "artifact://sha256/" + hashlib.sha256(original).hexdigest()
    assert json.loads(text_of(looked).splitlines()[1]) == document["rows"][ROW]
    assert not patch.is_error, text_of(patch)
    assert new_ref == "artifact://sha256/" + hashlib.sha256(expected).hexdigest()
    facts = patch.structured_content
    assert (facts["outcome"], facts["parent"], facts["size"]) == (
        "resolved",
        part.ref,
        len(expected),
    )
    assert facts["change"]["formatting"] == "preserved"
    assert (facts["change"]["lines_removed"], facts["change"]["lines_added"]) == (1, 1)
    upstream = {"bytes": len(expected), "sha256": hashlib.sha256(expected).hexdigest()}
    assert received(workdir)[already:] == [upstream]
    assert json.loads(text_of(written)) == upstream
    assert wire.total < WIRE_LIMIT, wire.messages
    assert [(way, method) for way, method, _ in wire.messages] == [
        ("sent", "tools/call"),
        ("received", "result"),
    ] * 4


def test_the_patched_artifact_reads_back_as_the_patched_bytes_and_the_original_is_untouched(
    proxied: Connected,
) -> None:
    ref = the_page_ref(proxied)
    patch = proxied.call(
        "artifact_patch",
        {"ref": ref, "json_patch": [{"op": "remove", "path": f"/rows/{ROW}"}]},
    )
    assert patch.structured_content is not None
    new_ref = patch.structured_content["ref"]

    document = heavy_server.page(ROWS).model_dump()
    del document["rows"][ROW]
    assert proxied.read_all(new_ref) == json.dumps(document, indent=2).encode()
    assert proxied.read_all(ref) == heavy_server.page_text(ROWS).encode()
    info = proxied.call("artifact_info", {"ref": new_ref})
    assert json.loads(text_of(info))["parent"] == ref


def test_a_patch_that_does_not_apply_is_an_error_and_the_upstream_receives_nothing(
    proxied: Connected, workdir: Path
) -> None:
    ref = the_page_ref(proxied)
    already = len(received(workdir))

    patch = proxied.call(
        "artifact_patch",
        {
            "ref": ref,
            "json_patch": [{"op": "test", "path": f"/rows/{ROW}/status", "value": "no such"}],
        },
    )

    assert patch.is_error
    assert patch.structured_content is not None
    assert patch.structured_content["outcome"] == "conflict"
    assert patch.structured_content["ref"] == ref  # names what it was asked, nothing new
    assert "change" not in patch.structured_content
    assert received(workdir)[already:] == []


def test_the_proxy_lists_artifact_patch_as_a_tool_that_stores_but_destroys_nothing(
    proxied: Connected,
) -> None:
    tools = {tool.name: tool for tool in proxied.run(proxied.client.list_tools).tools}

    assert {spec.name for spec in SPECS} <= set(tools)
    patch = tools["artifact_patch"]
    assert patch.annotations is not None
    assert patch.annotations.read_only_hint is False
    assert patch.annotations.destructive_hint is False
    assert "json_patch" in patch.input_schema["properties"]
    assert "artifact_patch" in (tools["update_page"].description or "")


def test_the_round_trips_events_name_the_patch_and_hold_no_body_or_owner(
    proxied: Connected, workdir: Path
) -> None:
    ref = the_page_ref(proxied)
    proxied.call(
        "artifact_patch",
        {"ref": ref, "edits": [{"start_line": 3, "end_line": 3, "lines": ["    {  "]}]},
    )

    log = (workdir / "events.jsonl").read_text()
    events = [json.loads(line) for line in log.splitlines()]
    patches = [e for e in events if e["tool"] == "artifact_patch"]
    kinds = {(e["operation"], e["outcome"], e["content_kind"], e["reason"]) for e in patches}
    assert ("rehydrate", "resolved", "tool_arguments", "verified") in kinds
    assert ("offload", "offloaded", "tool_result", "derived") in kinds
    assert "c-00042" not in log  # a customer id from the page's rows
    assert str(workdir) not in log
    assert SESSION not in log
