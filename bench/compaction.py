"""Compaction replay benchmark: ``python -m bench compaction [--turns N] [--seed S] [--json]``.

Issue 24's "Must show". One agent run of 120 turns (Anthropic Messages: a system prompt, a
task, then per turn an assistant tool call and its result) is built, seeded, from the shared
corpus and this repository's code fixtures: results from 2 KB to 2 MB (about half under the
32 KiB heavy threshold, a tenth over 256 KiB), repeated reads of an earlier result (the same
bytes again) and a few failing test runs (``is_error``, offloaded as failures). Each turn's
request is replayed through four arms:

- **(a) nothing**: every result as the tool returned it.
- **(b) offload**: ``hold.offload`` of each result as it returns (a stub at or above the
  threshold, the result itself below it), with the read tools among the request's tools.
- **(c) offload + compaction**: (b), then ``hold.compact(request, format="anthropic")`` before
  every model call with the default :class:`cargohold.CompactionPolicy` (trigger 100,000
  tokens, keep 3, clear at least 20,000); the loop keeps the compacted history and appends
  to it (the engine gives a stateless caller the same bytes).
- **(d) lossy clearing**: Anthropic's ``clear_tool_uses_20250919`` with its defaults, done as
  the API does it, server side, on the full history the client sends: once the request's input
  tokens reach 100,000, every tool result but the newest 3 becomes a placeholder text
  (``clear_at_least`` unset, its default, so it clears on every such request; tool inputs kept).
  Shown twice: over the raw results (a client without cargohold, the platforms' answer) and,
  for reference, over (b)'s offloaded ones.

Every arm is measured by the same counter, cargohold's tokenizer (``bpe-openai`` o200k, the
exact count, never the estimate) over the text of each message (a block's text, a call's name
and arguments, a result's content), the system prompt and the tools' JSON:
peak and total input tokens over the run, and prompt-cache prefix breaks (a request that is not
the previous one with messages appended, message for message, byte for byte), and the
cache-weighted input tokens (Anthropic's prices: the prefix a request shares with the previous
one read from the cache at 0.1, the rest written to it at 1.25; the first request all written),
which is what a prefix break costs. For (c), every
result a compaction cleared is read back through ``artifact_read``, page by page, and compared
with the bytes the tool returned: anything not identical counts as lost. The figures are
deterministic (the same seed gives the same run and the same counts on any machine); only the
seconds depend on the machine. Goal, printed beside them: (c) at most half of (b)'s total input
tokens and within 10% of (d)'s, with zero bytes lost.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import random
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cargohold
from cargohold import CompactionPolicy
from cargohold._tokens import count_tokens, estimate_tokens

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
FIXTURES = ROOT / "tests" / "fixtures" / "code"
KiB = 1024
MiB = 1024 * KiB

TURNS = 120
SEED = 24
MAX_RESULT_BYTES = 2 * MiB
MIN_RESULT_BYTES = 2 * KiB
TRIGGER_TOKENS = 100_000
"""Anthropic's ``clear_tool_uses_20250919`` trigger and cargohold's default alike."""
KEEP = 3
_REF = re.compile(r"artifact://sha256/[0-9a-f]{64}")
PLACEHOLDER = "[tool result cleared to save context]"
"""What arm (d) puts where a cleared result was: the result is gone."""
CACHE_READ = 0.1
CACHE_WRITE = 1.25
"""Anthropic's prices of a cached prefix read and of a cache write, per input token."""
GOAL_OF_OFFLOAD = 0.5
GOAL_OF_LOSSY = 1.10

