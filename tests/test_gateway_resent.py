"""A conversation resent on every turn is read only from its new messages
(:mod:`cargohold.gateway._resent`), and what is forwarded is exactly what a whole rewrite of the
same request forwards: the same bytes, the same refusals, the same figures in each request's
event, whatever the client changes between turns (history edited or cut, fields after the
conversation changed, bytes that are not canonical JSON, another session, an expired turn).

Each request goes through two rewriters of one hold: the gateway's, and one that keeps no
turn (``turn_bytes=0``), which reads and rewrites every request whole.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.responses import Response

import cargohold
from cargohold.gateway import Rewriter
from cargohold.gateway import _app as app_module
from cargohold.gateway._anthropic import ANTHROPIC
from cargohold.gateway._chat import CHAT
from cargohold.gateway._provider import Provider
from cargohold.gateway._responses import RESPONSES

REF = re.compile(r"artifact://sha256/[0-9a-f]{64}")
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
FIGURES = ("outcome", "reason", "kept_out_bytes", "estimated_tokens", "offloaded", "reused")


def heavy(seed: int, lines: int = 1200) -> str:
    """About 48 KB of log lines, over the 32 KiB heavy threshold; one text per seed."""
    return "".join(
        f"2026-12-02T08:{i % 60:02d}:00Z INFO job {seed} step {i}\n" for i in range(lines)
    )


def png(seed: int) -> str:
    data = b"\x89PNG\r\n\x1a\n" + random.Random(seed).randbytes(40_000)
    return base64.b64encode(data).decode("ascii")


@dataclass
class Pair:
    """One hold, and the two rewriters every request goes through."""

    hold: cargohold.Hold
    events: cargohold.ListSink
    kept: Rewriter = field(default_factory=Rewriter)
    whole: Rewriter = field(default_factory=lambda: Rewriter(turn_bytes=0))

    def send(
        self, provider: Provider, body: bytes, session: str | None = None
    ) -> tuple[int, bytes]:
        """``body`` through both rewriters: (status, bytes forwarded or answered), which must
        be the same, as must the figures of the two requests' events."""
        kept, kept_events = self._through(self.kept, provider, body, session)
        whole, whole_events = self._through(self.whole, provider, body, session)
        assert kept == whole
        assert kept_events == whole_events
        return kept

    def _through(
        self, rewriter: Rewriter, provider: Provider, body: bytes, session: str | None
    ) -> tuple[tuple[int, bytes], list[dict[str, Any]]]:
        before = len(self.events.events)
        answer = asyncio.run(app_module._rewrite(self.hold, rewriter, provider, body, session))
        requests = [e for e in self.events.events[before:] if e.operation == "request"]
        return _outcome(answer), [{name: getattr(e, name) for name in FIGURES} for e in requests]


def _outcome(answer: Any) -> tuple[int, bytes]:
    if isinstance(answer, Response):
        return answer.status_code, bytes(answer.body)
    return 200, answer.body


@pytest.fixture
def pair() -> Iterator[Pair]:
    events = cargohold.ListSink()
    with cargohold.open("memory://", tenant="t", user="u", session="gw", sinks=[events]) as hold:
        yield Pair(hold, events)


def compact(request: dict[str, Any]) -> bytes:
    """The request as the SDKs send it: canonical, compact JSON."""
    return json.dumps(request, separators=(",", ":"), ensure_ascii=False).encode()


# -- the conversations of the three APIs, a turn at a time ---------------------------------------


def anthropic_turn(turn: int, result: str) -> list[dict[str, Any]]:
    call = {"type": "tool_use", "id": f"toolu_{turn}", "name": "bash", "input": {"n": turn}}
    block = {"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": result}
    return [{"role": "assistant", "content": [call]}, {"role": "user", "content": [block]}]


def chat_turn(turn: int, result: str) -> list[dict[str, Any]]:
    call = {
        "id": f"call_{turn}",
        "type": "function",
        "function": {"name": "bash", "arguments": "{}"},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{turn}", "content": result},
    ]


