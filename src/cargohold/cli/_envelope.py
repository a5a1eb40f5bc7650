"""``cargohold envelope``: build role packets from an authority, check them, ask them, load them.

Exit statuses beyond the common table (:mod:`cargohold.cli._exit`): 11 ``context-stale``, 12
``context-insufficient``, 13 ``context-conflict``. A packet that cannot fit its budget exits 7,
like any answer over budget. A batch (``build-all``, ``check-all``) exits with the status of
its most severe outcome: conflict, then insufficient, then over budget, then stale.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cargohold._errors import UsageError
from cargohold._records import PutResult, ReadOutcome
from cargohold.cli._context import App, get_app
from cargohold.cli._exit import OUTCOME_EXIT as READ_EXIT
from cargohold.cli._exit import ExitCode
from cargohold.cli._output import json_text, write_bytes

if TYPE_CHECKING:
    from cargohold.envelopes import (
        Authority,
        AuthoritySource,
        BindingChange,
        BoundaryConflict,
        BuildResult,
        CheckResult,
        Envelope,
        Missing,
    )

# The library is imported when a command runs, not when the CLI starts (tens of milliseconds);
# these mirror its constants, and a test holds them equal.
ROLES = ("planner", "worker", "reviewer", "coordinator")
DECISIONS = ("plan_task", "execute_step", "review_plan", "review_submission", "schedule_milestone")
DEFAULT_BUDGET = 16 * 1024
DEFAULT_FACT_LIMIT = 2 * 1024
MIN_BUDGET = 1024
MAX_BUDGET = 1024 * 1024
MIN_FACT_LIMIT = 128
MAX_PACKET_BYTES = 4 * MAX_BUDGET
MAX_AUTHORITY_BYTES = 16 * 1024 * 1024

CONTEXT_STALE_EXIT = int(ExitCode.CONTEXT_STALE)
CONTEXT_INSUFFICIENT_EXIT = int(ExitCode.CONTEXT_INSUFFICIENT)
CONTEXT_CONFLICT_EXIT = int(ExitCode.CONTEXT_CONFLICT)

OUTCOME_EXIT: dict[str, int] = {
    "ready": int(ExitCode.OK),
    "context-stale": CONTEXT_STALE_EXIT,
    "context-insufficient": CONTEXT_INSUFFICIENT_EXIT,
    "context-conflict": CONTEXT_CONFLICT_EXIT,
    "over-budget": int(ExitCode.OVER_BUDGET),
}
"""Envelope outcome code -> exit status."""

EXIT_HELP = """\b
Exit status:
  0   ready: the packet was built / still holds (a batch: every packet)
  2   usage: bad arguments, an invalid authority or packet
  7   over budget: the packet cannot fit --budget (or needs a store for a long text)
  11  context-stale: a binding the packet rests on changed; discard it and rebuild
  12  context-insufficient: the authority lacks a fact the role requires
  13  context-conflict: the authority contradicts itself about a path the packet rests on"""

_TOO_DEEP = (
    "arrays or objects nest hundreds of levels deep, past what the parser reads "
    "(a real one nests a few levels)"
)

_AUTHORITY_HELP = "The authority file (.json or .toml), or - for standard input."
_SOURCE_HELP = (
    "Instead of --authority: MODULE:NAME of an AuthoritySource (an object with load()), or of "
    "a callable returning one, e.g. a workflow engine's adapter (MODULE must be importable: "
    "installed, or on PYTHONPATH)."
)


class _AppStore:
    """The command's store, opened only if something must be stored."""

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


def _read_limited(name: str, limit: int, what: str) -> bytes:
    try:
        with click.open_file(name, "rb") as handle:
            data: bytes = handle.read(limit + 1)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        click.echo(
            f"cargohold: error: cannot read {click.format_filename(name)}: {reason}", err=True
        )
        raise click.exceptions.Exit(int(ExitCode.USAGE)) from None
    if len(data) > limit:
        raise UsageError(f"{what} is at most {limit} bytes")
    return data


