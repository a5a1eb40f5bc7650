"""What the MCP tests share: a connected SDK client, the fixture servers, the npm servers.

A :class:`Connected` client lives in a blocking portal (an event loop on a thread of its own),
so one proxy process can serve every test of a module: starting a proxy and its upstream costs
about a second of CPU each time, and the whole MCP suite must stay well under a minute.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import CallToolResult, ResourceLink, TextContent

from _require import unavailable

FIXTURES = Path(__file__).parent / "fixtures" / "mcp"
HEAVY_SERVER = FIXTURES / "heavy_server.py"
FAULTY_SERVER = FIXTURES / "faulty_server.py"
CLI = "import sys; from cargohold.cli import main; sys.exit(main())"
NPM_VERSION = "2026.8.31"
"""The pinned version of both npm servers (the Makefile installs the same)."""
NPM_PREFIX = Path(
    os.environ.get("MCP_SERVERS_PREFIX")
    or Path.home() / ".cache" / "cargohold-test" / f"mcp-npm-{NPM_VERSION}"
)
"""Where ``make mcp-servers`` installs them (``MCP_SERVERS_PREFIX`` overrides)."""
TIMEOUT = 60.0
"""Every request of a test is bounded by this many seconds (no test waits forever)."""
PAGE = 256 * 1024
"""Bytes per artifact_read page when a test pages a body back."""
MARKER = "[cargohold]"
STUB_BUDGET = 8 * 1024
"""The default stub budget (balanced): no stub may be larger."""


def cli(store: Path, session: str, *args: str) -> list[str]:
    """The command line of ``cargohold --store STORE --session SESSION ARGS...``."""
    return [sys.executable, "-c", CLI, "--store", str(store), "--session", session, *args]


def child_env(tmp: Path, **extra: str) -> dict[str, str]:
    """A clean environment for a child process: no developer CARGOHOLD_* settings, its own
    XDG directories and events log."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CARGOHOLD_")}
    env.update(
        XDG_CACHE_HOME=str(tmp / "xdg-cache"),
        XDG_STATE_HOME=str(tmp / "xdg-state"),
        CARGOHOLD_EVENTS_LOG=str(tmp / "events.jsonl"),
    )
    env.update(extra)
    return env


def stdio(command: list[str], env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=command[0], args=command[1:], env=env)


@dataclass
class Wire:
    """Bytes of the JSON-RPC messages a client sent and received over stdio, counted as the
    SDK's stdio transport writes each one (its JSON and a newline) while ``counting`` is on."""

    sent: int = 0
    received: int = 0
    counting: bool = False
    messages: list[tuple[str, str, int]] = field(default_factory=list)
    """Each counted message: direction (``sent``, ``received``), JSON-RPC method (``result``
    for a response), bytes."""

    @property
    def total(self) -> int:
        return self.sent + self.received

    def reset(self) -> None:
        self.sent = self.received = 0
        self.messages.clear()

    def count(self, message: Any, *, outgoing: bool) -> None:
        if not self.counting or isinstance(message, Exception):
            return
        size = len(message.message.model_dump_json(by_alias=True, exclude_unset=True)) + 1
        method = getattr(message.message, "method", None) or "result"
        self.messages.append(("sent" if outgoing else "received", method, size))
        if outgoing:
            self.sent += size
        else:
            self.received += size


class _CountedRead:
    def __init__(self, stream: Any, wire: Wire) -> None:
        self._stream, self._wire = stream, wire

    async def receive(self) -> Any:
        message = await self._stream.receive()
        self._wire.count(message, outgoing=False)
        return message

    async def aclose(self) -> None:
        await self._stream.aclose()

    def __aiter__(self) -> _CountedRead:
        return self

    async def __anext__(self) -> Any:
        message = await self._stream.__anext__()
        self._wire.count(message, outgoing=False)
        return message

    async def __aenter__(self) -> _CountedRead:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._stream.__aexit__(*exc)  # type: ignore[no-any-return]

    @property
    def last_context(self) -> Any:
        return getattr(self._stream, "last_context", None)


class _CountedWrite:
    def __init__(self, stream: Any, wire: Wire) -> None:
        self._stream, self._wire = stream, wire

    async def send(self, message: Any, /) -> None:
        self._wire.count(message, outgoing=True)
        await self._stream.send(message)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _CountedWrite:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._stream.__aexit__(*exc)  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def counted_stdio(
    params: StdioServerParameters, wire: Wire
) -> AsyncIterator[tuple[_CountedRead, _CountedWrite]]:
    """The SDK's own stdio transport, with every message it carries counted on ``wire``."""
    async with stdio_client(params) as (read, write):
        yield _CountedRead(read, wire), _CountedWrite(write, wire)


