"""Reading the system's state for the API and the status page, for thousands of cabinets.

A status read has two parts:

* The **index**: every cabinet (no token) with the state of its job in each queue, the
  oldest of its syncs' last successes, whether a sync last met a method WB switched off, and
  whether its seller has a learned limit. It costs one database query, one Redis pipeline that
  reads job ids only and one read of the learned limits' index, and it is shared: concurrent
  reads wait for one build, and a build serves every read for ``INDEX_TTL_S``. Search,
  filters, sorting and paging run on it in memory.
* The **page**: the details of one page of cabinets only: their jobs' data (one pipeline), their
  last runs (one query) and their buckets (one pipeline of peeks).

At most ``STATUS_READS`` reads touch Redis at once (the others queue in the process), and the
runtime's Redis pool is sized and blocking, so no load of the page can exhaust a pool.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, get_args

from prometheus_client import REGISTRY

from wbsync import clock
from wbsync.api.schemas import (
    BucketOut,
    CabinetBucketOut,
    CabinetJobOut,
    CabinetOut,
    CabinetStatusOut,
    JobOut,
    LagOut,
    LearnedOut,
    LimitOut,
    RunOut,
    StatusOut,
    ThroughputOut,
    at_ms,
    job_out,
    run_out,
)
from wbsync.errors import ConfigError, QueueError, StoreError, TokenError, WbSyncError
from wbsync.jobs.lag import LAG_WINDOW_S, LagFigure
from wbsync.jobs.model import LIVE_STATES
from wbsync.jobs.views import job_states, read_jobs
from wbsync.metrics import QUEUE_JOBS
from wbsync.ratelimit import BucketScope, Learned
from wbsync.runtime import Runtime
from wbsync.store import Cabinet, CabinetOverview
from wbsync.syncs import SYNCS, unserved_queues
from wbsync.wb.endpoints import ENDPOINTS
from wbsync.wb.tokens import parse_token

__all__ = [
    "INDEX_TTL_S",
    "PER_PAGE_MAX",
    "STATUS_READS",
    "CabinetStatus",
    "SortOrder",
    "StateFilter",
    "StatusPage",
    "StatusQuery",
    "StatusReader",
    "cabinet_buckets",
    "cabinet_jobs",
    "counters",
    "queue_counts",
    "status_out",
]

log = logging.getLogger(__name__)

INDEX_TTL_S = 3.0
"""An index older than this is rebuilt in the background (the page reloads every 5 s)."""
STATUS_READS = 4
"""Status reads that touch Redis at the same time, per process; the rest wait their turn."""
PER_PAGE_MAX = 200
"""The most cabinets one status page shows."""
BUSIEST = 12
_YIELD_EVERY = 1000
PAGE_CACHE = 64
"""Distinct queries whose result a reader keeps for the current index."""

StateFilter = Literal[
    "all",
    "failed",
    "deferred",
    "running",
    "waiting",
    "idle",
    "disabled-method",
    "learned-limit",
]
SortOrder = Literal["stuck", "id", "name"]
STATE_FILTERS: tuple[str, ...] = get_args(StateFilter)
SORT_ORDERS: tuple[str, ...] = get_args(SortOrder)
# Which job states each filter selects (a cabinet matches when any of its jobs is in one).
_FILTER_STATES: dict[str, frozenset[str]] = {
    "failed": frozenset({"failed"}),
    "deferred": frozenset({"delayed"}),
    "running": frozenset({"active"}),
    "waiting": frozenset({"waiting", "prioritized"}),
}
STATES = (*LIVE_STATES, "failed")


def _queue_order(queue: str) -> tuple[int, str]:
    """Registered queues in their declared order, then queues this process does not know
    (a plugin loaded elsewhere) by name."""
    known = list(SYNCS)
    return (known.index(queue), "") if queue in SYNCS else (len(known), queue)


async def cabinet_jobs(runtime: Runtime, cabinet_id: int) -> list[JobOut]:
    """The cabinet's live jobs over every queue."""
    views = await asyncio.gather(*(runtime.queue(q).job(str(cabinet_id)) for q in SYNCS))
    return [job_out(v) for v in views if v is not None and v.state in LIVE_STATES]


