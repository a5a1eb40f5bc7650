"""Event sinks: JSON lines, Python logging, OpenTelemetry (API only), a run summary, a list,
and a PostgreSQL store's events table."""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from cargohold._events import (
    DecisionEvent,
    GuardOutcome,
    OffloadOutcome,
    Operation,
    RequestOutcome,
)

if TYPE_CHECKING:
    from cargohold.store import PostgresStore


class ListSink:
    """Keeps every event in :attr:`events`, in order. For tests and in-process inspection."""

    def __init__(self) -> None:
        self.events: list[DecisionEvent] = []

    def __repr__(self) -> str:
        return f"ListSink({len(self.events)} events)"

    def emit(self, event: DecisionEvent) -> None:
        """Keep ``event`` in :attr:`events`, in order."""
        self.events.append(event)


def _stamp(seconds: float) -> str:
    """An event's ``time``: UTC, ISO 8601 to the millisecond, ``Z`` for the zone."""
    moment = dt.datetime.fromtimestamp(seconds, tz=dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonLinesSink:
    """Writes one JSON object per event to a text stream, flushed per event.

    Each line is the event's fields plus ``time``, when the sink received it (UTC, ISO 8601): the
    event itself carries no clock, so that the same decisions give the same events.

    Args:
        stream: An open text stream (a file opened for append, ``sys.stderr``...). The caller owns
            it and closes it.
        clock: Seconds since the epoch; injected in tests.
    """

    def __init__(self, stream: IO[str], *, clock: Callable[[], float] = time.time) -> None:
        self._stream = stream
        self._clock = clock
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "JsonLinesSink()"

    def emit(self, event: DecisionEvent) -> None:
        """Write ``event`` as one JSON line (its fields, which hold no body, path or owner, and
        the time it was received), flushed at once."""
        fields: dict[str, str | int | None] = {"time": _stamp(self._clock()), **event.as_dict()}
        line = json.dumps(fields, separators=(",", ":"), sort_keys=True)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


class LoggingSink:
    """Logs each event on a :mod:`logging` logger, with the fields as ``extra`` data.

    Args:
        logger: The logger; ``cargohold.events`` when omitted.
        level: The level of ordinary decisions; guard failures log at ``WARNING`` or above.
    """

    def __init__(self, logger: logging.Logger | None = None, level: int = logging.INFO) -> None:
        self._logger = logger or logging.getLogger("cargohold.events")
        self._level = level

    def __repr__(self) -> str:
        return "LoggingSink()"

    def emit(self, event: DecisionEvent) -> None:
        """Log ``event`` as one record of the logger, its fields in ``extra``."""
        level = self._level
        if event.operation is Operation.GUARD:
            level = max(level, logging.WARNING)
        self._logger.log(
            level,
            "cargohold %s %s (%s) %d/%d bytes seq=%d",
            event.operation.value,
            event.outcome.value,
            event.reason.value,
            event.observed_bytes,
            event.limit_bytes,
            event.sequence,
            extra={"cargohold": event.as_dict()},
        )


class OpenTelemetrySink:
    """Adds each event to the current OpenTelemetry span (``cargohold.decision``).

    Uses only ``opentelemetry-api`` (the ``cargohold[otel]`` extra); the application configures
    the SDK and exporters. With no active span the API's no-op span drops the event.
    """

    def __init__(self) -> None:
        try:
            from opentelemetry.trace import get_current_span
        except ImportError as exc:
            from cargohold._errors import ConfigError

            raise ConfigError(
                "the OpenTelemetry sink needs the otel extra: pip install 'cargohold[otel]'"
            ) from exc
        self._current_span = get_current_span

    def __repr__(self) -> str:
        return "OpenTelemetrySink()"

    def emit(self, event: DecisionEvent) -> None:
        """Add ``event`` to the current span as a span event, its set fields as attributes."""
        attributes = {
            f"cargohold.{key}": value for key, value in event.as_dict().items() if value is not None
        }
        self._current_span().add_event("cargohold.decision", attributes=attributes)


_KEPT_OUT = frozenset({OffloadOutcome.OFFLOADED, OffloadOutcome.EXISTING_REFERENCE})
_UNCHECKED = GuardOutcome.CONTEXT_WINDOW_UNCHECKED


@dataclass(slots=True)
class RunSummary:
    """Aggregates a run's decisions: counts by outcome, bytes and tokens kept out of context,
    and, behind the gateway, what each request kept out.

    Use it as a sink; read it at the end of the run (:meth:`as_dict`, :meth:`lines`).

    The request figures count ``request`` events (one per request through the gateway): a
    forwarded request's bytes and tokens kept out (its replaced parts, a stub reused from an
    earlier turn counting again on each turn it keeps its bytes out), summed and the largest
    one; a refused or failed request is counted, but it kept nothing out of a context it never
    reached.
    """

    decisions: Counter[str] = field(default_factory=Counter)
    body_bytes_offloaded: int = 0
    context_bytes_instead: int = 0
    tokens_offloaded: int = 0
    recovered_bytes: int = 0
    guard_failures: int = 0
    requests: int = 0
    """Requests through the gateway (``request`` events), whatever their outcome."""
    requests_forwarded: int = 0
    request_bytes: int = 0
    """The forwarded requests' bytes as their clients sent them."""
    forwarded_bytes: int = 0
    """The forwarded requests' bytes as they were sent on."""
    request_bytes_kept_out: int = 0
    request_tokens_kept_out: int = 0
    largest_request_bytes_kept_out: int = 0
    largest_request_tokens_kept_out: int = 0
    """The estimated tokens kept out of the one request that kept out the most bytes."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def emit(self, event: DecisionEvent) -> None:
        """Count ``event`` into the summary (by outcome; bytes and tokens kept out)."""
        with self._lock:
            self.decisions[f"{event.operation.value}:{event.outcome.value}"] += 1
            if event.outcome in _KEPT_OUT:
                self.body_bytes_offloaded += event.observed_bytes
                self.context_bytes_instead += event.context_bytes
                self.tokens_offloaded += event.estimated_tokens
            elif event.operation is Operation.REHYDRATE:
                self.recovered_bytes += event.context_bytes
            elif event.operation is Operation.GUARD and event.outcome is not _UNCHECKED:
                self.guard_failures += 1  # an unchecked window is reported, but it let the call go
            elif event.operation is Operation.REQUEST:
                self._count_request(event)

    def _count_request(self, event: DecisionEvent) -> None:
        # Its parts' own offload events are counted above; this adds the per-request view,
        # never into the decision totals (a reused stub makes no offload event).
        self.requests += 1
        if event.outcome is not RequestOutcome.FORWARDED:
            return
        self.requests_forwarded += 1
        self.request_bytes += event.observed_bytes
        self.forwarded_bytes += event.context_bytes
        self.request_bytes_kept_out += event.kept_out_bytes
        self.request_tokens_kept_out += event.estimated_tokens
        if event.kept_out_bytes > self.largest_request_bytes_kept_out:
            self.largest_request_bytes_kept_out = event.kept_out_bytes
            self.largest_request_tokens_kept_out = event.estimated_tokens

    @property
    def bytes_kept_out(self) -> int:
        """Body bytes that stayed out of the context, net of the stubs that replaced them."""
        return max(0, self.body_bytes_offloaded - self.context_bytes_instead)

    def as_dict(self) -> dict[str, Any]:
        """The summary as JSON-ready data."""
        return {
            "decisions": dict(sorted(self.decisions.items())),
            "body_bytes_offloaded": self.body_bytes_offloaded,
            "context_bytes_instead": self.context_bytes_instead,
            "bytes_kept_out": self.bytes_kept_out,
            "estimated_tokens_kept_out": self.tokens_offloaded,
            "recovered_bytes": self.recovered_bytes,
            "guard_failures": self.guard_failures,
            "requests": self.requests,
            "requests_forwarded": self.requests_forwarded,
            "request_bytes": self.request_bytes,
            "forwarded_bytes": self.forwarded_bytes,
            "request_bytes_kept_out": self.request_bytes_kept_out,
            "request_tokens_kept_out": self.request_tokens_kept_out,
            "largest_request_bytes_kept_out": self.largest_request_bytes_kept_out,
            "largest_request_tokens_kept_out": self.largest_request_tokens_kept_out,
        }

    def lines(self) -> list[str]:
        """A short human-readable summary."""
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.decisions.items())) or "none"
        lines = [
            f"decisions: {counts}",
            f"kept out of context: {self.bytes_kept_out:,} bytes "
            f"(about {self.tokens_offloaded:,} tokens) behind {self.context_bytes_instead:,} "
            "bytes of stubs",
            f"recovered on request: {self.recovered_bytes:,} bytes",
        ]
        if self.requests:
            lines.append(
                f"gateway requests: {self.requests:,} ({self.requests_forwarded:,} forwarded), "
                f"{self.request_bytes:,} bytes in, {self.forwarded_bytes:,} forwarded; kept "
                f"out {self.request_bytes_kept_out:,} bytes (about "
                f"{self.request_tokens_kept_out:,} tokens), at most "
                f"{self.largest_request_bytes_kept_out:,} bytes (about "
                f"{self.largest_request_tokens_kept_out:,} tokens) of one request"
            )
        return lines


MAX_STORE_EVENTS = 200_000
"""The most events :func:`read_store_events` returns: the newest, as ``cargohold events`` reads
only the last 64 MiB of a log (about as many events)."""


class PostgresEventsSink:
    """Writes each event as one row of the ``events`` table of a PostgreSQL store's schema,
    so every host of a shared store reports into one place, which ``cargohold report
    --session S`` reads by the run tag (``cargohold[postgres]``).

    A row is the event's fields as JSON (``event``, which holds no body, path or owner), its
    run tag in a column of its own (indexed, with the row's order), and the time the sink
    received it. The table is part of the store's schema (``cargohold db upgrade`` makes it;
    a store opened at an older version is refused), so the sink creates nothing. The command
    line writes its events here with ``events_log = "store"``.

    Args:
        store: An open :class:`~cargohold.store.PostgresStore`; each event is one
            :meth:`~cargohold.store.PostgresStore.append_event` (a lost connection is the
            store's error, which the reporter logs by class name and skips: reporting never
            breaks a decision).
        clock: Seconds since the epoch; injected in tests.
    """

    def __init__(self, store: PostgresStore, *, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock

    def __repr__(self) -> str:
        return "PostgresEventsSink()"

    def emit(self, event: DecisionEvent) -> None:
        """Insert ``event`` as one row (its fields, its run tag, the time received)."""
        self._store.append_event(event.run, event.as_dict(), received=self._clock())


def read_store_events(
    store: PostgresStore, run: str, *, limit: int = MAX_STORE_EVENTS
) -> list[dict[str, Any]]:
    """The events of one run tag in a PostgreSQL store's ``events`` table, oldest first (the
    newest ``limit`` of them), each with its ``time`` as :class:`JsonLinesSink` writes it.

    Raises:
        UsageError: a ``limit`` that is not a positive integer.
        StoreError: the store cannot be read.
    """
    events: list[dict[str, Any]] = []
    for received, fields in store.run_events(run, limit=limit):
        events.append({"time": _stamp(received), **fields})
    return events
