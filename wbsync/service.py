"""``wbsync run``: a worker for every sync queue plus the fan-out, until SIGINT or SIGTERM.

On a signal the fan-out stops, then each worker stops taking jobs and waits for its running
ones to finish or defer (a deferred job waits in Redis; nothing is lost).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from wbsync.config import Settings
from wbsync.errors import ConfigError
from wbsync.jobs.fanout import FanOut
from wbsync.jobs.workers import build_workers
from wbsync.runtime import Runtime, open_runtime
from wbsync.syncs import SYNCS

log = logging.getLogger(__name__)

Extra = Callable[[Runtime, asyncio.Event], Coroutine[Any, Any, None]]


def fanout_intervals(settings: Settings) -> dict[str, float]:
    """Each queue's fan-out interval in seconds: the sync's default or the setting, scaled."""
    unknown = set(settings.fanout_intervals_s) - set(SYNCS)
    if unknown:
        raise ConfigError(
            f"WBSYNC_FANOUT_INTERVALS_S names unknown queues {sorted(unknown)}; "
            f"queues: {', '.join(SYNCS)}"
        )
    return {
        name: settings.fanout_intervals_s.get(name, sync.interval_s) * settings.time_scale
        for name, sync in SYNCS.items()
    }


async def active_cabinet_ids(runtime: Runtime) -> list[str]:
    """Ids of the active cabinets, as the job layer names cabinets."""
    return [str(c.id) for c in await runtime.store.cabinets.list(active_only=True)]


async def run_service(
    settings: Settings, *, queues: Sequence[str] | None = None, extra: Extra | None = None
) -> None:
    """Run workers and fan-out of ``queues`` (all by default) and ``extra`` (e.g. the HTTP API)
    until SIGINT or SIGTERM."""
    names = list(queues or SYNCS)
    unknown = set(names) - set(SYNCS)
    if unknown:
        raise ConfigError(f"unknown queues {sorted(unknown)}; queues: {', '.join(SYNCS)}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with open_runtime(settings) as runtime:
        workers = build_workers(runtime, names)
        for worker in workers:
            await worker.start()
        intervals = fanout_intervals(settings)
        fanout = FanOut(
            {name: runtime.queue(name) for name in names},
            lambda: active_cabinet_ids(runtime),
            {name: intervals[name] for name in names},
            failed_retry_s=settings.failed_retry_s * settings.time_scale,
        )
        tasks = [asyncio.create_task(fanout.run(stop), name="fan-out")]
        if extra is not None:
            tasks.append(asyncio.create_task(extra(runtime, stop), name="extra"))
        log.info("running %d queues; SIGINT or SIGTERM stops", len(workers))
        await stop.wait()
        log.info("stopping: running jobs finish or defer")
        await asyncio.gather(*tasks, return_exceptions=True)
        grace = settings.shutdown_grace_s
        await asyncio.gather(*(worker.close(grace_s=grace) for worker in workers))
        log.info("stopped")
