"""The demo's live progress: per queue, jobs done / deferred / live, rows stored, upstream 429s."""

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

from wbsync.jobs.queue import Outcome, SyncQueue
from wbsync.metrics import SYNC_ROWS, queue_value, upstream_rate_limited

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


class Progress:
    """Shows a table that refreshes itself while the demo runs (on stderr, only on a terminal)."""

    def __init__(self, state: Tally, queues: Mapping[str, SyncQueue], *, show: bool) -> None:
        self._state = state
        self._queues = queues
        self._console = Console(stderr=True)
        self._show = show and self._console.is_terminal
        self._live: Live | None = None
        self._task: asyncio.Task[None] | None = None

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
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._live is not None:
            self._live.update(await self._table())
            self._live.stop()

    async def _refresh(self) -> None:
        assert self._live is not None
        while True:
            self._live.update(await self._table())
            await asyncio.sleep(_REFRESH_S)

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
                str(int(queue_value(SYNC_ROWS, name))),
                str(int(upstream_rate_limited(name))),
            )
        return table
