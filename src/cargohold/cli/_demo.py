"""``cargohold demo``: the main job, step by step, on the embedded default store (or --store)."""

from __future__ import annotations

import hashlib
import time
from importlib import resources

import click

from cargohold._records import CHUNK_SIZE
from cargohold.cli._context import fail_outcome, get_app
from cargohold.cli._exit import ExitCode
from cargohold.cli._progress import ProgressBar
from cargohold.cli._render import human_bytes, record_fields

SAMPLE = "orders.json"
"""The shipped sample: a tool's JSON answer listing 280 orders, one per line (about 55 KiB)."""

_SAMPLE_TOOL = "list_orders"
_EXCERPT = 150
_JSON_BYTES_PER_TOKEN = 3.25
"""Measured for JSON with the o200k tokenizer (see DESIGN, measured facts)."""


def sample_bytes() -> bytes:
    """The exact bytes of the sample file shipped inside the package."""
    return resources.files("cargohold").joinpath("samples").joinpath(SAMPLE).read_bytes()


def _order_span(sample: bytes, order_id: int) -> tuple[int, int]:
    """Byte offsets of one order's JSON object in the sample (one order per line)."""
    start = sample.index(b'{"id":%d,' % order_id)
    return start, sample.index(b"\n", start) - 1  # drop the line's trailing comma


