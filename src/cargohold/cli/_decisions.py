"""The decision commands: ``offload``, ``read``, ``grep``, ``query`` and ``events``.

Each one is exactly one offload or rehydrate decision, reported as one event to the JSON-lines
events log (``events_log`` in the configuration; by default ``events.jsonl`` in the user's state
directory), which ``cargohold events`` shows.
"""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from cargohold._config import MAX_THRESHOLD
from cargohold._errors import LimitExceededError, UsageError
from cargohold._records import MAX_READ_BYTES, Limits, ReadOutcome
from cargohold.cli._context import get_app
from cargohold.cli._exit import REHYDRATE_EXIT, ExitCode
from cargohold.cli._output import escape_controls, json_text, write_bytes, write_text
from cargohold.cli._progress import Busy
from cargohold.cli._render import (
    fitting_media_type,
    guess_media_type,
    human_bytes,
    outcome_message,
    program,
)

if TYPE_CHECKING:
    from cargohold._offload import OffloadResult
    from cargohold._rehydrate import RehydrateResult

_BUDGETS = ["light", "balanced", "strong", "max"]
"""cargohold.Budget's labels, spelled out so --help need not import the decision modules."""
_OFFLOAD_EXIT = {"rejected": ExitCode.REJECTED, "failed": ExitCode.ERROR}
"""Offload outcomes that end the command with an error; every other outcome is success."""


def _echo_json(value: object) -> None:
    click.echo(json_text(value))


_BUDGET_OPTION = click.option(
    "--budget",
    type=click.IntRange(1, MAX_READ_BYTES),
    metavar="BYTES",
    help="Most bytes the answer may hold (default: read_budget, 16 KiB; at most 1 MiB). A "
    "longer answer is refused with exit 7 and nothing is printed.",
)
_JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
_RAW_OPTION = click.option(
    "--raw", is_flag=True, help="Print only the answer, without the recovered-segment markers."
)


def _fits(result: RehydrateResult, lines: bool) -> list[str] | None:
    """The ``read`` options of the range the result says fits: for an over-budget read, a
    range past the end (the last part that fits), or a binary body (its first base64 page)."""
    if result.fit is None:
        return None
    first, second = result.fit
    if lines and result.outcome.value != "unsupported":  # (start_line, end_line), inclusive
        return ["--lines", f"{first}:{second}"]
    return ["--bytes", f"{first}:{first + second}"]  # (offset, length)


def _refusal_line(result: RehydrateResult, fits: list[str] | None, asked: str) -> str | None:
    """The stderr line of a read refused for what the body is: binary, or shorter than asked.

    ``None`` for any other outcome (the common messages of :func:`outcome_message` say it).
    """
    size = f"{result.size:,} bytes" if result.size is not None else "its bytes"
    if result.outcome.value == "unsupported":
        me = program()
        page = f", or `{me} read {result.ref} {' '.join(fits)}` (base64)" if fits else ""
        return (
            f"cargohold: error: {result.ref} is binary ({size}): it has no lines to show or "
            f"search (unsupported); read its bytes with `{me} cat {result.ref}` (exact){page}"
        )
    if result.outcome.value == "out_of_range":
        count = result.lines
        holds = f"{count:,} lines ({size})" if asked.startswith("--lines") and count else size
        if fits:
            last = f"the last part that fits: {' '.join(fits)}"
        elif result.size:
            last = "its last line alone is over --budget"
        else:
            last = "it is empty"
        return (
            f"cargohold: error: {asked} starts past the end (out_of_range): the artifact holds "
            f"{holds}; {last}"
        )
    return None


