"""The page benchmark's wbsync side: one measurement of a sync's runs through the worker.

A per-cabinet sync's measurement enqueues its job for every given cabinet at once and waits
until each cabinet's run is recorded in ``sync_runs``. A fleet-wide sync (``Sync.fleet``) has
one job for the whole fleet, whichever cabinet's token carries it (``wbsync.composition.fleet``),
so its measurement runs as many fleet jobs as cabinets were given, one after the other: the same
number of runs, each run's pages once, so its pages per run and CPU per page compare with the
per-cabinet syncs' and the bare pipeline's (which replays the recorded run once per cabinet
given).

A fleet job is enqueued as soon as BullMQ ended the one before (its ``moveToFinished``, seen in
the measurement's ``MONITOR`` log: no command of the benchmark's own), not once the run is
recorded: the run log writes behind (up to ``RUN_LOG_FLUSH_S``), and waiting for it would leave
the worker idle between the runs, its idle CPU and blocking waits counted as the runs'. The
measurement ends when the last run is recorded, as a per-cabinet one does. Its pages are the
ones the worker counted in the throughput history (``Throughput``, per queue and minute, read
before and after the measurement): a run record is one per (carrier, sync), so two runs of one
carrier within a flush leave one record.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from wbsync.errors import ConfigError
from wbsync.jobs.contract import FLEET_JOB
from wbsync.shared.runtime import Runtime
from wbsync.store import Database
from wbsync.store.cabinets import Cabinet
from wbsync.store.schema import sync_runs
from wbsync_bench.common import syncs
from wbsync_bench.monitor import CommandLog, monitored
from wbsync_bench.processes import RedisUnderTest, WorkerProcesses, threads_cpu_s

_POLL_S = 0.01
_RUN_TIMEOUT_S = 120.0
# A report sync's run is a dozen jobs (one a window and deferral): its runs' wait grows with them.
_RUN_TIMEOUT_S_PER_JOB = 0.5
_DIED_CHECK_S = 0.5  # how often a wait looks whether the worker died
_EXCLUDED_COMMANDS = frozenset({"info"})  # the benchmark's own reads of the counters


async def _ended(
    database: Database, sync: str, ids: Sequence[int] | None, since: datetime
) -> list[Any]:
    """The runs of ``sync`` that ended since ``since``: ``ids``' (any cabinet's for None), each
    as (success_at, success_pages, failure_at)."""
    query = (
        select(sync_runs.c.success_at, sync_runs.c.success_pages, sync_runs.c.failure_at)
        .where(sync_runs.c.sync == sync)
        .where((sync_runs.c.success_at >= since) | (sync_runs.c.failure_at >= since))
    )
    if ids is not None:
        query = query.where(sync_runs.c.cabinet_id.in_(list(ids)))
    async with database.connection() as conn:
        return list(await conn.execute(query))


async def _runs(
    runtime: Runtime, workers: WorkerProcesses, name: str, ids: Sequence[int]
) -> list[Any]:
    """Enqueue the jobs of ``name`` for ``ids`` and wait until their runs ended: their
    records."""
    since = datetime.now(UTC)
    jobs = [str(i) for i in ids]
    await runtime.queue(name).enqueue_many(jobs)
    allowed_s = _RUN_TIMEOUT_S + _RUN_TIMEOUT_S_PER_JOB * len(jobs)
    deadline = time.monotonic() + allowed_s
    while True:
        done = await _ended(runtime.database, name, ids, since)
        if len(done) >= len(jobs):
            return [(*run, since) for run in done]
        died = workers.died()
        if died or time.monotonic() > deadline:
            raise ConfigError(
                died
                or f"{name}: {len(done)} of {len(jobs)} runs ended within {allowed_s:.0f} s; "
                "measure fewer --cabinets, or on a less loaded machine"
            )
        await asyncio.sleep(_POLL_S)


async def _fleet_runs(
    runtime: Runtime, workers: WorkerProcesses, log: CommandLog, name: str, jobs: int
) -> int:
    """Run ``jobs`` fleet jobs of ``name`` one after the other, each enqueued once BullMQ ended
    the one before, then wait until the last run is recorded; how many runs failed."""
    queue = runtime.queue(name)
    since = last = datetime.now(UTC)
    added = 0
    while added < jobs:
        ended, last = log.jobs_ended, datetime.now(UTC)
        # Not added: a job of the queue was still live; it is waited for, and the next added.
        [result] = await queue.enqueue_many([FLEET_JOB])
        added += result.added
        await _until(workers, log.job_ended(ended), f"{name}: job {added} of {jobs} did not end")

    async def recorded() -> None:  # the database: polled, as the per-cabinet runs are
        while True:
            if await _ended(runtime.database, name, None, last):
                return
            await asyncio.sleep(_POLL_S)

    await _until(workers, recorded(), f"{name}: the last run was not recorded")
    runs = await _ended(runtime.database, name, None, since)
    return sum(1 for _, _, failed_at in runs if failed_at is not None and failed_at >= since)


async def _until(workers: WorkerProcesses, step: Coroutine[Any, Any, None], late: str) -> None:
    """Await ``step``, ``_RUN_TIMEOUT_S`` at most; raises when the worker died or it is late."""
    task = asyncio.ensure_future(step)
    deadline = time.monotonic() + _RUN_TIMEOUT_S
    try:
        while not (await asyncio.wait({task}, timeout=_DIED_CHECK_S))[0]:
            died = workers.died()
            if died or time.monotonic() > deadline:
                raise ConfigError(died or late)
        task.result()
    finally:
        task.cancel()


async def _pages_stored(runtime: Runtime, name: str) -> dict[int, int]:
    """The pages ``name`` stored per minute of the last hour, as the worker counts them."""
    history = await runtime.throughput.history([name])
    return dict(zip(history.minutes, history.queues[name]["pages"], strict=True))


async def measure_wbsync(
    runtime: Runtime,
    workers: WorkerProcesses,
    redis: RedisUnderTest,
    name: str,
    cabinets: list[Cabinet],
) -> dict[str, Any]:
    """One fan-out of ``name`` over ``cabinets`` through the worker (a fleet-wide sync: as many
    fleet jobs, one after the other): CPU, pages and commands."""
    ids = [c.id for c in cabinets]
    pid = workers.procs[0].pid
    fleet = syncs()[name].fleet
    stored = await _pages_stored(runtime, name) if fleet else {}
    async with monitored(redis.url) as log:
        before = await redis.totals()
        cpu = threads_cpu_s(pid)
        if fleet:
            failed = await _fleet_runs(runtime, workers, log, name, len(ids))
        else:
            done = await _runs(runtime, workers, name, ids)
        cpu = threads_cpu_s(pid) - cpu
        after = await redis.totals()
    if fleet:
        now = await _pages_stored(runtime, name)
        pages = sum(n - stored.get(minute, 0) for minute, n in now.items())
    else:
        ok = [p for at, p, _, since in done if at is not None and at >= since]
        pages, failed = sum(int(p or 0) for p in ok), len(done) - len(ok)
    by_name = {
        cmd: calls - before["by_name"].get(cmd, 0)
        for cmd, calls in after["by_name"].items()
        if cmd not in _EXCLUDED_COMMANDS and calls > before["by_name"].get(cmd, 0)
    }
    origins = log.origins()
    return {
        "cpu_s": cpu,
        "pages": pages,
        "jobs": len(ids),
        "failed": failed,
        "commands": by_name,
        "monitored": {
            "total": origins.total,
            "bullmq": origins.bullmq,
            "wbsync": origins.wbsync,
            "client_calls": origins.client_calls,
        },
    }
