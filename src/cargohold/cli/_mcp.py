"""``cargohold mcp`` and ``cargohold proxy``: cargohold as an MCP server, or in front of one.

Both speak MCP on stdio by default (what Claude Desktop, Claude Code and Cursor start), or
streamable HTTP with ``--http HOST:PORT``. Their scope is the command line's (``--tenant``,
``--user``, ``--session``, else ``CARGOHOLD_*``, the config file, the defaults), so a proxy and a
``cargohold mcp`` started with the same scope read the same artifacts. Decisions go to the
events log, as every command's do. Nothing but MCP is ever written to stdout.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING

import click

from cargohold.cli._context import get_app

if TYPE_CHECKING:
    from cargohold._hold import Hold

_HTTP_HELP = (
    "Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (port 0: any free port; "
    "the URL is printed on stderr)."
)
_PER_SESSION_HELP = (
    "With --http: give each MCP session a session scope of its own, so two clients of one "
    "server cannot read each other's artifacts."
)


def _hold(agent: str) -> Hold:
    """The scope's hold on the command's store, reporting to the events log."""
    import cargohold

    app = get_app()
    settings = app.settings
    config_file = click.get_current_context().find_root().params.get("config_file")
    return cargohold.open(
        app.store,
        tenant=settings.tenant,
        user=settings.user,
        session=settings.session,
        sinks=[app.events_sink],
        agent=agent,
        config_file=config_file,
    )


class _SdkLines(logging.Handler):
    """The MCP SDK's own log records, as one categorical line each on stderr.

    Never the SDK's text or traceback: it may quote what an upstream wrote, a URL or a path. A
    line an upstream wrote that is not JSON-RPC is dropped here, since the proxy says it once
    in words of its own.
    """

    def emit(self, record: logging.LogRecord) -> None:
        failure = record.exc_info[0] if record.exc_info else None
        if record.name == "mcp.client.stdio" and failure is not None:
            from pydantic import ValidationError

            if issubclass(failure, ValidationError):
                return
        cause = f", {failure.__name__}" if failure is not None else ""
        level = record.levelname.lower()
        try:
            sys.stderr.write(f"cargohold: the MCP SDK logged a {level} ({record.name}{cause})\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr closed: nowhere left to say it
            pass


def _sdk_logging() -> None:
    """Route the MCP SDK's log records through :class:`_SdkLines` (the process is ours)."""
    sdk = logging.getLogger("mcp")
    if not any(isinstance(handler, _SdkLines) for handler in sdk.handlers):
        sdk.addHandler(_SdkLines(logging.WARNING))
    sdk.propagate = False


def _address(value: str | None) -> tuple[str, int] | None:
    if value is None:
        return None
    from cargohold.mcp._transport import parse_address

    return parse_address(value)


@click.command("mcp")
@click.option("--http", "address", metavar="HOST:PORT", help=_HTTP_HELP)
@click.option("--per-session", is_flag=True, help=_PER_SESSION_HELP)
def mcp(address: str | None, per_session: bool) -> None:
    """Serve this scope's read tools and artifact:// resources over MCP.

    The tools (artifact_info, artifact_read, artifact_read_lines, artifact_grep,
    artifact_query) answer within the caller's budget (1 MiB at most) with the exact byte span,
    size and SHA-256 beside the text; artifact_patch derives a changed artifact (JSON Patch, or
    line and byte edits) and answers with its new reference; resources/read of
    artifact://sha256/<hex> returns a body of up to 1 MiB.

    \b
    Examples:
      cargohold mcp                                   # stdio, for an MCP client's config
      cargohold --session run-7 mcp --http 127.0.0.1:8765
    """
    import anyio

    from cargohold.mcp import build_read_server
    from cargohold.mcp._transport import announce, serve

    http = _address(address)
    _sdk_logging()
    with _hold("mcp") as hold:
        server = build_read_server(hold, per_session=per_session)
        anyio.run(lambda: serve(server, http=http, on_ready=announce))


@click.command(
    "proxy",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--url", metavar="URL", help="A streamable HTTP upstream instead of a command.")
@click.option("--http", "address", metavar="HOST:PORT", help=_HTTP_HELP)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Most seconds an upstream request (or start) may take (default: upstream_timeout, 60).",
)
@click.option(
    "--ref-arguments",
    "ref_arguments",
    metavar="TOOL",
    multiple=True,
    help="An upstream tool whose artifact:// arguments are resolved to the exact bytes "
    "(repeatable; default: ref_arguments of the configuration).",
)
@click.option("--per-session", is_flag=True, help=_PER_SESSION_HELP)
@click.option(
    "--forward",
    "forward",
    type=click.Choice(["elicitation", "sampling"]),
    multiple=True,
    help="Forward the upstream server's elicitation or sampling requests to the client "
    "(repeatable). Off by default: the server then sees a client without them. A request "
    "waiting on the user counts against --timeout.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[--] COMMAND [ARGS]...")
def proxy(
    url: str | None,
    address: str | None,
    timeout: float | None,
    ref_arguments: tuple[str, ...],
    per_session: bool,
    forward: tuple[str, ...],
    command: tuple[str, ...],
) -> None:
    """Run an MCP server behind cargohold: heavy tool results arrive as stubs.

    Starts COMMAND (or connects to --url; the `--` before COMMAND is optional: leave it out
    of a client's JSON config, where some clients split args at it) and forwards everything
    between it and the client (tools, resources, prompts, notifications, progress,
    cancellation, logging; elicitation and sampling with --forward), adds the read tools, and
    replaces each heavy part of each tool result (text, structured content, embedded
    resources, images, audio), resource and prompt with a bounded stub naming the artifact://
    that holds its exact bytes (for a tool result, with a resource_link to it too). An
    upstream that hangs, crashes or answers garbage gives the client a clear MCP error within
    --timeout; the proxy keeps serving.

    \b
    Examples:
      cargohold proxy -- npx -y @modelcontextprotocol/server-filesystem ~/data
      cargohold proxy --timeout 30 -- python my_server.py
      cargohold proxy --forward elicitation --forward sampling -- python my_server.py
      cargohold proxy --url http://127.0.0.1:3001/mcp --http 127.0.0.1:8766
    """
    import anyio

    from cargohold.mcp import Proxy
    from cargohold.mcp._proxy import upstream_from
    from cargohold.mcp._transport import announce

    if bool(command) == bool(url):
        raise click.UsageError("give the upstream server as `[--] COMMAND [ARGS]...` or --url")
    upstream = upstream_from(command, url)
    http = _address(address)
    _sdk_logging()
    with _hold("proxy") as hold:
        runner = Proxy(
            hold,
            upstream,
            ref_arguments=ref_arguments or None,
            timeout=timeout,
            per_session=per_session,
            forward=forward,
        )
        anyio.run(lambda: runner.run(http=http, on_ready=announce))
