"""``reschedule``: how many Redis commands one deferral and one try_acquire cost (exact counts).

Runs on a private embedded Redis (``INFO commandstats`` and ``MONITOR`` are server-wide). Each
measured operation runs inside a window that nothing else touches: the worker runs one job at a
time, so while its processor runs it fetches nothing, and its lock renewal and stalled-job check
are minutes away. Each window is bracketed by an ``ECHO`` marker on the control connection.

* A window's "commands" are the top-level commands other clients sent in it, read from
  ``MONITOR`` (which tags commands run inside Lua as ``lua``): the round trips.
* Its "executions" are the ``INFO commandstats`` delta (minus the markers and INFO itself):
  every command Redis executed, including those inside the Lua scripts.

The deferral window spans ``RescheduleService.run`` catching a ``RateLimitDeferred`` (raised by
the processor, so no limiter call is in it) through the queue wake-up at the due time: the job
data update (``updateData``), ``moveToDelayed``, and the wake-up marker (``ZADD``).
The full cycle of a job that defers once (add, fetch, defer, wake, fetch, complete) is counted
too, from the whole run's commandstats and MONITOR.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from wbsync.errors import RateLimitDeferred
from wbsync.jobs.handle import JobHandle
from wbsync.jobs.queue import SyncQueue
from wbsync.jobs.reschedule import RescheduleService
from wbsync.jobs.worker import SyncWorker
from wbsync.ratelimit import BucketScope, Limit, LimiterOptions, RateLimiter
from wbsync_bench.common import table, unique_prefix

_SCOPE = BucketScope("bench", "finance", Limit(period_s=60, limit=1, burst=1))
_WAIT_MS = 30  # the deferral's window: short, so the wake-up lands inside the measured window
_IGNORED = {"echo", "info", "monitor"}
_WINDOW_TIMEOUT_S = 30.0


@dataclass
class Params:
    """What to run."""

    n: int = 100


class _Windows:
    """Counts what Redis did between ECHO markers: MONITOR lines and commandstats deltas."""

    def __init__(self, control: Redis, monitor_url: str) -> None:
        self._control = control
        self._monitor_client = Redis.from_url(monitor_url)
        self._task: asyncio.Task[None] | None = None
        self._open: list[str] = []  # windows nest: the full cycle holds the deferrals
        self._before: dict[str, int] = {}
        self.commands: dict[str, Counter[str]] = {}
        self.executions: dict[str, Counter[str]] = {}
        self._seen_end: dict[str, asyncio.Event] = {}

    async def start(self) -> None:
        ready = asyncio.Event()
        self._task = asyncio.create_task(self._watch(ready))
        waiting = asyncio.ensure_future(ready.wait())
        await asyncio.wait({waiting, self._task}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if not ready.is_set():
            await self._task  # it ended before watching: raises why

    async def _watch(self, ready: asyncio.Event) -> None:
        async with self._monitor_client.monitor() as monitor:
            ready.set()
            while True:
                info = await monitor.next_command()
                words = str(info["command"]).split()
                if not words:
                    continue
                cmd = words[0].lower()
                if cmd == "echo" and len(words) > 1 and words[1].startswith("wbsync-bench:"):
                    kind, label = words[1].split(":", 2)[1:]
                    if kind == "start":
                        self._open.append(label)
                    else:
                        self._open.pop()
                        self._seen_end.setdefault(label, asyncio.Event()).set()
                    continue
                if self._open and info["client_type"] != "lua" and cmd not in _IGNORED:
                    self.commands.setdefault(self._open[-1], Counter())[cmd] += 1

    async def _stats(self) -> dict[str, int]:
        stats = await self._control.info("commandstats")
        return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}

    async def measure(self, label: str, fn: Callable[[], Awaitable[Any]]) -> None:
        """Run ``fn`` in a window counted under ``label``."""
        before = await self._stats()
        await self._control.echo(f"wbsync-bench:start:{label}")
        try:
            await fn()
        finally:
            await self._control.echo(f"wbsync-bench:end:{label}")
            after = await self._stats()
            delta = Counter({k: v - before.get(k, 0) for k, v in after.items()})
            for k in _IGNORED:
                delta.pop(k, None)
            self.executions.setdefault(label, Counter()).update(+delta)
            seen = self._seen_end.setdefault(label, asyncio.Event())
            await asyncio.wait_for(seen.wait(), _WINDOW_TIMEOUT_S)
            seen.clear()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._monitor_client.aclose()


async def _deferrals(url: str, prefix: str, windows: _Windows, n: int) -> None:
    service = RescheduleService(threshold_ms=0)
    done = asyncio.Event()
    finished = 0
    started = 0

    async def raise_deferred(job: JobHandle) -> None:
        raise RateLimitDeferred(_WAIT_MS, _SCOPE)

    async def process(job: JobHandle) -> None:
        nonlocal finished, started
        if job.data.get("deferrals"):
            finished += 1
            if finished == n + 1:
                done.set()
            return
        started += 1

        async def defer_and_wake() -> None:
            try:
                await service.run(job, raise_deferred)
            finally:
                # The wake-up marker is part of the deferral: keep the window open until it ran.
                await asyncio.sleep((_WAIT_MS + 20) / 1000.0)

        # The first job loads BullMQ's scripts (NOSCRIPT, SCRIPT LOAD): not a deferral's cost.
        await windows.measure("deferral" if started > 1 else "warmup", defer_and_wake)

    queue = SyncQueue("bench-reschedule", redis_url=url, prefix=prefix)
    worker = SyncWorker(
        "bench-reschedule", process, redis_url=url, prefix=prefix, lock_duration_ms=600_000
    )
    try:
        for i in range(n + 1):  # all added before the worker starts: nothing else runs in a window
            await queue.enqueue(f"cab-{i}")
        await worker.start()
        await asyncio.wait_for(done.wait(), timeout=60 + n * 0.2)
    finally:
        await worker.close()
        await queue.close()


async def _try_acquires(control: Redis, prefix: str, windows: _Windows, n: int) -> None:
    limiter = RateLimiter(control, LimiterOptions(prefix=prefix))
    await windows.measure("warmup", lambda: limiter.peek(_SCOPE))  # loads the script
    for i in range(n):
        scope = BucketScope(f"cab-{i}", "finance", _SCOPE.limit)

        async def take(scope: BucketScope = scope) -> None:
            await limiter.try_acquire(scope)

        await windows.measure("try_acquire_admitted", take)  # a fresh bucket: a token is there
        await windows.measure("try_acquire_refused", take)  # burst 1: now it is empty


def _per(counter: Counter[str] | None, n: int) -> dict[str, float]:
    return {k: v / n for k, v in sorted((counter or Counter()).items())}


async def run(url: str, params: Params | None = None) -> dict[str, Any]:
    """Count commands; ``url`` must be a private server (see the module docstring)."""
    params = params or Params()
    prefix = unique_prefix("reschedule")
    control = Redis.from_url(url, decode_responses=True)
    windows = _Windows(control, url)
    await windows.start()
    try:
        await windows.measure("full_cycle", lambda: _deferrals(url, prefix, windows, params.n))
        await _try_acquires(control, prefix, windows, params.n)
    finally:
        await windows.close()
        await control.aclose()
    return _result(windows, params.n)


def _result(windows: _Windows, n: int) -> dict[str, Any]:
    def total(counts: dict[str, Counter[str]], label: str) -> float:
        return sum(counts.get(label, Counter()).values()) / n

    per_try = (
        total(windows.commands, "try_acquire_admitted")
        + total(windows.commands, "try_acquire_refused")
    ) / 2
    detail: dict[str, dict[str, Any]] = {
        label: {
            "commands": total(windows.commands, label),
            "executions": total(windows.executions, label),
            "commands_by_name": _per(windows.commands.get(label), n),
            "executions_by_name": _per(windows.executions.get(label), n),
        }
        for label in ("deferral", "try_acquire_admitted", "try_acquire_refused")
    }
    # The full cycle's window contains the deferral windows: report it per job, all included.
    detail["full_cycle_per_job"] = {
        "commands": total(windows.commands, "full_cycle") + detail["deferral"]["commands"],
        "executions": total(windows.executions, "full_cycle"),
    }
    return {
        "redis_commands_per_deferral": detail["deferral"]["commands"],
        "redis_commands_per_try_acquire": per_try,
        "n": n,
        "detail": detail,
    }


def tables(result: dict[str, Any]) -> list[Any]:
    """The counts."""
    rows = [
        [
            label,
            d["commands"],
            d["executions"],
            ", ".join(f"{k} {v:g}" for k, v in d.get("commands_by_name", {}).items()),
        ]
        for label, d in result["detail"].items()
    ]
    return [
        table(
            f"reschedule: Redis commands per operation (n={result['n']})",
            ["operation", "commands (round trips)", "executions (incl. Lua)", "commands"],
            rows,
        )
    ]