@click.command()
def demo() -> None:
    """Run cargohold's main job once, on a shipped sample, and explain each step.

    Stores a sample tool result (a JSON list of orders), shows its metadata, reads it back
    verified (whole and a byte range), stores it again to show that identical bytes are written
    once, and verifies the whole store. Uses the embedded default store unless --store (or the
    configuration) names another; try it on a throw-away store with --store memory://.

    \b
    Examples:
      cargohold demo
      cargohold --store memory:// demo
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.text import Text

    app = get_app()
    console = Console(highlight=False)

    def say(markup: str, indent: int = 3) -> None:
        """An indented paragraph, wrapped to the terminal without trailing blanks."""
        for line in Text.from_markup(markup).wrap(console, max(20, console.width - indent)):
            line.rstrip()
            console.print(Text(" " * indent) + line if line.plain else "", soft_wrap=True)

    def show_ref(markup: str) -> None:
        """A line holding a reference or bytes: never wrapped, so it can be copied whole."""
        console.print("   " + markup, soft_wrap=True)

    scoped = app.scoped
    sample = sample_bytes()
    where = (
        "the embedded default store (local files + SQLite index in your cache directory)"
        if app.default_store
        else "the store named by --store or your configuration"
    )
    console.rule("[bold]cargohold demo")
    say(f"Working in {where}, in your own scope (tenant, user, session).\n", indent=0)

    # 1. store
    first = scoped.put(sample, media_type="application/json", kind="json", tool=_SAMPLE_TOOL)
    ref = first.ref
    console.print("[bold]1. Store a heavy tool result[/]  ([dim]cargohold put FILE[/])")
    tokens = round(len(sample) / _JSON_BYTES_PER_TOKEN, -3)
    say(
        f"A tool, [cyan]{_SAMPLE_TOOL}[/], answered with 280 orders as JSON: {len(sample):,} "
        f"bytes, about {tokens:,.0f} tokens if pasted into a model's context. cargohold stored "
        "the exact bytes (staged, fsynced, renamed into place) and gave back a reference, which "
        "is all a conversation needs to carry:"
    )
    show_ref(f"[green]{ref}[/]")
    if first.existing:
        say("[dim](already stored by an earlier run: nothing was written twice)[/]")
    say("The reference is the SHA-256 of the bytes: it names no path, no owner, no content.\n")

    # 2. metadata
    stat = scoped.stat(ref)
    if stat.record is None or not stat.ok:
        raise fail_outcome(stat)
    fields = record_fields(stat.record, now=time.time())
    console.print("[bold]2. What the store knows about it[/]  ([dim]cargohold show REF[/])")
    for key in ("size", "media_type", "kind", "tool", "sensitivity", "complete", "expires"):
        value = fields[key]
        if key == "size":
            shown = f"{value:,} bytes"
        elif key == "complete":
            shown = "yes" if value else "no (truncated by its producer)"
        else:
            shown = str(value)
        console.print(f"   [dim]{key:<15}[/]{escape(shown)}", soft_wrap=True)
    say("Your scope is recorded with it, and never shown in a stub or an event.\n")

    # 3. verified reads
    console.print("[bold]3. Read it back, verified[/]  ([dim]cargohold cat REF[/])")
    whole = scoped.read(ref)
    if not whole.ok or whole.data is None:
        raise fail_outcome(whole)
    digest = hashlib.sha256(whole.data).hexdigest()
    if digest != ref.digest or whole.data != sample:
        console.print("   [red]the bytes read back differ from the sample[/]")
        raise click.exceptions.Exit(int(ExitCode.ERROR))
    say(
        f"Whole body: {len(whole.data):,} bytes; their SHA-256 matches the reference "
        "[green]\u2713[/]"
    )
    start, end = _order_span(sample, 100)
    part = scoped.read(ref, start=start, end=end)
    if not part.ok or part.data is None:
        raise fail_outcome(part)
    if part.data != sample[start:end]:
        console.print("   [red]the range read back differs from the sample[/]")
        raise click.exceptions.Exit(int(ExitCode.ERROR))
    touched = (end - 1) // CHUNK_SIZE - start // CHUNK_SIZE + 1
    chunks = max(1, -(-len(sample) // CHUNK_SIZE))
    say(
        f"Range {start}:{end} ([dim]cat REF --range {start}:{end}[/]): order 100 alone, "
        f"{len(part.data)} bytes, equal to the same bytes of the sample [green]\u2713[/]. It was "
        f"checked by re-hashing only the {human_bytes(CHUNK_SIZE)} chunks it touches "
        f"({touched} of {chunks}) against digests recorded at write:"
    )
    excerpt = part.data[:_EXCERPT].decode("utf-8", "replace")
    more = "\u2026" if len(part.data) > _EXCERPT else ""
    show_ref(f"[cyan]{escape(excerpt)}{more}[/]\n")

    # 4. deduplication
    again = scoped.put(sample, media_type="application/json", kind="json", tool=_SAMPLE_TOOL)
    console.print("[bold]4. Store the same bytes again[/]  ([dim]cargohold put FILE[/])")
    same = "the same reference" if again.ref == ref else "[red]a different reference[/]"
    written = "[red]written again[/]" if again.blob_written else "no second write"
    say(
        f"{same.capitalize()}, existing={str(again.existing).lower()}, {written}: identical "
        "bytes are stored once [green]\u2713[/]\n"
    )
    if again.ref != ref or not again.existing or again.blob_written:
        raise click.exceptions.Exit(int(ExitCode.ERROR))

    # 5. verify
    console.print("[bold]5. Verify the whole store[/]  ([dim]cargohold verify[/])")
    with ProgressBar("verifying blobs") as bar:
        findings = app.store.verify(progress=bar)
    blobs = bar.total or app.store.store_usage().objects
    if findings:
        for finding in findings:
            say(f"[red]{escape(finding.kind)}[/] {escape(finding.detail)}")
        say(f"{len(findings)} findings; nothing was deleted. See `cargohold verify`.")
        raise click.exceptions.Exit(int(ExitCode.ERROR))
    say(
        f"Every blob in the store ({blobs:,}) re-hashed against its digest: nothing corrupt, "
        "orphaned or unknown [green]\u2713[/]\n"
    )
    console.rule()
    console.print("Next, try:")
    show_ref(f"cargohold show {ref}")
    show_ref(f"cargohold cat {ref} --range 0:400")
    say("cargohold ls    cargohold du    cargohold gc --dry-run    cargohold --help")
