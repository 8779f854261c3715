"""The fan-out: on an interval per queue, one job per (queue, cabinet) for every active cabinet.

It relies on the queue's anti-overlap (one live job per (queue, cabinet)), so a cabinet whose
sync is still running or deferred is never given a second one; it reports per queue how many
jobs it added and how many it skipped as live. With many processes, only the leader of a queue
(``wbsync.jobs.leader``) fans it out, on the schedule shared in Redis.

A cabinet whose job failed is not left until the queue's next interval (up to hours): once the
job has sat in ``failed`` for ``failed_retry_s``, the queue's leader enqueues the cabinet again.
Until then the failed job, with its reason, is what the status page shows. Failed jobs are looked
for every quarter of ``failed_retry_s``, so the retry comes at most that much late.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from wbsync import clock
from wbsync.errors import WbSyncError
from wbsync.jobs.leader import FanOutLeases, Held
from wbsync.jobs.queue import SyncQueue

log = logging.getLogger(__name__)

ActiveCabinets = Callable[[], Awaitable[Sequence[str]]]
Serves = Callable[[str, str], bool]
"""Whether a cabinet's token can serve a queue (queue, cabinet): the others are not enqueued."""
OnLead = Callable[[Sequence[str]], Awaitable[None]]
"""Called on every poll with the queues this process leads (e.g. to start a retention pass)."""


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
        on_lead: OnLead | None = None,
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
        self._on_lead = on_lead

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

    async def retry_failed(self, names: Iterable[str] | None = None) -> dict[str, int]:
        """Enqueue again every active cabinet whose job failed ``failed_retry_s`` ago or more,
        on the named queues (all by default)."""
        cutoff_ms = clock.now_ms() - self._failed_retry_s * 1000.0
        due = {}
        for name in names if names is not None else self._queues:
            failed = await self._queues[name].failed_at()
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

    async def run(self, stop: asyncio.Event, leases: FanOutLeases) -> None:
        """Until ``stop`` is set: lead what this process can; fan out each led queue when the
        shared schedule says it is due (at once if it never ran), then every interval; enqueue
        failed jobs' cabinets again ``failed_retry_s`` after they failed."""
        names = list(self._queues)
        look_every = self._failed_retry_s / 4
        look_at = clock.monotonic() + look_every
        try:
            while not stop.is_set():
                timeout = leases.poll_s
                leading = False
                try:
                    held = await leases.hold(names)
                    leading = bool(held.queues)
                    timeout = min(timeout, await self._fan_out_due(held, leases))
                    if leading and self._on_lead is not None:
                        await self._on_lead(held.queues)
                    if leading and look_at <= clock.monotonic():
                        look_at = clock.monotonic() + look_every
                        await self.retry_failed(held.queues)
                except WbSyncError as exc:  # Redis or the database hiccuped: try next poll
                    log.warning("fan-out failed: %s", exc)
                if leading:  # a follower waits for the lease only: it looks at no failed jobs
                    timeout = min(timeout, max(0.0, look_at - clock.monotonic()))
                try:
                    await asyncio.wait_for(stop.wait(), timeout=timeout)
                except TimeoutError:
                    pass
        finally:
            try:
                await leases.release(names)
            except WbSyncError as exc:
                log.warning("could not give up the fan-out leases (they expire): %s", exc)

    async def _fan_out_due(self, held: Held, leases: FanOutLeases) -> float:
        """Fan out the led queues that are due; seconds until the next one is."""
        due = await leases.due_ms(held.queues)
        ready = [q for q, at in due.items() if at is None or at <= held.now_ms]
        if ready:
            await self.run_once(ready)
            await leases.set_due_ms(
                {q: held.now_ms + round(self._intervals_s[q] * 1000) for q in ready}
            )
        waits = [
            max(0.0, (at - held.now_ms) / 1000.0)
            for q, at in due.items()
            if q not in ready and at is not None
        ]
        waits += [self._intervals_s[q] for q in ready]
        return min(waits, default=leases.poll_s)
