"""``capacity``: a steady state of N cabinets, every sync on its own interval, for several N.

For each N: a private ``redis-server``, a fresh database (a SQLite file, or a new database on
the PostgreSQL server named by ``--postgres``) holding N cabinets, and ``processes`` real
``wbsync run`` processes whose fan-out leader enqueues every queue on its default interval,
compressed by ``time_scale`` (at 0.1 the booking monitor's minute is 6 s: N cabinets at 0.1 ask
for the pages of 10 N at 1.0). The WB emulator (a child process on loopback, counters reset per
N) answers after ``latency_ms`` (0 by default: the lag measured is the stack's work, not WB's
reply time, which the slots cover).

The first fan-out enqueues every queue at once (a new deployment's burst, no steady state has
it). While it drains, the leader goes on enqueueing each (cabinet, queue) at its own offset in
every interval (``wbsync.jobs.fanout.offset_ms``, the function the leader uses), and near the
capacity those runs queue up behind the burst: a backlog that takes a while to work off after
the first pass itself has drained. The measured window starts once both have: every (cabinet,
queue) has completed once, and no queue has more jobs waiting than its slots (the jobs it runs
at once over the processes) at ``SETTLE_POLLS`` polls in a row, or ``settle_limit_s`` after the
first pass at the latest (then the window measures the backlog too, and the run says it was not
settled). The window lasts ``window_s`` and sees the spread, not the burst. The freshness lag of
a due time in the window is the completion that served it (``sync_runs.success_at``: the pair's
first completion after it that served no earlier one) minus the due time: it counts waiting for
the leader's step, in the queue and for a slot (the start lag, which the workers record in
Redis, reported apart) and the run itself, WB's windows between the pages of a multi-page sync
included (WB's, not wbsync's: the per-queue start lag tells the two apart). A due time still
unserved ``drain_s`` after the window counts as missed, with the lag it had then (a lower
bound). ``capacity_lag`` holds the accounting.

Reported per N: the lag (p50, p95, max) and the start lag (p50, p95) in seconds per queue and,
pooled over the queues, as a share of each queue's interval; pages per second in the window;
the CPU of the workers (their processes), of Redis (``INFO cpu``) and of the database
(PostgreSQL's backends serving the run's database, looked for at every poll and read from
``/proc``, the benchmark's own connections left out; with SQLite the database works inside the
workers), and the emulator's apart, each in cores (CPU seconds per second); how long the worker
threads waited on the kernel's run queue for a core (per second, and per CPU second they ran:
on a machine loaded by others a run's CPU work takes that much longer in wall time); the
database connections the pools opened during the window; the 1-minute load average. The
capacity is the largest N whose pooled lag p95 stays within ``LAG_TARGET`` (10 %) of the
interval. An N whose first pass does not drain within ``warmup_base_s`` plus
``warmup_s_per_cabinet`` per cabinet, or whose lag p95 passes ``STOP_SHARE`` of the interval,
is the last one run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wbsync.composition.service import fanout_intervals
from wbsync.composition.workers import queue_option
from wbsync.config import Settings
from wbsync.emulator import Emulator, EmulatorConfig, ReplyLatency
from wbsync.errors import ConfigError
from wbsync.shared.runtime import Runtime
from wbsync.store.cabinets import NewCabinet
from wbsync.system.clock import wb_today
from wbsync_bench.capacity_lag import (
    Backends,
    Ledger,
    backend_pids,
    lag_figures,
    observe,
    scheduled_s,
)
from wbsync_bench.common import fresh_database, report_life, syncs, table
from wbsync_bench.processes import RedisUnderTest, WorkerProcesses, redis_under_test, seller_id
from wbsync_bench.upstream import EmulatorProcess

#: A steady state holds when the pooled lag p95 is within this share of each queue's interval.
LAG_TARGET = 0.10
#: An N whose pooled lag p95 passes this share of the interval (a whole interval late) is the
#: last run: a larger N would only be later, and the run would not fit in ``bench all``.
STOP_SHARE = 1.0
#: The first pass (every cabinet's jobs at once, some of them pulling many pages through WB's
#: windows) may take this long to drain, plus ``WARMUP_S_PER_CABINET`` per cabinet; past
#: that the stack cannot keep up with N, and larger N are not run.
WARMUP_BASE_S = 120.0
WARMUP_S_PER_CABINET = 0.5
#: The backlog left by the first pass is gone once no queue has more jobs waiting than its slots
#: at this many polls in a row (``_POLL_S`` apart): a leader's step adds a few at once.
SETTLE_POLLS = 3
#: How long after the first pass the backlog may take to drain before the window starts anyway.
SETTLE_LIMIT_S = 60.0
#: The dated report tasks' first runs start this many days back (their recent days).
REPORT_HORIZON_DAYS = 8
_POLL_S = 0.2
_LOOKBACK_S = 60.0
"""Completions are re-read this far back: a run's `success_at` is stamped before its write waits
for a connection and commits, which on a machine loaded to 15 took over 5 s (the 5 s this was
before missed completions: first passes that never drained, due times counted as missed)."""


@dataclass
class Params:
    """What to run."""

    cabinets: tuple[int, ...] = (10, 30, 60, 120, 250, 500, 1000)
    time_scale: float = 0.1
    processes: int = 2
    concurrency: int = 5
    queue_concurrency: dict[str, int] = field(default_factory=dict)
    """Per queue, replacing ``concurrency`` (``WBSYNC_QUEUE_CONCURRENCY``)."""
    latency_ms: float = 0.0
    window_s: float = 30.0
    drain_s: float = 10.0
    warmup_base_s: float = WARMUP_BASE_S
    warmup_s_per_cabinet: float = WARMUP_S_PER_CABINET
    """How long the first pass may take to drain: ``warmup_base_s`` plus this per cabinet."""
    settle_limit_s: float = SETTLE_LIMIT_S
    """How long after the first pass its backlog may take to drain before the window starts."""
    postgres: str | None = None

    def __post_init__(self) -> None:
        if min(self.cabinets, default=0) < 1 or self.processes < 1 or self.concurrency < 1:
            raise ConfigError("cabinets, processes and concurrency must be >= 1")
        if self.time_scale <= 0 or self.window_s <= 0 or self.drain_s < 0:
            raise ConfigError("time_scale and window_s must be > 0, drain_s >= 0")
        if min(self.warmup_base_s, self.warmup_s_per_cabinet, self.settle_limit_s) < 0:
            raise ConfigError("warmup_base_s, warmup_s_per_cabinet and settle_limit_s must be >= 0")

    def warmup_limit_s(self, cabinets: int) -> float:
        """How long the first pass of ``cabinets`` may take to drain."""
        return self.warmup_base_s + self.warmup_s_per_cabinet * cabinets


def past_stop(run: dict[str, Any]) -> str | None:
    """Why no larger N is run after this one: its pooled lag p95 passed ``STOP_SHARE`` of the
    interval. None while it did not (a window with no due time has no p95 and goes on)."""
    if run["lag_share_p95"] > STOP_SHARE:
        return f"its lag p95 passed {STOP_SHARE:.0%} of the interval"
    return None


class _Overloaded(Exception):
    """The stack could not work off N cabinets' first pass: no steady state to measure."""


