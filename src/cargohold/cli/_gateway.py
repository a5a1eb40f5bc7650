"""``cargohold gateway``: cargohold between an LLM client and its provider (docs/gateway.md).

Point a client's base URL at it (``ANTHROPIC_BASE_URL=http://127.0.0.1:8787``, ``base_url=``).
Its scope is the command line's (``--tenant``, ``--user``, ``--session``, else ``CARGOHOLD_*``,
the config file, the defaults); a request's ``x-cargohold-session`` header names another session.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import click

from cargohold.cli._context import get_app

_DEFAULT_PORT = 8787


@click.command("gateway")
@click.option(
    "--upstream",
    metavar="URL",
    help="Where requests go (gateway_upstream; default: the provider's own API).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    help=f"The port to listen on (gateway_port; default {_DEFAULT_PORT}; 0: any free port).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="The address to listen on; loopback unless you say otherwise.",
)
@click.option(
    "--compact/--no-compact",
    default=None,
    help="Run lossless compaction on each request (gateway_compact; off by default).",
)
@click.option(
    "--read-tools/--no-read-tools",
    default=None,
    help="Add the read tools to requests that hold a cargohold reference, and run the model's "
    "calls of them here, for clients that cannot add tools (gateway_read_tools; off by default).",
)
@click.option(
    "--read-rounds",
    type=click.IntRange(1, 32),
    default=4,
    show_default=True,
    help="With --read-tools: the most rounds of read calls for one request; the last must answer.",
)
@click.option(
    "--tool-results",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The folder whose files a client's <persisted-output> notice may name "
    "(default: Claude Code's ~/.claude/projects).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    help="Seconds to connect to the upstream, and the longest silence while it answers.",
)
def gateway(
    upstream: str | None,
    port: int | None,
    host: str,
    compact: bool | None,
    read_tools: bool | None,
    read_rounds: int,
    tool_results: Path | None,
    timeout: float,
) -> None:
    """Serve the gateway: heavy tool results in each request become stubs on the way."""
    import uvicorn

    import cargohold
    from cargohold.gateway import GatewayConfig, build_app
    from cargohold.gateway._persisted import DEFAULT_FOLDER

    app = get_app()
    settings = app.settings
    config_file = click.get_current_context().find_root().params.get("config_file")
    hold = cargohold.open(
        app.store,
        tenant=settings.tenant,
        user=settings.user,
        session=settings.session,
        sinks=[app.events_sink],
        agent="gateway",
        config_file=config_file,
    )
    config = GatewayConfig(
        upstream=upstream or settings.gateway_upstream,
        compact=settings.gateway_compact if compact is None else compact,
        read_tools=settings.gateway_read_tools if read_tools is None else read_tools,
        read_rounds=read_rounds,
        tool_results=DEFAULT_FOLDER if tool_results is None else tool_results,
        timeout=timeout,
    )
    if port is None:
        port = settings.gateway_port
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Inherited by every accepted connection. uvicorn given a socket does not set it, and
    # without it each streamed event waits ~40 ms for the client's delayed ACK (Nagle).
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        listener.bind((host, port))
        listener.listen(2048)  # connections wait in the backlog until uvicorn accepts them
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    bound = listener.getsockname()[1]
    sys.stderr.write(f"cargohold gateway: listening on http://{host}:{bound}\n")
    sys.stderr.flush()
    server = uvicorn.Server(
        uvicorn.Config(
            build_app(hold, config),
            log_level="warning",
            access_log=False,  # a query string may hold a key: no request line is logged
            server_header=False,  # the upstream's own headers pass through
            date_header=False,
            lifespan="on",
        )
    )
    try:
        server.run(sockets=[listener])
    finally:
        hold.close()
