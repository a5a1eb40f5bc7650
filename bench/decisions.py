"""Decision benchmarks: the offload seam and the projection.

- ``offload``: the decision for inline content against just measuring its UTF-8 size; and an
  offload of 1 MiB and of 16 MiB of every kind against a plain store put of the same bytes
  (binary: the seam's own overhead; text kinds: the seam, the credential scan, the token count
  and the kind's projection). Targets: binary 1.1x; text 2x at 1 MiB, 1.2x at 16 MiB.
- ``projection``: projection time per MB by kind against parsing the same bytes (``orjson.loads``
  for JSON, the ``csv`` module for CSV), on the shared corpus files; and the peak memory of
  projecting a 16 MiB body of each kind, measured as the resident-set growth of a fresh process
  (so simdjson's and lexbor's native allocations count too), as a multiple of the input's size
  (target 2x); and the projection of a 16 MiB HTML page against 0.5 s.
"""

from __future__ import annotations

import base64
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

from bench._util import Case, KiB, MiB, Row, interleave, size_label
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
    for kind, make in (("binary", lambda i: os.urandom(MiB)),):
        payload: dict[str, bytes] = {}
        bound = Offloader(scoped(), budget=Budget.BALANCED)
        plain = scoped()
        media = "application/json" if kind == "json" else None
        medians = interleave(
            _offload_cases(payload, make, bound, plain, media),
            repeat,
        )
        target = 1.1 if kind == "binary" else 2.0
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
    for size, target, rounds in ((MiB, 2.0, repeat), (BIG, 1.2, 6 if not cfg.quick else 3)):
        for kind, (base, media) in _bodies(size).items():
            bound = Offloader(scoped(), budget=Budget.BALANCED)
            plain = scoped()
            payload = {}
            medians = interleave(
                _offload_cases(
                    payload, lambda i, k=kind, b=base: _fresh(k, b, i), bound, plain, media
                ),
                rounds,
            )
            rows.append(
                Row(
                    "offload",
                    f"offload {size_label(size)} {kind}",
                    len(base),
                    medians["offload"],
                    "store put",
                    medians["put"],
                    target,
                )
            )
    store.close()
    return rows


BIG = 16 * MiB - 4096
"""The largest body the bench store takes (its per-artifact limit is 16 MiB)."""
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "code"


