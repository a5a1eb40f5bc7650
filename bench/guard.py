"""Guard benchmark: ``python -m bench.guard [--quick] [--markdown FILE]``.

The edge guard over a realistic ~115-message, 2 MiB OpenAI Chat Completions request, against
``orjson.dumps`` of the same request (which the client must do anyway before sending it), and
over its twins: ASCII-only, Anthropic Messages, OpenAI Responses (the input items as the SDK
returns them) and LangChain message objects. The design's target: the guard costs at most 0.1
of the serialization.

The request is an agent run built from the shared corpus: a system prompt, then rounds of a user
turn, an assistant tool call, the tool's result and an assistant answer. Heavy tool results were
offloaded (stubs rendered by :class:`cargohold.Offloader` on a memory store), some results are
recovered segments (:class:`cargohold.Rehydrator` reads), and user and assistant turns carry
ordinary text and code below the heavy threshold. The request passes the guard.

Each round runs the cases in a fresh random order (``random.Random(seed)``), so no case always
follows another; "after the dump" is the guard run at once after an ``orjson.dumps`` of the
request (its caches just filled with the dump's 2 MiB of output), timed alone. A second request,
the same one with every non-ASCII character replaced, shows what the exact UTF-8 size of
non-ASCII text costs (the guard encodes such strings to measure them; ASCII strings cost a
``len``). A "floor" case visits every message's values and takes a ``len()`` of each string with
no check at all: what any walk in Python pays at least, warm and right after the dump.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
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


KEY = hashlib.sha256(b"bench.guard").digest()
"""The marker key of the bench's store, which its guard verifies stubs and segments with."""


def build_request(corpus_root: Path = CORPUS, target: int = 2 * MiB) -> dict[str, Any]:
    """The ~115-message request: stubs, recovered segments, tool calls and ordinary text."""
    files = _corpus(corpus_root)
    scoped = ScopedStore(MemoryStore(marker_key=KEY), Scope("bench", "guard", "run"))
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


def ascii_only(request: dict[str, Any]) -> dict[str, Any]:
    """The same request with every non-ASCII character replaced by ``?`` (same shape, same
    character counts; stubs and segments are re-sealed text then, and stay under the threshold)."""

    def plain(value: Any) -> Any:
        if isinstance(value, str):
            return value if value.isascii() else value.encode("ascii", "replace").decode()
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        if isinstance(value, list):
            return [plain(item) for item in value]
        return value

    result: dict[str, Any] = plain(request)
    return result


def anthropic_twin(request: dict[str, Any]) -> dict[str, Any]:
    """The same conversation as an Anthropic ``messages.create`` request: the system prompt
    apart, each tool call a ``tool_use`` block (its arguments as an object), each result a
    ``tool_result`` block in a user message, text as strings."""
    system = None
    messages: list[dict[str, Any]] = []
    for message in request["messages"]:
        role = message["role"]
        if role == "system":
            system = message["content"]
        elif role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message["tool_call_id"],
                "content": message["content"],
            }
            messages.append({"role": "user", "content": [block]})
        elif message.get("tool_calls"):
            uses = [
                {
                    "type": "tool_use",
                    "id": call["id"],
                    "name": call["function"]["name"],
                    "input": json.loads(call["function"]["arguments"]),
                }
                for call in message["tool_calls"]
            ]
            messages.append({"role": "assistant", "content": uses})
        else:
            messages.append({"role": role, "content": message["content"]})
    model = "claude-sonnet-5-5"  # a 1M-token window: the 472k-token request fits
    return {"model": model, "max_tokens": 4096, "system": system, "messages": messages}


def responses_twin(request: dict[str, Any]) -> dict[str, Any]:
    """The same conversation as an OpenAI ``responses.create`` request, the shapes a caller
    passes back: the system prompt as ``instructions``, user turns as ``{role, content}``,
    assistant turns as the output messages the SDK returns (``output_text`` parts), each tool
    call a ``function_call`` item and each result a ``function_call_output``."""
    items: list[dict[str, Any]] = []
    instructions = None
    for index, message in enumerate(request["messages"]):
        role = message["role"]
        if role == "system":
            instructions = message["content"]
        elif role == "tool":
            output = {"call_id": message["tool_call_id"], "output": message["content"]}
            items.append({"type": "function_call_output", **output})
        elif message.get("tool_calls"):
            for call in message["tool_calls"]:
                function = call["function"]
                items.append(
                    {
                        "type": "function_call",
                        "id": f"fc_{index:03d}",
                        "call_id": call["id"],
                        "name": function["name"],
                        "arguments": function["arguments"],
                        "status": "completed",
                    }
                )
        elif role == "assistant":
            text = {"type": "output_text", "text": message["content"], "annotations": []}
            items.append(
                {
                    "type": "message",
                    "id": f"msg_{index:03d}",
                    "role": "assistant",
                    "status": "completed",
                    "content": [text],
                }
            )
        else:
            items.append({"role": role, "content": message["content"]})
    return {"model": request["model"], "instructions": instructions, "input": items}


