"""The ``cargohold`` command line, driven in-process through click's CliRunner.

One test runs the real console script in a subprocess, since the process boundary (binary stdin and
stdout, the exit status) is what it checks.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import cargohold
from cargohold.cli import OUTCOME_EXIT, ExitCode, cli, main
from cargohold.cli._demo import SAMPLE, batch_log, sample_bytes

TENANT = "tenant-q7x41"
USER = "user-k2m93"
SESSION = "session-z9w55"
OWNER_PARTS = (TENANT, USER, SESSION)
DAY = 86400.0

# Binary bytes that a text layer would damage: NUL, CR/LF pairs, invalid UTF-8, and longer than
# one 64 KiB chunk, so range reads cross a chunk boundary.
BINARY = bytes(range(256)) * 400 + b"\r\n\x00\xff\xfe\r"


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("CARGOHOLD_"):
            monkeypatch.delenv(name)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # no cargohold.toml or pyproject.toml to discover


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


def run(
    root: Path,
    *args: str,
    input: bytes | None = None,
    session: str = SESSION,
    tenant: str = TENANT,
) -> Result:
    scope = ["--tenant", tenant, "--user", USER, "--session", session]
    return CliRunner().invoke(
        cli, ["--store", str(root), *scope, *args], input=input, catch_exceptions=False
    )


def put(root: Path, data: bytes, *args: str) -> cargohold.Ref:
    result = run(root, "put", "-", *args, input=data)
    assert result.exit_code == ExitCode.OK
    return cargohold.Ref.parse(result.stdout.strip())


def put_expired(root: Path, data: bytes) -> cargohold.Ref:
    """Write through a store whose clock is two days behind: the default 24 h TTL has passed."""
    store = cargohold.LocalStore(root, clock=lambda: time.time() - 2 * DAY)
    try:
        scoped = cargohold.ScopedStore(store, cargohold.Scope(TENANT, USER, SESSION))
        return scoped.put(data, media_type="text/plain").ref
    finally:
        store.close()


def json_out(result: Result) -> Any:
    assert result.exit_code == ExitCode.OK
    return json.loads(result.stdout)


# -- put and cat --------------------------------------------------------------------------------


def test_put_of_a_file_then_cat_returns_the_exact_binary_bytes(root: Path, tmp_path: Path) -> None:
    source = tmp_path / "blob.bin"
    source.write_bytes(BINARY)

    stored = run(root, "put", str(source))
    ref = stored.stdout.strip()
    read = run(root, "cat", ref)

    assert stored.exit_code == ExitCode.OK
    assert stored.stdout == f"{cargohold.Ref.of(BINARY)}\n"
    assert read.exit_code == ExitCode.OK
    assert read.stdout_bytes == BINARY


def test_put_reads_stdin_when_the_file_is_a_dash(root: Path) -> None:
    ref = put(root, BINARY)

    assert ref == cargohold.Ref.of(BINARY)
    assert run(root, "cat", str(ref)).stdout_bytes == BINARY


def test_empty_input_is_stored_and_read_back_empty(root: Path) -> None:
    ref = put(root, b"")

    read = run(root, "cat", str(ref))

    assert read.exit_code == ExitCode.OK
    assert read.stdout_bytes == b""


def test_putting_the_same_bytes_again_gives_the_same_reference_and_one_blob(root: Path) -> None:
    first = put(root, BINARY)
    second = put(root, BINARY)

    usage = json_out(run(root, "du", "--json"))
    everyone = json_out(run(root, "du", "--json", "--all-tenants"))

    assert first == second
    limits = cargohold.Limits()
    assert usage == {
        "session": {
            "objects": 1,
            "bytes": len(BINARY),
            "max_objects": limits.session_objects,
            "max_bytes": limits.session_bytes,
        },
        "tenant": {
            "objects": 1,
            "bytes": len(BINARY),
            "max_objects": getattr(limits, "tenant_objects", None),
            "max_bytes": getattr(limits, "tenant_bytes", None),
        },
    }
    assert everyone["store"] == {
        "objects": 1,
        "bytes": len(BINARY),
        "max_objects": limits.store_objects,
        "max_bytes": limits.store_bytes,
    }


@pytest.mark.parametrize(
    ("span", "expected"),
    [
        ("100:", slice(100, None)),
        (":4096", slice(0, 4096)),
        ("100:200", slice(100, 200)),
        ("65000:70000", slice(65000, 70000)),  # crosses the 64 KiB chunk boundary
        (f"{len(BINARY) - 3}:{len(BINARY) + 50}", slice(len(BINARY) - 3, None)),  # clipped
        (":", slice(None)),
    ],
)
def test_cat_with_a_range_writes_exactly_that_slice(root: Path, span: str, expected: slice) -> None:
    ref = put(root, BINARY)

    read = run(root, "cat", str(ref), "--range", span)

    assert read.exit_code == ExitCode.OK
    assert read.stdout_bytes == BINARY[expected]


@pytest.mark.parametrize(
    ("data", "span"),
    [(BINARY, f"{len(BINARY)}:"), (BINARY, "200000:200010"), (b"", "1:"), (b"abc", "3:9")],
)
def test_cat_of_a_range_past_the_end_is_a_usage_error_naming_the_size_and_the_valid_range(
    root: Path, data: bytes, span: str
) -> None:
    ref = put(root, data)

    read = run(root, "cat", str(ref), "--range", span)

    assert read.exit_code == ExitCode.USAGE
    assert read.stdout_bytes == b""
    assert f"{len(data):,} bytes" in read.stderr
    assert (f"0:{len(data)}" if data else "0:0") in read.stderr


@pytest.mark.parametrize(
    ("data", "span"), [(b"", "0:"), (b"", ":"), (b"abc", "3:3"), (b"ab", ":0")]
)
def test_cat_of_an_empty_range_within_the_body_writes_nothing_and_succeeds(
    root: Path, data: bytes, span: str
) -> None:
    ref = put(root, data)

    read = run(root, "cat", str(ref), "--range", span)

    assert read.exit_code == ExitCode.OK
    assert read.stdout_bytes == b""


@pytest.mark.parametrize("span", ["100", "a:b", "5:2", "-1:4", "1:2:3"])
def test_a_malformed_range_is_a_usage_error(root: Path, span: str) -> None:
    ref = put(root, BINARY)

    read = run(root, "cat", str(ref), "--range", span)

    assert read.exit_code == ExitCode.USAGE
    assert read.stdout_bytes == b""


def test_put_guesses_the_media_type_from_the_file_name(root: Path, tmp_path: Path) -> None:
    names = {
        "orders.json": "application/json",
        "table.csv": "text/csv",
        "orders.json.gz": "application/gzip",
        "build.log": "text/plain",
        "rows.ndjson": "application/x-ndjson",
        "no_suffix": "text/plain",  # text bytes with a name that says nothing
    }
    seen = {}
    for index, name in enumerate(names):
        path = tmp_path / name
        path.write_bytes(b"content %d" % index)
        ref = run(root, "put", str(path)).stdout.strip()
        seen[name] = json_out(run(root, "show", ref, "--json"))["media_type"]

    assert seen == names


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
LOG = "".join(f"2026-11-29T02:00:{i % 60:02d}Z INFO step {i} ok\n" for i in range(200)).encode()


@pytest.mark.parametrize(
    ("name", "data", "args", "expected"),
    [
        ("x.log", LOG, ["--kind", "log"], "text/plain"),
        ("-", LOG, ["--kind", "log"], "text/plain"),
        ("-", b"id,total\n1,2.5\n2,3.0\n", ["--kind", "csv"], "text/csv"),
        ("-", b"--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n", ["--kind", "diff"], "text/x-diff"),
        ("-", b'[{"id": 1}, {"id": 2}]', [], "application/json"),
        ("-", b'{"id": 1}\n{"id": 2}\n', [], "application/x-ndjson"),
        ("-", b"[{'id': 1, 'name': None}]", ["--kind", "json"], "text/plain"),  # a repr
        ("-", PNG, [], "image/png"),
        ("-", PNG, ["--kind", "log"], "image/png"),  # the bytes are not the text it says
        ("x.log", gzip.compress(LOG, mtime=0), ["--kind", "log"], "application/gzip"),
        ("-", b"a line of plain text\n", [], "text/plain"),
        ("-", BINARY, [], "application/octet-stream"),
    ],
)
def test_put_stores_a_media_type_that_fits_the_file_its_kind_or_its_bytes(
    root: Path, tmp_path: Path, name: str, data: bytes, args: list[str], expected: str
) -> None:
    if name != "-":
        (tmp_path / name).write_bytes(data)
    source = "-" if name == "-" else str(tmp_path / name)

    ref = run(root, "put", source, *args, input=data if name == "-" else None).stdout.strip()

    assert json_out(run(root, "show", ref, "--json"))["media_type"] == expected


def test_ls_shows_the_kind_of_an_artifact_whose_producer_named_none(root: Path) -> None:
    named = put(root, LOG, "--kind", "build log")
    unnamed = [put(root, LOG + b"more\n"), put(root, b'[{"id": 1}]'), put(root, PNG)]

    listed = {r["ref"]: r["kind"] for r in json_out(run(root, "ls", "--json"))}
    table = run(root, "ls").stdout

    assert listed[str(named)] == "build log"
    for ref in unnamed:
        shown = json_out(run(root, "show", str(ref), "--json"))["kind"]
        assert shown is not None
        assert listed[str(ref)] == shown
        assert re.search(rf"^{re.escape(str(ref))} .* {re.escape(shown)} ", table, re.MULTILINE)


def test_an_explicit_media_type_wins_over_the_guess(root: Path, tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    path.write_bytes(b"a,b\n1,2\n")

    ref = run(root, "put", str(path), "--media-type", "text/csv; charset=UTF-8").stdout.strip()

    assert json_out(run(root, "show", ref, "--json"))["media_type"] == "text/csv; charset=utf-8"


def test_put_of_a_missing_file_is_a_usage_error(root: Path, tmp_path: Path) -> None:
    result = run(root, "put", str(tmp_path / "absent.bin"))

    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""


# -- show, ls, du -------------------------------------------------------------------------------


def test_show_json_gives_the_metadata_and_never_the_owner(root: Path) -> None:
    ref = put(
        root,
        b'{"rows": []}',
        "--media-type",
        "application/json",
        "--kind",
        "json",
        "--tool",
        "list_orders",
        "--ttl",
        "3600",
        "--sensitivity",
        "restricted",
    )

    shown = json_out(run(root, "show", str(ref), "--json"))
    assert isinstance(shown, dict)
    created = dt.datetime.fromisoformat(shown.pop("created"))
    expires = dt.datetime.fromisoformat(shown.pop("expires"))

    assert shown == {
        "ref": str(ref),
        "size": len(b'{"rows": []}'),
        "media_type": "application/json",
        "kind": "json",
        "tool": "list_orders",
        "sensitivity": "restricted",
        "complete": True,
        "expired": False,
        "classification": None,
        "parent": None,
    }
    assert created.utcoffset() == dt.timedelta(0)
    assert (expires - created).total_seconds() == pytest.approx(3600, abs=1)
    assert created.timestamp() <= time.time()


def test_show_and_ls_name_the_parent_of_an_artifact_derived_by_artifact_patch(
    root: Path,
) -> None:
    original = put(root, b'{"status": "open"}\n', "--media-type", "application/json")
    with cargohold.open(root, tenant=TENANT, user=USER, session=SESSION) as hold:
        patched = hold.call_tool(
            "artifact_patch",
            {
                "ref": str(original),
                "json_patch": [{"op": "replace", "path": "/status", "value": "x"}],
            },
        )
    assert patched.ref is not None

    shown = json_out(run(root, "show", str(patched.ref), "--json"))
    listed = {entry["ref"]: entry for entry in json_out(run(root, "ls", "--json"))}
    plain = run(root, "show", str(patched.ref))

    assert (shown["parent"], shown["tool"]) == (str(original), "artifact_patch")
    assert listed[str(patched.ref)]["parent"] == str(original)
    assert listed[str(original)]["parent"] is None
    assert re.search(r"parent\s+" + re.escape(str(original)), plain.stdout)


def test_no_output_of_any_command_names_the_owner_or_the_store_path(root: Path) -> None:
    ref = put(root, BINARY, "--tool", "t")
    other_ref = put(root, b"another session's", "--tool", "t")
    cargohold.LocalStore(root).corrupt_for_tests(TENANT, other_ref)
    runs = [
        run(root, "put", "-", input=BINARY),
        run(root, "show", str(ref)),
        run(root, "show", str(ref), "--json"),
        run(root, "ls"),
        run(root, "ls", "--json"),
        run(root, "du"),
        run(root, "du", "--json"),
        run(root, "cat", str(other_ref)),
        run(root, "cat", str(ref), session="session-other"),
        run(root, "cat", "artifact://sha256/" + "0" * 64),
        run(root, "gc", "--dry-run"),
        run(root, "verify"),
        run(root, "verify", "--json"),
        run(root, "demo"),
        run(root, "put", "-", "--sensitivity", "secret", input=b"x"),
    ]

    for result in runs:
        text = result.stdout_bytes + result.stderr_bytes
        for secret in (*OWNER_PARTS, str(root)):
            assert secret.encode() not in text
        assert b"Traceback" not in text


def test_ls_lists_this_scope_only_and_marks_expired_artifacts(root: Path) -> None:
    old = put_expired(root, b"old bytes")
    new = put(root, b"new bytes")
    run(root, "put", "-", session="session-other", input=b"other session")

    listed = json_out(run(root, "ls", "--json"))
    text = run(root, "ls").stdout.splitlines()

    assert isinstance(listed, list)
    assert [(r["ref"], r["expired"]) for r in listed] == [(str(old), True), (str(new), False)]
    old_line = next(line for line in text if str(old) in line)
    new_line = next(line for line in text if str(new) in line)
    assert old_line.rstrip().endswith("expired")
    assert not new_line.rstrip().endswith("expired")


def test_ls_of_an_empty_scope_prints_nothing_on_stdout(root: Path) -> None:
    plain = run(root, "ls")

    assert plain.exit_code == ExitCode.OK
    assert plain.stdout == ""
    assert json_out(run(root, "ls", "--json")) == []


def test_du_reports_limits_from_the_configuration(root: Path, tmp_path: Path) -> None:
    config = tmp_path / "cargohold.toml"
    config.write_text("session_objects = 5\nstore_bytes = 1048576\n")
    put(root, b"abc")

    usage = json_out(run(root, "--config", str(config), "du", "--json", "--all-tenants"))

    assert usage["session"] == {
        "objects": 1,
        "bytes": 3,
        "max_objects": 5,
        "max_bytes": cargohold.Limits().session_bytes,
    }
    assert usage["store"] == {
        "objects": 1,
        "bytes": 3,
        "max_objects": cargohold.Limits().store_objects,
        "max_bytes": 1048576,
    }


def test_the_scope_comes_from_the_environment_and_options_win(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARGOHOLD_STORE", str(root))
    monkeypatch.setenv("CARGOHOLD_TENANT", TENANT)
    monkeypatch.setenv("CARGOHOLD_USER", USER)
    monkeypatch.setenv("CARGOHOLD_SESSION", "from-env")
    runner = CliRunner()
    stored = runner.invoke(cli, ["put", "-"], input=b"env scoped", catch_exceptions=False)
    ref = stored.stdout.strip()

    by_env = runner.invoke(cli, ["cat", ref], catch_exceptions=False)
    by_option = runner.invoke(cli, ["--session", SESSION, "cat", ref], catch_exceptions=False)

    assert by_env.exit_code == ExitCode.OK
    assert by_env.stdout_bytes == b"env scoped"
    assert by_option.exit_code == ExitCode.UNAUTHORIZED


# -- exit statuses ------------------------------------------------------------------------------


def test_every_read_outcome_has_its_own_exit_status() -> None:
    assert set(OUTCOME_EXIT) == set(cargohold.ReadOutcome)
    assert OUTCOME_EXIT == {
        cargohold.ReadOutcome.RESOLVED: 0,
        cargohold.ReadOutcome.MISSING: 3,
        cargohold.ReadOutcome.UNAUTHORIZED: 4,
        cargohold.ReadOutcome.STALE: 5,
        cargohold.ReadOutcome.EXPIRED: 6,
        cargohold.ReadOutcome.OVER_BUDGET: 7,
    }


@pytest.mark.parametrize(
    "text",
    [
        "artifact://sha256/" + "A" * 64,
        "artifact://sha256/" + "a" * 63,
        "artifact://md5/" + "a" * 32,
        " artifact://sha256/" + "a" * 64,
        "artifact://sha256/../" + "a" * 64,
        "not-a-ref",
    ],
)
@pytest.mark.parametrize("command", ["cat", "show"])
def test_a_malformed_reference_exits_2(root: Path, text: str, command: str) -> None:
    result = run(root, command, text)

    assert result.exit_code == ExitCode.USAGE
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("command", ["cat", "show"])
def test_an_unknown_reference_exits_3(root: Path, command: str) -> None:
    put(root, BINARY)

    result = run(root, command, str(cargohold.Ref.of(b"never stored")))

    assert result.exit_code == ExitCode.MISSING
    assert result.stdout_bytes == b""


# Twelve inputs whose SHA-256 digests all start with e22e (found by a one-off search).
AMBIGUOUS_PREFIX = "e22e"
AMBIGUOUS = [
    b"ambiguous %d\n" % n
    for n in (8072, 10616, 24931, 35446, 50286, 64520, 75605, 77616, 90497, 114188, 138254, 165237)
]


@pytest.mark.parametrize("form", ["full", "digest", "prefix"])
@pytest.mark.parametrize("command", ["cat", "show"])
def test_a_reference_may_be_given_as_its_digest_or_a_unique_prefix(
    root: Path, form: str, command: str
) -> None:
    ref = put(root, BINARY)
    put(root, b"another artifact")
    text = {"full": str(ref), "digest": ref.digest, "prefix": ref.digest[:6]}[form]

    given = run(root, command, text)

    assert given.exit_code == ExitCode.OK
    assert given.stdout_bytes == run(root, command, str(ref)).stdout_bytes


def test_an_ambiguous_prefix_is_a_usage_error_listing_the_candidates(root: Path) -> None:
    refs = sorted(str(put(root, data)) for data in AMBIGUOUS)
    assert all(ref.startswith("artifact://sha256/" + AMBIGUOUS_PREFIX) for ref in refs)

    many = run(root, "show", AMBIGUOUS_PREFIX)
    longer = run(root, "show", refs[0][18:30], "--json")

    assert many.exit_code == ExitCode.USAGE
    assert many.stdout == ""
    listed = [line.strip() for line in many.stderr.splitlines()[1:]]
    assert listed == [*refs[:10], "and 2 more"]
    assert json_out(longer)["ref"] == refs[0]


@pytest.mark.parametrize("command", ["cat", "show"])
def test_a_prefix_matching_nothing_in_this_scope_exits_as_a_missing_reference(
    root: Path, command: str
) -> None:
    ref = put(root, BINARY)

    unknown = run(root, command, "0000" if not ref.digest.startswith("0000") else "ffff")
    other_session = run(root, command, ref.digest[:8], session="session-other")

    assert unknown.exit_code == ExitCode.MISSING
    assert other_session.exit_code == ExitCode.MISSING  # prefixes resolve in this scope only
    assert unknown.stdout_bytes == other_session.stdout_bytes == b""


def test_a_prefix_shorter_than_four_digits_is_a_usage_error(root: Path) -> None:
    ref = put(root, BINARY)

    result = run(root, "cat", ref.digest[:3])

    assert result.exit_code == ExitCode.USAGE
    assert result.stdout_bytes == b""
    assert len(result.stderr.splitlines()) == 1


def test_another_sessions_artifact_exits_4_and_another_tenants_exits_3(root: Path) -> None:
    ref = put(root, BINARY)

    other_session = run(root, "cat", str(ref), session="session-other")
    other_tenant = run(root, "cat", str(ref), tenant="tenant-other")
    other_session_show = run(root, "show", str(ref), session="session-other")

    assert other_session.exit_code == ExitCode.UNAUTHORIZED
    assert other_session.stdout_bytes == b""
    assert other_session_show.exit_code == ExitCode.UNAUTHORIZED
    assert other_session_show.stdout == ""
    assert other_tenant.exit_code == ExitCode.MISSING
    assert other_tenant.stdout_bytes == b""


@pytest.mark.parametrize(
    "span",
    [None, "0:10", "70000:"],  # a whole read, a range in the flipped chunk, a range after it
)
def test_tampered_bytes_exit_5_and_write_nothing(root: Path, span: str | None) -> None:
    ref = put(root, BINARY)
    store = cargohold.LocalStore(root)
    store.corrupt_for_tests(TENANT, ref, offset=5)
    store.close()

    args = ["cat", str(ref)] + ([] if span is None else ["--range", span])
    result = run(root, *args)

    if span == "70000:":  # a range read re-hashes only the chunks it touches: still intact
        assert result.exit_code == ExitCode.OK
        assert result.stdout_bytes == BINARY[70000:]
    else:
        assert result.exit_code == ExitCode.STALE
        assert result.stdout_bytes == b""


def test_an_expired_artifact_exits_6_on_cat_and_show(root: Path) -> None:
    ref = put_expired(root, b"expired body")

    read = run(root, "cat", str(ref))
    shown = run(root, "show", str(ref), "--json")

    assert read.exit_code == ExitCode.EXPIRED
    assert read.stdout_bytes == b""
    assert shown.exit_code == ExitCode.EXPIRED
    assert json.loads(shown.stdout)["expired"] is True


def test_cat_over_its_max_bytes_exits_7_and_writes_nothing(root: Path) -> None:
    ref = put(root, BINARY)

    over = run(root, "cat", str(ref), "--max-bytes", str(len(BINARY) - 1))
    fits = run(root, "cat", str(ref), "--max-bytes", str(len(BINARY)))
    range_fits = run(root, "cat", str(ref), "--range", "0:10", "--max-bytes", "10")

    assert over.exit_code == ExitCode.OVER_BUDGET
    assert over.stdout_bytes == b""
    assert fits.stdout_bytes == BINARY
    assert range_fits.stdout_bytes == BINARY[:10]


def test_put_over_the_artifact_limit_exits_8_and_stores_nothing(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARGOHOLD_MAX_ARTIFACT_BYTES", "10")

    over = run(root, "put", "-", input=b"x" * 11)
    at_limit = run(root, "put", "-", input=b"y" * 10)

    assert over.exit_code == ExitCode.REJECTED
    assert over.stdout == ""
    assert at_limit.exit_code == ExitCode.OK
    listed = json_out(run(root, "ls", "--json"))
    assert [r["ref"] for r in listed] == [str(cargohold.Ref.of(b"y" * 10))]


def test_put_of_a_file_over_the_limit_names_its_real_size_the_limit_and_the_setting(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARGOHOLD_MAX_ARTIFACT_BYTES", "1000")
    big = tmp_path / "big.log"
    big.write_bytes(b"z" * 27_000)

    from_file = run(root, "put", str(big))
    from_stream = run(root, "put", "-", input=b"z" * 27_000)

    assert from_file.exit_code == from_stream.exit_code == ExitCode.REJECTED
    assert from_file.stdout == from_stream.stdout == ""
    assert "27,000 bytes" in from_file.stderr  # the real size, not the limit plus one
    for result in (from_file, from_stream):
        assert "1,000" in result.stderr
        assert "max_artifact_bytes" in result.stderr  # the setting that raises it
        assert len(result.stderr.splitlines()) == 1
    assert json_out(run(root, "ls", "--json")) == []


def test_offload_of_an_output_over_the_artifact_limit_names_its_real_size_the_limit_and_setting(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARGOHOLD_MAX_ARTIFACT_BYTES", "40000")
    big = tmp_path / "big.log"
    big.write_bytes(b"payload-" * 7_500)  # 60,000 bytes

    from_file = run(root, "offload", str(big), "--json")
    from_stream = run(root, "offload", "-", "--json", input=b"payload-" * 7_500)

    assert from_file.exit_code == from_stream.exit_code == ExitCode.REJECTED
    file_out, stream_out = json.loads(from_file.stdout), json.loads(from_stream.stdout)
    for out in (file_out, stream_out):
        assert (out["outcome"], out["reason"], out["ref"]) == (
            "rejected",
            "artifact_too_large",
            None,
        )
        assert "40,000 bytes (max_artifact_bytes)" in out["content"]  # the limit and its setting
        assert "payload-" not in out["content"]
    # The file's real size from its metadata (it was 40,001, the bytes read); a stream's is not
    # known without reading it all.
    assert "returned 60,000 bytes" in file_out["content"]
    assert file_out["event"]["observed_bytes"] == 60_000
    assert "returned more than 40,000 bytes" in stream_out["content"]
    assert json_out(run(root, "ls", "--json")) == []


def test_offload_below_the_threshold_is_inline_whole_under_a_lower_artifact_limit(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARGOHOLD_MAX_ARTIFACT_BYTES", "1000")
    output = b"line of a tool output\n" * 900  # 19,800 bytes: under the 32 KiB threshold

    result = run(root, "offload", "-", input=output)

    assert result.exit_code == ExitCode.OK
    assert result.stdout_bytes == output  # whole: it was cut to 1,001 bytes, silently
    assert json_out(run(root, "ls", "--json")) == []


def test_put_over_the_session_quota_exits_8(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARGOHOLD_SESSION_OBJECTS", "1")
    put(root, b"first")

    second = run(root, "put", "-", input=b"second")

    assert second.exit_code == ExitCode.REJECTED
    assert second.stdout == ""


@pytest.mark.parametrize("sensitivity", ["secret", "credential", "raw_auth"])
def test_put_of_refused_sensitivity_exits_8_and_stores_nothing(
    root: Path, sensitivity: str
) -> None:
    result = run(root, "put", "-", "--sensitivity", sensitivity, input=b"hunter2")

    assert result.exit_code == ExitCode.REJECTED
    assert result.stdout == ""
    assert json_out(run(root, "ls", "--json")) == []


@pytest.mark.parametrize("ttl", ["0", "-5", str(8 * DAY)])
def test_put_with_a_ttl_out_of_range_is_a_usage_error(root: Path, ttl: str) -> None:
    result = run(root, "put", "-", "--ttl", ttl, input=b"x")

    assert result.exit_code == ExitCode.USAGE
    assert json_out(run(root, "ls", "--json")) == []


def test_an_unreadable_configuration_is_a_one_line_usage_error(root: Path, tmp_path: Path) -> None:
    bad = tmp_path / "cargohold.toml"
    bad.write_text("session_objects = 'many'\n")

    results = [
        run(root, "--config", str(bad), "ls"),
        run(root, "--config", str(tmp_path / "absent.toml"), "ls"),
        CliRunner().invoke(cli, ["--store", "nosuch://x", "ls"], catch_exceptions=False),
    ]

    for result in results:
        assert result.exit_code == ExitCode.USAGE
        assert len(result.stderr.splitlines()) == 1


def test_an_unexpected_exception_is_one_line_naming_only_its_class(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied", "/very/private/path")

    monkeypatch.setattr("cargohold.store.open_store", broken)

    result = run(root, "ls")

    assert result.exit_code == ExitCode.ERROR
    assert len(result.stderr.splitlines()) == 1
    assert "/very/private/path" not in result.stderr
    assert "Permission denied" not in result.stderr
    assert "PermissionError" in result.stderr


def test_help_of_a_command_works_with_a_broken_configuration(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CARGOHOLD_STORE", "nosuch://x")

    for command in ["put", "cat", "show", "ls", "du", "gc", "verify", "demo"]:
        result = CliRunner().invoke(cli, [command, "--help"], catch_exceptions=False)
        assert result.exit_code == ExitCode.OK
        assert "Example" in result.stdout


def test_group_help_lists_every_exit_status() -> None:
    result = CliRunner().invoke(cli, ["--help"], catch_exceptions=False)

    assert result.exit_code == ExitCode.OK
    epilog = result.stdout.split("Exit status:")[1]
    listed = [int(line.split()[0]) for line in epilog.strip().splitlines()]
    assert listed == [int(code) for code in ExitCode]


def test_help_does_not_import_rich(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from cargohold.cli import main\n"
        "status = main(['--help'])\n"
        "print(status, sorted(m for m in sys.modules if m.split('.')[0] == 'rich'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )

    assert done.returncode == 0
    assert done.stdout.splitlines()[-1] == "0 []"


def test_put_and_cat_import_neither_pydantic_nor_rich_nor_the_decision_commands(
    tmp_path: Path,
) -> None:
    # What a store command imports is its start-up time: pydantic alone cost ~60 ms of ~210.
    code = (
        "import sys\n"
        "from cargohold.cli import main\n"
        "store = sys.argv[1]\n"
        "assert main(['--store', store, 'put', sys.argv[2]]) == 0\n"
        "ref = 'artifact://sha256/' + __import__('hashlib').sha256(b'x' * 1024).hexdigest()\n"
        "assert main(['--store', store, 'cat', ref]) == 0\n"
        "unwanted = ('pydantic', 'rich', 'cargohold.projection', 'cargohold.cli._decisions',\n"
        "            'cargohold.cli._demo', 'cargohold.cli._envelope', 'cargohold.cli._guard')\n"
        "print(sorted(m for m in sys.modules if m.startswith(unwanted)), file=sys.stderr)\n"
    )
    source = tmp_path / "input.bin"
    source.write_bytes(b"x" * 1024)

    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "store"), str(source)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )

    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == "[]"  # stdout holds the reference and the bytes


@pytest.mark.parametrize(
    ("data", "sniffed"),
    [(LOG, False), (b"id,total\n1,2.5\n", False), (b'{"id": 1}', True), (PNG, True)],
    ids=["log", "csv", "json", "png"],
)
def test_put_from_stdin_imports_the_sniffer_only_for_bytes_it_could_name(
    tmp_path: Path, data: bytes, sniffed: bool
) -> None:
    # Importing the projectors costs a put as much again as its whole start-up.
    code = (
        "import sys\n"
        "from cargohold.cli import main\n"
        "assert main(['--store', sys.argv[1], 'put', '-']) == 0\n"
        "print('cargohold.projection' in sys.modules, file=sys.stderr)\n"
    )

    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "store")],
        input=data,
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
    )

    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().splitlines()[-1] == str(sniffed)


# -- gc and verify ------------------------------------------------------------------------------


def test_gc_dry_run_reports_expired_artifacts_and_removes_nothing(root: Path) -> None:
    old = put_expired(root, b"old bytes")
    live = put(root, BINARY)

    dry = json_out(run(root, "gc", "--dry-run", "--json"))
    after_dry = json_out(run(root, "ls", "--json"))
    real = json_out(run(root, "gc", "--json"))
    after_real = json_out(run(root, "ls", "--json"))

    assert dry == {"dry_run": True, "artifacts": 1, "blobs": 1, "bytes": len(b"old bytes")}
    assert [r["ref"] for r in after_dry] == [str(old), str(live)]
    assert real == {"dry_run": False, "artifacts": 1, "blobs": 1, "bytes": len(b"old bytes")}
    assert [r["ref"] for r in after_real] == [str(live)]
    assert run(root, "cat", str(old)).exit_code == ExitCode.MISSING
    assert run(root, "cat", str(live)).stdout_bytes == BINARY


@pytest.mark.parametrize("command", ["gc", "verify"])
def test_progress_goes_to_stderr_and_stdout_stays_parseable(
    root: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    put_expired(root, b"old bytes")
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich draws as on a terminal

    result = run(root, command, "--json")

    assert result.exit_code == ExitCode.OK
    assert json.loads(result.stdout)["blobs"] == 1
    assert result.stderr != ""


def test_no_progress_is_drawn_when_stderr_is_not_a_terminal(root: Path) -> None:
    put_expired(root, b"old bytes")

    result = run(root, "gc")

    assert result.exit_code == ExitCode.OK
    assert result.stderr == ""


def test_gc_with_nothing_expired_succeeds_and_keeps_everything(root: Path) -> None:
    ref = put(root, BINARY)

    result = run(root, "gc")

    assert result.exit_code == ExitCode.OK
    assert run(root, "cat", str(ref)).stdout_bytes == BINARY


def test_verify_exits_0_on_a_clean_store_and_1_after_tampering(root: Path) -> None:
    ref = put(root, BINARY)
    put(root, b"untouched")

    clean = run(root, "verify", "--json")
    cargohold.LocalStore(root).corrupt_for_tests(TENANT, ref)
    dirty = run(root, "verify", "--json")
    dirty_plain = run(root, "verify")

    assert clean.exit_code == ExitCode.OK
    assert json.loads(clean.stdout) == {
        "clean": True,
        "damaged": False,
        "blobs": 2,
        "findings": [],
    }
    assert dirty.exit_code == ExitCode.ERROR
    report = json.loads(dirty.stdout)
    assert (report["clean"], report["damaged"]) == (False, True)
    assert [(f["kind"], f["ref"]) for f in report["findings"]] == [("corrupt", str(ref))]
    assert dirty_plain.exit_code == ExitCode.ERROR
    assert str(ref) in dirty_plain.stdout


def _leave_housekeeping(root: Path) -> tuple[cargohold.Ref, cargohold.Ref]:
    """What an interrupted write leaves: a staged file whose writer died, and an orphan blob
    (its rename happened, its row's commit did not). Returns the stored and the orphan refs."""
    stored = put(root, BINARY)
    (root / "staging" / "1234-5678-0011223344556677").write_bytes(b"half a write")
    os.chmod(root / "staging" / "1234-5678-0011223344556677", 0o600)
    orphan = cargohold.Ref.of(b"renamed, never committed")
    store = cargohold.LocalStore(root)
    try:
        path = store.blob_path_for_tests(TENANT, orphan)
    finally:
        store.close()
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_bytes(b"renamed, never committed")
    os.chmod(path, 0o600)
    return stored, orphan


def test_verify_reports_leftovers_of_an_interrupted_write_but_exits_0(root: Path) -> None:
    _, orphan = _leave_housekeeping(root)

    report = run(root, "verify", "--json")
    plain = run(root, "verify")

    assert report.exit_code == ExitCode.OK
    assert json.loads(report.stdout) == {
        "clean": False,
        "damaged": False,
        "blobs": 1,
        "findings": [
            {"kind": "orphan", "ref": str(orphan), "detail": "bytes no record names"},
            {"kind": "staging", "ref": None, "detail": "a staged file of a write that died"},
        ],
    }
    assert plain.exit_code == ExitCode.OK
    assert "staging" in plain.stdout
    assert "no damage" in plain.stderr


def test_verify_exits_1_on_damage_even_beside_leftovers(root: Path) -> None:
    stored, _ = _leave_housekeeping(root)
    cargohold.LocalStore(root).corrupt_for_tests(TENANT, stored)

    report = run(root, "verify", "--json")

    assert report.exit_code == ExitCode.ERROR
    kinds = sorted(f["kind"] for f in json.loads(report.stdout)["findings"])
    assert kinds == ["corrupt", "orphan", "staging"]


@pytest.mark.parametrize("entry", ["blob", "directory"])
def test_verify_exits_1_on_a_store_entry_with_loose_permissions(root: Path, entry: str) -> None:
    ref = put(root, BINARY)
    store = cargohold.LocalStore(root)
    try:
        blob = store.blob_path_for_tests(TENANT, ref)
    finally:
        store.close()
    os.chmod(blob if entry == "blob" else blob.parent, 0o644 if entry == "blob" else 0o755)

    report = run(root, "verify", "--json")

    assert report.exit_code == ExitCode.ERROR
    assert [f["kind"] for f in json.loads(report.stdout)["findings"]] == ["permissions"]


def test_gc_removes_the_leftovers_of_an_interrupted_write_and_verify_is_clean_again(
    root: Path,
) -> None:
    stored, _ = _leave_housekeeping(root)
    before = json_out(run(root, "verify", "--json"))["findings"]

    swept = run(root, "gc")

    after = json_out(run(root, "verify", "--json"))
    assert sorted(f["kind"] for f in before) == ["orphan", "staging"]
    assert swept.exit_code == ExitCode.OK
    assert after["findings"] == []
    assert run(root, "cat", str(stored)).stdout_bytes == BINARY  # nothing live was touched


def test_cat_and_verify_of_a_blob_replaced_by_a_fifo_answer_at_once(
    console_script: Path, root: Path, tmp_path: Path
) -> None:
    ref = put(root, BINARY)
    store = cargohold.LocalStore(root)
    try:
        blob = store.blob_path_for_tests(TENANT, ref)
    finally:
        store.close()
    blob.unlink()
    os.mkfifo(blob, 0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGOHOLD_")}
    scope = ["--store", str(root), "--tenant", TENANT, "--user", USER, "--session", SESSION]

    # A regression blocks on the FIFO forever: the timeout turns that into a failure.
    cat = subprocess.run(
        [console_script, *scope, "cat", str(ref)],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    verify = subprocess.run(
        [console_script, *scope, "verify", "--json"],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )

    assert cat.returncode == ExitCode.STALE
    assert cat.stdout == b""
    assert verify.returncode == ExitCode.ERROR
    findings = json.loads(verify.stdout)["findings"]
    assert {"kind": "corrupt", "ref": str(ref)} in [
        {"kind": f["kind"], "ref": f["ref"]} for f in findings
    ]


# -- demo ---------------------------------------------------------------------------------------


DEMO_SESSION = re.compile(r"demo-[0-9a-f]{8}")


def test_demo_runs_twice_on_a_temp_store_storing_each_tool_result_once(root: Path) -> None:
    first = run(root, "demo")
    second = run(root, "demo")

    assert first.exit_code == ExitCode.OK
    assert second.exit_code == ExitCode.OK
    sample_ref = str(cargohold.Ref.of(sample_bytes()))
    log_ref = str(cargohold.Ref.of(batch_log()))
    session = DEMO_SESSION.search(second.stdout)
    assert session is not None
    listed = json_out(run(root, "ls", "--json", session=session.group()))
    assert sorted((r["ref"], r["media_type"], r["tool"]) for r in listed) == sorted(
        [
            (sample_ref, "application/json", "list_orders"),
            (log_ref, "text/plain", "fetch_logs"),
        ]
    )
    assert json_out(run(root, "du", "--json"))["tenant"]["objects"] == 2
    assert run(root, "verify").exit_code == ExitCode.OK  # the tampered byte was restored
    assert sample_ref in first.stdout
    assert log_ref in first.stdout
    assert "offloaded" in first.stdout
    assert "stale" in first.stdout


def test_demo_runs_in_a_fresh_session_of_its_own_each_time(root: Path) -> None:
    first = run(root, "demo")
    second = run(root, "demo")

    sessions = [DEMO_SESSION.findall(result.stdout) for result in (first, second)]
    assert sessions[0]
    assert sessions[1]
    assert len(set(sessions[0])) == len(set(sessions[1])) == 1
    assert sessions[0][0] != sessions[1][0]
    assert json_out(run(root, "ls", "--json")) == []  # the caller's own session is untouched


def test_a_second_demo_run_on_the_default_store_tells_the_same_story(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    runner = CliRunner()

    first = runner.invoke(cli, ["demo"], catch_exceptions=False)
    second = runner.invoke(cli, ["demo"], catch_exceptions=False)

    assert first.exit_code == second.exit_code == ExitCode.OK
    assert "offloaded" in second.stdout
    assert DEMO_SESSION.sub("demo-<id>", first.stdout) == DEMO_SESSION.sub(
        "demo-<id>", second.stdout
    )


def test_the_command_the_demo_suggests_is_on_one_line_and_works_as_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    runner = CliRunner()  # not a terminal: rich would wrap at 80 columns

    shown = runner.invoke(cli, ["demo"], catch_exceptions=False)
    lines = [line for line in shown.stdout.splitlines() if "cargohold --session" in line]
    assert len(lines) == 1
    command = shlex.split(lines[0].partition(": ")[2])
    followed = runner.invoke(cli, [*command[1:], "--json"], catch_exceptions=False)

    assert command[0] == "cargohold"
    assert followed.exit_code == ExitCode.OK
    assert json.loads(followed.stdout)["ref"] == str(cargohold.Ref.of(batch_log()))


def test_the_demo_cuts_a_long_line_at_a_word_and_ends_it_with_dots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with cargohold.open("memory://", session="s") as hold:  # the demo's stubs, whole
        stub = hold.offload(batch_log(), tool="fetch_logs", media_type="text/plain", budget="light")
        whole = stub.text.splitlines()

    shown = CliRunner().invoke(cli, ["demo"], catch_exceptions=False).stdout
    quoted = [line.removeprefix("   │ ") for line in shown.splitlines() if line.startswith("   │ ")]
    cut = [line for line in quoted if line.endswith("...") and line not in whole]

    assert cut  # the log's stub has lines longer than the demo shows
    assert all(len(line) <= 110 for line in quoted)
    for line in cut:
        kept = line.removesuffix("...")
        original = next((w for w in whole if w.startswith(kept) and len(w) > 110), None)
        if original is None:
            continue  # a line of another stub or answer: checked for length only
        assert original[len(kept)] == " ", (kept, original)  # cut between two words


def test_the_commands_the_demo_suggests_work_when_pasted_into_a_shell(tmp_path: Path) -> None:
    # As `make demo` runs it: .venv/bin/cargohold from the checkout, with .venv/bin not on PATH.
    root = Path(__file__).resolve().parents[1]
    script = Path(sys.executable).parent / "cargohold"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGOHOLD_")}
    env.update(
        PATH="/usr/bin:/bin",
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    invoked = os.path.relpath(script, root)
    if invoked.startswith(".."):
        invoked = str(script)
    demo = subprocess.run(
        [invoked, "demo"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    suggested = [
        re.sub(r"\x1b\[[0-9;]*m", "", line).split(": ", 1)[1]
        for line in demo.stdout.splitlines()
        if re.search(r"(Read more yourself|in the events log): ", line)
    ]

    pasted = [
        subprocess.run(
            command, shell=True, cwd=root, env=env, capture_output=True, text=True, timeout=120
        )
        for command in suggested
    ]

    assert demo.returncode == ExitCode.OK, demo.stderr
    assert len(suggested) == 2
    assert [p.returncode for p in pasted] == [ExitCode.OK, ExitCode.OK], [p.stderr for p in pasted]
    assert "WARN" in pasted[1].stdout


def test_demo_logs_one_event_per_decision(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "events.jsonl"
    monkeypatch.setenv("CARGOHOLD_EVENTS_LOG", str(log))

    result = run(root, "demo")

    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert result.exit_code == ExitCode.OK
    outcomes = sorted(e["outcome"] for e in events)
    expected = ["offloaded", "offloaded", "inline", "existing_reference", "stale"]
    assert outcomes == sorted([*expected, "resolved", "resolved", "resolved"])
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    analyst = [e for e in events if e["agent_id"] == "log-analyst"]
    assert [(e["parent_agent_id"], e["depth"]) for e in analyst] == [("demo-agent", 1)]


def test_demo_runs_on_a_memory_store() -> None:
    result = CliRunner().invoke(cli, ["--store", "memory://", "demo"], catch_exceptions=False)

    assert result.exit_code == ExitCode.OK


def test_demo_exits_1_when_verify_finds_a_problem(root: Path) -> None:
    ref = put(root, BINARY)
    cargohold.LocalStore(root).corrupt_for_tests(TENANT, ref)

    result = run(root, "demo")

    assert result.exit_code == ExitCode.ERROR


def test_the_shipped_sample_is_a_realistic_heavy_json_document() -> None:
    data = sample_bytes()
    orders = json.loads(data)

    assert SAMPLE.endswith(".json")
    assert 40 * 1024 <= len(data) <= 60 * 1024
    assert isinstance(orders, list)
    assert [order["id"] for order in orders] == list(range(1, len(orders) + 1))


# -- the real console script --------------------------------------------------------------------


@pytest.fixture
def console_script() -> Path:
    script = Path(sys.executable).parent / "cargohold"
    if not script.exists():
        pytest.fail(f"console script not installed next to {sys.executable}")
    return script


def test_console_script_round_trips_binary_bytes_through_stdin_and_stdout(
    console_script: Path, root: Path, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGOHOLD_")}
    scope = ["--store", str(root), "--tenant", TENANT, "--user", USER, "--session", SESSION]

    stored = subprocess.run(
        [console_script, *scope, "put", "-"],
        input=BINARY,
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    ref = stored.stdout.decode().strip()
    read = subprocess.run(
        [console_script, *scope, "cat", ref],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    missing = subprocess.run(
        [console_script, *scope, "cat", str(cargohold.Ref.of(b"absent"))],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )

    assert stored.returncode == ExitCode.OK
    assert ref == str(cargohold.Ref.of(BINARY))
    assert read.returncode == ExitCode.OK
    assert read.stdout == BINARY
    assert hashlib.sha256(read.stdout).hexdigest() == cargohold.Ref.of(BINARY).digest
    assert missing.returncode == ExitCode.MISSING
    assert missing.stdout == b""
    assert len(missing.stderr.splitlines()) == 1


def test_main_returns_the_exit_status(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = main(["--store", str(root), "cat", str(cargohold.Ref.of(b"absent"))])
    ok = main(["--store", str(root), "verify"])

    assert missing == ExitCode.MISSING
    assert ok == ExitCode.OK


# -- scope parts that are not text ---------------------------------------------------------------


@pytest.mark.parametrize("variable", ["CARGOHOLD_TENANT", "CARGOHOLD_USER", "CARGOHOLD_SESSION"])
def test_a_scope_variable_holding_bytes_that_are_not_utf8_exits_2_with_one_clear_line(
    console_script: Path, root: Path, tmp_path: Path, variable: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGOHOLD_")}
    # subprocess writes a surrogateescape'd str back as its raw bytes: the child sees 0xFF 0xC3
    env[variable] = b"ana\xff\xc3".decode("utf-8", "surrogateescape")

    done = subprocess.run(
        [console_script, "--store", str(root), "ls"],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )

    part = variable.removeprefix("CARGOHOLD_").lower()
    assert done.returncode == ExitCode.USAGE
    assert done.stdout == b""
    lines = done.stderr.decode("utf-8").splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("cargohold: error: ")
    assert f"scope {part} must be valid UTF-8" in lines[0]
    assert "UnicodeEncodeError" not in lines[0]  # what it said before: an unexpected crash
    assert "ana" not in lines[0]


@pytest.mark.parametrize("option", ["--tenant", "--user", "--session"])
@pytest.mark.parametrize(
    "value", [b"ana\xff".decode("utf-8", "surrogateescape"), "ana\x00", "\ud800"], ids=ascii
)
def test_a_scope_option_that_is_not_utf8_or_holds_nul_is_a_usage_error_naming_the_option(
    root: Path, option: str, value: str
) -> None:
    parts = {"--tenant": TENANT, "--user": USER, "--session": SESSION, option: value}
    scope = [item for pair in parts.items() for item in pair]

    result = CliRunner().invoke(cli, ["--store", str(root), *scope, "ls"])

    assert result.exit_code == ExitCode.USAGE
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"Invalid value for {option}" in result.output
    assert "ana" not in result.output
    assert not root.exists()  # refused before the store was opened
