"""The decision commands of the CLI: offload, read, grep, query, events."""

from __future__ import annotations

import base64
import json
import os
import re
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import cargohold
from cargohold.cli import ExitCode, cli

TENANT, USER, SESSION = "tenant-d41", "user-d42", "session-d43"
LOG = (
    "".join(
        f"2026-11-29T02:{i // 60 % 60:02d}:{i % 60:02d}Z INFO job step={i} ok\n"
        for i in range(1, 1500)
    )
    + "2026-11-29T03:00:00Z ERROR job failed: ledger lock not acquired\n"
)
ORDERS = json.dumps(
    [
        {"id": i, "status": "refunded" if i % 7 == 0 else "paid", "total": i * 1.5}
        for i in range(900)
    ]
)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CARGOHOLD_EVENTS_LOG", str(tmp_path / "state" / "events.jsonl"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path / "store"


def run(root: Path, *args: str, input: str | bytes | None = None, session: str = SESSION) -> Result:
    scope = ["--tenant", TENANT, "--user", USER, "--session", session]
    return CliRunner().invoke(
        cli, ["--store", str(root), *scope, *args], input=input, catch_exceptions=False
    )


def key(root: Path) -> bytes:
    """The marker key of the store at ``root`` (what its stubs and segments verify under)."""
    store = cargohold.LocalStore(root)
    try:
        return store.marker_key()
    finally:
        store.close()


def offloaded_ref(root: Path, text: str, *args: str) -> str:
    result = run(root, "offload", "-", *args, input=text)
    assert result.exit_code == ExitCode.OK
    info = cargohold.parse_stub(result.stdout.rstrip("\n"), key=key(root))
    assert info is not None
    return str(info.ref)


def test_offload_of_heavy_output_prints_a_genuine_stub_and_stores_the_exact_bytes(
    root: Path,
) -> None:
    result = run(root, "offload", "-", "--tool", "tail_log", input=LOG)

    stub = result.stdout.rstrip("\n")
    info = cargohold.parse_stub(stub, key=key(root))
    assert result.exit_code == ExitCode.OK
    assert info is not None
    assert info.ref == cargohold.Ref.of(LOG.encode())
    assert len(stub.encode()) <= cargohold.Budget.BALANCED
    assert "tool tail_log" in stub
    assert run(root, "cat", str(info.ref)).stdout == LOG


def test_offload_below_the_threshold_prints_the_output_unchanged(root: Path) -> None:
    result = run(root, "offload", "-", input="short answer\n")

    assert result.exit_code == ExitCode.OK
    assert result.stdout == "short answer\n"  # byte for byte
    assert run(root, "ls", "--json").stdout.strip() == "[]"


def test_offload_threshold_option_lowers_the_bar_for_one_call(root: Path) -> None:
    result = run(root, "offload", "-", "--threshold", "10", "--budget", "light", input="x" * 20)

    info = cargohold.parse_stub(result.stdout.rstrip("\n"), key=key(root))
    assert info is not None
    assert info.budget is cargohold.Budget.LIGHT


def test_offload_threshold_over_one_mebibyte_is_a_usage_error_before_reading_input(
    root: Path,
) -> None:
    result = run(root, "offload", "-", "--threshold", str(1024 * 1024 + 1), input="x" * 20)

    assert result.exit_code == ExitCode.USAGE
    assert "1048576" in result.output
    assert run(root, "ls", "--json").stdout.strip() == "[]"


