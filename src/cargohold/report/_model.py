"""The run report's figures, aggregated from decision events in one pass.

Only event fields are read, and of those only the ones an event may hold (operation, outcome,
reason, byte and token counts, a canonical reference, a tool's name, the projection kind, agent
ids): the report can
hold no body, path, owner or exception text because no event does. A log anyone may have edited
is read defensively: a reference that is not canonical is dropped, an id or a tool name that is
not a plain identifier is shown as ``?``, a count that is not a non-negative integer counts 0.

Everything is a bounded aggregate (per tool, per agent, per reference; the largest artifacts
and the timeline are capped), so a 100,000-event log gives a report the size of a 100-event one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cargohold._events import _ID as _EVENT_ID

_REF = re.compile(r"artifact://sha256/[0-9a-f]{64}")
# A tool's or an agent's name: the events' own rule (1-128 characters), so every id an event
# may carry is reported as itself, and anything else (an edited log) as "?".
_NAME = _EVENT_ID

TOP_ARTIFACTS = 20
"""The largest artifacts the report lists."""
TOP_READ_BACKS = 20
"""The artifacts read back most (by bytes) the report lists."""
TIMELINE_BUCKETS = 60
"""The timeline's columns: each one aggregates a run of consecutive decisions."""
MAX_AGENTS = 200
"""Agents shown in the tree; the rest are counted in one row."""
MAX_TOOLS = 200
"""Tools listed (those that returned the most bytes); the rest are counted in one row."""

_OFFLOADED = {"offloaded", "existing_reference", "bypass"}
_REFUSED = {"rejected", "failed"}
_APIS = {"anthropic", "openai_chat", "openai_responses"}
"""The APIs a request event names (its ``kind``); anything else is shown as ``?``."""
_REQUEST_OUTCOMES = {"forwarded", "refused", "failed"}
_GUARD_PASS = {"llm.context_window_unchecked"}
"""The one guard outcome that let the request through (sent without a window check)."""


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return value


def _name(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) and _NAME.fullmatch(value):
        return value
    return "?"


def _kind(value: object) -> str | None:
    """A projection kind: ``None`` when the event has none (an older log), ``?`` when edited."""
    if value is None:
        return None
    if isinstance(value, str) and re.fullmatch(r"[a-z][a-z0-9_]{0,31}", value):
        return value
    return "?"


def _code(value: object) -> str:
    """An outcome, reason or operation code: a short lower-case identifier, else ``?``."""
    if isinstance(value, str) and re.fullmatch(r"[a-z][a-z0-9_.]{0,63}", value):
        return value
    return "?"


@dataclass(slots=True)
class ToolFigures:
    """What one tool returned and what of it entered the context."""

    tool: str
    results: int = 0
    observed_bytes: int = 0
    observed_tokens: int = 0
    context_bytes: int = 0
    offloaded: int = 0
    inline: int = 0
    refused: int = 0


@dataclass(slots=True)
class AgentFigures:
    """One agent of the tree: its parent, depth and decisions."""

    agent_id: str
    parent_agent_id: str | None
    depth: int
    decisions: int = 0
    first_sequence: int = 0
    last_sequence: int = 0
    by_operation: dict[str, int] = field(default_factory=dict)
    timeline: list[int] = field(default_factory=list)
    """Decisions per timeline bucket (see :data:`TIMELINE_BUCKETS`)."""


@dataclass(slots=True)
class ArtifactFigures:
    """One stored artifact, as its offload events describe it."""

    ref: str
    tool: str | None
    size: int
    stub_bytes: int
    content_kind: str
    kind: str | None = None
    """The projection kind its offload event named (``json``, ``csv``, ``log``...); ``None``
    in a log written before events carried it, or by a hand-built reporter."""
    reads: int = 0
    read_bytes: int = 0
    read_outcomes: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class Stop:
    """A refusal, a guard stop or a compaction: what, why, where, how many."""

    operation: str
    outcome: str
    reason: str
    count: int = 0
    observed_bytes: int = 0
    cleared: int = 0
    tokens_saved: int = 0


@dataclass(slots=True)
class RequestFigures:
    """The gateway's requests, as their ``request`` events count them (one per request).

    Bytes and tokens kept out are those of forwarded requests (a refused or failed one never
    reached a context); a stub reused from an earlier turn counts on every turn it kept its
    bytes out of a request.
    """

    requests: int = 0
    by_outcome: dict[str, int] = field(default_factory=dict)
    by_api: dict[str, int] = field(default_factory=dict)
    forwarded: int = 0
    request_bytes: int = 0
    """The forwarded requests' bytes as their clients sent them."""
    forwarded_bytes: int = 0
    """The forwarded requests' bytes as they were sent on."""
    kept_out_bytes: int = 0
    kept_out_tokens: int = 0
    largest_kept_out_bytes: int = 0
    """The most bytes one forwarded request kept out."""
    largest_kept_out_tokens: int = 0
    """The estimated tokens kept out of the request that kept out the most bytes."""
    offloaded: int = 0
    reused: int = 0
    compacted: int = 0
    screened: int = 0

    @property
    def kept_out_bytes_per_request(self) -> int:
        """The forwarded requests' bytes kept out, on average (rounded down)."""
        return self.kept_out_bytes // self.forwarded if self.forwarded else 0

    @property
    def kept_out_tokens_per_request(self) -> int:
        """The forwarded requests' estimated tokens kept out, on average (rounded down)."""
        return self.kept_out_tokens // self.forwarded if self.forwarded else 0