# (tool, file, directory): what each tool of the run reads its results from.
_SOURCES: tuple[tuple[str, str, Path], ...] = (
    ("query_api", "github_api_paginate_issues.json", CORPUS),
    ("query_api", "vega_datasets_datapackage.json", CORPUS),
    ("query_api", "citm_catalog.json", CORPUS),
    ("read_file", "vega_datasets_package-lock.json", CORPUS),
    ("geo_lookup", "us_10m.topojson", CORPUS),
    ("geo_lookup", "canada_border.geojson", CORPUS),
    ("read_csv", "faa_birdstrikes.csv", CORPUS),
    ("read_csv", "usgs_gap_species_by_county.csv", CORPUS),
    ("read_csv", "hdfs_2k_structured.csv", CORPUS),
    ("read_log", "hdfs_2k.log", CORPUS),
    ("read_log", "spark_2k.log", CORPUS),
    ("read_log", "zookeeper_2k.log", CORPUS),
    ("read_log", "openstack_2k.log", CORPUS),
    ("read_log", "bgl_2k.log", CORPUS),
    ("fetch_page", "wikipedia_page_large.html", CORPUS),
    ("fetch_page", "mercurial_evolve_docs.html", CORPUS),
    ("fetch_page", "yahoo_news_article.html", CORPUS),
    ("read_file", "cargohold__local.py.txt", FIXTURES),
    ("read_file", "cargohold_conformance.py.txt", FIXTURES),
    ("read_file", "cargohold_test_envelopes.py.txt", FIXTURES),
    ("grep", "cargohold_grep_rn.txt", FIXTURES),
    ("git_diff", "cargohold_git_diff.diff", FIXTURES),
    ("git_log", "cargohold_git_log_p.diff", FIXTURES),
)
_ERRORS: tuple[str, ...] = (
    "defects4j_closure_failing_tests.txt",
    "defects4j_mockito_failing_tests.txt",
    "defects4j_time_failing_tests.txt",
)
_AGENT_TOOLS = sorted({tool for tool, _, _ in _SOURCES} | {"run_tests"})

SYSTEM = (
    "You are a software engineering agent working in a repository and its data. Use the tools "
    "to read files, logs, data sets and web pages, run the tests, and explain what you find. "
    "Quote exact lines when you cite evidence."
)
TASK = (
    "The nightly pipeline failed after the last merge. Find which change broke it, using the "
    "logs, the data it loads and the failing tests, and propose a fix."
)


