"""``cargohold envelope build`` and ``check``: exit statuses, output, and determinism across
processes."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from cargohold.cli import ExitCode, cli
from cargohold.cli._envelope import CONTEXT_INSUFFICIENT_EXIT, CONTEXT_STALE_EXIT, envelope
from cargohold.envelopes import Envelope, Role
from envelopes_fixtures import SCENARIO_TOML, bumped, document, edited, ready, scenario

# The command group is registered in cargohold.cli by the integrator; until then (and after),
# tests run it under a copy of the root group, so the global group is never mutated.
_CLI: click.Group = copy.copy(cli)
_CLI.commands = {**cli.commands, "envelope": envelope}

# The same in a fresh interpreter, for the tests where the process boundary is the point.
_SUBPROCESS = (
    "import copy, sys\n"
    "from cargohold.cli import cli\n"
    "from cargohold.cli._envelope import envelope\n"
    "group = copy.copy(cli)\n"
    "group.commands = {**cli.commands, 'envelope': envelope}\n"
    "group.main(args=sys.argv[1:], prog_name='cargohold')\n"
)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


def run(store: Path, *args: str, input: bytes | None = None) -> Result:
    scope = ["--store", str(store), "--tenant", "t-env", "--user", "u-env", "--session", "s-env"]
    return CliRunner().invoke(_CLI, [*scope, *args], input=input, catch_exceptions=False)


def build_args(authority: Path, role: str, task: str = "T2", *extra: str) -> list[str]:
    return [
        "envelope",
        "build",
        "--authority",
        str(authority),
        "--role",
        role,
        "--task",
        task,
        *extra,
    ]


def write_json(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc))
    return path


def test_build_prints_the_canonical_packet_on_one_line(store: Path) -> None:
    result = run(store, *build_args(SCENARIO_TOML, "planner"))

    assert result.exit_code == ExitCode.OK
    assert result.stdout_bytes == ready(scenario(), Role.PLANNER, task="T2").data + b"\n"


def test_build_of_a_coordinator_packet_takes_a_milestone(store: Path) -> None:
    args = ["envelope", "build", "--authority", str(SCENARIO_TOML), "--role", "coordinator"]

    by_milestone = run(store, *args, "--milestone", "M1")
    by_task = run(store, *args, "--task", "T3")

    assert by_milestone.exit_code == by_task.exit_code == ExitCode.OK
    assert by_milestone.stdout_bytes == by_task.stdout_bytes


@pytest.mark.parametrize(
    "extra",
    [
        ["--role", "planner"],
        ["--role", "planner", "--task", "T2", "--milestone", "M1"],
        ["--role", "worker", "--milestone", "M1"],
        ["--role", "auditor", "--task", "T2"],
        ["--role", "planner", "--task", "T2", "--budget", "10"],
        ["--role", "planner", "--task", "T:2"],
    ],
)
def test_build_with_bad_arguments_exits_2(store: Path, extra: list[str]) -> None:
    result = run(store, "envelope", "build", "--authority", str(SCENARIO_TOML), *extra)

    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""


def test_build_of_an_invalid_or_missing_authority_exits_2(store: Path, tmp_path: Path) -> None:
    bad = write_json(tmp_path / "bad.json", {**document(), "transcript": "..."})

    invalid = run(store, *build_args(bad, "planner"))
    missing = run(store, *build_args(tmp_path / "nowhere.toml", "planner"))

    assert invalid.exit_code == missing.exit_code == ExitCode.USAGE
    assert invalid.stdout == missing.stdout == ""


def test_build_when_the_authority_lacks_a_required_fact_exits_12_without_a_packet(
    store: Path, tmp_path: Path
) -> None:
    doc = document()
    del doc["allocations"]

    result = run(store, *build_args(write_json(tmp_path / "a.json", doc), "worker"))

    assert result.exit_code == CONTEXT_INSUFFICIENT_EXIT == 12
    assert result.stdout == ""


def test_a_large_fact_goes_to_the_store_and_reads_back_exactly(store: Path, tmp_path: Path) -> None:
    objective = "Stream every order, with every field the schema allows. " * 80
    path = write_json(tmp_path / "a.json", edited(document(), "task", "T2", objective=objective))

    built = run(store, *build_args(path, "planner"))
    ref = json.loads(built.stdout)["packet"]["facts"]["task_objective"]["fields"]["objective"]
    read = run(store, "cat", ref["artifact"])

    assert built.exit_code == ExitCode.OK
    assert read.exit_code == ExitCode.OK
    assert read.stdout_bytes == objective.encode()


def test_a_large_fact_with_no_store_allowed_exits_7(store: Path, tmp_path: Path) -> None:
    objective = "Stream every order. " * 200
    path = write_json(tmp_path / "a.json", edited(document(), "task", "T2", objective=objective))

    result = run(store, *build_args(path, "planner", "T2", "--no-store"))

    assert result.exit_code == ExitCode.OVER_BUDGET
    assert result.stdout == ""
    assert not store.exists()  # nothing was opened, let alone written


def test_check_exits_0_while_the_packet_holds(store: Path, tmp_path: Path) -> None:
    packet = tmp_path / "planner.json"
    packet.write_bytes(run(store, *build_args(SCENARIO_TOML, "planner")).stdout_bytes)

    result = run(store, "envelope", "check", str(packet), "--authority", str(SCENARIO_TOML))

    assert result.exit_code == ExitCode.OK


def test_check_exits_11_naming_the_changed_binding_when_stale(store: Path, tmp_path: Path) -> None:
    packet = tmp_path / "planner.json"
    packet.write_bytes(run(store, *build_args(SCENARIO_TOML, "planner")).stdout_bytes)
    later = write_json(tmp_path / "later.json", bumped(document(), "allocation", "A6"))

    human = run(store, "envelope", "check", str(packet), "--authority", str(later))
    as_json = run(store, "envelope", "check", str(packet), "--authority", str(later), "--json")

    assert human.exit_code == as_json.exit_code == CONTEXT_STALE_EXIT == 11
    report = json.loads(as_json.stdout)
    assert report["outcome"] == "context-stale"
    assert report["changed"] == [
        {"record": "allocation:A6", "field": "revision", "before": 1, "after": 2}
    ]


def test_check_exits_12_naming_the_missing_fact_when_insufficient(
    store: Path, tmp_path: Path
) -> None:
    built = run(store, *build_args(SCENARIO_TOML, "reviewer"))
    doc = edited(document(), "task", "T2", submission=...)
    later = write_json(tmp_path / "later.json", doc)

    result = run(
        store,
        "envelope",
        "check",
        "-",
        "--authority",
        str(later),
        "--json",
        input=built.stdout_bytes,
    )

    assert result.exit_code == CONTEXT_INSUFFICIENT_EXIT
    report = json.loads(result.stdout)
    assert report["outcome"] == "context-insufficient"
    assert report["missing"] == [{"fact": "evidence", "record": "task:T2", "field": "submission"}]


def test_check_of_an_edited_or_unreadable_packet_exits_2(store: Path, tmp_path: Path) -> None:
    document_ = json.loads(run(store, *build_args(SCENARIO_TOML, "planner")).stdout)
    document_["packet"]["bindings"] = []  # an attempt to "repair" a stale packet
    edited_packet = tmp_path / "edited.json"
    edited_packet.write_text(json.dumps(document_))

    tampered = run(
        store, "envelope", "check", str(edited_packet), "--authority", str(SCENARIO_TOML)
    )
    missing = run(
        store, "envelope", "check", str(tmp_path / "no.json"), "--authority", str(SCENARIO_TOML)
    )

    assert tampered.exit_code == missing.exit_code == ExitCode.USAGE


def test_check_never_touches_the_store(store: Path, tmp_path: Path) -> None:
    packet = tmp_path / "p.json"
    packet.write_bytes(ready(scenario(), Role.WORKER, task="T2").data)

    result = run(store, "envelope", "check", str(packet), "--authority", str(SCENARIO_TOML))

    assert result.exit_code == ExitCode.OK
    assert not store.exists()


# -- determinism across processes ---------------------------------------------------------------


def _build_in_subprocess(tmp_path: Path, role: str, hashseed: str) -> bytes:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CARGOHOLD_")},
        "PYTHONHASHSEED": hashseed,
        "CARGOHOLD_STORE": str(tmp_path / f"store-{hashseed}"),
    }
    task = ["--milestone", "M1"] if role == "coordinator" else ["--task", "T2"]
    result = subprocess.run(
        [sys.executable, "-c", _SUBPROCESS, "envelope", "build", "--authority",
         str(SCENARIO_TOML), "--role", role, *task],
        capture_output=True, env=env, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("role", [r.value for r in Role])
def test_the_same_packet_is_built_byte_for_byte_in_separate_processes(
    tmp_path: Path, role: str
) -> None:
    outputs = [_build_in_subprocess(tmp_path, role, seed) for seed in ("0", "1", "4242")]

    in_process = ready(scenario(), role, task=None if role == "coordinator" else "T2").data + b"\n"
    assert outputs == [in_process] * 3
    digests = {Envelope.parse(output).digest for output in outputs}
    packet = json.loads(outputs[0])["packet"]
    body = json.dumps(packet, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert digests == {"sha256:" + hashlib.sha256(body).hexdigest()}


def test_a_packet_built_in_one_process_checks_ready_in_another(tmp_path: Path) -> None:
    packet = tmp_path / "p.json"
    packet.write_bytes(_build_in_subprocess(tmp_path, "reviewer", "7"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGOHOLD_")}

    result = subprocess.run(
        [sys.executable, "-c", _SUBPROCESS, "envelope", "check", str(packet),
         "--authority", str(SCENARIO_TOML), "--json"],
        capture_output=True, env={**env, "PYTHONHASHSEED": "99"}, check=False, timeout=120,
    )  # fmt: skip

    assert result.returncode == ExitCode.OK
    assert json.loads(result.stdout)["outcome"] == "ready"


def test_the_cli_mirrors_the_librarys_roles_and_limits_without_importing_it_at_start() -> None:
    from cargohold import envelopes
    from cargohold.cli import _envelope as command

    assert tuple(r.value for r in Role) == command.ROLES
    assert tuple(d.value for d in envelopes.Decision) == command.DECISIONS
    assert set(command.OUTCOME_EXIT) == {o.value for o in envelopes.Outcome}
    assert command.MAX_AUTHORITY_BYTES == envelopes._source.MAX_AUTHORITY_BYTES
    assert (
        command.DEFAULT_BUDGET,
        command.DEFAULT_FACT_LIMIT,
        command.MIN_BUDGET,
        command.MAX_BUDGET,
        command.MIN_FACT_LIMIT,
        command.MAX_PACKET_BYTES,
    ) == (
        envelopes.DEFAULT_BUDGET,
        envelopes.DEFAULT_FACT_LIMIT,
        envelopes.MIN_BUDGET,
        envelopes.MAX_BUDGET,
        envelopes.MIN_FACT_LIMIT,
        envelopes._envelope.MAX_PACKET_BYTES,
    )
    code = "import sys, cargohold.cli._envelope; print('cargohold.envelopes' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "False"


# -- documents nested past what a parser recurses ----------------------------------------------

DEEP = 100_000


def resealed(packet: dict[str, Any]) -> bytes:
    """A packet document for ``packet`` with its digest recomputed: a hand-made packet."""
    from cargohold.envelopes._envelope import canonical_json

    digest = "sha256:" + hashlib.sha256(canonical_json(packet)).hexdigest()
    return json.dumps({"digest": digest, "packet": packet}).encode()


@pytest.mark.parametrize(
    ("name", "text", "command"),
    [
        ("deep.json", '{"a":' * DEEP + "1" + "}" * DEEP, ["build", "--authority", "{path}"]),
        ("deep.toml", "a = " + "[" * DEEP + "]" * DEEP + "\n", ["build", "--authority", "{path}"]),
        ("deep.json", '{"a":' * DEEP + "1" + "}" * DEEP, ["build", "--authority", "-"]),
        ("deep.json", "[" * DEEP + "]" * DEEP, ["check", "{path}", "--authority", "{scenario}"]),
        ("deep.json", "[" * DEEP + "]" * DEEP, ["check", "-", "--authority", "{scenario}"]),
        ("deep.json", '{"a":' * DEEP + "1" + "}" * DEEP, ["load", "{path}"]),
        ("deep.json", "[" * DEEP + "]" * DEEP, ["ownership", "src/x.py", "--packet", "{path}"]),
    ],
    ids=[
        "authority-json",
        "authority-toml",
        "authority-stdin",
        "check",
        "check-stdin",
        "load",
        "ownership",
    ],
)
def test_a_document_nested_100000_deep_is_a_usage_error_in_one_line(
    store: Path, tmp_path: Path, name: str, text: str, command: list[str]
) -> None:
    path = tmp_path / name
    path.write_text(text)
    args = [a.format(path=path, scenario=SCENARIO_TOML) for a in command]
    extra = ["--role", "worker", "--task", "T2"] if command[0] == "build" else []

    result = run(store, "envelope", *args, *extra, input=text.encode())

    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1


def test_loading_a_hand_made_packet_with_facts_nested_700_deep_is_a_usage_error(
    store: Path, tmp_path: Path
) -> None:
    packet = json.loads(run(store, *build_args(SCENARIO_TOML, "worker")).stdout)["packet"]
    deep: Any = "T2"
    for _ in range(700):  # parses, but deeper than a recursive walk of it goes
        deep = [deep]
    packet["facts"]["brief"] = deep
    path = tmp_path / "deep.json"
    path.write_bytes(resealed(packet))

    result = run(store, "envelope", "load", str(path))

    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("body", "media_type"),
    [(b"not json {", "application/json"), (b"\xff\xfe binary", "text/plain; charset=utf-8")],
)
def test_loading_a_packet_whose_fact_is_not_what_its_packet_says_is_a_usage_error(
    store: Path, tmp_path: Path, body: bytes, media_type: str
) -> None:
    stored = run(store, "put", "-", input=body)
    packet = json.loads(run(store, *build_args(SCENARIO_TOML, "worker")).stdout)["packet"]
    stub = {"artifact": stored.stdout.strip(), "bytes": len(body), "media_type": media_type}
    packet["facts"]["brief"] = stub
    path = tmp_path / "forged.json"
    path.write_bytes(resealed(packet))

    result = run(store, "envelope", "load", str(path))

    assert stored.exit_code == ExitCode.OK
    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1


def test_load_facts_refuses_facts_nested_700_deep_with_a_typed_error(tmp_path: Path) -> None:
    # The library under the command: the typed error, not Python's RecursionError.
    import cargohold
    from cargohold.envelopes import EnvelopeError, load_facts

    packet = ready(scenario(), Role.WORKER, task="T2").as_document()["packet"]
    deep: Any = "T2"
    for _ in range(700):
        deep = [deep]
    packet["facts"]["brief"] = deep

    with (
        cargohold.open(tmp_path / "store", session="s-env") as hold,
        pytest.raises(EnvelopeError),
    ):
        load_facts(resealed(packet), hold.store)
