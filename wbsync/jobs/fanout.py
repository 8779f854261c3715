"""The fan-out: on an interval per queue, one job per (queue, cabinet) for every active cabinet.

It relies on the queue's anti-overlap (one live job per (queue, cabinet)), so a cabinet whose
sync is still running or deferred is never given a second one; it reports per queue how many
jobs it added and how many it skipped as live.

A cabinet whose job failed is not left until the queue's next interval (up to hours): once the
job has sat in ``failed`` for ``failed_retry_s``, the fan-out enqueues the cabinet again. Until
then the failed job, with its reason, is what the status page shows. Failed jobs are looked for
every quarter of ``failed_retry_s``, so the retry comes at most that much late.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from wbsync import clock
from wbsync.errors import WbSyncError
from wbsync.jobs.queue import SyncQueue

log = logging.getLogger(__name__)

ActiveCabinets = Callable[[], Awaitable[Sequence[str]]]
Serves = Callable[[str, str], bool]
"""Whether a cabinet's token can serve a queue (queue, cabinet): the others are not enqueued."""


@dataclass(frozen=True, slots=True)
class FanOutReport:
    """One queue's result of one fan-out pass."""

    added: int
    skipped_live: int


class FanOut:
    """Enqueues every active cabinet's job on each queue's interval."""

    def __init__(
        self,
        queues: Mapping[str, SyncQueue],
        active_cabinets: ActiveCabinets,
        intervals_s: Mapping[str, float],
        *,
        failed_retry_s: float = 300.0,
        serves: Serves | None = None,
    ) -> None:
        if failed_retry_s <= 0:
            raise ValueError("failed_retry_s must be > 0")
        missing = set(queues) - set(intervals_s)
        if missing:
            raise ValueError(f"no fan-out interval for queues {sorted(missing)}")
        self._queues = dict(queues)
        self._active_cabinets = active_cabinets
        self._intervals_s = dict(intervals_s)
        self._failed_retry_s = failed_retry_s
        self._serves = serves

    async def run_once(self, names: Iterable[str] | None = None) -> dict[str, FanOutReport]:
        """Enqueue every active cabinet on the named queues (all by default), once."""
        cabinets = await self._active_cabinets()
        reports = {}
        for name in names if names is not None else self._queues:
            results = await self._queues[name].enqueue_many(self._served(name, cabinets))
            added = sum(1 for r in results if r.added)
            reports[name] = FanOutReport(added=added, skipped_live=len(results) - added)
            log.info("fan-out %s: %d added, %d skipped as live", name, added, len(results) - added)
        return reports

    async def retry_failed(self) -> dict[str, int]:
        """Enqueue again every active cabinet whose job failed ``failed_retry_s`` ago or more."""
        cutoff_ms = clock.now_ms() - self._failed_retry_s * 1000.0
        due = {}
        for name, queue in self._queues.items():
            failed = await queue.failed_at()
            ready = [cabinet for cabinet, at in failed.items() if at <= cutoff_ms]
            if ready:
                due[name] = ready
        if not due:
            return {}
        active = set(await self._active_cabinets())
        added = {}
        for name, ready in due.items():
            cabinets = self._served(name, [c for c in ready if c in active])
            results = await self._queues[name].enqueue_many(cabinets) if cabinets else []
            added[name] = sum(1 for r in results if r.added)
            if added[name]:
                log.info("fan-out %s: %d failed jobs enqueued again", name, added[name])
        return added

    def _served(self, queue: str, cabinets: Sequence[str]) -> list[str]:
        """The cabinets whose token can serve ``queue`` (a job it cannot serve would only fail)."""
        if self._serves is None:
            return list(cabinets)
        return [c for c in cabinets if self._serves(queue, c)]

    async def run(self, stop: asyncio.Event) -> None:
        """Fan out each queue now and then every interval, until ``stop`` is set; enqueue
        failed jobs' cabinets again ``failed_retry_s`` after they failed."""
        due = dict.fromkeys(self._queues, clock.monotonic())
        look_every = self._failed_retry_s / 4
        look_at = clock.monotonic() + look_every
        while not stop.is_set():
            now = clock.monotonic()
            ready = [name for name, at in due.items() if at <= now]
            try:
                if ready:
                    await self.run_once(ready)
                if look_at <= now:
                    look_at = now + look_every
                    await self.retry_failed()
            except WbSyncError as exc:  # Redis or the database hiccuped: try next interval
                log.warning("fan-out failed: %s", exc)
            for name in ready:
                due[name] = now + self._intervals_s[name]
            timeout = max(0.0, min([*due.values(), look_at]) - clock.monotonic())
            try:
                await asyncio.wait_for(stop.wait(), timeout=timeout)
            except TimeoutError:
                pass
