"""Progress on stderr for long work, drawn only on a terminal: a bar for gc and verify, a spinner
for one long step (the offload or put of a body of several MiB)."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID
    from rich.status import Status


class ProgressBar:
    """A :data:`cargohold.store.Progress` callback drawing a transient bar on stderr.

    rich is imported on the first report of real work, not before: most runs of ``gc`` have
    nothing to do, and ``--help`` should not pay for rich. Nothing is drawn when stderr is not a
    terminal, so logs and pipes get the result lines only.

    Args:
        description: What the bar counts, e.g. ``verifying blobs``.
    """

    def __init__(self, description: str) -> None:
        self._description = description
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._off = False
        self.total = 0

    def __call__(self, done: int, total: int) -> None:
        self.total = max(self.total, total)
        if self._off or total <= 0:
            return
        if self._progress is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            console = Console(stderr=True)
            if not console.is_terminal:
                self._off = True
                return
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self._description, total=total)
        if self._task is not None:
            self._progress.update(self._task, completed=done, total=total)

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


BIG_BODY = 4 * 1024 * 1024
"""A body from this size on takes long enough to store and project (about a second at 16 MiB)
that a terminal is told what is happening."""


class Busy:
    """A transient spinner on stderr while one long step runs, for a body of :data:`BIG_BODY`
    bytes or more, and only when stderr is a terminal (logs and pipes get nothing).

    Args:
        description: What is happening, e.g. ``offloading 12.0 MiB``.
        size: The body's size in bytes.
    """

    def __init__(self, description: str, size: int) -> None:
        self._description = description
        self._size = size
        self._status: Status | None = None

    def __enter__(self) -> Busy:
        if self._size < BIG_BODY:
            return self
        from rich.console import Console

        console = Console(stderr=True)
        if console.is_terminal:
            self._status = console.status(self._description)
            self._status.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