# --- one N -------------------------------------------------------------------------------------


def _cpu(workers: WorkerProcesses) -> dict[str, float]:
    worker_s, emulator_s = workers.cpu_s()
    return {"workers": worker_s, "emulator": emulator_s}


async def _one_n(params: Params, emu: EmulatorProcess, n: int, tmp: Path) -> dict[str, Any]:
    async with redis_under_test("single") as redis:
        async with fresh_database(params.postgres, tmp, name="capacity") as database_url:
            workers = WorkerProcesses(
                emu,
                redis,
                time_scale=params.time_scale,
                concurrency=params.concurrency,
                queue_concurrency=params.queue_concurrency,
            )
            # The steady state: a dated report's history (90 days by default, 12 tasks of paid
            # storage a cabinet) is a one-time backfill, measured by the report fleet's test.
            settings = workers.settings(database_url).model_copy(
                update={"sync_report_horizon_days": REPORT_HORIZON_DAYS}
            )
            runtime = await Runtime(settings, redis_url=redis.url).start()
            try:
                model = Emulator(emu.config)
                await runtime.store.cabinets.add_many(
                    [
                        NewCabinet(f"cap-{i:06d}", model.token(seller_id(i)), seller_id(i))
                        for i in range(n)
                    ]
                )
                await emu.reset()
                intervals = {q: s for q, s in fanout_intervals(settings).items() if q in syncs()}
                workers.spawn(settings, params.processes, tmp)
                try:
                    figures = await _steady(params, workers, redis, runtime, intervals, n)
                finally:
                    workers.stop()
            finally:
                await runtime.aclose()
    return {"cabinets": n, **figures}


