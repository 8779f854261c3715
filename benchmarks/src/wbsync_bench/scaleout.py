"""``scaleout``: N cabinets, every sync, end to end, on 1, 2 and 4 ``wbsync run`` processes,
on a single Redis and on a 3-master Redis Cluster.

Each run gets a fresh Redis (a private ``redis-server``, or an embedded 3-master cluster), a
fresh database (a SQLite file, or a new database on the PostgreSQL server named by
``--postgres``) holding N cabinets, and the same WB emulator (a child process, counters and
buckets reset between runs) that answers every method after a log-normal delay (real time,
150 ms median by default: WB's pages, not its windows, take the time at the default time scale
0.001). The fan-out schedule is set far ahead so the processes start idle; once every process's
workers are listening on every queue, the clock starts and one fan-out pass (the same
``FanOut`` the leader runs) enqueues one job per (queue, cabinet). The run ends when every job
has a success (or a final failure) recorded in ``sync_runs``.

Measured per run: the makespan; the lower bound WB's limits put on it (the busiest
(seller, limit group) bucket's requests beyond its burst, times its interval); efficiency (the
bound over the makespan: far below 1 means WB's limits were not what bound the run); upstream
requests and 429s (the emulator's counters); failed jobs; jobs, pages and stored rows per
second (pages and rows from ``sync_runs``); the worker processes' CPU seconds per 1,000 pages
(``/proc``); every process's CPU and the machine's busy share of its cores, to show where the
CPU bound starts; Redis commands per page (``INFO commandstats`` summed over the nodes, Lua's
inner commands included) and Redis memory (``used_memory`` summed over the nodes, peak of the
run). Configurations run in ABBA order over ``rounds``; each configuration's figure is the
median run by pages per second. The processes measured (Redis, ``wbsync run``) and the CPU
readings are ``wbsync_bench.processes``'.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wbsync.emulator import Emulator, EmulatorConfig, ReplyLatency
from wbsync.errors import ConfigError, RedisUnavailableError
from wbsync.jobs.fanout import ActiveCabinets, FanOut
from wbsync.jobs.leader import FanOutLeases
from wbsync.jobs.queue import SyncQueue
from wbsync.redis.redis_cluster import EmbeddedCluster
from wbsync.redis.redis_server import find_redis
from wbsync.shared.runtime import Runtime
from wbsync.store import Database
from wbsync.store.cabinets import NewCabinet
from wbsync.system.clock import wb_today
from wbsync_bench.common import fresh_database, report_life, rounds, syncs, table
from wbsync_bench.processes import (
    FAR_AHEAD_MS,
    RedisUnderTest,
    WorkerProcesses,
    machine_cpu_s,
    redis_under_test,
    seller_id,
)
from wbsync_bench.scaleout_figures import lower_bound_s, per_sync, progress
from wbsync_bench.upstream import EmulatorProcess

REDIS_KINDS = ("single", "cluster")
_POLL_S = 0.25


@dataclass
class Params:
    """What to run."""

    cabinets: int = 1_000
    processes: tuple[int, ...] = (1, 2, 4)
    redis: tuple[str, ...] = REDIS_KINDS
    latency_ms: float = 150.0
    latency_sigma: float = 0.6
    time_scale: float = 0.001
    concurrency: int = 1
    postgres: str | None = None
    rounds: int = 1
    timeout_s: float | None = None
    grace_ms: float = 10.0

    def __post_init__(self) -> None:
        unknown = set(self.redis) - set(REDIS_KINDS)
        if unknown:
            raise ConfigError(f"unknown Redis kinds {sorted(unknown)}; use {REDIS_KINDS}")
        if self.cabinets < 1 or min(self.processes, default=0) < 1 or self.rounds < 1:
            raise ConfigError("cabinets, processes and rounds must be >= 1")

    @property
    def configs(self) -> list[tuple[str, int]]:
        """Every (Redis kind, process count) to run."""
        return [(kind, n) for kind in self.redis for n in self.processes]

    def deadline_s(self) -> float:
        """How long one run may take before it is called failed."""
        return self.timeout_s or 120.0 + self.cabinets * len(syncs()) * 0.1


# --- one run ----------------------------------------------------------------------------------


async def _one_run(
    params: Params, emu: EmulatorProcess, kind: str, processes: int, tmp: Path
) -> dict[str, Any]:
    # A fleet-wide sync runs one job for the whole fleet, the others one per cabinet.
    fleet = [name for name, sync in syncs().items() if sync.fleet]
    jobs = params.cabinets * (len(syncs()) - len(fleet)) + len(fleet)
    async with redis_under_test(kind) as redis:
        async with fresh_database(params.postgres, tmp, name="scaleout") as database_url:
            run = WorkerProcesses(
                emu, redis, time_scale=params.time_scale, concurrency=params.concurrency
            )
            settings = run.settings(database_url)
            runtime = await Runtime(settings, redis_url=redis.url).start()
            try:
                model = Emulator(emu.config)
                await runtime.store.cabinets.add_many(
                    [
                        NewCabinet(f"scale-{i:06d}", model.token(seller_id(i)), seller_id(i))
                        for i in range(params.cabinets)
                    ]
                )
                leases = FanOutLeases(runtime.redis, prefix=settings.redis_prefix, lease_ms=15_000)
                await leases.set_through_ms({q: FAR_AHEAD_MS for q in syncs()})
                await emu.reset()
                run.spawn(settings, processes, tmp)
                try:
                    await run.until_listening(runtime.queue_prefix)
                    ids = [str(c.id) for c in await runtime.store.cabinets.list()]
                    queues = {name: runtime.queue(name) for name in syncs()}
                    fanout = FanOut(queues, _constant(ids), {q: 1e9 for q in syncs()}, fleet=fleet)
                    figures = await _measured(
                        run, redis, runtime.database, fanout, queues, jobs, params
                    )
                finally:
                    run.stop()
            finally:
                await runtime.aclose()
    counters = await emu.counters()
    total = counters.get("total", {})
    makespan = figures["makespan_s"]
    pages, rows = figures["pages"], figures["rows"]
    bound = lower_bound_s(counters, params.time_scale, params.grace_ms / 1000.0)
    return {
        "redis": kind,
        "processes": processes,
        "jobs": jobs,
        "makespan_s": makespan,
        "lower_bound_s": bound,
        "efficiency": bound / makespan if makespan else None,
        "requests": int(total.get("requests", 0)),
        "rate_limited": int(total.get("rate_limited", 0)),
        "failed_jobs": figures["failed"],
        "completed_jobs": figures["succeeded"],
        "jobs_per_s": figures["succeeded"] / makespan,
        "pages": pages,
        "pages_per_s": pages / makespan,
        "rows": rows,
        "db_rows_per_s": rows / makespan,
        "worker_cpu_s_per_1000_pages": figures["workers_cpu_s"] / pages * 1000 if pages else None,
        "cpu_s": {
            "workers": figures["workers_cpu_s"],
            "emulator": figures["emulator_cpu_s"],
            "redis": figures["redis_cpu_s"],
            "machine": figures["machine_busy_s"],
        },
        "machine_cpu_share": figures["machine_busy_s"] / figures["machine_all_s"],
        "redis_commands_per_page": figures["commands"] / pages if pages else None,
        "redis_commands_per_page_by_name": {
            name: calls / pages
            for name, calls in sorted(figures["commands_by_name"].items(), key=lambda kv: -kv[1])
            if pages and calls / pages >= 0.5
        },
        "redis_memory_peak_bytes": figures["memory_peak"],
        "redis_bytes_per_cabinet": figures["memory_grown"] / params.cabinets,
        "per_cabinet_by_sync": figures["per_sync"],
    }


def _constant(ids: Sequence[str]) -> ActiveCabinets:
    """The fan-out's source of active cabinets: the ones the run added, read once."""

    async def active() -> Sequence[str]:
        return ids

    return active


