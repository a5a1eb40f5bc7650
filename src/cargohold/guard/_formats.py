"""Where each request format keeps its messages, and the walk of each.

Chat Completions, Responses, legacy Completions, Anthropic Messages and LangChain messages:
each format's walker knows its places (messages, content parts, tool calls and results, system
prompts) and hands every leaf to a :class:`~cargohold.guard._walk.Walker`, which measures and
judges it. Each of chat, Responses, Anthropic and LangChain has a fast path that tallies the
usual message shapes inline (the hot path of ``bench.guard``) and sends anything else down the
general path; ``tests/test_guard_paths.py`` holds each fast path to the general one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cargohold._errors import UsageError
from cargohold.guard._walk import (
    _B64_KEYS,
    _DATA_URL_MIN,
    _JSON_KEYS,
    _KEY_MAX,
    _LANGCHAIN_SKIP,
    _NO_OPAQUE,
    TEXT,
    Node,
    Opaque,
    Walker,
    _flat_input,
    _langchain_base,
    _langchain_view,
    _plain,
    _small_text,
    _tool_name,
    _utf8,
)

# -- Opaque reasoning: exactly where each provider's schema puts it ----------------------------

# Values only the provider can read (signatures, encrypted reasoning), by the type of the item
# or block that carries them, as the SDKs type them (openai: ResponseReasoningItemParam,
# ResponseCompactionItemParam; anthropic: ThinkingBlockParam, RedactedThinkingBlockParam,
# BetaCompactionBlockParam). Skipped there only, and only when a string: the same key anywhere
# else (metadata, a message, a text block, a tool result, a user's block) is content, measured
# and judged, or a tool could hide raw output behind the name.
_RESPONSES_OPAQUE: dict[str, Opaque] = {
    "reasoning": {"encrypted_content": None},  # an input item
    "compaction": {"encrypted_content": None},
}
_ANTHROPIC_OPAQUE: dict[str, Opaque] = {  # a block of an assistant message's content
    "thinking": {"signature": None},
    "redacted_thinking": {"data": None},
    "compaction": {"encrypted_content": None, "signature": None},
}
_REASONING_ITEM: Opaque = {"encrypted_content": None}
_LANGCHAIN_OPAQUE: dict[str, Opaque] = {  # a block of an AI message's content
    **_ANTHROPIC_OPAQUE,
    # Responses reasoning items as langchain-openai keeps them, and langchain-core's standard
    # reasoning block, which keeps the provider's fields flat or in its ``extras``.
    "reasoning": {
        "encrypted_content": None,
        "signature": None,
        "extras": {"encrypted_content": None, "signature": None},
    },
}


def _opaque(table: Mapping[str, Opaque], kind: object) -> Opaque | None:
    return table.get(kind) if type(kind) is str else None


# -- OpenAI Chat Completions ------------------------------------------------------------------

_SYSTEM_ROLES = frozenset({"system", "developer"})
_OTHER_KEYS = frozenset(
    {"tools", "functions", "tool_choice", "response_format", "text", "system", "instructions"}
)
"""Top-level keys :meth:`Walker.other` gives a meaning of their own (JSON, a system prompt)."""


def walk_openai_chat(walker: Walker, request: Mapping[str, Any]) -> None:
    """``{"model", "messages": [...], "tools": [...], ...}`` of ``chat.completions.create``."""
    floor = walker.floor
    for key, value in request.items():
        if key == "messages" and (
            type(value) is list or (isinstance(value, Sequence) and not isinstance(value, str))
        ):
            _chat_messages(walker, value, (None, "messages"))
        elif type(key) is not str or len(key) > _KEY_MAX or key in _OTHER_KEYS:
            walker.other(key, value)
        elif (
            type(value) is str
            and value.isascii()
            and len(value) <= _DATA_URL_MIN
            and len(value) < floor
        ):
            walker.text_bytes += len(value)  # the model's name and such: a short string
            if walker.collect is not None:
                walker.collect.append(value)
        elif value is None or type(value) in (int, float, bool):
            continue  # a number or a flag: nothing to measure
        else:
            walker.other(key, value)


def _chat_messages(walker: Walker, messages: Sequence[Any], base: Node) -> None:
    if walker.collect is not None:  # the counting pass: the general path, collecting texts
        walker.messages += len(messages)
        for index, message in enumerate(messages):
            _chat_other(walker, message, index, base)
        walker.index, walker.tool = None, None
        return
    try:
        _chat_loop(walker, messages, base)
    except TypeError as exc:  # len() of a key that is not a string (see _chat_loop)
        for message in messages:
            if type(message) is dict and not all(type(key) is str for key in message):
                raise UsageError("a chat message's keys are strings") from exc
        raise


def _chat_loop(walker: Walker, messages: Sequence[Any], base: Node) -> None:
    # The hot path of the benchmark, in one function (after a 2 MiB dump has evicted the
    # caches, every other function it would call costs a cache miss): plain string leaves are
    # measured into local tallies, the usual tool call {id, type, function: {name, arguments}}
    # too; anything else (a heavy or data-URL string, a long key, parts, an unusual call) goes
    # to the general path, _chat_value. A key is checked by its len() alone, the cheapest test
    # there is: a key that is not a string (no chat message has one) raises TypeError, made a
    # UsageError by the caller. The floor: a tool result under its own (lower) threshold must
    # reach the general path. The counting pass (collect) never comes here.
    threshold = walker.floor
    calls = walker.calls
    text_bytes = 0
    json_bytes = 0
    walker.messages += len(messages)
    for index, message in enumerate(messages):
        if type(message) is not dict:
            _chat_other(walker, message, index, base)
            continue
        for key, value in message.items():
            if type(value) is str:
                if value.isascii():
                    size = len(value)
                else:
                    size = len(value.encode("utf-8", "surrogatepass"))
                if (
                    size < threshold
                    # value[0] first: one index is cheaper than a startswith call
                    and (size <= _DATA_URL_MIN or value[0] != "d" or not value.startswith("data:"))
                    and len(key) <= _KEY_MAX  # a long key is content: measured by the helper
                ):
                    text_bytes += size
                    continue
            elif value is None:
                if len(key) <= _KEY_MAX:
                    continue
            elif key == "tool_calls" and type(value) is list:
                for position, call in enumerate(value):
                    # Exactly {id, type, function: {name, arguments}}, short ASCII strings (at
                    # most a quarter of the threshold in characters, so under it in bytes).
                    if type(call) is dict and len(call) == 3:
                        try:
                            function, call_id, kind = call["function"], call["id"], call["type"]
                            if type(function) is dict and len(function) == 2:
                                name, arguments = function["name"], function["arguments"]
                            else:
                                name = arguments = None
                        except KeyError:
                            name = arguments = None
                        if (
                            type(arguments) is str
                            and type(name) is str
                            and type(call_id) is str
                            and type(kind) is str
                            and arguments.isascii()
                            and (len(call_id) + len(kind) + len(name) + len(arguments)) * 4
                            < threshold
                        ):
                            calls[call_id] = name  # validated when a finding names it
                            text_bytes += len(call_id) + len(kind) + len(name)
                            json_bytes += len(arguments)
                            continue
                    walker.index, walker.tool, walker.where = index, None, "text"
                    _chat_tool_call(walker, call, (((base, index), key), position))
                continue
            _chat_value(walker, message, index, (base, index), key, value)
    walker.text_bytes += text_bytes
    walker.json_bytes += json_bytes
    walker.index, walker.tool = None, None


def _chat_other(walker: Walker, message: Any, index: int, base: Node) -> None:
    plain = message if isinstance(message, Mapping) else _plain(message)
    if isinstance(plain, Mapping):
        for key, value in plain.items():
            if value is not None:
                _chat_value(walker, plain, index, (base, index), key, value)
            else:
                walker.key(key, (base, index))
    else:
        walker.index, walker.tool, walker.where = index, None, "other"
        walker.any(message, (base, index))


def _chat_value(
    walker: Walker, message: Mapping[str, Any], index: int, node: Node, key: str, value: Any
) -> None:
    role = message.get("role")
    walker.index, walker.tool = index, None
    walker.where = "system" if role in _SYSTEM_ROLES else "text"
    if type(key) is not str or len(key) > _KEY_MAX:
        walker.key(key, node)
    if key == "content" and role in ("tool", "function"):
        tool = walker.called(message.get("tool_call_id")) if role == "tool" else None
        walker.tool_result(value, (node, key), tool or _tool_name(message.get("name")))
    elif key == "content" and type(value) is list:
        _chat_parts(walker, value, (node, key))
    elif key == "content" and not isinstance(value, str):
        walker.parts(value, (node, key))
    elif key == "tool_calls" and type(value) is list:
        for position, call in enumerate(value):
            _chat_tool_call(walker, call, ((node, key), position))
    elif key == "function_call" and isinstance(value, Mapping):
        _chat_tool_call(walker, {"function": value}, (node, key), bare=True)
    else:
        walker.any(value, (node, key))


def _chat_parts(walker: Walker, parts: list[Any], node: Node) -> None:
    """A message's content parts: text parts inline, the rest generically; then the message
    judged as a whole (the texts of its parts and its non-image attachments)."""
    threshold = walker.threshold
    collect = walker.collect
    found = len(walker.findings)
    outer = None  # a group, begun at the first part walked generically (most parts are text)
    text_bytes = 0
    texts = 0  # the text of the text parts, not their "type"
    for position, part in enumerate(parts):
        if type(part) is not dict or part.get("type") != "text":
            if outer is None:
                outer = walker.begin_group(attachments=False)
            walker.any(part, (node, position))
            continue
        plain = len(part) == 2 and "text" in part  # exactly {"type", "text"}: no key to check
        for key, value in part.items():
            if not plain and (type(key) is not str or len(key) > _KEY_MAX):
                walker.key(key, (node, position))
            if type(value) is str:
                size = len(value) if value.isascii() else _utf8(value)
                text_bytes += size
                if key != "type":
                    texts += size
                if collect is not None:
                    collect.append(value)
                if size >= threshold:
                    walker.judge(value, size, ((node, position), key), walker.where)
            elif value is not None:
                walker.any(value, ((node, position), key))
    walker.text_bytes += text_bytes
    leaves: list[tuple[str, int]] = []
    if outer is not None:
        leaves = walker.group or []
        walker.group, walker.group_hit, walker.group_all = outer
    if len(walker.findings) > found:  # a part was a finding already: not judged twice
        return
    size = texts + sum(n for _, n in leaves) if leaves else texts
    if size < threshold:
        return
    # Rare: at or over the threshold as a whole; genuine stubs and segments do not count.
    inline = [
        (value, _utf8(value))
        for part in parts
        if type(part) is dict and part.get("type") == "text"
        for key, value in part.items()
        if key != "type" and type(value) is str
    ]
    raw = size - sum(n for text, n in [*inline, *leaves] if walker.genuine(text))
    if raw >= threshold:
        walker.find(node, raw, walker.where)


def _chat_tool_call(walker: Walker, call: Any, node: Node, *, bare: bool = False) -> None:
    if type(call) is not dict and not isinstance(call, Mapping):
        walker.any(call, node)
        return
    threshold = walker.threshold
    function = call.get("function")
    name = function.get("name") if type(function) is dict or isinstance(function, Mapping) else None
    call_id = call.get("id")
    if type(call_id) is str and type(name) is str:
        walker.calls[call_id] = name  # validated when a finding names it
    for key, value in call.items():
        if type(key) is not str or len(key) > _KEY_MAX:
            walker.key(key, node)
        if key == "function" and (type(value) is dict or isinstance(value, Mapping)):
            fnode = node if bare else (node, key)
            for fkey, fvalue in value.items():
                if type(fkey) is not str or len(fkey) > _KEY_MAX:
                    walker.key(fkey, fnode)
                if fkey == "arguments":
                    if type(fvalue) is str and len(fvalue) * 4 < threshold and fvalue.isascii():
                        walker.json_bytes += len(fvalue)
                        if walker.collect is not None:
                            walker.collect.append(fvalue)
                    else:
                        walker.tool_input(fvalue, (fnode, fkey), _tool_name(name))
                elif type(fvalue) is str and len(fvalue) * 4 < threshold:
                    walker.text_bytes += len(fvalue)
                    if walker.collect is not None:
                        walker.collect.append(fvalue)
                else:
                    walker.any(fvalue, (fnode, fkey))
        elif type(value) is str and len(value) * 4 < threshold:
            walker.text_bytes += len(value)  # ids and types: short, tallied as characters
            if walker.collect is not None:
                walker.collect.append(value)
        else:
            walker.any(value, (node, key))


# -- OpenAI Responses -------------------------------------------------------------------------


def walk_openai_responses(walker: Walker, request: Mapping[str, Any]) -> None:
    """``{"model", "input": str | [...], "instructions", "tools", ...}`` of ``responses.create``."""
    for key, value in request.items():
        if key == "input":
            walker.where = "text"
            if isinstance(value, str):
                walker.index, walker.tool = 0, None
                walker.messages += 1
                walker.leaf(value, (None, key), TEXT)
            elif isinstance(value, Sequence) and walker.collect is None:
                _responses_loop(walker, value, (None, key))
            elif isinstance(value, Sequence):  # the counting pass takes the general path
                for index, item in enumerate(value):
                    _response_item(walker, item, index, ((None, key), index))
            else:
                walker.other(key, value)
        else:
            walker.other(key, value)


_TEXT_PARTS = frozenset({"input_text", "output_text"})
_CALL_INPUTS = frozenset({"arguments", "input", "action"})
"""The keys of a call item :func:`_response_item` walks as the call's input (JSON)."""
_FAMILY_KEYS = _B64_KEYS | _JSON_KEYS
_EMPTY_PART_KEYS = frozenset({"annotations", "logprobs"})
"""Keys of a text part the fast path takes only empty (``[]``), as the SDK returns them."""


