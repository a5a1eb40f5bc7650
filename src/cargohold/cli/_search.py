"""``cargohold search``: the scope's artifacts that hold some words, best first.

The command line's ``artifact_search``: one search decision (one event in the events log), each
hit read back verified, the lines that hold the words with their line numbers.
"""

from __future__ import annotations

import click

from cargohold._records import MAX_READ_BYTES
from cargohold._toolspecs import MAX_HITS
from cargohold.cli._context import get_app
from cargohold.cli._exit import ExitCode
from cargohold.cli._output import json_text, write_text


@click.command()
@click.argument("words", nargs=-1, required=True, metavar="QUERY...")
@click.option(
    "--limit",
    type=click.IntRange(1, MAX_HITS),
    default=10,
    show_default=True,
    metavar="N",
    help=f"Most hits to show (at most {MAX_HITS}).",
)
@click.option(
    "--budget",
    type=click.IntRange(1, MAX_READ_BYTES),
    metavar="BYTES",
    help="Most bytes the answer may hold (default: read_budget, 16 KiB; at most 1 MiB). Hits "
    "past it are counted, not shown.",
)
@click.option(
    "--raw", is_flag=True, help="Print only the answer, without the recovered-segment markers."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def search(
    words: tuple[str, ...], limit: int, budget: int | None, raw: bool, as_json: bool
) -> None:
    """Find this scope's artifacts that hold every word of QUERY (case-insensitive).

    Prints each hit, best first: its reference, media type, size and producing tool, then the
    first lines that hold a word, with their line numbers. Every hit is read back and verified
    first; one whose bytes no longer match their digest is left out (and counted), never shown.
    No hit is not an error (exit 0); an answer over the budget exits 7.

    \b
    Examples:
      cargohold search TimeoutError payments
      cargohold search 'connection refused' --limit 3 --raw
      cargohold search invoice --json | jq '.hits[].ref'
    """
    app = get_app()
    result = app.rehydrator().search(
        " ".join(words), limit=limit, budget=budget or app.settings.read_budget
    )
    if as_json:
        click.echo(
            json_text(
                {
                    "outcome": result.outcome.value,
                    "reason": result.reason.value,
                    "hits": [hit.as_dict() for hit in result.hits],
                    "left_out": result.left_out,
                    "not_shown": result.not_shown,
                    "budget": result.budget,
                    "content": result.content,
                    "segment": result.segment,
                    "event": result.event.as_dict(),
                }
            )
        )
    elif result.content is not None:
        text = result.content if raw or result.segment is None else result.segment
        write_text(text, nl=not text.endswith("\n"))
    if not result.ok:
        if not as_json:
            click.echo(
                f"cargohold: error: not even the first hit fits --budget {result.budget:,}; "
                "pass a larger --budget",
                err=True,
            )
        raise click.exceptions.Exit(int(ExitCode.OVER_BUDGET))