def test_offload_over_the_artifact_limit_is_rejected_without_the_body(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARGOHOLD_MAX_ARTIFACT_BYTES", "40000")
    body = "secret-payload-" * 4000

    result = run(root, "offload", "-", input=body)

    assert result.exit_code == ExitCode.REJECTED
    assert "secret-payload" not in result.stdout + result.stderr
    assert "artifact_too_large" in result.stdout


def test_offload_json_output_carries_the_outcome_and_the_event(root: Path) -> None:
    result = run(root, "offload", "-", "--json", "--tool", "orders", input=ORDERS)

    data = json.loads(result.stdout)
    assert data["outcome"] == "offloaded"
    assert data["event"]["ref"] == data["ref"] == data["stub"]["ref"]
    assert data["event"]["observed_bytes"] == len(ORDERS.encode())


def test_read_bytes_prints_a_genuine_recovered_segment_of_the_exact_bytes(root: Path) -> None:
    ref = offloaded_ref(root, LOG)

    segment = run(root, "read", ref, "--bytes", "10:200")
    raw = run(root, "read", ref, "--bytes", "10:200", "--raw")

    info = cargohold.parse_segment(segment.stdout.rstrip("\n"), key=key(root))
    assert segment.exit_code == ExitCode.OK
    assert info is not None
    assert info.span == f"bytes 10-200 of {len(LOG.encode())}"
    assert LOG[10:200].endswith("\n")
    assert raw.stdout == LOG[10:200]  # no second newline after the one the answer ends with


def test_raw_adds_a_newline_only_to_an_answer_without_one(root: Path) -> None:
    ref = offloaded_ref(root, LOG)

    raw = run(root, "read", ref, "--bytes", "10:199", "--raw")

    assert raw.stdout == LOG[10:199] + "\n"


def test_read_lines_returns_exactly_those_lines(root: Path) -> None:
    ref = offloaded_ref(root, LOG)

    result = run(root, "read", ref, "--lines", "1499:1500", "--raw")

    assert result.stdout == "".join(LOG.splitlines(keepends=True)[1498:1500])


def test_read_over_its_budget_exits_7_and_prints_nothing(root: Path) -> None:
    ref = offloaded_ref(root, LOG)

    result = run(root, "read", ref, "--budget", "100")

    assert result.exit_code == ExitCode.OVER_BUDGET
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("args", "fits"),
    [
        ([], ["--bytes", "0:16384"]),
        (["--bytes", "1000:", "--budget", "500"], ["--bytes", "1000:1500"]),
        (["--lines", "10:", "--budget", "4096"], ["--lines", "10:"]),
    ],
)
def test_a_read_over_its_budget_says_which_range_fits_and_that_range_reads(
    root: Path, args: list[str], fits: list[str]
) -> None:
    ref = offloaded_ref(root, LOG)
    budget = args[args.index("--budget") + 1 :][:1] if "--budget" in args else []

    refused = run(root, "read", ref, *args, "--json")
    plain = run(root, "read", ref, *args)
    data = json.loads(refused.stdout)
    followed = run(root, "read", ref, *data["fits"], *(["--budget", *budget] if budget else []))

    assert refused.exit_code == plain.exit_code == ExitCode.OVER_BUDGET
    assert data["outcome"] == "over_budget"
    assert data["fits"][0] == fits[0]
    assert data["fits"][1].startswith(fits[1])
    assert plain.stdout == ""
    assert " ".join(data["fits"]) in plain.stderr
    assert followed.exit_code == ExitCode.OK


def test_read_with_both_bytes_and_lines_is_a_usage_error(root: Path) -> None:
    ref = offloaded_ref(root, LOG)

    assert run(root, "read", ref, "--bytes", "0:1", "--lines", "1:2").exit_code == ExitCode.USAGE


def test_reads_of_other_sessions_and_unknown_refs_exit_with_their_outcome(root: Path) -> None:
    ref = offloaded_ref(root, LOG)
    unknown = "artifact://sha256/" + "ab" * 32

    assert run(root, "read", ref, session="other-session").exit_code == ExitCode.UNAUTHORIZED
    assert run(root, "grep", unknown, "x").exit_code == ExitCode.MISSING
    assert run(root, "query", "not-a-ref", "@").exit_code == ExitCode.USAGE


def test_grep_finds_the_error_line_with_its_number(root: Path) -> None:
    ref = offloaded_ref(root, LOG)

    result = run(root, "grep", ref, "ERROR", "--raw")

    assert result.exit_code == ExitCode.OK
    assert result.stdout.startswith("1500: 2026-11-29T03:00:00Z ERROR job failed")
    assert result.stdout.endswith("[1 matching line; 1 shown]\n")


def test_grep_counts_in_the_plural_from_two_matches(root: Path) -> None:
    ref = offloaded_ref(root, LOG)

    result = run(root, "grep", ref, "step=(7|8) ok", "--json")

    data = json.loads(result.stdout)
    assert data["span"] == "grep 2 matching lines"
    assert data["content"].endswith("[2 matching lines; 2 shown]")


