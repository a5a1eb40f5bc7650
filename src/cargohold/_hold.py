"""The front door: one object for one owner scope, sync and async.

``cargohold.open()`` resolves the configuration exactly as the CLI does (explicit arguments >
``CARGOHOLD_*`` > ``cargohold.toml`` / ``[tool.cargohold]`` > defaults), opens the store, and
returns a :class:`Hold`: offload, the reads, the read tools as data, the edge guard and the run
summary, bound to one scope. Deriving a hold for another session, task or agent (a LangGraph
``thread_id``, an Agents SDK session, an MCP session) is one cheap call that shares the store's
connections, the worker pool and the settings.

Thread safety: a :class:`Hold` and everything it holds may be used from many threads at once
(the store backends serialize or pool their connections; reporters and the run summary lock).
Async: every offload and read verb has an ``a``-prefixed twin that runs the synchronous verb on a
bounded worker pool shared by the hold and all it derives, so the event loop never waits on a
disk, a database or a projection. The tokenizer that counts stub tokens loads once per process,
on the pool; :meth:`Hold.warmup` loads it at start for servers that want no first-call delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, Self, TypeVar

from cargohold._config import Settings, load_settings
from cargohold._errors import StoreError, UsageError
from cargohold._events import (
    ContentKind,
    DecisionEvent,
    Operation,
    Reason,
    Reporter,
    RequestOutcome,
    Sink,
    record,
)
from cargohold._facade import ScopedStore, as_ref
from cargohold._offload import Offloader, OffloadResult
from cargohold._records import ReadResult, Sensitivity
from cargohold._ref import Ref
from cargohold._rehydrate import RehydrateResult, Rehydrator
from cargohold._scope import Scope
from cargohold._searchanswer import SearchResult
from cargohold._sinks import RunSummary
from cargohold._stub import Budget
from cargohold._tools import ReadToolset, ToolAnswer

if TYPE_CHECKING:
    from cargohold.compact import CompactionPolicy, CompactionReport
    from cargohold.compact._memo import CompactionMemo
    from cargohold.guard import Guard, GuardReport
    from cargohold.projection import ProjectionClass
    from cargohold.store import StoreBackend

P = ParamSpec("P")
T = TypeVar("T")
_Answer = TypeVar("_Answer", RehydrateResult, ToolAnswer)

_REQUEST_APIS = frozenset({"anthropic", "openai_chat", "openai_responses"})
"""The APIs a request event may name (the gateway's providers), as event kind codes."""

DEFAULT_WORKERS = 1
"""Threads of the async worker pool. An offload is mostly pure-Python projection, which the GIL
runs one thread at a time anyway, and the local store serializes its writes; each more
CPU-bound thread lengthens the event loop's waits for the GIL (measured on 2 cores: a 1,000-task
run's worst callback went from under 50 ms with one worker to 50-120 ms with two or four). Raise
``max_workers`` for a PostgreSQL store, whose round trips release the GIL and overlap."""


class _Shared:
    """What a hold shares with every hold derived from it: the store, the pool, the settings."""

    __slots__ = (
        "_lock",
        "_memo",
        "_pool",
        "closed",
        "max_workers",
        "owns_store",
        "settings",
        "store",
    )

    def __init__(
        self, store: StoreBackend, settings: Settings, *, owns_store: bool, max_workers: int
    ) -> None:
        self.store = store
        self.settings = settings
        self.owns_store = owns_store
        self.max_workers = max_workers
        self.closed = False
        # Counts and compact stubs of earlier compactions, per scope (a stateless caller sends
        # the same history every turn); shared by every hold derived, as the store is.
        self._memo: CompactionMemo | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self.closed:
                raise UsageError("this cargohold Hold is closed")
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix="cargohold")
            return self._pool

    def compaction_memo(self) -> CompactionMemo:
        with self._lock:
            if self._memo is None:
                from cargohold.compact._memo import CompactionMemo  # compaction loads lazily

                self._memo = CompactionMemo()
            return self._memo

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        if self.owns_store:
            self.store.close()