def _over_budget_line(result: RehydrateResult, fits: list[str] | None, remedy: str) -> str:
    if result.bound in ("steps", "depth", "time"):
        # The query's own work bound: the read tool's explanation, since a budget cannot help.
        from cargohold._tools import query_limit_text

        why = query_limit_text("query", result).removeprefix("query: over_budget: ")
        return f"cargohold: error: over budget ({result.reason.value}): {why}"
    would = "more than " if result.bound == "size" else ""  # stopped while it grew
    line = (
        f"cargohold: error: over budget ({would}{result.answer_bytes:,} bytes > budget "
        f"{result.budget:,}); "
    )
    if fits is not None:
        line += f"try {' '.join(fits)}, or "
    return line + f"{remedy}raise --budget (at most {MAX_READ_BYTES:,})"


def _finish_read(
    result: RehydrateResult,
    *,
    as_json: bool,
    raw: bool,
    fits: list[str] | None = None,
    remedy: str = "",
    asked: str = "",
) -> None:
    if as_json:
        _echo_json(
            {
                "outcome": result.outcome.value,
                "reason": result.reason.value,
                "ref": str(result.ref),
                "span": result.span,
                "size": result.size,
                "lines": result.lines,
                "answer_bytes": result.answer_bytes,
                "budget": result.budget,
                "fits": fits,
                "content": result.content,
                "segment": result.segment,
                "event": result.event.as_dict(),
            }
        )
    elif result.segment is not None and result.content is not None:
        if raw:  # the answer as it is: no second newline after one it already ends with
            write_text(result.content, nl=not result.content.endswith("\n"))
        else:
            write_text(result.segment)
    code = REHYDRATE_EXIT.get(result.outcome.value, ExitCode.ERROR)
    if result.outcome.value != "resolved":
        if not as_json:
            line = _refusal_line(result, fits, asked)
            if line is None and result.outcome.value == "over_budget":
                line = _over_budget_line(result, fits, remedy)
            elif line is None:
                try:
                    line = outcome_message(ReadOutcome(result.outcome.value), result.ref)
                except ValueError:  # an outcome newer than this table: its code, at least
                    line = f"cargohold: error: read of {result.ref} was {result.outcome.value}"
            click.echo(line, err=True)
        raise click.exceptions.Exit(int(code))


def _check_like_the_tools(what: str, text: str) -> None:
    """Refuse a bad ``pattern`` or ``expression`` with the read tools' own explanation.

    The tools say where RE2 or JMESPath stopped and how to fix it (escape a literal ``(``,
    quote strings with single quotes); a person at the command line deserves the same.

    Raises:
        UsageError: the text does not compile; the message is the tool's.
    """
    from cargohold._tools import ToolMistake, check_expression, check_pattern

    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes the shell passed that are not UTF-8 (surrogate-escaped)
        raise UsageError(f"{what} is not UTF-8 text; give it as UTF-8") from None
    check = check_pattern if what == "pattern" else check_expression
    try:
        check(text)
    except ToolMistake as exc:
        raise UsageError(str(exc)) from None


def _span(value: str | None, what: str) -> tuple[int, int | None] | None:
    if value is None:
        return None
    start_text, sep, end_text = value.partition(":")
    try:
        if not sep:
            raise ValueError
        start = int(start_text) if start_text.strip() else None
        end = int(end_text) if end_text.strip() else None
    except ValueError:
        raise click.BadParameter(f"expected A:B {what}, e.g. 0:4096, 100: or :4096") from None
    first = 0 if what == "bytes" else 1
    start = first if start is None else start
    if start < first or (end is not None and end < start):
        raise click.BadParameter(f"{what} run from {first}, and A <= B")
    return start, end


