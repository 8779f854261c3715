"""Reading the system's state for the API and the status page, for thousands of cabinets.

A status read has two parts:

* The **index**: every cabinet (no token) with the state of its job in each queue, the
  oldest of its syncs' last successes, whether a sync last met a method WB switched off, and
  whether its seller has a learned limit or a penalty from WB. It costs one database query, one
  Redis pipeline that reads job ids only, one read of the learned limits' index and one of the
  penalties in force (``RateLimiter.penalties``), and two queries for what needs attention (the
  suspensions in force, the active cabinets' token expiries; ``wbsync.api.attention``); it is
  shared: concurrent
  reads wait for one build, and a build serves every read for ``INDEX_TTL_S``. Search,
  filters, sorting and paging run on it in memory.
* The **page**: the details of one page of cabinets only: their jobs' data (one pipeline), their
  last runs (one query) and their buckets (one pipeline of peeks).

At most ``STATUS_READS`` reads touch Redis at once (the others queue in the process), and the
runtime's Redis pool is sized and blocking, so no load of the page can exhaust a pool.

What a read asks for and answers with is the view model, ``wbsync.api.status_model``; the page's
buckets and counters are read as the API reads them for one cabinet (``wbsync.api.live``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from wbsync.api.attention import ATTENTION_SHOWN, attention_out, flagged
from wbsync.api.live import buckets_of, counters
from wbsync.api.schemas import (
    AttentionOut,
    BucketOut,
    JobOut,
    PenaltyOut,
    RunOut,
    ThroughputOut,
    at_ms,
    cabinet_out,
    job_out,
    penalty_out,
    run_out,
)
from wbsync.api.status_model import STATES, CabinetStatus, StatusPage, StatusQuery
from wbsync.cabinets.penalties import by_seller
from wbsync.errors import ConfigError, QueueError, StoreError, TokenError, WbSyncError
from wbsync.jobs.lag import LagFigure
from wbsync.jobs.views import job_states, read_jobs
from wbsync.ratelimit import Penalty
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet, CabinetOverview
from wbsync.syncs import SYNCS, unserved_queues
from wbsync.system import clock
from wbsync.wb.tokens import parse_token

__all__ = ["INDEX_TTL_S", "PENALTIES_SHOWN", "STATUS_READS", "StatusReader"]

log = logging.getLogger(__name__)

INDEX_TTL_S = 3.0
"""An index older than this is rebuilt in the background (the page reloads every 5 s)."""
STATUS_READS = 4
"""Status reads that touch Redis at the same time, per process; the rest wait their turn."""
BUSIEST = 12
_YIELD_EVERY = 1000
PAGE_CACHE = 64
"""Distinct queries whose result a reader keeps for the current index."""
PENALTIES_SHOWN = 50
"""The most penalties a status page lists (the longest first); the API's route lists them all."""
# Which job states each filter selects (a cabinet matches when any of its jobs is in one).
_FILTER_STATES: dict[str, frozenset[str]] = {
    "failed": frozenset({"failed"}),
    "deferred": frozenset({"delayed"}),
    "running": frozenset({"active"}),
    "waiting": frozenset({"waiting", "prioritized"}),
}


def _queue_order(queue: str) -> tuple[int, str]:
    """Registered queues in their declared order, then queues this process does not know
    (a plugin loaded elsewhere) by name."""
    known = list(SYNCS)
    return (known.index(queue), "") if queue in SYNCS else (len(known), queue)


@dataclass(frozen=True, slots=True)
class _Row:
    cabinet: CabinetOverview
    states: dict[str, str]  # queue -> its job's state, for queues with a stored job
    stuck_since_ms: float | None  # None: nothing pending or failed
    learned: bool  # a bucket of its seller follows a limit learned from WB's replies
    penalised: bool  # WB's penalty holds a bucket of its seller
    attention: bool = False  # suspended, or its token expired or expires soon