def _responses_loop(walker: Walker, items: Sequence[Any], base: Node) -> None:
    # The usual input items measured inline, in one function as _chat_loop does (a call per
    # item or per string costs more than the measuring): a message ({role, content}, or type
    # message with an id and a status) whose content is a string or a list of input_text /
    # output_text parts without annotations; a function_call or function_call_output whose
    # values are all strings. Every key short and of no family of its own, every string under
    # the lowest threshold and not a data URL, a message's parts summing under it: no finding
    # is possible. Anything else takes the general path, _response_item, item by item;
    # tests/test_guard_paths.py holds the two to the same tallies and findings.
    floor = walker.floor
    text_bytes = 0
    json_bytes = 0
    plain = 0
    for index, item in enumerate(items):
        if type(item) is not dict:
            _response_item(walker, item, index, (base, index))
            continue
        kind = item.get("type")
        text = 0  # this item's text-family bytes, kept only if the whole item is plain
        data = 0  # its JSON bytes: a call's input
        usual = True
        if kind is None or kind == "message":
            for key, value in item.items():
                if type(key) is not str or len(key) > _KEY_MAX or key in _FAMILY_KEYS:
                    usual = False  # a long key is content; base64 and JSON keys have families
                    break
                if type(value) is str:
                    size = len(value) if value.isascii() else _utf8(value)
                    if size >= floor or (size > _DATA_URL_MIN and value.startswith("data:")):
                        usual = False
                        break
                    text += size
                elif key == "content" and type(value) is list:
                    group = 0  # what the message's group sums: the parts' text, not their type
                    for part in value:
                        if type(part) is not dict:
                            usual = False
                            break
                        part_kind = part.get("type")
                        if type(part_kind) is not str or part_kind not in _TEXT_PARTS:
                            usual = False
                            break
                        for part_key, part_value in part.items():
                            if part_key == "text" or part_key == "type":
                                if type(part_value) is not str:
                                    usual = False
                                    break
                                if part_value.isascii():
                                    size = len(part_value)
                                else:
                                    size = _utf8(part_value)
                                if size >= floor or (
                                    size > _DATA_URL_MIN and part_value.startswith("data:")
                                ):
                                    usual = False
                                    break
                                text += size
                                if part_key == "text":
                                    group += size
                            elif part_key not in _EMPTY_PART_KEYS or part_value != []:
                                usual = False
                                break
                        if not usual:
                            break
                    if not usual or group >= floor:
                        usual = False
                        break
                elif value is not None:
                    usual = False
                    break
        elif kind == "function_call" or kind == "function_call_output":
            call = kind == "function_call"
            for key, value in item.items():
                if type(key) is not str or len(key) > _KEY_MAX:
                    usual = False
                    break
                if value is None:
                    continue
                if type(value) is not str:
                    usual = False
                    break
                size = len(value) if value.isascii() else _utf8(value)
                if size >= floor or (size > _DATA_URL_MIN and value.startswith("data:")):
                    usual = False
                    break
                if call and key in _CALL_INPUTS:
                    data += size  # a call's input: JSON
                else:
                    text += size
            if usual and call:
                walker.remember_call(item.get("call_id") or item.get("id"), item.get("name"))
        else:
            usual = False
        if usual:
            text_bytes += text
            json_bytes += data
            plain += 1
        else:
            _response_item(walker, item, index, (base, index))
    walker.text_bytes += text_bytes
    walker.json_bytes += json_bytes
    walker.messages += plain