def _source(spec: str) -> AuthoritySource:
    from cargohold.envelopes import AuthoritySource

    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise UsageError("--source is MODULE:NAME")
    try:
        found: Any = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError):
        raise UsageError("--source names no importable MODULE:NAME") from None
    # A class has a load attribute too: it is a factory, like any callable that is no source.
    if isinstance(found, type) or (not isinstance(found, AuthoritySource) and callable(found)):
        try:
            found = found()
        except TypeError:
            raise UsageError("--source names a callable that takes arguments") from None
    if not isinstance(found, AuthoritySource):
        raise UsageError("--source is not an AuthoritySource (an object with load())")
    return found


def _authority(authority_file: str | None, source: str | None) -> Authority:
    """The authority named by ``--authority`` (a file or ``-``) or ``--source``."""
    from cargohold.envelopes import decode_authority, load_authority

    if (authority_file is None) == (source is None):
        raise click.UsageError("give --authority FILE|- or --source MODULE:NAME (one of the two)")
    if source is not None:
        return _source(source).load()
    assert authority_file is not None
    try:
        if authority_file == "-":
            return decode_authority(_read_limited("-", MAX_AUTHORITY_BYTES, "an authority"))
        return load_authority(authority_file)
    except RecursionError:  # the parser's own recursion, at a depth no authority has
        raise UsageError(f"invalid authority: {_TOO_DEEP}") from None


def _authority_options(function: Any) -> Any:
    function = click.option("--source", metavar="MODULE:NAME", help=_SOURCE_HELP)(function)
    return click.option(
        "--authority",
        "authority_file",
        metavar="FILE|-",
        type=click.Path(dir_okay=False, allow_dash=True),
        help=_AUTHORITY_HELP,
    )(function)


def _emit_json(value: Any) -> None:
    click.echo(json_text(value))  # C1 controls escaped: facts are an authority's text


def _missing_line(missing: Missing) -> str:
    item = f" ({missing.item})" if missing.item is not None else ""
    return f"  missing   {missing.fact}: {missing.record} {missing.field}{item}"


def _conflict_line(conflict: BoundaryConflict) -> str:
    return (
        f"  conflict  {conflict.reason.value}: {conflict.record} {conflict.field} "
        f"({conflict.item}) vs {conflict.other}, decided by {conflict.decided_by}"
    )


def _change_line(change: BindingChange) -> str:
    if change.before is None:
        return f"  added     {change.record} {change.field} = {change.after}"
    if change.after is None:
        return f"  removed   {change.record} {change.field} (was {change.before})"
    return f"  changed   {change.record} {change.field}: {change.before} -> {change.after}"


def _subject_text(subject: Any) -> str:
    return " ".join(f"{key} {value}" for key, value in sorted(dict(subject).items()))


@click.group(epilog=EXIT_HELP)
def envelope() -> None:
    """Role packets for planner, worker, reviewer and coordinator: fresh, or refused.

    A packet is a derived, disposable projection of an authority (JSON or TOML; see
    docs/envelopes.md): only the facts the role's decision needs, each naming its source
    record and field, and the revisions and hashes those facts rest on. The same authority,
    role and task always give the same bytes.

    \b
    Examples:
      cargohold envelope build --authority workflow.toml --role planner --task T2 > p.json
      cargohold envelope check p.json --authority workflow.toml
      cargohold envelope ownership src/api/x.py --packet p.json
      cargohold --session worker-7 envelope load p.json
    """


def _build_options(function: Any) -> Any:
    for option in reversed(
        [
            click.option(
                "--budget",
                type=click.IntRange(MIN_BUDGET, MAX_BUDGET),
                default=DEFAULT_BUDGET,
                show_default=True,
                metavar="BYTES",
                help="Most bytes a packet may hold.",
            ),
            click.option(
                "--fact-limit",
                type=click.IntRange(MIN_FACT_LIMIT, MAX_BUDGET),
                default=DEFAULT_FACT_LIMIT,
                show_default=True,
                metavar="BYTES",
                help="A longer text travels as an artifact:// reference in the store.",
            ),
            click.option(
                "--no-store",
                is_flag=True,
                help="Never write to the store: a packet that needs a reference is refused "
                "(exit 7), and the detail behind a digest is not stored.",
            ),
            click.option("--json", "as_json", is_flag=True, help="Print one JSON object."),
        ]
    ):
        function = option(function)
    return _authority_options(function)


