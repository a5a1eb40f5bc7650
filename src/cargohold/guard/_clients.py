"""Client wrappers: every call of an ``openai`` or ``anthropic`` client that sends a
conversation is checked first.

The wrappers work on the client object the caller already made (sync or async), in place, and
return it: ``client = guard_openai(OpenAI())``. Nothing here imports an SDK; a client is
recognised by its resources. The guarded methods are every call that sends a conversation:
``chat.completions.create``/``parse``/``stream``, ``responses.create``/``parse``/``stream``/
``compact`` and ``responses.input_tokens.count`` (under ``beta`` too), the legacy
``completions.create``, and ``conversations.create``/``conversations.items.create``, whose
items enter every later response's context (OpenAI); ``messages.create``/``stream``/
``count_tokens`` and ``messages.batches.create``, each under ``beta`` too (Anthropic). A batch
is checked request by request, each as the model call it becomes; so is each prompt of a legacy
completion given a list of prompts. ``with_raw_response`` views made after guarding wrap the
guarded methods, and ``with_options``/``copy`` return guarded copies. A failed check raises
before the SDK builds or sends anything.

An argument given as a one-shot iterator (``messages=(m for m in history)``, which the SDKs
accept) is turned into a list first, and that list is what is both checked and sent.
"""

from __future__ import annotations

import functools
import inspect
import io
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from cargohold._errors import UsageError
from cargohold._events import Reporter
from cargohold.guard._errors import (
    ContextLeakError,
    ContextWindowExceededError,
    ContextWindowUnknownError,
)
from cargohold.guard._guard import Guard, RequestFormat

ClientT = TypeVar("ClientT")

_METHODS = ("create", "parse", "stream")
_MARK = "__cargohold_guard__"


def _request(
    args: tuple[Any, ...], kwargs: Mapping[str, Any], leading: tuple[str, ...] = ()
) -> dict[str, Any]:
    # The SDKs' create methods take keyword arguments only, but for an id in the URL
    # (``conversations.items.create(conversation_id, ...)``): named here, checked and sent
    # by its name.
    if len(args) > len(leading):
        raise UsageError("a guarded create call takes keyword arguments only")
    request = {**dict(zip(leading, args, strict=False)), **kwargs}
    for key, value in request.items():
        if isinstance(value, Iterator) and not isinstance(value, io.IOBase):
            request[key] = list(value)  # checked and sent alike; a generator can be read once
    return request


Check = Callable[[dict[str, Any]], None]
"""Checks one create call's arguments; raises before anything is sent."""


def _whole(guard: Guard, fmt: RequestFormat) -> Check:
    """The call is one request to the model."""

    def check(request: dict[str, Any]) -> None:
        guard.check(request, format=fmt)

    return check


def _checked(
    guard: Guard,
    fmt: RequestFormat,
    request: Mapping[str, Any],
    where: tuple[str, str],
    *,
    window: bool = True,
    message: int | None = None,
) -> None:
    """Check one request that is a part of the call, naming the part: a leak's paths have their
    leading ``where[0]`` replaced by ``where[1]`` (and its message index by ``message``, when
    the part is one message of the call), a window error carries a note naming it."""
    try:
        guard.check(request, format=fmt, check_window=window)
    except ContextLeakError as exc:
        old, new = where
        findings = [
            replace(
                f,
                path=new + f.path[len(old) :],
                message_index=f.message_index if message is None else message,
            )
            for f in exc.findings
        ]
        raise ContextLeakError(findings, threshold=exc.threshold, event=exc.event) from None
    except (ContextWindowExceededError, ContextWindowUnknownError) as exc:
        exc.add_note(f"in {where[1].rstrip('.')} of the call")
        raise


def _batch(guard: Guard) -> Check:
    """Anthropic ``messages.batches.create``: each request's ``params`` is a model call, checked
    (leak and window) as its own request."""
    fmt = RequestFormat.ANTHROPIC

    def check(request: dict[str, Any]) -> None:
        requests = request.get("requests")
        rest = {k: v for k, v in request.items() if k != "requests"}
        guard.check(rest, format=fmt, check_window=False)
        if not isinstance(requests, Sequence) or isinstance(requests, str):
            # not a list of requests: every leaf judged as it stands, no window to check
            guard.check({"requests": requests}, format=fmt, check_window=False)
            return
        for index, item in enumerate(requests):
            params = item.get("params") if isinstance(item, Mapping) else None
            if isinstance(item, Mapping) and isinstance(params, Mapping):
                others = {k: v for k, v in item.items() if k != "params"}
                _checked(guard, fmt, others, ("", f"requests[{index}]."), window=False)
                _checked(guard, fmt, params, ("", f"requests[{index}].params."))
            else:  # a shape the SDK does not type: every leaf judged, no window to check
                item_request = {"item": item}
                _checked(guard, fmt, item_request, ("item", f"requests[{index}]"), window=False)

    return check


