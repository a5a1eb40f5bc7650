"""The window check: estimate far from the limit, real tokenizer near it; the model table."""

from __future__ import annotations

import math
from typing import Any

import pytest

from cargohold import ContentKind, GuardOutcome, Operation, Reason, UsageError
from cargohold._tokens import count_tokens
from cargohold.guard import (
    ESTIMATE_BAND,
    IMAGE_TOKENS,
    MESSAGE_TOKENS,
    ContextLeakError,
    ContextWindowExceededError,
    ContextWindowUnknownError,
    Decision,
    Guard,
    count_request_tokens,
    estimate_request_tokens,
    window_for,
)
from guard_fixtures import KiB, data_url, raw, reporter

# bpe-openai 0.1.4 loads its vocabulary with importlib.resources.open_binary, deprecated in 3.11;
# cargohold._tokens should silence that one warning where it loads the encoding (reported).
pytestmark = pytest.mark.filterwarnings("ignore:open_binary is deprecated:DeprecationWarning")

DIGITS = " ".join(str(i) for i in range(3000))
"""Dense text: about 1.7 bytes per token, far denser than the prose estimate assumes."""
WORDS = "hello world " * 1000
"""Loose text: about 6 bytes per token, looser than the prose estimate assumes."""


def request(*texts: str, model: str = "tiny-model") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text} for text in texts]}


def estimate_of(body: dict[str, Any]) -> int:
    return Guard(windows={"tiny-model": 10**9}).check(body, format="openai-chat").estimated_tokens


def real_tokens(*texts: str) -> int:
    """What the guard counts: every string of the request (model and roles included) by the
    real tokenizer, plus the framing tokens of each message."""
    strings = ["tiny-model", *(s for text in texts for s in ("user", text))]
    counted = [count_tokens(s) for s in strings]
    assert None not in counted
    return sum(c or 0 for c in counted) + len(texts) * MESSAGE_TOKENS


def test_a_request_far_over_the_window_is_refused_by_the_estimate() -> None:
    body = request(*[raw(30 * KiB) for _ in range(10)])
    with pytest.raises(ContextWindowExceededError) as caught:
        Guard(windows={"tiny-model": 10_000}, margin=0).check(body, format="openai-chat")
    assert caught.value.counted is False
    assert caught.value.tokens > 10_000 / ESTIMATE_BAND[0]
    assert (caught.value.window, caught.value.margin, caught.value.model) == (
        10_000,
        0,
        "tiny-model",
    )


def test_a_request_far_under_the_window_passes_on_the_estimate_alone() -> None:
    report = Guard().check(request("hello", model="gpt-4o"), format="openai-chat")
    assert report.decided_by is Decision.ESTIMATE
    assert report.counted_tokens is None
    assert report.window == 128_000


def test_near_the_limit_the_tokenizer_refuses_what_the_estimate_would_let_through() -> None:
    body = request(DIGITS)
    estimated = estimate_of(body)
    window = math.ceil(estimated * 1.2)  # the estimate alone says it fits
    with pytest.raises(ContextWindowExceededError) as caught:
        Guard(windows={"tiny-model": window}, margin=0).check(body, format="openai-chat")
    assert caught.value.counted is True
    assert caught.value.tokens == real_tokens(DIGITS)
    assert estimated < window < caught.value.tokens


def test_near_the_limit_the_tokenizer_lets_through_what_the_estimate_would_refuse() -> None:
    body = request(WORDS)
    estimated = estimate_of(body)
    window = math.floor(estimated * 0.9)  # the estimate alone says it does not fit
    report = Guard(windows={"tiny-model": window}, margin=0).check(body, format="openai-chat")
    assert report.decided_by is Decision.TOKENIZER
    assert report.counted_tokens == real_tokens(WORDS)
    assert report.counted_tokens < window < estimated