def _oversized(handle: IO[bytes], limits: Limits) -> tuple[LimitExceededError, int | None]:
    """The refusal of an input read past ``max_artifact_bytes``, and its real size if known.

    A regular file's size comes from its metadata (its real size, not the limit plus one); a
    stream's is not known without reading it all, so it is "more than" the limit.
    """
    limit = limits.max_artifact_bytes
    try:
        info = os.fstat(handle.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):  # a stream without a descriptor
        info = None
    if info is not None and stat.S_ISREG(info.st_mode) and info.st_size > limit:
        try:
            limits.check_artifact(info.st_size)  # the store's own refusal: size, limit, setting
        except LimitExceededError as exc:
            return exc, info.st_size
    return (
        LimitExceededError(
            f"input is more than {limit:,} bytes (read from a stream, stopped past the limit), "
            f"over the {limit:,}-byte limit per artifact (raise it with max_artifact_bytes in "
            "cargohold.toml or CARGOHOLD_MAX_ARTIFACT_BYTES)",
            reason="artifact_too_large",
            setting="max_artifact_bytes",
            limit=limit,
        ),
        None,
    )


@click.command()
@click.argument("file", metavar="FILE|-", type=click.File("rb"))
@click.option("--tool", help="Name of the tool that produced the output (shown in the stub).")
@click.option("--media-type", metavar="TYPE/SUBTYPE", help="Media type of the output.")
@click.option(
    "--budget",
    type=click.Choice(_BUDGETS),
    help="Stub budget: light 4 KiB, balanced 8 KiB (default), strong 12 KiB, max 16 KiB.",
)
@click.option(
    "--threshold",
    type=click.IntRange(min=1, max=MAX_THRESHOLD),
    metavar="BYTES",
    help="Heavy threshold for this call, at most 1 MiB (default: heavy_threshold, 32 KiB).",
)
@click.option("--failed", is_flag=True, help="The tool call failed: never summarize its output.")
@_JSON_OPTION
def offload(
    file: Any,
    tool: str | None,
    media_type: str | None,
    budget: str | None,
    threshold: int | None,
    failed: bool,
    as_json: bool,
) -> None:
    """Decide what of a tool's output enters a model's context, and print it.

    At or above the heavy threshold the exact bytes are stored and the stub is printed: a
    reference, what the output is, a preview within the budget, and how to read more. Below it,
    the output is printed unchanged (inline). A refused output (a limit, a sensitivity) prints a
    short notice and exits 8; a store failure prints a notice and exits 1. Never the raw body.

    \b
    Examples:
      pytest 2>&1 | cargohold offload - --tool pytest --failed
      cargohold offload orders.json --tool list_orders --budget light
    """
    from cargohold._tokens import preload

    preload()  # loads while stdin is read and the bytes are stored: the stub need not wait
    app = get_app()
    offloader = app.offloader(threshold=threshold)
    limits = app.settings.limits
    # Read whole what may be inline (under the threshold) or stored (up to the limit), and one
    # byte more: an output past both is refused unread, under its real size where known.
    cap = max(limits.max_artifact_bytes, offloader.threshold_for(tool) - 1)
    data = file.read(cap + 1)
    name = getattr(file, "name", "-")
    if media_type is None and isinstance(name, str) and name != "<stdin>":
        media_type = guess_media_type(name)
    result: OffloadResult
    if len(data) > cap:
        refusal, size = _oversized(file, limits)
        result = offloader.refuse_oversized(
            refusal,
            size,
            tool=tool,
            media_type=media_type or fitting_media_type(data, name=None, kind=None),
        )
    else:
        with Busy(f"offloading {human_bytes(len(data))}: storing, then the stub...", len(data)):
            result = offloader.offload(
                data, tool=tool, media_type=media_type, budget=budget, failed=failed
            )
    if as_json:
        _echo_json(
            {
                "outcome": result.outcome.value,
                "reason": result.reason.value,
                "ref": None if result.ref is None else str(result.ref),
                "stub": None if result.stub is None else result.stub.as_dict(),
                "content": result.text,
                "event": result.event.as_dict(),
            }
        )
    elif isinstance(result.content, bytes):
        write_bytes(result.content)
    else:
        write_text(result.content)
    event = result.event
    click.echo(
        f"cargohold: {result.outcome.value} ({result.reason.value}): {event.observed_bytes:,} "
        f"bytes in, {event.context_bytes:,} bytes into context",
        err=True,
    )
    code = _OFFLOAD_EXIT.get(result.outcome.value, ExitCode.OK)
    if code is not ExitCode.OK:
        raise click.exceptions.Exit(int(code))


