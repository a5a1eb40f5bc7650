"""Attachment disposition: precedence, each disposition, provider_native against the SDKs."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from _require import require
from cargohold import Offloader, OffloadOutcome, UsageError, parse_stub
from cargohold.guard import (
    INLINE,
    PROVIDER_NATIVE,
    REF,
    Attachment,
    Disposition,
    DispositionKind,
    DispositionPolicy,
    DispositionRefusedError,
    DispositionSource,
    Guard,
    adispose,
    dispose,
)
from guard_fixtures import CANARY, KiB, reporter, scoped

PNG = b"\x89PNG\r\n\x1a\n" + CANARY.encode() + bytes(range(256)) * 8
CSV = ("id,name\n" + "".join(f"{i},item-{i}\n" for i in range(200))).encode()


# -- the disposition type and precedence ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind", "tool"),
    [
        ("ref", DispositionKind.REF, None),
        ("inline", DispositionKind.INLINE, None),
        ("provider_native", DispositionKind.PROVIDER_NATIVE, None),
        ("tool:ocr", DispositionKind.TOOL, "ocr"),
        (" tool:pdf.extract ", DispositionKind.TOOL, "pdf.extract"),
    ],
)
def test_dispositions_parse_from_their_written_form(
    text: str, kind: DispositionKind, tool: str | None
) -> None:
    parsed = Disposition.parse(text)
    assert (parsed.kind, parsed.tool) == (kind, tool)
    assert Disposition.parse(str(parsed)) == parsed


@pytest.mark.parametrize("text", ["", "refs", "tool", "tool:", "tool:has space", "TOOL:x"])
def test_malformed_dispositions_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        Disposition.parse(text)


@pytest.mark.parametrize(
    ("hint", "agent_policy", "default", "expected", "source"),
    [
        (None, None, None, REF, DispositionSource.DEFAULT),
        (None, None, INLINE, INLINE, DispositionSource.DEFAULT),
        (None, "tool:ocr", INLINE, Disposition.parse("tool:ocr"), DispositionSource.AGENT),
        ("inline", "tool:ocr", PROVIDER_NATIVE, INLINE, DispositionSource.HINT),
        ("provider_native", None, None, PROVIDER_NATIVE, DispositionSource.HINT),
        ("ref", "inline", "inline", REF, DispositionSource.HINT),
    ],
)
def test_hint_wins_over_agent_policy_which_wins_over_the_default(
    hint: str | None,
    agent_policy: str | None,
    default: Disposition | None,
    expected: Disposition,
    source: DispositionSource,
) -> None:
    policy = DispositionPolicy(
        default=default or REF, agents={"worker-1": agent_policy} if agent_policy else {}
    )
    resolution = policy.resolve(Attachment(PNG, "image/png", hint=hint), agent="worker-1")
    assert (resolution.disposition, resolution.source) == (expected, source)


def test_another_agents_policy_does_not_apply() -> None:
    policy = DispositionPolicy(agents={"planner": "inline"})
    resolution = policy.resolve(Attachment(PNG, "image/png"), agent="worker-1")
    assert (resolution.disposition, resolution.source) == (REF, DispositionSource.DEFAULT)


@pytest.mark.parametrize(
    "media_type", ["image/png", "application/pdf", "text/csv", "audio/wav", "application/zip"]
)
def test_a_media_type_alone_never_decides(media_type: str) -> None:
    assert DispositionPolicy().resolve(Attachment(PNG, media_type)).disposition == REF
    policy = DispositionPolicy(default="inline", agents={"a": "tool:ocr"})
    assert policy.resolve(Attachment(PNG, media_type)).disposition == INLINE
    assert policy.resolve(Attachment(PNG, media_type), agent="a").disposition == Disposition.parse(
        "tool:ocr"
    )


# -- ref ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [200, 64 * KiB])
def test_ref_stores_the_bytes_and_puts_a_genuine_stub_in_the_message(size: int) -> None:
    store = scoped()
    rep, sink = reporter()
    data = (PNG * (size // len(PNG) + 1))[:size]
    done = dispose(
        Attachment(data, "image/png", tool="screenshot"),
        format="openai-chat",
        offloader=Offloader(store, reporter=rep),
    )
    assert done.disposition == REF
    assert done.part["type"] == "text"
    info = parse_stub(done.part["text"], key=store.marker_key())
    assert info is not None
    assert done.ref == info.ref
    assert store.read(info.ref).data == data
    assert [e.outcome for e in sink.events] == [OffloadOutcome.OFFLOADED]
    assert CANARY not in json.dumps(done.part)


def test_ref_without_an_offloader_is_refused() -> None:
    with pytest.raises(DispositionRefusedError) as caught:
        dispose(Attachment(PNG, "image/png"), format="anthropic")
    assert caught.value.reason == "no_offloader"


# -- inline ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "media_type", "expected"),
    [
        ("openai-chat", "image/png", {"type": "image_url"}),
        ("openai-responses", "image/png", {"type": "input_image"}),
        ("anthropic", "image/png", {"type": "image"}),
        ("openai-chat", "application/pdf", {"type": "file"}),
        ("openai-responses", "application/pdf", {"type": "input_file"}),
        ("anthropic", "application/pdf", {"type": "document"}),
        ("openai-chat", "text/csv", {"type": "text"}),
        ("openai-responses", "text/csv", {"type": "input_text"}),
    ],
)
def test_inline_puts_a_small_payload_into_the_part_its_format_expects(
    fmt: str, media_type: str, expected: dict[str, str]
) -> None:
    data = CSV if media_type == "text/csv" else PNG
    done = dispose(Attachment(data, media_type, hint="inline"), format=fmt)
    assert done.disposition == INLINE
    assert done.part["type"] == expected["type"]
    assert done.ref is None
    carried = json.dumps(done.part)
    if media_type == "text/csv":
        assert CSV.decode() in done.part["text"]
    else:
        assert base64.b64encode(data).decode() in carried


def test_inline_refuses_a_payload_at_or_above_the_threshold_once_encoded() -> None:
    data = bytes(range(256)) * 100  # 25 KiB raw, about 34 KiB as base64
    with pytest.raises(DispositionRefusedError) as caught:
        dispose(Attachment(data, "image/png", hint="inline"), format="openai-chat")
    assert caught.value.reason == "inline_too_large"
    assert CANARY not in str(caught.value)
    with pytest.raises(DispositionRefusedError):
        dispose(Attachment(CSV, "text/csv", hint="inline"), format="anthropic", threshold=1024)


# -- tool:<name> ----------------------------------------------------------------------------------


def test_tool_routes_the_stored_attachment_to_the_named_tool() -> None:
    store = scoped()
    done = dispose(
        Attachment(PNG, "image/png", filename="scan.png"),
        format="anthropic",
        policy=DispositionPolicy(agents={"reader": "tool:ocr"}),
        agent="reader",
        offloader=Offloader(store),
    )
    assert done.source is DispositionSource.AGENT
    assert done.route is not None
    assert (done.route.tool, done.route.size, done.route.filename) == ("ocr", len(PNG), "scan.png")
    assert done.route.ref == done.ref
    assert done.ref is not None
    assert store.read(done.ref).data == PNG
    assert str(done.ref) in done.part["text"]
    assert CANARY not in done.part["text"]


# -- provider_native ------------------------------------------------------------------------------

openai = require("openai", "openai")
anthropic = require("anthropic", "anthropic")
httpx2 = require("httpx2", "openai")  # the HTTP client openai 3.x and anthropic 2.x build on


class FilesApi:
    """A MockTransport handler standing in for the providers' files endpoints."""

    def __init__(self) -> None:
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        if request.url.path.endswith("/v1/files") and "anthropic-version" in request.headers:
            return httpx2.Response(
                200,
                json={
                    "id": "file_011anthropic",
                    "type": "file",
                    "filename": "scan.png",
                    "mime_type": "image/png",
                    "size_bytes": len(PNG),
                    "created_at": "2026-11-29T03:00:00Z",
                },
            )
        return httpx2.Response(
            200,
            json={
                "id": "file-openai123",
                "object": "file",
                "bytes": len(PNG),
                "created_at": 0,
                "filename": "scan.png",
                "purpose": "user_data",
                "status": "processed",
            },
        )


