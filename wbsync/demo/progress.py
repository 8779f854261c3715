"""The demo's live progress: per queue, jobs done / deferred / live, rows stored, upstream 429s.

"Rows stored" is counted in the database, as the summary counts it, so the last live table and
the summary agree: the rows a sync writes are not its stored rows (an upsert of a row already
stored writes it again: the autobidder rewrites the bids it changed).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.table import Table

from wbsync.jobs.model import Outcome
from wbsync.jobs.queue import SyncQueue
from wbsync.observability.metrics import upstream_rate_limited
from wbsync.store import Store
from wbsync.syncs import SYNCS

_REFRESH_S = 0.25


@dataclass
class Tally:
    """What the demo saw of its jobs (fed by the workers' outcome events)."""

    cabinets: int
    queues: tuple[str, ...]
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def record(self, outcome: Outcome) -> None:
        """Count one job outcome; set ``done`` once every job of every queue completed."""
        self.outcomes[(outcome.queue, outcome.outcome)] += 1
        if all(self.outcomes[(q, "completed")] >= self.cabinets for q in self.queues):
            self.done.set()

    def count(self, queue: str, outcome: str) -> int:
        """How many runs of ``queue`` ended with ``outcome``."""
        return self.outcomes[(queue, outcome)]

    def unfinished(self) -> str:
        """The queues whose jobs did not all complete, each with what its runs came to, e.g.
        ``rnp-finance-sync 0/1 completed (deferred 3, failed 1)``."""
        parts = []
        for queue in self.queues:
            done = self.count(queue, "completed")
            if done >= self.cabinets:
                continue
            ends = sorted((o, n) for (q, o), n in self.outcomes.items() if q == queue)
            seen = ", ".join(f"{o} {n}" for o, n in ends if o != "completed") or "no run ended"
            parts.append(f"{queue} {done}/{self.cabinets} completed ({seen})")
        return "; ".join(parts) or "none"


async def stored_rows(store: Store, queue: str) -> int:
    """The rows of ``queue``'s datasets in the store (the demo's database has only its cabinets)."""
    return sum([await store.count(dataset) for dataset in SYNCS[queue].datasets])


class Progress:
    """Shows a table that refreshes itself while the demo runs, on ``console`` if it is a terminal
    (none: no table)."""

    def __init__(
        self,
        state: Tally,
        queues: Mapping[str, SyncQueue],
        store: Store,
        *,
        console: Console | None,
    ) -> None:
        self._state = state
        self._queues = queues
        self._store = store
        self._console = console
        self._show = console is not None and console.is_terminal
        self._live: Live | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def __aenter__(self) -> Progress:
        if self._show:
            self._live = Live(Table(), console=self._console, transient=False)
            self._live.start()
            self._task = asyncio.create_task(self._refresh())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            # Asked, not cancelled: on Python 3.11 a cancel that lands as a Redis command's
            # send completes is lost inside redis-py (``asyncio.wait_for``), and the loop
            # would refresh forever. A refresh under way ends first (Redis and the database
            # bound it).
            self._stop.set()
            await self._task
        if self._live is not None:
            self._live.update(await self._table())
            self._live.stop()

    async def _refresh(self) -> None:
        assert self._live is not None
        while not self._stop.is_set():
            self._live.update(await self._table())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), _REFRESH_S)

    async def _table(self) -> Table:
        table = Table(title="wbsync demo", title_justify="left")
        for column in ("queue", "done", "deferred", "live", "rows stored", "upstream 429"):
            table.add_column(column, justify="left" if column == "queue" else "right")
        for name, queue in self._queues.items():
            counts = await queue.counts()
            live = counts["active"] + counts["waiting"] + counts["delayed"] + counts["prioritized"]
            table.add_row(
                name,
                f"{self._state.count(name, 'completed')}/{self._state.cabinets}",
                str(self._state.count(name, "deferred")),
                str(live),
                str(await stored_rows(self._store, name)),
                str(int(upstream_rate_limited(name))),
            )
        return table