def _response_item(walker: Walker, item: Any, index: int, node: Node) -> None:
    walker.index, walker.tool = index, None
    walker.messages += 1
    if not isinstance(item, Mapping):
        plain = _plain(item)
        if not isinstance(plain, Mapping):
            walker.where = "other"
            walker.any(item, node)
            return
        item = plain
    kind = item.get("type")
    role = item.get("role")
    walker.where = "system" if role in _SYSTEM_ROLES else "text"
    if isinstance(kind, str) and kind.endswith("_output"):
        tool = walker.called(item.get("call_id"))
        for key, value in item.items():
            walker.key(key, node)
            if key == "output":
                walker.tool_result(value, (node, key), tool)
            else:
                walker.any(value, (node, key))
        return
    if isinstance(kind, str) and kind.endswith("_call"):
        tool = walker.remember_call(item.get("call_id") or item.get("id"), item.get("name"))
        walker.tool = tool
        for key, value in item.items():
            walker.key(key, node)
            if key in _CALL_INPUTS:
                walker.tool_input(value, (node, key), tool)
            elif key == "output":  # mcp_call carries its own result
                walker.tool_result(value, (node, key), tool)
            else:
                walker.any(value, (node, key))
        return
    opaque = _opaque(_RESPONSES_OPAQUE, kind) or _NO_OPAQUE
    walker.mapping(item, node, parts="content", opaque=opaque)