def _openai(handler: FilesApi, *, asynchronous: bool = False) -> Any:
    if asynchronous:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
        return openai.AsyncOpenAI(api_key="k", http_client=http, max_retries=0)
    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    return openai.OpenAI(api_key="k", http_client=http, max_retries=0)


def _anthropic(handler: FilesApi, *, asynchronous: bool = False) -> Any:
    if asynchronous:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
        return anthropic.AsyncAnthropic(api_key="k", http_client=http, max_retries=0)
    http = httpx2.Client(transport=httpx2.MockTransport(handler))
    return anthropic.Anthropic(api_key="k", http_client=http, max_retries=0)


@pytest.mark.parametrize(
    ("fmt", "part"),
    [
        ("openai-responses", {"type": "input_image", "file_id": "file-openai123"}),
        ("openai-chat", {"type": "file", "file": {"file_id": "file-openai123"}}),
    ],
)
def test_provider_native_uploads_through_the_openai_files_api(
    fmt: str, part: dict[str, Any]
) -> None:
    handler = FilesApi()
    done = dispose(
        Attachment(PNG, "image/png", filename="scan.png", hint="provider_native"),
        format=fmt,
        client=_openai(handler),
    )
    assert (done.disposition, done.file_id, dict(done.part)) == (
        PROVIDER_NATIVE,
        "file-openai123",
        part,
    )
    [upload] = handler.requests
    assert (upload.method, upload.url.path) == ("POST", "/v1/files")
    assert PNG in upload.content
    assert b"user_data" in upload.content


