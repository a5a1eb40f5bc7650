"""What the reading commands write: the stored bytes into a pipe, escaped text on a terminal.

The pipe side runs in-process (click's CliRunner is not a terminal, as a pipe is not). The terminal
side runs the real console script with its stdout on a pseudo-terminal, since whether stdout is a
terminal is the process boundary under test.
"""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st

import cargohold
from cargohold.cli import ExitCode, cli
from cargohold.cli._output import write_bytes, write_text

TENANT, USER, SESSION = "tenant-o61", "user-o62", "session-o63"

# What a hostile tool may print: a colour (CSI SGR), a window title (OSC 0, BEL-terminated), a
# clipboard write (OSC 52, ST-terminated), a screen clear and cursor move (CSI), a one-character C1
# CSI (U+009B), a bare carriage return that would overwrite a line, and a backspace.
HOSTILE = (
    "line 1 ok\n"
    "\x1b[31mline 2 red\x1b[0m\n"
    "\x1b]0;owned title\x07line 3\n"
    "\x1b]52;c;ZWNobyBvd25lZA==\x1b\\line 4\n"
    "\x1b[2J\x1b[1;1Hline 5\n"
    "\u009b31mline 6\n"
    "visible\rhidden line 7\n"
    "back\x08space line 8\n"
    "crlf line 9\r\n"
)
HOSTILE_BYTES = HOSTILE.encode()


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("CARGOHOLD_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CARGOHOLD_EVENTS_LOG", str(tmp_path / "state" / "events.jsonl"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path / "store"


def scope_args(root: Path) -> list[str]:
    return ["--store", str(root), "--tenant", TENANT, "--user", USER, "--session", SESSION]


def run(root: Path, *args: str, input: bytes | None = None) -> Result:
    return CliRunner().invoke(cli, [*scope_args(root), *args], input=input, catch_exceptions=False)


def put(root: Path, data: bytes, media_type: str = "text/plain") -> str:
    result = run(root, "put", "-", "--media-type", media_type, input=data)
    assert result.exit_code == ExitCode.OK
    return result.stdout.strip()


def key(root: Path) -> bytes:
    store = cargohold.LocalStore(root)
    try:
        return store.marker_key()
    finally:
        store.close()


# -- into a pipe: the stored bytes -----------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["cat"],
        ["read", "--raw"],
        ["read", "--raw", "--bytes", f"0:{len(HOSTILE_BYTES)}"],
        ["read", "--raw", "--lines", "1:9"],
    ],
    ids=["cat", "read", "read-bytes", "read-lines"],
)
def test_piped_output_of_a_read_is_the_stored_bytes_escape_sequences_and_all(
    root: Path, args: list[str]
) -> None:
    ref = put(root, HOSTILE_BYTES)

    result = run(root, args[0], ref, *args[1:])

    assert result.exit_code == ExitCode.OK
    assert result.stdout_bytes == HOSTILE_BYTES


def test_a_piped_recovered_segment_holds_the_exact_text_its_digest_names(root: Path) -> None:
    ref = put(root, HOSTILE_BYTES)

    result = run(root, "read", ref)
    info = cargohold.parse_segment(result.stdout_bytes.decode().rstrip("\n"), key=key(root))

    assert result.exit_code == ExitCode.OK
    assert info is not None  # a stripped escape sequence would break the segment's MAC
    assert HOSTILE in result.stdout_bytes.decode()


def test_piped_grep_shows_matching_lines_with_their_escape_sequences(root: Path) -> None:
    ref = put(root, HOSTILE_BYTES)

    result = run(root, "grep", ref, "line [2-5]", "--raw")

    assert result.exit_code == ExitCode.OK
    for line in HOSTILE.splitlines()[1:5]:
        assert line.encode() in result.stdout_bytes


def test_piped_offload_of_a_small_output_writes_it_unchanged(root: Path) -> None:
    result = run(root, "offload", "-", input=HOSTILE_BYTES)

    assert result.exit_code == ExitCode.OK
    assert result.stdout_bytes == HOSTILE_BYTES


def test_json_output_escapes_c1_controls_and_keeps_the_value(root: Path) -> None:
    ref = put(root, HOSTILE_BYTES)

    result = run(root, "read", ref, "--json")
    data = json.loads(result.stdout_bytes)

    assert data["content"] == HOSTILE
    assert "\u009b".encode() not in result.stdout_bytes
    assert b"\x1b" not in result.stdout_bytes


# -- on a terminal: shown escaped, never executed --------------------------------------------------


