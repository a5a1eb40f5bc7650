"""Gateway benchmark: ``python -m bench gateway`` (or ``python -m bench.gateway [--quick]``).

A fake upstream (a Starlette app on loopback answering a fixed Anthropic message, or a short
server-sent event stream) is called by an ``httpx`` client with keep-alive:

- **direct**: client -> fake upstream. The baseline.
- **via gateway**: client -> ``cargohold.gateway`` (on the embedded local store in a scratch
  directory) -> the same fake upstream.

Cases: a small request; a 2 MiB, 100-message conversation whose heavy results were all seen on
an earlier turn, each request the previous one with one small turn more, as a client resends its
history (the issue's goal: under 5 ms added); a request carrying one new 2 MB tool result
(stored, projected, stubbed); and the time to the first streamed byte. Bodies are compact JSON,
as the OpenAI and Anthropic SDKs and Claude Code send them. Both servers run in
threads of this process, so the figures include their share of one interpreter: meaningful on a
quiet machine only.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench._util import Case, Row, interleave, report, scratch_dir

if TYPE_CHECKING:
    from bench.store import Config

MESSAGE = json.dumps(
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": [{"type": "text", "text": "done"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
).encode()
EVENTS = [b"event: message_start\ndata: {}\n\n"] * 5 + [b"event: message_stop\ndata: {}\n\n"]


def _upstream() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    async def handle(request: Request) -> Response:
        body = await request.body()
        if b'"stream":true' in body:

            async def events() -> AsyncIterator[bytes]:
                for event in EVENTS:
                    yield event

            return StreamingResponse(events(), media_type="text/event-stream")
        return Response(MESSAGE, media_type="application/json")

    return Starlette(routes=[Route("/{path:path}", handle, methods=["POST"])])


@contextmanager
def _serve(app: Any) -> Iterator[str]:
    import uvicorn

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as cargohold gateway's
    port = listener.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="critical", lifespan="on", ws="none", access_log=False)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    for _ in range(1000):
        if server.started:
            break
        thread.join(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        listener.close()


def _log(seed: int, size: int) -> str:
    line = f"2026-12-01 10:00:00 INFO request {seed} served in 3 ms by worker 7\n"
    text = (line * (size // len(line) + 1))[:size]
    return f"{seed:016d}" + text[16:]


def _conversation(results: list[str], turns: int, more: int = 0) -> dict[str, Any]:
    """``turns`` tool calls and results (the heavy ones from ``results``, cycled), then
    ``more`` with small results, as one Anthropic request."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for turn in range(turns + more):
        call = {"type": "tool_use", "id": f"toolu_{turn}", "name": "bash", "input": {"n": turn}}
        messages.append({"role": "assistant", "content": [call]})
        small = not results or turn >= turns
        content = f"ok {turn}" if small else results[turn % len(results)]
        block = {"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": content}
        messages.append({"role": "user", "content": [block]})
    return {"model": "claude-fake", "max_tokens": 8, "messages": messages}


def _compact(request: dict[str, Any]) -> bytes:
    """JSON as the SDKs write it (compact, keys in order)."""
    return json.dumps(request, separators=(",", ":"), ensure_ascii=False).encode()


def bench_gateway(root: Path, cfg: Config) -> list[Row]:
    """The ``gateway`` section: added latency of the gateway against a direct call."""
    import httpx

    import cargohold
    from cargohold.gateway import GatewayConfig, build_app

    root.mkdir(parents=True, exist_ok=True)
    repeat = 10 if cfg.quick else 40
    small = _compact(_conversation([], 3))
    # 2 MiB: 50 tool results, 20 of them heavy (about 100 KB each) and the rest small; each
    # request adds one small turn to the previous one's
    heavy = [_log(i, 100_000) for i in range(20)]
    mixed = [heavy[i // 2] if i % 2 == 0 and i // 2 < 20 else f"ok {i}" for i in range(50)]
    seen = [_compact(_conversation(mixed, 50))]
    fresh: list[bytes] = []

    def next_turn(index: int) -> None:
        seen[:] = [_compact(_conversation(mixed, 50, more=index + 1))]

    def fresh_request(index: int) -> None:
        fresh[:] = [_compact(_conversation([_log(10_000 + index, 2_000_000)], 1))]

    rows: list[Row] = []
    headers = {"content-type": "application/json", "x-api-key": "bench"}
    apps: list[Any] = []

    def gateway_app(hold: cargohold.Hold, upstream: str) -> Any:
        apps.append(build_app(hold, GatewayConfig(upstream=upstream)))
        return apps[-1]

    with (
        cargohold.open(root / "store", tenant="bench", user="bench", session="gw") as hold,
        _serve(_upstream()) as upstream,
        _serve(gateway_app(hold, upstream)) as gateway,
        # TCP_NODELAY, as httpx's async transport sets it: without it each request's body waits
        # for the ACK of its headers (Nagle against delayed ACK, 40 ms here).
        httpx.Client(
            timeout=60,
            transport=httpx.HTTPTransport(
                socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
            ),
        ) as client,
    ):

        def post(base: str, body_of: Callable[[], bytes]) -> Callable[[int], object]:
            def run(_: int) -> object:
                answer = client.post(base + "/v1/messages", content=body_of(), headers=headers)
                answer.raise_for_status()
                return answer

            return run

        def first_byte(base: str) -> Callable[[int], object]:
            body = _compact({**_conversation([], 3), "stream": True})

            def run(_: int) -> object:
                with client.stream(
                    "POST", base + "/v1/messages", content=body, headers=headers
                ) as a:
                    return next(a.iter_raw())

            return run

        client.post(gateway + "/v1/messages", content=seen[0], headers=headers)  # earlier turn
        for label, size, body_of, prepare in (
            ("small request (3 turns)", len(small), lambda: small, None),
            ("2 MiB, 100 messages, nothing new", len(seen[0]), lambda: seen[0], next_turn),
            ("one new 2 MB tool result", 2_000_000, lambda: fresh[0], fresh_request),
        ):
            times = interleave(
                [
                    Case("direct", post(upstream, body_of), prepare),
                    Case("via", post(gateway, body_of), prepare),
                ],
                repeat,
            )
            added = times["via"] - times["direct"]
            goal = " (goal: under 5 ms)" if "nothing new" in label else ""
            resent = apps[0].state.rewriter.totals.resent
            print(
                f"gateway: {label}: {added:.2f} ms added{goal}; "
                f"{resent} requests so far read from their new part only",
                flush=True,
            )
            rows.append(
                Row(
                    "gateway",
                    f"{label}, via gateway",
                    size,
                    times["via"],
                    "direct",
                    times["direct"],
                )
            )
        times = interleave(
            [Case("direct", first_byte(upstream)), Case("via", first_byte(gateway))], repeat
        )
        rows.append(
            Row(
                "gateway",
                "time to first streamed byte, via gateway",
                None,
                times["via"],
                "direct",
                times["direct"],
            )
        )
    return rows


SECTIONS: dict[str, Callable[[Path, Config], list[Row]]] = {"gateway": bench_gateway}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gateway", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10 requests per case, not 40")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table as markdown")
    args = parser.parse_args(argv)

    from bench._util import machine
    from bench.store import Config

    info = machine()
    for key, value in info.items():
        print(f"{key:>14}: {value}")
    print()
    began = time.perf_counter()
    with scratch_dir() as root:
        rows = bench_gateway(root / "gateway", Config(quick=args.quick))
    report(
        "python -m bench.gateway",
        rows,
        took=time.perf_counter() - began,
        quick=args.quick,
        markdown=args.markdown,
        info=info,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
