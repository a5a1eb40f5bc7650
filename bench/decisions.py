"""Decision benchmarks: the offload seam and the projection.

- ``offload``: the decision for inline content against just measuring its UTF-8 size; an
  offload of 1 MiB and of 16 MiB of every kind (binary included) against a plain store put of
  the same bytes (binary: the seam's own overhead; text kinds: the seam, the credential scan,
  the token count and the kind's projection; targets, issue 27's: binary 1.1x, text 2x at
  1 MiB, 1.5x at 16 MiB); for a body whose put the offload overlaps with its stub (from
  ``OVERLAP_BYTES`` on: the 16 MiB ones), the offload against the same offload made the old way,
  the put first and the stub after, in the same run; and for every kind at both sizes, each in
  a fresh process, the peak Python memory of one warm offload (tracemalloc) against the body
  (target 3x), and the first offload against a warm one (target 1.5x), cold and after the
  tokenizer's preload.
- ``python -m bench profile KIND [--size MIB] [--offload]``: cProfile of one projection (or
  offload) of the bench's body of that kind: where its time goes.
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
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson

from bench._util import Case, KiB, MiB, Row, interleave, size_label
from bench.store import UNLIMITED, Config
from cargohold import LocalStore, Offloader, Scope, ScopedStore
from cargohold._offload import OVERLAP_BYTES
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
    for size, rounds in ((MiB, repeat), (BIG, 6 if not cfg.quick else 3)):
        for kind, (base, media) in _bodies(size).items():
            bound = Offloader(scoped(), budget=Budget.BALANCED)
            overlapped = len(base) >= OVERLAP_BYTES
            sequential = None
            if overlapped:  # the same offload, the put first and the stub after: the old path
                sequential = Offloader(scoped(), budget=Budget.BALANCED)
                sequential._overlap_bytes = sys.maxsize
            plain = scoped()
            payload: dict[str, bytes] = {}
            medians = interleave(
                _offload_cases(
                    payload,
                    lambda i, k=kind, b=base: _fresh(k, b, i),
                    bound,
                    plain,
                    media,
                    sequential,
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
                    _put_target(size),
                )
            )
            if not overlapped:
                continue
            rows.append(
                Row(
                    "offload",
                    f"overlapped {size_label(size)} {kind}",
                    len(base),
                    medians["offload"],
                    "put, then stub",
                    medians["sequential"],
                )
            )
    store.close()
    fresh_rounds = 3 if not cfg.quick else 1
    for size in (MiB, BIG):
        for kind, (base, media) in _bodies(size).items():
            rows.append(_offload_memory(kind, size, base, media))
            rows.append(_first_offload(kind, size, base, media, fresh_rounds))
            rows.append(_first_offload(kind, size, base, media, fresh_rounds, preloaded=True))
    return rows


def _put_target(size: int) -> float:
    """Issue 27's goal for an offload against a put, every kind binary included: 2x at 1 MiB
    and 1.5x at 16 MiB. (The store issue's earlier 1.1x for binary predates the credential scan
    every result now gets, about 1.5 ms a MiB, most of what binary adds to its put.)"""
    return 2.0 if size <= MiB else 1.5


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
        "binary": (random.Random(7).randbytes(size), None),
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
    sequential: Offloader | None = None,
) -> list[Case]:
    """An offload, the same offload with the put first and the stub after (``sequential``, when
    given: for a body whose put ``bound`` overlaps with its stub), and a plain put, each of
    fresh bytes made before it runs (untimed)."""
    names = ("offload", "sequential", "put")

    def prepare(case: str) -> Callable[[int], None]:
        def run(i: int) -> None:
            payload[case] = make(i * len(names) + names.index(case))

        return run

    cases = [
        Case(
            "offload",
            lambda i: bound.offload(payload["offload"], media_type=media),
            prepare("offload"),
        ),
        Case("put", lambda i: plain.put(payload["put"]), prepare("put")),
    ]
    if sequential is not None:
        cases.append(
            Case(
                "sequential",
                lambda i: sequential.offload(payload["sequential"], media_type=media),
                prepare("sequential"),
            )
        )
    return cases


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


_OFFLOAD = r"""
import gc, json, sys, tempfile, time, tracemalloc
sys.path[:0] = [{src!r}, {repo!r}]
from bench.decisions import _fresh
from bench.store import UNLIMITED
from cargohold import LocalStore, Offloader, Scope, ScopedStore
from cargohold._stub import Budget

kind, mode, media = {kind!r}, {mode!r}, {media!r}
base = open({path!r}, "rb").read()
with tempfile.TemporaryDirectory(dir={scratch!r}) as root:
    store = LocalStore(root, limits=UNLIMITED)
    bound = Offloader(ScopedStore(store, Scope("bench", "u", "s")), budget=Budget.BALANCED)
    bodies = [_fresh(kind, base, i) for i in range(3)]
    if mode in ("first", "preloaded"):
        if mode == "preloaded":  # as a long-running surface starts: the tokenizer loaded
            from cargohold._tokens import preload

            preload().join()
        took = []
        for body in bodies:
            began = time.perf_counter()
            bound.offload(body, media_type=media)
            took.append(time.perf_counter() - began)
        print(json.dumps({{"first": took[0], "warm": min(took[1:])}}))
    else:
        bound.offload(bodies[0], media_type=media)  # imports and first-use set-up, unmeasured
        body = bodies[1]
        del bodies
        gc.collect()
        tracemalloc.start()
        bound.offload(body, media_type=media)
        print(json.dumps({{"peak": tracemalloc.get_traced_memory()[1]}}))
    store.close()