def on_terminal(
    root: Path, *args: str, input: bytes = b"", stream: str = "stdout"
) -> tuple[int, bytes]:
    """Run the console script with ``stream`` (stdout or stderr) on a pseudo-terminal; its exit
    status and what the terminal received (the other stream is a pipe, discarded)."""
    script = Path(sys.executable).parent / "cargohold"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGOHOLD_")}
    env["CARGOHOLD_EVENTS_LOG"] = str(root.parent / "state" / "events.jsonl")
    env["TERM"] = "xterm"
    leader, follower = pty.openpty()
    try:
        child = subprocess.Popen(
            [script, *scope_args(root), *args],
            stdin=subprocess.PIPE,
            stdout=follower if stream == "stdout" else subprocess.DEVNULL,
            stderr=follower if stream == "stderr" else subprocess.DEVNULL,
            env=env,
            cwd=root.parent,
        )
    finally:
        os.close(follower)
    assert child.stdin is not None
    child.stdin.write(input)
    child.stdin.close()
    output = bytearray()
    deadline = time.monotonic() + 60  # a bound on the wait, not an assertion on time
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1)
            if not ready:
                if child.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
        status = child.wait(timeout=60)
    finally:
        os.close(leader)
    # The terminal driver turns each newline into CRLF; undo it to compare with what was written.
    return status, bytes(output).replace(b"\r\n", b"\n")


@pytest.mark.parametrize(
    "args",
    [
        ["cat"],
        ["read", "--raw"],
        ["read"],
        ["read", "--raw", "--lines", "1:9"],
        ["grep", "--raw", "line"],
    ],
    ids=["cat", "read-raw", "read-segment", "read-lines", "grep"],
)
def test_on_a_terminal_control_sequences_of_an_artifact_are_shown_escaped(
    root: Path, args: list[str]
) -> None:
    ref = put(root, HOSTILE_BYTES)

    status, shown = on_terminal(root, args[0], ref, *args[1:])

    assert status == ExitCode.OK
    assert b"\x1b" not in shown
    assert b"\x07" not in shown
    assert b"\x08" not in shown
    assert "\u009b".encode() not in shown
    assert b"\r" not in shown.replace(b"\r\n", b"")  # a CRLF line ending is kept
    assert b"\\x1b]0;owned title\\x07line 3" in shown
    assert b"\\x1b]52;c;ZWNobyBvd25lZA==\\x1b\\line 4" in shown
    assert b"visible\\x0dhidden line 7" in shown
    assert b"line 1 ok" in shown


def test_on_a_terminal_bytes_that_are_not_utf8_are_shown_as_hex(root: Path) -> None:
    ref = put(root, b"ok \xff\x9b[2J\xc3 end\n", media_type="application/octet-stream")

    status, shown = on_terminal(root, "cat", ref)

    assert status == ExitCode.OK
    assert shown == b"ok \\xff\\x9b[2J\\xc3 end\n"


def test_on_a_terminal_a_small_offloaded_output_is_shown_escaped(root: Path) -> None:
    status, shown = on_terminal(root, "offload", "-", input=HOSTILE_BYTES)

    assert status == ExitCode.OK
    assert b"\x1b" not in shown
    assert b"\\x1b[31mline 2 red\\x1b[0m" in shown


# -- progress of a big offload ---------------------------------------------------------------------

BIG_LOG = b"".join(b"2026-11-29T02:00:00Z INFO step %d ok\n" % i for i in range(200_000))
"""About 7 MiB: over the size from which a terminal is shown what is happening."""


@pytest.mark.parametrize("command", [["offload", "-"], ["put", "-"]])
def test_a_big_offload_or_put_shows_progress_on_a_terminal(root: Path, command: list[str]) -> None:
    status, shown = on_terminal(root, *command, input=BIG_LOG, stream="stderr")

    assert status == ExitCode.OK
    assert (b"offloading 7." if command[0] == "offload" else b"storing 7.") in shown


@pytest.mark.parametrize("command", [["offload", "-"], ["put", "-"]])
def test_no_progress_is_drawn_when_stderr_is_not_a_terminal(root: Path, command: list[str]) -> None:
    result = run(root, *command, input=BIG_LOG)

    assert result.exit_code == ExitCode.OK
    assert b"offloading" not in result.stderr_bytes
    assert b"storing" not in result.stderr_bytes


# -- the escaping, as properties ----------------------------------------------------------------

_ACTED_ON = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]|\r(?!\n)")
"""Bytes of UTF-8 output a terminal would act on: C0 but newline, tab and CRLF; DEL; C1."""


class _Terminal(io.TextIOWrapper):
    """A text stream that says it is a terminal, over a byte buffer the test reads."""

    def __init__(self) -> None:
        self.raw_bytes = io.BytesIO()
        super().__init__(self.raw_bytes, encoding="utf-8")

    def isatty(self) -> bool:
        return True


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512))
def test_no_bytes_reach_a_terminal_as_a_control_it_would_act_on(data: bytes) -> None:
    terminal = _Terminal()

    write_bytes(data, stream=terminal)

    assert _ACTED_ON.search(terminal.raw_bytes.getvalue()) is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=["Cc", "Cs"]), max_size=200))
def test_text_without_control_characters_reaches_a_terminal_unchanged(text: str) -> None:
    terminal = _Terminal()

    write_text(text, stream=terminal)

    assert terminal.raw_bytes.getvalue() == text.encode() + b"\n"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512))
def test_bytes_reach_a_pipe_exactly(data: bytes) -> None:
    received = io.BytesIO()
    pipe = io.TextIOWrapper(received, encoding="utf-8")

    write_bytes(data, stream=pipe)

    assert received.getvalue() == data
