"""Decision benchmarks: the offload seam and the projection.

- ``offload``: the decision for inline content against just measuring its UTF-8 size; and an
  offload of 1 MiB against a plain store put of the same bytes (binary: the seam's own overhead;
  a log and a JSON document: the seam plus their structure-aware projection).
- ``projection``: projection time per MB by kind against parsing the same bytes (``orjson.loads``
  for JSON, the ``csv`` module for CSV), on the shared corpus files; and the peak memory of
  projecting a 16 MiB body of each kind, measured as the resident-set growth of a fresh process
  (so simdjson's native allocations count too), as a multiple of the input's size.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson

from bench._util import Case, KiB, MiB, Row, interleave
from bench.store import UNLIMITED, Config
from cargohold import LocalStore, Offloader, Scope, ScopedStore
from cargohold._stub import Budget
from cargohold.projection import detect, project

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


def _log(size: int, seed: int) -> str:
    rng = random.Random(seed)
    lines = []
    total = 0
    n = 0
    while total < size:
        n += 1
        level = "ERROR" if n % 997 == 0 else "WARN" if n % 89 == 0 else "INFO"
        line = (
            f"2026-11-29T02:{n // 60 % 60:02d}:{n % 60:02d}Z {level} [worker-{rng.randint(1, 8)}]"
            f" billing.charge invoice=INV-{n:07d} amount={rng.randint(100, 90000) / 100:.2f}"
            f" latency_ms={rng.randint(40, 900)} seed={seed}\n"
        )
        lines.append(line)
        total += len(line)
    return "".join(lines)[:size]


def _records_json(size: int, seed: int) -> str:
    rng = random.Random(seed)
    out = []
    total = 2
    n = 0
    statuses = ["paid", "refunded", "open", "void"]
    while total < size - 200:
        n += 1
        record = {
            "id": n,
            "customer": f"c-{rng.randint(1, 99999):05d}",
            "total": rng.randint(99, 1845000) / 100,
            "status": rng.choice(statuses),
            "created_at": f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}T08:14:03Z",
            "seed": seed,
        }
        text = json.dumps(record, separators=(",", ":"))
        out.append(text)
        total += len(text) + 1
    return "[" + ",".join(out) + "]"


def bench_offload(root: Path, cfg: Config) -> list[Row]:
    store = LocalStore(root / "offload", limits=UNLIMITED)
    counter = iter(range(1 << 30))

    def scoped() -> ScopedStore:
        return ScopedStore(store, Scope("bench", "u", f"s{next(counter) // 100}"))

    offloader = Offloader(scoped())
    rows: list[Row] = []
    for size in (1 * KiB, 16 * KiB):
        text = _log(size, 1)
        medians = interleave(
            [
                Case("decision", lambda i, t=text: offloader.offload(t, tool="t")),
                Case("utf8", lambda i, t=text: len(t.encode())),
            ],
            2000 if not cfg.quick else 300,
        )
        rows.append(
            Row(
                "offload",
                "inline decision",
                size,
                medians["decision"],
                "len(text.encode())",
                medians["utf8"],
            )
        )
    repeat = 40 if not cfg.quick else 12
    for kind, make in (
        ("binary", lambda i: os.urandom(MiB)),
        ("log", lambda i: _log(MiB, i).encode()),
        ("json", lambda i: _records_json(MiB, i).encode()),
    ):
        payload: dict[str, bytes] = {}
        bound = Offloader(scoped(), budget=Budget.BALANCED)
        plain = scoped()
        media = "application/json" if kind == "json" else None
        medians = interleave(
            _offload_cases(payload, make, bound, plain, media),
            repeat,
        )
        target = 1.1 if kind == "binary" else None
        rows.append(
            Row(
                "offload",
                f"offload 1 MiB {kind}",
                MiB,
                medians["offload"],
                "store put",
                medians["put"],
                target,
            )
        )
    store.close()
    return rows


def _offload_cases(
    payload: dict[str, bytes],
    make: Callable[[int], bytes],
    bound: Offloader,
    plain: ScopedStore,
    media: str | None,
) -> list[Case]:
    """An offload and a plain put, each of fresh bytes made before it runs (untimed)."""

    def prepare(case: str) -> Callable[[int], None]:
        def run(i: int) -> None:
            payload[case] = make(i * 2 + (case == "put"))

        return run

    return [
        Case(
            "offload",
            lambda i: bound.offload(payload["offload"], media_type=media),
            prepare("offload"),
        ),
        Case("put", lambda i: plain.put(payload["put"]), prepare("put")),
    ]


def _corpus(kind: str) -> list[Path]:
    suffix = {"json": (".json", ".geojson", ".topojson"), "csv": (".csv",)}[kind]
    return sorted(p for p in CORPUS.iterdir() if p.suffix in suffix) if CORPUS.is_dir() else []


def _parse_csv(data: bytes) -> int:
    return sum(1 for _ in csv.reader(io.StringIO(data.decode("utf-8", "replace"))))


def bench_projection(root: Path, cfg: Config) -> list[Row]:
    rows: list[Row] = []
    repeat = 20 if not cfg.quick else 5
    budget = 8 * KiB
    parsers: tuple[tuple[str, Callable[[bytes], object], str], ...] = (
        ("json", orjson.loads, "application/json"),
        ("csv", _parse_csv, "text/csv"),
    )
    for kind, parse, media in parsers:
        for path in _corpus(kind):
            data = path.read_bytes()
            found = detect(data, media_type=media)
            medians = interleave(
                [
                    Case(
                        "project",
                        lambda i, d=data, f=found, m=media: project(
                            d, media_type=m, budget=budget, detection=f
                        ),
                    ),
                    Case("parse", lambda i, d=data, p=parse: p(d)),
                ],
                repeat,
            )
            rows.append(
                Row(
                    "projection",
                    f"{kind}: {path.name}",
                    len(data),
                    medians["project"],
                    "orjson.loads" if kind == "json" else "csv module",
                    medians["parse"],
                    1.5,
                )
            )
    for kind in ("json", "csv", "log"):
        rows.append(_peak_memory(kind))
    return rows


_PEAK = r"""
import gc, sys
sys.path.insert(0, {src!r})
from cargohold.projection import project, detect

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024