@pytest.mark.parametrize("command", ["read", "grep", "query"])
def test_the_reading_commands_accept_a_unique_prefix_of_the_reference(
    root: Path, command: str
) -> None:
    ref = offloaded_ref(root, ORDERS)
    offloaded_ref(root, LOG)
    argument = {"read": ["--bytes", "0:10"], "grep": ["refunded"], "query": ["length(@)"]}
    digest = ref.removeprefix("artifact://sha256/")

    by_prefix = run(root, command, digest[:8], *argument[command], "--json")
    by_ref = run(root, command, ref, *argument[command], "--json")

    assert by_prefix.exit_code == ExitCode.OK
    assert json.loads(by_prefix.stdout)["content"] == json.loads(by_ref.stdout)["content"]
    assert json.loads(by_prefix.stdout)["ref"] == ref


@pytest.mark.parametrize(
    ("text", "media_type", "kind"),
    [
        (LOG, None, "log"),
        (ORDERS, "application/json", "json"),
        (
            "import os\n\n\ndef main() -> None:\n    print(os.getcwd())\n" * 900,
            "text/x-python",
            "code (python)",
        ),
    ],
)
def test_show_prints_the_kind_the_stub_printed(
    root: Path, text: str, media_type: str | None, kind: str
) -> None:
    args = ["--media-type", media_type] if media_type else []
    stub = run(root, "offload", "-", *args, input=text).stdout
    stated = re.search(r"^kept out of context \| kind (.+) \| class ", stub, re.MULTILINE)
    assert stated is not None
    ref = cargohold.parse_stub(stub.rstrip("\n"), key=key(root))
    assert ref is not None

    shown = json.loads(run(root, "show", str(ref.ref), "--json").stdout)
    plain = run(root, "show", str(ref.ref)).stdout

    assert stated.group(1) == kind
    assert shown["kind"] == stated.group(1)
    assert re.search(rf"^kind +{re.escape(stated.group(1))}$", plain, re.MULTILINE)


def test_grep_with_an_invalid_pattern_is_a_usage_error(root: Path) -> None:
    ref = offloaded_ref(root, LOG)

    assert run(root, "grep", ref, "(unclosed").exit_code == ExitCode.USAGE


@pytest.mark.parametrize(
    ("command", "tool", "argument", "text"),
    [
        ("grep", "artifact_grep", "pattern", "ERROR("),
        ("grep", "artifact_grep", "pattern", "(?<=user )id"),
        ("query", "artifact_query", "expression", "[?status=="),
        ("query", "artifact_query", "expression", '[?status=="paid"'),
    ],
)
def test_a_bad_pattern_or_expression_is_refused_with_what_the_read_tool_says(
    root: Path, command: str, tool: str, argument: str, text: str
) -> None:
    ref = offloaded_ref(root, ORDERS)

    result = run(root, command, ref, text)
    with cargohold.open(str(root), tenant=TENANT, user=USER, session=SESSION) as hold:
        answer = hold.call_tool(tool, {"ref": ref, argument: text})
    said = result.stderr.removeprefix("cargohold: error: ").rstrip("\n")

    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert answer.outcome == "invalid_arguments"
    assert answer.text.endswith(f": {said}")  # the tool's explanation, whole


@pytest.mark.parametrize(
    ("expression", "named"),
    [("length([0].id)", "length()"), ("sum([*].status)", "sum()"), ("abs(@)", "abs()")],
)
def test_a_query_that_fails_on_the_document_names_the_function_and_the_types(
    root: Path, expression: str, named: str
) -> None:
    ref = offloaded_ref(root, ORDERS)

    result = run(root, "query", ref, expression)
    with cargohold.open(str(root), tenant=TENANT, user=USER, session=SESSION) as hold:
        answer = hold.call_tool("artifact_query", {"ref": ref, "expression": expression})
    said = result.stderr.removeprefix("cargohold: error: ").rstrip("\n")

    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    assert named in said  # the function that failed: the message is the behaviour here
    assert said in answer.text  # what the read tool tells a model, no less


def test_a_query_stopped_by_its_work_bound_says_narrow_it_not_raise_the_budget(
    root: Path,
) -> None:
    ref = offloaded_ref(root, ORDERS)
    doubling = "length([*]" + ".[@, @][]" * 30 + ")"  # a small answer, after 2**30 steps

    result = run(root, "query", ref, doubling, "--json")
    plain = run(root, "query", ref, doubling)

    data = json.loads(result.stdout)
    assert result.exit_code == plain.exit_code == ExitCode.OVER_BUDGET
    assert data["reason"] == "evaluation_limit"
    assert plain.stdout == ""
    assert len(plain.stderr.splitlines()) == 1
    assert "--budget" not in plain.stderr  # a larger budget would not help


