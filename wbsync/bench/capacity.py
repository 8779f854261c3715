"""``capacity``: a steady state of N cabinets, every sync on its own interval, for several N.

For each N: a private ``redis-server``, a fresh database (a SQLite file, or a new database on
the PostgreSQL server named by ``--postgres``) holding N cabinets, and ``processes`` real
``wbsync run`` processes whose fan-out leader enqueues every queue on its default interval,
compressed by ``time_scale`` (at 0.1 the booking monitor's minute is 6 s: N cabinets at 0.1 ask
for the pages of 10 N at 1.0). The WB emulator (a child process on loopback, counters reset per
N) answers after ``latency_ms`` (0 by default: the lag measured is the stack's work, not WB's
reply time, which the slots cover).

The first fan-out enqueues every queue at once: a burst no steady state has. The measured
window starts once that pass has drained and lasts ``window_s``; every time a (cabinet, queue)
was due in the window counts. The fan-out spreads each queue's cabinets over its interval: a
pair is due at its own offset in every interval (``wbsync.jobs.fanout.offset_ms``, the same
function the leader uses); a run's completion is read from ``sync_runs`` (its ``success_at``). A
due time is served by that pair's first completion after it that served no earlier one; its
freshness lag is the completion minus the due time. A due time of the window still unserved
``drain_s`` after the window counts as missed, with the lag it had then (a lower bound).

Reported per N: the lag (p50, p95, max) in seconds per queue and, pooled over the queues, as a
share of each queue's interval; pages per second in the window; the CPU of the workers (their
processes), of Redis (``INFO cpu``) and of the database (PostgreSQL's backends serving the
run's database, looked for at every poll and read from ``/proc``, the benchmark's own
connections left out; with SQLite the database works inside the workers), and
the emulator's apart, each in cores (CPU seconds per second). The capacity is the largest N
whose pooled lag p95 stays within ``LAG_TARGET`` (10 %) of the interval. An N whose first
pass does not drain within ``warmup_base_s`` plus ``warmup_s_per_cabinet`` per cabinet is
reported as not held, and larger N are not run.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.engine import make_url

from wbsync.bench.common import fresh_database, percentile, syncs, table
from wbsync.bench.processes import (
    RedisUnderTest,
    WorkerProcesses,
    process_cpu_s,
    redis_under_test,
    seller_id,
)
from wbsync.bench.upstream import EmulatorProcess
from wbsync.clock import today
from wbsync.emulator import Emulator, EmulatorConfig, ReplyLatency
from wbsync.errors import ConfigError
from wbsync.jobs.fanout import offset_ms
from wbsync.runtime import Runtime
from wbsync.service import fanout_intervals
from wbsync.store import Database
from wbsync.store.cabinets import NewCabinet
from wbsync.store.schema import sync_runs

#: A steady state holds when the pooled lag p95 is within this share of each queue's interval.
LAG_TARGET = 0.10
_POLL_S = 0.2
_LOOKBACK_S = 5.0  # completions are re-read this far back: a commit may land after its stamp


@dataclass
class Params:
    """What to run."""

    cabinets: tuple[int, ...] = (3, 10, 30, 60)
    time_scale: float = 0.1
    processes: int = 2
    concurrency: int = 5
    latency_ms: float = 0.0
    window_s: float = 30.0
    drain_s: float = 10.0
    warmup_base_s: float = 60.0
    warmup_s_per_cabinet: float = 2.0
    """How long the first pass may take to drain: ``warmup_base_s`` plus this per cabinet.
    Past that the stack cannot keep up with N, and larger N are not run."""
    postgres: str | None = None

    def __post_init__(self) -> None:
        if min(self.cabinets, default=0) < 1 or self.processes < 1 or self.concurrency < 1:
            raise ConfigError("cabinets, processes and concurrency must be >= 1")
        if self.time_scale <= 0 or self.window_s <= 0 or self.drain_s < 0:
            raise ConfigError("time_scale and window_s must be > 0, drain_s >= 0")


# --- CPU of the database's backends --------------------------------------------------------


async def _backend_pids(database: Database, url: str, own: set[int]) -> list[int]:
    """PostgreSQL's backends serving ``url``'s database on this host (none for SQLite), less
    the benchmark's own: each connection this asks on is added to ``own``."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return []
    async with database.connection() as conn:
        rows = list(
            await conn.execute(
                text("SELECT pid, pg_backend_pid() FROM pg_stat_activity WHERE datname = :name"),
                {"name": parsed.database},
            )
        )
    own.update(int(mine) for _, mine in rows)
    return [int(pid) for pid, _ in rows if int(pid) not in own]


