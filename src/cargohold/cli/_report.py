"""``cargohold report``: the run report from the events log, in the terminal or as a page."""

from __future__ import annotations

import webbrowser
from pathlib import Path

import click

from cargohold.cli._context import get_app


@click.command()
@click.option(
    "--events",
    "log_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Read this JSON-lines events file instead of the configured events log.",
)
@click.option(
    "--html",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the report as one self-contained HTML page here.",
)
@click.option("--open", "open_page", is_flag=True, help="Open the page (--html) in a browser.")
def report(log_file: Path | None, out: Path | None, open_page: bool) -> None:
    """Show where the context went: bytes per tool against what entered the context, the agent
    tree as a timeline, read-backs, refusals, guard stops and compactions, the largest artifacts.

    Built from the decision events only (never a body, a path, an owner or an exception's
    text). Without --html it prints rich tables; with it, it writes one page that needs no
    network and prints its path.

    \b
    Examples:
      cargohold report
      cargohold report --events run.jsonl --html report.html --open
    """
    from rich.console import Console

    from cargohold.cli._decisions import _load_events
    from cargohold.report import build_report, render_html, render_terminal

    path = log_file or get_app().events_path
    log = _load_events(path, named=log_file is not None)
    built = build_report(log.events, skipped=log.skipped)
    if out is None:
        if open_page:
            raise click.UsageError("--open needs --html OUT")
        render_terminal(built, Console(highlight=False, soft_wrap=True))
        return
    try:
        out.write_text(render_html(built), encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise click.ClickException(
            f"cannot write {click.format_filename(str(out))}: {reason}"
        ) from None
    click.echo(f"cargohold: report written to {click.format_filename(str(out))}", err=True)
    click.echo(str(out))
    if open_page:
        webbrowser.open(out.resolve().as_uri())