@pytest.mark.parametrize("command", ["grep", "query"])
def test_a_pattern_or_expression_that_is_not_utf8_is_a_usage_error(
    root: Path, command: str
) -> None:
    ref = offloaded_ref(root, ORDERS)

    # What Python makes of a byte 0xFF on the command line (PEP 383): a lone surrogate.
    result = run(root, command, ref, "paid\udcff")

    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1


PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00"
    + bytes(range(256)) * 64
)


@pytest.mark.parametrize("args", [["read", "--lines", "1:5"], ["grep", "IHDR"]])
def test_lines_or_grep_of_a_binary_artifact_say_it_is_binary_and_how_to_read_it(
    root: Path, args: list[str]
) -> None:
    stored = run(root, "put", "-", "--media-type", "image/png", input=PNG)
    ref = stored.stdout.strip()

    plain = run(root, args[0], ref, *args[1:])
    data = json.loads(run(root, args[0], ref, *args[1:], "--json").stdout)
    page = run(root, "read", ref, *data["fits"], "--raw")
    exact = run(root, "cat", ref)

    assert plain.exit_code == ExitCode.USAGE
    assert plain.stdout == ""
    assert len(plain.stderr.splitlines()) == 1
    assert (data["outcome"], data["reason"]) == ("unsupported", "binary_content")
    assert data["fits"][0] == "--bytes"
    assert f"cargohold cat {ref}" in plain.stderr  # the way to the exact bytes
    assert " ".join(data["fits"]) in plain.stderr  # and to a base64 page
    assert page.exit_code == ExitCode.OK
    start, end = (int(n) for n in data["fits"][1].split(":"))
    assert base64.b64decode(page.stdout) == PNG[start:end]
    assert exact.stdout_bytes == PNG


@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["--lines", "6000:6005"], "lines"),
        (["--lines", "1501:"], "lines"),
        (["--bytes", "1000000000:"], "bytes"),
        (["--bytes", f"{len(LOG.encode())}:"], "bytes"),
    ],
)
def test_a_read_past_the_end_says_the_size_and_the_last_range_that_reads(
    root: Path, args: list[str], what: str
) -> None:
    ref = offloaded_ref(root, LOG)

    plain = run(root, "read", ref, *args)
    data = json.loads(run(root, "read", ref, *args, "--json").stdout)
    followed = run(root, "read", ref, *data["fits"], "--raw")

    assert plain.exit_code == ExitCode.USAGE
    assert plain.stdout == ""
    assert len(plain.stderr.splitlines()) == 1
    assert (data["outcome"], data["reason"]) == ("out_of_range", "past_end")
    assert data["size"] == len(LOG.encode())
    if what == "lines":
        assert data["lines"] == LOG.count("\n") == 1500
        assert f"{data['lines']:,} lines" in plain.stderr
    assert f"{data['size']:,} bytes" in plain.stderr
    assert " ".join(data["fits"]) in plain.stderr
    assert followed.exit_code == ExitCode.OK
    assert LOG.endswith(followed.stdout)  # the last part of the body
    assert followed.stdout


def test_query_evaluates_jmespath_on_a_json_artifact(root: Path) -> None:
    ref = offloaded_ref(root, ORDERS)

    result = run(root, "query", ref, "length([?status=='refunded'])", "--raw")

    assert result.exit_code == ExitCode.OK
    assert int(result.stdout) == sum(1 for i in range(900) if i % 7 == 0)


def test_query_on_text_is_a_usage_error(root: Path) -> None:
    ref = offloaded_ref(root, LOG)

    assert run(root, "query", ref, "length(@)").exit_code == ExitCode.USAGE


def test_events_shows_one_logged_event_per_decision_in_a_private_file(
    root: Path, tmp_path: Path
) -> None:
    ref = offloaded_ref(root, LOG)
    run(root, "grep", ref, "ERROR")
    run(root, "read", ref, "--budget", "10")

    shown = run(root, "events", "--json")

    events = json.loads(shown.stdout)
    assert [(e["operation"], e["outcome"]) for e in events] == [
        ("offload", "offloaded"),
        ("rehydrate", "resolved"),
        ("rehydrate", "over_budget"),
    ]
    log = tmp_path / "state" / "events.jsonl"
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600
    for secret in (TENANT, USER, SESSION, str(root), "ledger lock"):
        assert secret not in log.read_text()