def _repeat(source: bytes, size: int, head: bytes = b"", tail: bytes = b"") -> bytes:
    """``source`` repeated to about ``size`` bytes, cut at a line end, between ``head`` and
    ``tail``."""
    room = size - len(head) - len(tail)
    body = source * (room // max(1, len(source)) + 1)
    return head + body[: body.rfind(b"\n", 0, room) + 1] + tail


def _ndjson(size: int) -> bytes:
    records = orjson.loads(_records_json(size, 3))
    body = b"\n".join(orjson.dumps(r | {"note": "n" * 16}) for r in records) + b"\n"
    return body[: body.rfind(b"\n", 0, size) + 1]


def _csv(size: int) -> bytes:
    rng = random.Random(11)
    lines = ["id,customer,total,status,created_at,note"]
    total = 0
    while total < size - 100:
        line = (
            f"{len(lines)},c-{rng.randint(1, 99999):05d},{rng.randint(99, 99999) / 100},"
            f"{rng.choice(['paid', 'open', 'void'])},2026-11-{rng.randint(1, 28):02d},"
            f"note number {rng.randint(0, 10**12):012d}"
        )
        lines.append(line)
        total += len(line) + 1
    return ("\n".join(lines) + "\n").encode()


def _prose(size: int) -> bytes:
    rng = random.Random(5)
    words = ["the", "of", "and", "a", "to", "in", "is", "you", "that", "it", "he", "was", "for"]
    lines = []
    total = 0
    while total < size - 100:
        line = " ".join(rng.choice(words) for _ in range(14)) + "."
        lines.append(line)
        total += len(line) + 1
    return ("\n".join(lines) + "\n").encode()


def _bodies(size: int) -> dict[str, tuple[bytes, str | None]]:
    """One body of each text kind of about ``size`` bytes, and the media type a tool gives."""
    corpus = {p.name: p.read_bytes() for p in CORPUS.iterdir()} if CORPUS.is_dir() else {}
    fixtures = {p.name: p.read_bytes() for p in FIXTURES.iterdir() if p.suffix != ".py"}
    bodies: dict[str, tuple[bytes, str | None]] = {
        "log": (_log(size, 1).encode(), None),
        "json": (_records_json(size, 1).encode(), "application/json"),
        "ndjson": (_ndjson(size), "application/x-ndjson"),
        "csv": (_csv(size), "text/csv"),
        "code": (
            _repeat(fixtures["cargohold_conformance.py.txt"], size, tail=b"# 000000000000\n"),
            "text/x-python",
        ),
        "diff": (_repeat(fixtures["cargohold_git_diff.diff"], size), "text/x-diff"),
        "search": (_repeat(fixtures["cargohold_grep_rn.txt"], size), None),
        "text": (_prose(size), None),
    }
    if corpus:
        page = corpus["wikipedia_page_large.html"]
        body = page[page.index(b"<body") : page.rindex(b"</body>")]
        bodies["html"] = (
            _repeat(body, size, page[: page.index(b"<body")], b"</body></html>\n"),
            "text/html",
        )
        bodies["failure"] = (_repeat(corpus["defects4j_closure_failing_tests.txt"], size), None)
        bodies["base64"] = (_repeat(corpus["geotopo_book.pdf.b64.txt"], size), None)
    return bodies


def _fresh(kind: str, base: bytes, index: int) -> bytes:
    """``base`` made distinct for iteration ``index`` (a put of it is a new artifact), its kind
    and size unchanged: twelve characters of its last line (or a comment) carry the index."""
    tag = f"{index:012d}".encode()
    if kind == "html":
        return base[: -len(b"</body></html>\n")] + b"<!--" + tag + b"--></body></html>\n"
    if kind in ("json", "ndjson"):
        at = base.rindex(b'"note":"') + len(b'"note":"') if kind == "ndjson" else None
        if at is None:
            at = base.rindex(b'"created_at":"') + len(b'"created_at":"')
            return base[:at] + tag[-10:] + base[at + 10 :]
        return base[:at] + tag + base[at + 12 :]
    if kind == "base64":
        at = base.index(b"\n", len(base) // 2) + 9
        return base[:at] + base64.b64encode(index.to_bytes(9, "big")) + base[at + 12 :]
    return base[:-13] + tag + b"\n"


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
    bodies = _bodies(BIG)
    if "html" in bodies:
        page = bodies["html"][0]
        found = detect(page, media_type="text/html")
        medians = interleave(
            [
                Case(
                    "project",
                    lambda i: project(page, media_type="text/html", budget=budget, detection=found),
                ),
                Case("budget", lambda i: None),
            ],
            5 if not cfg.quick else 2,
        )
        # A "ratio" row against a fixed 500 ms: at most 1.0x means within 0.5 s.
        rows.append(
            Row(
                "projection",
                "html: 16 MiB page",
                len(page),
                medians["project"],
                "0.5 s",
                500.0,
                1.0,
            )
        )
    for kind, (body, media) in bodies.items():
        rows.append(_peak_memory(kind, body, media or "text/plain"))
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
project(data[:65536], media_type=media, budget=8192)  # imports and first-use set-up, untimed
gc.collect()
with open("/proc/self/clear_refs", "w") as handle:
    handle.write("5")  # reset the peak (VmHWM) to the current resident size
before = status("VmRSS")
project(data, media_type=media, budget=8192, detection=found)
print(status("VmHWM") - before)
"""


def _peak_memory(kind: str, body: bytes, media: str) -> Row:
    """Peak resident growth while projecting a 16 MiB body, in a fresh process."""
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
    # A "ratio" row: value and baseline in the same unit (bytes), target 2x the input.
    return Row(
        "projection",
        f"peak memory, 16 MiB {kind}",
        len(body),
        growth / 1e6,
        "input size (MB)",
        len(body) / 1e6,
        2.0,
    )


SECTIONS: dict[str, Callable[[Path, Config], list[Row]]] = {
    "offload": bench_offload,
    "projection": bench_projection,
}