# -- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Turn:
    """One tool call of the run and the result it returned (the exact text)."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    text: str = field(repr=False)
    is_error: bool = False
    repeat_of: int | None = None


_SLACK = 4 * KiB
"""How far past a cut a slice looks for a line break."""


def _slice(data: bytes, rng: random.Random, size: int) -> bytes:
    """About ``size`` bytes of ``data``, cut at line breaks where there are any near the cut
    (a one-line JSON document is cut where it falls), always on UTF-8 character boundaries."""
    if size + _SLACK >= len(data):
        return data
    # The start moves on by at most _SLACK to a line break, so the slice is at least ``size``
    # and at most ``size + _SLACK`` bytes.
    start = _cut(data, rng.randrange(0, len(data) - size - _SLACK))
    return data[start : _cut(data, start + size)]


def _cut(data: bytes, at: int) -> int:
    """The place to cut at or after ``at``: past the next line break within 4 KiB, else the
    first character boundary."""
    if at <= 0 or at >= len(data):
        return max(0, min(at, len(data)))
    newline = data.find(b"\n", at, at + _SLACK - 4)
    if newline >= 0:
        return newline + 1
    while at < len(data) and data[at] & 0xC0 == 0x80:  # a UTF-8 continuation byte
        at += 1
    return at


def _size(rng: random.Random, least: int, most: int) -> int:
    """Log-uniform in ``[least, most]``."""
    return int(math.exp(rng.uniform(math.log(least), math.log(max(least, most)))))


def build_run(
    turns: int = TURNS, *, seed: int = SEED, max_result_bytes: int = MAX_RESULT_BYTES
) -> list[Turn]:
    """The run: ``turns`` tool calls and their results, the same for the same arguments.

    About 55% of the results are 2-32 KiB, 35% 32-256 KiB and 10% 256 KiB up to
    ``max_result_bytes`` (each cut from a file at least that long, at line breaks); one in
    seven (after the fourth) repeats an earlier read, one in sixteen is a failing test run.
    """
    rng = random.Random(seed)
    files = {name: (directory / name).read_bytes() for _, name, directory in _SOURCES}
    errors = {name: (CORPUS / name).read_bytes() for name in _ERRORS}
    run: list[Turn] = []
    for index in range(turns):
        call_id = f"toolu_{index:03d}"
        earlier = [i for i, turn in enumerate(run[: max(0, index - 3)]) if not turn.is_error]
        roll = rng.random()
        if index >= 4 and earlier and roll < 1 / 7:
            first = rng.choice(earlier)
            old = run[first]
            run.append(Turn(call_id, old.tool, dict(old.arguments), old.text, repeat_of=first))
            continue
        if roll > 1 - 1 / 16:
            name = rng.choice(_ERRORS)
            body = _slice(errors[name], rng, _size(rng, MIN_RESULT_BYTES, 24 * KiB))
            text = f"FAILED: 3 tests failed (exit status 1)\n{body.decode()}"
            run.append(Turn(call_id, "run_tests", {"suite": name}, text, is_error=True))
            continue
        klass = rng.random()
        if klass < 0.55:
            least, most = MIN_RESULT_BYTES, 32 * KiB
        elif klass < 0.9:
            least, most = 32 * KiB, 256 * KiB
        else:
            least, most = 256 * KiB, MAX_RESULT_BYTES
        most = min(most, max_result_bytes) - _SLACK  # a cut at a line break adds up to that
        least = min(least, most)
        size = _size(rng, least, most)
        candidates = [s for s in _SOURCES if len(files[s[1]]) > size + _SLACK] or [
            max(_SOURCES, key=lambda s: len(files[s[1]]))
        ]
        tool, name, _ = rng.choice(candidates)
        body = _slice(files[name], rng, size)
        arguments = {"path": name, "bytes": len(body), "part": index}
        run.append(Turn(call_id, tool, arguments, body.decode()))
    return run


# -- requests and their measure --------------------------------------------------------------


def _assistant(turn: Turn) -> dict[str, Any]:
    verb = "Checking" if turn.repeat_of is None else "Looking again at"
    what = turn.arguments.get("path") or turn.arguments.get("suite")
    return {
        "role": "assistant",
        "content": [
            {"type": "text", "text": f"{verb} {what} with {turn.tool}."},
            {"type": "tool_use", "id": turn.call_id, "name": turn.tool, "input": turn.arguments},
        ],
    }


def _result(turn: Turn, content: str) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": turn.call_id, "content": content}
    if turn.is_error:
        block["is_error"] = True
    return {"role": "user", "content": [block]}


def _agent_tools() -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "description": f"The agent's {name.replace('_', ' ')} tool.",
            "input_schema": {"type": "object", "properties": {}, "additionalProperties": True},
        }
        for name in _AGENT_TOOLS
    ]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


Entry = tuple[str, str]
"""A message as the request's bytes (its JSON, for the prefix) and as the text a model reads
(what is counted)."""


def _entry(message: dict[str, Any]) -> Entry:
    """The message's JSON, and the text of its content: each text block's text, a tool call's
    name and arguments (as JSON), a tool result's content. Counting the JSON instead would count
    every escaped line break and quote of a result, which no provider bills as such."""
    content = message["content"]
    if isinstance(content, str):
        return _dumps(message), content
    parts: list[str] = []
    for block in content:
        if block["type"] == "text":
            parts.append(block["text"])
        elif block["type"] == "tool_use":
            parts.append(block["name"] + " " + _dumps(block["input"]))
        else:
            inner = block["content"]
            parts.append(inner if isinstance(inner, str) else _dumps(inner))
    return _dumps(message), "\n".join(parts)


class Counter:
    """Exact tokens of each distinct text, counted once (a run repeats most of its messages)."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        found = self._seen.get(text)
        if found is None:
            counted = count_tokens(text)
            # Without bpe-openai the figures would be estimates; say so rather than pretend.
            if counted is None:
                raise RuntimeError("the compaction benchmark needs bpe-openai (cargohold[tokens])")
            found = self._seen[text] = counted
        return found