def test_events_tail_limits_the_listing(root: Path) -> None:
    for n in range(3):
        run(root, "offload", "-", input=f"small {n}")

    result = run(root, "events", "--tail", "2")

    lines = result.stdout.splitlines()
    assert result.exit_code == ExitCode.OK
    assert len(lines) == 3
    assert lines[0].split() == [
        "TIME",
        "SEQ",
        "OPERATION",
        "OUTCOME",
        "REASON",
        "BYTES",
        "LIMIT",
        "TOOL",
        "REF",
    ]
    assert [line.split()[2:4] for line in lines[1:]] == [["offload", "inline"]] * 2


def test_events_of_a_file_that_does_not_exist_is_a_usage_error_naming_it(
    root: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere.jsonl"

    result = run(root, "events", "--file", str(missing))

    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    assert str(missing) in result.stderr  # the path the person typed


def test_events_of_a_missing_configured_log_says_nothing_was_logged_yet(root: Path) -> None:
    result = run(root, "events", "--json")

    assert result.exit_code == ExitCode.OK
    assert json.loads(result.stdout) == []


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" * 50,
        b"id,name\n1,a\n2,b\n",
        b'{"not": "an event"}\n[1, 2]\n',
    ],
    ids=["binary", "csv", "json-but-no-event"],
)
def test_events_of_a_file_holding_no_event_is_a_usage_error(
    root: Path, tmp_path: Path, garbage: bytes
) -> None:
    path = tmp_path / "garbage.jsonl"
    path.write_bytes(garbage)

    result = run(root, "events", "--file", str(path))

    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1


def test_bad_lines_in_the_events_log_are_skipped_and_counted(root: Path, tmp_path: Path) -> None:
    run(root, "offload", "-", input="small one")
    run(root, "offload", "-", input="small two")
    log = tmp_path / "state" / "events.jsonl"
    good = log.read_bytes()
    bad = [
        b"\xff\xfe not utf-8\n",
        b'{"observed_bytes": ' + b"9" * 5000 + b"}\n",  # past Python's int digits limit
        b"[" * 100_000 + b"]" * 100_000 + b"\n",
        b'{"operation": "offload", "outcome": "inline", "pad": "' + b"x" * 200_000 + b'"}\n',
        b"[1, 2, 3]\n",
        b'{"torn": "line of a crashed wri',
    ]
    log.write_bytes(
        good[: good.index(b"\n") + 1] + b"".join(bad[:-1]) + good[good.index(b"\n") + 1 :] + bad[-1]
    )

    shown = run(root, "events", "--json")
    table = run(root, "events")

    assert shown.exit_code == table.exit_code == ExitCode.OK
    assert [e["outcome"] for e in json.loads(shown.stdout)] == ["inline", "inline"]
    assert f"{len(bad)} lines skipped" in shown.stderr
    assert len(table.stdout.splitlines()) == 3  # the header and the two events


def test_events_of_a_log_over_the_read_bound_shows_its_newest_events(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cargohold.cli import _decisions

    for n in range(40):
        run(root, "offload", "-", input=f"small {n}")
    monkeypatch.setattr(_decisions, "MAX_EVENTS_READ", 4096)

    shown = run(root, "events", "--json")

    events = json.loads(shown.stdout)
    assert shown.exit_code == ExitCode.OK
    assert 0 < len(events) < 40
    assert [e["outcome"] for e in events] == ["inline"] * len(events)
    assert events[-1] == json.loads(run(root, "events", "--json", "--tail", "1").stdout)[0]
    assert "1 line skipped" not in shown.stderr  # the cut first line is dropped, not counted


def test_events_of_an_endless_stream_is_refused_after_a_bounded_read(root: Path) -> None:
    # /dev/zero never ends and holds no newline: read without a bound, it would fill memory.
    # The child runs under a memory cap and a timeout, so a regression fails instead of hanging.
    import resource
    import subprocess
    import sys

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    code = "import sys; from cargohold.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, "events", "--file", "/dev/zero"],
        capture_output=True,
        timeout=120,
        preexec_fn=cap,
    )

    assert done.returncode == ExitCode.USAGE
    assert done.stdout == b""
    assert len(done.stderr.splitlines()) == 1


def test_the_budget_choices_are_exactly_the_stub_budgets() -> None:
    from cargohold.cli._decisions import _BUDGETS

    assert [budget.label for budget in cargohold.Budget] == _BUDGETS
