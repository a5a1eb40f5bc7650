"""Streamable HTTP on loopback, both ways: the fixture server serves HTTP, the proxy connects to
it by URL and serves HTTP itself, and the SDK client connects to the proxy by URL. The same
checks as over stdio: stubs within budget, exact bytes paged back, SHA-256 matching.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from _require import require

require("mcp", "mcp")

from mcp_fixtures import (  # noqa: E402 - after the extra's check
    HEAVY_SERVER,
    STUB_BUDGET,
    Connected,
    child_env,
    cli,
    connect,
    http_process,
    page_bytes,
    stubbed_parts,
)

sys.path.insert(0, str(HEAVY_SERVER.parent))
import heavy_server  # noqa: E402 - the fixture's own generators

SESSION = "http-tests"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("http")


@pytest.fixture(scope="module")
def proxy_url(workdir: Path) -> Iterator[str]:
    env = child_env(workdir)
    upstream = [sys.executable, str(HEAVY_SERVER), "--http", "127.0.0.1:0"]
    with http_process(upstream, env, "fixture: serving MCP on") as upstream_url:
        command = cli(
            workdir / "store",
            SESSION,
            "proxy",
            "--per-session",
            "--url",
            upstream_url,
            "--http",
            "127.0.0.1:0",
        )
        with http_process(command, env, "cargohold: serving MCP on") as url:
            yield url


@pytest.fixture(scope="module")
def proxied(proxy_url: str) -> Iterator[Connected]:
    with connect(proxy_url, mode="legacy") as client:
        yield client


def test_heavy_text_over_http_both_ways_is_a_stub_that_pages_back_exactly(
    proxied: Connected,
) -> None:
    result = proxied.call("heavy_text", {"size": 400_000})

    (part,) = stubbed_parts(result)
    assert len(part.stub.encode()) <= STUB_BUDGET
    body = proxied.read_all(part.ref)
    assert body == heavy_server.log_text(400_000).encode()
    assert part.ref.endswith(hashlib.sha256(body).hexdigest())


def test_json_over_http_is_stored_once_and_reads_back_as_the_same_document(
    proxied: Connected,
) -> None:
    result = proxied.call("heavy_json", {"rows": 3000})

    (part,) = stubbed_parts(result)
    assert result.structured_content is not None
    assert result.structured_content["cargohold"]["ref"] == part.ref
    assert json.loads(proxied.read_all(part.ref)) == heavy_server.page(3000).model_dump()


def test_an_image_over_http_is_stored_by_reference(proxied: Connected) -> None:
    result = proxied.call("image", {"size": 70_000})

    (part,) = stubbed_parts(result)
    assert proxied.read_all(part.ref) == heavy_server.blob(70_000, heavy_server.PNG)


def test_each_mcp_session_over_http_has_a_scope_of_its_own(
    proxied: Connected, proxy_url: str
) -> None:
    (part,) = stubbed_parts(proxied.call("heavy_text", {"size": 60_000}))

    with connect(proxy_url, mode="legacy") as other:
        answer = other.call("artifact_info", {"ref": part.ref})

    assert answer.is_error
    assert answer.structured_content is not None
    assert answer.structured_content["outcome"] == "unauthorized"


def test_a_client_negotiating_the_newest_protocol_gets_stubs_too(proxy_url: str) -> None:
    with connect(proxy_url) as modern:  # mode "auto": the 2026 per-request protocol
        result = modern.call("heavy_text", {"size": 80_000})

        (part,) = stubbed_parts(result)
        assert modern.read_all(part.ref) == heavy_server.log_text(80_000).encode()


MAX_PAGE = 1024 * 1024
"""The documented maximum of one read (``budget`` and ``length``): 1 MiB."""


def read_max_page(client: Connected, ref: str) -> tuple[bytes, dict[str, object]]:
    answer = client.call(
        "artifact_read", {"ref": ref, "offset": 0, "length": MAX_PAGE, "budget": MAX_PAGE}
    )
    assert not answer.is_error, answer.content
    assert answer.structured_content is not None
    return page_bytes(answer), answer.structured_content


def test_a_page_of_the_documented_maximum_arrives_through_the_proxy_over_http(
    proxied: Connected,
) -> None:
    size = 1_300_000
    (part,) = stubbed_parts(proxied.call("heavy_text", {"size": size}))

    page, facts = read_max_page(proxied, part.ref)

    assert page == heavy_server.log_text(size).encode()[:MAX_PAGE]
    assert (facts["start"], facts["end"], facts["next_offset"]) == (0, MAX_PAGE, MAX_PAGE)
    assert facts["sha256"] == hashlib.sha256(page).hexdigest()


def test_a_page_of_the_documented_maximum_arrives_to_a_client_of_the_newest_protocol(
    proxy_url: str,
) -> None:
    size = 1_100_000
    with connect(proxy_url) as modern:
        (part,) = stubbed_parts(modern.call("heavy_text", {"size": size}))

        page, _ = read_max_page(modern, part.ref)

    assert page == heavy_server.log_text(size).encode()[:MAX_PAGE]


def test_a_page_of_the_documented_maximum_arrives_from_cargohold_mcp_over_http(
    workdir: Path,
) -> None:
    body = heavy_server.log_text(1_500_000).encode()
    source = workdir / "big.log"
    source.write_bytes(body)
    env = child_env(workdir)
    put = subprocess.run(
        cli(workdir / "store", "mcp-http-max", "put", str(source)),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    ref = put.stdout.strip()
    command = cli(workdir / "store", "mcp-http-max", "mcp", "--http", "127.0.0.1:0")

    with (
        http_process(command, env, "cargohold: serving MCP on") as url,
        connect(url, mode="legacy") as reader,
    ):
        page, facts = read_max_page(reader, ref)

    assert page == body[:MAX_PAGE]
    assert facts["next_offset"] == MAX_PAGE
