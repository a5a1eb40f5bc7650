"""``cargohold guard``: check a request file before it is sent, as the client wrappers do.

Exit 0 when the request may go, 9 on raw heavy content, 10 when it does not fit the model's
window. Findings are printed one per line: where, how big, which tool; never content. A failure
is also one decision event in the events log.
"""

from __future__ import annotations

import json
import os
import stat
from typing import IO

import click

from cargohold._config import MAX_THRESHOLD
from cargohold._errors import UsageError
from cargohold.cli._context import get_app
from cargohold.cli._exit import ExitCode

MiB = 1024 * 1024
MAX_REQUEST_BYTES = 64 * MiB
"""The most a request file may hold: more than the providers accept in one request (tens of
MB), so a real request always fits, and ``/dev/zero`` is refused instead of read forever."""

_FORMATS = ["openai-chat", "openai-responses", "openai-completions", "anthropic", "langchain"]


@click.command()
@click.argument("request_file", metavar="REQUEST.json", type=click.File("rb"))
@click.option(
    "--format",
    "request_format",
    type=click.Choice(_FORMATS),
    required=True,
    help="The request's shape: the arguments of chat.completions.create, responses.create, "
    "the legacy completions.create, messages.create, or a JSON list of LangChain message dicts.",
)
@click.option(
    "--model",
    metavar="M",
    help="Check against this model's window (default: the request's own model field).",
)
@click.option(
    "--threshold",
    type=click.IntRange(min=1, max=MAX_THRESHOLD),  # no threshold turns the guard off
    metavar="BYTES",
    help="Heavy threshold in bytes, at most 1 MiB (default: heavy_threshold, 32 KiB).",
)
@click.option(
    "--margin",
    type=click.IntRange(min=0),
    metavar="TOKENS",
    help="Tokens to keep free below the model's window (default: window_margin, 4096).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def guard(
    request_file: IO[bytes],
    request_format: str,
    model: str | None,
    threshold: int | None,
    margin: int | None,
    as_json: bool,
) -> None:
    """Check REQUEST.json for raw heavy content and for the model's window.

    A part at or above the heavy threshold (a tool's own from tool_thresholds, for its results)
    must be a stub or recovered segment made by the configured store: its check must verify under
    that store's marker key, so a marker a tool forged is raw content. The request's tokens must
    fit the model's context window less the margin. Nothing is sent and nothing is changed: the
    guard never truncates.

    \b
    Exit status: 0 the request may go, 9 raw heavy content (a context leak),
    10 over the model's window, 2 an unreadable request (not JSON, over 64 MiB, or
    nested hundreds of levels deep).

    \b
    Examples:
      cargohold guard request.json --format openai-chat
      cargohold guard body.json --format anthropic --model claude-sonnet-4-5 --margin 8000
    """
    from cargohold.guard import (
        ContextLeakError,
        ContextWindowExceededError,
        Guard,
    )

    request = _parse(_read(request_file))
    app = get_app()
    checker = Guard(
        threshold=threshold if threshold is not None else app.settings.heavy_threshold,
        tool_thresholds=app.settings.tool_thresholds,
        margin=margin if margin is not None else app.settings.window_margin,
        windows=app.settings.model_windows,
        # Tagged with the scope's run (report --session): the store's key is read at the first
        # event, as it is for a marker, so a request that passes never opens the store.
        reporter=app.scoped_reporter(),
        key=lambda: app.store.marker_key(),
    )
    try:
        report = checker.check(request, format=request_format, model=model)
    except ContextLeakError as exc:
        if as_json:
            _echo_json(
                {
                    "outcome": exc.event.outcome.value,
                    "threshold": exc.threshold,
                    "findings": [
                        {
                            "path": f.path,
                            "message_index": f.message_index,
                            "size": f.size,
                            "tool": f.tool,
                            "where": f.where,
                            "forged": f.forged,
                            "threshold": f.threshold,
                        }
                        for f in exc.findings
                    ],
                }
            )
        else:
            for finding in exc.findings:
                click.echo(f"leak  {finding.describe()}")
            click.echo(
                f"cargohold: context leak: {len(exc.findings)} raw part(s) at or above "
                f"{exc.threshold:,} bytes; offload them so the request carries stubs",
                err=True,
            )
        raise click.exceptions.Exit(int(ExitCode.CONTEXT_LEAK)) from None
    except ContextWindowExceededError as exc:
        how = "counted" if exc.counted else "estimated"
        if as_json:
            _echo_json(
                {
                    "outcome": exc.event.outcome.value,
                    "model": exc.model,
                    "window": exc.window,
                    "margin": exc.margin,
                    "tokens": exc.tokens,
                    "counted": exc.counted,
                }
            )
        else:
            click.echo(
                f"window  {exc.tokens:,} tokens ({how}) > {exc.window - exc.margin:,} "
                f"(model {exc.model}: window {exc.window:,} less margin {exc.margin:,})"
            )
        raise click.exceptions.Exit(int(ExitCode.CONTEXT_WINDOW)) from None
    if as_json:
        _echo_json(
            {
                "outcome": "ok",
                "model": report.model,
                "request_bytes": report.request_bytes,
                "messages": report.messages,
                "estimated_tokens": report.estimated_tokens,
                "counted_tokens": report.counted_tokens,
                "window": report.window,
                "margin": report.margin,
                "decided_by": report.decided_by.value,
            }
        )
        return
    window = (
        f"window {report.window:,} less margin {report.margin:,}, decided by {report.decided_by}"
        if report.window is not None
        else f"no window check ({report.decided_by})"
    )
    click.echo(
        f"ok  {report.messages} messages, {report.request_bytes:,} bytes, about "
        f"{report.tokens:,} tokens; {window}"
    )


def _read(stream: IO[bytes]) -> bytes:
    """The request file's bytes, at most :data:`MAX_REQUEST_BYTES` (``/dev/zero`` or a stream
    that never ends is refused once past it, never read on)."""
    try:
        info = os.fstat(stream.fileno())
    except (OSError, ValueError):  # no file descriptor (a test's stream): the bounded read decides
        info = None
    if info is not None and stat.S_ISREG(info.st_mode) and info.st_size > MAX_REQUEST_BYTES:
        raise UsageError(_too_large())
    data = stream.read(MAX_REQUEST_BYTES + 1)
    if len(data) > MAX_REQUEST_BYTES:
        raise UsageError(_too_large())
    return data


def _too_large() -> str:
    return (
        f"the request file is over {MAX_REQUEST_BYTES // MiB} MiB, more than a provider takes in "
        "one request; cargohold guard reads no more"
    )


def _parse(data: bytes) -> object:
    try:
        return json.loads(data)
    except RecursionError:  # the parser's own recursion: no request nests that deep
        raise UsageError(
            "the request file nests too deeply to read (arrays or objects hundreds of levels deep)"
        ) from None
    except (ValueError, UnicodeDecodeError):
        raise UsageError("the request file is not JSON") from None


def _echo_json(value: object) -> None:
    click.echo(json.dumps(value, indent=2))