# -- OpenAI legacy Completions ----------------------------------------------------------------


def _token_ids(value: object) -> bool:
    """Whether ``value`` is a prompt of token ids (a list of integers)."""
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str | bytes | bytearray)
        and len(value) > 0
        and all(type(token) is int for token in value)
    )


def walk_openai_completions(walker: Walker, request: Mapping[str, Any]) -> None:
    """``{"model", "prompt": str | [str] | [int] | [[int]], "suffix", ...}`` of the legacy
    ``completions.create``: each prompt is a message; token ids count as tokens."""
    for key, value in request.items():
        walker.index, walker.tool, walker.where = None, None, "text"
        if key == "prompt" and value is not None and not isinstance(value, Mapping):
            if isinstance(value, str) or _token_ids(value):
                prompts: Sequence[Any] = [value]
                node: Node = None
            elif isinstance(value, Sequence):
                prompts, node = value, (None, key)
            else:
                walker.other(key, value)
                continue
            for index, prompt in enumerate(prompts):
                walker.index = index
                walker.messages += 1
                where = (None, key) if node is None else (node, index)
                if isinstance(prompt, str):
                    walker.leaf(prompt, where, TEXT)
                elif _token_ids(prompt):
                    walker.token_ids(len(prompt), where)
                else:
                    walker.any(prompt, where)
        elif key == "suffix" and isinstance(value, str):
            walker.leaf(value, (None, key), TEXT)
        else:
            walker.other(key, value)
    walker.index, walker.tool = None, None