@dataclass(slots=True)
class Arm:
    """What one arm's requests measured over the run."""

    name: str
    title: str
    requests: int = 0
    peak_tokens: int = 0
    total_tokens: int = 0
    prefix_breaks: int = 0
    cache_weighted: float = 0.0
    compactions: int = 0
    cleared: int = 0
    read_back: int = 0
    bytes_lost: int = 0
    seconds: float = 0.0
    _previous: list[str] = field(default_factory=list, repr=False)

    def measure(self, head: int, texts: list[Entry], counter: Counter) -> None:
        """Count one request: ``head`` tokens of system and tools, then its messages."""
        counts = [counter(read) for _, read in texts]
        tokens = head + sum(counts)
        shared = 0
        if self.requests:
            limit = min(len(texts), len(self._previous))
            while shared < limit and texts[shared] == self._previous[shared]:
                shared += 1
            if shared < len(self._previous):
                self.prefix_breaks += 1
        cached = head + sum(counts[:shared]) if self.requests else 0
        self.cache_weighted += CACHE_READ * cached + CACHE_WRITE * (tokens - cached)
        self.requests += 1
        self.peak_tokens = max(self.peak_tokens, tokens)
        self.total_tokens += tokens
        self._previous = texts

    def as_dict(self) -> dict[str, Any]:
        return {
            "arm": self.name,
            "title": self.title,
            "requests": self.requests,
            "peak_input_tokens": self.peak_tokens,
            "total_input_tokens": self.total_tokens,
            "prefix_breaks": self.prefix_breaks,
            "cache_weighted_tokens": round(self.cache_weighted),
            "compactions": self.compactions,
            "cleared": self.cleared,
            "read_back_exact": self.read_back,
            "bytes_lost": self.bytes_lost,
            "seconds": round(self.seconds, 2),
        }


@dataclass(slots=True)
class Figures:
    """The replay's figures, arm by arm, and the goals' ratios."""

    turns: int
    result_bytes: int
    arms: dict[str, Arm]
    seed: int | None = None

    @property
    def of_offload(self) -> float:
        """(c)'s total input tokens over (b)'s; the goal is at most 0.5."""
        return self.arms["c"].total_tokens / self.arms["b"].total_tokens

    @property
    def of_lossy(self) -> float:
        """(c)'s total input tokens over (d)'s; the goal is at most 1.10."""
        return self.arms["c"].total_tokens / self.arms["d"].total_tokens

    @property
    def goals_met(self) -> bool:
        return (
            self.of_offload <= GOAL_OF_OFFLOAD
            and self.of_lossy <= GOAL_OF_LOSSY
            and self.arms["c"].bytes_lost == 0
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "seed": self.seed,
            "result_bytes": self.result_bytes,
            "arms": [arm.as_dict() for arm in self.arms.values()],
            "c_over_b": round(self.of_offload, 4),
            "c_over_d": round(self.of_lossy, 4),
            "goals_met": self.goals_met,
        }


def _lossy(
    messages: list[dict[str, Any]], texts: list[Entry], counted: int, trigger: int, keep: int
) -> tuple[list[Entry], int]:
    """The texts of the request as Anthropic's server-side clearing edits it, and how many
    results it cleared: at the trigger, every result but the newest ``keep``."""
    if counted < trigger:
        return texts, 0
    results = [i for i, m in enumerate(messages) if m["role"] == "user" and i > 0]
    cleared = results[: max(0, len(results) - keep)]
    edited = list(texts)
    for i in cleared:
        block = dict(messages[i]["content"][0])
        block["content"] = PLACEHOLDER
        edited[i] = _entry({"role": "user", "content": [block]})
    return edited, len(cleared)


def _read_back(hold: cargohold.Hold, ref: str) -> bytes | None:
    """The artifact's bytes through ``artifact_read``, page by page, or ``None``."""
    parts: list[bytes] = []
    offset: int | None = 0
    while offset is not None:
        answer = hold.call_tool(
            "artifact_read", {"ref": ref, "offset": offset, "length": MiB, "budget": MiB}
        )
        if not answer.ok or answer.content is None or answer.start != offset:
            return None
        if answer.encoding == "base64":
            page = base64.b64decode(answer.content)
        else:
            page = answer.content.encode("utf-8")
        if answer.sha256 != hashlib.sha256(page).hexdigest():
            return None
        parts.append(page)
        offset = answer.next_offset
    return b"".join(parts)


