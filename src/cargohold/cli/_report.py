"""``cargohold report``: the run report from the events log, in the terminal or as a page."""

from __future__ import annotations

import webbrowser
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cargohold.cli._context import get_app

if TYPE_CHECKING:
    from cargohold.report import RunReport


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
@click.option(
    "--session",
    "session",
    metavar="S",
    help="Only the events of session S (in the tenant and user of the global --tenant and "
    "--user options), found by the run tag events carry, computed with the store's key: give "
    'the store the run used (--store). With events_log = "store", the current scope\'s '
    "session by default.",
)
@click.option("--open", "open_page", is_flag=True, help="Open the page in a browser.")
@click.option(
    "--serve",
    "port",
    type=click.IntRange(0, 65535),
    default=None,
    is_flag=False,
    flag_value=8765,
    metavar="[PORT]",
    help="Serve the page on 127.0.0.1 (port 8765 by default), rebuilt from the log on every "
    "load and reloaded by the browser every 5 s, while a run goes on. Ctrl-C stops it.",
)
def report(
    log_file: Path | None,
    out: Path | None,
    session: str | None,
    open_page: bool,
    port: int | None,
) -> None:
    """Show where the context went: bytes per tool against what entered the context, the agent
    tree as a timeline, read-backs, refusals, guard stops and compactions, the largest artifacts.

    Built from the decision events only (never a body, a path, an owner or an exception's
    text). Without --html it prints rich tables; with it, it writes one page that needs no
    network and prints its path.

    With --session S, only that session's events: each event carries an opaque run tag of its
    scope (an HMAC under the store's secret key), which the report computes again for S; the
    events of other sessions, and those written before events carried a tag, are counted as
    left out. The page never names the session.

    With events_log = "store" and no --events, the events are read from the PostgreSQL store's
    events table (where every command writes them then, as a PostgresEventsSink does): those of
    session S, or of the current scope's session without --session.

    \b
    Examples:
      cargohold report
      cargohold report --events run.jsonl --html report.html --open
      CARGOHOLD_EVENTS_LOG=store cargohold --store postgresql://db/cargo --user ana \\
        report --session run-7
      cargohold report --serve --open
    """
    from rich.console import Console

    from cargohold.cli._decisions import _load_events
    from cargohold.report import build_report, render_html, render_terminal

    app = get_app()
    path = log_file or app.events_path
    table = app.events_table if log_file is None and app.events_in_store else None
    # The table is read by run tag, so it always has one: the current scope's by default.
    run = None if session is None and table is None else _run_of(session)

    def load() -> RunReport:
        if table is not None and run is not None:
            from cargohold._sinks import read_store_events

            return build_report(read_store_events(table, run), run=run)
        log = _load_events(path, named=log_file is not None)
        return build_report(log.events, skipped=log.skipped, run=run)

    if port is not None:

        def page() -> str:
            return render_html(load(), refresh=5)

        page()  # a log that cannot be read fails now, not on the first load

        def ready(bound: int, stop: Callable[[], None]) -> None:
            url = f"http://127.0.0.1:{bound}/"
            click.echo(f"cargohold: serving the report at {url} (Ctrl-C stops)", err=True)
            if open_page:
                webbrowser.open(url)

        serve_report(page, port=port, ready=ready)
        return
    built = load()
    if run is not None and built.events == 0 and built.other_runs:
        # A tag is the store's key over the scope: the events of another store's runs never
        # match it (a store named wrongly, or none, whose key was made just now).
        click.echo(
            "cargohold: no event of this session in the log, which holds other runs' events: "
            "the session is matched under this store's key, so name the store the run used "
            "(--store) and its tenant and user (--tenant, --user)",
            err=True,
        )
    if out is None:
        if open_page:
            raise click.UsageError("--open needs --html OUT or --serve")
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


def _run_of(session: str | None) -> str:
    """The run tag of ``session`` (the current scope's when ``None``) in the command line's
    tenant and user, under the key of the store the command line names."""
    from cargohold._errors import InvalidScopeError
    from cargohold._scope import check_part

    if session is not None:
        try:
            check_part("session", session, required=True)  # name the option, never the value
        except InvalidScopeError as exc:
            raise click.BadParameter(str(exc), param_hint="--session") from None
    return get_app().run_tag(session)


def serve_report(
    load: Callable[[], str],
    *,
    port: int = 0,
    ready: Callable[[int, Callable[[], None]], None] | None = None,
) -> None:
    """Serve the page ``load()`` renders, afresh on every request, on 127.0.0.1 only, until
    interrupted. ``ready`` is called with the bound port and a function that stops the server
    (from another thread) once it listens."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path not in ("/", "/index.html"):
                self.send_error(404)
                return
            page = load().encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, format: str, *args: object) -> None:
            return  # no request log: a quiet loopback page

    # Loopback only: the page is the caller's own run, never offered to the network.
    with ThreadingHTTPServer(("127.0.0.1", port), Handler) as server:
        if ready is not None:
            ready(server.server_address[1], server.shutdown)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            return