# -- Anthropic Messages -----------------------------------------------------------------------


def walk_anthropic(walker: Walker, request: Mapping[str, Any]) -> None:
    """``{"model", "system", "messages": [...], "tools", ...}`` of ``messages.create``."""
    for key, value in request.items():
        if key == "messages" and isinstance(value, Sequence) and not isinstance(value, str):
            base: Node = (None, "messages")
            if walker.collect is None:  # the counting pass takes the general path
                _anthropic_loop(walker, value, base)
                continue
            for index, message in enumerate(value):
                _anthropic_message(walker, message, index, (base, index))
        else:
            walker.other(key, value)


def _anthropic_loop(walker: Walker, messages: Sequence[Any], base: Node) -> None:
    # The usual messages measured inline, as _chat_loop does for chat: a string content, or
    # blocks that are exactly {type: text, text}, {type: tool_use, id, name, input: a flat
    # object} or {type: tool_result, tool_use_id, content: a string}, with short keys, no
    # string at or over the lowest threshold or holding a data URL, and the message's parts
    # summing under it (so no finding is possible). Anything else takes the general path,
    # _anthropic_message, message by message; tests/test_guard_paths.py holds the two to the
    # same tallies and findings.
    floor = walker.floor
    text_bytes = 0
    plain = 0
    for index, message in enumerate(messages):
        if type(message) is dict and len(message) == 2:
            # The commonest: exactly {role, content}, two strings (inline, no call).
            role, content = message.get("role"), message.get("content")
            if type(role) is str and type(content) is str and role.isascii():
                if content.isascii():
                    size = len(content)
                else:
                    size = len(content.encode("utf-8", "surrogatepass"))
                if (
                    size < floor
                    and len(role) <= _DATA_URL_MIN
                    and len(role) < floor
                    and (size <= _DATA_URL_MIN or not content.startswith("data:"))
                ):
                    text_bytes += len(role) + size
                    plain += 1
                    continue
        if type(message) is not dict or not _anthropic_plain(walker, message, floor):
            _anthropic_message(walker, message, index, (base, index))
    walker.text_bytes += text_bytes
    walker.messages += plain