@dataclass(frozen=True, slots=True)
class _Index:
    rows: list[_Row]
    queues: dict[str, dict[str, int]]
    lag: dict[str, LagFigure]
    built_at: float  # monotonic seconds
    penalties: list[Penalty]
    sellers: dict[str, list[CabinetOverview]]  # seller id -> its cabinets
    attention: AttentionOut = field(default_factory=AttentionOut)  # as of built_at, shown rows
    unloaded: list[str] = field(default_factory=list)


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
            if _failed(done):  # the outage itself is logged once, by wbsync.observability.health
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
        now = clock.now_ms()
        live = _in_force(index.penalties, now)
        return StatusPage(
            generated_at=at_ms(now),
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
            penalties=_penalties_out(live[:PENALTIES_SHOWN], index.sellers, now),
            penalties_total=len(live),
            attention=index.attention,
        )

    async def attention(self) -> AttentionOut:
        """Every suspension in force and every token expired or expiring (read afresh: two
        queries over every cabinet)."""
        self._refuse_stale()
        store = self._runtime.store
        async with self._reads:
            suspensions, expiries = await asyncio.gather(
                store.suspensions(), store.token_expiries()
            )
        return attention_out(suspensions, expiries, at_ms(clock.now_ms()))

    async def penalties(self) -> list[PenaltyOut]:
        """Every penalty in force now (read afresh: two round trips), the longest first, each
        with its seller's cabinets (as the index knows them)."""
        self._refuse_stale()
        index = await self._current_index()
        async with self._reads:
            penalties = await self._runtime.limiter.penalties()
        now = clock.now_ms()
        return _penalties_out(_in_force(penalties, now), index.sellers, now)

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
        store = runtime.store
        (
            (overview, states, learned, lag, recorded, penalties),
            (suspensions, expiries),
        ) = await asyncio.gather(
            asyncio.gather(
                runtime.store.runs.overview(),
                job_states(runtime.redis, queues),
                runtime.limiter.learned_cabinets(),
                runtime.lag.recent(list(SYNCS)),
                runtime.store.runs.queues(),
                runtime.limiter.penalties(),
            ),
            asyncio.gather(store.suspensions(), store.token_expiries()),
        )
        penalised = {p.seller for p in penalties}
        now = at_ms(clock.now_ms())
        needs = flagged(suspensions, expiries, now)
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
            seller = cabinet.seller_id
            since = _stuck_since(cabinet, mine)
            rows.append(
                _Row(
                    cabinet,
                    mine,
                    since,
                    seller in learned,
                    seller in penalised,
                    cabinet.id in needs,
                )
            )
        unloaded = [q for q in recorded if q not in SYNCS]
        return _Index(
            rows=rows,
            queues=counts,
            lag=lag,
            built_at=clock.monotonic(),
            penalties=penalties,
            sellers=by_seller(overview),
            attention=attention_out(suspensions, expiries, now, shown=ATTENTION_SHOWN),
            unloaded=unloaded,
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
                cabinet=cabinet_out(row.cabinet),
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
    elif query.state == "penalty":
        found = [r for r in found if r.penalised]
    elif query.state == "needs-attention":
        found = [r for r in found if r.attention]
    elif query.state != "all":
        wanted = _FILTER_STATES[query.state]
        found = [r for r in found if any(s in wanted for s in r.states.values())]
    if query.sort == "name":
        found.sort(key=lambda r: (r.cabinet.name.lower(), r.cabinet.id))
    elif query.sort == "stuck":
        found.sort(key=lambda r: (r.stuck_since_ms is None, r.stuck_since_ms or 0, r.cabinet.id))
    return found  # "id": the index is already in id order


def _in_force(penalties: Sequence[Penalty], now_ms: float) -> list[Penalty]:
    """The penalties still in force at ``now_ms`` (an index's may have lifted since), the
    longest first."""
    return sorted((p for p in penalties if p.until_ms > now_ms), key=lambda p: -p.until_ms)


def _penalties_out(
    penalties: Sequence[Penalty], sellers: dict[str, list[CabinetOverview]], now_ms: float
) -> list[PenaltyOut]:
    """The penalties as the API shows them, each with its seller's cabinets."""
    return [
        penalty_out(p, [cabinet_out(c) for c in sellers.get(p.seller, [])], now_ms)
        for p in penalties
    ]


def _failed(future: asyncio.Future[StatusPage]) -> bool:
    return future.done() and (future.cancelled() or future.exception() is not None)
