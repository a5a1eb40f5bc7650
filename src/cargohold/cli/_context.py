"""Per-invocation state of the command line: settings resolved once, the store opened on demand."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from cargohold._config import DEFAULT_SESSION, Settings, load_settings
from cargohold._errors import UsageError
from cargohold._records import ReadResult
from cargohold._ref import PREFIX
from cargohold.cli._exit import OUTCOME_EXIT, ExitCode
from cargohold.cli._render import outcome_message

if TYPE_CHECKING:
    # The store and its facade are imported when a command opens the store, not at start-up:
    # `cargohold events` and every `--help` never need them.
    from cargohold._events import Reporter
    from cargohold._facade import ScopedStore
    from cargohold._offload import Offloader
    from cargohold._rehydrate import Rehydrator
    from cargohold._sinks import JsonLinesSink
    from cargohold.store import StoreBackend

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
        self._sink: JsonLinesSink | None = None

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
    def events_path(self) -> Path:
        """The JSON-lines file decision events go to."""
        named = self.settings.events_log
        return Path(named).expanduser() if named else default_events_path()

    @property
    def events_sink(self) -> JsonLinesSink:
        """A sink appending to the events log (0600, in a 0700 directory), opened once."""
        if self._sink is None:
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
        --session``). Not the plain reporter's: ``cargohold guard`` opens the store only when
        it meets a marker, and a tag needs the store's key."""
        return self.reporter.for_scope(self.store.marker_key, self.scoped.scope)

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
