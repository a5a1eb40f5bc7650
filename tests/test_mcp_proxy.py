"""``cargohold proxy`` end to end over stdio, with the official SDK client, in front of a fixture
server of ours (the SDK's MCPServer) that returns heavy results of every kind.

One proxy process serves the whole module (see ``mcp_fixtures``); each test is one behaviour.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from _require import require

require("mcp", "mcp")

from mcp.shared.exceptions import MCPError  # noqa: E402 - after the extra's check
from mcp_types import (  # noqa: E402
    CallToolResult,
    ClientCapabilities,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    LoggingMessageNotification,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolListChangedNotification,
)
from mcp_types.jsonrpc import ErrorData  # noqa: E402

from cargohold._secrets import find_secrets  # noqa: E402
from cargohold._toolspecs import SPECS  # noqa: E402
from mcp_fixtures import (  # noqa: E402
    HEAVY_SERVER,
    MARKER,
    STUB_BUDGET,
    Connected,
    child_env,
    cli,
    connect,
    delivered_bytes,
    stdio,
    stubbed_parts,
)

sys.path.insert(0, str(HEAVY_SERVER.parent))
import heavy_server  # noqa: E402 - the fixture's own generators: the bytes the upstream sent

SESSION = "proxy-tests"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("proxy")


@pytest.fixture(scope="module")
def proxied(workdir: Path) -> Iterator[Connected]:
    command = cli(
        workdir / "store",
        SESSION,
        "proxy",
        "--ref-arguments",
        "update_page",
        "--",
        sys.executable,
        str(HEAVY_SERVER),
    )
    with connect(stdio(command, child_env(workdir)), mode="legacy") as client:
        yield client


def only_stub(result: object) -> tuple[str, str]:
    parts = stubbed_parts(result)  # type: ignore[arg-type]
    assert len(parts) == 1, result
    return parts[0].stub, parts[0].ref


def assert_exact(proxied: Connected, ref: str, expected: bytes) -> None:
    body = proxied.read_all(ref)
    assert body == expected
    assert ref == "artifact://sha256/" + hashlib.sha256(body).hexdigest()


def test_heavy_text_arrives_as_a_stub_within_budget_and_pages_back_exactly(
    proxied: Connected,
) -> None:
    result = proxied.call("heavy_text", {"size": 200_000})

    stub, ref = only_stub(result)
    assert len(stub.encode()) <= STUB_BUDGET
    assert ref in stub
    assert_exact(proxied, ref, heavy_server.log_text(200_000).encode())


def test_the_string_wrapped_in_structured_content_is_stored_once_with_its_text(
    proxied: Connected,
) -> None:
    result = proxied.call("heavy_text", {"size": 120_000})

    _, ref = only_stub(result)
    assert result.structured_content == {
        "cargohold": {
            "outcome": "offloaded",
            "reason": "at_or_above_threshold",
            "ref": ref,
            "size": len(heavy_server.log_text(120_000).encode()),
            "media_type": "text/plain; charset=utf-8",
        }
    }


def test_json_sent_as_text_and_as_structured_content_is_stored_once(proxied: Connected) -> None:
    result = proxied.call("heavy_json", {"rows": 3000})

    _, ref = only_stub(result)
    assert result.structured_content is not None
    assert result.structured_content["cargohold"]["ref"] == ref
    body = proxied.read_all(ref)
    assert json.loads(body) == heavy_server.page(3000).model_dump()
    assert ref.endswith(hashlib.sha256(body).hexdigest())


def test_heavy_structured_content_beside_a_small_text_becomes_the_stubs_structured_form(
    proxied: Connected,
) -> None:
    rows = 3000
    result = proxied.call("summarized_rows", {"rows": rows})

    summary, stub, link = result.content
    assert summary == TextContent(text=heavy_server.summary_of(rows))  # small: as it came
    assert isinstance(stub, TextContent)
    assert stub.text.startswith(MARKER)
    assert len(stub.text.encode()) <= STUB_BUDGET
    assert isinstance(link, ResourceLink)
    body = proxied.read_all(str(link.uri))
    assert json.loads(body) == heavy_server.page(rows).model_dump()
    assert result.structured_content == {
        "cargohold": {
            "outcome": "offloaded",
            "reason": "at_or_above_threshold",
            "ref": str(link.uri),
            "size": len(body),
            "media_type": "application/json",
        }
    }
    assert str(link.uri) == "artifact://sha256/" + hashlib.sha256(body).hexdigest()


def test_an_output_schema_is_widened_so_the_stub_validates_against_it(proxied: Connected) -> None:
    tools = {tool.name: tool for tool in proxied.run(proxied.client.list_tools).tools}
    schema = tools["heavy_json"].output_schema
    result = proxied.call("heavy_json", {"rows": 2500})

    assert schema is not None
    assert schema["type"] == "object"
    jsonschema.validate(result.structured_content, schema)
    jsonschema.validate(heavy_server.page(3).model_dump(), schema)  # the original still does


def test_a_small_result_holding_a_credential_reaches_the_client_redacted(
    proxied: Connected,
) -> None:
    result = proxied.call("small_secret")

    text, note = result.content  # the redacted text, then the note of what was redacted
    assert isinstance(text, TextContent)
    expected = heavy_server.SMALL_SECRET_TEXT.replace(
        heavy_server.GITHUB_TOKEN, "[REDACTED:github_token]"
    )
    assert text.text == expected
    assert isinstance(note, TextContent)
    assert "github_token (line" in note.text
    assert result.structured_content == {"result": expected}


def test_credentials_in_links_and_meta_reach_the_client_redacted_and_the_rest_unchanged(
    proxied: Connected,
) -> None:
    result = proxied.call("leaky_parts")

    received = result.model_dump_json(by_alias=True).encode()
    assert find_secrets(received) == []
    text, link, embedded = result.content
    assert isinstance(text, TextContent)
    assert text.text == "see the link"
    assert text.meta == {"auth": "Authorization: Bearer [REDACTED:authorization_header]"}
    assert isinstance(link, ResourceLink)
    assert link.name == "repo [REDACTED:github_token]"
    assert "example.com/repo.git" in link.uri
    assert link.meta == {"nested": {"tokens": ["[REDACTED:gitlab_token]", "harmless"]}}
    assert isinstance(embedded, EmbeddedResource)
    assert embedded.resource.text == "a small file"  # type: ignore[union-attr]
    assert result.meta is not None
    assert result.meta["plain"] == "kept as it is"


@pytest.mark.parametrize(
    ("tool", "expected", "media_type"),
    [
        ("image", heavy_server.blob(120_000, heavy_server.PNG), "image/png"),
        ("audio", heavy_server.blob(80_000, heavy_server.WAV), "audio/wav"),
        ("embedded_blob", heavy_server.blob(90_000, b"\x1f\x8b"), "application/gzip"),
    ],
)
def test_binary_parts_are_stored_by_reference_and_read_back_as_their_bytes(
    proxied: Connected, tool: str, expected: bytes, media_type: str
) -> None:
    result = proxied.call(tool)

    stub, ref = only_stub(result)
    assert len(stub.encode()) <= STUB_BUDGET
    link = stubbed_parts(result)[0].link
    assert (link.mime_type, link.size) == (media_type, len(expected))
    assert_exact(proxied, ref, expected)


def test_an_embedded_text_resource_is_offloaded_with_its_media_type(proxied: Connected) -> None:
    result = proxied.call("embedded_text", {"rows": 8000})

    _, ref = only_stub(result)
    assert stubbed_parts(result)[0].link.mime_type == "text/csv"
    assert_exact(proxied, ref, heavy_server.csv_text(8000).encode())


def test_a_small_result_passes_unchanged(proxied: Connected) -> None:
    result = proxied.call("small")

    assert result.content == [TextContent(text="all good")]
    assert result.structured_content == {"result": "all good"}


def test_each_heavy_part_of_a_mixed_result_is_offloaded_and_the_light_one_kept(
    proxied: Connected,
) -> None:
    result = proxied.call("mixed")

    parts = stubbed_parts(result)
    assert len(parts) == 3
    assert result.content[0] == TextContent(text="summary: 3 parts follow")
    assert delivered_bytes(result) < 3 * STUB_BUDGET + 4096
    assert_exact(proxied, parts[0].ref, heavy_server.log_text(100_000).encode())


def test_a_result_holding_a_credential_is_stored_and_read_back_with_it_redacted(
    proxied: Connected,
) -> None:
    # The default secrets policy (redact): the result is kept, the credential is not.
    result = proxied.call("with_secret")

    stub, ref = only_stub(result)
    assert "[cargohold]" in stub
    assert "wJalrXUtnFEMI" not in result.model_dump_json()
    assert_exact(
        proxied,
        ref,
        (
            heavy_server.log_text(40_000)
            + "\naws_secret_access_key=[REDACTED:aws_secret_access_key]\n"
        ).encode(),
    )


def test_a_reference_passed_to_an_opted_in_tool_reaches_the_upstream_as_the_exact_bytes(
    proxied: Connected,
) -> None:
    fetched = proxied.call("get_page", {"rows": 4000})
    _, ref = only_stub(fetched)

    sent = {"body": ref}
    answer = proxied.call("update_page", sent)

    received = json.loads(answer.content[0].text)  # type: ignore[union-attr]
    expected = heavy_server.page_text(4000).encode()
    assert len(expected) > 300_000
    assert received == {"bytes": len(expected), "sha256": hashlib.sha256(expected).hexdigest()}
    assert delivered_bytes(fetched) + len(json.dumps(sent)) + delivered_bytes(answer) < 10_000


def test_an_unknown_reference_argument_stops_the_call_before_the_upstream(
    proxied: Connected,
) -> None:
    missing = "artifact://sha256/" + "0" * 64

    answer = proxied.call("update_page", {"body": missing})

    assert answer.is_error
    assert "missing" in answer.content[0].text  # type: ignore[union-attr]


def _stub_ref(text: str) -> str:
    found = re.match(r"\[cargohold\] (artifact://sha256/[0-9a-f]{64})\n", text)
    assert found is not None, text[:200]
    return found.group(1)


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("fixture://log", heavy_server.log_text(heavy_server.LOG_RESOURCE_SIZE).encode()),
        ("fixture://blob", heavy_server.blob(heavy_server.BLOB_RESOURCE_SIZE, b"BLOB")),
    ],
)
def test_a_heavy_upstream_resource_is_read_as_its_stub_under_the_same_uri(
    proxied: Connected, uri: str, expected: bytes
) -> None:
    read = proxied.run(proxied.client.read_resource, uri)

    (contents,) = read.contents
    assert isinstance(contents, TextResourceContents)
    assert contents.uri == uri
    assert len(contents.text.encode()) <= STUB_BUDGET
    assert_exact(proxied, _stub_ref(contents.text), expected)


def test_a_small_upstream_resource_passes_unchanged(proxied: Connected) -> None:
    read = proxied.run(proxied.client.read_resource, "fixture://note")

    (contents,) = read.contents
    assert isinstance(contents, TextResourceContents)
    assert contents.text == "a short note from the fixture"


def test_a_heavy_upstream_prompt_carries_its_stub_in_the_same_message(proxied: Connected) -> None:
    prompt = proxied.run(proxied.client.get_prompt, "review_log")

    (message,) = prompt.messages
    assert message.role == "user"
    assert isinstance(message.content, TextContent)
    assert len(message.content.text.encode()) <= STUB_BUDGET
    expected = "Review this log:\n" + heavy_server.log_text(heavy_server.LOG_RESOURCE_SIZE)
    assert_exact(proxied, _stub_ref(message.content.text), expected.encode())


def test_resources_read_returns_an_artifact_whole_with_its_digest(proxied: Connected) -> None:
    _, ref = only_stub(proxied.call("heavy_text", {"size": 90_000}))

    read = proxied.run(proxied.client.read_resource, ref)

    (contents,) = read.contents
    assert isinstance(contents, TextResourceContents)
    assert contents.text.encode() == heavy_server.log_text(90_000).encode()
    assert contents.meta is not None
    assert contents.meta["cargohold"]["sha256"] == ref.removeprefix("artifact://sha256/")


def test_a_masked_artifact_reads_back_masked_through_the_tools_and_resources(
    workdir: Path,
) -> None:
    # The tool's policy masks: the exact bytes are stored, and every read the client's model
    # can make (a read tool, resources/read) shows the masked copy and says so.
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    env = child_env(workdir, CARGOHOLD_SECRETS_POLICY="with_secret=mask")
    with connect(
        stdio(
            cli(workdir / "store", SESSION, "proxy", "--", sys.executable, str(HEAVY_SERVER)), env
        ),
        mode="legacy",
    ) as client:
        stub, ref = only_stub(client.call("with_secret"))
        page = client.call(
            "artifact_read", {"ref": ref, "offset": 0, "length": 65536, "budget": 65536}
        )
        read = client.run(client.client.read_resource, ref)

    assert secret not in stub
    (text,) = [b for b in page.content if isinstance(b, TextContent)]
    assert secret not in text.text
    assert ", credentials masked |" in text.text.splitlines()[0]
    assert page.structured_content is not None
    assert page.structured_content["masked"] is True
    (contents,) = read.contents
    assert isinstance(contents, TextResourceContents)
    assert secret not in contents.text
    assert contents.meta is not None
    facts = contents.meta["cargohold"]
    assert facts["masked"] is True
    assert facts["sha256"] == hashlib.sha256(contents.text.encode()).hexdigest()
    assert facts["sha256"] != ref.removeprefix("artifact://sha256/")


def test_resources_read_refuses_an_artifact_over_its_bound_and_says_how_to_page(
    proxied: Connected,
) -> None:
    _, ref = only_stub(proxied.call("heavy_text", {"size": 1_200_000}))

    with pytest.raises(MCPError) as refused:
        proxied.run(proxied.client.read_resource, ref)

    assert refused.value.error.data["outcome"] == "over_budget"


def test_every_read_tool_of_the_specs_is_listed_once_beside_the_upstream_tools(
    proxied: Connected,
) -> None:
    names = [tool.name for tool in proxied.run(proxied.client.list_tools).tools]

    for spec in SPECS:
        assert names.count(spec.name) == 1
    assert "heavy_text" in names


def test_a_read_tool_mistake_is_an_error_answer_that_says_how_to_fix_it(
    proxied: Connected,
) -> None:
    answer = proxied.call("artifact_read", {"ref": "not-a-ref"})

    assert answer.is_error
    assert answer.structured_content is not None
    assert answer.structured_content["outcome"] == "invalid_arguments"


def test_read_answers_are_never_offloaded_again(proxied: Connected) -> None:
    _, ref = only_stub(proxied.call("heavy_text", {"size": 300_000}))

    answer = proxied.call("artifact_read", {"ref": ref, "length": 200_000, "budget": 262144})

    assert not answer.is_error
    assert answer.content[0].text.startswith("[cargohold:recovered]")  # type: ignore[union-attr]
    assert answer.structured_content is not None
    assert answer.structured_content["end"] == 200_000


def test_progress_of_the_upstream_reaches_the_client(proxied: Connected) -> None:
    seen: list[tuple[float, float | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    result = proxied.run(proxied.client.call_tool, "slow", {"steps": 3}, progress_callback=progress)

    assert result.content == [TextContent(text="done")]
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_log_messages_and_list_changes_of_the_upstream_reach_the_client(
    proxied: Connected,
) -> None:
    proxied.call("chatty")
    proxied.call("change_tools")
    proxied.call("small")  # a round trip after both: what was sent before has arrived

    logs = [n for n in proxied.notifications if isinstance(n, LoggingMessageNotification)]
    assert any(n.params.data == "fixture says hello" for n in logs)
    assert any(isinstance(n, ToolListChangedNotification) for n in proxied.notifications)


def test_every_decision_is_an_event_and_no_event_holds_a_body_a_path_or_the_owner(
    proxied: Connected, workdir: Path
) -> None:
    proxied.call("heavy_text", {"size": 150_000})
    proxied.call("small")

    log = (workdir / "events.jsonl").read_text()
    events = [json.loads(line) for line in log.splitlines()]
    outcomes = {(e["operation"], e["outcome"], e["tool"]) for e in events}
    assert ("offload", "offloaded", "heavy_text") in outcomes
    assert ("offload", "inline", "small") in outcomes
    assert "served request" not in log
    assert str(workdir) not in log
    assert SESSION not in log


# -- server-to-client requests: forwarded only when asked for --------------------------------


def _forwarding_proxy(workdir: Path) -> list[str]:
    return cli(
        workdir / "store",
        SESSION,
        "proxy",
        "--forward",
        "elicitation",
        "--forward",
        "sampling",
        "--",
        sys.executable,
        str(HEAVY_SERVER),
    )


def test_without_forward_the_upstream_sees_a_client_without_elicitation_or_sampling(
    proxied: Connected,
) -> None:
    assert proxied.call("ask_name").content == [
        TextContent(text="no elicitation: the client did not declare it")
    ]
    assert proxied.call("summarize").content == [
        TextContent(text="no sampling: the client did not declare it")
    ]


def test_forwarded_elicitation_and_sampling_are_asked_of_the_client_whose_call_is_in_flight(
    workdir: Path,
) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"name": "Ana"})

    async def sample(context: Any, params: Any) -> CreateMessageResult:
        (message,) = params.messages
        asked.append(message.content.text)
        return CreateMessageResult(
            role="assistant", content=TextContent(text="all green"), model="fake-model"
        )

    target = stdio(_forwarding_proxy(workdir), child_env(workdir))
    with connect(
        target, mode="legacy", elicitation_callback=elicit, sampling_callback=sample
    ) as client:
        named = client.call("ask_name")
        summary = client.call("summarize")

    assert named.content == [TextContent(text="hello Ana")]
    assert summary.content == [TextContent(text="model said: all green")]
    assert asked == ["What name should the report carry?", "Summarize: all green"]


def test_a_forwarded_sampling_request_reaches_the_clients_model_with_its_heavy_parts_as_stubs(
    workdir: Path,
) -> None:
    sent: list[Any] = []

    async def sample(context: Any, params: Any) -> CreateMessageResult:
        sent.append(params)
        return CreateMessageResult(
            role="assistant", content=TextContent(text="fine"), model="fake-model"
        )

    target = stdio(_forwarding_proxy(workdir), child_env(workdir))
    with connect(target, mode="legacy", sampling_callback=sample) as client:
        summary = client.call("summarize", {"heavy": True})
        (params,) = sent
        (message,) = params.messages
        assert isinstance(message.content, TextContent)
        text, system = message.content.text, params.system_prompt
        for stub in (text, system):
            assert len(stub.encode()) <= STUB_BUDGET
        expected = "Summarize: " + heavy_server.log_text(heavy_server.SAMPLED_LOG_SIZE)
        assert client.read_all(_stub_ref(text)) == expected.encode()
        assert client.read_all(_stub_ref(system)) == heavy_server.SAMPLED_SYSTEM.encode()

    assert summary.content == [TextContent(text="model said: fine")]


def test_a_forwarded_request_the_client_did_not_declare_is_refused_to_the_upstream(
    workdir: Path,
) -> None:
    target = stdio(_forwarding_proxy(workdir), child_env(workdir))
    with connect(target, mode="legacy") as client:  # declares neither
        named = client.call("ask_name")

    (text,) = named.content
    assert isinstance(text, TextContent)
    assert text.text.startswith("elicitation failed:")
    assert "does not support elicitation" in text.text


class _Peer:
    """A stand-in for a downstream request context: its HTTP session and its session."""

    def __init__(self, session_id: str, declared: bool = True) -> None:
        self.request = type("Request", (), {"headers": {"mcp-session-id": session_id}})()
        self.request_id = 7
        self.session = self
        self.declared = declared
        self.sent: list[Any] = []

    def check_client_capability(self, capability: Any) -> bool:
        return self.declared

    async def send_request(self, request: Any, result_type: Any, **options: Any) -> Any:
        self.sent.append((request, options["metadata"].related_request_id))
        return ElicitResult(action="decline")


def test_with_calls_of_several_http_clients_in_flight_no_client_is_asked() -> None:
    from cargohold.mcp._proxy import _Asker

    asker, ana, bob = _Asker(), _Peer("session-ana"), _Peer("session-bob")
    request = ElicitRequest(
        params=ElicitRequestFormParams(
            message="name?",
            requested_schema={"type": "object", "properties": {"name": {"type": "string"}}},
        )
    )

    async def ask() -> Any:
        return await asker.ask(request, ElicitResult, ClientCapabilities(), "elicitation")

    with asker.serving(ana), asker.serving(bob):  # type: ignore[arg-type]
        both = anyio.run(ask)
    with asker.serving(ana), asker.serving(ana):  # type: ignore[arg-type]
        one = anyio.run(ask)
    nobody = anyio.run(ask)

    assert isinstance(both, ErrorData)
    assert "several clients" in both.message
    assert (ana.sent, bob.sent) == ([(request, 7)], [])
    assert one == ElicitResult(action="decline")
    assert isinstance(nobody, ErrorData)
    assert "no client request is in flight" in nobody.message


def test_under_reject_a_string_holding_a_credential_is_withheld_and_the_part_kept(
    tmp_path: Path,
) -> None:
    import cargohold
    from cargohold.mcp import offload_result
    from cargohold.mcp._content import WITHHELD

    config = tmp_path / "cargohold.toml"
    config.write_text('secrets_policy = { links = "reject" }\n', encoding="utf-8")
    link = ResourceLink(uri=heavy_server.URL_WITH_PASSWORD, name="a clone", size=12)
    result = CallToolResult(content=[link], _meta={"by": heavy_server.BEARER, "n": 1})

    with cargohold.open("memory://", session="reject", config_file=config) as hold:
        out = offload_result(hold, result, tool="links")

    (kept,) = out.content
    assert isinstance(kept, ResourceLink)
    assert (kept.uri, kept.name, kept.size) == (WITHHELD, "a clone", 12)
    assert out.meta == {"by": WITHHELD, "n": 1}
