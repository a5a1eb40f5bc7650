"""CI's short run of the crash soak (``python -m bench soak``, see ``docs/reliability.md``).

The same code path as the recorded run, with fewer trials: writers re-putting short-TTL content
and gc loops, killed with SIGKILL at random moments on the local store; and PostgreSQL killed
with ``kill -9`` (the whole server, or one backend) under them. After each kill a fresh handle
must find every put a writer logged as done (and still alive) whole, and nothing partial. And the
tampered-index mode: bad rows planted at random in a local store's index while it works.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from _require import require, unavailable

# By path, as the tests load their workers: bench/ is not on sys.path under `pytest` alone.
_SOAK_PATH = Path(__file__).resolve().parent.parent / "bench" / "soak.py"
_spec = importlib.util.spec_from_file_location("cargohold_bench_soak", _SOAK_PATH)
assert _spec is not None
assert _spec.loader is not None
soak = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = soak  # dataclasses look their module up while the class is made
_spec.loader.exec_module(soak)

LOCAL_TRIALS = 20
PG_KILLS = 3
TAMPERED_OPS = 1000


def _assert_clean(tally: Any) -> None:
    assert tally.details == []
    assert (tally.lost, tally.corrupt, tally.partial) == (0, 0, 0), tally.summary()
    assert tally.worker_errors == 0, tally.summary()
    assert tally.unexpected_errors == 0, tally.summary()
    assert sum(tally.left_after_gc.values()) == 0, tally.summary()  # gc removed every leftover
    # A soak that checked nothing proves nothing.
    assert tally.checked > 0, tally.summary()
    assert tally.rows > 0, tally.summary()


@pytest.mark.slow
def test_writers_and_gc_killed_at_random_moments_lose_nothing_on_the_local_store(
    tmp_path: Path,
) -> None:
    tally = soak.run_local(LOCAL_TRIALS, workdir=tmp_path, seed=20260402, report=lambda _: None)

    assert tally.trials == LOCAL_TRIALS
    _assert_clean(tally)


@pytest.mark.slow
def test_postgresql_killed_under_writers_loses_nothing(tmp_path: Path) -> None:
    require("psycopg", "postgres")
    pg_cluster = soak._load_pg_cluster()
    if pg_cluster._bindir() is None:
        unavailable(pg_cluster._MISSING_HINT)

    tally = soak.run_postgres(PG_KILLS, workdir=tmp_path, seed=20260402, report=lambda _: None)

    assert tally.trials == PG_KILLS
    _assert_clean(tally)


def test_a_store_whose_index_is_tampered_with_touches_nothing_outside_its_root_and_never_hangs(
    tmp_path: Path,
) -> None:
    tally = soak.run_tampered(TAMPERED_OPS, workdir=tmp_path, seed=20261201, report=lambda _: None)

    assert tally.details == [], tally.summary()
    assert (tally.touched, tally.untyped, tally.blocked, tally.hung) == (0, 0, 0, 0)
    # A run that planted nothing, or never met a bad row, proves nothing.
    assert tally.ops == TAMPERED_OPS
    assert tally.tampers > 100, tally.summary()
    assert tally.findings["corrupt"] > 0, tally.summary()
