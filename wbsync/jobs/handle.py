"""What a processor gets for one job: its data, a cursor store, and the way to defer."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NoReturn

import bullmq

from wbsync.errors import JobLockLostError
from wbsync.jobs import contract
from wbsync.jobs.job_data import JobDataWriter, StreamEntry
from wbsync.jobs.lag import LagSample
from wbsync.jobs.model import Deferred
from wbsync.redis.throughput import Count
from wbsync.system import clock

MoveToDelayed = Callable[[str, str, int, Mapping[str, Any]], Awaitable[None]]
ProgressFields = Callable[[], Mapping[str, Any]]


class JobHandle:
    """What a processor gets: the job's data, a cursor store, and the way to defer.

    Every write is checked against the job's lock: once this worker lost it (the job stalled and
    another worker took it over), writes raise ``JobLockLostError`` and change nothing.
    """

    def __init__(
        self,
        job: bullmq.Job,
        token: str,
        queue: str,
        *,
        writer: JobDataWriter,
        move_to_delayed: MoveToDelayed,
        wake_at: Callable[[int], None],
        cut: Callable[[], bool],
    ) -> None:
        self._job = job
        self._token = token
        self._writer = writer
        self._move_to_delayed = move_to_delayed
        self._wake_at = wake_at
        self._cut = cut
        self._progress: list[Callable[[], None]] = []
        self._carried: list[ProgressFields] = []
        self._lag: LagSample | None = None
        self.queue = queue
        self.id: str = job.id
        self.cabinet: str = contract.cabinet_of(job.data)

    @property
    def data(self) -> Mapping[str, Any]:
        """The job's data as last stored."""
        return dict(self._job.data)

    @property
    def cursor(self) -> Any:
        """The cursor saved by an earlier run of this job, or None."""
        return self._job.data.get("cursor")

    @property
    def attempts_made(self) -> int:
        """Attempts spent (deferrals do not spend any)."""
        return int(self._job.attemptsMade or 0)

    def on_progress(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` on every ``save_cursor``, before the data is written."""
        self._progress.append(callback)

    def carry(self, fields: ProgressFields) -> None:
        """Store ``fields()`` with every write of the job's data (cursor saves and deferrals)."""
        self._carried.append(fields)

    def note_lag(self, sample: LagSample) -> None:
        """Store ``sample`` (the run's start lag) with the run's next write of its data; what no
        write took is ``unsent_lag``'s, for the caller to store on its own."""
        self._lag = sample

    def unsent_lag(self) -> LagSample | None:
        """The noted lag sample no write of the data has taken (None once one has, or once this
        worker lost the job: its new owner measures the run's start)."""
        return self._lag

    async def save_cursor(
        self,
        cursor: Any,
        extra: Mapping[str, Any] | None = None,
        *,
        count: Count | None = None,
        entry: StreamEntry | None = None,
    ) -> None:
        """Store ``cursor`` (and ``extra`` fields) in the job's data, so a resumed or recovered
        run continues from it; ``count`` (the stored page in the throughput history) and
        ``entry`` (the page's change-stream event) are written in the same round trip, and only
        with the cursor.

        A saved cursor is progress: the ``on_progress`` callbacks run first. Once the worker
        cuts its runs short (a stop past its grace), the run ends here as cancelled, its cursor
        saved: on Python 3.11 a task's cancel can be lost inside a library (redis-py sends
        each command inside ``asyncio.wait_for``, which drops a cancel that lands as the send
        completes), and the run would go on to its end.
        """
        for callback in self._progress:
            callback()
        await self.update_data({**(extra or {}), "cursor": cursor}, count=count, entry=entry)
        if self._cut():
            raise asyncio.CancelledError()

    async def update_data(
        self,
        changes: Mapping[str, Any],
        *,
        count: Count | None = None,
        entry: StreamEntry | None = None,
    ) -> None:
        """Merge ``changes`` into the job's stored data (while this worker holds the lock); a
        noted lag sample goes with it."""
        data = self._merged(changes)
        try:
            await self._writer.save(self.id, self._token, data, count, lag=self._lag, entry=entry)
        except JobLockLostError:
            self._lag = None
            raise
        self._lag = None
        self._job.data = data

    def _merged(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        data = dict(self._job.data)
        for fields in self._carried:
            data.update(fields())
        data.update(changes)
        return data

    async def put_back(self) -> None:
        """Move the job to delayed, due now, without spending an attempt (its cursor stays)."""
        await self._move_to_delayed(self.id, self._token, math.ceil(clock.now_ms()), self.data)

    async def defer(self, wait_ms: int, *, note: Mapping[str, Any]) -> NoReturn:
        """Move the job to delayed for ``wait_ms`` without spending an attempt; never returns.

        ``note`` is merged into the job's data (e.g. the deferral count and scope), with
        ``resume_at_ms``, the time the job may run again; data and move are one lock-checked
        step (BullMQ's ``moveToDelayed`` with fields to update).
        """
        resume_at = math.ceil(clock.now_ms() + wait_ms)
        data = self._merged({**note, "resume_at_ms": resume_at})
        await self._move_to_delayed(self.id, self._token, resume_at, data)
        self._job.data = data
        self._wake_at(resume_at)
        raise Deferred()


Processor = Callable[[JobHandle], Awaitable[Any]]