def _anthropic_plain(walker: Walker, message: dict[Any, Any], floor: int) -> bool:
    """Tally ``message`` if it has the usual shape (see :func:`_anthropic_loop`); ``False``,
    with nothing tallied, if not."""
    text = 0  # text-family bytes
    group = 0  # what the message's group sums: the parts, not the text blocks' kind
    data = 0  # JSON bytes of tool inputs
    calls: list[tuple[object, object]] = []
    for key, value in message.items():
        if type(key) is not str or len(key) > _KEY_MAX:
            return False
        if type(value) is str:
            size = _small_text(value, floor)
            if size < 0:
                return False
            text += size
        elif key == "content" and type(value) is list:
            for block in value:
                if type(block) is not dict:
                    return False
                kind = block.get("type")
                strings: tuple[object, ...]
                if kind == "text" and len(block) == 2:
                    strings = (block.get("text"),)
                    text += 4  # "text", the block's kind: measured, not summed
                elif kind == "tool_use" and len(block) == 4:
                    size = _flat_input(block.get("input"), floor)
                    if size < 0:
                        return False
                    data += size  # measured as compact JSON, judged alone
                    strings = (kind, block.get("id"), block.get("name"))
                    calls.append((block.get("id"), block.get("name")))
                elif kind == "tool_result" and len(block) == 3:
                    size = _small_text(block.get("content"), floor)
                    if size < 0:
                        return False
                    text += size  # a group of its own: one string under the floor
                    strings = (kind, block.get("tool_use_id"))
                else:
                    return False
                for string in strings:
                    if (
                        type(string) is str
                        and string.isascii()
                        and len(string) <= _DATA_URL_MIN
                        and len(string) < floor
                    ):
                        size = len(string)  # an id, a name, a kind: short ASCII, inline
                    else:
                        size = _small_text(string, floor)
                        if size < 0:
                            return False
                    text += size
                    group += size
            if group >= floor:
                return False
        elif value is not None:
            return False
    walker.messages += 1
    walker.text_bytes += text
    walker.json_bytes += data
    for call_id, name in calls:
        walker.remember_call(call_id, name)
    return True


