"""``cargohold db``: the PostgreSQL store's schema, upgraded explicitly.

A shared store's schema changes only when someone runs ``cargohold db upgrade``; agent hosts
opening the store check its version and refuse to run against a schema they do not know.
psycopg is imported only when one of these commands runs.
"""

from __future__ import annotations

import json

import click

from cargohold._errors import ConfigError
from cargohold.cli._context import get_app
from cargohold.cli._exit import ExitCode

_SCHEMA_HELP = "PostgreSQL schema holding the store's tables."


def _postgres_url() -> str:
    url = get_app().settings.store
    if not url or not url.startswith(("postgresql:", "postgres:")):
        raise ConfigError(
            "cargohold db manages a PostgreSQL store: name one with --store postgresql://... "
            "or CARGOHOLD_STORE (the local store upgrades its own schema when opened)"
        )
    return url


@click.group()
def db() -> None:
    """Manage the PostgreSQL store's schema: see where it stands, and upgrade it.

    \b
    Examples:
      cargohold --store postgresql://cargo@db.internal/agents db status
      cargohold --store postgresql://cargo@db.internal/agents db upgrade
    """


@db.command()
@click.option("--schema", default="cargohold", show_default=True, help=_SCHEMA_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def upgrade(schema: str, as_json: bool) -> None:
    """Create the store's tables, or apply the migrations this cargohold has and the store lacks.

    Safe to run again, and from several hosts at once: each migration is applied once.
    """
    url = _postgres_url()
    from cargohold.store._postgres import upgrade_schema

    before, after = upgrade_schema(url, schema=schema)
    if as_json:
        click.echo(json.dumps({"from": before, "to": after, "changed": before != after}))
    elif before == after:
        click.echo(f"schema is up to date (version {after})")
    else:
        click.echo(f"schema upgraded from version {before} to {after}")


@db.command()
@click.option("--schema", default="cargohold", show_default=True, help=_SCHEMA_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def status(schema: str, as_json: bool) -> None:
    """Show the store's schema version against this cargohold's; exit 1 unless they match."""
    url = _postgres_url()
    from cargohold.store._postgres import schema_status

    found = schema_status(url, schema=schema)
    if as_json:
        click.echo(
            json.dumps({"current": found.current, "latest": found.latest, "state": found.state})
        )
    elif found.state == "current":
        click.echo(f"schema version {found.current}: up to date")
    elif found.state == "behind":
        click.echo(
            f"schema version {found.current}, this cargohold needs {found.latest}: "
            "run `cargohold db upgrade`"
        )
    else:
        click.echo(
            f"schema version {found.current} is newer than this cargohold knows "
            f"({found.latest}): upgrade cargohold"
        )
    if found.state != "current":
        raise click.exceptions.Exit(int(ExitCode.ERROR))
