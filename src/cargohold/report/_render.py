"""The run report drawn: one self-contained HTML page (inline SVG and CSS, no script, no network)
and the same sections in a terminal (rich tables and bars).

Every string drawn comes from :func:`cargohold.report.build_report`, which keeps only codes,
counts, canonical references, tool names and agent ids; each is escaped where it is drawn
(HTML text and attributes, rich markup), so an edited log cannot inject markup either.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from cargohold.report._model import TIMELINE_BUCKETS, ArtifactFigures, RunReport

if TYPE_CHECKING:
    from rich.console import Console

SECTIONS = ("totals", "tools", "agents", "read-backs", "stops", "artifacts")
"""The page's section ids, in order (a test checks each is drawn)."""
REQUESTS_SECTION = "requests"
"""The id of the gateway's requests section, drawn after ``totals`` only when the events
hold request events (a log of a run without the gateway draws the page as before)."""


def _short(ref: str) -> str:
    return ref.removeprefix("artifact://sha256/")[:12]


def _human(count: int) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1000
    return f"{count:,} B"  # not reached


# -- HTML -------------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d2330;
background:#fbfbfd}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde}
table{border-collapse:collapse;width:100%;margin:6px 0}
th,td{text-align:left;padding:3px 8px;border-bottom:1px solid #eef;vertical-align:middle}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#eef0f6;padding:1px 4px;
border-radius:3px}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{background:#fff;border:1px solid #dde;
border-radius:6px;padding:10px 14px;min-width:150px}.card b{display:block;font-size:20px}
.muted{color:#667}svg{display:block}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _kind_of(artifact: ArtifactFigures) -> str:
    """What the artifact is (``json``, ``log``...), as its offload event named it; an older
    log's events name none, and then its content kind (``tool_result``...) stands."""
    return artifact.kind or artifact.content_kind


def _left_out(report: RunReport) -> str:
    """What a report of one run (``--session``) left out, as a clause; empty otherwise. It
    names no session: the page holds no owner."""
    if not report.run_filtered:
        return ""
    return (
        f" of this session; {report.other_runs:,} of other sessions and {report.untagged:,}"
        " without a run tag (older events, or a hand-built reporter's) left out"
    )


def _request_counts(report: RunReport) -> str:
    r = report.requests
    outcomes = ", ".join(f"{_e(k)} {v:,}" for k, v in sorted(r.by_outcome.items()))
    apis = ", ".join(f"{_e(k)} {v:,}" for k, v in sorted(r.by_api.items()))
    return (
        f"{outcomes}; by API: {apis}. Forwarded: {_human(r.request_bytes)} sent by the "
        f"clients, {_human(r.forwarded_bytes)} sent on; parts offloaded {r.offloaded:,}, "
        f"stubs reused {r.reused:,}, results compacted {r.compacted:,}, screened "
        f"{r.screened:,}"
    )


def _cmd(command: str) -> str:
    """A figure's command: shown as code and linked, so a click copies nothing but says how."""
    return f'<a href="#cmd" title="{_e(command)}"><code>{_e(command)}</code></a>'


def _bar(part: int, whole: int, *, width: int = 220, second: int | None = None) -> str:
    """An inline SVG bar: ``part`` of ``whole``; ``second`` drawn over it (what entered)."""
    whole = max(whole, 1)
    first_w = round(width * min(part, whole) / whole)
    out = (
        f'<svg width="{width}" height="12" role="img" aria-label="{part:,} of {whole:,}">'
        f'<rect width="{width}" height="12" fill="#eceef5"/>'
        f'<rect width="{first_w}" height="12" fill="#7d8fd1"/>'
    )
    if second is not None:
        second_w = max(1 if second else 0, round(width * min(second, whole) / whole))
        out += f'<rect width="{second_w}" height="12" fill="#e07a3f"/>'
    return out + "</svg>"


def _timeline(report: RunReport) -> str:
    """The agent tree as rows of a timeline: one row per agent, indented by depth, each column
    a run of consecutive decisions (darker: more)."""
    cell, label_w, row_h = 10, 220, 16
    rows = report.agents
    peak = max((max(agent.timeline) for agent in rows), default=1) or 1
    width = label_w + cell * TIMELINE_BUCKETS
    height = row_h * max(1, len(rows))
    parts = [f'<svg width="{width}" height="{height}" role="img" aria-label="agent timeline">']
    for index, agent in enumerate(rows):
        y = index * row_h
        indent = 12 * min(agent.depth, 8)
        label = agent.agent_id if len(agent.agent_id) <= 26 else agent.agent_id[:25] + "…"
        parts.append(
            f'<text x="{indent}" y="{y + 12}" font-size="11" font-family="monospace">'
            f"{_e(label)} · {agent.decisions:,}</text>"
        )
        for column, count in enumerate(agent.timeline):
            if count:
                shade = 0.15 + 0.85 * count / peak
                parts.append(
                    f'<rect x="{label_w + column * cell}" y="{y + 2}" width="{cell - 1}" '
                    f'height="{row_h - 4}" fill="#3f5bbf" fill-opacity="{shade:.2f}"/>'
                )
    parts.append("</svg>")
    return "".join(parts)


def render_html(
    report: RunReport, *, title: str = "cargohold run report", refresh: int | None = None
) -> str:
    """The whole report as one self-contained HTML page (no script, no external resource).

    Args:
        report: What to draw.
        title: The page's title and heading.
        refresh: Seconds after which the browser loads the page again (``cargohold report
            --serve``: a run going on); ``None``: a page that stays as written.
    """
    again = f'<meta http-equiv="refresh" content="{int(refresh)}">' if refresh else ""
    p: list[str] = [
        "<!doctype html>",
        f'<html lang="en"><head><meta charset="utf-8">{again}',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">",
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="muted">{report.events:,} decision event{"" if report.events == 1 else "s"}'
        + _left_out(report)
        + " (sequence "
        f"{report.first_sequence:,} to {report.last_sequence:,})"
        + (f", {report.skipped:,} lines skipped" if report.skipped else "")
        + f". Every row: {_cmd('cargohold events')}.</p>",
    ]
    ops = ", ".join(f"{_e(k)} {v:,}" for k, v in sorted(report.by_operation.items()))
    p += [
        '<section id="totals"><h2>Where the context went</h2><div class="cards">',
        f'<div class="card">tools returned<b>{_human(report.observed_bytes)}</b>'
        f'<span class="muted">about {report.observed_tokens:,} tokens</span></div>',
        f'<div class="card">entered the context<b>{_human(report.context_bytes)}</b></div>',
        f'<div class="card">kept out<b>{_human(report.kept_out_bytes)}</b></div>',
        f'<div class="card">read back on purpose<b>{_human(report.read_back_bytes)}</b></div>',
        f'</div><p class="muted">decisions: {ops or "none"}</p></section>',
    ]
    req = report.requests
    if req.requests:
        p += [
            f'<section id="{REQUESTS_SECTION}"><h2>Gateway requests: what each kept out</h2>'
            '<div class="cards">',
            f'<div class="card">requests<b>{req.requests:,}</b>'
            f'<span class="muted">{req.forwarded:,} forwarded</span></div>',
            f'<div class="card">kept out per request<b>{_human(req.kept_out_bytes_per_request)}'
            f'</b><span class="muted">about {req.kept_out_tokens_per_request:,} tokens</span>'
            "</div>",
            f'<div class="card">the most from one<b>{_human(req.largest_kept_out_bytes)}</b>'
            f'<span class="muted">about {req.largest_kept_out_tokens:,} tokens</span></div>',
            f'<div class="card">kept out in all<b>{_human(req.kept_out_bytes)}</b>'
            f'<span class="muted">about {req.kept_out_tokens:,} tokens</span></div>',
            f'</div><p class="muted">{_request_counts(report)}. '
            f"{_cmd('cargohold events --json')}</p></section>",
        ]
    whole = max((t.observed_bytes for t in report.tools), default=1)
    p.append(
        '<section id="tools"><h2>Bytes per tool, against what entered the context</h2>'
        '<table><tr><th>tool</th><th class="n">results</th><th class="n">returned</th>'
        '<th class="n">tokens</th><th class="n">entered</th><th>'
        '<span style="color:#7d8fd1">■</span> returned '
        '<span style="color:#e07a3f">■</span> entered</th><th class="n">offloaded</th>'
        '<th class="n">inline</th><th class="n">refused</th></tr>'
    )
    for t in report.tools:
        p.append(
            f"<tr><td>{_e(t.tool)}</td><td class='n'>{t.results:,}</td>"
            f"<td class='n'>{_human(t.observed_bytes)}</td><td class='n'>{t.observed_tokens:,}"
            f"</td><td class='n'>{_human(t.context_bytes)}</td>"
            f"<td>{_bar(t.observed_bytes, whole, second=t.context_bytes)}</td>"
            f"<td class='n'>{t.offloaded:,}</td><td class='n'>{t.inline:,}</td>"
            f"<td class='n'>{t.refused:,}</td></tr>"
        )
    if report.tools_left_off:
        p.append(
            f"<tr><td class='muted' colspan='9'>{report.tools_left_off:,} more tools not "
            "listed (they returned the fewest bytes)</td></tr>"
        )
    p.append("</table></section>")
    p.append(
        f'<section id="agents"><h2>Agents: the tree as a timeline of decisions</h2>'
        f'<p class="muted">{len(report.agents):,} agents, depth up to {report.max_depth}; '
        f"each column is about {max(1, (report.last_sequence - report.first_sequence + 1)):,}"
        f" / {TIMELINE_BUCKETS} decisions"
        + (f"; {report.agents_left_off:,} more agents not drawn" if report.agents_left_off else "")
        + f"</p>{_timeline(report)}</section>"
    )
    reads = ", ".join(f"{_e(k)} {v:,}" for k, v in sorted(report.read_outcomes.items()))
    p.append(
        '<section id="read-backs"><h2>Read-backs: what the model came back for</h2>'
        f'<p class="muted">outcomes: {reads or "no read-backs"}</p>'
        '<table><tr><th>artifact</th><th>tool</th><th class="n">reads</th>'
        '<th class="n">bytes read</th><th>outcomes</th><th>command</th></tr>'
    )
    for r in report.read_backs:
        outcomes = ", ".join(f"{_e(k)} {v:,}" for k, v in sorted(r.read_outcomes.items()))
        p.append(
            f"<tr><td><code>{_short(r.ref)}</code></td><td>{_e(r.tool or '-')}</td>"
            f"<td class='n'>{r.reads:,}</td><td class='n'>{_human(r.read_bytes)}</td>"
            f"<td>{outcomes}</td><td>{_cmd(f'cargohold read {r.ref} --lines 1:40')}</td></tr>"
        )
    p.append("</table></section>")
    p.append(
        '<section id="stops"><h2>Refusals, guard stops and compactions</h2>'
        '<table><tr><th>operation</th><th>outcome</th><th>reason</th><th class="n">count</th>'
        '<th class="n">bytes</th><th class="n">cleared</th><th class="n">tokens saved</th></tr>'
    )
    for s in report.stops:
        p.append(
            f"<tr><td>{_e(s.operation)}</td><td>{_e(s.outcome)}</td><td>{_e(s.reason)}</td>"
            f"<td class='n'>{s.count:,}</td><td class='n'>{_human(s.observed_bytes)}</td>"
            f"<td class='n'>{s.cleared:,}</td><td class='n'>{s.tokens_saved:,}</td></tr>"
        )
    if not report.stops:
        p.append('<tr><td colspan="7" class="muted">none</td></tr>')
    p.append(f"</table><p>{_cmd('cargohold events --json')}</p></section>")
    biggest = max((a.size for a in report.largest), default=1)
    p.append(
        '<section id="artifacts"><h2>The largest artifacts</h2>'
        '<table><tr><th>artifact</th><th>tool</th><th>kind</th><th class="n">size</th>'
        '<th class="n">stub</th><th></th><th>command</th></tr>'
    )
    for a in report.largest:
        p.append(
            f"<tr><td><code>{_short(a.ref)}</code></td><td>{_e(a.tool or '-')}</td>"
            f"<td>{_e(_kind_of(a))}</td><td class='n'>{_human(a.size)}</td>"
            f"<td class='n'>{_human(a.stub_bytes)}</td><td>{_bar(a.size, biggest, width=120)}"
            f"</td><td>{_cmd(f'cargohold show {a.ref}')}</td></tr>"
        )
    p.append("</table></section>")
    p.append(
        '<p id="cmd" class="muted">Each command above shows the figure it stands by: run it in '
        "the same store and session (name them as you did for the run).</p></body></html>"
    )
    return "\n".join(p)


# -- terminal ---------------------------------------------------------------------------------


def render_terminal(report: RunReport, console: Console) -> None:
    """The same sections in a terminal: rich tables, bars of block characters."""
    from rich.markup import escape
    from rich.table import Table

    def bar(part: int, whole: int, width: int = 24) -> str:
        filled = round(width * min(part, max(whole, 1)) / max(whole, 1))
        return "█" * filled + "·" * (width - filled)

    console.rule("cargohold run report")
    console.print(
        f"{report.events:,} decision events: tools returned {_human(report.observed_bytes)} "
        f"(about {report.observed_tokens:,} tokens); {_human(report.context_bytes)} entered the "
        f"context, {_human(report.kept_out_bytes)} kept out; "
        f"{_human(report.read_back_bytes)} read back on purpose."
        + (f" ({report.skipped:,} lines skipped: not events)" if report.skipped else "")
    )
    if report.run_filtered:
        console.print(f"These are the events{_left_out(report)}.")
    req = report.requests
    if req.requests:
        requests = Table(title="gateway requests: what each kept out")
        for name in ("requests", "forwarded", "kept out per request", "the most from one"):
            requests.add_column(name, justify="right")
        requests.add_column("kept out in all", justify="right")
        requests.add_row(
            f"{req.requests:,}",
            f"{req.forwarded:,}",
            f"{_human(req.kept_out_bytes_per_request)} (~{req.kept_out_tokens_per_request:,} tok)",
            f"{_human(req.largest_kept_out_bytes)} (~{req.largest_kept_out_tokens:,} tok)",
            f"{_human(req.kept_out_bytes)} (~{req.kept_out_tokens:,} tok)",
        )
        console.print(requests)
        console.print(escape(html.unescape(_request_counts(report))))
    tools = Table(title="bytes per tool (█ returned, against the largest)")
    for name in ("tool", "results", "returned", "entered", "", "offloaded", "inline", "refused"):
        tools.add_column(name, justify="left" if name in ("tool", "") else "right")
    whole = max((t.observed_bytes for t in report.tools), default=1)
    for t in report.tools:
        tools.add_row(
            escape(t.tool),
            f"{t.results:,}",
            _human(t.observed_bytes),
            _human(t.context_bytes),
            bar(t.observed_bytes, whole),
            f"{t.offloaded:,}",
            f"{t.inline:,}",
            f"{t.refused:,}",
        )
    if report.tools_left_off:
        tools.add_row(f"... {report.tools_left_off:,} more", "", "", "", "", "", "", "")
    console.print(tools)
    agents = Table(title=f"agents (depth up to {report.max_depth})")
    for name in ("agent", "decisions", "sequence", "operations"):
        agents.add_column(name, justify="right" if name == "decisions" else "left")
    for agent in report.agents[:40]:
        ops = ", ".join(f"{k} {v:,}" for k, v in sorted(agent.by_operation.items()))
        agents.add_row(
            escape("  " * min(agent.depth, 8) + agent.agent_id),
            f"{agent.decisions:,}",
            f"{agent.first_sequence:,}-{agent.last_sequence:,}",
            escape(ops),
        )
    left = len(report.agents) - 40 + report.agents_left_off
    if left > 0:
        agents.add_row(f"... {left:,} more", "", "", "")
    console.print(agents)
    reads = Table(title="read-backs")
    for name in ("artifact", "tool", "reads", "bytes read", "outcomes", "command"):
        reads.add_column(name, justify="right" if name in ("reads", "bytes read") else "left")
    for r in report.read_backs[:10]:
        reads.add_row(
            _short(r.ref),
            escape(r.tool or "-"),
            f"{r.reads:,}",
            _human(r.read_bytes),
            ", ".join(f"{k} {v:,}" for k, v in sorted(r.read_outcomes.items())),
            f"cargohold read {r.ref} --lines 1:40",
        )
    console.print(reads)
    stops = Table(title="refusals, guard stops and compactions")
    for name in ("operation", "outcome", "reason", "count", "cleared", "tokens saved"):
        stops.add_column(name, justify="right" if name in ("count", "cleared") else "left")
    for s in report.stops:
        stops.add_row(
            s.operation,
            s.outcome,
            s.reason,
            f"{s.count:,}",
            f"{s.cleared:,}",
            f"{s.tokens_saved:,}",
        )
    console.print(stops)
    largest = Table(title="largest artifacts")
    for name in ("artifact", "tool", "kind", "size", "stub", "command"):
        largest.add_column(name, justify="right" if name in ("size", "stub") else "left")
    for a in report.largest[:10]:
        largest.add_row(
            _short(a.ref),
            escape(a.tool or "-"),
            escape(_kind_of(a)),
            _human(a.size),
            _human(a.stub_bytes),
            f"cargohold show {a.ref}",
        )
    console.print(largest)