@dataclass(slots=True)
class RunReport:
    """The report of one events log: totals, tools, agents, read-backs, stops, artifacts,
    and the gateway's requests when the log holds any."""

    events: int = 0
    skipped: int = 0
    by_operation: dict[str, int] = field(default_factory=dict)
    observed_bytes: int = 0
    observed_tokens: int = 0
    context_bytes: int = 0
    read_back_bytes: int = 0
    tools: list[ToolFigures] = field(default_factory=list)
    agents: list[AgentFigures] = field(default_factory=list)
    agents_left_off: int = 0
    tools_left_off: int = 0
    max_depth: int = 0
    read_backs: list[ArtifactFigures] = field(default_factory=list)
    read_outcomes: dict[str, int] = field(default_factory=dict)
    stops: list[Stop] = field(default_factory=list)
    largest: list[ArtifactFigures] = field(default_factory=list)
    first_sequence: int = 0
    last_sequence: int = 0
    requests: RequestFigures = field(default_factory=RequestFigures)
    run_filtered: bool = False
    """Only one run's events are reported (``build_report(..., run=...)``)."""
    other_runs: int = 0
    """Events of other runs (other sessions) left out."""
    untagged: int = 0
    """Events without a run tag (older events, or a hand-built reporter's) left out."""

    @property
    def kept_out_bytes(self) -> int:
        """Bytes the tools returned that did not enter the context."""
        return max(0, self.observed_bytes - self.context_bytes)