async def _any_live(queues: Mapping[str, SyncQueue]) -> bool:
    """True while any job of the run is still waiting, delayed or running."""
    return any([bool(await queue.live_jobs()) for queue in queues.values()])


async def _measured(
    run: WorkerProcesses,
    redis: RedisUnderTest,
    database: Database,
    fanout: FanOut,
    queues: Mapping[str, SyncQueue],
    jobs: int,
    params: Params,
) -> dict[str, Any]:
    """Fan out and wait for every job; the figures between the two moments."""
    before = await redis.totals()
    workers_cpu, emulator_cpu = run.cpu_s()
    machine = machine_cpu_s()
    since = datetime.now(UTC)
    started = time.perf_counter()
    await fanout.run_once()
    peak = before["memory"]
    deadline = time.monotonic() + params.deadline_s()
    while True:
        succeeded, failed, pages, rows = await progress(database, since)
        # A failure recorded for a job still live is an attempt, not the job's end: the job may
        # yet succeed (and then counts as succeeded).
        if succeeded + failed >= jobs and not await _any_live(queues):
            break
        died = run.died()
        if died or time.monotonic() > deadline:
            raise ConfigError(died or f"{succeeded + failed} of {jobs} jobs ended in time")
        peak = max(peak, await redis.memory())
        await asyncio.sleep(_POLL_S)
    makespan = time.perf_counter() - started
    busy_end, all_end = machine_cpu_s()
    workers_end, emulator_end = run.cpu_s()
    after = await redis.totals()
    return {
        "makespan_s": makespan,
        "per_sync": await per_sync(database, since, params.cabinets),
        "succeeded": succeeded,
        "failed": failed,
        "pages": pages,
        "rows": rows,
        "workers_cpu_s": workers_end - workers_cpu,
        "emulator_cpu_s": emulator_end - emulator_cpu,
        "redis_cpu_s": after["cpu_s"] - before["cpu_s"],
        "machine_busy_s": busy_end - machine[0],
        "machine_all_s": all_end - machine[1],
        "commands": after["commands"] - before["commands"],
        "commands_by_name": {
            name: calls - before["by_name"].get(name, 0) for name, calls in after["by_name"].items()
        },
        "memory_peak": max(peak, after["memory"]),
        "memory_grown": max(peak, after["memory"]) - before["memory"],
    }