def _anthropic_message(walker: Walker, message: Any, index: int, node: Node) -> None:
    walker.index, walker.tool = index, None
    walker.where = "text"
    walker.messages += 1
    if not isinstance(message, Mapping):
        plain = _plain(message)
        if not isinstance(plain, Mapping):
            walker.any(message, node)
            return
        message = plain
    assistant = message.get("role") == "assistant"
    for key, value in message.items():
        walker.key(key, node)
        if key == "content" and isinstance(value, list | tuple):
            outer = walker.begin_group(attachments=False)
            for position, block in enumerate(value):
                _anthropic_block(walker, block, ((node, key), position), assistant)
            walker.where, walker.tool = "text", None
            walker.end_group((node, key), outer)
        elif key == "content" and value is not None and not isinstance(value, str):
            walker.parts(value, (node, key))
        elif isinstance(value, str):
            walker.leaf(value, (node, key), TEXT)
        elif value is not None:
            walker.any(value, (node, key))


def _anthropic_block(walker: Walker, block: Any, node: Node, assistant: bool) -> None:
    walker.tool, walker.where = None, "text"
    if not isinstance(block, Mapping):
        plain = _plain(block)  # an SDK block passed back (a ThinkingBlock of a response)
        if not isinstance(plain, Mapping):
            walker.any(block, node)
            return
        block = plain
    kind = block.get("type")
    if kind == "text":
        for key, value in block.items():
            walker.key(key, node)
            if key == "type" and isinstance(value, str):
                walker.leaf_alone(value, (node, key), TEXT)  # a block's kind, not its text
            elif isinstance(value, str):
                walker.leaf(value, (node, key), TEXT)
            elif value is not None:
                walker.any(value, (node, key))
    elif isinstance(kind, str) and kind.endswith("tool_use"):
        tool = walker.remember_call(block.get("id"), block.get("name"))
        for key, value in block.items():
            walker.key(key, node)
            if key == "input":
                walker.tool_input(value, (node, key), tool)
            else:
                walker.any(value, (node, key))
    elif isinstance(kind, str) and kind.endswith("tool_result"):
        tool = walker.called(block.get("tool_use_id"))
        for key, value in block.items():
            walker.key(key, node)
            if key == "content":
                walker.tool_result(value, (node, key), tool)
            else:
                walker.any(value, (node, key))
    else:
        opaque = _opaque(_ANTHROPIC_OPAQUE, kind) if assistant else None
        walker.mapping(block, node, opaque=opaque or _NO_OPAQUE)


# -- LangChain messages -----------------------------------------------------------------------

_LC_TOOL_KINDS = frozenset({"tool", "function"})
_LC_AI_KINDS = frozenset({"ai", "assistant", "AIMessageChunk"})


def walk_langchain(walker: Walker, request: Any) -> None:
    """A list of LangChain messages, or a mapping whose ``messages`` key holds one."""
    if isinstance(request, Mapping):
        for key, value in request.items():
            if key == "messages" and isinstance(value, Sequence) and not isinstance(value, str):
                _langchain_messages(walker, value, (None, "messages"))
            else:
                walker.other(key, value)
    else:
        _langchain_messages(walker, request, (None, "messages"))


def _langchain_plain(walker: Walker, message: Any, message_type: type, floor: int) -> bool:
    """Tally a LangChain message object of the usual shape inline, as the general path would
    (its kind, a string content, name, tool_call_id, tool calls with a flat ``args``), when no
    part of it can be a finding; ``False``, with nothing tallied, for anything else (a list
    content, additional_kwargs, invalid tool calls, a string over the lowest threshold).
    tests/test_guard_paths.py holds it to the general path."""
    if not isinstance(message, message_type):
        return False
    fields = message.__dict__
    if fields.get("additional_kwargs") or fields.get("invalid_tool_calls"):
        return False
    text = 0
    data = 0
    for value in (fields.get("type"), fields.get("content")):
        size = _small_text(value, floor)
        if size < 0:
            return False
        text += size
    for name in ("name", "tool_call_id"):
        value = fields.get(name)
        if value:
            size = _small_text(value, floor)
            if size < 0:
                return False
            text += size
    pairs: list[tuple[object, object]] = []
    calls = fields.get("tool_calls")
    if calls:
        if type(calls) is not list:
            return False
        for call in calls:
            if type(call) is not dict or len(call) != 4:  # {name, args, id, type}
                return False
            size = _flat_input(call.get("args"), floor)
            if size < 0:
                return False
            data += size
            for value in (call.get("name"), call.get("id"), call.get("type")):
                size = _small_text(value, floor)
                if size < 0:
                    return False
                text += size
            pairs.append((call.get("id"), call.get("name")))
    walker.messages += 1
    walker.text_bytes += text
    walker.json_bytes += data
    for call_id, call_name in pairs:
        walker.remember_call(call_id, call_name)
    return True


