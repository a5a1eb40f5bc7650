"""``cargohold demo``: a scripted, offline agent run on the embedded store, in one screen.

The agent's tools return real heavy outputs (a generated batch-job log, the shipped orders sample);
the demo shows the stubs that entered the context instead, explicit verified reads of exact
slices, deduplication, a tampered blob reading as stale, and the run summary.

Each run works in a fresh session of its own (``demo-<8 hex>``), so every run tells the same
story: nothing a previous run stored is "already stored" in it.
"""

from __future__ import annotations

import os
import random
import secrets
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cargohold.cli._context import get_app
from cargohold.cli._exit import ExitCode
from cargohold.cli._render import program

if TYPE_CHECKING:
    from rich.console import Console

    from cargohold._events import DecisionEvent
    from cargohold._offload import OffloadResult
    from cargohold._rehydrate import RehydrateResult

SAMPLE = "orders.json"
"""The shipped sample: a tool's JSON answer listing 280 orders, one per line (about 55 KiB)."""

_TASK = "Why did last night's billing batch fail, and how many orders were refunded?"
_STUB_LINES_SHOWN = 10
_LINE_WIDTH = 110
"""Characters of a quoted stub or answer line the demo shows; a longer one is cut at a word."""
_PREFIX_SHOWN = 12
"""Hex digits of the log's reference in the command the demo suggests (a unique prefix)."""


def demo_session() -> str:
    """A fresh session name for one run of the demo."""
    return f"demo-{secrets.token_hex(4)}"


def sample_bytes() -> bytes:
    """The exact bytes of the orders sample shipped inside the package."""
    return resources.files("cargohold").joinpath("samples").joinpath(SAMPLE).read_bytes()


def batch_log() -> bytes:
    """A realistic billing-batch log (about 400 KB), the same bytes on every run.

    Mostly INFO progress, some WARN retries, a handful of ERRORs, and a fatal traceback at the end:
    the kind of output whose important part is not in its first lines.
    """
    rng = random.Random(20261129)  # noqa: S311 - fixed seed: the same log, byte for byte
    workers = [f"worker-{n}" for n in range(1, 9)]
    lines: list[str] = []
    second = 0
    for invoice in range(1, 3101):
        second += rng.randint(0, 3)
        stamp = f"2026-11-29T02:{(second // 60) % 60:02d}:{second % 60:02d}Z"
        worker = rng.choice(workers)
        amount = rng.randint(100, 90000) / 100
        roll = rng.random()
        if invoice in (1187, 1842, 2231, 2893):
            lines.append(
                f"{stamp} ERROR [{worker}] billing.charge invoice=INV-{invoice:06d} "
                f"amount={amount:.2f} gateway=stripe error=card_declined code=insufficient_funds"
            )
        elif roll < 0.03:
            lines.append(
                f"{stamp} WARN  [{worker}] billing.charge invoice=INV-{invoice:06d} "
                f"retry=1 reason=gateway_timeout after_ms={rng.randint(3000, 9000)}"
            )
        else:
            lines.append(
                f"{stamp} INFO  [{worker}] billing.charge invoice=INV-{invoice:06d} "
                f"amount={amount:.2f} currency=EUR status=charged latency_ms={rng.randint(40, 900)}"
            )
    lines += [
        "2026-11-29T03:12:44Z ERROR [scheduler] billing.batch aborted after 3100 invoices:"
        " ledger lock not acquired",
        "Traceback (most recent call last):",
        '  File "/srv/billing/batch.py", line 212, in run',
        "    ledger.commit(batch)",
        '  File "/srv/billing/ledger.py", line 88, in commit',
        "    with self.lock(timeout=30):",
        '  File "/srv/billing/locks.py", line 41, in lock',
        "    raise LockTimeout(name)",
        "billing.locks.LockTimeout: ledger-2026-11-29",
        "2026-11-29T03:12:44Z FATAL [scheduler] exit status 70",
    ]
    return ("\n".join(lines) + "\n").encode()


def clip(line: str, width: int = _LINE_WIDTH) -> str:
    """``line`` if it fits ``width`` characters, else cut at a word and ended with ``...``.

    A word is never cut in the middle unless it alone is longer than half the width (a
    reference, a base64 run): then the cut falls at the width.
    """
    if len(line) <= width:
        return line
    room = width - len("...")
    cut = line.rfind(" ", 0, room + 1)
    if cut < room // 2:
        cut = room
    return line[:cut].rstrip() + "..."


