"""Client wrappers: every create call of an ``openai`` or ``anthropic`` client is checked first.

The wrappers work on the client object the caller already made (sync or async), in place, and
return it: ``client = guard_openai(OpenAI())``. Nothing here imports an SDK; a client is
recognised by its resources. The guarded methods are ``chat.completions.create``/``parse``/
``stream`` and ``responses.create``/``parse``/``stream`` (OpenAI), ``messages.create``/``stream``
and ``beta.messages.create``/``stream`` (Anthropic); ``with_raw_response`` views made after
guarding wrap the guarded methods, and ``with_options``/``copy`` return guarded copies. A failed
check raises before the SDK builds or sends anything.

An argument given as a one-shot iterator (``messages=(m for m in history)``, which the SDKs
accept) is turned into a list first, and that list is what is both checked and sent.
"""

from __future__ import annotations

import functools
import inspect
import io
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from cargohold._errors import UsageError
from cargohold._events import Reporter
from cargohold.guard._guard import Guard, RequestFormat

ClientT = TypeVar("ClientT")

_METHODS = ("create", "parse", "stream")
_MARK = "__cargohold_guard__"


def _request(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    if args:  # the SDKs' create methods take keyword arguments only
        raise UsageError("a guarded create call takes keyword arguments only")
    request = dict(kwargs)
    for key, value in request.items():
        if isinstance(value, Iterator) and not isinstance(value, io.IOBase):
            request[key] = list(value)  # checked and sent alike; a generator can be read once
    return request


def _wrap(method: Callable[..., Any], fmt: RequestFormat, guard: Guard) -> Callable[..., Any]:
    if getattr(method, _MARK, None) is not None:
        return method
    if inspect.iscoroutinefunction(inspect.unwrap(method)):

        @functools.wraps(method)
        async def guarded_async(*args: Any, **kwargs: Any) -> Any:
            request = _request(args, kwargs)
            guard.check(request, format=fmt)
            return await method(**request)

        setattr(guarded_async, _MARK, guard)
        return guarded_async

    @functools.wraps(method)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        request = _request(args, kwargs)
        guard.check(request, format=fmt)
        return method(**request)

    setattr(guarded, _MARK, guard)
    return guarded


def _patch(resource: Any, fmt: RequestFormat, guard: Guard) -> int:
    patched = 0
    for name in _METHODS:
        method = getattr(resource, name, None)
        if callable(method):
            setattr(resource, name, _wrap(method, fmt, guard))
            patched += 1
    return patched


def _resource(client: Any, *path: str) -> Any:
    for name in path:
        client = getattr(client, name, None)
        if client is None:
            return None
    return client


def _patch_copies(client: Any, again: Callable[[Any, Guard], Any], guard: Guard) -> None:
    copy = getattr(client, "copy", None)
    if not callable(copy) or getattr(copy, _MARK, None) is not None:
        return

    @functools.wraps(copy)
    def guarded_copy(*args: Any, **kwargs: Any) -> Any:
        return again(copy(*args, **kwargs), guard)

    setattr(guarded_copy, _MARK, guard)
    client.copy = guarded_copy
    client.with_options = guarded_copy


def _make_guard(
    guard: Guard | None,
    threshold: int | None,
    margin: int | None,
    windows: Mapping[str, int] | None,
    reporter: Reporter | None,
    strict_window: bool,
    key: bytes | Callable[[], bytes] | None,
) -> Guard:
    if guard is not None:
        return guard
    return Guard(
        threshold=threshold,
        margin=margin,
        windows=windows,
        reporter=reporter,
        strict_window=strict_window,
        key=key,
    )


def _openai(client: Any, guard: Guard) -> Any:
    patched = 0
    chat = _resource(client, "chat", "completions")
    if chat is not None:
        patched += _patch(chat, RequestFormat.OPENAI_CHAT, guard)
    responses = _resource(client, "responses")
    if responses is not None:
        patched += _patch(responses, RequestFormat.OPENAI_RESPONSES, guard)
    if not patched:
        raise UsageError("guard_openai needs an openai.OpenAI or openai.AsyncOpenAI client")
    _patch_copies(client, _openai, guard)
    return client


def _anthropic(client: Any, guard: Guard) -> Any:
    patched = 0
    for path in (("messages",), ("beta", "messages")):
        messages = _resource(client, *path)
        if messages is not None:
            patched += _patch(messages, RequestFormat.ANTHROPIC, guard)
    if not patched:
        raise UsageError(
            "guard_anthropic needs an anthropic.Anthropic or anthropic.AsyncAnthropic client"
        )
    _patch_copies(client, _anthropic, guard)
    return client


def guard_openai(
    client: ClientT,
    *,
    guard: Guard | None = None,
    threshold: int | None = None,
    margin: int | None = None,
    windows: Mapping[str, int] | None = None,
    reporter: Reporter | None = None,
    strict_window: bool = False,
    key: bytes | Callable[[], bytes] | None = None,
) -> ClientT:
    """Guard an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` client in place, and return it.

    Args:
        client: The client.
        guard: A guard to use (``hold.edge_guard`` for a :class:`cargohold.Hold`'s settings
            and store key); else one is made from the other arguments.
        threshold: The heavy threshold in bytes (configured when omitted; the configured
            per-tool thresholds apply too).
        margin: Tokens kept free below the model's window (configured when omitted).
        windows: Model-name prefix -> context window, before the built-in table.
        reporter: Where failure events go.
        strict_window: Refuse a model with no known window instead of reporting it.
        key: The marker key stubs and segments must verify under (the configured store's
            when omitted).

    Raises:
        UsageError: ``client`` has neither ``chat.completions`` nor ``responses``.
    """
    made = _make_guard(guard, threshold, margin, windows, reporter, strict_window, key)
    result: ClientT = _openai(client, made)
    return result


def guard_anthropic(
    client: ClientT,
    *,
    guard: Guard | None = None,
    threshold: int | None = None,
    margin: int | None = None,
    windows: Mapping[str, int] | None = None,
    reporter: Reporter | None = None,
    strict_window: bool = False,
    key: bytes | Callable[[], bytes] | None = None,
) -> ClientT:
    """Guard an ``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic`` client in place.

    Same arguments as :func:`guard_openai`.

    Raises:
        UsageError: ``client`` has no ``messages`` resource.
    """
    made = _make_guard(guard, threshold, margin, windows, reporter, strict_window, key)
    result: ClientT = _anthropic(client, made)
    return result
