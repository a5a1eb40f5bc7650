"""``cargohold guard REQUEST.json``: exit 0, 9 or 10, one line per finding, never content."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cargohold.cli import ExitCode, cli
from cargohold.cli._guard import MAX_REQUEST_BYTES, guard
from guard_fixtures import CANARY

FIXTURES = Path(__file__).parent / "fixtures" / "guard"

# Until the command is registered in cli/_app.py, the tests register it on the group themselves.
if "guard" not in cli.commands:
    cli.add_command(guard)


@pytest.fixture(autouse=True)
def events_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "state" / "events.jsonl"
    monkeypatch.setenv("CARGOHOLD_EVENTS_LOG", str(path))
    monkeypatch.chdir(tmp_path)
    return path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["--store", "memory://", "guard", *args])


def events(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_clean_request_may_go(events_log: Path) -> None:
    result = run(str(FIXTURES / "openai_chat_clean.json"), "--format", "openai-chat")
    assert result.exit_code == ExitCode.OK, result.output
    assert result.output.startswith("ok  6 messages")
    assert events(events_log) == []


def test_a_clean_responses_request_may_go() -> None:
    result = run(str(FIXTURES / "openai_responses_clean.json"), "--format", "openai-responses")
    assert result.exit_code == ExitCode.OK, result.output


def test_a_leak_exits_9_with_one_line_per_finding_and_no_content(events_log: Path) -> None:
    result = run(str(FIXTURES / "openai_chat_leak.json"), "--format", "openai-chat")
    assert result.exit_code == ExitCode.CONTEXT_LEAK == 9
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("leak  messages[2].content (message 2, tool_result, ")
    assert "from tool read_log" in lines[0]
    assert lines[1].startswith("leak  messages[3].content[1].image_url.url (message 3, attachment")
    assert CANARY not in result.output
    assert "booking" not in result.output
    recorded = events(events_log)
    assert [e["outcome"] for e in recorded] == ["llm.context_leak"]
    assert CANARY not in json.dumps(recorded)


def test_a_leak_as_json_lists_every_finding() -> None:
    result = run(str(FIXTURES / "anthropic_leak.json"), "--format", "anthropic", "--json")
    assert result.exit_code == ExitCode.CONTEXT_LEAK
    report = json.loads(result.stdout)
    assert [f["path"] for f in report["findings"]] == ["messages[0].content[1].source.data"]
    assert report["findings"][0]["where"] == "attachment"


def test_langchain_message_dicts_are_checked() -> None:
    result = run(str(FIXTURES / "langchain_leak.json"), "--format", "langchain")
    assert result.exit_code == ExitCode.CONTEXT_LEAK
    assert "messages[2].content" in result.stdout
    assert "from tool grep" in result.stdout


def test_a_window_overflow_exits_10(events_log: Path) -> None:
    result = run(str(FIXTURES / "openai_chat_window.json"), "--format", "openai-chat")
    assert result.exit_code == ExitCode.CONTEXT_WINDOW == 10
    assert result.stdout.startswith("window  ")
    assert [e["outcome"] for e in events(events_log)] == ["llm.context_window_exceeded"]


def test_model_and_margin_options_move_the_limit() -> None:
    path = str(FIXTURES / "openai_chat_window.json")
    assert run(path, "--format", "openai-chat", "--model", "gpt-4.1").exit_code == ExitCode.OK
    result = run(path, "--format", "openai-chat", "--model", "gpt-4o", "--margin", "127000")
    assert result.exit_code == ExitCode.CONTEXT_WINDOW


def test_the_threshold_option_moves_the_bar() -> None:
    path = str(FIXTURES / "openai_chat_leak.json")
    assert run(path, "--format", "openai-chat", "--threshold", "1000000").exit_code == ExitCode.OK


def test_a_threshold_option_above_the_largest_read_is_a_usage_error() -> None:
    path = str(FIXTURES / "openai_chat_leak.json")
    result = run(path, "--format", "openai-chat", "--threshold", "1048577")
    assert result.exit_code == ExitCode.USAGE
    assert "--threshold" in result.output
    assert run(path, "--format", "openai-chat", "--threshold", "1048576").exit_code == ExitCode.OK


def test_a_file_that_is_not_json_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert run(str(bad), "--format", "openai-chat").exit_code == ExitCode.USAGE


def test_a_request_of_the_wrong_shape_is_a_usage_error(tmp_path: Path) -> None:
    wrong = tmp_path / "list.json"
    wrong.write_text("[]")
    assert run(str(wrong), "--format", "anthropic").exit_code == ExitCode.USAGE


# -- bounded input: endless bytes, huge files, JSON nested too deeply ---------------------------


def _subprocess_guard(
    *args: str, stdin: Any = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    """``cargohold guard`` in its own process: the input is a device or a pipe of its own. The
    harness bounds it (a timeout), never an assert on time."""
    script = Path(sys.executable).parent / "cargohold"
    command = [str(script), "--store", "memory://", "guard", *args]
    return subprocess.run(command, stdin=stdin, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("how", ["path", "stdin"])
def test_endless_input_is_refused_past_the_limit_not_read_forever(how: str) -> None:
    if how == "path":
        done = _subprocess_guard("/dev/zero", "--format", "openai-chat")
    else:
        with open("/dev/zero", "rb") as zero:
            done = _subprocess_guard("-", "--format", "openai-chat", stdin=zero)
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert done.stdout == ""
    assert "Traceback" not in done.stderr


def test_a_request_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    head = b'{"model": "gpt-4o", "messages": []'
    huge.write_bytes(head + b" " * (MAX_REQUEST_BYTES - len(head)) + b"}")  # JSON, one byte over
    assert run(str(huge), "--format", "openai-chat").exit_code == ExitCode.USAGE
    with huge.open("rb") as stream:  # the same bytes on a stream without a size: read, bounded
        result = CliRunner().invoke(
            cli, ["--store", "memory://", "guard", "-", "--format", "openai-chat"], input=stream
        )
    assert result.exit_code == ExitCode.USAGE


def _nested(depth: int, opener: str, closer: str) -> str:
    return (
        '{"model": "gpt-4o", "messages": [], "metadata": ' + opener * depth + closer * depth + "}"
    )


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(_nested(100_000, "[", "]"), id="arrays-100000-deep"),
        pytest.param(_nested(100_000, '{"a":', "}"), id="objects-100000-deep"),
        pytest.param(_nested(900, '{"a":', "}"), id="objects-900-deep-parsed-not-walked"),
    ],
)
def test_a_request_nested_too_deeply_is_a_usage_error(tmp_path: Path, text: str) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text(text)
    result = run(str(deep), "--format", "openai-chat")
    assert result.exit_code == ExitCode.USAGE
    assert isinstance(result.exception, SystemExit)  # handled: no exception escaped the command