def _langchain_messages(walker: Walker, messages: Sequence[Any], base: Node) -> None:
    message_type = _langchain_base()
    floor = walker.floor
    fast = walker.collect is None and message_type is not None  # counting: the general path
    for index, message in enumerate(messages):
        if (
            fast
            and message_type is not None
            and _langchain_plain(walker, message, message_type, floor)
        ):
            continue
        node = (base, index)
        walker.index, walker.tool = index, None
        walker.messages += 1
        view = _langchain_view(message, message_type)
        if view is None:
            walker.where = "other"
            walker.any(message, node)
            continue
        kind = view.get("type") or view.get("role")
        ai = type(kind) is str and kind in _LC_AI_KINDS
        walker.where = "system" if kind in ("system", "developer") else "text"
        for call in view.get("tool_calls") or ():
            if isinstance(call, Mapping):
                walker.remember_call(call.get("id"), call.get("name"))
        for key, value in view.items():
            walker.key(key, node)
            if key in _LANGCHAIN_SKIP or value is None:
                continue
            if key == "content" and kind in _LC_TOOL_KINDS:
                tool = _tool_name(view.get("name")) or walker.called(view.get("tool_call_id"))
                walker.tool_result(value, (node, key), tool)
            elif key in ("tool_calls", "invalid_tool_calls") and isinstance(value, Sequence):
                for position, call in enumerate(value):
                    _langchain_tool_call(walker, call, ((node, key), position))
            elif key == "additional_kwargs" and isinstance(value, Mapping):
                _langchain_kwargs(walker, value, (node, key), ai)
            elif isinstance(value, str):
                walker.leaf(value, (node, key), TEXT)
            elif key == "content" and ai and isinstance(value, list | tuple):
                _langchain_ai_content(walker, value, (node, key))
            elif key == "content":
                walker.parts(value, (node, key))
            else:
                walker.any(value, (node, key))
            walker.where = "system" if kind in ("system", "developer") else "text"


def _langchain_tool_call(walker: Walker, call: Any, node: Node) -> None:
    if not isinstance(call, Mapping):
        walker.any(call, node)
        return
    tool = _tool_name(call.get("name"))
    for key, value in call.items():
        walker.key(key, node)
        if key == "args":
            walker.tool_input(value, (node, key), tool)
        else:
            walker.any(value, (node, key))


def _langchain_ai_content(walker: Walker, blocks: Sequence[Any], node: Node) -> None:
    """An AI message's content list, as :meth:`Walker.parts` walks it, its reasoning blocks'
    opaque values excepted."""
    outer = walker.begin_group(attachments=False)
    for position, block in enumerate(blocks):
        opaque = _opaque(_LANGCHAIN_OPAQUE, block.get("type")) if type(block) is dict else None
        if opaque is not None:
            walker.mapping(block, (node, position), opaque=opaque)
        elif isinstance(block, str):
            walker.leaf(block, (node, position), TEXT)
        else:
            walker.any(block, (node, position))
    walker.end_group(node, outer)


def _langchain_kwargs(walker: Walker, kwargs: Mapping[str, Any], node: Node, ai: bool) -> None:
    for key, value in kwargs.items():
        walker.key(key, node)
        if key == "reasoning" and ai and isinstance(value, Mapping):
            # langchain-openai keeps a Responses reasoning item here
            walker.mapping(value, (node, key), opaque=_REASONING_ITEM)
        elif key == "tool_calls" and isinstance(value, Sequence):
            for position, call in enumerate(value):
                _chat_tool_call(walker, call, ((node, key), position))
        elif key == "function_call" and isinstance(value, Mapping):
            _chat_tool_call(walker, {"function": value}, (node, key), bare=True)
        else:
            walker.any(value, (node, key))