"""


def _in_fresh_process(kind: str, mode: str, body: bytes, media: str | None) -> dict[str, float]:
    """The figures the ``_OFFLOAD`` script prints for ``body``, run in a new interpreter."""
    import tempfile

    from bench._util import scratch_parent

    with tempfile.NamedTemporaryFile(suffix=f".{kind}") as handle:
        handle.write(body)
        handle.flush()
        repo = Path(__file__).resolve().parents[1]
        script = _OFFLOAD.format(
            src=str(repo / "src"),
            repo=str(repo),
            kind=kind,
            mode=mode,
            media=media,
            path=handle.name,
            scratch=str(scratch_parent()),
        )
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=600
        ).stdout
    figures: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return figures


def _offload_memory(kind: str, size: int, body: bytes, media: str | None) -> Row:
    """Peak Python allocation (tracemalloc) of one warm offload, against the body's size.

    tracemalloc sees what goes through Python's allocator: lexbor's DOM does (selectolax
    allocates it there), simdjson's document does not; the projection rows' resident-set
    figures cover that.
    """
    peak = _in_fresh_process(kind, "memory", body, media)["peak"]
    # A "ratio" row: value and baseline in the same unit (MB), target 3x the body.
    return Row(
        "offload",
        f"offload peak memory, {size_label(size)} {kind}",
        len(body),
        peak / 1e6,
        "body size (MB)",
        len(body) / 1e6,
        3.0,
    )


def _first_offload(
    kind: str, size: int, body: bytes, media: str | None, rounds: int, *, preloaded: bool = False
) -> Row:
    """The first offload in a fresh process (imports done; lazy set-up not) against a warm
    one of the same kind and size in that process: medians over ``rounds`` processes. With
    ``preloaded``, the process first loads the tokenizer as the MCP proxy and server do at
    start (``cargohold._tokens.preload``)."""
    import statistics

    mode = "preloaded" if preloaded else "first"
    runs = [_in_fresh_process(kind, mode, body, media) for _ in range(rounds)]
    after = ", tokenizer preloaded" if preloaded else ""
    return Row(
        "offload",
        f"first offload in a fresh process{after}, {size_label(size)} {kind}",
        len(body),
        statistics.median(run["first"] for run in runs) * 1000.0,
        "warm offload",
        statistics.median(run["warm"] for run in runs) * 1000.0,
        1.5,
    )


def profile_main(argv: list[str]) -> int:
    """``python -m bench profile KIND [--size MIB] [--offload] [--top N]``: where the time goes.

    Profiles (cProfile, after one unprofiled call for imports and first-use set-up) the
    projection of the bench's body of ``KIND``, or with ``--offload`` a whole warm offload of it
    into a scratch local store, and prints the functions taking the most time, by own time and by
    cumulative time.
    """
    import argparse
    import cProfile
    import pstats
    import tempfile

    from bench._util import scratch_parent

    kinds = list(_bodies(KiB))
    parser = argparse.ArgumentParser(
        prog="python -m bench profile", description=profile_main.__doc__
    )
    parser.add_argument("kind", choices=kinds)
    parser.add_argument("--size", type=int, default=1, help="body size in MiB (default 1)")
    parser.add_argument("--offload", action="store_true", help="profile a whole offload")
    parser.add_argument("--top", type=int, default=25, help="functions to list (default 25)")
    args = parser.parse_args(argv)
    size = min(args.size * MiB, BIG)
    base, media = _bodies(size)[args.kind]
    with tempfile.TemporaryDirectory(dir=scratch_parent()) as root:
        store = LocalStore(root, limits=UNLIMITED)
        bound = Offloader(ScopedStore(store, Scope("bench", "u", "s")), budget=Budget.BALANCED)
        found = detect(base, media_type=media or "text/plain")

        def once(i: int) -> object:
            if args.offload:
                return bound.offload(_fresh(args.kind, base, i), media_type=media)
            return project(base, media_type=media or "text/plain", budget=8 * KiB, detection=found)

        once(0)
        profiler = cProfile.Profile()
        profiler.runcall(once, 1)
        store.close()
    stats = pstats.Stats(profiler, stream=sys.stdout).strip_dirs()
    what = "offload" if args.offload else "projection"
    print(f"{what} of {size_label(len(base)) or len(base)} {args.kind}: by own time")
    stats.sort_stats("tottime").print_stats(args.top)
    print("by cumulative time")
    stats.sort_stats("cumulative").print_stats(args.top)
    return 0


SECTIONS: dict[str, Callable[[Path, Config], list[Row]]] = {
    "offload": bench_offload,
    "projection": bench_projection,
}