def test_without_a_tokenizer_the_estimate_decides_inside_the_band(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("cargohold.guard._guard.count_tokens", lambda text: None)
    body = request(WORDS)
    estimated = estimate_of(body)
    with pytest.raises(ContextWindowExceededError) as caught:
        Guard(windows={"tiny-model": math.floor(estimated * 0.9)}, margin=0).check(
            body, format="openai-chat"
        )
    assert caught.value.counted is False
    report = Guard(windows={"tiny-model": math.ceil(estimated * 1.2)}, margin=0).check(
        body, format="openai-chat"
    )
    assert report.decided_by is Decision.NO_TOKENIZER


def test_the_margin_is_kept_free_below_the_window() -> None:
    body = request("x" * 4000)
    tokens = estimate_of(body)
    window = tokens * 3
    Guard(windows={"tiny-model": window}, margin=0).check(body, format="openai-chat")
    with pytest.raises(ContextWindowExceededError) as caught:
        Guard(windows={"tiny-model": window}, margin=window - 10).check(body, format="openai-chat")
    assert caught.value.margin == window - 10
    with pytest.raises(UsageError):
        Guard(windows={"tiny-model": window}, margin=window).check(body, format="openai-chat")


def test_a_window_overflow_reports_exactly_one_event() -> None:
    rep, sink = reporter()
    body = request(*[raw(30 * KiB) for _ in range(10)])
    with pytest.raises(ContextWindowExceededError) as caught:
        Guard(windows={"tiny-model": 1000}, margin=0, reporter=rep).check(
            body, format="openai-chat"
        )
    assert sink.events == [caught.value.event]
    event = sink.events[0]
    assert event.operation is Operation.GUARD
    assert event.outcome is GuardOutcome.CONTEXT_WINDOW_EXCEEDED
    assert event.reason is Reason.WINDOW_MARGIN
    assert event.estimated_tokens == caught.value.tokens
    assert event.ref is None


def test_a_leak_is_reported_before_and_instead_of_a_window_overflow() -> None:
    rep, sink = reporter()
    body = request(raw(), *[raw(30 * KiB) for _ in range(10)])
    with pytest.raises(ContextLeakError):
        Guard(windows={"tiny-model": 1000}, reporter=rep).check(body, format="openai-chat")
    assert [e.outcome for e in sink.events] == [GuardOutcome.CONTEXT_LEAK]


def test_images_cost_a_flat_amount_not_their_base64_length() -> None:
    parts = [{"type": "image_url", "image_url": {"url": data_url(24 * KiB)}} for _ in range(5)]
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": parts}]}
    report = Guard().check(body, format="openai-chat")
    assert report.images == 5
    assert report.estimated_tokens < 5 * IMAGE_TOKENS + 100
    assert report.estimated_tokens >= 5 * IMAGE_TOKENS


def test_an_unknown_model_gets_the_leak_check_only() -> None:
    body = request(*[raw(30 * KiB) for _ in range(10)], model="my-local-llama")
    assert Guard().check(body, format="openai-chat").decided_by is Decision.UNKNOWN_MODEL
    assert (
        Guard(windows={"tiny-model": 10}).check(body, format="openai-chat", check_window=False)
    ).decided_by is Decision.SKIPPED


def test_the_model_argument_overrides_the_requests_model() -> None:
    body = request(*[raw(30 * KiB) for _ in range(10)], model="gpt-4.1")
    Guard().check(body, format="openai-chat")
    with pytest.raises(ContextWindowExceededError) as caught:
        Guard().check(body, format="openai-chat", model="gpt-4")
    assert caught.value.window == 8_192


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-4o-mini", 128_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-nano-2025-04-14", 1_047_576),
        ("openai/gpt-4.1-mini", 1_047_576),
        ("gpt-4", 8_192),
        ("gpt-4-turbo-2024-04-09", 128_000),
        ("o1", 200_000),
        ("o1-mini", 128_000),
        ("o3-mini-2025-01-31", 200_000),
        ("o4-mini", 200_000),
        ("gpt-5", 400_000),
        ("gpt-5.1", 400_000),
        ("gpt-5-mini-2025-08-07", 400_000),
        ("gpt-5-chat-latest", 128_000),
        ("claude-3-5-sonnet-20241022", 200_000),
        ("claude-3-7-sonnet-latest", 200_000),
        ("claude-3-haiku-20240307", 200_000),
        ("claude-sonnet-4-5-20250929", 200_000),
        ("anthropic/claude-opus-4-1", 200_000),
        ("claude-haiku-4-5", 200_000),
        ("claude-sonnet-4-6", 1_000_000),
        ("claude-opus-4-6-20260205", 1_000_000),
        ("claude-sonnet-5-5", 1_000_000),
        ("claude-opus-5", 1_000_000),
        ("o10", None),
        ("gpt-4oo", None),
        ("mistral-large", None),
    ],
)
def test_model_windows_match_by_longest_prefix_at_a_name_boundary(
    model: str, window: int | None
) -> None:
    assert window_for(model) == window


