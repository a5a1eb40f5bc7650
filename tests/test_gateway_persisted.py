"""Claude Code's ``<persisted-output>`` notice, through the gateway with the anthropic SDK: the
file it names becomes a stub, read only from the configured tool-results folder."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import pytest
from tests.gateway_fixtures import FakeProvider, serve

import cargohold
from cargohold.gateway import GatewayConfig, build_app

REF = re.compile(r"artifact://sha256/[0-9a-f]{64}")


def notice(path: str, body: str) -> str:
    """The notice as Claude Code 2.1 writes it into the tool result."""
    size = f"{len(body.encode()) / 1024:.1f}KB"
    return (
        f"<persisted-output>\nOutput too large ({size}). Full output saved to: {path}\n\n"
        f"Preview (first 2KB):\n{body[:2048]}\n...\n</persisted-output>"
    )


def build_output(lines: int = 20_000) -> str:
    return "".join(f"[{i:05d}] PASS tests/unit/test_{i % 300}.py::case_{i}\n" for i in range(lines))


@dataclass
class Rig:
    fake: FakeProvider
    hold: cargohold.Hold
    client: anthropic.Anthropic
    folder: Path

    def send(self, result: str) -> Any:
        self.client.messages.create(
            model="claude-fake",
            max_tokens=8,
            messages=[
                {"role": "user", "content": "run the tests"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_9", "content": result}
                    ],
                },
            ],
        )
        return self.fake.received[-1].json()["messages"][2]["content"][0]["content"]


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[Rig]:
    folder = tmp_path / "projects"
    (folder / "-work-app" / "sess-1" / "tool-results").mkdir(parents=True)
    fake = FakeProvider()
    config_file = tmp_path / "cargohold.toml"
    config_file.write_text("max_artifact_bytes = 4000000\n")
    with (
        cargohold.open(
            "memory://", tenant="t", user="u", session="s", config_file=config_file
        ) as hold,
        serve(fake.app()) as upstream,
        serve(build_app(hold, GatewayConfig(upstream=upstream, tool_results=folder))) as url,
        anthropic.Anthropic(api_key="k", base_url=url, max_retries=0) as client,
    ):
        yield Rig(fake, hold, client, folder)


def spill(rig: Rig, body: str | bytes, name: str = "toolu_9.txt") -> Path:
    path = rig.folder / "-work-app" / "sess-1" / "tool-results" / name
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    return path


def test_a_persisted_output_notice_becomes_the_stub_of_the_file_it_names(gw: Rig) -> None:
    body = build_output()  # about 900 KB
    path = spill(gw, body)

    forwarded = gw.send(notice(str(path), body))

    assert forwarded.startswith("[cargohold]")
    assert "<persisted-output>" not in forwarded
    (ref,) = set(REF.findall(forwarded))
    assert gw.hold.grep(ref, "case_19999$").content is not None
    read = gw.hold.read(ref, length=1024 * 1024, budget=1024 * 1024)
    assert read.content == body


def test_the_same_notice_on_the_next_turn_gives_the_same_stub(gw: Rig) -> None:
    body = build_output(5000)
    path = spill(gw, body)

    assert gw.send(notice(str(path), body)) == gw.send(notice(str(path), body))


def test_a_notice_naming_a_file_outside_the_folder_is_left_as_it_is(
    gw: Rig, tmp_path: Path
) -> None:
    body = build_output(5000)
    outside = tmp_path / "elsewhere.txt"
    outside.write_text(body)
    text = notice(str(outside), body)

    assert gw.send(text) == text


def test_a_notice_whose_path_climbs_out_of_the_folder_is_left_as_it_is(
    gw: Rig, tmp_path: Path
) -> None:
    body = build_output(5000)
    (tmp_path / "secret.txt").write_text(body)
    climbing = str(gw.folder / "-work-app" / ".." / ".." / "secret.txt")
    text = notice(climbing, body)

    assert gw.send(text) == text


def test_a_notice_naming_a_symlink_in_the_folder_is_left_as_it_is(gw: Rig, tmp_path: Path) -> None:
    body = build_output(5000)
    target = tmp_path / "target.txt"
    target.write_text(body)
    link = gw.folder / "-work-app" / "sess-1" / "tool-results" / "toolu_9.txt"
    os.symlink(target, link)
    text = notice(str(link), body)

    assert gw.send(text) == text


def test_a_notice_whose_folder_is_a_symlink_is_left_as_it_is(gw: Rig, tmp_path: Path) -> None:
    body = build_output(5000)
    real = tmp_path / "real-session"
    (real / "tool-results").mkdir(parents=True)
    (real / "tool-results" / "toolu_9.txt").write_text(body)
    os.symlink(real, gw.folder / "-work-app" / "linked")
    text = notice(str(gw.folder / "-work-app" / "linked" / "tool-results" / "toolu_9.txt"), body)

    assert gw.send(text) == text


def test_a_notice_naming_a_file_over_the_size_limit_is_left_as_it_is(gw: Rig) -> None:
    body = build_output(100_000)  # about 4.6 MB, over the 4,000,000-byte limit configured
    path = spill(gw, body)
    text = notice(str(path), body)

    assert gw.send(text) == text


def test_a_notice_naming_a_relative_path_or_a_directory_is_left_as_it_is(gw: Rig) -> None:
    body = build_output(5000)
    spill(gw, body)
    relative = notice("-work-app/sess-1/tool-results/toolu_9.txt", body)
    directory = notice(str(gw.folder / "-work-app"), body)

    assert gw.send(relative) == relative
    assert gw.send(directory) == directory


@pytest.mark.parametrize(
    "place",
    [
        ("-work-app", "sess-1", "tool-results", "toolu_9.log"),
        ("-work-app", "sess-1", "toolu_9.txt"),
        ("-work-app", "sess-1", "notes", "toolu_9.txt"),
        ("-work-app", "sess-1", "tool-results", "deeper", "toolu_9.txt"),
        ("-work-app", "sess-1.jsonl"),  # a session's transcript
    ],
)
def test_a_notice_naming_a_file_outside_a_sessions_tool_results_is_left_as_it_is(
    gw: Rig, place: tuple[str, ...]
) -> None:
    body = build_output(5000)
    path = gw.folder.joinpath(*place)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    text = notice(str(path), body)

    assert gw.send(text) == text


@pytest.mark.parametrize("name", ["toolu_other.txt", "bw16valb6.txt"])
def test_a_notice_naming_another_spill_it_holds_no_preview_of_is_left_as_it_is(
    gw: Rig, name: str
) -> None:
    other = build_output(5000).replace("PASS", "FAIL")
    path = spill(gw, other, name=name)
    text = notice(str(path), build_output(5000))

    assert gw.send(text) == text


def test_a_shell_spill_named_by_its_own_id_that_opens_with_the_preview_becomes_its_stub(
    gw: Rig,
) -> None:
    body = build_output(5000)
    path = spill(gw, body, name="bw16valb6.txt")  # as Claude Code 2.1 names a Bash spill

    forwarded = gw.send(notice(str(path), body))

    (ref,) = set(REF.findall(forwarded))
    assert gw.hold.read(ref, length=1024 * 1024, budget=1024 * 1024).content == body


def test_a_notice_naming_this_results_structured_spill_becomes_its_stub(gw: Rig) -> None:
    body = build_output(5000)
    path = spill(gw, body, name="toolu_9.json")

    forwarded = gw.send(notice(str(path), body))

    (ref,) = set(REF.findall(forwarded))
    assert gw.hold.read(ref, length=1024 * 1024, budget=1024 * 1024).content == body


def test_a_notice_naming_a_small_binary_spill_is_left_as_it_is(gw: Rig) -> None:
    data = bytes(range(256)) * 8  # 2 KiB, not UTF-8: under the heavy threshold
    path = spill(gw, data)
    text = notice(str(path), "binary")

    assert gw.send(text) == text
    assert [e for e in gw.hold.store.artifacts()] == []