def _report_build(result: BuildResult, budget: int) -> None:
    from cargohold.envelopes import Outcome

    if result.outcome is Outcome.CONTEXT_INSUFFICIENT:
        click.echo(
            "cargohold: context-insufficient: the authority lacks facts this role requires; "
            "no packet was built",
            err=True,
        )
        for missing in result.missing:
            click.echo(_missing_line(missing), err=True)
    elif result.outcome is Outcome.CONTEXT_CONFLICT:
        click.echo(
            "cargohold: context-conflict: the authority contradicts itself about a path this "
            "decision rests on; no packet was built",
            err=True,
        )
        for conflict in result.conflicts:
            click.echo(_conflict_line(conflict), err=True)
    elif result.reason == "needs_store":
        click.echo(
            "cargohold: over-budget: a text must travel as an artifact:// reference, and "
            "--no-store forbids writing it",
            err=True,
        )
    else:
        click.echo(
            f"cargohold: over-budget: the packet needs {result.size:,} bytes even with "
            f"references, over the {budget:,}-byte budget",
            err=True,
        )


@envelope.command(epilog=EXIT_HELP)
@_build_options
@click.option("--role", required=True, type=click.Choice(ROLES), help="Who the packet is for.")
@click.option("--task", "task", metavar="ID", help="The subject task.")
@click.option(
    "--milestone",
    metavar="ID",
    help="The subject milestone of a coordinator packet (or give --task: its milestone).",
)
@click.option(
    "--decision",
    type=click.Choice(DECISIONS),
    help="The decision the packet authorizes (default: the role's own; a reviewer reviews "
    "the plan of a task not started yet, else its submission).",
)
def build(
    authority_file: str | None,
    source: str | None,
    role: str,
    task: str | None,
    milestone: str | None,
    decision: str | None,
    budget: int,
    fact_limit: int,
    no_store: bool,
    as_json: bool,
) -> None:
    """Print the ROLE packet for a task, as canonical JSON on one line.

    A required fact the authority lacks prints what is missing on stderr and exits 12; two
    boundaries that contradict each other exit 13; no packet is printed. Long texts, and the
    detail behind each digest, are stored in the current scope: build in the session of the
    agent that will read them (--session).

    \b
    Examples:
      cargohold envelope build --authority workflow.toml --role worker --task T2
      cargohold envelope build --authority - --role coordinator --milestone M1 --json < state.json
    """
    if (task is None) == (milestone is None) or (milestone is not None and role != "coordinator"):
        raise click.UsageError(
            "give --task, or --milestone for a coordinator packet (exactly one of the two)"
        )
    from cargohold.envelopes import Role, build_envelope

    authority = _authority(authority_file, source)
    store = None if no_store else _AppStore(get_app())
    result = build_envelope(
        authority,
        Role(role),
        task=task,
        milestone=milestone,
        decision=decision,
        budget=budget,
        fact_limit=fact_limit,
        store=store,
    )
    if as_json:
        _emit_json(result.as_dict())
    elif result.envelope is not None:
        write_bytes(result.envelope.data + b"\n")  # exact into a pipe, escaped on a terminal
    else:
        _report_build(result, budget)
    raise click.exceptions.Exit(OUTCOME_EXIT[result.outcome.value])