async def _steady(
    params: Params,
    workers: WorkerProcesses,
    redis: RedisUnderTest,
    runtime: Runtime,
    intervals: dict[str, float],
    n: int,
) -> dict[str, Any]:
    ledger = Ledger(intervals, fleet=[q for q in intervals if syncs()[q].fleet])
    database, database_url = runtime.database, runtime.settings.database_url
    since = datetime.now(UTC)
    lookback = since

    async def poll() -> None:
        nonlocal lookback
        stamp = datetime.now(UTC)
        await observe(ledger, database, runtime.redis, runtime.settings.redis_prefix, lookback)
        lookback = max(since, datetime.fromtimestamp(stamp.timestamp() - _LOOKBACK_S, UTC))
        died = workers.died()
        if died:
            raise ConfigError(died)

    limit_s = params.warmup_limit_s(n)
    deadline = time.monotonic() + limit_s
    while not ledger.first_pass_done(n):
        if time.monotonic() > deadline:
            waiting = ledger.not_yet_run(n)
            raise _Overloaded(
                f"the first pass of {n} cabinets did not drain in {limit_s:.0f} s "
                f"(runs not done, by queue: {waiting}; the workers' warnings: "
                f"{_warnings(workers) or 'none'})"
            )
        await poll()
        await asyncio.sleep(_POLL_S)
    warmup_s = (datetime.now(UTC) - since).total_seconds()
    settle_s, settled = await _settle(params, runtime, intervals, poll)
    backends = Backends()
    backends.sample(await backend_pids(database, database_url, backends.own), started=False)
    cpu0 = _cpu(workers)
    sched0 = scheduled_s([proc.pid for proc in workers.procs])
    redis0 = (await redis.totals())["cpu_s"]
    start_ms = time.time() * 1000.0
    started = time.monotonic()
    end = started + params.window_s
    while time.monotonic() < end:
        await poll()
        backends.sample(await backend_pids(database, database_url, backends.own), started=True)
        await asyncio.sleep(_POLL_S)
    window_s = time.monotonic() - started
    end_ms = start_ms + window_s * 1000.0
    backends.sample(await backend_pids(database, database_url, backends.own), started=True)
    cpu1 = _cpu(workers)
    sched1 = scheduled_s([proc.pid for proc in workers.procs])
    redis1 = (await redis.totals())["cpu_s"]
    load = os.getloadavg()[0]
    drain_end = time.monotonic() + params.drain_s
    while time.monotonic() < drain_end:
        await poll()
        await asyncio.sleep(_POLL_S)
    lags = ledger.lags(start_ms, end_ms, time.time() * 1000.0)
    warnings = _warnings(workers)
    cores = {
        "workers": (cpu1["workers"] - cpu0["workers"]) / window_s,
        "redis": (redis1 - redis0) / window_s,
        "database": backends.cpu_s() / window_s if backends.last else None,
        "emulator": (cpu1["emulator"] - cpu0["emulator"]) / window_s,
    }
    return {
        "warmup_s": warmup_s,
        "settle_s": settle_s,
        "settled": settled,
        "window_s": window_s,
        "load_average_1min": load,
        "pages_per_s": ledger.pages(start_ms, end_ms) / window_s,
        "failures": ledger.failures,
        "cpu_cores": cores,
        # Worker threads ready to run but waiting for a core, on average over the window, and
        # per second one of them ran: > 1 means a run's CPU work took over twice its CPU time.
        "workers_runqueue": (sched1[1] - sched0[1]) / window_s,
        "workers_wait_per_cpu_s": (sched1[1] - sched0[1]) / max(1e-9, sched1[0] - sched0[0]),
        "database_connections_opened": backends.opened if backends.last else None,
        "worker_warnings": warnings,
        **lag_figures(lags, ledger.start_lags(start_ms, end_ms), intervals),
    }


async def _settle(
    params: Params,
    runtime: Runtime,
    intervals: dict[str, float],
    poll: Callable[[], Awaitable[None]],
) -> tuple[float, bool]:
    """Wait, after the first pass, for the backlog it left: until no queue has more jobs
    waiting than its slots over the processes at ``SETTLE_POLLS`` polls in a row, at most
    ``settle_limit_s``. How long it took, and whether it drained."""
    slots = {q: n * params.processes for q, n in _slots(params).items()}
    queues = {q: runtime.queue(q) for q in intervals}
    started = time.monotonic()
    calm = 0
    while calm < SETTLE_POLLS and time.monotonic() - started < params.settle_limit_s:
        await poll()
        counts = {q: await queue.counts() for q, queue in queues.items()}
        waiting = {q: c["waiting"] + c["prioritized"] for q, c in counts.items()}
        calm = calm + 1 if all(waiting[q] <= slots[q] for q in queues) else 0
        if calm < SETTLE_POLLS:
            await asyncio.sleep(_POLL_S)
    return time.monotonic() - started, calm >= SETTLE_POLLS