# --- the whole benchmark -------------------------------------------------------------------


async def run(params: Params | None = None) -> dict[str, Any]:
    """Every configuration ``rounds`` times; the median run of each, and the ratios."""
    params = params or Params()
    skipped: dict[str, str] = {}
    if "cluster" in params.redis:
        try:
            with EmbeddedCluster():
                pass
        except RedisUnavailableError as exc:
            skipped["cluster"] = str(exc)
    configs = [c for c in params.configs if c[0] not in skipped]
    emulator = EmulatorConfig(
        time_scale=params.time_scale,
        anchor_date=wb_today(),
        grace_ms=params.grace_ms,
        latency=ReplyLatency(median_ms=params.latency_ms, sigma=params.latency_sigma),
        report_tasks=report_life(params.time_scale),
        serve_disabled_in_docs=True,  # every sync runs, the booking monitor's too
    )
    samples: dict[tuple[str, int], list[dict[str, Any]]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="wbsync-scaleout-") as tmp:
        async with EmulatorProcess(emulator) as emu:
            for _, (kind, processes) in rounds(configs, params.rounds):
                samples[(kind, processes)].append(
                    await _one_run(params, emu, kind, processes, Path(tmp))
                )
    runs = [_median_run(samples[c]) for c in configs]
    return {
        "params": {k: v for k, v in asdict(params).items() if k != "postgres"},
        "database": "postgresql" if params.postgres else "sqlite",
        "redis_server": str(find_redis()),
        "skipped": skipped,
        "runs": runs,
        "speedup": _speedups(runs),
        "cluster_cost": _cluster_cost(runs),
    }


def _median_run(samples: list[dict[str, Any]]) -> dict[str, Any]:
    ordered = sorted(samples, key=lambda r: r["pages_per_s"])
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["rounds_pages_per_s"] = [r["pages_per_s"] for r in samples]
    return chosen


def _speedups(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per Redis kind: pages/s of N processes over pages/s of one."""
    out: dict[str, dict[str, float]] = {}
    for kind in REDIS_KINDS:
        base = next((r for r in runs if r["redis"] == kind and r["processes"] == 1), None)
        if base is None:
            continue
        out[kind] = {
            str(r["processes"]): r["pages_per_s"] / base["pages_per_s"]
            for r in runs
            if r["redis"] == kind
        }
    return out


def _cluster_cost(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Per process count: the share of single-node pages/s the cluster loses."""
    single = {r["processes"]: r["pages_per_s"] for r in runs if r["redis"] == "single"}
    return {
        str(r["processes"]): 1 - r["pages_per_s"] / single[r["processes"]]
        for r in runs
        if r["redis"] == "cluster" and r["processes"] in single
    }


def tables(result: dict[str, Any]) -> list[Any]:
    """The main figures, one row per configuration (the JSON and the docs have them all)."""
    columns = ["run", "makespan s", "pages/s", "429s", "failed", "CPU s/1k pg", "busy", "cmd/pg"]
    rows = [
        [
            f"{r['redis']} x{r['processes']}",
            r["makespan_s"],
            r["pages_per_s"],
            r["rate_limited"],
            r["failed_jobs"],
            r["worker_cpu_s_per_1000_pages"],
            f"{r['machine_cpu_share']:.0%}",
            r["redis_commands_per_page"],
        ]
        for r in result["runs"]
    ]
    p = result["params"]
    title = (
        f"scaleout: {p['cabinets']:,} cabinets x {len(syncs())} syncs, {p['concurrency']} per "
        f"queue per process, {p['latency_ms']:g} ms replies, {result['database']}"
    )
    if "redis_server" in result:  # figures stored before it was recorded lack it
        title += f", redis-server {result['redis_server']}"
    return [table(title, columns, rows)]