def _stub_excerpt(console: Console, text: str) -> None:
    from rich.markup import escape

    lines = text.splitlines()
    shown = lines[:_STUB_LINES_SHOWN]
    for line in shown:
        console.print(f"   [dim]│[/] {escape(clip(line))}", soft_wrap=True, highlight=False)
    hidden = len(lines) - len(shown) - 1
    console.print(f"   [dim]│ ... {hidden} more lines: the preview and the read tools[/]")
    console.print(f"   [dim]│[/] {escape(clip(lines[-1]))}", soft_wrap=True, highlight=False)


def _answer_excerpt(console: Console, result: RehydrateResult, lines: int) -> None:
    from rich.markup import escape

    content = (result.content or "").splitlines()
    for line in content[:lines] if lines > 0 else content[lines:]:
        console.print(f"   [dim]│[/] {escape(clip(line))}", soft_wrap=True, highlight=False)


def _write_report(path: Path, events: list[DecisionEvent]) -> Path | None:
    """Write the run report of ``events`` at ``path`` (0600, beside the events log); ``None``
    when it cannot be written (the demo's story does not depend on it)."""
    from cargohold.report import build_report, render_html

    page = render_html(build_report([event.as_dict() for event in events]))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(page)
    except OSError:
        return None
    return path


@click.command()
def demo() -> None:
    """Run a scripted agent on the embedded store and show what cargohold does, in one screen.

    An offline, scripted agent answers a question with three tools: two return heavy output
    (a 400 KB log, a 55 KB JSON list of orders), which is stored and replaced in its context by
    bounded stubs; one returns a small status, which stays inline. The agent (and a sub-agent)
    then reads exact, verified slices on purpose; a byte flipped on disk makes a read stale; the
    run summary says what stayed out of the context. Decision events go to the events log
    (`cargohold events`).

    \b
    Examples:
      cargohold demo
      cargohold --store memory:// demo
    """
    from rich.console import Console

    from cargohold._events import Reporter
    from cargohold._facade import ScopedStore
    from cargohold._offload import HEAVY_THRESHOLD, Offloader
    from cargohold._rehydrate import DEFAULT_READ_BUDGET, Rehydrator
    from cargohold._scope import Scope
    from cargohold._sinks import ListSink, RunSummary
    from cargohold._stub import Budget

    app = get_app()
    # soft_wrap: rich never breaks a line; the terminal wraps it, so a command stays pasteable.
    console = Console(highlight=False, soft_wrap=True)
    summary = RunSummary()
    settings = app.settings
    session = demo_session()
    scoped = ScopedStore(app.store, Scope(settings.tenant, settings.user, session))
    recorded = ListSink()  # this run's events, for its report
    agent = Reporter([app.events_sink, summary, recorded], agent_id="demo-agent").for_scope(
        app.store.marker_key, scoped.scope
    )
    # The story's own settings, whatever the configuration says: the same story on every run.
    offloader = Offloader(
        scoped,
        threshold=HEAVY_THRESHOLD,
        tool_thresholds={},
        budget=Budget.LIGHT,
        reporter=agent,
        secrets_policy={},
    )
    reader = Rehydrator(scoped, reporter=agent, default_budget=DEFAULT_READ_BUDGET)
    analyst = Rehydrator(
        scoped, reporter=agent.child("log-analyst"), default_budget=DEFAULT_READ_BUDGET
    )
    where = "the embedded local store" if app.default_store else "the store you named"

    console.rule("[bold]cargohold demo[/]: a scripted agent run, offline")
    console.print(
        f"Store: {where}, in a fresh session of yours, [bold]{session}[/] (one per run).\n"
        "Heavy threshold 32 KiB; stubs within 4 KiB (light).\n"
        f'Task: [italic]"{_TASK}"[/]\n'
    )

    def tool_call(step: int, name: str, value: object, media_type: str) -> OffloadResult:
        result = offloader.offload(value, tool=name, media_type=media_type)
        event = result.event
        head = f"[bold]{step}[/] tool [cyan]{name}[/] returned {event.observed_bytes:,} bytes"
        if result.stub is not None:
            again = (
                " (already stored: same ref, no second write)"
                if result.ref and (result.outcome.value == "existing_reference")
                else ""
            )
            console.print(
                f"{head} → [green]{result.outcome.value}[/]{again}; "
                f"{event.context_bytes:,}-byte stub in context instead:"
            )
            _stub_excerpt(console, result.stub.text)
        else:
            console.print(f"{head} → [green]{result.outcome.value}[/]: small, kept as it is")
        return result

    log = tool_call(1, "fetch_logs", batch_log(), "text/plain")
    orders = tool_call(2, "list_orders", sample_bytes().decode(), "application/json")
    tool_call(3, "batch_status", {"job": "billing", "state": "failed", "exit": 70}, "")
    if log.ref is None or orders.ref is None:
        console.print("[red]the store refused the demo's results; see `cargohold du`[/]")
        raise click.exceptions.Exit(int(ExitCode.ERROR))

    found = analyst.grep(log.ref, r"ERROR|FATAL", max_matches=3)
    console.print(
        f'[bold]4[/] sub-agent [cyan]log-analyst[/] calls artifact_grep(log, "ERROR|FATAL") → '
        f"[green]{found.outcome.value}[/], verified, {found.answer_bytes:,} bytes:"
    )
    _answer_excerpt(console, found, 4)

    expression = "length([?status=='refunded'])"
    refunded = reader.query(orders.ref, expression)
    console.print(
        f'[bold]5[/] agent calls artifact_query(orders, "{expression}") → '
        f"[green]{refunded.outcome.value}[/]: [bold]{refunded.content}[/] refunded orders"
    )
    tail = reader.read_lines(log.ref, 3102, 3110)
    console.print(
        f"[bold]6[/] agent calls artifact_read_lines(log, 3102, 3110) → "
        f"[green]{tail.outcome.value}[/]: {tail.span}, the traceback's last lines:"
    )
    _answer_excerpt(console, tail, -2)

    dup = offloader.offload(
        sample_bytes().decode(), tool="list_orders", media_type="application/json"
    )
    console.print(
        f"[bold]7[/] tool [cyan]list_orders[/] again, same bytes → [green]{dup.outcome.value}[/]: "
        "same reference, nothing written twice"
    )

    corrupt = getattr(app.store, "corrupt_for_tests", None)
    if corrupt is not None:
        corrupt(scoped.scope.tenant, log.ref, 1000)
        try:
            stale = reader.read_lines(log.ref, 1, 5)
        finally:
            corrupt(scoped.scope.tenant, log.ref, 1000)  # flip it back
        console.print(
            "[bold]8[/] a disk fault flips one stored byte of the log; artifact_read_lines(log, "
            f"1, 5) → [red]{stale.outcome.value}[/]: no bytes returned. (Byte restored.)"
        )

    from cargohold.cli._progress import ProgressBar

    with ProgressBar("verifying blobs") as bar:
        findings = app.store.verify(progress=bar)
    damage = [
        f for f in findings if f.kind not in ("orphan", "staging", "unindexed", "stray_index")
    ]
    if damage:
        kinds = ", ".join(sorted({finding.kind for finding in damage}))
        console.print(f"[red]verify found {len(damage)} problems ({kinds}); see cargohold verify")
    elif findings:
        console.print(
            f"[bold]9[/] cargohold verify: every blob re-hashed → [green]no damage[/] "
            f"({len(findings)} leftovers of interrupted writes, which gc removes)"
        )
    else:
        console.print(
            "[bold]9[/] cargohold verify: every blob re-hashed against its digest → [green]clean[/]"
        )
    console.rule("run summary")
    data = summary.as_dict()
    decisions = ", ".join(f"{k} {v}" for k, v in data["decisions"].items())
    console.print(f"decisions: {decisions}")
    console.print(
        f"kept out of context: [bold]{data['bytes_kept_out']:,} bytes[/] (about "
        f"{data['estimated_tokens_kept_out']:,} tokens) behind {data['context_bytes_instead']:,} "
        f"bytes of stubs; {data['recovered_bytes']:,} bytes read back on purpose."
    )
    console.print(
        f"Every decision is one event in the events log: [dim]{program()} events --tail 10[/]"
    )
    page = _write_report(app.events_path.parent / "demo-report.html", recorded.events)
    if page is not None:
        console.print(f"The run's report, a page that needs no network: [bold]{page}[/]")
        console.print(f"Its figures in the terminal: [dim]{program()} report[/]")
    if not (settings.store or "").startswith("memory:"):  # a memory store is gone at exit
        command = f"{program()} --session {session} grep {log.ref.digest[:_PREFIX_SHOWN]} WARN"
        same_store = "" if app.default_store else " (name the same store)"
        console.print(f"Read more yourself{same_store}: [dim]{command}[/]")
    if findings:
        raise click.exceptions.Exit(int(ExitCode.ERROR))