def _warnings(workers: WorkerProcesses) -> dict[str, int]:
    """The workers' warnings and errors since they started, counted by their message's start
    (its first words, before any detail): Redis timeouts that pause a worker's fetches or the
    leader's fan-out show up here."""
    counts: dict[str, int] = {}
    for log in workers.logs:
        log.seek(0)
        for line in log.read().decode(errors="replace").splitlines():
            with contextlib.suppress(ValueError, AttributeError):
                record = json.loads(line)
                if record.get("level") in ("WARNING", "ERROR", "CRITICAL"):
                    kind = f"{record.get('logger')}: {str(record.get('msg'))[:40]}"
                    counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])[:10])


# --- the whole benchmark -------------------------------------------------------------------


async def run(params: Params | None = None) -> dict[str, Any]:
    """Every N in turn, smallest first; the largest N within the lag target."""
    params = params or Params()
    config = EmulatorConfig(
        time_scale=params.time_scale,
        anchor_date=wb_today(),
        latency=ReplyLatency(median_ms=params.latency_ms),
        report_tasks=report_life(params.time_scale),
        serve_disabled_in_docs=True,  # every sync runs, the booking monitor's too
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="wbsync-capacity-") as tmp:
        async with EmulatorProcess(config) as emu:
            for n in sorted(params.cabinets):
                try:
                    results.append(await _one_n(params, emu, n, Path(tmp)))
                except _Overloaded as exc:  # larger N would only be worse
                    overloaded = {"cabinets": n, "reason": str(exc)}
                    break
                reason = past_stop(results[-1])
                if reason is not None:
                    overloaded = {"cabinets": n, "reason": reason}
                    break
            else:
                overloaded = None
    held = [r["cabinets"] for r in results if r["lag_share_p95"] <= LAG_TARGET and r["runs"]]
    largest = max(held, default=None)
    return {
        "params": {
            **{k: v for k, v in asdict(params).items() if k != "postgres"},
            "slots": _slots(params),
            "settle_polls": SETTLE_POLLS,
            "report_horizon_days": REPORT_HORIZON_DAYS,
        },
        "database": "postgresql" if params.postgres else "sqlite",
        "lag_target": LAG_TARGET,
        "runs": results,
        "overloaded": overloaded,
        "capacity_cabinets": largest,
        "capacity_cabinets_at_real_time": largest / params.time_scale if largest else None,
    }


def tables(result: dict[str, Any]) -> list[Any]:
    """One row per N: pages/s, lag share p50/p95/max, cores per part."""
    columns = ["N", "pages/s", "lag p50", "lag p95", "lag max", "missed", "workers", "Redis"]
    columns += ["database", "emulator"]
    rows = [
        [
            r["cabinets"],
            r["pages_per_s"],
            f"{r['lag_share_p50']:.1%}",
            f"{r['lag_share_p95']:.1%}",
            f"{r['lag_share_max']:.1%}",
            r["missed"],
            r["cpu_cores"]["workers"],
            r["cpu_cores"]["redis"],
            r["cpu_cores"]["database"] if r["cpu_cores"]["database"] is not None else "in workers",
            r["cpu_cores"]["emulator"],
        ]
        for r in result["runs"]
    ]
    p = result["params"]
    title = (
        f"capacity: time scale {p['time_scale']:g}, {p['processes']} processes, "
        f"{result['database']}; lag as a share of the interval, CPU in cores; "
        f"capacity {result['capacity_cabinets']} cabinets"
    )
    return [table(title, columns, rows)]


def _slots(params: Params) -> dict[str, int]:
    """Jobs each queue ran at once per process: ``--queue-concurrency``'s, else the sync's own
    figure, else ``--concurrency``."""
    settings = Settings(
        sync_queue_concurrency=params.concurrency, queue_concurrency=params.queue_concurrency
    )
    return {queue: int(queue_option(settings, queue, "concurrency")) for queue in syncs()}
