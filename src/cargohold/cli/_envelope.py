"""``cargohold envelope``: build a role packet from an authority file, check one for freshness.

Exit statuses beyond the common table (:mod:`cargohold.cli._exit`): 11 ``context-stale``, 12
``context-insufficient``. A packet that cannot fit its budget exits 7, like any answer over
budget.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from cargohold._records import PutResult
from cargohold.cli._context import App, get_app
from cargohold.cli._exit import ExitCode

if TYPE_CHECKING:
    from cargohold.envelopes import BindingChange, Missing

# The library is imported when a command runs, not when the CLI starts (tens of milliseconds);
# these mirror its constants, and a test holds them equal.
ROLES = ("planner", "worker", "reviewer", "coordinator")
DEFAULT_BUDGET = 16 * 1024
DEFAULT_FACT_LIMIT = 2 * 1024
MIN_BUDGET = 1024
MAX_BUDGET = 1024 * 1024
MIN_FACT_LIMIT = 128
MAX_PACKET_BYTES = 4 * MAX_BUDGET

CONTEXT_STALE_EXIT = int(ExitCode.CONTEXT_STALE)
CONTEXT_INSUFFICIENT_EXIT = int(ExitCode.CONTEXT_INSUFFICIENT)

OUTCOME_EXIT: dict[str, int] = {
    "ready": int(ExitCode.OK),
    "context-stale": CONTEXT_STALE_EXIT,
    "context-insufficient": CONTEXT_INSUFFICIENT_EXIT,
    "over-budget": int(ExitCode.OVER_BUDGET),
}
"""Envelope outcome code -> exit status."""

EXIT_HELP = """\b
Exit status:
  0   ready: the packet was built / still holds
  2   usage: bad arguments, an invalid authority file or packet
  7   over budget: the packet cannot fit --budget (or needs a store for a large fact)
  11  context-stale: a binding the packet rests on changed; discard it and rebuild
  12  context-insufficient: the authority lacks a fact the role requires"""


class _AppStore:
    """The command's store, opened only if a large fact must travel as a reference."""

    __slots__ = ("_app",)

    def __init__(self, app: App) -> None:
        self._app = app

    def put(
        self,
        data: bytes,
        *,
        media_type: str | None = None,
        kind: str | None = None,
        tool: str | None = None,
    ) -> PutResult:
        return self._app.scoped.put(data, media_type=media_type, kind=kind, tool=tool)


def _missing_line(missing: Missing) -> str:
    item = f" ({missing.item})" if missing.item is not None else ""
    return f"  missing   {missing.fact}: {missing.record} {missing.field}{item}"


def _change_line(change: BindingChange) -> str:
    if change.before is None:
        return f"  added     {change.record} {change.field} = {change.after}"
    if change.after is None:
        return f"  removed   {change.record} {change.field} (was {change.before})"
    return f"  changed   {change.record} {change.field}: {change.before} -> {change.after}"


@click.group(epilog=EXIT_HELP)
def envelope() -> None:
    """Role packets for planner, worker, reviewer and coordinator: fresh, or refused.

    A packet is a derived, disposable projection of an authority file (JSON or TOML; see
    docs/envelopes.md): only the facts the role needs, each naming its source record and
    field, and the revisions and hashes those facts rest on. The same authority, role and task
    always give the same bytes.

    \b
    Examples:
      cargohold envelope build --authority workflow.toml --role planner --task T2 > p.json
      cargohold envelope check p.json --authority workflow.toml
    """