@click.command()
@click.argument("ref")
@click.option("--bytes", "byte_span", metavar="A:B", help="Bytes A (inclusive) to B (exclusive).")
@click.option("--lines", "line_span", metavar="A:B", help="Lines A to B, inclusive, from 1.")
@_BUDGET_OPTION
@_RAW_OPTION
@_JSON_OPTION
def read(
    ref: str,
    byte_span: str | None,
    line_span: str | None,
    budget: int | None,
    raw: bool,
    as_json: bool,
) -> None:
    """Read part of REF, verified, within a byte budget.

    REF is a reference, its 64-hex digest, or a unique prefix of it (at least 4 hex digits). A
    read longer than the budget prints nothing and says which range fits (exit 7).

    The answer is printed as a recovered segment: marker lines naming the reference, the span
    and the SHA-256 of the text, so the offload seam and the edge guard let it through. Text is
    cut to whole characters (the span says exactly which bytes); binary comes back as base64.
    On a terminal, control characters in the answer are shown as \\xNN, never executed.

    \b
    Examples:
      cargohold read artifact://sha256/<hex> --bytes 0:2000
      cargohold read artifact://sha256/<hex> --lines 120:160 --raw
      cargohold read 9f86d081 --bytes 16384:32768
    """
    if byte_span is not None and line_span is not None:
        raise click.UsageError("give --bytes or --lines, not both")
    app = get_app()
    reader = app.rehydrator()
    budget = budget or app.settings.read_budget
    lines = _span(line_span, "lines")
    ref = app.resolve_ref(ref)
    if lines is not None:
        result = reader.read_lines(ref, lines[0], lines[1], budget=budget)
    else:
        start, end = _span(byte_span, "bytes") or (0, None)
        length = None if end is None else end - start
        result = reader.read(ref, offset=start, length=length, budget=budget)
    refused = result.outcome.value in ("over_budget", "out_of_range", "unsupported")
    fits = _fits(result, lines is not None) if refused else None
    asked = f"--lines {line_span}" if lines is not None else f"--bytes {byte_span or '0:'}"
    _finish_read(result, as_json=as_json, raw=raw, fits=fits, asked=asked)


@click.command()
@click.argument("ref")
@click.argument("pattern")
@click.option("-i", "--ignore-case", is_flag=True, help="Match regardless of case.")
@click.option(
    "--max-matches",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Show at most this many matching lines (all are counted).",
)
@_BUDGET_OPTION
@_RAW_OPTION
@_JSON_OPTION
def grep(
    ref: str,
    pattern: str,
    ignore_case: bool,
    max_matches: int,
    budget: int | None,
    raw: bool,
    as_json: bool,
) -> None:
    """Print the lines of REF matching PATTERN, with their line numbers.

    REF is a reference, its 64-hex digest, or a unique prefix of it (at least 4 hex digits).

    PATTERN is a regular expression in RE2 syntax, run by a linear-time engine: no pattern can
    make the search hang. Very long lines are shown as a window around the match.

    \b
    Examples:
      cargohold grep artifact://sha256/<hex> 'ERROR|FATAL'
      cargohold grep artifact://sha256/<hex> 'timeout' -i --max-matches 20
    """
    app = get_app()
    _check_like_the_tools("pattern", pattern)
    result = app.rehydrator().grep(
        app.resolve_ref(ref),
        pattern,
        ignore_case=ignore_case,
        max_matches=max_matches,
        budget=budget or app.settings.read_budget,
    )
    fits = _fits(result, lines=False) if result.outcome.value == "unsupported" else None
    _finish_read(result, as_json=as_json, raw=raw, fits=fits)


