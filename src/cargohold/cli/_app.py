"""The ``cargohold`` command group and its store plumbing commands.

Every command resolves the global options once (:class:`~cargohold.cli._context.App`), works
through a :class:`~cargohold.ScopedStore` bound to one scope, and ends in an exit status from the
one table in :mod:`cargohold.cli._exit`. An error is one line on stderr, never a traceback.
"""

from __future__ import annotations

import errno
import importlib
import io
import os
import stat
import time
from collections.abc import Sequence
from typing import IO, Any

import click

from cargohold import __version__
from cargohold._errors import InvalidScopeError, LimitExceededError
from cargohold._records import ArtifactRecord, Limits, Sensitivity
from cargohold._scope import check_part
from cargohold.cli._context import App, fail_outcome, get_app
from cargohold.cli._exit import EXIT_CODES_HELP, ExitCode, error_line, exit_code_for
from cargohold.cli._output import json_text, write_bytes
from cargohold.cli._progress import Busy, ProgressBar
from cargohold.cli._render import fitting_media_type, human_bytes, record_fields

_LAZY_COMMANDS = {
    "db": "cargohold.cli._db",
    "demo": "cargohold.cli._demo",
    "envelope": "cargohold.cli._envelope",
    "events": "cargohold.cli._decisions",
    "gateway": "cargohold.cli._gateway",
    "grep": "cargohold.cli._decisions",
    "guard": "cargohold.cli._guard",
    "mcp": "cargohold.cli._mcp",
    "offload": "cargohold.cli._decisions",
    "proxy": "cargohold.cli._mcp",
    "query": "cargohold.cli._decisions",
    "read": "cargohold.cli._decisions",
    "report": "cargohold.cli._report",
    "search": "cargohold.cli._search",
}
"""Commands whose module is imported only when that command runs (or ``--help`` lists them).

Every module here costs each start of the command line a few milliseconds; ``put`` and ``cat``
pay only for the store. Each module defines its command under the command's own name.
"""


