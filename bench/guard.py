"""Guard benchmark: ``python -m bench.guard [--quick] [--markdown FILE]``.

The edge guard over a realistic ~115-message, 2 MiB OpenAI Chat Completions request, against
``orjson.dumps`` of the same request (which the client must do anyway before sending it). The
design's target: the guard costs at most 0.1 of the serialization.

The request is an agent run built from the shared corpus: a system prompt, then rounds of a user
turn, an assistant tool call, the tool's result and an assistant answer. Heavy tool results were
offloaded (stubs rendered by :class:`cargohold.Offloader` on a memory store), some results are
recovered segments (:class:`cargohold.Rehydrator` reads), and user and assistant turns carry
ordinary text and code below the heavy threshold. The request passes the guard.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from cargohold import MemoryStore, Offloader, Rehydrator, Scope, ScopedStore
from cargohold.guard import Guard

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
KiB = 1024
MiB = 1024 * KiB
TARGET = 0.1

_TOOL_FILES = (
    ("query_orders", "citm_catalog.json", "application/json"),
    ("read_log", "openstack_2k.log", "text/plain"),
    ("fetch_page", "wikipedia_page_large.html", "text/html"),
    ("read_csv", "faa_birdstrikes.csv", "text/csv"),
    ("git_diff", "cargohold_git_diff.diff", "text/x-diff"),
    ("read_source", "cargohold_conformance.py.txt", "text/x-python"),
    ("run_tests", "defects4j_closure_failing_tests.txt", "text/plain"),
    ("geo_lookup", "canada_border.geojson", "application/json"),
)
_TEXT_FILES = (
    "cargohold__local.py.txt",
    "mercurial_evolve_docs.html",
    "hdfs_2k.log",
    "spark_2k.log",
)
# The code kinds come from the repository's own fixtures (the corpus holds no source code).
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "code"


def _corpus(root: Path) -> dict[str, bytes]:
    names = {name for _, name, _ in _TOOL_FILES} | set(_TEXT_FILES)
    paths = {n: (FIXTURES if n.startswith("cargohold_") else root) / n for n in names}
    missing = [name for name, path in paths.items() if not path.is_file()]
    if missing:
        raise SystemExit(f"bench.guard: corpus files missing under {root}: {', '.join(missing)}")
    return {name: path.read_bytes() for name, path in paths.items()}


def _slice(data: bytes, start: int, size: int) -> str:
    start %= max(1, len(data) - size)
    return data[start : start + size].decode("utf-8", "ignore")


def build_request(corpus_root: Path = CORPUS, target: int = 2 * MiB) -> dict[str, Any]:
    """The ~115-message request: stubs, recovered segments, tool calls and ordinary text."""
    files = _corpus(corpus_root)
    scoped = ScopedStore(MemoryStore(), Scope("bench", "guard", "run"))
    offloader = Offloader(scoped)
    reader = Rehydrator(scoped)
    text = b"\n".join(files[name] for name in _TEXT_FILES)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": _slice(text, 0, 3 * KiB)},
    ]
    rounds = 24  # 1 system + 24 rounds of 4 + 2 closing messages, then ~16 to fill up to target
    # Text per turn chosen so the whole request lands at ``target`` bytes (each well under 32 KiB).
    per_turn = 28 * KiB
    for index in range(rounds):
        tool, name, media_type = _TOOL_FILES[index % len(_TOOL_FILES)]
        call_id = f"call_{index:03d}"
        messages.append({"role": "user", "content": _slice(text, index * 7919, per_turn)})
        arguments = json.dumps({"path": name, "limit": 1000, "offset": index * 100})
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool, "arguments": arguments},
                    }
                ],
            }
        )
        result = offloader.offload(files[name], tool=tool, media_type=media_type)
        content = result.text
        if index % 3 == 2 and result.ref is not None:  # an explicit read of the artifact
            content = reader.read(result.ref, offset=0, length=16 * KiB).segment or content
        messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
        messages.append(
            {"role": "assistant", "content": _slice(text, index * 104729, per_turn + 2 * KiB)}
        )
    messages.append({"role": "user", "content": _slice(text, 31337, 8 * KiB)})
    messages.append({"role": "assistant", "content": _slice(text, 4242, 8 * KiB)})
    # Top up to the target size with ordinary user messages, each under the threshold: the guard
    # sums the parts of one message, so the filler cannot be parts of a single message.
    while True:
        room = target - len(orjson.dumps(messages)) - 64
        if room <= 0:
            break
        piece = _slice(text, room * 31, min(room, 24 * KiB))
        piece = piece.replace("\\", "/").replace('"', "'")
        messages.append({"role": "user", "content": piece or "done?"})
    return {"model": "gpt-4.1", "messages": messages, "temperature": 0}


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000.0


def measure(request: dict[str, Any], repeat: int) -> dict[str, float]:
    """Median milliseconds of each case.

    Each round runs ``orjson.dumps``, then the guard at once (its caches just filled with the
    dump's 2 MiB of output: the "cold" figure), then the guard again (the request's objects in
    cache, as right after the request was assembled: the "warm" figures).
    """
    guard = Guard()

    def full() -> object:
        return guard.check(request, format="openai-chat")

    def leak_only() -> object:
        return guard.check(request, format="openai-chat", check_window=False)

    order: list[tuple[str, Callable[[], object]]] = [
        ("orjson.dumps", lambda: orjson.dumps(request)),
        ("guard, leak + window (gpt-4.1), after the dump", full),
        ("guard, leak + window (gpt-4.1), warm", full),
        ("guard, leak check only, warm", leak_only),
    ]
    samples: dict[str, list[float]] = {name: [] for name, _ in order}
    for round_ in range(repeat + 3):
        for name, run in order:
            begin = time.perf_counter()
            run()
            elapsed = time.perf_counter() - begin
            if round_ >= 3:
                samples[name].append(elapsed)
    return {name: _median_ms(values) for name, values in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.guard", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a few seconds)")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    parser.add_argument("--corpus", metavar="DIR", default=str(CORPUS), help="the corpus folder")
    args = parser.parse_args(argv)
    request = build_request(Path(args.corpus))
    report = Guard().check(request, format="openai-chat")  # it must pass
    body = orjson.dumps(request)
    print(
        f"request: {len(request['messages'])} messages, {len(body):,} bytes as JSON, "
        f"{report.estimated_tokens:,} estimated tokens, window check by {report.decided_by}"
    )
    medians = measure(request, repeat=30 if args.quick else 300)
    base = medians["orjson.dumps"]
    rows = []
    for name, value in medians.items():
        ratio = value / base
        verdict = "" if name == "orjson.dumps" else ("met" if ratio <= TARGET else "MISSED")
        rows.append((name, value, ratio, verdict))
        print(f"{name:<48} {value:8.3f} ms  {ratio:6.3f}x  {verdict}")
    print(f"target: guard <= {TARGET}x orjson.dumps; medians over interleaved rounds")
    if args.markdown:
        lines = [
            "| case | ms (median) | ratio to orjson.dumps | target |",
            "| --- | ---: | ---: | --- |",
        ]
        for name, value, ratio, verdict in rows:
            target = "" if not verdict else f"<= {TARGET}x ({verdict})"
            lines.append(f"| {name} | {value:.3f} | {ratio:.3f} | {target} |")
        text = "\n".join(lines) + "\n"
        if args.markdown == "-":
            sys.stdout.write(text)
        else:
            Path(args.markdown).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
