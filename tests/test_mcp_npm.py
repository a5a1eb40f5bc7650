"""The proxy in front of the real npm reference servers, over stdio, with the SDK client:
``@modelcontextprotocol/server-filesystem`` reading multi-megabyte corpus files, and
``@modelcontextprotocol/server-everything`` for every content type it returns.

Needs ``make mcp-servers`` (npm registry only, cached between runs); skips without them,
fails without them under CI=true.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from _require import require, unavailable

require("mcp", "mcp")

from mcp_types import (  # noqa: E402 - after the extra's check
    EmbeddedResource,
    ResourceLink,
    TextContent,
)

from mcp_fixtures import (  # noqa: E402
    STUB_BUDGET,
    Connected,
    child_env,
    cli,
    connect,
    delivered_bytes,
    node,
    npm_server,
    stdio,
    stubbed_parts,
)

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
GEOJSON = "canada_border.geojson"  # 2.25 MB of JSON
PNG = "torus_render.png"  # 317 KB


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory the filesystem server may read, holding copies of two corpus files."""
    if not (CORPUS / GEOJSON).is_file():
        unavailable(f"the corpus is not at {CORPUS}")
    folder = tmp_path_factory.mktemp("files")
    for name in (GEOJSON, PNG):
        shutil.copyfile(CORPUS / name, folder / name)
    return folder


@pytest.fixture(scope="module")
def filesystem(files: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Connected]:
    script = npm_server("server-filesystem")
    work = tmp_path_factory.mktemp("fs-proxy")
    command = cli(
        work / "store",
        "npm-fs",
        "proxy",
        "--ref-arguments",
        "write_file",
        "--",
        node(),
        str(script),
        str(files),
    )
    with connect(stdio(command, child_env(work)), mode="legacy") as client:
        yield client


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Connected]:
    script = npm_server("server-everything")
    work = tmp_path_factory.mktemp("everything-proxy")
    command = cli(work / "store", "npm-everything", "proxy", "--", node(), str(script))
    with connect(stdio(command, child_env(work)), mode="legacy") as client:
        yield client


def one_stub(result: object) -> tuple[str, str]:
    parts = stubbed_parts(result)  # type: ignore[arg-type]
    assert len(parts) == 1, result
    assert len(parts[0].stub.encode()) <= STUB_BUDGET
    return parts[0].stub, parts[0].ref


def test_a_multi_megabyte_file_read_through_the_filesystem_server_pages_back_exactly(
    filesystem: Connected, files: Path
) -> None:
    expected = (files / GEOJSON).read_bytes()

    result = filesystem.call("read_text_file", {"path": str(files / GEOJSON)})

    _, ref = one_stub(result)  # text and structured content: one payload, stored once
    assert delivered_bytes(result) < 2 * STUB_BUDGET
    body = filesystem.read_all(ref)
    assert body == expected
    assert ref == "artifact://sha256/" + hashlib.sha256(expected).hexdigest()


def test_an_image_read_through_the_filesystem_server_is_stored_as_its_bytes(
    filesystem: Connected, files: Path
) -> None:
    expected = (files / PNG).read_bytes()

    result = filesystem.call("read_media_file", {"path": str(files / PNG)})

    digest = "artifact://sha256/" + hashlib.sha256(expected).hexdigest()
    assert digest in [part.ref for part in stubbed_parts(result)]
    assert filesystem.read_all(digest) == expected
    assert len(result.model_dump_json()) < 4 * STUB_BUDGET


def test_a_file_written_back_by_reference_holds_the_exact_bytes(
    filesystem: Connected, files: Path
) -> None:
    _, ref = one_stub(filesystem.call("read_text_file", {"path": str(files / GEOJSON)}))
    target = files / "copy.geojson"

    sent = {"path": str(target), "content": ref}
    answer = filesystem.call("write_file", sent)

    assert not answer.is_error, answer.content
    assert target.read_bytes() == (files / GEOJSON).read_bytes()
    assert len(json.dumps(sent)) + delivered_bytes(answer) < 10_000


def test_heavy_echoed_text_from_the_everything_server_is_a_stub_that_pages_back(
    everything: Connected,
) -> None:
    message = "".join(f"line {i}: the quick brown fox\n" for i in range(3000))

    result = everything.call("echo", {"message": message})

    _, ref = one_stub(result)
    assert everything.read_all(ref) == f"Echo: {message}".encode()


def test_an_image_from_the_everything_server_is_stored_by_reference(
    everything: Connected,
) -> None:
    result = everything.call("get-tiny-image")

    (part,) = stubbed_parts(result)
    assert part.link.mime_type == "image/png"
    body = everything.read_all(part.ref)
    assert body.startswith(b"\x89PNG")
    assert part.ref.endswith(hashlib.sha256(body).hexdigest())
    texts = [block for block in result.content if isinstance(block, TextContent)]
    assert len(texts) == 3  # the server's text before and after, and the image's stub


def test_a_heavy_embedded_blob_from_the_everything_server_pages_back_exactly(
    everything: Connected,
) -> None:
    payload = hashlib.sha256(b"seed").digest() * 2500  # 80 KB that gzip cannot shrink
    uri = "data:application/octet-stream;base64," + base64.b64encode(payload).decode()

    result = everything.call(
        "gzip-file-as-resource", {"name": "blob.gz", "data": uri, "outputType": "resource"}
    )

    _, ref = one_stub(result)
    assert not any(isinstance(block, EmbeddedResource) for block in result.content)
    assert gzip.decompress(everything.read_all(ref)) == payload


def test_small_parts_and_links_of_the_everything_server_pass_unchanged(
    everything: Connected,
) -> None:
    links = everything.call("get-resource-links", {"count": 3})
    text = everything.call("get-resource-reference", {"resourceType": "Text", "resourceId": 2})
    blob = everything.call("get-resource-reference", {"resourceType": "Blob", "resourceId": 3})

    assert [links.is_error, text.is_error, blob.is_error] == [False, False, False]
    assert sum(isinstance(block, ResourceLink) for block in links.content) == 3
    assert not stubbed_parts(links)
    assert any(isinstance(block, EmbeddedResource) for block in text.content)
    assert len(stubbed_parts(blob)) == 1  # a blob goes by reference (the default disposition)


def test_structured_content_of_the_everything_server_meets_the_listed_schema(
    everything: Connected,
) -> None:
    import jsonschema

    tools = {tool.name: tool for tool in everything.run(everything.client.list_tools).tools}

    result = everything.call("get-structured-content", {"location": "New York"})

    schema = tools["get-structured-content"].output_schema
    assert schema is not None
    jsonschema.validate(result.structured_content, schema)
    assert result.structured_content is not None
    assert "temperature" in result.structured_content


def test_progress_of_the_everything_server_reaches_the_client(everything: Connected) -> None:
    seen: list[float] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    everything.run(
        everything.client.call_tool,
        "trigger-long-running-operation",
        {"duration": 0.2, "steps": 2},
        progress_callback=progress,
    )

    assert seen == [1, 2]


def test_prompts_of_the_everything_server_are_forwarded(everything: Connected) -> None:
    prompts = everything.run(everything.client.list_prompts)
    got = everything.run(everything.client.get_prompt, "simple-prompt")

    assert "simple-prompt" in [prompt.name for prompt in prompts.prompts]
    assert got.messages