def responses_turn(turn: int, result: str) -> list[dict[str, Any]]:
    return [
        {"type": "function_call", "call_id": f"call_{turn}", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": f"call_{turn}", "output": result},
    ]


APIS = {
    "anthropic": (
        ANTHROPIC,
        "messages",
        anthropic_turn,
        {"model": "claude-fake", "max_tokens": 64},
    ),
    "openai-chat": (CHAT, "messages", chat_turn, {"model": "gpt-fake"}),
    "openai-responses": (RESPONSES, "input", responses_turn, {"model": "gpt-fake"}),
}


@pytest.mark.parametrize("api", sorted(APIS))
def test_a_conversation_resent_each_turn_is_read_only_from_its_new_messages(
    pair: Pair, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, key, turn_of, head = APIS[api]
    parses: list[int] = []
    loads = app_module._loads
    monkeypatch.setattr(app_module, "_loads", lambda body: parses.append(len(body)) or loads(body))
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    forwarded: list[bytes] = []
    for turn in range(12):
        result = heavy(turn) if turn % 3 == 0 else f"ok {turn}"
        conversation += turn_of(turn, result)
        # The fields after the conversation (tools, stream) come after it, as the SDKs send.
        request = {**head, key: conversation, "tools": [], "stream": turn % 2 == 0}
        status, body = pair.send(provider, compact(request))
        assert status == 200
        forwarded.append(body)

    assert pair.kept.totals.resent == 11  # every turn after the first
    assert pair.whole.totals.resent == 0
    assert len(parses) == 12 + 1  # every request of the whole rewriter, and the first one
    raw = json.dumps(heavy(0)[:500])[1:-1].encode()  # as the body carries it
    assert raw in compact({key: conversation})
    assert all(raw not in body for body in forwarded)
    assert pair.kept.totals.counts == pair.whole.totals.counts


def test_a_resent_conversation_forwards_the_clients_own_bytes_when_nothing_is_rewritten(
    pair: Pair,
) -> None:
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for turn in range(4):
        conversation += anthropic_turn(turn, f"ok {turn}")
        body = compact({"model": "claude-fake", "max_tokens": 64, "messages": conversation})
        assert pair.send(ANTHROPIC, body) == (200, body)

    assert pair.kept.totals.resent == 3
    assert pair.kept.totals.changed == 0


def test_an_edited_first_message_is_rewritten_whole_and_a_cut_history_reuses_what_it_keeps(
    pair: Pair,
) -> None:
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    conversation += anthropic_turn(0, heavy(0)) + anthropic_turn(1, "ok")
    head = {"model": "claude-fake", "max_tokens": 64}
    pair.send(ANTHROPIC, compact({**head, "messages": conversation}))

    edited = [{"role": "user", "content": "start over"}, *conversation[1:]]
    pair.send(ANTHROPIC, compact({**head, "messages": edited}))
    assert pair.kept.totals.resent == 0  # nothing resent: read whole
    cut = edited[:3]
    pair.send(ANTHROPIC, compact({**head, "messages": cut}))
    assert pair.kept.totals.resent == 1  # its three messages, the edited turn's first three
    pair.send(ANTHROPIC, compact({**head, "messages": cut + anthropic_turn(2, heavy(2))}))
    assert pair.kept.totals.resent == 2
    assert pair.kept.totals.counts == pair.whole.totals.counts


def test_a_previous_last_message_sent_changed_is_read_again_with_the_new_ones(
    pair: Pair,
) -> None:
    """Claude Code's turn: its prompt-cache mark moves from the previous last message to the
    new last one, so every message before the previous last is resent byte for byte."""
    mark = {"type": "ephemeral"}
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    head = {"model": "claude-fake", "max_tokens": 64}
    for turn in range(6):
        conversation += anthropic_turn(turn, heavy(turn) if turn % 2 else f"ok {turn}")
        marked = [*conversation[:-1], json.loads(json.dumps(conversation[-1]))]
        marked[-1]["content"][-1]["cache_control"] = mark
        pair.send(ANTHROPIC, compact({**head, "messages": marked}))

    assert pair.kept.totals.resent == 5
    assert pair.kept.totals.counts == pair.whole.totals.counts


def test_a_body_that_is_not_canonical_json_is_rewritten_whole_every_turn(pair: Pair) -> None:
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for turn in range(3):
        conversation += anthropic_turn(turn, heavy(turn))
        spaced = json.dumps({"model": "claude-fake", "max_tokens": 64, "messages": conversation})
        pair.send(ANTHROPIC, spaced.encode())

    assert pair.kept.totals.resent == 0


def test_a_turn_after_a_canonical_one_with_spaces_after_its_new_messages_is_read_right(
    pair: Pair,
) -> None:
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    conversation += anthropic_turn(0, heavy(0))
    first = compact({"model": "claude-fake", "max_tokens": 64, "messages": conversation})
    pair.send(ANTHROPIC, first)
    new = anthropic_turn(1, heavy(1))
    # The resent part byte for byte, then the new part and the rest written with spaces.
    second = first[:-2] + b", " + json.dumps(new)[1:-1].encode() + b' ] , "stream" : false }'
    status, forwarded = pair.send(ANTHROPIC, second)

    assert status == 200
    assert pair.kept.totals.resent == 1
    assert json.loads(forwarded)["stream"] is False
    third = compact(
        {"model": "claude-fake", "max_tokens": 64, "messages": conversation + new + new[:1]}
    )
    pair.send(ANTHROPIC, third)
    # The spaced turn was not kept; this one resends the first turn's conversation, which is.
    assert pair.kept.totals.resent == 2


@pytest.mark.parametrize(
    "tail",
    [
        b',"model":"claude-other"}',  # a field the head holds, again: the last one counts
        b',"messages":[]}',  # the conversation's field, again
        b',"x":"\\u0000cargohold.resent"}',  # the parse key's text in a value
        b',"\\u0000cargohold.resent":1}',  # the parse key itself
        b',"n":12345678901234567890123}',  # an integer orjson would not read exactly
        b',"broken":}',  # not JSON
    ],
)
def test_a_resent_conversation_with_a_tail_the_split_cannot_read_is_rewritten_whole(
    pair: Pair, tail: bytes
) -> None:
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    conversation += anthropic_turn(0, heavy(0))
    first = compact({"model": "claude-fake", "max_tokens": 64, "messages": conversation})
    pair.send(ANTHROPIC, first)

    pair.send(ANTHROPIC, first[:-1] + tail)

    assert pair.kept.totals.resent == 0


def test_another_sessions_request_is_never_read_against_this_ones_turn(pair: Pair) -> None:
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    conversation += anthropic_turn(0, heavy(0))
    body = compact({"model": "claude-fake", "max_tokens": 64, "messages": conversation})
    pair.send(ANTHROPIC, body)

    _, other = pair.send(ANTHROPIC, body, session="other")

    assert pair.kept.totals.resent == 0
    [ref] = set(REF.findall(other.decode()))
    assert pair.hold.for_session("other").info(ref).ok  # stored in that session's scope too


def three_turns(pair: Pair, result: Callable[[int], str]) -> None:
    """A conversation of three turns through ``pair``, each adding a call and its result."""
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for turn in range(3):
        conversation += anthropic_turn(turn, result(turn))
        pair.send(
            ANTHROPIC, compact({"model": "claude-fake", "max_tokens": 64, "messages": conversation})
        )


def test_a_kept_turn_expires_after_recheck_seconds(pair: Pair) -> None:
    pair.kept = Rewriter(recheck_seconds=0.0)
    three_turns(pair, heavy)

    assert pair.kept.totals.resent == 0


def test_a_request_larger_than_turn_bytes_is_not_kept(pair: Pair) -> None:
    pair.kept = Rewriter(turn_bytes=10_000)
    three_turns(pair, heavy)

    assert pair.kept.totals.resent == 0


def test_with_compaction_every_request_is_rewritten_whole(pair: Pair) -> None:
    pair.kept = Rewriter(compact=True)
    pair.whole = Rewriter(compact=True, turn_bytes=0)
    three_turns(pair, lambda turn: f"ok {turn}")

    assert pair.kept.totals.resent == 0


def test_a_leak_in_a_resent_conversations_new_messages_is_refused_as_a_whole_rewrite_does(
    pair: Pair,
) -> None:
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    conversation += anthropic_turn(0, heavy(0))
    head = {"model": "claude-fake", "max_tokens": 64}
    pair.send(ANTHROPIC, compact({**head, "messages": conversation}))

    leaking = [*conversation, {"role": "assistant", "content": heavy(9)}]
    status, answer = pair.send(ANTHROPIC, compact({**head, "messages": leaking}))

    assert status == 400
    assert b"context_leak" in answer
    assert heavy(9)[:200].encode() not in answer
    assert pair.kept.totals.resent == 1
    # The refused request was not kept: the next one resends the last forwarded conversation.
    pair.send(ANTHROPIC, compact({**head, "messages": conversation + anthropic_turn(1, "ok")}))
    assert pair.kept.totals.resent == 2


# -- any sequence of turns: the kept rewriter forwards what the whole one does ---------------------

STEPS = st.sampled_from(
    [
        "small",
        "heavy",
        "heavy again",
        "secret",
        "image",
        "nul",
        "edit",
        "cut",
        "spaced",
        "tail",
        "marked",
    ]
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEPS, min_size=1, max_size=10))
def test_any_sequence_of_turns_forwards_what_a_whole_rewrite_forwards(steps: list[str]) -> None:
    events = cargohold.ListSink()
    with cargohold.open("memory://", tenant="t", user="u", session="gw", sinks=[events]) as hold:
        _any_sequence(Pair(hold, events), steps)


def _any_sequence(pair: Pair, steps: list[str]) -> None:
    resent = pair.kept.totals.resent
    conversation: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    tail: dict[str, Any] = {}
    for turn, step in enumerate(steps):
        spaced = False
        if step == "small":
            conversation += anthropic_turn(turn, f"ok {turn}")
        elif step == "heavy":
            conversation += anthropic_turn(turn, heavy(turn))
        elif step == "heavy again":
            conversation += anthropic_turn(turn, heavy(0))
        elif step == "secret":
            conversation += anthropic_turn(turn, f"cloned\ntoken: {GITHUB_TOKEN}\n")
        elif step == "image":
            source = {"type": "base64", "media_type": "image/png", "data": png(turn)}
            conversation.append({"role": "user", "content": [{"type": "image", "source": source}]})
        elif step == "nul":
            conversation += anthropic_turn(turn, f"a\u0000b {turn}")
        elif step == "edit":
            conversation[0] = {"role": "user", "content": f"start {turn}"}
        elif step == "cut":
            conversation = conversation[: max(1, len(conversation) - 2)]
        elif step == "spaced":
            spaced = True
        elif step == "tail":
            tail = {} if tail else {"tools": [], "stream": False}
        sent = conversation
        if step == "marked":  # the last message with a prompt-cache mark, this turn only
            sent = [*conversation[:-1], json.loads(json.dumps(conversation[-1]))]
            content = sent[-1]["content"]
            if isinstance(content, list):
                content[-1]["cache_control"] = {"type": "ephemeral"}
            else:
                sent[-1]["content"] = [{"type": "text", "text": content}]
        request = {"model": "claude-fake", "max_tokens": 64, "messages": sent, **tail}
        body = json.dumps(request).encode() if spaced else compact(request)
        status, forwarded = pair.send(ANTHROPIC, body)
        assert status == 200, forwarded
        assert GITHUB_TOKEN.encode() not in forwarded
    assert pair.kept.totals.counts == pair.whole.totals.counts
    # A turn that only adds after the last message (or changes the fields after it) of a
    # previous request that was canonical is read from its new part: at least those.
    additions = {"small", "heavy", "heavy again", "secret", "image", "tail"}
    least = sum(
        1
        for before, step in itertools.pairwise(steps)
        if step in additions and before not in ("spaced", "marked")
    )
    assert pair.kept.totals.resent - resent >= least