def open(  # cargohold.open(), like tarfile.open and shelve.open
    store: str | os.PathLike[str] | StoreBackend | None = None,
    *,
    tenant: str | None = None,
    user: str | None = None,
    session: str | None = None,
    task: str | None = None,
    worker: str | None = None,
    agent: str | None = None,
    sinks: Iterable[Sink] = (),
    threshold: int | None = None,
    tool_thresholds: Mapping[str, int] | None = None,
    budget: Budget | str | None = None,
    read_budget: int | None = None,
    ttl: float | None = None,
    sliding_ttl: bool | None = None,
    config_file: str | os.PathLike[str] | None = None,
    max_workers: int = DEFAULT_WORKERS,
) -> Hold:
    """Open a store and return the :class:`Hold` of one owner scope.

    Every argument left ``None`` comes from ``CARGOHOLD_*``, then the configuration file, then
    the defaults; the same resolution as the CLI.

    Args:
        store: A store URL (``memory://``, a path, ``file://``, ``postgresql://``), an open
            :class:`~cargohold.store.StoreBackend` (the hold then does not close it), or
            ``None`` for the configured store (the embedded local store by default).
        tenant: The owner's tenant (a hard partition).
        user: The owner's user.
        session: The owner's session (a run, a thread, a conversation). Required: from this
            argument, ``CARGOHOLD_SESSION`` or the configuration file; there is no default, so
            unrelated runs never share a scope (only the CLI has one, ``default``).
        task: Attribution: the task, stored with each artifact.
        worker: Attribution: the worker.
        agent: This agent's id in events (an attribution label, not an identity).
        sinks: Where decision events go, besides the hold's run summary.
        threshold: The heavy threshold in bytes (32 KiB by default).
        tool_thresholds: Per-tool heavy thresholds.
        budget: The stub budget (``light``, ``balanced``, ``strong``, ``max``).
        read_budget: Default byte budget of a model-facing read (16 KiB; at most 1 MiB).
        ttl: Seconds to keep offloaded bytes (the store's default when omitted).
        sliding_ttl: Whether each resolved read extends the artifact's life by ``ttl`` again
            (off by default; see :meth:`Hold.extend` for extending explicitly).
        config_file: A configuration file to read instead of searching for one.
        max_workers: Threads of the async worker pool.

    Raises:
        ConfigError: a bad configuration value or store URL.
        InvalidScopeError: no session given anywhere, or a scope part that is empty or
            malformed.
    """
    overrides: dict[str, Any] = {
        "tenant": tenant,
        "user": user,
        "session": session,
        "heavy_threshold": threshold,
        "tool_thresholds": None if tool_thresholds is None else dict(tool_thresholds),
        "budget": None if budget is None else Budget.parse(budget).label,
        "read_budget": read_budget,
        "sliding_ttl": sliding_ttl,
    }
    if isinstance(store, str | os.PathLike):
        overrides["store"] = os.fspath(store)
    settings = load_settings(overrides, config_file=config_file)
    if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
        raise UsageError("max_workers must be a positive integer")
    # Before the store opens: no session named anywhere refuses here, leaving nothing open.
    scope = settings.scope(task=task, worker=worker, agent=agent)
    if store is not None and not isinstance(store, str | os.PathLike):
        backend: StoreBackend = store
        owns = False
    else:
        backend = settings.open_store()
        owns = True
    shared = _Shared(backend, settings, owns_store=owns, max_workers=max_workers)
    summary = RunSummary()
    reporter = Reporter([summary, *sinks], agent_id=agent or "main").for_scope(
        backend.marker_key, scope
    )
    return Hold(shared, scope, reporter=reporter, summary=summary, ttl=ttl)