async def buckets_of(runtime: Runtime, cabinets: Sequence[Cabinet]) -> list[tuple[str, BucketOut]]:
    """Every bucket of these cabinets, read without taking a token, in one pipeline.

    A cabinet whose token cannot be read (expired, no secret key) is left out with a warning.
    """
    scale = runtime.settings.time_scale
    wanted: list[tuple[str, str, list[str], BucketScope]] = []
    for cabinet in cabinets:
        try:
            token = parse_token(cabinet.token(), cabinet=cabinet.name)
        except (TokenError, ConfigError) as exc:
            log.warning("status: no buckets for cabinet %s: %s", cabinet.id, exc)
            continue
        groups: dict[str, list[str]] = defaultdict(list)
        for ep in ENDPOINTS.values():
            if ep.allows(token.type):
                groups[ep.group].append(ep.name)
        for group, methods in groups.items():
            limit = ENDPOINTS[methods[0]].limit_for(token.type, runtime.settings.limit_overrides)
            wanted.append(
                (cabinet.name, group, methods, BucketScope(token.seller_id, group, limit))
            )
    peeks = await runtime.limiter.peek_many([w[3] for w in wanted])
    learned = await runtime.limiter.learned_many([w[3] for w in wanted])
    now = clock.now_ms()
    out = []
    for (name, group, methods, scope), peek, known in zip(wanted, peeks, learned, strict=True):
        limit, wait = scope.limit, 0 if peek.acquired else peek.wait_ms
        capacity = min(limit.burst, known.burst) if known is not None else limit.burst
        bucket = BucketOut(
            group=group,
            methods=methods,
            limit=LimitOut(
                period_s=limit.period_s, limit=limit.limit, burst=limit.burst, time_scale=scale
            ),
            tokens_left=min(peek.remaining, capacity),
            capacity=capacity,
            next_token_in_ms=wait,
            next_token_at=at_ms(now + wait),
            learned=_learned_out(known, scale),
        )
        out.append((name, bucket))
    return out


def _learned_out(known: Learned | None, scale: float) -> LearnedOut | None:
    if known is None:
        return None
    limit = known.as_limit(scale)
    return LearnedOut(
        period_s=limit.period_s,
        limit=limit.limit,
        burst=limit.burst,
        expires_in_ms=known.expires_in_ms,
    )


async def cabinet_buckets(runtime: Runtime, cabinet: Cabinet) -> list[BucketOut]:
    """Every limit group the cabinet's token may spend, read without taking a token."""
    parse_token(cabinet.token(), cabinet=cabinet.name)  # a bad token is the caller's error
    return [bucket for _, bucket in await buckets_of(runtime, [cabinet])]


async def queue_counts(runtime: Runtime) -> dict[str, dict[str, int]]:
    """Jobs per state of every queue; also sets the queue-depth gauges."""
    counts = await asyncio.gather(*(runtime.queue(q).counts() for q in SYNCS))
    for name, by_state in zip(SYNCS, counts, strict=True):
        for state, n in by_state.items():
            QUEUE_JOBS.labels(name, state).set(n)
    return dict(zip(SYNCS, counts, strict=True))


def counters() -> dict[str, float]:
    """Process-wide totals of the counters the page shows."""
    totals: dict[str, float] = defaultdict(float)
    for metric in REGISTRY.collect():
        for s in metric.samples:
            if s.name == "wbsync_rate_limit_reschedules_total":
                totals["reschedules"] += s.value
            elif s.name == "wbsync_upstream_requests_total" and s.labels.get("status") == "429":
                totals["upstream_429"] += s.value
            elif s.name == "wbsync_limiter_wait_seconds_count" and (
                s.labels.get("outcome") == "refused"
            ):
                totals["local_429"] += s.value
    return {k: totals[k] for k in ("reschedules", "upstream_429", "local_429")}


@dataclass(frozen=True, slots=True)
class StatusQuery:
    """What a status read asks for: a search, a state filter, an order and a page (from 1)."""

    search: str = ""
    state: StateFilter = "all"
    sort: SortOrder = "stuck"
    page: int = 1
    per_page: int = 50


@dataclass(frozen=True, slots=True)
class _Row:
    cabinet: CabinetOverview
    states: dict[str, str]  # queue -> its job's state, for queues with a stored job
    stuck_since_ms: float | None  # None: nothing pending or failed
    learned: bool  # a bucket of its seller follows a limit learned from WB's replies


@dataclass(frozen=True, slots=True)
class _Index:
    rows: list[_Row]
    queues: dict[str, dict[str, int]]
    lag: dict[str, LagFigure]
    built_at: float  # monotonic seconds
    unloaded: list[str] = field(default_factory=list)


