"""The redaction note: every view of a redacted result tells the model what was taken out
(kinds and line numbers, never a value), whatever its preview shows."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cargohold import Budget, MemoryStore, Offloader, Ref, Scope, ScopedStore, render_stub

KiB = 1024
NOTE = "credentials redacted before storing: "
INLINE_NOTE = "[cargohold] credentials redacted from this result: "
"""The note of a result that stayed inline: it was never stored, so it says "from this result"."""
# A GitHub token's shape (the prefix and 36 characters); assembled so no scanner flags this file.
TOKEN = "gh" + "p_" + "Zq7" * 12


def _scoped() -> ScopedStore:
    return ScopedStore(MemoryStore(), Scope("acme", "ana", "note"))


def _log(lines: int, secret_at: list[int]) -> str:
    out = []
    for number in range(1, lines + 1):
        if number in secret_at:
            out.append(f"2026-03-01T10:00:00Z ERROR push failed token={TOKEN}")
        else:
            out.append(f"2026-03-01T10:00:00Z INFO request {number} status=200 latency_ms=12")
    return "\n".join(out) + "\n"


def _note_of(text: str) -> str | None:
    for line in text.split("\n"):
        if line.startswith(NOTE):
            return line
    return None


def test_a_stub_names_what_was_redacted_even_when_its_preview_shows_no_marker() -> None:
    # The token sits in the middle of a 200 KiB log, far past what a preview quotes from it.
    text = _log(3000, secret_at=[1517, 2203])
    result = Offloader(_scoped(), threshold=32 * KiB).offload(text, tool="tail_log")

    assert result.reason.value == "credential_redacted"
    assert result.stub is not None
    lines = result.stub.text.split("\n")
    assert lines[2].startswith("kept out of context |")
    assert lines[3] == NOTE + "github_token (lines 1,517, 2,203)"
    assert TOKEN not in result.stub.text
    assert result.stub.size_bytes <= result.stub.limit


def test_a_stub_of_bytes_without_markers_has_no_redaction_note() -> None:
    result = Offloader(_scoped(), threshold=32 * KiB).offload(_log(3000, []), tool="tail_log")

    assert result.stub is not None
    assert _note_of(result.stub.text) is None


_kinds = st.sampled_from(
    ["github_token", "jwt", "aws_access_key_id", "private_key", "secret_assignment"]
)


@settings(max_examples=150, deadline=None)
@given(
    size=st.integers(0, 120_000),
    markers=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), _kinds), min_size=1, max_size=60),
    budget=st.sampled_from(list(Budget)),
    media_type=st.sampled_from(["text/plain", "application/json", "text/csv"]),
)
def test_a_stub_with_a_redaction_note_is_never_over_its_budget(
    size: int, markers: list[tuple[float, str]], budget: Budget, media_type: str
) -> None:
    body = bytearray(b"".join(b"line %d of the tool's output\n" % i for i in range(size // 24)))
    for where, kind in sorted(markers, reverse=True):
        at = int(where * len(body))
        body[at:at] = f"[REDACTED:{kind}]".encode()
    data = bytes(body)

    stub = render_stub(data, Ref.of(data), media_type=media_type, budget=budget)

    assert stub.size_bytes <= stub.limit
    note = _note_of(stub.text)
    assert note is not None
    named = set(re.findall(r"([a-z0-9_]+) \(line", note))
    assert named <= {kind for _, kind in markers}
    assert named  # at least the first kind; every kind when it fits in the note's bytes


# -- MCP ----------------------------------------------------------------------------------------


def _mcp_hold(tmp_path: Path) -> Any:
    import cargohold

    config = tmp_path / "cargohold.toml"
    config.write_text("")
    return cargohold.open("memory://", session="mcp", config_file=config)


def test_a_small_mcp_text_part_is_redacted_in_place_and_followed_by_its_note(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp_types")
    from mcp_types import CallToolResult, TextContent

    from cargohold.mcp import offload_result

    text = json.dumps({"remote": "origin", "token": TOKEN})
    with _mcp_hold(tmp_path) as hold:
        offloaded = offload_result(
            hold, CallToolResult(content=[TextContent(text=text)]), tool="git_remote"
        )

    first, note = offloaded.content
    assert isinstance(first, TextContent)
    assert json.loads(first.text) == {"remote": "origin", "token": "[REDACTED:github_token]"}
    assert isinstance(note, TextContent)
    assert note.text == INLINE_NOTE + "github_token (line 1)"


def test_a_redacted_embedded_resource_keeps_its_uri(tmp_path: Path) -> None:
    pytest.importorskip("mcp_types")
    from mcp_types import CallToolResult, EmbeddedResource, TextContent, TextResourceContents

    from cargohold.mcp import offload_result

    resource = TextResourceContents(
        uri="file:///repo/.git/config", mime_type="text/plain", text=f"[remote]\ntoken={TOKEN}\n"
    )
    result = CallToolResult(content=[EmbeddedResource(resource=resource)])
    with _mcp_hold(tmp_path) as hold:
        offloaded = offload_result(hold, result, tool="read_resource")

    kept, note = offloaded.content
    assert isinstance(kept, EmbeddedResource)
    assert isinstance(kept.resource, TextResourceContents)
    assert (kept.resource.uri, kept.resource.mime_type) == (resource.uri, "text/plain")
    assert kept.resource.text == "[remote]\ntoken=[REDACTED:github_token]\n"
    assert isinstance(note, TextContent)
    assert note.text.endswith("github_token (line 2)")


def test_small_redacted_structured_content_stays_data_and_its_note_joins_the_content(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp_types")
    from mcp_types import CallToolResult, TextContent

    from cargohold.mcp import offload_result

    result = CallToolResult(content=[], structured_content={"token": TOKEN, "ok": True})
    with _mcp_hold(tmp_path) as hold:
        offloaded = offload_result(hold, result, tool="login")

    assert offloaded.structured_content == {"token": "[REDACTED:github_token]", "ok": True}
    assert [part.text for part in offloaded.content if isinstance(part, TextContent)] == [
        INLINE_NOTE + "github_token (line 1)"
    ]


def test_the_stub_object_of_redacted_structured_content_names_kinds_and_lines(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp_types")
    from mcp_types import CallToolResult

    from cargohold.mcp import offload_result, rewrite_output_schema

    rows = [{"id": i, "note": "fine " * 20} for i in range(600)]
    rows[300]["token"] = TOKEN
    result = CallToolResult(content=[], structured_content={"rows": rows})
    with _mcp_hold(tmp_path) as hold:
        offloaded = offload_result(hold, result, tool="list_rows")

    assert offloaded.structured_content is not None
    facts = offloaded.structured_content["cargohold"]
    assert facts["reason"] == "credential_redacted"
    assert facts["redacted"] == [{"kind": "github_token", "lines": [1]}]
    # A client validating against the widened output schema is told of the field.
    assert '"redacted"' in json.dumps(rewrite_output_schema({"type": "object"}))
    assert TOKEN not in offloaded.model_dump_json()


# -- cargohold put ------------------------------------------------------------------------------


def test_cargohold_put_names_the_redacted_kinds_and_lines_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from cargohold.cli import cli

    monkeypatch.delenv("CARGOHOLD_SECRETS_POLICY", raising=False)
    (tmp_path / "cargohold.toml").write_text("")
    store = ["--store", str(tmp_path / "store"), "--config", str(tmp_path / "cargohold.toml")]
    scope = ["--tenant", "acme", "--user", "ana", "--session", "put"]
    data = f"[remote]\nurl = origin\ntoken = {TOKEN}\n".encode()

    stored = CliRunner().invoke(cli, [*store, *scope, "put", "-"], input=data)

    assert stored.exit_code == 0, stored.output
    assert stored.stdout.strip().startswith("artifact://sha256/")
    assert "cargohold: " + NOTE + "github_token (line 3)" in stored.stderr.splitlines()
    assert TOKEN not in stored.output
