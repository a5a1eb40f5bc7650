"""The configured events log, as the sink of a guard given no reporter.

A guard made with no reporter (a bare ``guard_openai(client)``, ``check_request(...)``,
``Guard()``) reports its decisions where the CLI reports every decision: the JSON-lines events
log (``events_log`` in the configuration, by default ``events.jsonl`` in the user's state
directory). A guard has no ``close``, so the file is opened for each event and closed again;
events are rare (a failure, a model with no known window), so that costs nothing that matters.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from cargohold._sinks import JsonLinesSink

if TYPE_CHECKING:
    from cargohold._events import DecisionEvent

AGENT_ID = "guard"
"""The agent id of a configured guard's events (an attribution label)."""


def default_events_path() -> Path:
    """``events.jsonl`` in the user's state directory (XDG): the CLI's default events log too
    (``cargohold.cli._context.default_events_path``; a test holds the two together)."""
    import platformdirs

    return Path(platformdirs.user_state_dir("cargohold", appauthor=False)) / "events.jsonl"


def events_path(named: str | None) -> Path:
    """The events log a configuration names (``events_log``), or the default one (also for
    ``"store"``: a guard holds no store to write into)."""
    return Path(named).expanduser() if named and named != "store" else default_events_path()


class EventsLogSink:
    """Appends each event as one JSON line to the events log (0600, in a 0700 directory).

    Args:
        path: The events log; ``None`` to read the configuration when the first event comes.
    """

    def __init__(self, path: Path | None = None) -> None:
        self._path = path

    def __repr__(self) -> str:  # never the path
        return "EventsLogSink()"

    def emit(self, event: DecisionEvent) -> None:
        """Append ``event``; an error is the reporter's to contain (reporting never breaks the
        decision it reports)."""
        if self._path is None:
            from cargohold._config import load_settings

            self._path = events_path(load_settings().events_log)
        self._path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as stream:
            JsonLinesSink(stream).emit(event)