@click.command()
@click.argument("ref")
@click.argument("expression")
@_BUDGET_OPTION
@_RAW_OPTION
@_JSON_OPTION
def query(ref: str, expression: str, budget: int | None, raw: bool, as_json: bool) -> None:
    """Evaluate a JMESPath EXPRESSION on the JSON artifact REF; print the result as JSON.

    REF is a reference, its 64-hex digest, or a unique prefix of it (at least 4 hex digits).

    \b
    Examples:
      cargohold query artifact://sha256/<hex> 'length(@)'
      cargohold query artifact://sha256/<hex> "[?status=='refunded'].id"
    """
    app = get_app()
    _check_like_the_tools("expression", expression)
    result = app.rehydrator().query(
        app.resolve_ref(ref), expression, budget=budget or app.settings.read_budget
    )
    _finish_read(result, as_json=as_json, raw=raw, remedy="select less, or ")


MAX_EVENT_LINE = 64 * 1024
"""The longest line read as an event; an event is a few hundred bytes, a longer line is not one."""
MAX_EVENTS_READ = 64 * 1024 * 1024
"""The most bytes of an events log ``events`` reads: the last this many of a longer file."""


class _EventLog:
    """What ``cargohold events`` read of a log: its events, and what it could not use."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.skipped = 0
        self.cut = False

    def take(self, line: bytes) -> None:
        """One line: an event, a blank, or a line skipped (and counted)."""
        if not line.strip():
            return
        try:
            value = json.loads(line.decode("utf-8"))
        except (ValueError, RecursionError):  # not UTF-8, not JSON, a number too long, too deep
            self.skipped += 1
            return
        if (
            isinstance(value, dict)
            and isinstance(value.get("operation"), str)
            and isinstance(value.get("outcome"), str)
        ):
            self.events.append(value)
        else:
            self.skipped += 1


def _read_events(handle: IO[bytes], regular: bool, size: int) -> _EventLog:
    """The events of an open log, reading at most :data:`MAX_EVENTS_READ` bytes of it.

    A regular file longer than that is read from its last :data:`MAX_EVENTS_READ` bytes (the
    newest events); anything else (a device, a pipe) that goes on past it is refused, as
    ``/dev/zero`` would be read for ever.

    Raises:
        UsageError: a stream longer than :data:`MAX_EVENTS_READ` bytes.
    """
    log = _EventLog()
    if regular and size > MAX_EVENTS_READ:
        handle.seek(size - MAX_EVENTS_READ)
        handle.readline(MAX_EVENT_LINE)  # the first line is cut; drop it
        log.cut = True
    read = 0
    while True:
        line = handle.readline(MAX_EVENT_LINE + 1)
        if not line:
            return log
        read += len(line)
        if len(line) > MAX_EVENT_LINE:  # too long for an event: skip to the end of the line
            while not line.endswith(b"\n") and read <= MAX_EVENTS_READ:
                line = handle.readline(MAX_EVENT_LINE)
                if not line:
                    break
                read += len(line)
            log.skipped += 1
        else:
            log.take(line)
        if read > MAX_EVENTS_READ:
            if regular:  # a file that grew while it was read: what was read is enough
                return log
            raise UsageError(
                f"more than {MAX_EVENTS_READ // (1024 * 1024)} MiB and no end in sight: "
                "not an events log (give a file)"
            )


def _load_events(path: Path, named: bool) -> _EventLog:
    """Read the events log at ``path``; ``named``: the user gave it with ``--file``.

    A missing configured log is an empty one (nothing logged yet); a missing or unreadable file
    the user named is a usage error naming it (the user typed that path). The configured log's
    path is not printed.
    """
    where = click.format_filename(str(path)) if named else "the events log"
    try:
        with path.open("rb") as handle:
            info = os.fstat(handle.fileno())
            log = _read_events(handle, stat.S_ISREG(info.st_mode), info.st_size)
    except FileNotFoundError:
        if not named:
            return _EventLog()
        raise UsageError(f"cannot read {where}: no such file") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"cannot read {where}: {reason}") from None
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    if log.skipped and not log.events:
        noun = "line" if log.skipped == 1 else "lines"
        raise UsageError(
            f"{where} holds no events: {log.skipped:,} {noun}, none a cargohold decision event "
            "(a JSON object with an operation and an outcome)"
        )
    return log


@click.command()
@click.option("--tail", type=click.IntRange(min=1), metavar="N", help="Only the last N events.")
@click.option(
    "--file",
    "log_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Read this JSON-lines file instead of the configured events log.",
)
@_JSON_OPTION
def events(tail: int | None, log_file: Path | None, as_json: bool) -> None:
    """Show the decision events that cargohold commands logged, oldest first.

    One event per offload or rehydrate decision: operation, outcome, reason, bytes observed
    against the threshold or budget, the reference when the outcome carries one. Events never
    hold a body, a path, an owner or an exception's text.

    A line that is not an event (a torn last line, an edit) is skipped and counted on stderr.
    A --file that is missing, unreadable or holds no event at all exits 2; of a log over 64 MiB
    the last 64 MiB are read.

    With events_log = "store" (and no --file), the events are this scope's, read from the
    PostgreSQL store's events table by the scope's run tag (the newest 200,000 at most).

    \b
    Examples:
      cargohold events --tail 20
      cargohold events --json | jq '.[] | select(.outcome == "stale")'
    """
    app = get_app()
    if log_file is None and app.events_in_store:
        from cargohold._sinks import MAX_STORE_EVENTS, read_store_events

        table = app.events_table
        _show_events(
            read_store_events(table, app.run_tag(), limit=tail or MAX_STORE_EVENTS), as_json
        )
        return
    path = log_file or app.events_path
    log = _load_events(path, named=log_file is not None)
    if log.cut:
        click.echo(
            f"cargohold: the events log is over {MAX_EVENTS_READ // (1024 * 1024)} MiB: showing "
            "the events in its last part",
            err=True,
        )
    if log.skipped:
        lines = "1 line" if log.skipped == 1 else f"{log.skipped:,} lines"
        click.echo(f"cargohold: {lines} skipped: not an event", err=True)
    found = log.events
    if tail is not None:
        found = found[-tail:]
    _show_events(found, as_json)


def _show_events(found: list[dict[str, Any]], as_json: bool) -> None:
    """Print ``found`` as ``cargohold events`` does: a JSON array, or one row each."""
    if as_json:
        _echo_json(found)
        return
    if not found:
        click.echo("cargohold: no events logged yet", err=True)
        return
    click.echo(click.style(_event_row(_EVENT_HEADER), bold=True))
    for event in found:
        click.echo(escape_controls(_event_row(event)))  # a log file anyone may have edited


_EVENT_HEADER = {
    "time": "TIME",
    "sequence": "SEQ",
    "operation": "OPERATION",
    "outcome": "OUTCOME",
    "reason": "REASON",
    "observed_bytes": "BYTES",
    "limit_bytes": "LIMIT",
    "tool": "TOOL",
    "ref": "REF",
}


def _event_row(event: dict[str, Any]) -> str:
    """One line of ``cargohold events``: fixed columns, numbers right-aligned."""

    def number(key: str) -> str:
        value = event.get(key, 0)
        return f"{value:,}" if isinstance(value, int) else str(value)

    return (
        f"{event.get('time', '-')!s:<24} {number('sequence'):>5}  "
        f"{event.get('operation', '?')!s:<9} "
        f"{event.get('outcome', '?')!s:<18} {event.get('reason', '?')!s:<22} "
        f"{number('observed_bytes'):>10} {number('limit_bytes'):>10}  "
        f"{event.get('tool') or '-'!s:<16} {event.get('ref') or '-'}"
    ).rstrip()