class Hold:
    """cargohold for one owner scope: offload, read, guard, summarize. Build it with
    :func:`cargohold.open`; use it as a context manager (``with`` or ``async with``).

    Every verb has an async twin (``aoffload``, ``aread``...) that never blocks the event loop.
    """

    __slots__ = (
        "_compaction",
        "_guard",
        "_offloader",
        "_reader",
        "_reporter",
        "_scoped",
        "_shared",
        "_summary",
        "_tools",
        "_ttl",
    )

    def __init__(
        self,
        shared: _Shared,
        scope: Scope,
        *,
        reporter: Reporter,
        summary: RunSummary,
        ttl: float | None,
        compaction: CompactionPolicy | None = None,
    ) -> None:
        settings = shared.settings
        self._shared = shared
        self._compaction = compaction  # this agent's override of the configured policy
        self._scoped = ScopedStore(shared.store, scope)
        self._reporter = reporter
        self._summary = summary
        self._ttl = ttl
        self._offloader = Offloader(
            self._scoped,
            threshold=settings.heavy_threshold,
            tool_thresholds=settings.tool_thresholds,
            budget=settings.budget,
            reporter=reporter,
            ttl=ttl,
            secrets_policy=settings.secrets_policy,
            tool_classifications=settings.tool_classifications,
        )
        self._reader = Rehydrator(
            self._scoped, reporter=reporter, default_budget=settings.read_budget
        )
        self._tools = ReadToolset(
            self._reader,
            self._scoped,
            default_budget=settings.read_budget,
            reporter=reporter,
            ttl=ttl,
            secrets_policy=settings.secrets_policy,
        )
        self._guard: Guard | None = None

    def __repr__(self) -> str:
        return f"Hold({self._shared.store!r}, agent={self._reporter.agent_id!r})"

    # -- what it holds ----------------------------------------------------------------------

    @property
    def scope(self) -> Scope:
        """The owner binding every write is stamped with and every read checked against."""
        return self._scoped.scope

    @property
    def store(self) -> ScopedStore:
        """The scoped store (for verbs the hold does not wrap: ``put``, ``artifacts``...)."""
        return self._scoped

    @property
    def settings(self) -> Settings:
        """The resolved configuration."""
        return self._shared.settings

    @property
    def reporter(self) -> Reporter:
        """Where this hold's decision events go."""
        return self._reporter

    @property
    def summary(self) -> RunSummary:
        """The run summary: decisions by outcome, bytes and tokens kept out of context."""
        return self._summary

    @property
    def offloader(self) -> Offloader:
        """The offload seam this hold decides with."""
        return self._offloader

    @property
    def reader(self) -> Rehydrator:
        """The verified, budgeted reads."""
        return self._reader

    @property
    def tools(self) -> ReadToolset:
        """The read tools as data: specs for every API, and :meth:`ReadToolset.call`."""
        return self._tools

    # -- deriving -------------------------------------------------------------------------

    def derive(
        self,
        *,
        session: str | None = None,
        task: str | None = None,
        worker: str | None = None,
        agent: str | None = None,
        compaction: CompactionPolicy | None = None,
    ) -> Hold:
        """A hold for another session, task or agent of the same tenant and user.

        Cheap: it shares the store's connections, the worker pool, the settings and the run
        summary. With ``agent``, its events name that agent, with this hold's agent as parent
        and one more level of depth (the sequence stays one across the tree). With another
        ``session``, its events carry that session's run tag (see ``docs/events.md``). With
        ``compaction``, its :meth:`compact` applies that policy instead of this hold's (a
        per-agent override of the configured ``compaction_*`` settings).
        """
        current = self.scope
        scope = Scope(
            current.tenant,
            current.user,
            current.session if session is None else session,
            task=current.task if task is None else task,
            worker=current.worker if worker is None else worker,
            agent=current.agent if agent is None else agent,
        )
        if compaction is not None:
            from cargohold.compact import CompactionPolicy

            if not isinstance(compaction, CompactionPolicy):
                raise UsageError("compaction must be a cargohold.CompactionPolicy")
        reporter = self._reporter
        if scope.owner != current.owner:  # another session: its events carry its own run tag
            reporter = reporter.for_scope(self._shared.store.marker_key, scope)
        if agent is not None:
            reporter = reporter.child(agent)
        return Hold(
            self._shared,
            scope,
            reporter=reporter,
            summary=self._summary,
            ttl=self._ttl,
            compaction=self._compaction if compaction is None else compaction,
        )

    def for_session(self, session: str, *, agent: str | None = None) -> Hold:
        """:meth:`derive` for a framework's run id (a thread id, a session id)."""
        return self.derive(session=session, agent=agent)

    # -- verbs ------------------------------------------------------------------------------

    def offload(
        self,
        value: object,
        *,
        tool: str | None = None,
        media_type: str | None = None,
        sensitivity: Sensitivity | str = Sensitivity.INTERNAL,
        complete: bool = True,
        failed: bool = False,
        budget: Budget | str | None = None,
        classification: ProjectionClass | str | None = None,
    ) -> OffloadResult:
        """Decide what of a tool's result enters the conversation (see
        :meth:`cargohold.Offloader.offload`); ``result.text`` is what to put there.

        ``classification="exact_required"`` declares the result exact (security evidence, a
        policy or authority payload, a memory or context response): verbatim excerpts only.
        """
        return self._offloader.offload(
            value,
            tool=tool,
            media_type=media_type,
            sensitivity=sensitivity,
            complete=complete,
            failed=failed,
            budget=budget,
            classification=classification,
        )

    def read(
        self,
        ref: Ref | str,
        *,
        offset: int = 0,
        length: int | None = None,
        budget: int | None = None,
    ) -> RehydrateResult:
        """Body bytes ``[offset, offset + length)``, verified and within budget."""
        return self._slide(self._reader.read(ref, offset=offset, length=length, budget=budget))

    def read_lines(
        self,
        ref: Ref | str,
        start_line: int = 1,
        end_line: int | None = None,
        *,
        budget: int | None = None,
    ) -> RehydrateResult:
        """Lines ``start_line`` to ``end_line``, 1-based and inclusive."""
        return self._slide(self._reader.read_lines(ref, start_line, end_line, budget=budget))

    def grep(
        self,
        ref: Ref | str,
        pattern: str,
        *,
        ignore_case: bool = False,
        max_matches: int = 100,
        budget: int | None = None,
    ) -> RehydrateResult:
        """Lines matching an RE2 regular expression, with their line numbers."""
        return self._slide(
            self._reader.grep(
                ref, pattern, ignore_case=ignore_case, max_matches=max_matches, budget=budget
            )
        )

    def query(
        self, ref: Ref | str, expression: str, *, budget: int | None = None
    ) -> RehydrateResult:
        """A JMESPath expression on a JSON artifact."""
        return self._slide(self._reader.query(ref, expression, budget=budget))

    def search(self, query: str, *, limit: int = 10, budget: int | None = None) -> SearchResult:
        """This scope's artifacts that hold every word of ``query``, best first, each read back
        verified, with the lines that hold them (see :meth:`Rehydrator.search`)."""
        return self._reader.search(query, limit=limit, budget=budget)

    def info(self, ref: Ref | str) -> ReadResult:
        """The artifact's record if this scope may see it; reads no bytes."""
        return self._scoped.stat(as_ref(ref))

    def extend(self, ref: Ref | str, ttl: float | None = None) -> ReadResult:
        """Keep ``ref`` alive for at least ``ttl`` more seconds (the hold's ``ttl``, else the
        store's default); never shortens a life and never revives an expired artifact.

        For a run resumed after a pause (a checkpointed thread): extend the references its
        state still names before reading them. The outcome is :meth:`info`'s, with the updated
        record when ``resolved``.

        Raises:
            UsageError: a ``ttl`` that is not positive or is over the store's ``max_ttl``.
        """
        return self._scoped.touch(as_ref(ref), self._ttl if ttl is None else ttl)

    def record_request(
        self,
        *,
        api: str,
        outcome: RequestOutcome | str,
        request_bytes: int,
        forwarded_bytes: int = 0,
        bytes_kept_out: int = 0,
        tokens_kept_out: int = 0,
        offloaded: int = 0,
        reused: int = 0,
        compacted: int = 0,
        screened: int = 0,
        reason: Reason | str | None = None,
    ) -> DecisionEvent:
        """Report one request through the gateway: one ``request`` event, through this hold's
        reporter and sinks (its run summary counts it: requests, bytes and tokens kept out,
        the largest request).

        The parts a request's rewrite offloaded have their own offload events; a stub reused
        from an earlier turn has none, so this event is the only record of what each request
        kept out. It holds counts and codes only: no key, header, body, scope or path.

        Args:
            api: The API the request spoke: ``anthropic``, ``openai-chat`` or
                ``openai-responses`` (the gateway's provider name).
            outcome: ``forwarded`` (sent upstream), ``refused`` (the edge guard stopped it) or
                ``failed`` (its rewrite failed; not sent).
            request_bytes: The request body's size as the client sent it.
            forwarded_bytes: The body's size as it was forwarded (0 when it was not).
            bytes_kept_out: Bytes of the parts replaced by stubs (reused stubs included).
            tokens_kept_out: Estimated tokens of those parts.
            offloaded: Parts stored and replaced by a stub on this request.
            reused: Parts replaced by the stub of an earlier turn.
            compacted: Results the compaction cleared.
            screened: Inline parts forwarded with credentials redacted or masked, or withheld.
            reason: Why: for ``refused``, the guard's reason (``exc.event.reason`` of the
                guard's error: ``raw_heavy_content``, ``window_margin``, ``unknown_model``),
                required; for ``failed``, ``store_unavailable``, ``store_error`` or
                ``rewrite_error`` (the default); for ``forwarded``, ``rewritten`` or
                ``unchanged``, by default ``rewritten`` when a count is above 0 or the size
                changed.

        Returns:
            The event, the very instance the sinks received.

        Raises:
            UsageError: an unknown API, outcome or reason, a reason that does not go with the
                outcome, a count that is not a non-negative integer, or a forwarded size on a
                request that was not forwarded.
        """
        counts = {
            "request_bytes": request_bytes,
            "forwarded_bytes": forwarded_bytes,
            "bytes_kept_out": bytes_kept_out,
            "tokens_kept_out": tokens_kept_out,
            "offloaded": offloaded,
            "reused": reused,
            "compacted": compacted,
            "screened": screened,
        }
        for name, value in counts.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UsageError(f"{name} must be a non-negative integer")
        kind = api.replace("-", "_") if isinstance(api, str) else None
        if kind not in _REQUEST_APIS:
            raise UsageError(
                "api must be one of "
                + ", ".join(sorted(a.replace("_", "-") for a in _REQUEST_APIS))
            )
        try:
            decided = RequestOutcome(outcome)
        except ValueError:
            raise UsageError(
                "outcome must be one of " + ", ".join(o.value for o in RequestOutcome)
            ) from None
        if decided is not RequestOutcome.FORWARDED and forwarded_bytes:
            raise UsageError(f"a {decided.value} request forwarded nothing: forwarded_bytes is 0")
        if reason is None:
            if decided is RequestOutcome.REFUSED:
                raise UsageError("a refused request names the guard's reason")
            changed = forwarded_bytes != request_bytes or any(
                (offloaded, reused, compacted, screened, bytes_kept_out)
            )
            reason = (
                Reason.REWRITE_ERROR
                if decided is RequestOutcome.FAILED
                else Reason.REWRITTEN
                if changed
                else Reason.UNCHANGED
            )
        try:
            why = Reason(reason)
        except ValueError:
            raise UsageError("reason must be a cargohold Reason code") from None
        return record(
            self._reporter,
            Operation.REQUEST,
            decided,
            ContentKind.REQUEST,
            why,
            observed_bytes=request_bytes,
            limit_bytes=self._shared.settings.heavy_threshold,
            ref=None,
            context_bytes=forwarded_bytes,
            estimated_tokens=tokens_kept_out,
            cleared=compacted,
            kind=kind,
            kept_out_bytes=bytes_kept_out,
            offloaded=offloaded,
            reused=reused,
            screened=screened,
        )

    def _slide(self, answer: _Answer) -> _Answer:
        """With ``sliding_ttl``, a resolved read keeps its artifact alive for the TTL again.

        Best effort: the read already happened and its answer stands, so a store failure of
        the extension (a busy or lost store) leaves the old expiry rather than raising.
        """
        if self._shared.settings.sliding_ttl and answer.ok and answer.ref is not None:
            with contextlib.suppress(StoreError):
                self._scoped.touch(answer.ref, self._ttl)
        return answer

    def call_tool(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> ToolAnswer:
        """Run a read tool the model called; never raises for the model's mistakes."""
        answer = self._tools.call(name, arguments)
        if answer.ok and answer.parent is not None:  # artifact_patch read its parent whole
            self._slide(dataclasses.replace(answer, ref=answer.parent))
        return self._slide(answer)

    def guard(self, request: Any, *, format: str, model: str | None = None) -> GuardReport:
        """Run the edge guard on a request about to be sent (see :meth:`cargohold.Guard.check`).

        Raises:
            ContextLeakError: a raw part at or above the heavy threshold.
            ContextWindowExceededError: more tokens than the model's window less the margin.
        """
        return self.edge_guard.check(request, format=format, model=model)

    def compact(
        self,
        request: Any,
        *,
        format: str,
        policy: CompactionPolicy | None = None,
    ) -> tuple[Any, CompactionReport]:
        """Clear old tool results from a long conversation, losslessly (see
        :mod:`cargohold.compact` and ``docs/compaction.md``).

        Once the request's estimated tokens reach the policy's trigger, the tool results
        before the newest ``keep_last`` are stored through this hold's offloader (whatever
        their size; the store, scope, TTL and secrets policy of any offload) and replaced by
        compact stubs that keep the reference, the tool's name and the call's id. Same
        request, same bytes out; nothing before the last compaction point is rewritten, so
        between compactions each request extends the previous one byte for byte. The input
        is never mutated; the returned request shares the messages it did not change with it
        (and is the input itself when nothing was cleared).

        Args:
            request: The request as the client sends it (Chat Completions or Responses
                ``create`` arguments, Anthropic ``messages.create`` arguments), or a list of
                LangChain messages (or a mapping whose ``messages`` key holds one).
            format: ``openai-chat``, ``openai-responses``, ``anthropic`` or ``langchain``.
            policy: The policy; when omitted, this hold's (see :meth:`derive`), else the
                configured one (``compaction_*`` settings).

        Returns:
            The compacted request and a :class:`cargohold.CompactionReport`.

        Raises:
            UsageError: an unknown format, or one compaction does not read.
        """
        from cargohold.compact import CompactionPolicy, compact_request

        if policy is None:
            policy = self._compaction or CompactionPolicy.from_settings(self._shared.settings)
        return compact_request(
            request,
            format=format,
            policy=policy,
            offloader=self._offloader,
            reporter=self._reporter,
            key=self._marker_key(),
            memo=self._shared.compaction_memo(),
        )

    def _marker_key(self) -> bytes | None:
        """The store's marker key; ``None`` when the store cannot give it (then no stub is
        trusted, and no result can be stored either: nothing is cleared)."""
        try:
            return self._scoped.marker_key()
        except StoreError:
            return None

    @property
    def edge_guard(self) -> Guard:
        """The guard :meth:`guard` runs: this hold's thresholds (per tool too), margin, model
        windows and reporter, and its store's marker key, so the stubs and segments this hold
        made pass and forged ones do not. Give it to the client wrappers::

            client = cargohold.guard_openai(openai.OpenAI(), guard=hold.edge_guard)
        """
        if self._guard is None:
            from cargohold.guard import Guard

            settings = self._shared.settings
            self._guard = Guard(
                threshold=settings.heavy_threshold,
                tool_thresholds=settings.tool_thresholds,
                margin=settings.window_margin,
                windows=settings.model_windows,
                reporter=self._reporter,
                key=self._scoped.marker_key,  # asked when a marker is first met
            )
        return self._guard

    def warmup(self) -> None:
        """Load the tokenizer now (a few hundredths of a second, once per process) instead of
        at the first offload; stubs are byte-identical either way. A load a surface already
        started in the background is waited for, never repeated."""
        from cargohold._tokens import preload

        preload().join()  # the one load: a surface's background preload is this same thread

    # -- async twins ------------------------------------------------------------------------

    async def arun(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a blocking call on this hold's worker pool, the one its async twins use, with the
        caller's context variables; for surfaces and tools built on the hold (the pool's size
        keeps CPU-bound work from stalling the event loop: see ``max_workers``)."""
        loop = asyncio.get_running_loop()
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        return await loop.run_in_executor(self._shared.pool(), call)

    async def aoffload(
        self,
        value: object,
        *,
        tool: str | None = None,
        media_type: str | None = None,
        sensitivity: Sensitivity | str = Sensitivity.INTERNAL,
        complete: bool = True,
        failed: bool = False,
        budget: Budget | str | None = None,
        classification: ProjectionClass | str | None = None,
    ) -> OffloadResult:
        """:meth:`offload` on the worker pool. A cancelled caller does not cancel the write:
        once started, the bytes are stored (a write is never half done)."""
        return await self.arun(
            self.offload,
            value,
            tool=tool,
            media_type=media_type,
            sensitivity=sensitivity,
            complete=complete,
            failed=failed,
            budget=budget,
            classification=classification,
        )

    async def aread(
        self,
        ref: Ref | str,
        *,
        offset: int = 0,
        length: int | None = None,
        budget: int | None = None,
    ) -> RehydrateResult:
        """:meth:`read` on the worker pool."""
        return await self.arun(self.read, ref, offset=offset, length=length, budget=budget)

    async def aread_lines(
        self,
        ref: Ref | str,
        start_line: int = 1,
        end_line: int | None = None,
        *,
        budget: int | None = None,
    ) -> RehydrateResult:
        """:meth:`read_lines` on the worker pool."""
        return await self.arun(self.read_lines, ref, start_line, end_line, budget=budget)

    async def agrep(
        self,
        ref: Ref | str,
        pattern: str,
        *,
        ignore_case: bool = False,
        max_matches: int = 100,
        budget: int | None = None,
    ) -> RehydrateResult:
        """:meth:`grep` on the worker pool."""
        return await self.arun(
            self.grep,
            ref,
            pattern,
            ignore_case=ignore_case,
            max_matches=max_matches,
            budget=budget,
        )

    async def aquery(
        self, ref: Ref | str, expression: str, *, budget: int | None = None
    ) -> RehydrateResult:
        """:meth:`query` on the worker pool."""
        return await self.arun(self.query, ref, expression, budget=budget)

    async def asearch(
        self, query: str, *, limit: int = 10, budget: int | None = None
    ) -> SearchResult:
        """:meth:`search` on the worker pool."""
        return await self.arun(self.search, query, limit=limit, budget=budget)

    async def ainfo(self, ref: Ref | str) -> ReadResult:
        """:meth:`info` on the worker pool."""
        return await self.arun(self.info, ref)

    async def aextend(self, ref: Ref | str, ttl: float | None = None) -> ReadResult:
        """:meth:`extend` on the worker pool."""
        return await self.arun(self.extend, ref, ttl)

    async def acall_tool(
        self, name: str, arguments: Mapping[str, Any] | str | None = None
    ) -> ToolAnswer:
        """:meth:`call_tool` on the worker pool."""
        return await self.arun(self.call_tool, name, arguments)

    async def acompact(
        self,
        request: Any,
        *,
        format: str,
        policy: CompactionPolicy | None = None,
    ) -> tuple[Any, CompactionReport]:
        """:meth:`compact` on the worker pool (it writes to the store)."""
        return await self.arun(self.compact, request, format=format, policy=policy)

    async def aguard(self, request: Any, *, format: str, model: str | None = None) -> GuardReport:
        """:meth:`guard` on the worker pool (a near-limit request may load the tokenizer)."""
        return await self.arun(self.guard, request, format=format, model=model)

    async def arecord_request(
        self,
        *,
        api: str,
        outcome: RequestOutcome | str,
        request_bytes: int,
        forwarded_bytes: int = 0,
        bytes_kept_out: int = 0,
        tokens_kept_out: int = 0,
        offloaded: int = 0,
        reused: int = 0,
        compacted: int = 0,
        screened: int = 0,
        reason: Reason | str | None = None,
    ) -> DecisionEvent:
        """:meth:`record_request` on the worker pool: its sinks may write a file or a database
        row, which the event loop must not wait for."""
        return await self.arun(
            self.record_request,
            api=api,
            outcome=outcome,
            request_bytes=request_bytes,
            forwarded_bytes=forwarded_bytes,
            bytes_kept_out=bytes_kept_out,
            tokens_kept_out=tokens_kept_out,
            offloaded=offloaded,
            reused=reused,
            compacted=compacted,
            screened=screened,
            reason=reason,
        )

    async def awarmup(self) -> None:
        """:meth:`warmup` on the worker pool."""
        await self.arun(self.warmup)

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Finish pending async work, stop the pool and close the store it opened.

        Closing any hold of a family closes them all (they share one store). Idempotent.
        """
        self._shared.close()

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop."""
        await asyncio.to_thread(self._shared.close)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