data = open({path!r}, "rb").read()
media = {media!r}
found = detect(data, media_type=media)
gc.collect()
with open("/proc/self/clear_refs", "w") as handle:
    handle.write("5")  # reset the peak (VmHWM) to the current resident size
before = status("VmRSS")
project(data, media_type=media, budget=8192, detection=found)
print(status("VmHWM") - before)
"""


def _peak_memory(kind: str) -> Row:
    """Peak resident growth while projecting a 16 MiB body, in a fresh process."""
    size = 16 * MiB - 4096
    if kind == "json":
        body = _records_json(size, 7).encode()
        media = "application/json"
    elif kind == "csv":
        lines = ["id,customer,total,status,created_at"]
        rng = random.Random(3)
        while len(lines) * 48 < size:
            lines.append(
                f"{len(lines)},c-{rng.randint(1, 99999):05d},{rng.randint(99, 99999) / 100},"
                f"paid,2026-11-{rng.randint(1, 28):02d}"
            )
        body = ("\n".join(lines) + "\n").encode()[:size]
        media = "text/csv"
    else:
        body = _log(size, 5).encode()
        media = "text/plain"
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=f".{kind}") as handle:
        handle.write(body)
        handle.flush()
        src = str(Path(__file__).resolve().parents[1] / "src")
        script = _PEAK.format(src=src, path=handle.name, media=media)
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300
        ).stdout
    growth = int(out.strip())
    # A "ratio" row: value and baseline in the same unit (bytes), target 3x the input.
    return Row(
        "projection",
        f"peak memory, 16 MiB {kind}",
        len(body),
        growth / 1e6,
        "input size (MB)",
        len(body) / 1e6,
        3.0,
    )


SECTIONS: dict[str, Callable[[Path, Config], list[Row]]] = {
    "offload": bench_offload,
    "projection": bench_projection,
}