class Connected:
    """An SDK client connected to a server, driven from synchronous test code.

    Attributes:
        notifications: Every notification the server sent, in order.
    """

    def __init__(self, portal: BlockingPortal, client: Client, notifications: list[Any]) -> None:
        self.portal = portal
        self.client = client
        self.notifications = notifications

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        return self.portal.call(functools.partial(self.client.call_tool, name, arguments))

    def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run ``await fn(*args, **kwargs)`` on the client's loop."""
        return self.portal.call(functools.partial(fn, *args, **kwargs))

    def read_all(self, ref: str, page: int = PAGE) -> bytes:
        """The artifact's exact bytes, paged through ``artifact_read``; each page's SHA-256 is
        checked against the one the answer states."""
        body = bytearray()
        offset = 0
        while True:
            answer = self.call(
                "artifact_read", {"ref": ref, "offset": offset, "length": page, "budget": 1048576}
            )
            assert not answer.is_error, answer.content
            facts = answer.structured_content
            assert facts is not None
            chunk = page_bytes(answer)
            assert hashlib.sha256(chunk).hexdigest() == facts["sha256"]
            assert facts["start"] == offset
            body.extend(chunk)
            if facts["next_offset"] is None:
                assert len(body) == facts["size"]
                return bytes(body)
            offset = facts["next_offset"]


def page_bytes(answer: CallToolResult) -> bytes:
    """The returned bytes of one read-tool answer, cut out of its recovered segment.

    Between the segment's opening line and its closing line lies the body, followed by one
    newline unless the body ends with its own; the byte span (``end - start``) tells which.
    """
    facts = answer.structured_content
    assert facts is not None
    text = answer.content[0]
    assert isinstance(text, TextContent)
    first, _, rest = text.text.partition("\n")
    assert first.startswith("[cargohold:recovered] ")
    closing = "[cargohold:end-recovered]"
    assert rest.endswith("\n" + closing)
    inner = rest[: -len(closing)]
    for body in (inner, inner[:-1]):
        data = (
            base64.b64decode(body)
            if facts["encoding"] == "base64"
            else body.encode("utf-8", "surrogatepass")
        )
        if len(data) == facts["end"] - facts["start"]:
            return data
    raise AssertionError("the segment's body does not match its byte span")


@contextlib.contextmanager
def connect(target: Any, **options: Any) -> Iterator[Connected]:
    """A client connected to ``target`` (a command, a URL, an in-process server)."""
    options.setdefault("read_timeout_seconds", TIMEOUT)
    notifications: list[Any] = []

    async def record(message: Any) -> None:
        if not isinstance(message, Exception):
            notifications.append(message)

    async def quiet(params: Any) -> None:
        return None

    options.setdefault("message_handler", record)
    options.setdefault("logging_callback", quiet)
    with start_blocking_portal() as portal:
        client = Client(target, **options)
        with portal.wrap_async_context_manager(client) as entered:
            yield Connected(portal, entered, notifications)


@dataclass(frozen=True)
class Stubbed:
    """One offloaded part as the client saw it: the stub text and the link beside it."""

    stub: str
    link: ResourceLink

    @property
    def ref(self) -> str:
        return str(self.link.uri)


def stubbed_parts(result: CallToolResult) -> list[Stubbed]:
    """Each stub of a result with the resource_link that follows it."""
    found = []
    blocks = result.content
    for index, block in enumerate(blocks[:-1]):
        following = blocks[index + 1]
        if (
            isinstance(block, TextContent)
            and block.text.startswith(MARKER)
            and isinstance(following, ResourceLink)
        ):
            found.append(Stubbed(block.text, following))
    return found


def delivered_bytes(result: CallToolResult) -> int:
    """Bytes of the result as JSON on the wire (what reaches the client)."""
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


def npm_server(name: str) -> Path:
    """The installed npm MCP server ``name`` (``server-filesystem``...): its entry script.

    Skips without it (fails under CI=true): ``make mcp-servers`` installs both.
    """
    script = NPM_PREFIX / "node_modules" / "@modelcontextprotocol" / name / "dist" / "index.js"
    if not script.is_file():
        unavailable(f"@modelcontextprotocol/{name} is not installed: run `make mcp-servers`")
    if _node() is None:
        unavailable("node is not installed")
    return script


@functools.cache
def _node() -> str | None:
    import shutil

    return shutil.which("node")


def node() -> str:
    found = _node()
    assert found is not None
    return found


@contextlib.contextmanager
def http_process(command: list[str], env: dict[str, str], pattern: str) -> Iterator[str]:
    """Start a server that prints ``... serving MCP on <URL>`` on stderr; yield the URL and
    stop the process afterwards. Waiting for the line is bounded."""
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        url = None
        while url is None:
            try:
                line = lines.get(timeout=TIMEOUT)
            except queue.Empty:
                raise AssertionError("the server did not report its URL in time") from None
            found = re.search(pattern + r" (http://\S+)", line)
            if found:
                url = found.group(1)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        reader.join(timeout=10)  # the pipe is at its end once the process is gone
        assert process.stderr is not None
        process.stderr.close()