@envelope.command(epilog=EXIT_HELP)
@click.option(
    "--authority",
    "authority_file",
    required=True,
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="The authority file (.json or .toml).",
)
@click.option(
    "--role",
    required=True,
    type=click.Choice(ROLES),
    help="Who the packet is for.",
)
@click.option("--task", "task", metavar="ID", help="The subject task.")
@click.option(
    "--milestone",
    metavar="ID",
    help="The subject milestone of a coordinator packet (or give --task: its milestone).",
)
@click.option(
    "--budget",
    type=click.IntRange(MIN_BUDGET, MAX_BUDGET),
    default=DEFAULT_BUDGET,
    show_default=True,
    metavar="BYTES",
    help="Most bytes the packet may hold.",
)
@click.option(
    "--fact-limit",
    type=click.IntRange(MIN_FACT_LIMIT, MAX_BUDGET),
    default=DEFAULT_FACT_LIMIT,
    show_default=True,
    metavar="BYTES",
    help="A longer text travels as an artifact:// reference in the store.",
)
@click.option(
    "--no-store",
    is_flag=True,
    help="Never write to the store: a packet that needs a reference is refused (exit 7).",
)
def build(
    authority_file: str,
    role: str,
    task: str | None,
    milestone: str | None,
    budget: int,
    fact_limit: int,
    no_store: bool,
) -> None:
    """Print the ROLE packet for a task, as canonical JSON on one line.

    A required fact the authority lacks prints what is missing on stderr and exits 12; no
    packet is printed. Large facts are stored in the current scope and travel as references.

    \b
    Examples:
      cargohold envelope build --authority workflow.toml --role worker --task T2
      cargohold envelope build --authority workflow.toml --role coordinator --milestone M1
    """
    if (task is None) == (milestone is None) or (milestone is not None and role != "coordinator"):
        raise click.UsageError(
            "give --task, or --milestone for a coordinator packet (exactly one of the two)"
        )
    from cargohold.envelopes import Outcome, Role, build_envelope, load_authority

    authority = load_authority(authority_file)
    store = None if no_store else _AppStore(get_app())
    result = build_envelope(
        authority,
        Role(role),
        task=task,
        milestone=milestone,
        budget=budget,
        fact_limit=fact_limit,
        store=store,
    )
    if result.envelope is not None:
        sys.stdout.flush()
        sys.stdout.buffer.write(result.envelope.data + b"\n")
        sys.stdout.buffer.flush()
        return
    if result.outcome is Outcome.CONTEXT_INSUFFICIENT:
        click.echo(
            "cargohold: context-insufficient: the authority lacks facts this role requires; "
            "no packet was built",
            err=True,
        )
        for missing in result.missing:
            click.echo(_missing_line(missing), err=True)
    elif result.reason == "needs_store":
        click.echo(
            "cargohold: over-budget: a fact must travel as an artifact:// reference, and "
            "--no-store forbids writing it",
            err=True,
        )
    else:
        click.echo(
            f"cargohold: over-budget: the packet needs {result.size:,} bytes even with "
            f"references, over the {budget:,}-byte budget",
            err=True,
        )
    raise click.exceptions.Exit(OUTCOME_EXIT[result.outcome.value])


@envelope.command()
@click.argument("packet", metavar="PACKET|-", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--authority",
    "authority_file",
    required=True,
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="The current authority file (.json or .toml).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def check(packet: str, authority_file: str, as_json: bool) -> None:
    """Check PACKET (or stdin, with -) against the current authority; exit 0, 11 or 12.

    Ready only when the packet is exactly what the current authority gives. A stale packet is
    never repaired: discard it and build a new one.

    \b
    Examples:
      cargohold envelope check planner.json --authority workflow.toml
      cargohold envelope build ... | cargohold envelope check - --authority workflow.toml --json
    """
    from cargohold.envelopes import EnvelopeError, Outcome, check_envelope, load_authority

    try:
        with click.open_file(packet, "rb") as handle:
            data = handle.read(MAX_PACKET_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        click.echo(
            f"cargohold: error: cannot read {click.format_filename(packet)}: {reason}", err=True
        )
        raise click.exceptions.Exit(int(ExitCode.USAGE)) from None
    if len(data) > MAX_PACKET_BYTES:
        raise EnvelopeError(f"a packet document is at most {MAX_PACKET_BYTES} bytes")
    result = check_envelope(data, load_authority(authority_file))
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2, ensure_ascii=False))
    elif result.outcome is Outcome.READY:
        click.echo(f"ready: packet {result.digest} holds against the current authority")
    elif result.outcome is Outcome.CONTEXT_STALE:
        click.echo("context-stale: the packet no longer holds; discard it and rebuild it")
        for change in result.changed:
            click.echo(_change_line(change))
        for name in result.conflicts:
            click.echo(f"  conflict  {name}: changed while its bindings did not")
    else:
        click.echo("context-insufficient: the authority lacks facts this role requires")
        for missing in result.missing:
            click.echo(_missing_line(missing))
    raise click.exceptions.Exit(OUTCOME_EXIT[result.outcome.value])