class _Group(click.Group):
    """A group that turns every error into one stderr line and its exit status.

    It also loads the commands of :data:`_LAZY_COMMANDS` on first use (click's documented
    lazy-loading pattern: ``list_commands`` and ``get_command``).
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *_LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = self.commands.get(cmd_name)
        if command is None and cmd_name in _LAZY_COMMANDS:
            loaded = getattr(importlib.import_module(_LAZY_COMMANDS[cmd_name]), cmd_name)
            if not isinstance(loaded, click.Command):
                raise TypeError(f"{_LAZY_COMMANDS[cmd_name]}.{cmd_name} is not a click command")
            command = loaded
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            try:
                return super().invoke(ctx)
            finally:
                if isinstance(ctx.obj, App):
                    ctx.obj.close()
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except Exception as exc:
            if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
                raise  # `cargohold cat REF | head`: click quiets the closed pipe itself
            click.echo(error_line(exc), err=True)
            ctx.exit(int(exit_code_for(exc)))


@click.group(
    cls=_Group,
    epilog=EXIT_CODES_HELP,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--store",
    metavar="URL",
    help="Store to use: memory://, a directory path, a file:// URL or a postgresql:// URL. "
    "Default: $CARGOHOLD_STORE, then the config file, then the embedded local store "
    "in your cache directory. With PostgreSQL, large bodies go to the S3 bucket named by "
    "$CARGOHOLD_BLOBS or the config's `blobs` (docs/scaling.md).",
)
@click.option("--tenant", help="Tenant of this scope (else $CARGOHOLD_TENANT, config, 'local').")
@click.option("--user", help="User of this scope (else $CARGOHOLD_USER, config, your login name).")
@click.option(
    "--session", help="Session of this scope (else $CARGOHOLD_SESSION, config, 'default')."
)
@click.option(
    "--config",
    "config_file",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Read this cargohold.toml or pyproject.toml instead of searching for one "
    "(also $CARGOHOLD_CONFIG).",
)
@click.version_option(__version__, prog_name="cargohold")
@click.pass_context
def cli(
    ctx: click.Context,
    store: str | None,
    tenant: str | None,
    user: str | None,
    session: str | None,
    config_file: str | None,
) -> None:
    """Keep heavy tool output out of an LLM's context, without losing a byte.

    cargohold stores exact bytes in a content-addressed, owner-scoped store and hands back a
    reference (artifact://sha256/<64 hex>). The bytes come back only through a verified read.
    Every command works in one scope: a tenant, a user and a session; an artifact of another
    session is not readable from this one.

    \b
    Examples:
      cargohold demo                                  # a scripted agent run, explained
      my-tool | cargohold offload - --tool my-tool    # the stub, or the output if small
      cargohold grep artifact://sha256/<hex> 'ERROR|FATAL'
      cargohold read artifact://sha256/<hex> --lines 100:140
      cargohold put orders.json                       # prints artifact://sha256/...
      cargohold cat artifact://sha256/<hex> --range 0:4096
      cargohold show 9f86d081                         # a unique prefix of a reference
      cargohold --session run-7 ls
    """
    for part, value in (("tenant", tenant), ("user", user), ("session", session)):
        try:
            check_part(part, value, required=False)  # name the option, never the value
        except InvalidScopeError as exc:
            raise click.BadParameter(str(exc), param_hint=f"--{part}") from None
    overrides = {"store": store, "tenant": tenant, "user": user, "session": session}
    ctx.obj = App(overrides, config_file)


# -- put ----------------------------------------------------------------------------------------


def _read_input(handle: IO[bytes], limits: Limits) -> bytes:
    """The whole input, or a typed refusal naming its real size, the limit and the setting.

    One byte past the limit is read, never the whole of an oversized input: a file's real size
    comes from its metadata; a stream's is not known, so it is said to be more than the limit.
    """
    limit = limits.max_artifact_bytes
    data = handle.read(limit + 1)
    if len(data) <= limit:
        return data
    try:
        info = os.fstat(handle.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):  # a stream without a descriptor
        info = None
    if info is not None and stat.S_ISREG(info.st_mode) and info.st_size > limit:
        limits.check_artifact(info.st_size)  # the store's own message: size, limit, setting
    raise LimitExceededError(
        f"input is more than {limit:,} bytes (read from a stream, stopped past the limit), over "
        f"the {limit:,}-byte limit per artifact (raise it with max_artifact_bytes in "
        "cargohold.toml or CARGOHOLD_MAX_ARTIFACT_BYTES)",
        reason="artifact_too_large",
        setting="max_artifact_bytes",
        limit=limit,
    )


@cli.command()
@click.argument("file", metavar="FILE|-", type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--media-type",
    metavar="TYPE/SUBTYPE",
    help="Media type of the bytes. Default: from FILE's name; else, for text, from --kind "
    "(log, csv, diff...) or what the bytes prove (JSON), else text/plain; for binary, its "
    "format (PNG, PDF, gzip...), else application/octet-stream.",
)
@click.option("--kind", help="A short label of what the artifact is (json, log, diff...).")
@click.option("--tool", help="Name of the tool that produced the bytes.")
@click.option(
    "--ttl",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Keep the artifact this long (default and maximum come from the configuration: "
    "24 h and 7 days unless changed).",
)
@click.option(
    "--sensitivity",
    type=click.Choice([s.value for s in Sensitivity]),
    default=Sensitivity.INTERNAL.value,
    show_default=True,
    help="How private the bytes are. secret, credential and raw_auth are always refused (exit 8).",
)
def put(
    file: str,
    media_type: str | None,
    kind: str | None,
    tool: str | None,
    ttl: float | None,
    sensitivity: str,
) -> None:
    """Store FILE (or stdin, with -) and print its reference.

    The exact bytes are stored durably before the reference is printed, on stdout, one line.
    Storing the same bytes again in the same scope prints the same reference and writes nothing
    (stderr says "existing").

    \b
    Examples:
      cargohold put build.log --tool pytest --kind log
      curl -s https://example.org/data.json | cargohold put - --media-type application/json
    """
    app = get_app()
    try:
        with click.open_file(file, "rb") as handle:
            data = _read_input(handle, app.settings.limits)
    except OSError as exc:
        # The path is the caller's own argument, not the store's; the OS text is its strerror only.
        reason = exc.strerror or type(exc).__name__
        click.echo(
            f"cargohold: error: cannot read {click.format_filename(file)}: {reason}", err=True
        )
        bad_argument = isinstance(exc, FileNotFoundError | IsADirectoryError | NotADirectoryError)
        raise click.exceptions.Exit(
            int(ExitCode.USAGE if bad_argument else ExitCode.ERROR)
        ) from None
    if media_type is None:
        media_type = fitting_media_type(data, name=None if file == "-" else file, kind=kind)
    # The secrets policy: no credential is stored.
    from cargohold._secrets import redaction_note, screen_put

    data, sensitivity = screen_put(
        data, app.settings.secrets_policy, tool=tool, sensitivity=sensitivity
    )
    with Busy(f"storing {human_bytes(len(data))}...", len(data)):
        result = app.scoped.put(
            data, media_type=media_type, kind=kind, tool=tool, ttl=ttl, sensitivity=sensitivity
        )
    click.echo(str(result.ref))
    note = redaction_note(data)  # kinds and lines of the markers the policy left; never a value
    if note:
        click.echo(f"cargohold: {note}", err=True)
    if result.existing:
        click.echo("cargohold: existing: already stored in this scope; nothing written", err=True)
    elif not result.blob_written:
        click.echo(
            "cargohold: recorded for this scope; the bytes were already stored (no second write)",
            err=True,
        )


# -- cat ----------------------------------------------------------------------------------------


def _parse_range(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[int, int | None] | None:
    if value is None:
        return None
    start_text, sep, end_text = value.partition(":")
    try:
        if not sep:
            raise ValueError
        start = int(start_text) if start_text.strip() else 0
        end = int(end_text) if end_text.strip() else None
    except ValueError:
        raise click.BadParameter("expected START:END, e.g. 0:4096, 100: or :4096") from None
    if start < 0 or (end is not None and end < start):
        raise click.BadParameter("START and END are byte offsets, 0 <= START <= END")
    return start, end


@cli.command()
@click.argument("ref")
@click.option(
    "--range",
    "span",
    metavar="START:END",
    callback=_parse_range,
    help="Only bytes START (inclusive) to END (exclusive); either side may be left out.",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=0),
    metavar="N",
    help="Refuse (exit 7, nothing written) when the answer would be longer than N bytes.",
)
def cat(ref: str, span: tuple[int, int | None] | None, max_bytes: int | None) -> None:
    """Write the exact, verified bytes of REF to stdout.

    REF is a reference (artifact://sha256/<64 hex>), its 64-hex digest, or a prefix of the digest
    of at least 4 hex digits that names one artifact of this scope (as git resolves commits).

    A whole read checks the SHA-256 of the whole body; a range read re-hashes only the chunks it
    touches. Bytes that no longer match their digest are never written (exit 5). Into a pipe
    or a file the bytes are exact; on a terminal, control characters are shown as \\xNN.

    \b
    Examples:
      cargohold cat artifact://sha256/<hex> > copy.json
      cargohold cat artifact://sha256/<hex> --range :4096
      cargohold cat artifact://sha256/<hex> --range 100: --max-bytes 32768
      cargohold cat 9f86d081 | head
    """
    start, end = span if span is not None else (0, None)
    app = get_app()
    result = app.scoped.read(app.resolve_ref(ref), start=start, end=end, max_bytes=max_bytes)
    if not result.ok or result.data is None:
        raise fail_outcome(result)
    size = result.record.size if result.record is not None else None
    if size is not None and 0 < start >= size and (end is None or end > start):
        # A range that asks for bytes and gets none is a mistake to say, not an empty success.
        asked = f"{start}:{'' if end is None else end}"
        within = f"a range lies within 0:{size}" if size else "it is empty: only 0:0 reads"
        click.echo(
            f"cargohold: error: --range {asked} starts at or past the end: the artifact holds "
            f"{size:,} bytes, so {within}",
            err=True,
        )
        raise click.exceptions.Exit(int(ExitCode.USAGE))
    write_bytes(result.data)  # exact into a pipe or file; escaped on a terminal


# -- show, ls, du -------------------------------------------------------------------------------


def _echo_json(value: object) -> None:
    click.echo(json_text(value))


def _dash(value: object) -> str:
    return "-" if value is None else str(value)


def _stub_kind(app: App, record: ArtifactRecord) -> str | None:
    """The kind a stub of these bytes states (``log``, ``code (python)``), or ``None``.

    Detection looks at the first 64 KiB only, so only those bytes are read (and verified).
    """
    from cargohold.projection import detect
    from cargohold.projection._detect import SNIFF

    head = app.scoped.read(record.ref, start=0, end=min(SNIFF, record.size))
    if not head.ok or head.data is None:
        return None
    found = detect(head.data, media_type=record.media_type)
    return f"{found.kind} ({found.detail})" if found.detail else found.kind


@cli.command()
@click.argument("ref")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def show(ref: str, as_json: bool) -> None:
    """Show the metadata of REF (a reference, or a unique prefix of its digest).

    Shows size, media type, kind, producing tool, sensitivity, whether the body is complete,
    when it was created and when it expires (UTC), its classification, and the artifact it was
    derived from (its parent, e.g. by artifact_patch), if any. The kind is the one the
    producer named (`put --kind`), else the kind a stub of the bytes states (json, log, code
    (python)...), detected from the first 64 KiB. An expired artifact is shown, and the exit
    status is 6.

    \b
    Examples:
      cargohold show artifact://sha256/<hex> --json
      cargohold show 9f86d081
    """
    app = get_app()
    result = app.scoped.stat(app.resolve_ref(ref))
    record = result.record
    if record is None:
        raise fail_outcome(result)
    fields = record_fields(record, now=time.time())
    if fields["kind"] is None and result.ok:
        fields["kind"] = _stub_kind(app, record)
    if as_json:
        _echo_json(fields)
    else:
        size = f"{record.size:,} bytes ({human_bytes(record.size)})"
        expires = fields["expires"] + (
            "  " + click.style("expired", fg="red") if fields["expired"] else ""
        )
        rows = [
            ("ref", fields["ref"]),
            ("size", size),
            ("media type", record.media_type),
            ("kind", _dash(fields["kind"])),
            ("tool", _dash(record.tool)),
            ("sensitivity", record.sensitivity.value),
            ("complete", "yes" if record.complete else "no (truncated by its producer)"),
            ("created", fields["created"]),
            ("expires", expires),
            ("classification", _dash(record.classification)),
            ("parent", _dash(fields["parent"])),
        ]
        for label, value in rows:
            click.echo(f"{click.style(f'{label:<15}', dim=True)}{value}")
    if not result.ok:
        raise fail_outcome(result)


@cli.command(name="ls")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array, oldest first.")
def list_(as_json: bool) -> None:
    """List this scope's artifacts, oldest first, marking expired ones.

    The kind is the one the producer named, else the one a stub of the bytes states (as
    `show` gives it).

    \b
    Examples:
      cargohold ls
      cargohold --session run-7 ls --json
    """
    app = get_app()
    now = time.time()
    records: list[dict[str, Any]] = []
    for record in app.scoped.artifacts():
        fields = record_fields(record, now=now)
        if fields["kind"] is None and not fields["expired"]:
            fields["kind"] = _stub_kind(app, record)  # as `show` states it
        records.append(fields)
    if as_json:
        _echo_json(records)
        return
    if not records:
        click.echo("cargohold: no artifacts in this scope", err=True)
        return
    columns = [
        [
            r["ref"],
            human_bytes(r["size"]),
            r["media_type"],
            _dash(r["kind"]),
            _dash(r["tool"]),
            r["expires"],
        ]
        for r in records
    ]
    header = ["REF", "SIZE", "MEDIA TYPE", "KIND", "TOOL", "EXPIRES"]
    widths = [max(len(row[i]) for row in [header, *columns]) for i in range(len(header))]
    click.echo(click.style(_row(header, widths), bold=True))
    for fields, row in zip(records, columns, strict=True):
        line = _row(row, widths)
        if fields["expired"]:
            line += "  " + click.style("expired", fg="red")
        click.echo(line)


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option(
    "--all-tenants",
    is_flag=True,
    help="Also show what the whole store holds, every tenant's (an operator's figure).",
)
def du(as_json: bool, all_tenants: bool) -> None:
    """Show what this session and this tenant hold, against their limits.

    A session counts its unexpired artifacts; a tenant counts its distinct blobs until gc
    removes them (bytes are shared within a tenant only). Another tenant's figures are never
    shown: the whole store's only with --all-tenants, for an operator.

    \b
    Examples:
      cargohold du --json
      cargohold du --all-tenants
    """
    from cargohold.store._core import tenant_quota

    app = get_app()
    limits = app.settings.limits
    session = app.scoped.usage()
    tenant = app.store.tenant_usage(app.scoped.scope)
    max_objects, max_bytes = tenant_quota(limits)
    report: dict[str, dict[str, int | None]] = {
        "session": {
            "objects": session.objects,
            "bytes": session.bytes,
            "max_objects": limits.session_objects,
            "max_bytes": limits.session_bytes,
        },
        "tenant": {
            "objects": tenant.objects,
            "bytes": tenant.bytes,
            "max_objects": max_objects,
            "max_bytes": max_bytes,
        },
    }
    store = app.store.store_usage() if all_tenants else None
    if store is not None:
        report["store"] = {
            "objects": store.objects,
            "bytes": store.bytes,
            "max_objects": limits.store_objects,
            "max_bytes": limits.store_bytes,
        }
    if as_json:
        _echo_json(report)
        return
    click.echo(
        f"session  {session.objects:,} of {limits.session_objects:,} artifacts, "
        f"{human_bytes(session.bytes)} of {human_bytes(limits.session_bytes)} (unexpired)"
    )
    quota = (
        "no tenant quota"
        if (max_objects, max_bytes) == (None, None)
        else f"limits {max_objects or '-'} blobs, "
        f"{'-' if max_bytes is None else human_bytes(max_bytes)}"
    )
    click.echo(
        f"tenant   {_plural(tenant.objects, 'blob')}, {human_bytes(tenant.bytes)} "
        f"(until gc; {quota})"
    )
    if store is not None:
        click.echo(
            f"store    {store.objects:,} of {limits.store_objects:,} blobs, "
            f"{human_bytes(store.bytes)} of {human_bytes(limits.store_bytes)} (until gc, "
            "every tenant)"
        )


# -- gc, verify ---------------------------------------------------------------------------------


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


@cli.command()
@click.option("--dry-run", is_flag=True, help="Only say what would be removed.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def gc(dry_run: bool, as_json: bool) -> None:
    """Remove expired artifacts, and the bytes no live artifact names, from the whole store.

    Explicit and deterministic: nothing is ever removed in the background, and only expired
    objects inside the managed store are removed. Corrupt or unknown entries are kept (see
    `cargohold verify`).

    \b
    Examples:
      cargohold gc --dry-run
      cargohold gc
    """
    with ProgressBar("removing expired blobs") as bar:
        report = get_app().store.gc(dry_run=dry_run, progress=bar)
    if as_json:
        _echo_json(
            {
                "dry_run": report.dry_run,
                "artifacts": report.artifacts,
                "blobs": report.blobs,
                "bytes": report.bytes,
            }
        )
        return
    if report.artifacts == 0:
        click.echo("nothing to remove: no expired artifacts")
        return
    verb = "would remove" if dry_run else "removed"
    click.echo(
        f"{verb} {_plural(report.artifacts, 'expired artifact')} and "
        f"{_plural(report.blobs, 'blob')} ({human_bytes(report.bytes)})"
    )


_HOUSEKEEPING = frozenset({"orphan", "staging", "unindexed", "stray_index"})
"""Finding kinds that lose nothing: reported, not failed. An interrupted write leaves the first two;
the search index's own gaps (a record it does not hold, which a re-put of the bytes heals; rows
of no record) cost a search a hit at worst, never a byte."""


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def verify(as_json: bool) -> None:
    """Re-hash every blob in the store and report what is wrong; exit 1 on damage.

    Damage (exit 1): corrupt (bytes do not match their digest, a record whose size is not its
    blob's, a malformed index row, or not a plain file where a blob should be), missing_blob (a
    record whose bytes are gone), permissions (a file not 0600 or a directory not 0700), unknown
    (an entry the store did not make). Housekeeping (reported, exit 0): orphan (bytes no record
    names) and staging (a staged file whose writer died), which gc removes. Nothing is deleted
    or repaired here.

    \b
    Example:
      cargohold verify --json
    """
    app = get_app()
    with ProgressBar("verifying blobs") as bar:
        findings = app.store.verify(progress=bar)
    blobs = bar.total or app.store.store_usage().objects
    damage = sum(1 for f in findings if f.kind not in _HOUSEKEEPING)
    # An entry's place under the store's root, where the backend says (an operator's command:
    # the root is the one they named; no event or model-facing answer carries it).
    rows: list[dict[str, str | None]] = []
    for f in findings:
        row = {
            "kind": f.kind,
            "ref": None if f.digest is None else f"artifact://sha256/{f.digest}",
            "detail": f.detail,
        }
        if f.path:  # where the entry lies under the root, when the backend says
            row["path"] = f.path
        rows.append(row)
    if as_json:
        _echo_json({"clean": not findings, "damaged": damage > 0, "blobs": blobs, "findings": rows})
    elif not findings:
        click.echo(f"clean: {_plural(blobs, 'blob')} verified, nothing wrong")
    else:
        for row in rows:
            where = f" ({row['path']})" if row.get("path") else ""
            click.echo(f"{row['kind']:<12} {_dash(row['ref']):<82} {row['detail']}{where}")
        summary = f"{damage:,} damaged" if damage else "housekeeping only, no damage"
        click.echo(f"{_plural(len(rows), 'finding')} ({summary}); nothing was deleted", err=True)
    if damage:
        raise click.exceptions.Exit(int(ExitCode.ERROR))


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: run the group, return the exit status (never a traceback)."""
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="cargohold")
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else int(ExitCode.ERROR))
    return 0
