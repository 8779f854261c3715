"""Serving status reads for the API and the status page, for thousands of cabinets.

What is read is in ``wbsync.api.status_read`` (the index of every cabinet, one page composed
on it) and the answer is the status model, ``wbsync.api.schemas.status``. This module keeps
them: the index is shared (concurrent reads wait for one build, and a build serves every read
for ``INDEX_TTL_S``), and so is a page (reads of the same query on the same index share one
result, rendered once as JSON and once as HTML).

At most ``STATUS_READS`` reads touch Redis at once (the others queue in the process), and the
runtime's Redis pool is sized and blocking, so no load of the page can exhaust a pool.
"""

from __future__ import annotations

import asyncio
import logging

from wbsync.api.attention import attention_out
from wbsync.api.schemas.attention import AttentionOut
from wbsync.api.schemas.jobs import at_ms
from wbsync.api.schemas.penalties import PenaltyOut
from wbsync.api.schemas.status import StatusOut, StatusQuery, ThroughputOut
from wbsync.api.status_read import Index, build_index, compose, in_force, penalties_out
from wbsync.errors import QueueError, StoreError, WbSyncError
from wbsync.shared.runtime import Runtime
from wbsync.syncs import SYNCS
from wbsync.system import clock

__all__ = ["INDEX_TTL_S", "PAGE_CACHE", "STATUS_READS", "StatusReader"]

log = logging.getLogger(__name__)

INDEX_TTL_S = 3.0
"""An index older than this is rebuilt in the background (the page reloads every 5 s)."""
STATUS_READS = 4
"""Status reads that touch Redis at the same time, per process; the rest wait their turn."""
PAGE_CACHE = 64
"""Distinct queries whose result a reader keeps for the current index."""


class StatusReader:
    """Answers status reads for one process; holds the shared index (no I/O until asked).

    Reads never wait for a rebuild once an index exists: a stale index is served while one
    background task builds the next. Reads of the same query on the same index share one
    result, so many viewers of the same page cost one read.
    """

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._index: Index | None = None
        self._build = asyncio.Lock()
        self._refresh: asyncio.Task[None] | None = None
        self._reads = asyncio.Semaphore(STATUS_READS)
        self._pages: dict[StatusQuery, tuple[Index, asyncio.Future[StatusOut]]] = {}
        self._pending: dict[StatusQuery, asyncio.Future[StatusOut]] = {}
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

    async def read(self, query: StatusQuery) -> StatusOut:
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

    def _recompose(self, index: Index, query: StatusQuery) -> None:
        if query in self._pending:
            return
        future = asyncio.ensure_future(self._compose(index, query))
        self._pending[query] = future

        def swap(done: asyncio.Future[StatusOut]) -> None:
            self._pending.pop(query, None)
            if _failed(done):  # the outage itself is logged once, by wbsync.observability.health
                log.debug("status: could not read a page: %s", done.exception())
            else:
                self._pages[query] = (index, done)

        future.add_done_callback(swap)

    def _trim(self, index: Index) -> None:
        if len(self._pages) <= PAGE_CACHE:
            return
        for query in [q for q, (i, _) in self._pages.items() if i is not index]:
            del self._pages[query]
        while len(self._pages) > PAGE_CACHE:
            del self._pages[next(iter(self._pages))]

    async def _compose(self, index: Index, query: StatusQuery) -> StatusOut:
        async with self._reads:
            return await compose(self._runtime, index, query)

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
        return penalties_out(in_force(penalties, now), index.sellers, now)

    async def _current_index(self) -> Index:
        index = self._index
        if index is None:
            async with self._build:  # one build at a time; those who waited take its result
                if self._index is None:
                    self._index = await build_index(self._runtime)
                return self._index
        if clock.monotonic() - index.built_at >= INDEX_TTL_S and (
            self._refresh is None or self._refresh.done()
        ):
            self._refresh = asyncio.create_task(self._rebuild(), name="status-index")
        return index

    async def _rebuild(self) -> None:
        try:
            async with self._build:
                self._index = await build_index(self._runtime)
        except WbSyncError as exc:  # the stale index stays; the next read tries again
            log.debug("status: could not rebuild the index: %s", exc)


def _failed(future: asyncio.Future[StatusOut]) -> bool:
    return future.done() and (future.cancelled() or future.exception() is not None)