def replay(
    run: Sequence[Turn],
    *,
    trigger_tokens: int = TRIGGER_TOKENS,
    keep: int = KEEP,
    clear_at_least: int | None = None,
    hold: cargohold.Hold | None = None,
    progress: Callable[[str], None] | None = None,
) -> Figures:
    """Replay ``run`` through the four arms and measure them (see the module docstring).

    Args:
        run: The run (:func:`build_run`).
        trigger_tokens: The trigger of (c)'s policy and of (d), 100,000 by default (both
            platforms' default); a short test run lowers it to reach it.
        keep: The tool results both keep (3).
        clear_at_least: (c)'s ``clear_at_least``; the policy's default when ``None``.
        hold: The hold (b) and (c) offload and compact with; when ``None``, one on a memory
            store with a fixed marker key (so the figures are the same in every process).
        progress: Called with a line now and then (the command prints them on stderr).
    """
    policy_args: dict[str, Any] = {"trigger_tokens": trigger_tokens, "keep_last": keep}
    if clear_at_least is not None:
        policy_args["clear_at_least"] = clear_at_least
    policy = CompactionPolicy(**policy_args)
    owned = hold is None
    if hold is None:
        # A fixed marker key: a stub's closing check is the store's HMAC, so a random key (a
        # memory store's default) would change a few tokens of every stub from run to run.
        store = cargohold.MemoryStore(marker_key=hashlib.sha256(b"bench compaction").digest())
        hold = cargohold.open(store, tenant="bench", user="bench", session="bench-compaction")
    try:
        return _replay(run, policy, trigger_tokens, keep, hold, progress)
    finally:
        if owned:
            hold.close()


def _replay(
    run: Sequence[Turn],
    policy: CompactionPolicy,
    trigger: int,
    keep: int,
    hold: cargohold.Hold,
    progress: Callable[[str], None] | None,
) -> Figures:
    counter = Counter()
    arms = {
        "a": Arm("a", "nothing"),
        "b": Arm("b", "cargohold offload"),
        "c": Arm("c", "offload + compaction"),
        "d": Arm("d", "lossy clearing (Anthropic defaults)"),
        "d+b": Arm("d+b", "offload + lossy clearing"),
    }
    agent_tools = _agent_tools()
    read_tools = hold.tools.anthropic()
    head_raw = counter(SYSTEM) + counter(_dumps(agent_tools))
    head_held = counter(SYSTEM) + counter(_dumps(agent_tools + read_tools))
    task = {"role": "user", "content": TASK}
    raw: list[dict[str, Any]] = [task]
    raw_texts = [_entry(task)]
    held: list[dict[str, Any]] = [task]
    held_texts = list(raw_texts)
    compacted: list[dict[str, Any]] = [task]
    compacted_texts = list(raw_texts)

    for index, turn in enumerate(run):
        began = time.perf_counter()
        call = _assistant(turn)
        call_text = _entry(call)

        # (a) and (d): the result as it came.
        answer = _result(turn, turn.text)
        raw += [call, answer]
        raw_texts += [call_text, _entry(answer)]
        arms["a"].measure(head_raw, raw_texts, counter)
        whole = head_raw + sum(counter(read) for _, read in raw_texts)
        edited, arms["d"].cleared = _lossy(raw, raw_texts, whole, trigger, keep)
        arms["d"].measure(head_raw, edited, counter)
        arms["a"].seconds += time.perf_counter() - began

        # (b): offloaded as it returns.
        began = time.perf_counter()
        offloaded = hold.offload(turn.text, tool=turn.tool, failed=turn.is_error)
        answer = _result(turn, offloaded.text)
        answer_text = _entry(answer)
        held += [call, answer]
        held_texts += [call_text, answer_text]
        arms["b"].measure(head_held, held_texts, counter)
        arms["b"].seconds += time.perf_counter() - began
        whole = head_held + sum(counter(read) for _, read in held_texts)
        edited, arms["d+b"].cleared = _lossy(held, held_texts, whole, trigger, keep)
        arms["d+b"].measure(head_held, edited, counter)

        # (c): (b), compacted before the model call; the loop keeps what compact returned.
        began = time.perf_counter()
        compacted += [call, answer]
        compacted_texts += [call_text, answer_text]
        request = {"system": SYSTEM, "tools": agent_tools + read_tools, "messages": compacted}
        out, report = hold.compact(request, format="anthropic", policy=policy)
        arms["c"].compactions += report.compactions
        messages = list(out["messages"])
        compacted_texts = [
            text if new is old else _entry(new)
            for new, old, text in zip(messages, compacted, compacted_texts, strict=True)
        ]
        compacted = messages
        arms["c"].measure(head_held, compacted_texts, counter)
        arms["c"].seconds += time.perf_counter() - began
        if progress is not None and (index + 1) % 20 == 0:
            progress(f"  turn {index + 1}: (c) {arms['c'].total_tokens:,} tokens so far")

    # (c)'s way back: each result the last request holds other than (b) does is a compact
    # stub, and its reference read through artifact_read is the bytes the tool returned.
    began = time.perf_counter()
    arm = arms["c"]
    for index, turn in enumerate(run):
        at = 2 + 2 * index  # the task, then a call and its result per turn
        if compacted[at] is held[at]:
            continue
        arm.cleared += 1
        expected = turn.text.encode("utf-8")
        found = _REF.search(compacted[at]["content"][0]["content"])
        if found is not None and _read_back(hold, found.group()) == expected:
            arm.read_back += 1
        else:
            arm.bytes_lost += len(expected)
    arm.seconds += time.perf_counter() - began
    return Figures(
        turns=len(run),
        result_bytes=sum(len(turn.text.encode("utf-8")) for turn in run),
        arms=arms,
    )