def test_provider_native_uploads_through_the_anthropic_files_api() -> None:
    handler = FilesApi()
    done = dispose(
        Attachment(PNG, "image/png", filename="scan.png"),
        format="anthropic",
        policy=DispositionPolicy(default="provider_native"),
        client=_anthropic(handler),
    )
    assert done.file_id == "file_011anthropic"
    assert dict(done.part) == {
        "type": "image",
        "source": {"type": "file", "file_id": "file_011anthropic"},
    }
    [upload] = handler.requests
    assert (upload.method, upload.url.path) == ("POST", "/v1/files")
    assert PNG in upload.content


def test_provider_native_with_async_clients_awaits_the_upload() -> None:
    handler = FilesApi()

    async def scenario() -> tuple[Any, Any]:
        first = await adispose(
            Attachment(PNG, "application/pdf", hint="provider_native"),
            format="anthropic",
            client=_anthropic(handler, asynchronous=True),
        )
        second = await adispose(
            Attachment(PNG, "application/pdf", hint="provider_native"),
            format="openai-responses",
            client=_openai(handler, asynchronous=True),
        )
        return first, second

    first, second = asyncio.run(scenario())
    assert first.part == {
        "type": "document",
        "source": {"type": "file", "file_id": "file_011anthropic"},
    }
    assert second.part == {"type": "input_file", "file_id": "file-openai123"}
    assert len(handler.requests) == 2


def test_provider_native_is_never_chosen_by_default_and_needs_a_client() -> None:
    handler = FilesApi()
    done = dispose(
        Attachment(PNG, "image/png"),
        format="openai-chat",
        client=_openai(handler),
        offloader=Offloader(scoped()),
    )
    assert done.disposition == REF
    assert handler.requests == []
    with pytest.raises(DispositionRefusedError) as caught:
        dispose(Attachment(PNG, "image/png", hint="provider_native"), format="anthropic")
    assert caught.value.reason == "no_provider_client"


# -- what disposition produces passes the guard ---------------------------------------------------


def test_every_disposed_part_passes_the_guard() -> None:
    heavy = bytes(range(256)) * 400  # 100 KiB
    offloader = Offloader(scoped())
    parts = [
        dispose(Attachment(heavy, "image/png"), format="openai-chat", offloader=offloader).part,
        dispose(Attachment(PNG, "image/png", hint="inline"), format="openai-chat").part,
        dispose(
            Attachment(heavy, "application/pdf", hint="tool:pdf"),
            format="openai-chat",
            offloader=offloader,
        ).part,
        dispose(
            Attachment(heavy, "image/png", hint="provider_native"),
            format="openai-chat",
            client=_openai(FilesApi()),
        ).part,
    ]
    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": parts}]}
    Guard().check(request, format="openai-chat")
