"""The page benchmark's wbsync side: one measurement of a sync's runs through the worker.

A per-cabinet sync's measurement enqueues its job for every given cabinet at once and waits
until each cabinet's run is recorded in ``sync_runs``. A fleet-wide sync (``Sync.fleet``) has
one job for the whole fleet, whichever cabinet's token carries it (``wbsync.composition.fleet``),
so its measurement runs as many fleet jobs as cabinets were given, one after the other (a job
is enqueued when the one before is recorded): the same number of runs, each run's pages once,
so its pages per run and CPU per page compare with the per-cabinet syncs' and the bare
pipeline's (which replays the recorded run once per cabinet given).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
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
from wbsync_bench.monitor import monitored
from wbsync_bench.processes import RedisUnderTest, WorkerProcesses, threads_cpu_s

_POLL_S = 0.01
_RUN_TIMEOUT_S = 120.0
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
    runtime: Runtime,
    workers: WorkerProcesses,
    name: str,
    jobs: list[str],
    ids: Sequence[int] | None,
) -> list[Any]:
    """Enqueue ``jobs`` of ``name`` and wait until that many runs ended: their records."""
    since = datetime.now(UTC)
    await runtime.queue(name).enqueue_many(jobs)
    deadline = time.monotonic() + _RUN_TIMEOUT_S
    while True:
        done = await _ended(runtime.database, name, ids, since)
        if len(done) >= len(jobs):
            return [(*run, since) for run in done]
        died = workers.died()
        if died or time.monotonic() > deadline:
            raise ConfigError(died or f"{name}: {len(done)} of {len(jobs)} runs ended in time")
        await asyncio.sleep(_POLL_S)


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
    async with monitored(redis.url) as log:
        before = await redis.totals()
        cpu = threads_cpu_s(pid)
        if syncs()[name].fleet:
            done = []
            for _ in ids:
                done += await _runs(runtime, workers, name, [FLEET_JOB], None)
        else:
            done = await _runs(runtime, workers, name, [str(i) for i in ids], ids)
        cpu = threads_cpu_s(pid) - cpu
        after = await redis.totals()
    succeeded = [(at, pages) for at, pages, _, since in done if at is not None and at >= since]
    by_name = {
        cmd: calls - before["by_name"].get(cmd, 0)
        for cmd, calls in after["by_name"].items()
        if cmd not in _EXCLUDED_COMMANDS and calls > before["by_name"].get(cmd, 0)
    }
    origins = log.origins()
    return {
        "cpu_s": cpu,
        "pages": sum(int(pages or 0) for _, pages in succeeded),
        "jobs": len(ids),
        "failed": len(done) - len(succeeded),
        "commands": by_name,
        "monitored": {
            "total": origins.total,
            "bullmq": origins.bullmq,
            "wbsync": origins.wbsync,
            "client_calls": origins.client_calls,
        },
    }
