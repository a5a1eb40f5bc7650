"""The fast paths of the chat, Anthropic and LangChain walks measure and find exactly what the
general path does.

``_chat_loop``, ``_anthropic_loop`` and ``_langchain_plain`` handle the usual message shapes
inline for speed (plain strings, the usual tool call, text / tool_use / tool_result blocks,
message objects with string content) and hand everything else to the general path; the
counting pass (a walker that collects texts for the real tokenizer) walks every message the
general way. Generated requests, with a small threshold so sizes cross it often, must come out
the same both ways: every tally, every tool call remembered, every finding.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cargohold._tokens import count_tokens
from cargohold.guard import Guard
from cargohold.guard._formats import (
    walk_anthropic,
    walk_langchain,
    walk_openai_chat,
    walk_openai_responses,
)
from cargohold.guard._guard import MESSAGE_TOKENS
from cargohold.guard._walk import Walker

THRESHOLD = 600
TOOL_THRESHOLDS = {"low_tool": 300, "high_tool": 2_000}

_ALPHABETS = (
    st.characters(min_codepoint=32, max_codepoint=126),
    st.characters(min_codepoint=32, max_codepoint=0x2FFF, exclude_categories=("Cs",)),
)


@st.composite
def texts(draw: st.DrawFn) -> str:
    """Short or long, ASCII or not, now and then a data URL (which counts as base64)."""
    alphabet = draw(st.sampled_from(_ALPHABETS))
    size = draw(st.sampled_from((0, 5, 150, 250, 257, 299, 300, 599, 600, 700, 2_100)))
    seed = draw(st.text(alphabet, min_size=1, max_size=8))
    text = (seed * (size // len(seed) + 1))[:size]
    if draw(st.integers(0, 5)) == 0:
        text = "data:image/png;base64," + text
    return text


# encrypted_content and signature: names of opaque reasoning elsewhere, content in a message
keys = st.sampled_from(
    ("content", "name", "tool_call_id", "refusal", "k" * 50, "encrypted_content", "signature")
)

calls = st.one_of(
    st.fixed_dictionaries(  # the usual shape, the fast path's
        {
            "id": st.sampled_from(("call_1", "call_2", "call_3")),
            "type": st.just("function"),
            "function": st.fixed_dictionaries(
                {
                    "name": st.sampled_from(("low_tool", "high_tool", "other_tool", "bad name!")),
                    "arguments": texts(),
                }
            ),
        }
    ),
    st.fixed_dictionaries(  # an extra key, a function that is not a mapping, a missing id
        {"id": st.just("call_9"), "type": st.just("function"), "function": texts()},
        optional={"extra": texts()},
    ),
    texts(),
)

parts = st.lists(
    st.one_of(
        st.fixed_dictionaries({"type": st.just("text"), "text": texts()}),
        st.fixed_dictionaries(
            {"type": st.just("image_url"), "image_url": st.fixed_dictionaries({"url": texts()})}
        ),
        st.fixed_dictionaries({"type": st.just("reasoning"), "encrypted_content": texts()}),
    ),
    max_size=4,
)


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(("user", "assistant", "tool", "system", "developer", "function")))
    message: dict[str, Any] = {"role": role}
    if role == "tool":
        message["tool_call_id"] = draw(st.sampled_from(("call_1", "call_2", "call_9", "nope")))
    if role == "assistant" and draw(st.booleans()):
        message["tool_calls"] = draw(st.lists(calls, min_size=1, max_size=3))
    for key in draw(st.lists(keys, max_size=3, unique=True)):
        message[key] = draw(st.one_of(texts(), st.none(), parts, st.integers()))
    return message


def _measured(walker: Walker) -> tuple[Any, ...]:
    return (
        walker.text_bytes,
        walker.json_bytes,
        walker.b64_bytes,
        walker.image_bytes,
        walker.payload_bytes,
        walker.images,
        walker.messages,
        walker.calls,
        walker.findings,
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chat=st.lists(messages(), max_size=8), model=texts())
def test_fast_path_measures_and_finds_what_the_general_path_does(
    chat: list[dict[str, Any]], model: str
) -> None:
    request = {
        "model": model,
        "messages": chat,
        "temperature": 0.5,
        "stream": False,
        "metadata": {"encrypted_content": model},
    }
    fast = Walker(THRESHOLD, root=request, tool_thresholds=TOOL_THRESHOLDS)
    general = Walker(THRESHOLD, [], root=request, tool_thresholds=TOOL_THRESHOLDS)
    walk_openai_chat(fast, request)
    walk_openai_chat(general, request)
    assert _measured(fast) == _measured(general)


flat_values = st.one_of(texts(), st.integers(), st.booleans(), st.none(), st.floats(0, 9))
tool_inputs = st.one_of(
    st.dictionaries(st.sampled_from(("q", "path", "limit", "k" * 45)), flat_values, max_size=3),
    st.fixed_dictionaries({"type": st.just("image"), "data": texts()}),
    st.fixed_dictionaries({"nested": st.fixed_dictionaries({"q": texts()})}),
)
blocks = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": texts()}),
    st.fixed_dictionaries(
        {"type": st.just("text"), "text": texts(), "cache_control": st.just({"type": "x"})}
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_use"),
            "id": st.sampled_from(("toolu_1", "toolu_2")),
            "name": st.sampled_from(("low_tool", "high_tool", "other_tool", "bad name!")),
            "input": tool_inputs,
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_result"),
            "tool_use_id": st.sampled_from(("toolu_1", "toolu_2", "toolu_9")),
            "content": st.one_of(texts(), parts),
        },
        optional={"is_error": st.booleans()},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("image"),
            "source": st.fixed_dictionaries({"type": st.just("base64"), "data": texts()}),
        }
    ),
    # opaque in an assistant's message, content in a user's
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": texts(), "signature": texts()}),
    st.fixed_dictionaries({"type": st.just("redacted_thinking"), "data": texts()}),
    texts(),
)


plain_blocks = st.one_of(  # the fast path's own shapes, so that whole messages often take it
    st.fixed_dictionaries({"type": st.just("text"), "text": texts()}),
    st.fixed_dictionaries(
        {
            "type": st.just("tool_use"),
            "id": st.just("toolu_1"),
            "name": st.just("low_tool"),
            "input": tool_inputs,
        }
    ),
    st.fixed_dictionaries(
        {"type": st.just("tool_result"), "tool_use_id": st.just("toolu_1"), "content": texts()}
    ),
)


@st.composite
def anthropic_messages(draw: st.DrawFn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": draw(st.sampled_from(("user", "assistant")))}
    message["content"] = draw(
        st.one_of(
            texts(),
            st.lists(blocks, max_size=4),
            st.lists(plain_blocks, min_size=1, max_size=4),
            st.none(),
        )
    )
    if draw(st.integers(0, 9)) == 0:
        message[draw(keys)] = draw(st.one_of(texts(), st.integers()))
    return message


def _text_block(size: int) -> dict[str, str]:
    return {"type": "text", "text": "t" * size}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chat=st.lists(anthropic_messages(), max_size=8), system=texts())
# Parts each under every threshold that add up to the threshold: the message is a finding.
@example(
    chat=[{"role": "user", "content": [_text_block(299), _text_block(299), _text_block(5)]}],
    system="",
)
# A tool input that says it is an image is counted as one, as the general path does.
@example(
    chat=[
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "t", "name": "n", "input": {"type": "image"}},
            ],
        }
    ],
    system="",
)
def test_anthropic_fast_path_measures_and_finds_what_the_general_path_does(
    chat: list[dict[str, Any]], system: str
) -> None:
    request = {
        "model": "claude",
        "system": system,
        "messages": chat,
        "max_tokens": 64,
        "metadata": {"signature": system},
    }
    fast = Walker(THRESHOLD, root=request, tool_thresholds=TOOL_THRESHOLDS)
    general = Walker(THRESHOLD, [], root=request, tool_thresholds=TOOL_THRESHOLDS)
    walk_anthropic(fast, request)
    walk_anthropic(general, request)
    assert _measured(fast) == _measured(general)


@st.composite
def langchain_messages(draw: st.DrawFn) -> Any:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    text_part = st.fixed_dictionaries({"type": st.just("text"), "text": texts()})
    thinking = st.fixed_dictionaries(  # opaque in an AI message, content in any other
        {"type": st.just("thinking"), "thinking": texts(), "signature": texts()}
    )
    content = draw(
        st.one_of(texts(), st.lists(st.one_of(texts(), text_part, thinking), max_size=2))
    )
    extra: dict[str, Any] = {}
    if draw(st.integers(0, 5)) == 0:
        extra["additional_kwargs"] = {"note": draw(texts())}
    if draw(st.booleans()):
        extra["name"] = draw(st.sampled_from(("low_tool", "bob", "x" * 300)))
    kind = draw(st.sampled_from(("human", "ai", "tool", "system")))
    if kind == "human":
        return HumanMessage(content, **extra)
    if kind == "system":
        return SystemMessage(content, **extra)
    if kind == "tool":
        call_id = draw(st.sampled_from(("c1", "c2", "c9")))
        return ToolMessage(content, tool_call_id=call_id, **extra)
    calls = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "name": st.sampled_from(("low_tool", "high_tool", "bad name!")),
                    "args": tool_inputs,
                    "id": st.sampled_from(("c1", "c2")),
                }
            ),
            max_size=2,
        )
    )
    return AIMessage(content, tool_calls=calls, **extra)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=st.lists(langchain_messages(), max_size=6))
def test_langchain_fast_path_measures_and_finds_what_the_general_path_does(
    history: list[Any],
) -> None:
    fast = Walker(THRESHOLD, root=history, tool_thresholds=TOOL_THRESHOLDS)
    general = Walker(THRESHOLD, [], root=history, tool_thresholds=TOOL_THRESHOLDS)
    walk_langchain(fast, history)
    walk_langchain(general, history)
    assert _measured(fast) == _measured(general)


def test_langchain_tool_args_that_say_image_count_as_one_on_both_paths() -> None:
    from langchain_core.messages import AIMessage

    call = {"name": "draw", "args": {"type": "image", "data": "x" * 40}, "id": "c1"}
    history = [AIMessage("", tool_calls=[call])]
    fast = Walker(THRESHOLD, root=history)
    general = Walker(THRESHOLD, [], root=history)
    walk_langchain(fast, history)
    walk_langchain(general, history)
    assert fast.images == 1
    assert _measured(fast) == _measured(general)


def test_counted_tokens_are_the_texts_the_fast_pass_measured() -> None:
    # Within the estimate's band, the real tokenizer counts what the counting pass collected:
    # every string the fast pass measured (roles, texts, the call's id, type, name and
    # arguments, the model's name), plus the framing of each message.
    arguments = '{"q": "' + "x " * 400 + '"}'
    chat = [
        {"role": "user", "content": "word " * 1_500},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "result line\n" * 300},
    ]
    guard = Guard(threshold=32_768, tool_thresholds={}, margin=0, windows={"tiny": 4_000}, key=None)
    report = guard.check({"model": "tiny", "messages": chat}, format="openai-chat")
    assert report.decided_by == "tokenizer"
    measured = [
        "tiny",
        "user",
        "word " * 1_500,
        "assistant",
        "call_1",
        "function",
        "lookup",
        arguments,
        "tool",
        "call_1",
        "result line\n" * 300,
    ]
    counts = [count_tokens(text) for text in measured]
    assert None not in counts
    assert report.counted_tokens == sum(c for c in counts if c is not None) + 3 * MESSAGE_TOKENS


text_parts = st.fixed_dictionaries(
    {"type": st.sampled_from(("input_text", "output_text")), "text": texts()},
    optional={
        "annotations": st.one_of(st.just([]), st.just([{"type": "url_citation", "url": "u"}])),
        "logprobs": st.just([]),
    },
)
response_items = st.one_of(
    st.fixed_dictionaries(  # an easy message; now and then a key of a family of its own
        {
            "role": st.sampled_from(("user", "assistant", "developer", "system")),
            "content": st.one_of(texts(), st.lists(text_parts, max_size=3), st.none()),
        },
        optional={"type": st.just("message"), "data": texts(), "k" * 50: texts()},
    ),
    st.fixed_dictionaries(  # an output message as the SDK returns it
        {
            "type": st.just("message"),
            "id": st.just("msg_1"),
            "role": st.just("assistant"),
            "status": st.just("completed"),
            "content": st.lists(
                st.one_of(
                    text_parts,
                    st.fixed_dictionaries({"type": st.just("input_image"), "image_url": texts()}),
                ),
                max_size=3,
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("function_call"),
            "call_id": st.sampled_from(("call_1", "call_2", "")),
            "name": st.sampled_from(("low_tool", "high_tool", "other_tool", "bad name!")),
            "arguments": texts(),
        },
        optional={"id": st.just("fc_1"), "status": st.just("completed"), "input": texts()},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("function_call_output"),
            "call_id": st.sampled_from(("call_1", "call_2", "call_9")),
            "output": st.one_of(texts(), st.lists(text_parts, max_size=2)),
        },
        optional={"id": st.just("fco_1"), "status": st.none()},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("reasoning"),
            "id": st.just("rs_1"),
            "summary": st.lists(
                st.fixed_dictionaries({"type": st.just("summary_text"), "text": texts()}),
                max_size=2,
            ),
            "encrypted_content": texts(),
        }
    ),
    texts(),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(response_items, max_size=8), instructions=texts())
# Text parts each under every threshold that add up to the threshold: the message is a finding.
@example(
    items=[
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "t" * 299, "annotations": []}] * 3,
        }
    ],
    instructions="",
)
def test_responses_fast_path_measures_and_finds_what_the_general_path_does(
    items: list[Any], instructions: str
) -> None:
    request = {"model": "gpt-4.1", "instructions": instructions, "input": items}
    fast = Walker(THRESHOLD, root=request, tool_thresholds=TOOL_THRESHOLDS)
    general = Walker(THRESHOLD, [], root=request, tool_thresholds=TOOL_THRESHOLDS)
    walk_openai_responses(fast, request)
    walk_openai_responses(general, request)
    assert _measured(fast) == _measured(general)
