"""Start-up of the command line: ``cargohold put`` of 1 KiB against ``python -c pass``.

Run alone with ``python -m bench.cli [--quick]``, or as the ``cli`` section of ``python -m bench``.

Each figure is the median wall-clock time of a whole process (start, imports, the command, exit),
the two commands interleaved so a busy neighbour slows both alike. The design asks that commands
that open the store start in under 100 ms; the ratio to a bare interpreter is what stays
comparable across machines.

The children import from bytecode, as an installed wheel does (pip compiles it at install): when
``PYTHONDONTWRITEBYTECODE`` is set, it is dropped for them and their bytecode goes to a scratch
``PYTHONPYCACHEPREFIX``, so no ``__pycache__`` appears in the source tree.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bench._util import Case, KiB, Row, distinct, interleave, ms, scratch_dir, text_table
from bench.store import Config

TARGET_MS = 100.0
"""The design's bound on the start of a command that opens the store."""


def _console_script() -> Path:
    script = Path(sys.executable).parent / "cargohold"
    if not script.exists():
        raise SystemExit(f"the cargohold console script is not installed next to {sys.executable}")
    return script


def _child_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGOHOLD_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    env["CARGOHOLD_STORE"] = str(root / "store")
    env["CARGOHOLD_EVENTS_LOG"] = str(root / "events.jsonl")
    return env


def _runner(
    command: list[str], env: dict[str, str], cwd: Path, data: Callable[[int], bytes] | None = None
) -> Callable[[int], object]:
    def run(index: int) -> object:
        done = subprocess.run(
            command,
            input=None if data is None else data(index),
            capture_output=True,
            env=env,
            cwd=cwd,
            timeout=60,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{command[-2:]} exited {done.returncode}: {done.stderr[-300:]!r}")
        return done

    return run


_LOG_LINE = b"2026-11-29T02:00:00Z INFO  [worker-3] billing.charge invoice=INV-001187 ok\n"


def bench_cli(root: Path, cfg: Config) -> list[Row]:
    """``cargohold put -`` of 1 KiB (new bytes each run) and ``cat`` of it, against ``pass``.

    The headline put is of text (a log, what tools mostly print): put names its media type
    without the sniffer. Binary bytes of no name are sniffed for their format (PNG, gzip...),
    which imports the projectors: the second put row shows that cost.
    """
    root.mkdir(parents=True, exist_ok=True)
    env = _child_env(root)
    script = str(_console_script())
    text = (_LOG_LINE * (KiB // len(_LOG_LINE) + 1))[:KiB]
    binary = os.urandom(KiB)

    def payload(base: bytes, tag: int) -> Callable[[int], bytes]:
        # distinct() writes 16 bytes of (tag, index) at the head: binary, so text keeps its own
        # head and takes the index as digits at its end instead.
        if base is binary:
            return lambda index: distinct(base, index + 1, tag)
        return lambda index: base[:-12] + b"%011d\n" % index

    first = _runner([script, "put", "-"], env, root, lambda _: text)(0)
    assert isinstance(first, subprocess.CompletedProcess)
    ref = first.stdout.decode().strip()
    cases = [
        Case("put", _runner([script, "put", "-"], env, root, payload(text, 1))),
        Case("put-binary", _runner([script, "put", "-"], env, root, payload(binary, 2))),
        Case("cat", _runner([script, "cat", ref], env, root)),
        Case("pass", _runner([sys.executable, "-c", "pass"], env, root)),
    ]
    repeat = 10 if cfg.quick else 40
    medians = interleave(cases, repeat=repeat, warmup=2)
    baseline = medians["pass"]
    return [
        Row("cli", "cargohold put - (text)", KiB, medians["put"], "python -c pass", baseline),
        Row(
            "cli",
            "cargohold put - (binary, sniffed)",
            KiB,
            medians["put-binary"],
            "python -c pass",
            baseline,
        ),
        Row("cli", "cargohold cat REF", KiB, medians["cat"], "python -c pass", baseline),
    ]


SECTIONS: dict[str, Callable[[Path, Config], list[Row]]] = {"cli": bench_cli}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cli", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10 runs per command instead of 40")
    args = parser.parse_args(argv)
    with scratch_dir() as root:
        rows = bench_cli(root / "cli", Config(quick=args.quick))
    print(text_table(rows))
    put = rows[0]
    verdict = "met" if put.value_ms < TARGET_MS else "MISSED"
    print(
        f"\ncargohold put of 1 KiB: {ms(put.value_ms)} ms median, python -c pass "
        f"{ms(put.baseline_ms)} ms, ratio {put.ratio:.2f}x; under {TARGET_MS:.0f} ms: {verdict}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