def test_the_callers_windows_win_over_the_table() -> None:
    assert window_for("claude-sonnet-4-5", {"claude-sonnet-4": 1_000_000}) == 1_000_000
    assert window_for("claude-opus-4-1", {"claude-sonnet-4": 1_000_000}) == 200_000
    assert Guard(windows={"gpt-4o": 1000}).window_for("gpt-4o-mini") == 1000
    with pytest.raises(UsageError):
        Guard(windows={"gpt-4o": 0})


def test_a_window_overflow_event_carries_the_token_limit_and_names_the_request() -> None:
    rep, sink = reporter()
    body = request(*[raw(30 * KiB) for _ in range(10)])
    with pytest.raises(ContextWindowExceededError):
        Guard(windows={"tiny-model": 3000}, margin=500, reporter=rep).check(
            body, format="openai-chat"
        )
    (event,) = sink.events
    assert event.limit_tokens == 2500
    assert event.content_kind is ContentKind.REQUEST
    assert event.as_dict()["limit_tokens"] == 2500


def test_an_unknown_model_is_reported_not_skipped_silently() -> None:
    rep, sink = reporter()
    body = request("hello", model="my-local-llama")
    report = Guard(reporter=rep).check(body, format="openai-chat")
    assert report.decided_by is Decision.UNKNOWN_MODEL
    (event,) = sink.events
    assert (event.operation, event.outcome, event.reason) == (
        Operation.GUARD,
        GuardOutcome.CONTEXT_WINDOW_UNCHECKED,
        Reason.UNKNOWN_MODEL,
    )
    assert event.content_kind is ContentKind.REQUEST
    assert (event.ref, event.limit_tokens) == (None, None)
    assert event.estimated_tokens == report.estimated_tokens
    Guard(reporter=rep).check(body, format="openai-chat", check_window=False)
    Guard(reporter=rep).check(request("hello", model="gpt-4o"), format="openai-chat")
    assert len(sink.events) == 1  # a skipped or a made window check reports nothing


@pytest.mark.parametrize(
    ("body", "model"),
    [
        pytest.param(request("hello", model="my-local-llama"), None, id="unknown-model"),
        pytest.param({"messages": [{"role": "user", "content": "hello"}]}, None, id="no-model"),
    ],
)
def test_a_strict_guard_refuses_a_model_it_has_no_window_for(
    body: dict[str, Any], model: str | None
) -> None:
    rep, sink = reporter()
    with pytest.raises(ContextWindowUnknownError) as caught:
        Guard(strict_window=True, reporter=rep).check(body, format="openai-chat", model=model)
    error = caught.value
    assert error.code == "context_window_unknown"
    assert "model_windows" in str(error)
    assert "CARGOHOLD_MODEL_WINDOWS" in str(error)
    assert sink.events == [error.event]
    assert error.event.outcome is GuardOutcome.CONTEXT_WINDOW_UNKNOWN
    assert error.event.reason is Reason.UNKNOWN_MODEL


def test_a_strict_guard_passes_known_models_and_declared_windows() -> None:
    strict = Guard(strict_window=True, windows={"my-local-llama": 32_000})
    assert strict.check(request("hello", model="my-local-llama-3"), format="openai-chat").window
    assert strict.check(request("hello", model="gpt-4o"), format="openai-chat").window
    skipped = strict.check(request("hi", model="other"), format="openai-chat", check_window=False)
    assert skipped.decided_by is Decision.SKIPPED


def test_the_public_measures_are_the_figures_the_window_check_uses() -> None:
    body = request(WORDS, DIGITS, data_url(2 * KiB))
    estimated = estimate_of(body)
    window = math.floor(estimated * 1.1)  # in the band: the tokenizer settles it
    report = Guard(windows={"tiny-model": window * 10}, margin=0).check(body, format="openai-chat")
    settled = Guard(windows={"tiny-model": window}, margin=0)
    try:
        counted = settled.check(body, format="openai-chat").counted_tokens
    except ContextWindowExceededError as error:
        counted = error.tokens

    assert estimate_request_tokens(body, format="openai-chat") == report.estimated_tokens
    assert count_request_tokens(body, format="openai-chat") == counted
    seen: list[str] = []
    assert count_request_tokens(body, format="openai-chat", count=lambda t: seen.append(t) or 1)
    assert DIGITS in seen
    assert count_request_tokens(body, format="openai-chat", count=lambda text: None) is None