def build_report(
    events: Iterable[Mapping[str, Any]], *, skipped: int = 0, run: str | None = None
) -> RunReport:
    """Aggregate decision events (``DecisionEvent.as_dict()`` or a JSON line of the events log)
    into a :class:`RunReport`. Two passes over the list of events at most; never a row per
    event in the result.

    Args:
        events: The events.
        skipped: Lines of the log that were not events (reported as such).
        run: Only the events carrying this run tag (``run_tag`` of one scope's store key and
            owner, as ``cargohold report --session S`` computes it); the others are counted
            as left out, those of other runs apart from those with no tag at all (written
            before events carried one).
    """
    rows = [event for event in events if isinstance(event, Mapping)]
    report = RunReport(skipped=skipped, run_filtered=run is not None)
    if run is not None:
        mine = []
        for event in rows:
            tag = event.get("run")
            if tag == run:
                mine.append(event)
            elif isinstance(tag, str) and tag:
                report.other_runs += 1
            else:
                report.untagged += 1
        rows = mine
    report.events = len(rows)
    if not rows:
        return report
    sequences = [_count(event.get("sequence")) for event in rows]
    low, high = min(sequences), max(sequences)
    report.first_sequence, report.last_sequence = low, high
    span = max(1, high - low + 1)
    tools: dict[str, ToolFigures] = {}
    agents: dict[str, AgentFigures] = {}
    artifacts: dict[str, ArtifactFigures] = {}
    reads: dict[str, ArtifactFigures] = {}
    stops: dict[tuple[str, str, str], Stop] = {}
    for event, sequence in zip(rows, sequences, strict=True):
        operation = _code(event.get("operation"))
        outcome = _code(event.get("outcome"))
        reason = _code(event.get("reason"))
        observed = _count(event.get("observed_bytes"))
        context = _count(event.get("context_bytes"))
        tokens = _count(event.get("estimated_tokens"))
        ref = event.get("ref")
        ref = ref if isinstance(ref, str) and _REF.fullmatch(ref) else None
        tool = _name(event.get("tool"))
        report.by_operation[operation] = report.by_operation.get(operation, 0) + 1

        agent_id = _name(event.get("agent_id")) or "?"
        agent = agents.get(agent_id)
        if agent is None:
            depth = _count(event.get("depth"))
            agent = agents[agent_id] = AgentFigures(
                agent_id,
                _name(event.get("parent_agent_id")),
                depth,
                first_sequence=sequence,
                timeline=[0] * TIMELINE_BUCKETS,
            )
            report.max_depth = max(report.max_depth, depth)
        agent.decisions += 1
        agent.first_sequence = min(agent.first_sequence, sequence)
        agent.last_sequence = max(agent.last_sequence, sequence)
        agent.by_operation[operation] = agent.by_operation.get(operation, 0) + 1
        agent.timeline[(sequence - low) * TIMELINE_BUCKETS // span] += 1

        if operation == "offload":
            figures = tools.get(tool or "-")
            if figures is None:
                figures = tools[tool or "-"] = ToolFigures(tool or "-")
            figures.results += 1
            figures.observed_bytes += observed
            figures.observed_tokens += tokens
            figures.context_bytes += context
            report.observed_bytes += observed
            report.observed_tokens += tokens
            report.context_bytes += context
            if outcome in _OFFLOADED:
                figures.offloaded += 1
            elif outcome in _REFUSED:
                figures.refused += 1
            else:
                figures.inline += 1
            if ref is not None and ref not in artifacts:
                artifacts[ref] = ArtifactFigures(
                    ref,
                    tool,
                    observed,
                    context,
                    _code(event.get("content_kind")),
                    _kind(event.get("kind")),
                )
        elif operation == "rehydrate":
            report.read_outcomes[outcome] = report.read_outcomes.get(outcome, 0) + 1
            if outcome == "resolved":
                report.read_back_bytes += context
            if ref is not None:
                read = reads.get(ref)
                if read is None:
                    read = reads[ref] = ArtifactFigures(ref, tool, 0, 0, "")
                read.reads += 1
                read.read_bytes += context if outcome == "resolved" else 0
                read.read_outcomes[outcome] = read.read_outcomes.get(outcome, 0) + 1
        elif operation == "request":
            _count_request(report.requests, event, outcome, observed, context, tokens)
        if (
            (operation == "offload" and outcome in _REFUSED)
            or (operation == "guard" and outcome not in _GUARD_PASS)
            or operation == "compact"
        ):
            key = (operation, outcome, reason)
            stop = stops.get(key)
            if stop is None:
                stop = stops[key] = Stop(operation, outcome, reason)
            stop.count += 1
            stop.observed_bytes += observed
            stop.cleared += _count(event.get("cleared"))
            after = event.get("tokens_after")
            if operation == "compact" and isinstance(after, int) and not isinstance(after, bool):
                stop.tokens_saved += max(0, tokens - after)

    ranked = sorted(tools.values(), key=lambda t: (-t.observed_bytes, t.tool))
    report.tools = ranked[:MAX_TOOLS]
    report.tools_left_off = len(ranked) - len(report.tools)
    ordered = sorted(agents.values(), key=lambda a: (a.first_sequence, a.agent_id))
    report.agents = _tree_order(ordered)[:MAX_AGENTS]
    report.agents_left_off = max(0, len(ordered) - MAX_AGENTS)
    for ref, read in reads.items():
        known = artifacts.get(ref)
        if known is not None:
            known.reads, known.read_bytes = read.reads, read.read_bytes
            known.read_outcomes = read.read_outcomes
            reads[ref] = known
    report.read_backs = sorted(reads.values(), key=lambda r: (-r.read_bytes, -r.reads, r.ref))[
        :TOP_READ_BACKS
    ]
    report.stops = sorted(stops.values(), key=lambda s: (s.operation, -s.count, s.reason))
    report.largest = sorted(artifacts.values(), key=lambda a: (-a.size, a.ref))[:TOP_ARTIFACTS]
    return report


def _count_request(
    figures: RequestFigures,
    event: Mapping[str, Any],
    outcome: str,
    observed: int,
    context: int,
    tokens: int,
) -> None:
    """One request event into the request figures (the kept-out figures: forwarded only)."""
    figures.requests += 1
    outcome = outcome if outcome in _REQUEST_OUTCOMES else "?"  # bounded: an edited log
    figures.by_outcome[outcome] = figures.by_outcome.get(outcome, 0) + 1
    api = event.get("kind")
    api = api if api in _APIS else "?"
    figures.by_api[api] = figures.by_api.get(api, 0) + 1
    if outcome != "forwarded":
        return
    kept = _count(event.get("kept_out_bytes"))
    figures.forwarded += 1
    figures.request_bytes += observed
    figures.forwarded_bytes += context
    figures.kept_out_bytes += kept
    figures.kept_out_tokens += tokens
    if kept > figures.largest_kept_out_bytes:
        figures.largest_kept_out_bytes = kept
        figures.largest_kept_out_tokens = tokens
    figures.offloaded += _count(event.get("offloaded"))
    figures.reused += _count(event.get("reused"))
    figures.compacted += _count(event.get("cleared"))
    figures.screened += _count(event.get("screened"))


def _tree_order(agents: list[AgentFigures]) -> list[AgentFigures]:
    """Agents depth-first: each parent followed by its children, in order of first decision."""
    children: dict[str | None, list[AgentFigures]] = {}
    known = {agent.agent_id for agent in agents}
    for agent in agents:
        parent = agent.parent_agent_id if agent.parent_agent_id in known else None
        children.setdefault(parent, []).append(agent)
    out: list[AgentFigures] = []
    stack = list(reversed(children.get(None, [])))
    seen: set[str] = set()
    while stack:
        agent = stack.pop()
        if agent.agent_id in seen:
            continue
        seen.add(agent.agent_id)
        out.append(agent)
        stack.extend(reversed(children.get(agent.agent_id, [])))
    out.extend(agent for agent in agents if agent.agent_id not in seen)  # a cycle in an edit
    return out
