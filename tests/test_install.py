"""cargohold installs as a dependency: the wheel built from this tree installs into a fresh
virtualenv, with its dependencies from the package index, and ``cargohold demo`` runs from it.

Slow (about 20 s, most of it pip fetching the dependencies from the index):
``pytest -m slow tests/test_install.py``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]


def _run(
    argv: list[str], *, timeout: float, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a command; on failure, fail the test with its whole output."""
    proc = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        pytest.fail(
            f"{' '.join(argv)} exited {proc.returncode}\n"
            f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
        )
    return proc


def _clean_env(tmp_path: Path) -> dict[str, str]:
    """The environment of the installed program: no cargohold configuration, no path into this
    tree, and a cache and state directory of its own."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("CARGOHOLD_")
        and name not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}
    }
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env["PYTHONNOUSERSITE"] = "1"
    return env


@pytest.mark.slow
def test_the_built_wheel_installs_into_a_fresh_virtualenv_and_runs_the_demo(
    tmp_path: Path,
) -> None:
    timings: dict[str, float] = {}

    # 1. Build the wheel from the project root. hatchling comes with the dev extra; without it,
    # pip builds in isolation and fetches the backend from the index.
    began = time.perf_counter()
    dist = tmp_path / "dist"
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("hatchling") else []
    _run(
        [*PIP, "wheel", "--no-deps", *isolation, "-w", str(dist), str(ROOT)],
        timeout=300,
        cwd=tmp_path,
    )
    timings["build"] = time.perf_counter() - began
    wheels = list(dist.glob("cargohold-*.whl"))
    assert len(wheels) == 1, wheels
    wheel = wheels[0]

    # 2. The wheel holds the package and its metadata, and nothing of the repository's own.
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    version = wheel.name.split("-")[1]
    assert {name.split("/", 1)[0] for name in names} == {
        "cargohold",
        f"cargohold-{version}.dist-info",
    }
    assert "cargohold/samples/orders.json" in names  # the demo's sample ships with the package
    assert "cargohold/py.typed" in names
    leaked = [
        name
        for name in names
        if name.startswith(("tests/", "bench/", "docs/"))
        or "fixtures" in name
        or "__pycache__" in name
        or name.endswith(".pyc")
    ]
    assert leaked == []

    # 3. A fresh virtualenv, and the wheel installed into it with its dependencies from the index.
    # The venv is made without pip (no ensurepip: seconds saved); this environment's pip installs
    # into it by targeting its interpreter, as the venv's own pip would.
    began = time.perf_counter()
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120, cwd=tmp_path)
    python = venv / "bin" / "python"
    timings["venv"] = time.perf_counter() - began
    began = time.perf_counter()
    _run(
        [*PIP, "--python", str(python), "install", str(wheel)],
        timeout=600,
        cwd=tmp_path,
    )
    timings["install"] = time.perf_counter() - began

    env = _clean_env(tmp_path)
    # 4. The package imported there is the wheel's copy, not this tree's source.
    where = _run(
        [str(python), "-c", "import cargohold; print(cargohold.__file__)"],
        timeout=60,
        cwd=tmp_path,
        env=env,
    ).stdout.strip()
    imported = Path(where).resolve()
    assert imported.is_relative_to(venv.resolve()), imported
    assert not imported.is_relative_to(ROOT / "src"), imported
    script = venv / "bin" / "cargohold"
    assert script.read_text().splitlines()[0] == f"#!{python}"

    # 5. `cargohold demo` from the venv, on the embedded default store under its own cache.
    began = time.perf_counter()
    demo = _run([str(script), "demo"], timeout=120, cwd=tmp_path, env=env)
    timings["demo"] = time.perf_counter() - began
    out = demo.stdout
    assert re.search(
        r"tool fetch_logs returned [\d,]+ bytes → offloaded; [\d,]+-byte stub in context instead",
        out,
    ), out
    assert re.search(r"\[cargohold\] artifact://sha256/[0-9a-f]{64}", out), out
    assert "[cargohold] end of stub" in out, out
    assert "every blob re-hashed against its digest → clean" in out, out
    assert (tmp_path / "cache" / "cargohold").is_dir()  # the store the demo wrote

    print(
        "install test: "
        + ", ".join(f"{step} {seconds:.1f} s" for step, seconds in timings.items())
        + f", total {sum(timings.values()):.1f} s"
    )


def _planned(target: str, venv: Path) -> list[str]:
    """The commands ``make TARGET`` would run on a fresh checkout (no virtualenv yet)."""
    if shutil.which("make") is None:
        pytest.fail("make is not installed; the README's two set-up commands need it")
    done = _run(["make", "-n", target, f"VENV={venv}"], timeout=60, cwd=ROOT)
    return done.stdout.splitlines()


def _installs(lines: list[str]) -> list[str]:
    return [line for line in lines if " -m pip install " in line and "--upgrade pip" not in line]


def test_make_demo_installs_only_the_runtime_dependencies(tmp_path: Path) -> None:
    installs = _installs(_planned("demo", tmp_path / "venv"))

    assert len(installs) == 1
    assert installs[0].endswith(" -e .")  # no extras: no linters, type checker or frameworks


def test_make_test_installs_the_dev_toolchain(tmp_path: Path) -> None:
    installs = _installs(_planned("test", tmp_path / "venv"))

    assert len(installs) == 1
    assert installs[0].endswith(" -e '.[dev,postgres]'")
