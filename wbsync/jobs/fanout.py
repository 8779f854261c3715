"""The fan-out: on an interval per queue, one job per (queue, cabinet) for every active cabinet.

It relies on the queue's anti-overlap (one live job per (queue, cabinet)), so a cabinet whose
sync is still running or deferred is never given a second one; it reports per queue how many
jobs it added and how many it skipped as live.
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
    ) -> None:
        missing = set(queues) - set(intervals_s)
        if missing:
            raise ValueError(f"no fan-out interval for queues {sorted(missing)}")
        self._queues = dict(queues)
        self._active_cabinets = active_cabinets
        self._intervals_s = dict(intervals_s)

    async def run_once(self, names: Iterable[str] | None = None) -> dict[str, FanOutReport]:
        """Enqueue every active cabinet on the named queues (all by default), once."""
        cabinets = await self._active_cabinets()
        reports = {}
        for name in names if names is not None else self._queues:
            results = await self._queues[name].enqueue_many(cabinets)
            added = sum(1 for r in results if r.added)
            reports[name] = FanOutReport(added=added, skipped_live=len(results) - added)
            log.info("fan-out %s: %d added, %d skipped as live", name, added, len(results) - added)
        return reports

    async def run(self, stop: asyncio.Event) -> None:
        """Fan out each queue now and then every interval, until ``stop`` is set."""
        due = dict.fromkeys(self._queues, clock.monotonic())
        while not stop.is_set():
            now = clock.monotonic()
            ready = [name for name, at in due.items() if at <= now]
            if ready:
                try:
                    await self.run_once(ready)
                except WbSyncError as exc:  # Redis or the database hiccuped: try next interval
                    log.warning("fan-out failed: %s", exc)
                for name in ready:
                    due[name] = now + self._intervals_s[name]
            timeout = max(0.0, min(due.values()) - clock.monotonic())
            try:
                await asyncio.wait_for(stop.wait(), timeout=timeout)
            except TimeoutError:
                pass
