"""The offload's put and its stub overlap: the stub is made while the put runs, and returned only
once the put has returned, so no stub (and no result naming the reference) is ever handed out for
bytes that are not durable; a put that fails meanwhile decides as it does sequentially."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import orjson
import pytest

import cargohold
from cargohold import (
    ListSink,
    MemoryStore,
    Offloader,
    OffloadOutcome,
    ReadOutcome,
    Reason,
    Ref,
    Reporter,
    Scope,
    ScopedStore,
    StoreError,
    StoreUnavailableError,
)
from cargohold._offload import OVERLAP_BYTES

OWNER = Scope("tenant-acme", "user-ana", "session-1")
WAIT = 10.0
"""The longest a test's put waits for the stub to be under way (bounded: never hangs)."""


class Rendering:
    """``render_stub`` of the offload seam, wrapped to say when a stub is being made."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, error: Exception | None = None) -> None:
        self.started = threading.Event()
        self.finished = threading.Event()
        self.calls = 0
        self._real = cargohold._offload.render_stub
        self._error = error
        monkeypatch.setattr(cargohold._offload, "render_stub", self)

    def __call__(self, data: bytes, ref: Ref, **kwargs: Any) -> cargohold.Stub:
        self.calls += 1
        self.started.set()
        if self._error is not None:
            raise self._error
        stub = self._real(data, ref, **kwargs)
        self.finished.set()
        return stub


class PutDuringRender:
    """A backend around a MemoryStore whose put waits (bounded) until a stub is being made,
    then stores the bytes (only once the stub is made, with ``late``), or raises ``error``.
    ``overlapped`` says, for each put, whether the stub was under way while it ran."""

    def __init__(
        self,
        inner: MemoryStore,
        rendering: Rendering,
        error: Exception | None = None,
        *,
        late: bool = False,
    ) -> None:
        self._inner = inner
        self._rendering = rendering
        self._error = error
        self._late = late
        self.limits = inner.limits
        self.overlapped: list[bool] = []

    def put(self, scope: Scope, data: bytes, request: cargohold.PutRequest) -> cargohold.PutResult:
        self.overlapped.append(self._rendering.started.wait(WAIT))
        if self._late:
            self._rendering.finished.wait(WAIT)
        if self._error is not None:
            raise self._error
        return self._inner.put(scope, data, request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class FailingPut:
    """A backend around a MemoryStore whose every put raises ``error`` at once."""

    def __init__(self, inner: MemoryStore, error: Exception) -> None:
        self._inner = inner
        self._error = error
        self.limits = inner.limits

    def put(self, scope: Scope, data: bytes, request: cargohold.PutRequest) -> cargohold.PutResult:
        raise self._error

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class PutThreads:
    """A backend around a MemoryStore that records the thread each put runs on."""

    def __init__(self, inner: MemoryStore) -> None:
        self._inner = inner
        self.limits = inner.limits
        self.threads: list[threading.Thread] = []

    def put(self, scope: Scope, data: bytes, request: cargohold.PutRequest) -> cargohold.PutResult:
        self.threads.append(threading.current_thread())
        return self._inner.put(scope, data, request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _sequential(monkeypatch: pytest.MonkeyPatch, scoped: ScopedStore, **kwargs: Any) -> Offloader:
    """An offloader that puts first and makes the stub after, at every size."""
    with monkeypatch.context() as patch:
        patch.setattr(cargohold._offload, "OVERLAP_BYTES", 1 << 62)
        return Offloader(scoped, **kwargs)


def _log(size: int, word: str = "charge") -> str:
    """A realistic log of exactly ``size`` UTF-8 bytes, with a warning now and then."""
    lines: list[str] = []
    total = 0
    index = 0
    while total < size:
        level = "WARN" if index % 97 == 0 else "INFO"
        line = f"2026-03-01T10:{index // 60 % 60:02d}:{index % 60:02d}Z {level} {word} {index}\n"
        lines.append(line)
        total += len(line)
        index += 1
    return "".join(lines)[:size]


def _json(size: int) -> str:
    rows = []
    total = 2
    while total < size:
        row = orjson.dumps({"id": len(rows), "status": "paid", "total": len(rows) * 3}).decode()
        rows.append(row)
        total += len(row) + 1
    return "[" + ",".join(rows) + "]"


def _comparable(event: cargohold.DecisionEvent) -> dict[str, Any]:
    """An event's fields but those of its place in a run (its sequence, its scope's tag)."""
    fields = dataclasses.asdict(event)
    del fields["sequence"], fields["run"]
    return fields


def _recorded(record: cargohold.ArtifactRecord) -> tuple[object, ...]:
    """What an offload records of its bytes (not when or for whom)."""
    return (
        record.size,
        record.media_type,
        record.kind,
        record.tool,
        record.sensitivity,
        record.classification,
    )


def test_a_put_that_fails_while_the_stub_is_made_gives_no_stub_naming_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = _log(OVERLAP_BYTES + 4096, word="precious")
    sequential_sink, overlapped_sink = ListSink(), ListSink()
    down = StoreUnavailableError("disk gone")
    sequential = _sequential(
        monkeypatch,
        ScopedStore(FailingPut(MemoryStore(), down), OWNER),
        threshold=1000,
        reporter=Reporter([sequential_sink]),
    ).offload(body, tool="tail_log")
    rendering = Rendering(monkeypatch)
    backend = PutDuringRender(MemoryStore(), rendering, error=down)

    result = Offloader(
        ScopedStore(backend, OWNER), threshold=1000, reporter=Reporter([overlapped_sink])
    ).offload(body, tool="tail_log")

    assert backend.overlapped == [True]  # the stub was under way when the put failed
    assert (result.outcome, result.reason) == (OffloadOutcome.FAILED, Reason.STORE_UNAVAILABLE)
    assert result.ref is None
    assert result.stub is None
    assert result.event.ref is None
    assert Ref.of(body.encode()).digest not in result.text
    assert result.text == sequential.text
    assert _comparable(result.event) == _comparable(sequential.event)
    assert overlapped_sink.events == [result.event]


def test_a_put_that_fails_while_the_stub_raises_decides_as_the_failed_put(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Sequentially the put fails first and no stub is attempted: its failure decides.
    rendering = Rendering(monkeypatch, error=RuntimeError("projector bug"))
    backend = PutDuringRender(MemoryStore(), rendering, error=StoreError("index damaged"))

    result = Offloader(ScopedStore(backend, OWNER), threshold=1000).offload(_log(OVERLAP_BYTES + 1))

    assert backend.overlapped == [True]
    assert (result.outcome, result.reason) == (OffloadOutcome.FAILED, Reason.STORE_ERROR)
    assert result.ref is None


def test_a_stub_that_raises_is_raised_only_after_its_put_stored_the_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rendering = Rendering(monkeypatch, error=RuntimeError("projector bug"))
    inner = MemoryStore()
    backend = PutDuringRender(inner, rendering)
    scoped = ScopedStore(backend, OWNER)
    body = _log(OVERLAP_BYTES + 1)

    with pytest.raises(RuntimeError):
        Offloader(scoped, threshold=1000).offload(body)

    assert backend.overlapped == [True]
    assert scoped.read(Ref.of(body.encode())).data == body.encode()


def test_the_stub_is_returned_only_once_its_bytes_are_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rendering = Rendering(monkeypatch)
    backend = PutDuringRender(MemoryStore(), rendering, late=True)  # the stub is made first
    scoped = ScopedStore(backend, OWNER)
    body = _log(OVERLAP_BYTES * 2)

    result = Offloader(scoped, threshold=1000).offload(body)

    assert backend.overlapped == [True]
    assert result.outcome is OffloadOutcome.OFFLOADED
    assert result.ref == Ref.of(body.encode())
    assert scoped.read(result.ref).outcome is ReadOutcome.RESOLVED


@pytest.mark.parametrize(
    ("kind", "value", "media_type"),
    [
        pytest.param("log", _log(OVERLAP_BYTES + 777), None, id="log"),
        pytest.param("json", _json(OVERLAP_BYTES + 777), "application/json", id="json"),
        pytest.param("json", orjson.loads(_json(OVERLAP_BYTES + 777)), None, id="json-data"),
        pytest.param(
            "csv",
            "id,name,total\n" + "".join(f"{i},n{i},{i * 7}\n" for i in range(OVERLAP_BYTES // 12)),
            "text/csv",
            id="csv",
        ),
    ],
)
@pytest.mark.parametrize("policy", ["redact", "mask"])
def test_an_overlapped_offload_gives_the_sequential_outcome_event_and_stub(
    monkeypatch: pytest.MonkeyPatch, kind: str, value: object, media_type: str | None, policy: str
) -> None:
    if isinstance(value, str):  # a credential, so both policies change what is stored or shown
        value = value + "\nAWS key AKIAIOSFODNN7EXAMPLE in the config\n"
    inner = MemoryStore()  # one store (one marker key: one stub check), a session each
    sequential_sink, overlapped_sink = ListSink(), ListSink()
    apart = ScopedStore(inner, Scope("tenant-acme", "user-ana", "session-sequential"))
    sequential = _sequential(
        monkeypatch,
        apart,
        threshold=1000,
        secrets_policy={"*": policy},
        reporter=Reporter([sequential_sink]),
    )
    expected = sequential.offload(value, tool="fetch", media_type=media_type)
    rendering = Rendering(monkeypatch)
    backend = PutDuringRender(inner, rendering)

    result = Offloader(
        ScopedStore(backend, OWNER),
        threshold=1000,
        secrets_policy={"*": policy},
        reporter=Reporter([overlapped_sink]),
    ).offload(value, tool="fetch", media_type=media_type)

    assert backend.overlapped == [True]
    assert (expected.outcome, expected.event.kind) == (OffloadOutcome.OFFLOADED, kind)
    assert (result.outcome, result.reason) == (expected.outcome, expected.reason)
    assert result.ref == expected.ref
    assert result.text == expected.text
    assert result.redacted == expected.redacted
    assert _comparable(result.event) == _comparable(expected.event)
    assert overlapped_sink.events == [result.event]
    mine, theirs = ScopedStore(inner, OWNER).stat(result.ref).record, apart.stat(result.ref).record
    assert mine is not None
    assert theirs is not None
    assert _recorded(mine) == _recorded(theirs)


@pytest.mark.parametrize(
    "value",
    [
        bytes(range(256)) * (OVERLAP_BYTES // 256 + 3),
        b"\x89PNG\r\n\x1a\n" + b"\x00" * OVERLAP_BYTES,
    ],
    ids=["bytes", "png"],
)
def test_binary_bytes_are_stored_before_their_stub_is_made_at_any_size(
    monkeypatch: pytest.MonkeyPatch, value: bytes
) -> None:
    # Their stub is a few lines of facts: nothing worth a thread and a second hash.
    backend = PutThreads(MemoryStore())
    scoped = ScopedStore(backend, OWNER)
    real = cargohold._offload.render_stub
    readable: list[bool] = []

    def checking(data: bytes, ref: Ref, **kwargs: Any) -> cargohold.Stub:
        readable.append(scoped.read(ref).outcome is ReadOutcome.RESOLVED)
        return real(data, ref, **kwargs)

    monkeypatch.setattr(cargohold._offload, "render_stub", checking)

    result = Offloader(scoped, threshold=1000).offload(value)

    assert (result.outcome, result.event.kind) == (OffloadOutcome.OFFLOADED, "binary")
    assert backend.threads == [threading.current_thread()]  # the caller's own: no overlap
    assert readable == [True]


def test_a_stub_made_for_another_media_type_than_the_first_write_recorded_is_made_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The first write of these bytes recorded them as text/csv: a later offload under another
    # type is judged as the record says, so the stub made meanwhile under its own type is not
    # the one returned.
    inner = MemoryStore()
    body = "id,name\n" + "".join(f"{i},n{i}\n" for i in range(OVERLAP_BYTES // 8))
    first = Offloader(ScopedStore(inner, OWNER), threshold=1000).offload(
        body, media_type="text/csv"
    )
    rendering = Rendering(monkeypatch)
    backend = PutDuringRender(inner, rendering)

    again = Offloader(ScopedStore(backend, OWNER), threshold=1000).offload(
        body, media_type="text/plain"
    )

    assert backend.overlapped == [True]
    assert rendering.calls == 2
    assert again.outcome is OffloadOutcome.EXISTING_REFERENCE
    assert again.text == first.text
