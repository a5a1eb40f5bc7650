"""The edge guard: no raw heavy content, and no request over the window, reaches a model.

One pass over the assembled request, just before it is sent (OpenAI Chat Completions, OpenAI
Responses, Anthropic Messages, LangChain message lists): message text, system prompts and
instructions, tool results, tool-call arguments, images and files as base64 or data URLs, and any
other key of the request. A part at or above the heavy threshold (32 KiB by default) must be a
genuine stub or a genuine recovered segment. Then the request's tokens are checked against the
model's window less a margin. The guard never truncates and never modifies the request.

Errors added to cargohold's tree (all under :class:`cargohold.CargoholdError`)::

    CargoholdError
    ├── ContextLeakError              a raw heavy part; one ``llm.context_leak`` event
    ├── ContextWindowExceededError    over the window less the margin; one event
    ├── ContextWindowUnknownError     no known window for the model, and the guard is strict
    └── DispositionRefusedError       an attachment disposition that cannot be carried out

Their messages name places and sizes (``messages[3].content[1].image_url.url``, message index,
bytes, the producing tool), never content: a key that is not a short identifier is described
(``metadata.<key 3: str, 19 chars>``), never shown.

Example::

    from cargohold.guard import Guard, guard_openai

    client = guard_openai(OpenAI(), reporter=reporter)   # every create call is checked first
    Guard().check(request, format="anthropic", model="claude-sonnet-4-5")

Attachments reach a model by policy (:func:`dispose`): ``ref`` (default), ``inline`` (small
only), ``provider_native`` (opt-in upload) or ``tool:<name>``; hint > agent policy > default.

The guard's measure of a request, without judging it: :func:`estimate_request_tokens` (the
calibrated estimate) and :func:`count_request_tokens` (the real tokenizer), which compaction's
trigger uses too.
"""

from cargohold._tokens import IMAGE_TOKENS  # one figure for stubs and the guard
from cargohold.guard._clients import guard_anthropic, guard_openai
from cargohold.guard._disposition import (
    INLINE,
    PROVIDER_NATIVE,
    REF,
    Attachment,
    DisposedAttachment,
    Disposition,
    DispositionKind,
    DispositionPolicy,
    DispositionSource,
    Resolution,
    ToolRoute,
    adispose,
    dispose,
)
from cargohold.guard._errors import (
    ContextLeakError,
    ContextWindowExceededError,
    ContextWindowUnknownError,
    DispositionRefusedError,
    LeakFinding,
)
from cargohold.guard._guard import (
    DEFAULT_MARGIN,
    ESTIMATE_BAND,
    MESSAGE_TOKENS,
    Decision,
    Guard,
    GuardReport,
    RequestFormat,
    check_request,
    count_request_tokens,
    estimate_request_tokens,
)
from cargohold.guard._models import MODEL_WINDOWS, window_for

__all__ = [
    "DEFAULT_MARGIN",
    "ESTIMATE_BAND",
    "IMAGE_TOKENS",
    "INLINE",
    "MESSAGE_TOKENS",
    "MODEL_WINDOWS",
    "PROVIDER_NATIVE",
    "REF",
    "Attachment",
    "ContextLeakError",
    "ContextWindowExceededError",
    "ContextWindowUnknownError",
    "Decision",
    "DisposedAttachment",
    "Disposition",
    "DispositionKind",
    "DispositionPolicy",
    "DispositionRefusedError",
    "DispositionSource",
    "Guard",
    "GuardReport",
    "LeakFinding",
    "RequestFormat",
    "Resolution",
    "ToolRoute",
    "adispose",
    "check_request",
    "count_request_tokens",
    "dispose",
    "estimate_request_tokens",
    "guard_anthropic",
    "guard_openai",
    "window_for",
]
