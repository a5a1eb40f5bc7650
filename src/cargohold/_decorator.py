"""``@cargohold.offload_tool``: a plain Python tool function, its heavy results out of context.

For agent loops written by hand, or frameworks without an adapter: decorate the function that
produces a tool's result, sync or async. Each call is one offload decision (one event): at or
above the heavy threshold the exact bytes are stored and the call returns the stub text; below
it, the call returns the value itself, unchanged. A result that holds credentials comes back
(or is stored) with each one replaced by ``[REDACTED:<kind>]``, unless its tool's secrets policy
rejects or masks them; one over a limit, or that meets a store that is down, returns a bounded
notice instead: never the raw body.

::

    @cargohold.offload_tool(hold)           # a hold you opened: its scope, thresholds, sinks
    def query_orders(day: str) -> str: ...

    @cargohold.offload_tool                 # the configured hold (cargohold.toml, CARGOHOLD_*),
    async def fetch(url: str) -> bytes: ... # opened at the first call as cargohold.open() does
                                            # (a session configured, or InvalidScopeError)

What is stored is the value's own bytes: text as UTF-8, bytes as they are, anything else as its
compact JSON (a ``dict`` is stored as JSON, never as its Python ``repr``).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, overload

from cargohold._errors import UsageError
from cargohold._hold import Hold
from cargohold._records import Sensitivity

if TYPE_CHECKING:
    from cargohold._stub import Budget

P = ParamSpec("P")
T = TypeVar("T")


class ToolDecorator(Protocol):
    """What ``offload_tool(...)`` returns: a decorator for a sync or an async function."""

    @overload
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, T]], /
    ) -> Callable[P, Coroutine[Any, Any, T | str]]: ...

    @overload
    def __call__(self, fn: Callable[P, T], /) -> Callable[P, T | str]: ...


@overload
def offload_tool(
    fn: Callable[P, Coroutine[Any, Any, T]], /
) -> Callable[P, Coroutine[Any, Any, T | str]]: ...


@overload
def offload_tool(fn: Callable[P, T], /) -> Callable[P, T | str]: ...


@overload
def offload_tool(
    hold: Hold | None = None,
    /,
    *,
    tool: str | None = None,
    media_type: str | None = None,
    budget: Budget | str | None = None,
    sensitivity: Sensitivity | str = Sensitivity.INTERNAL,
    classification: str | None = None,
) -> ToolDecorator: ...


def offload_tool(
    target: Any = None,
    /,
    *,
    tool: str | None = None,
    media_type: str | None = None,
    budget: Budget | str | None = None,
    sensitivity: Sensitivity | str = Sensitivity.INTERNAL,
    classification: str | None = None,
) -> Any:
    """Decorate a tool function so its heavy results are offloaded and it returns the stub.

    Use it bare (``@offload_tool``: the configured hold) or called (``@offload_tool(hold,
    tool="orders")``). The decorated function keeps its name, docstring and signature (frameworks
    that read them to build a tool schema see the original), and returns ``str | T``: the stub
    or notice, or the original value when it stays inline.

    Args:
        target: A :class:`~cargohold.Hold`, or ``None`` for the configured one (opened once, at
            the function's first call, exactly as ``cargohold.open()`` resolves it, so its
            first call raises :class:`~cargohold.InvalidScopeError` when no session is
            configured; a function decorated this way keeps its own hold for its lifetime).
        tool: The tool's name in stubs, events and per-tool thresholds (the function's name by
            default).
        media_type: The media type of the results (guessed from the value by default).
        budget: The stub budget (the hold's by default).
        sensitivity: ``public``, ``internal`` (default) or ``restricted``.
        classification: ``exact_required`` to declare the results exact (security evidence,
            a policy, a memory): verbatim excerpts only (the hold's ``tool_classifications``
            by default).

    Raises:
        UsageError: not a function, a generator function, ``target`` neither a hold nor a
            function, or a declared classification other than ``exact_required``.
    """
    if classification is not None and classification != "exact_required":
        raise UsageError("a declared classification can only be exact_required")
    options = _Options(tool, media_type, budget, sensitivity, classification)
    if target is None or isinstance(target, Hold):
        return functools.partial(_decorate, _HoldSource(target), options)
    if callable(target):
        return _decorate(_HoldSource(None), options, target)
    raise UsageError("offload_tool takes a cargohold.Hold (or nothing) and decorates a function")


class _Options:
    __slots__ = ("budget", "classification", "media_type", "sensitivity", "tool")

    def __init__(
        self,
        tool: str | None,
        media_type: str | None,
        budget: Budget | str | None,
        sensitivity: Sensitivity | str,
        classification: str | None,
    ) -> None:
        self.tool = tool
        self.media_type = media_type
        self.budget = budget
        self.sensitivity = sensitivity
        self.classification = classification


class _HoldSource:
    """The given hold, or the configured one opened at first use (once, under a lock)."""

    __slots__ = ("_hold", "_lock")

    def __init__(self, hold: Hold | None) -> None:
        self._hold = hold
        self._lock = threading.Lock()

    def ready(self) -> Hold | None:
        return self._hold

    def get(self) -> Hold:
        with self._lock:
            if self._hold is None:
                from cargohold._hold import open as open_hold

                self._hold = open_hold()
            return self._hold


def _decorate(source: _HoldSource, options: _Options, fn: Callable[..., Any]) -> Any:
    if not callable(fn) or isinstance(fn, Hold):
        raise UsageError("offload_tool decorates a function")
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise UsageError(
            "offload_tool decorates a function that returns its result, not a generator"
        )
    name = options.tool or str(getattr(fn, "__name__", "tool"))

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def offload_async(*args: Any, **kwargs: Any) -> Any:
            value = await fn(*args, **kwargs)
            hold = source.ready()
            if hold is None:  # the configured store may be a file or a database: off the loop
                hold = await asyncio.to_thread(source.get)
            decided = await hold.aoffload(
                value,
                tool=name,
                media_type=options.media_type,
                sensitivity=options.sensitivity,
                budget=options.budget,
                classification=options.classification,
            )
            return decided.value_for(value)  # a redacted copy when credentials were redacted

        return offload_async

    @functools.wraps(fn)
    def offload_sync(*args: Any, **kwargs: Any) -> Any:
        value = fn(*args, **kwargs)
        decided = source.get().offload(
            value,
            tool=name,
            media_type=options.media_type,
            sensitivity=options.sensitivity,
            budget=options.budget,
            classification=options.classification,
        )
        return decided.value_for(value)  # a redacted copy when credentials were redacted

    return offload_sync


__all__ = ["ToolDecorator", "offload_tool"]
