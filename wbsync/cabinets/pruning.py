"""The retention pass, run by fan-out leaders: each prunes the datasets of the queues it leads.

A queue has one leader at a time across the deployment (``wbsync.jobs.leader``), and each
dataset is written by one queue's sync, so every dataset is pruned by exactly one process. The
pass runs in its own task (a long pass never holds up the leader's lease renewals), at most
every ``prune_interval_s`` per process, one at a time; its deletes are bounded batches
(``wbsync.store.retention``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from wbsync.errors import WbSyncError
from wbsync.store import Dataset, Store
from wbsync.system import clock

__all__ = ["Pruner"]

log = logging.getLogger(__name__)


class Pruner:
    """Starts a retention pass over the led queues' datasets when one is due (no I/O at init)."""

    def __init__(
        self, store: Store, *, interval_s: float, datasets: Mapping[str, Sequence[Dataset]]
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self._store = store
        self._interval_s = interval_s
        self._datasets = {queue: tuple(ds) for queue, ds in datasets.items()}
        self._due = clock.monotonic()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.passes = 0
        """Passes finished (for tests and the log)."""

    async def on_lead(self, queues: Sequence[str]) -> None:
        """The fan-out's hook, called while leading ``queues``: start a pass if one is due
        (never once closed: a lead that ends as the process stops starts nothing on a database
        about to close)."""
        if self._closed or (self._task is not None and not self._task.done()):
            return
        if clock.monotonic() < self._due or not queues:
            return
        self._due = clock.monotonic() + self._interval_s
        chosen = tuple(ds for q in queues for ds in self._datasets.get(q, ()))
        if chosen:
            self._task = asyncio.create_task(self._run(chosen), name="prune")

    async def _run(self, datasets: tuple[Dataset, ...]) -> None:
        try:
            for pruned in await self._store.prune(clock.calendar_now(), datasets=datasets):
                if pruned.expired or pruned.tombstones:
                    log.info(
                        "pruned %s: %d rows past retention, %d tombstones past grace",
                        pruned.dataset,
                        pruned.expired,
                        pruned.tombstones,
                    )
            # Any leader may: the removal's batches lock, and a record goes once.
            await self._store.finish_removals()
        except WbSyncError as exc:  # the database hiccuped: the next pass tries again
            log.warning("retention pass failed: %s", exc)
        self.passes += 1

    async def aclose(self) -> None:
        """Stop a pass in progress (its committed batches stay; the next leader goes on); no
        pass starts after."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
