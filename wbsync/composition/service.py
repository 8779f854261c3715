"""``wbsync run``: a worker for every sync queue plus the fan-out, until SIGINT or SIGTERM.

Any number of these may run against one Redis (or cluster) and database: the queues share the
jobs, and for each queue one process at a time leads the fan-out (``wbsync.jobs.leader``).

On the first signal every worker stops taking jobs at once, the fan-out pass in progress is
abandoned, and running jobs get ``WBSYNC_SHUTDOWN_GRACE_S`` to finish or defer; then (or at a
second signal) they are cancelled and put back as delayed jobs that resume from their cursors,
with no attempt spent. Nothing is left active.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from wbsync.cabinets.pruning import Pruner
from wbsync.cabinets.suspending import SuspendedFilter
from wbsync.composition.workers import build_workers, queue_option
from wbsync.config import Settings
from wbsync.errors import ConfigError, TokenError, WbSyncError
from wbsync.jobs.fanout import FanOut
from wbsync.jobs.leader import FanOutLeases
from wbsync.jobs.worker import SyncWorker
from wbsync.observability.health import monitor
from wbsync.shared.runtime import Runtime, open_runtime
from wbsync.store import Cabinet
from wbsync.syncs import SYNCS, unserved_queues
from wbsync.system import heap
from wbsync.system.supervise import supervise
from wbsync.wb.tokens import parse_token, token_expiry

log = logging.getLogger(__name__)

Extra = Callable[[Runtime, asyncio.Event], Coroutine[Any, Any, None]]


def fanout_intervals(settings: Settings) -> dict[str, float]:
    """Each queue's fan-out interval in seconds: the sync's default or the setting, scaled."""
    return {
        name: queue_option(settings, name, "fanout_interval_s") * settings.time_scale
        for name in SYNCS
    }


async def watch_health(runtime: Runtime, stop: asyncio.Event) -> None:
    """Probe Redis and the database until ``stop`` (``wbsync.observability.health``), supervised."""
    probes = runtime.probes()
    await supervise("the dependency probes", lambda: monitor(runtime.health, probes, stop), stop)


class TokenGaps:
    """Which queues each active cabinet's token cannot serve, or are suspended (what WB refused
    for good, ``wbsync.cabinets.suspending``), for the fan-out to skip.

    Tokens are decrypted and checked once per stored token (the cache is keyed by the stored
    ciphertext, which changes when a token is replaced), not on every fan-out pass; a token
    stored before expiries were kept gets its expiry stored then. Every suspension is read in
    one query per read of the active cabinets. A token that cannot be read skips nothing; an
    expired one is suspended.
    """

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._gaps: dict[str, tuple[str, frozenset[str]]] = {}
        self._suspended = SuspendedFilter(runtime.store)

    async def active_ids(self) -> list[str]:
        """Ids of the active cabinets, learning their tokens' gaps and the suspensions."""
        store = self._runtime.store
        cabinets = await store.cabinets.list(active_only=True)
        known = {}
        expiries = {}
        for cabinet in cabinets:
            key = str(cabinet.id)
            cached = self._gaps.get(key)
            if cached is None or cached[0] != cabinet.sealed_token:
                cached = (cabinet.sealed_token, _gaps_of(cabinet))
                expires = None if cabinet.token_expires_at else token_expiry(cabinet.token())
                if expires is not None:  # a row stored before expiries were kept
                    expiries[cabinet.id] = expires
            known[key] = cached
        self._gaps = known
        await store.cabinets.set_token_expiries(expiries)
        await self._suspended.refresh(cabinets)
        return list(known)

    def serves(self, queue: str, cabinet: str) -> bool:
        """False when the cabinet's token cannot serve ``queue`` or it is suspended there."""
        cached = self._gaps.get(cabinet)
        if cached is not None and queue in cached[1]:
            return False
        return not self._suspended.blocks(queue, cabinet)


def _gaps_of(cabinet: Cabinet) -> frozenset[str]:
    try:
        return frozenset(unserved_queues(parse_token(cabinet.token(), cabinet=cabinet.name)))
    except TokenError:
        return frozenset()


async def active_cabinet_ids(runtime: Runtime) -> list[str]:
    """Ids of the active cabinets, as the job layer names cabinets."""
    return [str(c.id) for c in await runtime.store.cabinets.list(active_only=True)]


async def run_service(
    settings: Settings,
    *,
    queues: Sequence[str] | None = None,
    extra: Extra | None = None,
    embedded_redis: bool = False,
) -> None:
    """Run workers and fan-out of ``queues`` (all by default) and ``extra`` (e.g. the HTTP API)
    until SIGINT or SIGTERM; on a private Redis only with ``embedded_redis`` (see
    ``open_runtime``)."""
    names = list(queues or SYNCS)
    unknown = set(names) - set(SYNCS)
    if unknown:
        raise ConfigError(f"unknown queues {sorted(unknown)}; queues: {', '.join(SYNCS)}")
    stop = asyncio.Event()
    workers: list[SyncWorker] = []

    def on_signal() -> None:
        if stop.is_set():
            log.warning("second stop signal: cancelling the running jobs now")
            for worker in workers:
                worker.cut_short()
        stop.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    try:
        async with open_runtime(settings, embedded_redis=embedded_redis) as runtime:
            workers.extend(build_workers(runtime, names))
            await _serve(runtime, names, workers, stop, extra)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _serve(
    runtime: Runtime,
    names: Sequence[str],
    workers: Sequence[SyncWorker],
    stop: asyncio.Event,
    extra: Extra | None,
) -> None:
    for worker in workers:
        await worker.start()
    intervals = fanout_intervals(runtime.settings)
    gaps = TokenGaps(runtime)
    pruner = Pruner(
        runtime.store,
        interval_s=runtime.settings.prune_interval_s * runtime.settings.time_scale,
        datasets={name: SYNCS[name].stores for name in names},
    )
    fanout = FanOut(
        {name: runtime.queue(name) for name in names},
        gaps.active_ids,
        {name: intervals[name] for name in names},
        failed_retry_s=runtime.settings.failed_retry_s * runtime.settings.time_scale,
        serves=gaps.serves,
        on_lead=pruner.on_lead,
        fleet=[name for name in names if SYNCS[name].fleet],
    )
    settings = runtime.settings
    leases = FanOutLeases(
        runtime.redis, prefix=settings.redis_prefix, lease_ms=settings.leader_lease_ms
    )
    fanning = asyncio.create_task(
        supervise("the fan-out", lambda: fanout.run(stop, leases), stop), name="fan-out"
    )
    extras = [asyncio.create_task(watch_health(runtime, stop), name="health")]
    if extra is not None:
        extras.append(asyncio.create_task(extra(runtime, stop), name="extra"))
    heap.settle()  # started: what it holds now lives as long as the process
    log.info("running %d queues; SIGINT or SIGTERM stops", len(workers))
    await stop.wait()
    grace = runtime.settings.shutdown_grace_s
    log.info("stopping: no new jobs; running ones get %.0f s to finish or defer", grace)
    fanning.cancel()  # a pass in progress is abandoned: enqueueing is idempotent
    results = await asyncio.gather(
        fanning,
        *extras,
        *(worker.close(grace_s=grace) for worker in workers),
        pruner.aclose(),
        return_exceptions=True,
    )
    log.info("stopped")
    failures = [r for r in results if isinstance(r, WbSyncError)]
    if failures:  # e.g. the API could not listen: the stop was not asked for, exit non-zero
        raise failures[0]
