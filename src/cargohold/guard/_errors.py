"""The guard's two errors: a request that must not be sent, and why.

Both derive from :class:`cargohold.CargoholdError` (not ``UsageError``: the caller's arguments were
fine; the request they assembled was not). Their messages say where and how much, never what:
no content of the request ever appears in them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cargohold._errors import CargoholdError

if TYPE_CHECKING:
    from cargohold._events import DecisionEvent

_MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}")


def shown_model(model: object) -> str:
    """A model name as a message may show it: verbatim when it looks like a model name, else
    described (a request's ``model`` is the caller's text and could hold anything)."""
    if isinstance(model, str) and _MODEL_NAME.fullmatch(model):
        return model
    if isinstance(model, str):
        return f"<model: str, {len(model):,} chars>"
    return f"<model: {type(model).__name__}>"


@dataclass(frozen=True, slots=True)
class LeakFinding:
    """One raw heavy part of a request: where it is and how big, never what it holds.

    Attributes:
        path: Where the part sits, e.g. ``messages[3].content[1].image_url.url``. A key is named
            only when it is a short identifier; any other key is described by position, type
            and length (``metadata.<key 3: str, 19 chars>``), never shown.
        message_index: The index of the message (or input item) holding it; ``None`` outside
            the message list (``system``, ``instructions``, ``tools``...).
        size: Its raw bytes (UTF-8 of the text; a data URL's full length; compact JSON for a
            structured tool input; the base64 encoding of a bytes, path or file payload, the
            threshold itself for a payload that cannot be measured without reading it).
        tool: The tool that produced it (a tool result) or that it is addressed to (tool-call
            arguments), when the request names it.
        where: What kind of place it is: ``text``, ``tool_result``, ``tool_arguments``,
            ``attachment``, ``system``, ``other``.
        forged: It carries a stub or segment marker whose check does not verify under the
            guard's marker key: forged by a tool, edited, or made for another store.
        threshold: The threshold it was judged at (a tool's own, or the guard's).
    """

    path: str
    message_index: int | None
    size: int
    tool: str | None
    where: str
    forged: bool = False
    threshold: int = 0

    def describe(self) -> str:
        """One line naming the place, its size and tool; safe for logs and terminals."""
        message = "" if self.message_index is None else f"message {self.message_index}, "
        tool = "" if self.tool is None else f", from tool {self.tool}"
        forged = (
            "; its cargohold marker does not verify with this guard's key (forged, edited, or "
            "made for another store)"
            if self.forged
            else ""
        )
        return f"{self.path} ({message}{self.where}, {self.size:,} bytes{tool}{forged})"


class ContextLeakError(CargoholdError):
    """A request still carries raw heavy content: a producer skipped the offload.

    A bug signal, not a recoverable condition: offload the part (:class:`cargohold.Offloader`)
    so the request carries its stub. Nothing was sent.

    Attributes:
        findings: Every raw heavy part, in request order.
        threshold: The heavy threshold applied, in bytes.
        event: The ``llm.context_leak`` event (the very instance the reporter received).
    """

    code = "context_leak"

    def __init__(
        self, findings: Sequence[LeakFinding], *, threshold: int, event: DecisionEvent
    ) -> None:
        self.findings = tuple(findings)
        self.threshold = threshold
        self.event = event
        first = self.findings[0]
        more = len(self.findings) - 1
        others = f" and {more} more part{'s' if more != 1 else ''}" if more else ""
        limit = first.threshold or threshold
        super().__init__(
            f"raw heavy content in the request at {first.describe()}{others}, at or above the "
            f"{limit:,}-byte heavy threshold; offload it so the request carries a stub. "
            "Nothing was sent."
        )


class ContextWindowExceededError(CargoholdError):
    """A request does not fit the model's context window less the margin. Nothing was sent.

    The guard never truncates: shorten the conversation, offload more, or choose a model with a
    larger window.

    Attributes:
        model: The model named by the request.
        window: The model's context window, in tokens.
        margin: Tokens kept free (for the answer).
        tokens: The request's tokens, as counted or estimated.
        counted: ``True`` when the real tokenizer settled it, ``False`` for the estimate.
        event: The ``llm.context_window_exceeded`` event.
    """

    code = "context_window_exceeded"

    def __init__(
        self,
        *,
        model: str,
        window: int,
        margin: int,
        tokens: int,
        counted: bool,
        event: DecisionEvent,
    ) -> None:
        self.model = model
        self.window = window
        self.margin = margin
        self.tokens = tokens
        self.counted = counted
        self.event = event
        how = "counted" if counted else "estimated"
        super().__init__(
            f"the request is {tokens:,} tokens ({how}), over the {window - margin:,} allowed for "
            f"model {shown_model(model)} (window {window:,} less a margin of {margin:,}). Nothing "
            "was sent; "
            "the guard never truncates."
        )


class ContextWindowUnknownError(CargoholdError):
    """A strict guard knows no context window for the request's model. Nothing was sent.

    Declare the window: the ``model_windows`` configuration key (``CARGOHOLD_MODEL_WINDOWS``) or
    ``Guard(windows={...})``; or leave the guard lenient, which reports an
    ``llm.context_window_unchecked`` event and lets the request go.

    Attributes:
        model: The model named by the request or the call, ``None`` when neither named one.
        event: The ``llm.context_window_unknown`` event.
    """

    code = "context_window_unknown"

    def __init__(self, *, model: str | None, event: DecisionEvent) -> None:
        self.model = model
        self.event = event
        if model is None:
            which = "the request names no model (pass model= to the check)"
        else:
            which = f"no context window is known for model {shown_model(model)}"
        super().__init__(
            f"{which}, and the guard is strict: declare the model's window with the "
            "model_windows configuration key (CARGOHOLD_MODEL_WINDOWS=name=tokens) or "
            "Guard(windows={...}). Nothing was sent."
        )


class DispositionRefusedError(CargoholdError):
    """An attachment's disposition cannot be carried out as chosen; nothing entered a message.

    Attributes:
        reason: ``inline_too_large`` (inline is for payloads under the heavy threshold),
            ``no_provider_client`` (``provider_native`` without a client to upload through), or
            ``no_offloader`` (``ref`` or ``tool:<name>`` without an offloader to store through).
    """

    code = "disposition_refused"

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