class _Backends:
    """CPU of the PostgreSQL backends serving the run's database over the window.

    The workers' pools open and close connections as load comes and goes, so the backends are
    looked for at every poll: one there at the window's start counts from its CPU then, one
    that appears later from zero (its start is the database's work too), each up to the last
    reading (a backend that exits loses at most one poll's CPU).
    """

    def __init__(self) -> None:
        self.base: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.own: set[int] = set()  # the benchmark's own connections: its polling is not ours

    def sample(self, pids: list[int], *, started: bool) -> None:
        for pid in pids:
            with contextlib.suppress(OSError, IndexError, ValueError):  # it exited meanwhile
                cpu = process_cpu_s(pid)
                if pid not in self.base:
                    self.base[pid] = 0.0 if started else cpu
                self.last[pid] = cpu

    def cpu_s(self) -> float:
        return sum(self.last[p] - self.base[p] for p in self.last if p not in self.own)


# --- the lag --------------------------------------------------------------------------------


class _Ledger:
    """Fan-out moments per queue and completions per (cabinet, queue), as they are observed."""

    def __init__(self, intervals_s: dict[str, float]) -> None:
        self.intervals_ms = {q: max(1, round(s * 1000)) for q, s in intervals_s.items()}
        self.last: dict[tuple[int, str], datetime] = {}
        self.completions: dict[tuple[int, str], list[tuple[float, int]]] = defaultdict(list)
        self.failures = 0
        self._failed_seen: dict[tuple[int, str], datetime] = {}

    def ran(self, cabinet: int, queue: str, at: datetime, pages: int) -> None:
        key = (cabinet, queue)
        if key in self.last and at <= self.last[key]:
            return
        self.last[key] = at
        self.completions[key].append((at.timestamp() * 1000.0, pages))

    def failed(self, cabinet: int, queue: str, at: datetime) -> None:
        key = (cabinet, queue)
        if self._failed_seen.get(key) != at:
            self._failed_seen[key] = at
            self.failures += 1

    def first_pass_done(self, cabinets: int, queues: int) -> bool:
        return len(self.completions.keys() | self._failed_seen.keys()) >= cabinets * queues

    def lags(self, start_ms: float, end_ms: float, now_ms: float) -> dict[str, list[float]]:
        """Per queue: the lag (ms) of every cabinet's run for every time it was due in
        [start, end).

        A (cabinet, queue) is due at its own offset in every interval (the fan-out's
        ``offset_ms``, epoch-aligned), and that due time is served by the pair's first
        completion after it that served no earlier one: a completion before it (a run still
        going when it came, whose job the fan-out skipped as live) does not count for it. The
        pairing starts at the last due time before the window. One unserved by ``now_ms`` gets
        ``-(now - due)``: negative marks it missed.
        """
        out: dict[str, list[float]] = defaultdict(list)
        cabinets = {c for c, _ in self.completions}
        for queue, interval in self.intervals_ms.items():
            for cabinet in cabinets:
                offset = offset_ms(str(cabinet), queue, interval)
                first = start_ms - (start_ms - offset) % interval
                moments = [
                    first + k * interval for k in range(int((end_ms - first) // interval) + 1)
                ]
                done = [at for at, _ in self.completions.get((cabinet, queue), [])]
                i = 0
                for moment in moments:
                    while i < len(done) and done[i] <= moment:
                        i += 1
                    lag = done[i] - moment if i < len(done) else -(now_ms - moment)
                    i += 1
                    if start_ms <= moment < end_ms:
                        out[queue].append(lag)
        return out

    def pages(self, start_ms: float, end_ms: float) -> int:
        return sum(
            pages
            for runs in self.completions.values()
            for at, pages in runs
            if start_ms <= at < end_ms
        )


async def _observe(ledger: _Ledger, database: Database, since: datetime) -> None:
    async with database.connection() as conn:
        rows = await conn.execute(
            select(
                sync_runs.c.cabinet_id,
                sync_runs.c.sync,
                sync_runs.c.success_at,
                sync_runs.c.success_pages,
                sync_runs.c.failure_at,
            ).where((sync_runs.c.success_at >= since) | (sync_runs.c.failure_at >= since))
        )
        for cabinet, queue, success_at, pages, failure_at in rows:
            if success_at is not None and success_at >= since:
                ledger.ran(int(cabinet), queue, success_at, int(pages or 0))
            if failure_at is not None and failure_at >= since:
                ledger.failed(int(cabinet), queue, failure_at)


class _Overloaded(Exception):
    """The stack could not work off N cabinets' first pass: no steady state to measure."""


# --- one N -------------------------------------------------------------------------------------


def _cpu(workers: WorkerProcesses) -> dict[str, float]:
    worker_s, emulator_s = workers.cpu_s()
    return {"workers": worker_s, "emulator": emulator_s}


async def _one_n(params: Params, emu: EmulatorProcess, n: int, tmp: Path) -> dict[str, Any]:
    with redis_under_test("single") as redis:
        async with fresh_database(params.postgres, tmp, name="capacity") as database_url:
            workers = WorkerProcesses(
                emu, redis, time_scale=params.time_scale, concurrency=params.concurrency
            )
            settings = workers.settings(database_url)
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
                    figures = await _steady(
                        params, workers, redis, runtime.database, database_url, intervals, n
                    )
                finally:
                    workers.stop()
            finally:
                await runtime.aclose()
    return {"cabinets": n, **figures}


async def _steady(
    params: Params,
    workers: WorkerProcesses,
    redis: RedisUnderTest,
    database: Database,
    database_url: str,
    intervals: dict[str, float],
    n: int,
) -> dict[str, Any]:
    ledger = _Ledger(intervals)
    since = datetime.now(UTC)
    lookback = since

    async def observe() -> None:
        nonlocal lookback
        stamp = datetime.now(UTC)
        await _observe(ledger, database, lookback)
        lookback = max(since, datetime.fromtimestamp(stamp.timestamp() - _LOOKBACK_S, UTC))
        died = workers.died()
        if died:
            raise ConfigError(died)

    limit_s = params.warmup_base_s + params.warmup_s_per_cabinet * n
    deadline = time.monotonic() + limit_s
    while not ledger.first_pass_done(n, len(intervals)):
        if time.monotonic() > deadline:
            raise _Overloaded(f"the first pass of {n} cabinets did not drain in {limit_s:.0f} s")
        await observe()
        await asyncio.sleep(_POLL_S)
    warmup_s = (datetime.now(UTC) - since).total_seconds()
    backends = _Backends()
    backends.sample(await _backend_pids(database, database_url, backends.own), started=False)
    cpu0 = _cpu(workers)
    redis0 = (await redis.totals())["cpu_s"]
    start_ms = time.time() * 1000.0
    started = time.monotonic()
    end = started + params.window_s
    while time.monotonic() < end:
        await observe()
        backends.sample(await _backend_pids(database, database_url, backends.own), started=True)
        await asyncio.sleep(_POLL_S)
    window_s = time.monotonic() - started
    end_ms = start_ms + window_s * 1000.0
    backends.sample(await _backend_pids(database, database_url, backends.own), started=True)
    cpu1 = _cpu(workers)
    redis1 = (await redis.totals())["cpu_s"]
    drain_end = time.monotonic() + params.drain_s
    while time.monotonic() < drain_end:
        await observe()
        await asyncio.sleep(_POLL_S)
    lags = ledger.lags(start_ms, end_ms, time.time() * 1000.0)
    cores = {
        "workers": (cpu1["workers"] - cpu0["workers"]) / window_s,
        "redis": (redis1 - redis0) / window_s,
        "database": backends.cpu_s() / window_s if backends.last else None,
        "emulator": (cpu1["emulator"] - cpu0["emulator"]) / window_s,
    }
    return {
        "warmup_s": warmup_s,
        "window_s": window_s,
        "pages_per_s": ledger.pages(start_ms, end_ms) / window_s,
        "failures": ledger.failures,
        "cpu_cores": cores,
        **_lag_figures(lags, intervals),
    }


def _lag_figures(lags: dict[str, list[float]], intervals: dict[str, float]) -> dict[str, Any]:
    per_queue = {}
    shares: list[float] = []
    missed = 0
    for queue, values in sorted(lags.items()):
        seconds = [abs(v) / 1000.0 for v in values]
        missed_here = sum(1 for v in values if v < 0)
        missed += missed_here
        shares += [s / intervals[queue] for s in seconds]
        per_queue[queue] = {
            "interval_s": intervals[queue],
            "runs": len(values),
            "missed": missed_here,
            "lag_p50_s": percentile(seconds, 50),
            "lag_p95_s": percentile(seconds, 95),
            "lag_max_s": max(seconds, default=float("nan")),
        }
    return {
        "runs": len(shares),
        "missed": missed,
        "lag_share_p50": percentile(shares, 50),
        "lag_share_p95": percentile(shares, 95),
        "lag_share_max": max(shares, default=float("nan")),
        "per_queue": per_queue,
    }


# --- the whole benchmark -------------------------------------------------------------------


async def run(params: Params | None = None) -> dict[str, Any]:
    """Every N in turn, smallest first; the largest N within the lag target."""
    params = params or Params()
    config = EmulatorConfig(
        time_scale=params.time_scale,
        anchor_date=today(),
        latency=ReplyLatency(median_ms=params.latency_ms),
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
            else:
                overloaded = None
    held = [r["cabinets"] for r in results if r["lag_share_p95"] <= LAG_TARGET and r["runs"]]
    largest = max(held, default=None)
    return {
        "params": {k: v for k, v in asdict(params).items() if k != "postgres"},
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
