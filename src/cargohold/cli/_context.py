"""Per-invocation state of the command line: settings resolved once, the store opened on demand."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from cargohold._config import DEFAULT_SESSION, EVENTS_IN_STORE, Settings, load_settings
from cargohold._errors import ConfigError, UsageError
from cargohold._records import ReadResult
from cargohold._ref import PREFIX
from cargohold.cli._exit import OUTCOME_EXIT, ExitCode
from cargohold.cli._render import outcome_message

if TYPE_CHECKING:
    # The store and its facade are imported when a command opens the store, not at start-up:
    # `cargohold events` and every `--help` never need them.
    from cargohold._events import Reporter, Sink
    from cargohold._facade import ScopedStore
    from cargohold._offload import Offloader
    from cargohold._rehydrate import Rehydrator
    from cargohold.store import StoreBackend
    from cargohold.store._postgres import PostgresStore

MIN_PREFIX = 4
"""Fewest hex digits of a reference prefix the command line accepts (as ``git`` does)."""
_CANDIDATES_SHOWN = 10
_HEX = re.compile(r"[0-9a-f]+")


def default_events_path() -> Path:
    """``events.jsonl`` in the user's state directory (XDG), where CLI decisions are logged."""
    import platformdirs

    return Path(platformdirs.user_state_dir("cargohold", appauthor=False)) / "events.jsonl"