# -- a stateless caller ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stateless:
    """What one request of a stateless caller (a gateway: the whole history, (b)'s offloaded
    results, sent again with nothing new) costs to compact, without and with the hold's memo,
    measured in the same run on the same hold."""

    request_bytes: int
    messages: int
    cleared: int
    without_memo_ms: float
    with_memo_ms: float
    same_bytes: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "request_bytes": self.request_bytes,
            "messages": self.messages,
            "cleared": self.cleared,
            "without_memo_ms": round(self.without_memo_ms, 2),
            "with_memo_ms": round(self.with_memo_ms, 2),
            "same_bytes": self.same_bytes,
        }


def stateless(run: Sequence[Turn], *, repeats: int = 7) -> Stateless:
    """The last request of ``run`` as a stateless caller sends it ((b)'s history, uncompacted),
    compacted ``repeats`` times through ``compact_request`` without a memo and through
    ``hold.compact`` (the hold's memo, warmed by one call: the history was sent before), each
    call on a fresh parse of the request, as a gateway gets it: medians of each."""
    from cargohold.compact import compact_request

    store = cargohold.MemoryStore(marker_key=hashlib.sha256(b"bench compaction").digest())
    with cargohold.open(store, tenant="bench", user="bench", session="bench-stateless") as hold:
        messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        for turn in run:
            offloaded = hold.offload(turn.text, tool=turn.tool, failed=turn.is_error)
            messages += [_assistant(turn), _result(turn, offloaded.text)]
        request = {
            "system": SYSTEM,
            "tools": _agent_tools() + hold.tools.anthropic(),
            "messages": messages,
        }
        policy = CompactionPolicy()
        key = store.marker_key()
        raw = _dumps(request)
        # A gateway parses each request afresh: every call gets its own copy (made untimed), so
        # no string's hash is cached from an earlier call.
        copies = [json.loads(raw) for _ in range(2 * repeats + 2)]

        def bare() -> Any:
            return compact_request(
                copies.pop(),
                format="anthropic",
                policy=policy,
                offloader=hold.offloader,
                reporter=None,
                key=key,
            )

        def memo() -> Any:
            return hold.compact(copies.pop(), format="anthropic", policy=policy)

        first, report = bare()
        warmed, _ = memo()
        times: dict[str, list[float]] = {"bare": [], "memo": []}
        outs = []
        for _ in range(repeats):
            for name, call in (("bare", bare), ("memo", memo)):
                began = time.perf_counter()
                out, _ = call()
                times[name].append(time.perf_counter() - began)
                outs.append(out)
        same = all(_dumps(out) == _dumps(first) for out in (warmed, *outs))
    return Stateless(
        request_bytes=len(raw.encode("utf-8")),
        messages=len(messages),
        cleared=report.cleared,
        without_memo_ms=1000 * sorted(times["bare"])[repeats // 2],
        with_memo_ms=1000 * sorted(times["memo"])[repeats // 2],
        same_bytes=same,
    )


# -- the command -----------------------------------------------------------------------------


def _table(figures: Figures) -> list[str]:
    lines = [
        "| arm | peak input tokens | total input tokens | vs (b) | prefix breaks "
        "| cache-weighted tokens | cleared | read back exact | bytes lost | seconds |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    base = figures.arms["b"].total_tokens
    for arm in figures.arms.values():
        lost = "n/a (lossy)" if arm.name.startswith("d") else f"{arm.bytes_lost:,}"
        back = f"{arm.read_back:,}" if arm.name == "c" else ""
        lines.append(
            f"| ({arm.name}) {arm.title} | {arm.peak_tokens:,} | {arm.total_tokens:,} "
            f"| {arm.total_tokens / base:.3f} | {arm.prefix_breaks} "
            f"| {round(arm.cache_weighted):,} | {arm.cleared:,} | {back} "
            f"| {lost} | {arm.seconds:.1f} |"
        )
    return lines


def _goals(figures: Figures) -> list[str]:
    c = figures.arms["c"]

    def mark(ok: bool) -> str:
        return "met" if ok else "NOT met"

    return [
        f"goal: (c) at most {GOAL_OF_OFFLOAD:.0%} of (b)'s total input tokens: "
        f"{figures.of_offload:.1%} ({mark(figures.of_offload <= GOAL_OF_OFFLOAD)})",
        f"goal: (c) within {GOAL_OF_LOSSY - 1:.0%} of (d)'s total input tokens (at most "
        f"{GOAL_OF_LOSSY:.0%} of them): {figures.of_lossy:.1%} "
        f"({mark(figures.of_lossy <= GOAL_OF_LOSSY)})",
        f"goal: zero bytes lost: {c.bytes_lost:,} bytes lost, {c.read_back:,} of {c.cleared:,} "
        f"cleared results read back byte-exact ({mark(c.bytes_lost == 0)})",
        f"for reference: (c) is {c.total_tokens / figures.arms['d+b'].total_tokens:.1%} of "
        "(d+b)'s total input tokens (placeholders in place of stubs, over offloaded results), "
        f"and {c.cache_weighted / figures.arms['d+b'].cache_weighted:.1%} of its "
        "cache-weighted tokens",
    ]


def main(argv: list[str] | None = None) -> int:
    """Build the run, replay it, print the table and the goals; exit 1 if bytes were lost."""
    parser = argparse.ArgumentParser(
        prog="python -m bench compaction", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--turns", type=int, default=TURNS, help=f"turns ({TURNS})")
    parser.add_argument("--seed", type=int, default=SEED, help=f"the run's seed ({SEED})")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    run = build_run(args.turns, seed=args.seed)
    sizes = sorted(len(turn.text.encode("utf-8")) for turn in run)
    print(
        f"building the run: {len(run)} turns, results {sizes[0]:,} to {sizes[-1]:,} bytes "
        f"({sum(sizes):,} in all; {sum(t.repeat_of is not None for t in run)} repeated reads, "
        f"{sum(t.is_error for t in run)} errors)",
        file=sys.stderr,
        flush=True,
    )
    figures = replay(run, progress=lambda line: print(line, file=sys.stderr, flush=True))
    figures.seed = args.seed
    print("a stateless caller's request, again with nothing new...", file=sys.stderr, flush=True)
    again = stateless(run)
    took = time.perf_counter() - began
    if args.json:
        print(json.dumps({**figures.as_dict(), "stateless": again.as_dict()}, indent=2))
        return 0 if figures.arms["c"].bytes_lost == 0 else 1
    heavy = sum(size >= 32 * KiB for size in sizes)
    lines = [
        f"compaction replay: {figures.turns} turns, seed {args.seed}, "
        f"{figures.result_bytes:,} bytes of tool results ({heavy} at or above the 32 KiB "
        f"threshold; about {estimate_tokens(figures.result_bytes):,} tokens as prose), "
        f"trigger {TRIGGER_TOKENS:,}, keep {KEEP}; tokens counted exactly (bpe-openai o200k)",
        "",
        *_table(figures),
        "",
        *_goals(figures),
        "",
        f"a stateless caller (the whole history again, nothing new: {again.messages} messages, "
        f"{again.request_bytes:,} bytes, {again.cleared} results cleared): compaction "
        f"{again.without_memo_ms:.1f} ms without the hold's memo, {again.with_memo_ms:.1f} ms "
        f"with it (medians of 7, same run; same bytes out: {again.same_bytes})",
        "",
        f"took {took:.1f} s; command: python -m bench compaction --turns {figures.turns} "
        f"--seed {args.seed}",
    ]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        if args.markdown == "-":
            sys.stdout.write(text + "\n")
        else:
            Path(args.markdown).write_text(text + "\n", encoding="utf-8")
    return 0 if figures.arms["c"].bytes_lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