@envelope.command("build-all", epilog=EXIT_HELP)
@_build_options
@click.option("--milestone", required=True, metavar="ID", help="The milestone.")
@click.option(
    "--role",
    "roles",
    multiple=True,
    type=click.Choice(ROLES),
    help="Build only these roles' packets (repeatable; all four by default).",
)
@click.option(
    "--out",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Write each ready packet to DIR/ROLE-ID.json (else --json embeds the packets).",
)
def build_all(
    authority_file: str | None,
    source: str | None,
    milestone: str,
    roles: tuple[str, ...],
    out: str | None,
    budget: int,
    fact_limit: int,
    no_store: bool,
    as_json: bool,
) -> None:
    """Build every packet of a milestone in one call: the coordinator's, and each member's
    planner, worker and reviewer packets (each for its role's default decision).

    Prints one line per packet (--json: one object listing them, with the missing facts and
    conflicts of each); exits 0 when every packet is ready, else with the status of the most
    severe outcome.

    \b
    Examples:
      cargohold envelope build-all --authority workflow.json --milestone M1 --out packets/
      cargohold envelope build-all --authority workflow.json --milestone M1 --role worker --json
    """
    from cargohold.envelopes import Outcome, build_milestone
    from cargohold.envelopes._envelope import worst

    authority = _authority(authority_file, source)
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
    store = None if no_store else _AppStore(get_app())
    results = build_milestone(
        authority,
        milestone,
        roles=roles or None,
        budget=budget,
        fact_limit=fact_limit,
        store=store,
    )
    reports = []
    for result in results:
        report = result.as_dict()
        subject_id = next(iter(result.subject.values()))
        if out is not None:
            if result.envelope is not None:
                target = Path(out) / f"{result.role.value}-{subject_id}.json"
                target.write_bytes(result.envelope.data + b"\n")
                report["file"] = str(target)
            del report["packet"]
        reports.append(report)
    outcome = worst(r.outcome for r in results)
    if as_json:
        _emit_json({"outcome": outcome.value, "milestone": milestone, "packets": reports})
    else:
        for result, report in zip(results, reports, strict=True):
            where = f"  {report['file']}" if "file" in report else ""
            click.echo(
                f"{result.outcome.value:<21} {result.role.value:<11} "
                f"{_subject_text(result.subject):<16} {result.decision.value}{where}"
            )
            if result.outcome is Outcome.CONTEXT_INSUFFICIENT:
                for missing in result.missing:
                    click.echo(_missing_line(missing))
            for conflict in result.conflicts:
                click.echo(_conflict_line(conflict))
    raise click.exceptions.Exit(OUTCOME_EXIT[outcome.value])


def _report_check(result: CheckResult) -> None:
    from cargohold.envelopes import Outcome

    if result.outcome is Outcome.READY:
        click.echo(f"ready: packet {result.digest} holds against the current authority")
    elif result.outcome is Outcome.CONTEXT_STALE:
        click.echo("context-stale: the packet no longer holds; discard it and rebuild it")
        for change in result.changed:
            click.echo(_change_line(change))
        for name in result.conflicts:
            click.echo(f"  conflict  {name}: changed while its bindings did not")
    elif result.outcome is Outcome.CONTEXT_CONFLICT:
        click.echo("context-conflict: the authority contradicts itself; fix the authority")
        for conflict in result.boundary_conflicts:
            click.echo(_conflict_line(conflict))
    else:
        click.echo("context-insufficient: the authority lacks facts this role requires")
        for missing in result.missing:
            click.echo(_missing_line(missing))


def _packet(name: str, authority_file: str | None) -> Envelope:
    from cargohold.envelopes import Envelope

    if name == "-" and authority_file == "-":
        raise click.UsageError("the packet and the authority cannot both come from stdin")
    data = _read_limited(name, MAX_PACKET_BYTES, "a packet document")
    try:
        return Envelope.parse(data)
    except RecursionError:  # the parser's own recursion, at a depth no packet has
        raise UsageError(f"not a packet document: {_TOO_DEEP}") from None


@envelope.command(epilog=EXIT_HELP)
@click.argument("packet", metavar="PACKET|-", type=click.Path(dir_okay=False, allow_dash=True))
@_authority_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def check(packet: str, authority_file: str | None, source: str | None, as_json: bool) -> None:
    """Check PACKET (or stdin, with -) against the current authority; exit 0, 11, 12 or 13.

    Ready only when the packet is exactly what the current authority gives. A stale packet is
    never repaired: discard it and build a new one.

    \b
    Examples:
      cargohold envelope check planner.json --authority workflow.toml
      cargohold envelope build ... | cargohold envelope check - --authority workflow.toml --json
      cargohold envelope check planner.json --source myengine.cargohold:authority
    """
    from cargohold.envelopes import check_envelope

    parsed = _packet(packet, authority_file)
    result = check_envelope(parsed, _authority(authority_file, source))
    if as_json:
        _emit_json(result.as_dict())
    else:
        _report_check(result)
    raise click.exceptions.Exit(OUTCOME_EXIT[result.outcome.value])