def _completions(guard: Guard) -> Check:
    """OpenAI's legacy ``completions.create``: a list of prompts is one completion per prompt,
    each checked (leak and window) as its own request."""
    fmt = RequestFormat.OPENAI_COMPLETIONS

    def check(request: dict[str, Any]) -> None:
        prompt = request.get("prompt")
        if (
            isinstance(prompt, Sequence)
            and not isinstance(prompt, str)
            and len(prompt) > 1
            and all(isinstance(p, Sequence) for p in prompt)  # texts or lists of token ids
        ):
            for index, one in enumerate(prompt):
                one_prompt = {**request, "prompt": one}
                where = ("prompt", f"prompt[{index}]")
                _checked(guard, fmt, one_prompt, where, message=index)
        else:
            guard.check(request, format=fmt)

    return check


def _wrap(
    method: Callable[..., Any], check: Check, guard: Guard, leading: tuple[str, ...] = ()
) -> Callable[..., Any]:
    if getattr(method, _MARK, None) is not None:
        return method
    if inspect.iscoroutinefunction(inspect.unwrap(method)):

        @functools.wraps(method)
        async def guarded_async(*args: Any, **kwargs: Any) -> Any:
            request = _request(args, kwargs, leading)
            check(request)
            return await method(**request)

        setattr(guarded_async, _MARK, guard)
        return guarded_async

    @functools.wraps(method)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        request = _request(args, kwargs, leading)
        check(request)
        return method(**request)

    setattr(guarded, _MARK, guard)
    return guarded


def _patch(
    resource: Any,
    check: Check,
    guard: Guard,
    names: Sequence[str] = _METHODS,
    leading: tuple[str, ...] = (),
) -> int:
    patched = 0
    for name in names:
        method = getattr(resource, name, None)
        if callable(method):
            setattr(resource, name, _wrap(method, check, guard, leading))
            patched += 1
    return patched


def _items(guard: Guard) -> Check:
    """OpenAI ``conversations.create``/``conversations.items.create``: the items are stored
    and put into the context of every response of the conversation; judged as Responses input
    (no model, so no window to check)."""
    fmt = RequestFormat.OPENAI_RESPONSES

    def check(request: dict[str, Any]) -> None:
        rest = {k: v for k, v in request.items() if k != "items"}
        guard.check(rest, format=fmt, check_window=False)
        if request.get("items") is not None:
            _checked(guard, fmt, {"input": request["items"]}, ("input", "items"), window=False)

    return check


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
        patched += _patch(chat, _whole(guard, RequestFormat.OPENAI_CHAT), guard)
    responses_check = _whole(guard, RequestFormat.OPENAI_RESPONSES)
    for path in (("responses",), ("beta", "responses")):
        responses = _resource(client, *path)
        if responses is not None:
            # compact sends the conversation to a model; input_tokens.count sends it too
            patched += _patch(responses, responses_check, guard, (*_METHODS, "compact"))
            counter = _resource(responses, "input_tokens")
            if counter is not None:
                patched += _patch(counter, responses_check, guard, ("count",))
    completions = _resource(client, "completions")
    if completions is not None:
        patched += _patch(completions, _completions(guard), guard, ("create",))
    conversations = _resource(client, "conversations")
    if conversations is not None:
        patched += _patch(conversations, _items(guard), guard, ("create",))
        items = _resource(conversations, "items")
        if items is not None:
            patched += _patch(items, _items(guard), guard, ("create",), ("conversation_id",))
    if not patched:
        raise UsageError("guard_openai needs an openai.OpenAI or openai.AsyncOpenAI client")
    _patch_copies(client, _openai, guard)
    return client


def _anthropic(client: Any, guard: Guard) -> Any:
    patched = 0
    for path in (("messages",), ("beta", "messages")):
        messages = _resource(client, *path)
        if messages is not None:
            # count_tokens sends the same content to the provider: checked as create is
            names = (*_METHODS, "count_tokens")
            patched += _patch(messages, _whole(guard, RequestFormat.ANTHROPIC), guard, names)
            batches = _resource(messages, "batches")
            if batches is not None:
                patched += _patch(batches, _batch(guard), guard, ("create",))
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
        reporter: Where the guard's events go (the configured events log when omitted, as
            the CLI's decisions; ``Reporter()`` with no sinks reports nothing).
        strict_window: Refuse a model with no known window instead of reporting it.
        key: The marker key stubs and segments must verify under (the configured store's
            when omitted).

    Raises:
        UsageError: ``client`` has none of ``chat.completions``, ``responses`` and
            ``completions``.
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
