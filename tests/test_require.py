"""The tests' optional-dependency gate: skips on a developer's machine, fails under CI=true."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from _require import require

ABSENT = "cargohold_test_no_such_module"


@pytest.mark.parametrize("ci", ["true", "TRUE", "True"])
def test_a_missing_module_fails_under_ci_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, ci: str
) -> None:
    monkeypatch.setenv("CI", ci)

    with pytest.raises(pytest.fail.Exception) as failed:
        require(ABSENT, "postgres")

    assert not isinstance(failed.value, pytest.skip.Exception)
    assert ABSENT in failed.value.msg
    assert "cargohold[postgres]" in failed.value.msg
    assert failed.value.pytrace is False


@pytest.mark.parametrize("ci", [None, "", "false", "1", "yes"])
def test_a_missing_module_skips_outside_ci_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch, ci: str | None
) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)

    with pytest.raises(pytest.skip.Exception) as skipped:
        require(f"{ABSENT}.submodule", "openai")

    assert f"{ABSENT}.submodule" in skipped.value.msg
    assert "cargohold[openai]" in skipped.value.msg
    assert skipped.value.allow_module_level


def test_an_installed_module_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")

    assert require("xml.etree.ElementTree", "dev") is ElementTree


@pytest.mark.parametrize("ci", ["", "true"])
def test_an_installed_module_that_cannot_import_its_own_dependency_is_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ci: str
) -> None:
    (tmp_path / "cargohold_test_broken.py").write_text(f"import {ABSENT}\n")
    monkeypatch.syspath_prepend(tmp_path)
    monkeypatch.setenv("CI", ci)

    with pytest.raises(ModuleNotFoundError, match=ABSENT):
        require("cargohold_test_broken", "dev")


@pytest.mark.parametrize(
    ("ci", "skipped", "errors", "exit_code"),
    [("", 1, 0, pytest.ExitCode.NO_TESTS_COLLECTED), ("true", 0, 1, pytest.ExitCode.INTERRUPTED)],
)
def test_at_module_level_it_skips_the_module_or_under_ci_is_a_collection_error(
    tmp_path: Path, ci: str, skipped: int, errors: int, exit_code: pytest.ExitCode
) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        f'from _require import require\n\nrequire("{ABSENT}", "anthropic")\n\n\n'
        "def test_needs_the_module():\n    pass\n"
    )
    report = tmp_path / "report.xml"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent), "CI": ci}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs"]
    done = subprocess.run(
        [*command, f"--junitxml={report}", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    suite = ElementTree.parse(report).getroot().find("testsuite")
    assert suite is not None
    counts = (int(suite.get("skipped", "0")), int(suite.get("errors", "0")))
    assert counts == (skipped, errors), done.stdout
    assert done.returncode == exit_code, done.stdout
    assert "cargohold[anthropic]" in done.stdout
    if skipped:
        assert "test_probe.py:3" in done.stdout  # the skip names the module that requires it
    else:
        assert "ERROR collecting test_probe.py" in done.stdout