@envelope.command("check-all", epilog=EXIT_HELP)
@click.argument(
    "packets", nargs=-1, required=True, metavar="PACKET|DIR...", type=click.Path(exists=True)
)
@_authority_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def check_all(
    packets: tuple[str, ...], authority_file: str | None, source: str | None, as_json: bool
) -> None:
    """Check many packets (files, or every *.json in a directory) against one load of the
    authority; exits 0 when every one is ready, else with the most severe outcome's status.

    \b
    Examples:
      cargohold envelope check-all packets/ --authority workflow.json --json
    """
    from cargohold.envelopes import check_envelopes
    from cargohold.envelopes._envelope import worst

    files: list[Path] = []
    for name in packets:
        path = Path(name)
        files.extend(sorted(path.glob("*.json")) if path.is_dir() else [path])
    parsed = [_packet(str(path), None) for path in files]
    results = check_envelopes(parsed, _authority(authority_file, source))
    outcome = worst(r.outcome for r in results)
    if as_json:
        reports = [
            {"file": str(path), **result.as_dict()}
            for path, result in zip(files, results, strict=True)
        ]
        _emit_json({"outcome": outcome.value, "packets": reports})
    else:
        for path, result in zip(files, results, strict=True):
            click.echo(f"{result.outcome.value:<21} {click.format_filename(str(path))}")
            if not result.ready:
                _report_check(result)
    raise click.exceptions.Exit(OUTCOME_EXIT[outcome.value])


@envelope.command(epilog=EXIT_HELP)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option(
    "--packet",
    "packet",
    required=True,
    metavar="FILE|-",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="The packet to ask.",
)
@_authority_options
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def ownership(
    paths: tuple[str, ...],
    packet: str,
    authority_file: str | None,
    source: str | None,
    as_json: bool,
) -> None:
    """What the packet says about each repository PATH: owned, reserved, unresolved or
    not_represented. Only owned permits a write.

    With --authority or --source, the packet is checked first: a packet that is not ready
    answers nothing and exits 11, 12 or 13.

    \b
    Examples:
      cargohold envelope ownership src/api/export/csv.py docs/api --packet worker.json
      cargohold envelope ownership src/ui --packet planner.json --authority workflow.json --json
    """
    from cargohold.envelopes import check_envelope

    parsed = _packet(packet, authority_file)
    checked = None
    if authority_file is not None or source is not None:
        checked = check_envelope(parsed, _authority(authority_file, source))
    if checked is not None and not checked.ready:
        if as_json:
            _emit_json({"digest": parsed.digest, "check": checked.as_dict(), "answers": []})
        else:
            _report_check(checked)
        raise click.exceptions.Exit(OUTCOME_EXIT[checked.outcome.value])
    answers = [(path, parsed.ownership_of(path)) for path in paths]
    if as_json:
        _emit_json(
            {
                "digest": parsed.digest,
                "check": None if checked is None else checked.as_dict(),
                "answers": [{"path": p, "ownership": o.value} for p, o in answers],
            }
        )
    else:
        for path, answer in answers:
            click.echo(f"{answer.value:<16} {path}")


@envelope.command()
@click.argument("packet", metavar="PACKET|-", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--no-details", is_flag=True, help="Read only the long texts, not the detail of digests."
)
def load(packet: str, no_details: bool) -> None:
    """Print PACKET's facts with every artifact:// reference read from the store, and the
    detail behind each digest binding (the records a summary counts), as one JSON object.

    Reads happen in the current scope (--tenant/--user/--session): the agent the packet is for
    runs this in its own session, and the packet must have been built in that session. Exits
    0 when every reference was read, else with the status of the first that was not (3
    missing, 4 unauthorized, 5 stale, 6 expired, 7 over budget).

    \b
    Examples:
      cargohold --session worker-7 envelope load worker.json
    """
    from cargohold.envelopes import load_facts

    parsed = _packet(packet, None)
    loaded = load_facts(parsed, get_app().scoped, details=not no_details)
    _emit_json(loaded.as_dict())
    if loaded.failed:
        first = next(iter(loaded.failed.values()))
        raise click.exceptions.Exit(int(READ_EXIT[ReadOutcome(first)]))