@dataclass
class CabinetStatus:
    """A cabinet with its jobs (live and failed), its last runs and since when it is stuck."""

    cabinet: CabinetOut
    jobs: list[JobOut]
    runs: list[RunOut] = field(default_factory=list)
    stuck_since: datetime | None = None
    unserved: dict[str, str] = field(default_factory=dict)


@dataclass
class StatusPage:
    """One page of the status: totals over every cabinet, details of the page's cabinets."""

    generated_at: datetime
    time_scale: float
    queues: dict[str, dict[str, int]]
    counters: dict[str, float]
    query: StatusQuery
    total: int
    matched: int
    cabinets: list[CabinetStatus]
    buckets: list[tuple[str, BucketOut]] = field(default_factory=list)
    lag: dict[str, LagFigure] = field(default_factory=dict)
    """Per queue with recent runs: how late they started (``wbsync.jobs.lag``)."""
    unloaded_queues: list[str] = field(default_factory=list)
    """Queues with recorded runs that this process does not load (a plugin loaded elsewhere)."""
    rendered: dict[str, bytes] = field(default_factory=dict, repr=False)
    """Renderings of this page (JSON, HTML), made once however many viewers ask."""

    @property
    def pages(self) -> int:
        """How many pages the matching cabinets fill (at least 1)."""
        return max(1, -(-self.matched // self.query.per_page))

    @property
    def waiting(self) -> list[tuple[CabinetOut, JobOut]]:
        """The page's delayed jobs with their cabinet, soonest resume first."""
        rows = [(c.cabinet, j) for c in self.cabinets for j in c.jobs if j.state == "delayed"]
        return sorted(rows, key=lambda row: row[1].resume_in_ms or 0)

    @property
    def failed(self) -> list[tuple[CabinetOut, JobOut]]:
        """The page's failed jobs with their cabinet, latest failure first."""
        rows = [(c.cabinet, j) for c in self.cabinets for j in c.jobs if j.state == "failed"]
        return sorted(rows, key=lambda row: row[1].failed_at or row[0].created_at, reverse=True)


class StatusReader:
    """Answers status reads for one process; holds the shared index (no I/O until asked).

    Reads never wait for a rebuild once an index exists: a stale index is served while one
    background task builds the next. Reads of the same query on the same index share one
    result, so many viewers of the same page cost one read.
    """

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._index: _Index | None = None
        self._build = asyncio.Lock()
        self._refresh: asyncio.Task[None] | None = None
        self._reads = asyncio.Semaphore(STATUS_READS)
        self._pages: dict[StatusQuery, tuple[_Index, asyncio.Future[StatusPage]]] = {}
        self._pending: dict[StatusQuery, asyncio.Future[StatusPage]] = {}
        self._throughput: tuple[float, bytes] | None = None

    async def throughput(self) -> bytes:
        """The last hour's pages and 429s per queue (JSON), read at most every INDEX_TTL_S."""
        self._refuse_stale()
        cached = self._throughput
        if cached is not None and clock.monotonic() - cached[0] < INDEX_TTL_S:
            return cached[1]
        async with self._reads:
            history = await self._runtime.throughput.history(list(SYNCS))
        body = ThroughputOut(minutes=history.minutes, queues=history.queues).model_dump_json()
        self._throughput = (clock.monotonic(), body.encode())
        return self._throughput[1]

    def invalidate(self) -> None:
        """Forget the index: the next read builds a new one (after this process changed a job)."""
        self._index = None
        self._pages.clear()
        self._pending.clear()
        self._throughput = None

    async def read(self, query: StatusQuery) -> StatusPage:
        """One page of cabinets matching ``query``, with the totals of every queue.

        A result composed on an older index is served while the same query is composed anew
        in the background; only the first read of a query (or after ``invalidate``) waits.
        """
        self._refuse_stale()
        index = await self._current_index()
        entry = self._pages.get(query)
        if entry is None or _failed(entry[1]):
            entry = (index, asyncio.ensure_future(self._compose(index, query)))
            self._pages[query] = entry
            self._trim(index)
        elif entry[0] is not index and entry[1].done():
            self._recompose(index, query)
        return await asyncio.shield(entry[1])

    def _refuse_stale(self) -> None:
        """During a known outage of Redis or the database, no page from before it is served.

        The dependency probes (``runtime.health``) say what is down; the read then fails as a
        read against the dependency would (503 naming it), and the cache is dropped.
        """
        down = self._runtime.health.down_now()
        if not down:
            return
        self.invalidate()
        if "redis" in down:
            raise QueueError("Redis is not answering; the status cannot be read")
        raise StoreError("the database is not answering; the status cannot be read")

    def _recompose(self, index: _Index, query: StatusQuery) -> None:
        if query in self._pending:
            return
        future = asyncio.ensure_future(self._compose(index, query))
        self._pending[query] = future

        def swap(done: asyncio.Future[StatusPage]) -> None:
            self._pending.pop(query, None)
            if _failed(done):  # the outage itself is logged once, by wbsync.health
                log.debug("status: could not read a page: %s", done.exception())
            else:
                self._pages[query] = (index, done)

        future.add_done_callback(swap)

    def _trim(self, index: _Index) -> None:
        if len(self._pages) <= PAGE_CACHE:
            return
        for query in [q for q, (i, _) in self._pages.items() if i is not index]:
            del self._pages[query]
        while len(self._pages) > PAGE_CACHE:
            del self._pages[next(iter(self._pages))]

    async def _compose(self, index: _Index, query: StatusQuery) -> StatusPage:
        async with self._reads:
            matched = _select(index.rows, query)
            start = (query.page - 1) * query.per_page
            rows = matched[start : start + query.per_page]
            cabinets, buckets = await self._details(rows)
        return StatusPage(
            generated_at=at_ms(clock.now_ms()),
            time_scale=self._runtime.settings.time_scale,
            queues=index.queues,
            counters=counters(),
            query=query,
            total=len(index.rows),
            matched=len(matched),
            cabinets=cabinets,
            buckets=buckets,
            lag=index.lag,
            unloaded_queues=index.unloaded,
        )

    async def _current_index(self) -> _Index:
        index = self._index
        if index is None:
            async with self._build:  # one build at a time; those who waited take its result
                if self._index is None:
                    self._index = await self._build_index()
                return self._index
        if clock.monotonic() - index.built_at >= INDEX_TTL_S and (
            self._refresh is None or self._refresh.done()
        ):
            self._refresh = asyncio.create_task(self._rebuild(), name="status-index")
        return index

    async def _rebuild(self) -> None:
        try:
            async with self._build:
                self._index = await self._build_index()
        except WbSyncError as exc:  # the stale index stays; the next read tries again
            log.debug("status: could not rebuild the index: %s", exc)

    async def _build_index(self) -> _Index:
        runtime = self._runtime
        queues = [runtime.queue(q) for q in SYNCS]
        overview, states, learned, lag, recorded = await asyncio.gather(
            runtime.store.runs.overview(),
            job_states(runtime.redis, queues),
            runtime.limiter.learned_cabinets(),
            runtime.lag.recent(list(SYNCS)),
            runtime.store.runs.queues(),
        )
        counts = {q: dict.fromkeys(STATES, 0) for q in SYNCS}
        for name, by_cabinet in states.items():
            for state, n in Counter(by_cabinet.values()).items():
                counts[name][state] = n
        rows = []
        for n, cabinet in enumerate(overview):
            if n % _YIELD_EVERY == 0:
                await asyncio.sleep(0)  # let requests through while a large index is built
            key = str(cabinet.id)
            mine = {q: by_cabinet[key] for q, by_cabinet in states.items() if key in by_cabinet}
            rows.append(
                _Row(cabinet, mine, _stuck_since(cabinet, mine), cabinet.seller_id in learned)
            )
        unloaded = [q for q in recorded if q not in SYNCS]
        return _Index(
            rows=rows, queues=counts, lag=lag, built_at=clock.monotonic(), unloaded=unloaded
        )

    async def _details(
        self, rows: Sequence[_Row]
    ) -> tuple[list[CabinetStatus], list[tuple[str, BucketOut]]]:
        runtime = self._runtime
        wanted = [
            (runtime.queue(q), str(row.cabinet.id), state)
            for row in rows
            for q, state in row.states.items()
        ]
        ids = [row.cabinet.id for row in rows]
        views, runs, cabinets = await asyncio.gather(
            read_jobs(runtime.redis, wanted),
            runtime.store.runs.of_cabinets(ids),
            runtime.store.cabinets.many(ids),
        )
        jobs: dict[str, list[JobOut]] = defaultdict(list)
        for view in views:
            if view is not None:
                jobs[view.cabinet].append(job_out(view))
        runs_of: dict[int, list[RunOut]] = defaultdict(list)
        for record in runs:
            runs_of[record.cabinet_id].append(run_out(record))
        unserved = {c.id: _unserved(c) for c in cabinets}
        statuses = [
            CabinetStatus(
                cabinet=CabinetOut(
                    id=row.cabinet.id,
                    name=row.cabinet.name,
                    seller_id=row.cabinet.seller_id,
                    active=row.cabinet.active,
                    created_at=row.cabinet.created_at,
                ),
                jobs=jobs.get(str(row.cabinet.id), []),
                runs=sorted(runs_of.get(row.cabinet.id, []), key=lambda r: _queue_order(r.queue)),
                stuck_since=None if row.stuck_since_ms is None else at_ms(row.stuck_since_ms),
                unserved=unserved.get(row.cabinet.id, {}),
            )
            for row in rows
        ]
        buckets = await buckets_of(runtime, [c for c in cabinets if c.active])
        busy = [b for b in buckets if b[1].tokens_left < b[1].capacity]
        busy.sort(key=lambda b: (b[1].tokens_left / b[1].capacity, -b[1].next_token_in_ms))
        return statuses, busy[:BUSIEST]


def _unserved(cabinet: Cabinet) -> dict[str, str]:
    """The queues the cabinet's token cannot serve (the fan-out skips them), with why."""
    try:
        return unserved_queues(parse_token(cabinet.token(), cabinet=cabinet.name))
    except (TokenError, ConfigError):
        return {}


def _stuck_since(cabinet: CabinetOverview, states: dict[str, str]) -> float | None:
    """Since when the cabinet waits for a success: None when none of its jobs is pending.

    That is its oldest last success over every sync, or its creation when a sync never
    succeeded for it.
    """
    if not states:
        return None
    since = cabinet.created_at
    if cabinet.oldest_success is not None and cabinet.successes >= len(SYNCS):
        since = cabinet.oldest_success
    return since.timestamp() * 1000.0


def _select(rows: Sequence[_Row], query: StatusQuery) -> list[_Row]:
    """The rows matching the query's search and filter, in its order."""
    found = list(rows)
    needle = query.search.strip().lower()
    if needle:
        found = [
            r
            for r in found
            if needle in r.cabinet.name.lower()
            or needle == str(r.cabinet.id)
            or r.cabinet.seller_id.lower().startswith(needle)
        ]
    if query.state == "idle":
        found = [r for r in found if not r.states]
    elif query.state == "disabled-method":
        found = [r for r in found if r.cabinet.disabled_methods]
    elif query.state == "learned-limit":
        found = [r for r in found if r.learned]
    elif query.state != "all":
        wanted = _FILTER_STATES[query.state]
        found = [r for r in found if any(s in wanted for s in r.states.values())]
    if query.sort == "name":
        found.sort(key=lambda r: (r.cabinet.name.lower(), r.cabinet.id))
    elif query.sort == "stuck":
        found.sort(key=lambda r: (r.stuck_since_ms is None, r.stuck_since_ms or 0, r.cabinet.id))
    return found  # "id": the index is already in id order


def _failed(future: asyncio.Future[StatusPage]) -> bool:
    return future.done() and (future.cancelled() or future.exception() is not None)


def status_out(page: StatusPage) -> StatusOut:
    """The page as the API shows it."""
    return StatusOut(
        generated_at=page.generated_at,
        time_scale=page.time_scale,
        counters=page.counters,
        queues=page.queues,
        lag={
            q: LagOut(runs=f.runs, p50_s=f.p50_s, p95_s=f.p95_s, max_s=f.max_s)
            for q, f in page.lag.items()
        },
        lag_window_s=LAG_WINDOW_S,
        unloaded_queues=page.unloaded_queues,
        total=page.total,
        matched=page.matched,
        page=page.query.page,
        per_page=page.query.per_page,
        pages=page.pages,
        cabinets=[
            CabinetStatusOut(
                cabinet=c.cabinet,
                stuck_since=c.stuck_since,
                jobs=c.jobs,
                runs=c.runs,
                unserved=c.unserved,
            )
            for c in page.cabinets
        ],
        waiting=[CabinetJobOut(cabinet=c, job=j) for c, j in page.waiting],
        failed=[CabinetJobOut(cabinet=c, job=j) for c, j in page.failed],
        busiest_buckets=[CabinetBucketOut(cabinet=n, bucket=b) for n, b in page.buckets],
    )