class App:
    """What the group's global options resolve to.

    Nothing is resolved or opened in the group callback itself: ``cargohold put --help`` must work
    with a broken configuration, and must not create a store directory.

    Args:
        overrides: The global options given on the command line (``None`` when absent).
        config_file: The ``--config`` file, if any.
    """

    def __init__(
        self, overrides: Mapping[str, Any], config_file: str | os.PathLike[str] | None
    ) -> None:
        self._overrides = dict(overrides)
        self._config_file = config_file
        self._settings: Settings | None = None
        self._store: StoreBackend | None = None
        self._scoped: ScopedStore | None = None
        self._events: IO[str] | None = None
        self._reporter: Reporter | None = None
        self._sink: Sink | None = None

    @property
    def settings(self) -> Settings:
        """The settings, resolved once: options > environment > file > defaults."""
        if self._settings is None:
            self._settings = load_settings(
                self._overrides, config_file=self._config_file, default_session=DEFAULT_SESSION
            )
        return self._settings

    @property
    def store(self) -> StoreBackend:
        """The store the settings name, opened on first use and closed when the command ends."""
        if self._store is None:
            settings = self.settings
            self._store = settings.open_store()
        return self._store

    @property
    def scoped(self) -> ScopedStore:
        """The store bound to the settings' scope."""
        if self._scoped is None:
            from cargohold._facade import ScopedStore

            self._scoped = ScopedStore(self.store, self.settings.scope())
        return self._scoped

    def resolve_ref(self, text: str) -> str:
        """The reference a command-line argument names, as ``git`` resolves a commit.

        A full reference (``artifact://sha256/<64 hex>``) and anything else that is not lowercase
        hex pass through unchanged, for the store to parse (a malformed one is a usage error). A
        bare 64-hex digest is that digest's reference. A shorter hex string of at least
        :data:`MIN_PREFIX` digits is a prefix, resolved against this scope's artifacts only:
        one match is that artifact; none ends the command as a missing reference would (exit 3);
        several are a usage error (exit 2) that lists them.
        """
        if not _HEX.fullmatch(text):
            return text
        if len(text) == 64:
            return PREFIX + text
        if len(text) < MIN_PREFIX:
            raise UsageError(
                f"a reference prefix needs at least {MIN_PREFIX} hex digits "
                "(`cargohold ls` lists the full references)"
            )
        if len(text) > 64:
            return text  # too long to be a digest: the store's parse error says so
        found = sorted(
            {str(r.ref) for r in self.scoped.artifacts() if r.ref.digest.startswith(text)}
        )
        if len(found) == 1:
            return found[0]
        if not found:
            click.echo(
                f"cargohold: error: no artifact in this scope has a reference starting with {text}"
                " (missing)",
                err=True,
            )
            raise click.exceptions.Exit(int(ExitCode.MISSING))
        click.echo(
            f"cargohold: error: reference prefix {text} is ambiguous: {len(found)} artifacts in "
            "this scope match; give more hex digits",
            err=True,
        )
        for ref in found[:_CANDIDATES_SHOWN]:
            click.echo(f"  {ref}", err=True)
        if len(found) > _CANDIDATES_SHOWN:
            click.echo(f"  and {len(found) - _CANDIDATES_SHOWN} more", err=True)
        raise click.exceptions.Exit(int(ExitCode.USAGE))

    @property
    def default_store(self) -> bool:
        """Whether the store is the embedded default (no URL named anywhere)."""
        return self.settings.store is None

    @property
    def events_in_store(self) -> bool:
        """Whether decision events go to the PostgreSQL store's events table
        (``events_log = "store"``) rather than to a JSON-lines file."""
        return self.settings.events_log == EVENTS_IN_STORE

    @property
    def events_path(self) -> Path:
        """The JSON-lines file decision events go to (with ``events_log = "store"``, the
        default one: the state directory the demo writes its report next to)."""
        named = self.settings.events_log
        if not named or named == EVENTS_IN_STORE:
            return default_events_path()
        return Path(named).expanduser()

    @property
    def events_table(self) -> PostgresStore:
        """The store whose ``events`` table holds this command line's events, with
        ``events_log = "store"``: the configured store, which must be PostgreSQL.

        Raises:
            ConfigError: the store is not PostgreSQL (checked on its URL, before any store
                is opened).
        """
        named = self.settings.store or ""
        if not named.startswith(("postgresql:", "postgres:")):
            raise ConfigError(
                'invalid configuration: events_log = "store" writes the decision events into '
                "a PostgreSQL store's events table, and the store is not PostgreSQL: name a "
                "postgresql:// store (--store, CARGOHOLD_STORE, store) or a JSON-lines file "
                "as events_log"
            )
        from cargohold.store._postgres import PostgresStore

        store = self.store
        if not isinstance(store, PostgresStore):  # pragma: no cover - its URL made it one
            raise ConfigError("the PostgreSQL store URL did not open a PostgreSQL store")
        return store

    def run_tag(self, session: str | None = None) -> str:
        """The run tag the events of ``session`` (the settings' session when ``None``) carry,
        in the settings' tenant and user, under the store's marker key (the store is opened).

        Raises:
            InvalidScopeError: ``session`` is not a valid scope part.
        """
        from cargohold._events import run_tag
        from cargohold._scope import Scope

        settings = self.settings
        scope = (
            settings.scope() if session is None else Scope(settings.tenant, settings.user, session)
        )
        return run_tag(self.store.marker_key(), scope)

    @property
    def events_sink(self) -> Sink:
        """Where this command's decision events go, made once: with ``events_log = "store"``
        a :class:`~cargohold.PostgresEventsSink` on the store (:attr:`events_table`), else a
        sink appending to the events log (0600, in a 0700 directory).

        Raises:
            ConfigError: ``events_log = "store"`` with a store that is not PostgreSQL.
        """
        if self._sink is None:
            if self.events_in_store:
                from cargohold._sinks import PostgresEventsSink

                self._sink = PostgresEventsSink(self.events_table)
                return self._sink
            from cargohold._sinks import JsonLinesSink

            path = self.events_path
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._events = os.fdopen(fd, "a", encoding="utf-8")
            self._sink = JsonLinesSink(self._events)
        return self._sink

    @property
    def reporter(self) -> Reporter:
        """A reporter appending this command's decision events to the events log."""
        if self._reporter is None:
            from cargohold._events import Reporter

            self._reporter = Reporter([self.events_sink], agent_id="cli")
        return self._reporter

    def scoped_reporter(self) -> Reporter:
        """:attr:`reporter` with this scope's run tag on its events (``cargohold report
        --session``). The store's key is read at the first event, so a command that reports
        nothing (``cargohold guard`` passing a request) never opens the store for it."""
        return self.reporter.for_scope(lambda: self.store.marker_key(), self.settings.scope())

    def offloader(self, *, threshold: int | None = None) -> Offloader:
        """An offloader on this scope with the configured threshold, budget and reporter."""
        from cargohold._offload import Offloader

        settings = self.settings
        return Offloader(
            self.scoped,
            threshold=threshold or settings.heavy_threshold,
            tool_thresholds={} if threshold else settings.tool_thresholds,
            budget=settings.budget,
            reporter=self.scoped_reporter(),
            secrets_policy=settings.secrets_policy,
        )

    def rehydrator(self) -> Rehydrator:
        """A rehydrator on this scope with the configured read budget and reporter."""
        from cargohold._rehydrate import Rehydrator

        return Rehydrator(
            self.scoped, reporter=self.scoped_reporter(), default_budget=self.settings.read_budget
        )

    def close(self) -> None:
        """Close the store and the events log if they were opened. Idempotent."""
        store, self._store, self._scoped = self._store, None, None
        events, self._events, self._reporter, self._sink = self._events, None, None, None
        if events is not None:
            events.close()
        if store is not None:
            store.close()


def get_app() -> App:
    """The :class:`App` the group callback set up for the running command."""
    app = click.get_current_context().find_root().obj
    if not isinstance(app, App):
        raise RuntimeError("the cargohold group callback did not run")
    return app


def fail_outcome(result: ReadResult) -> click.exceptions.Exit:
    """Report a read that did not resolve (one stderr line) and build its exit."""
    click.echo(outcome_message(result.outcome, result.ref), err=True)
    return click.exceptions.Exit(int(OUTCOME_EXIT[result.outcome]))