def langchain_twin(request: dict[str, Any]) -> list[Any] | None:
    """The same conversation as LangChain message objects (what ``CargoholdMiddleware``
    checks), or ``None`` without langchain-core."""
    try:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
    except ImportError:
        return None
    out: list[Any] = []
    for message in request["messages"]:
        role, content = message["role"], message["content"]
        if role == "system":
            out.append(SystemMessage(content))
        elif role == "user":
            out.append(HumanMessage(content))
        elif role == "tool":
            out.append(ToolMessage(content, tool_call_id=message["tool_call_id"]))
        elif message.get("tool_calls"):
            calls = [
                {
                    "name": call["function"]["name"],
                    "args": json.loads(call["function"]["arguments"]),
                    "id": call["id"],
                }
                for call in message["tool_calls"]
            ]
            out.append(AIMessage("", tool_calls=calls))
        else:
            out.append(AIMessage(content))
    return out


def measure(
    request: dict[str, Any],
    repeat: int,
    seed: int = 20261201,
    format: str = "openai-chat",
    guarded: Any = None,
) -> dict[str, float]:
    """Median milliseconds of each case, the cases in a new random order every round.

    ``guarded``: what the guard checks, when it is not ``request`` itself (LangChain message
    objects: the dump and the floor are then of the equivalent chat request)."""
    guard = Guard(key=KEY)
    checked = request if guarded is None else guarded
    model = request["model"]
    named = {"model": model} if format == "langchain" else {}

    def dump() -> object:
        return orjson.dumps(request)

    def full() -> object:
        return guard.check(checked, format=format, **named)

    def leak_only() -> object:
        return guard.check(checked, format=format, check_window=False)

    messages = request["messages"] if "messages" in request else request["input"]

    def floor() -> object:
        # What any Python walk pays at least: visit every message's values and take a len()
        # of each string, with no check at all (the guard's lower bound in this language).
        total = 0
        for message in messages:
            for value in message.values():
                if type(value) is str:
                    total += len(value)
        return total

    cases: list[tuple[str, Callable[[], object], bool]] = [
        ("orjson.dumps", dump, False),
        ("floor: len() of every message value, after the dump", floor, True),
        ("floor: len() of every message value, warm", floor, False),
        (f"guard, leak + window ({request['model']}), after the dump", full, True),
        (f"guard, leak + window ({request['model']}), warm", full, False),
        ("guard, leak check only, warm", leak_only, False),
    ]
    samples: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    order = random.Random(seed)
    for round_ in range(repeat + 3):
        order.shuffle(cases)
        for name, run, after_dump in cases:
            # Which case ran before is random; each case sets the state it names itself:
            # right after a dump, or warm (the same call just made, untimed).
            if after_dump:
                dump()
            else:
                run()
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
    rows = []
    lang = langchain_twin(request)
    variants: list[tuple[str, dict[str, Any], str, Any]] = [
        ("", request, "openai-chat", None),
        ("ASCII-only: ", ascii_only(request), "openai-chat", None),
        ("Anthropic: ", anthropic_twin(request), "anthropic", None),
        ("Responses: ", responses_twin(request), "openai-responses", None),
    ]
    if lang is not None:
        variants.append(("LangChain objects: ", request, "langchain", lang))
    for label, variant, format, guarded in variants:
        checked = variant if guarded is None else guarded
        model = {"model": variant["model"]} if format == "langchain" else {}
        report = Guard(key=KEY).check(checked, format=format, **model)  # it must pass
        body = orjson.dumps(variant)
        print(
            f"{label or 'request: '}{len(variant.get('messages', variant.get('input', [])))} "
            f"messages, {len(body):,} bytes as "
            f"JSON, {report.estimated_tokens:,} estimated tokens, window check by "
            f"{report.decided_by}"
        )
        medians = measure(variant, repeat=30 if args.quick else 300, format=format, guarded=guarded)
        base = medians["orjson.dumps"]
        for name, value in medians.items():
            ratio = value / base
            guard = name.startswith("guard")
            verdict = "" if not guard else ("met" if ratio <= TARGET else "MISSED")
            rows.append((label + name, value, ratio, verdict))
            print(f"{label + name:<60} {value:8.3f} ms  {ratio:6.3f}x  {verdict}")
    print(f"target: guard <= {TARGET}x orjson.dumps; medians over rounds in random order")
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
