"""``page``: what one page costs wbsync, sync by sync, next to a bare pipeline of the same work.

One ``wbsync run`` child process (every queue's worker, as in production) works on a private
``redis-server``, a fresh database (a SQLite file, or a new PostgreSQL database) and the WB
emulator in a child process on loopback, answering at once (no reply delay). The time scale is
tiny (WB's minute is 60 µs), so WB's limits never make a run wait: what is measured is work, not
waiting. For each sync, a measurement enqueues the sync's job for ``cabinets`` new cabinets (new
cabinets every time: a first run of each, the same as the bare pipeline's) and waits until the
runs are recorded in ``sync_runs`` (a fleet-wide sync, one job for the fleet: as many fleet jobs
one after the other, each enqueued as BullMQ ends the one before, ``wbsync_bench.page_wbsync``).
The emulator keeps a built report long enough for its download (``common.report_life``: WB's 2
hours would be 7 ms at this scale), so a report sync's runs are measured as WB serves them.
Between the two moments it reads:

* the worker's CPU: the child's threads' CPU time from ``/proc/<pid>/task/*/schedstat``
  (nanoseconds; the per-process tick count is too coarse for a few hundred ms), over the pages
  the runs recorded;
* Redis commands by name: ``INFO commandstats`` deltas of the private server (the commands Lua
  runs included, the benchmark's own ``INFO`` excluded), over the same pages. The producer's
  enqueue and the idle workers' blocking waits are in it, as in production.

The bare pipeline (``wbsync_bench.bare``) does the same work with nothing around it: before the
rounds, one run of each sync is recorded in this process, and a bare run replays its requests
and stores its pages' rows with the drivers alone, in four variants (httpx or aiohttp, json or
orjson). Its cost is this process's CPU time (``time.process_time``) over the same pages.

Variants interleave: in every round each sync is measured by wbsync and every bare variant, in
ABBA order; a figure is the median over rounds. The headline is wbsync's CPU per page over the
fastest bare variant's, per sync.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from wbsync.emulator import Emulator, EmulatorConfig
from wbsync.errors import ConfigError
from wbsync.jobs.leader import FanOutLeases
from wbsync.shared.runtime import Runtime
from wbsync.store.cabinets import Cabinet, NewCabinet
from wbsync.system.clock import wb_today
from wbsync_bench.bare import BARE_VARIANTS, FLOOR, Bare, Recording, record
from wbsync_bench.common import (
    fresh_database,
    median,
    ratio,
    report_life,
    rounds,
    syncs,
    table,
)
from wbsync_bench.page_wbsync import measure_wbsync
from wbsync_bench.processes import (
    FAR_AHEAD_MS,
    RedisUnderTest,
    WorkerProcesses,
    redis_under_test,
    seller_id,
)
from wbsync_bench.upstream import EmulatorProcess

#: Multiplies WB's periods: its minute becomes 60 µs, so no run waits for a token.
TIME_SCALE = 1e-6
WBSYNC = "wbsync"
#: The 40-row page the cost target is set for.
FINANCE = "rnp-finance-sync"
TARGET_FINANCE_CPU_MS = 3.0
TARGET_RATIO = 1.5
TARGET_COMMANDS = 15.0
MODES = (WBSYNC, *BARE_VARIANTS, FLOOR)
"""What each round measures, in ABBA order: wbsync, the bare variants, the floor."""


@dataclass
class Params:
    """What to run."""

    cabinets: int = 10
    rounds: int = 3
    databases: tuple[str, ...] = ("sqlite",)
    """``sqlite`` and/or PostgreSQL server URLs (``postgresql+asyncpg://``): each run gets a
    new database on the server, dropped after."""
    concurrency: int = 5
    only: tuple[str, ...] = ()
    """Queue names to measure (all by default)."""

    def __post_init__(self) -> None:
        if self.cabinets < 1 or self.rounds < 1 or self.concurrency < 1:
            raise ConfigError("cabinets, rounds and concurrency must be >= 1")
        for db in self.databases:
            if db != "sqlite" and not db.startswith("postgresql"):
                raise ConfigError(
                    f"unknown database {db!r}: give 'sqlite' or a PostgreSQL server URL "
                    "(postgresql+asyncpg://user@host:port/db)"
                )
        unknown = set(self.only) - set(syncs())
        if unknown:
            raise ConfigError(f"unknown syncs {sorted(unknown)}; syncs: {', '.join(syncs())}")

    @property
    def names(self) -> list[str]:
        """The syncs measured, in the registry's order."""
        return [n for n in syncs() if not self.only or n in self.only]


# --- the whole benchmark -------------------------------------------------------------------


async def _new_cabinets(runtime: Runtime, model: Emulator, start: int, n: int) -> list[Cabinet]:
    added = await runtime.store.cabinets.add_many(
        [
            NewCabinet(f"page-{i:06d}", model.token(seller_id(i)), seller_id(i))
            for i in range(start, start + n)
        ]
    )
    return added.added


@contextlib.asynccontextmanager
async def _stack(
    params: Params, emu: EmulatorProcess, database: str, tmp: Path
) -> AsyncIterator[tuple[Runtime, WorkerProcesses, RedisUnderTest, str]]:
    """A private Redis, a fresh database, the runtime here and one worker process there."""
    async with redis_under_test("single") as redis:
        async with fresh_database(
            None if database == "sqlite" else database, tmp, name="page"
        ) as db_url:
            # Every queue at ``concurrency`` (a sync's own figure too), as the floor runs.
            workers = WorkerProcesses(
                emu,
                redis,
                time_scale=TIME_SCALE,
                concurrency=params.concurrency,
                queue_concurrency=dict.fromkeys(syncs(), params.concurrency),
            )
            settings = workers.settings(db_url)
            runtime = await Runtime(settings, redis_url=redis.url).start()
            try:
                leases = FanOutLeases(runtime.redis, prefix=settings.redis_prefix, lease_ms=15_000)
                await leases.set_through_ms(dict.fromkeys(syncs(), FAR_AHEAD_MS))  # we fan out
                workers.spawn(settings, 1, tmp)
                try:
                    await workers.until_listening(runtime.queue_prefix)
                    yield runtime, workers, redis, db_url
                finally:
                    workers.stop()
            finally:
                await runtime.aclose()


async def _one_database(
    params: Params, emu: EmulatorProcess, database: str, tmp: Path
) -> dict[str, Any]:
    names = params.names
    every = syncs()
    model = Emulator(emu.config)
    async with _stack(params, emu, database, tmp) as (runtime, workers, redis, db_url):
        next_id = 0

        async def fresh(n: int) -> list[Cabinet]:
            nonlocal next_id
            next_id += n
            return await _new_cabinets(runtime, model, next_id - n, n)

        recordings = {}
        for name in names:
            [cabinet] = await fresh(1)
            recordings[name] = await record(runtime, cabinet, every[name])
        samples: dict[str, dict[str, list[dict[str, Any]]]] = {
            n: {m: [] for m in MODES} for n in names
        }
        async with Bare(redis.url, db_url, time_scale=TIME_SCALE) as bare:
            # Warm-up, not counted: imports, connections, BullMQ's scripts, prepared statements.
            for name in names:
                await measure_wbsync(runtime, workers, redis, name, await fresh(1))
                for variant in BARE_VARIANTS:
                    await bare.run(variant, recordings[name], 1)
                await bare.run_floor(recordings[name], 1, concurrency=params.concurrency)
            for r, name in rounds(names, params.rounds):
                for mode in MODES if r % 2 == 0 else MODES[::-1]:
                    if mode == WBSYNC:
                        got = await measure_wbsync(
                            runtime, workers, redis, name, await fresh(params.cabinets)
                        )
                    elif mode == FLOOR:
                        rec = recordings[name]
                        cpu = await bare.run_floor(
                            rec, params.cabinets, concurrency=params.concurrency
                        )
                        got = {"cpu_s": cpu, "pages": len(rec.pages) * params.cabinets}
                    else:
                        rec = recordings[name]
                        cpu = await bare.run(mode, rec, params.cabinets)
                        got = {"cpu_s": cpu, "pages": len(rec.pages) * params.cabinets}
                    samples[name][mode].append(got)
    return {
        "database": "sqlite" if database == "sqlite" else "postgresql",
        "syncs": {name: _figures(samples[name], recordings[name]) for name in names},
    }


def _figures(samples: dict[str, list[dict[str, Any]]], rec: Recording) -> dict[str, Any]:
    """Medians over rounds of one sync: every variant's CPU per page, wbsync's commands."""
    cpu_ms = {
        mode: median([1000 * s["cpu_s"] / s["pages"] for s in runs if s["pages"]])
        for mode, runs in samples.items()
    }
    bare = {m: v for m, v in cpu_ms.items() if m in BARE_VARIANTS}
    fastest = min(bare, key=lambda m: bare[m])
    ours = samples[WBSYNC]
    commands: dict[str, float] = {}
    for cmd in sorted({c for s in ours for c in s["commands"]}):
        commands[cmd] = median([s["commands"].get(cmd, 0) / s["pages"] for s in ours if s["pages"]])
    per_page = median([sum(s["commands"].values()) / s["pages"] for s in ours if s["pages"]])
    by_origin = {
        origin: median([s["monitored"][origin] / s["pages"] for s in ours if s["pages"]])
        for origin in ("bullmq", "wbsync", "client_calls")
    }
    bullmq_per_job = median([s["monitored"]["bullmq"] / s["jobs"] for s in ours])
    return {
        "pages_per_run": len(rec.pages),
        "requests_per_run": len(rec.requests),
        "rows_per_page": rec.rows / len(rec.pages) if rec.pages else 0.0,
        "failed_runs": sum(s["failed"] for s in ours),
        "rounds_wbsync_pages": [s["pages"] for s in ours],
        "cpu_ms_per_page": cpu_ms,
        "rounds_cpu_ms_per_page": {
            mode: [1000 * s["cpu_s"] / s["pages"] for s in runs if s["pages"]]
            for mode, runs in samples.items()
        },
        "fastest_bare": fastest,
        "ratio_to_fastest_bare": ratio(cpu_ms[WBSYNC], bare[fastest]),
        "ratio_to_floor": ratio(cpu_ms[WBSYNC], cpu_ms[FLOOR]),
        "floor_ratio_to_fastest_bare": ratio(cpu_ms[FLOOR], bare[fastest]),
        "redis_commands_per_page": per_page,
        "wbsync_commands_per_page": by_origin["wbsync"],
        "bullmq_commands_per_page": by_origin["bullmq"],
        "bullmq_commands_per_job": bullmq_per_job,
        "client_calls_per_page": by_origin["client_calls"],
        "redis_commands_per_page_by_name": dict(
            sorted(commands.items(), key=lambda kv: (-kv[1], kv[0]))
        ),
    }


async def run(params: Params | None = None) -> dict[str, Any]:
    """Every database in turn; per sync, wbsync and every bare variant, interleaved."""
    params = params or Params()
    # Every sync runs, the booking monitor's too (WB documents its method as disabled).
    config = EmulatorConfig(
        time_scale=TIME_SCALE,
        anchor_date=wb_today(),
        report_tasks=report_life(TIME_SCALE),  # WB's 2 hours would be 7 ms here
        serve_disabled_in_docs=True,
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="wbsync-page-") as tmp:
        async with EmulatorProcess(config) as emu:
            for database in params.databases:
                results.append(await _one_database(params, emu, database, Path(tmp)))
    return {
        "params": {
            **{k: v for k, v in asdict(params).items() if k != "databases"},
            "wb_minute_ms": 60_000 * TIME_SCALE,  # the time scale, kept readable when rounded
            "variants": list(MODES),
        },
        "runs": results,
        "targets": _targets(results),
    }


def _targets(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The finance page against the goals, per database."""
    out: dict[str, Any] = {}
    for r in results:
        finance = r["syncs"].get(FINANCE)
        if finance is None:
            continue
        cpu = finance["cpu_ms_per_page"][WBSYNC]
        out[r["database"]] = {
            "finance_cpu_ms_per_page": cpu,
            "finance_cpu_met": cpu <= TARGET_FINANCE_CPU_MS,
            "finance_ratio": finance["ratio_to_fastest_bare"],
            "finance_ratio_met": finance["ratio_to_fastest_bare"] <= TARGET_RATIO,
            # Whether the ratio can be met at all: the floor over the same fastest pipeline.
            "finance_floor_ratio": finance["floor_ratio_to_fastest_bare"],
            "finance_floor_ratio_met": finance["floor_ratio_to_fastest_bare"] <= TARGET_RATIO,
            "finance_commands_per_page": finance["redis_commands_per_page"],
            "finance_commands_met": finance["redis_commands_per_page"] <= TARGET_COMMANDS,
            "finance_wbsync_commands_per_page": finance["wbsync_commands_per_page"],
            "finance_wbsync_commands_met": finance["wbsync_commands_per_page"] <= TARGET_COMMANDS,
        }
    return out


def tables(result: dict[str, Any]) -> list[Any]:
    """Per database: CPU per page of wbsync and every bare variant, the ratio, commands."""
    out = []
    for r in result["runs"]:
        columns = [
            "sync",
            "rows/pg",
            *MODES,
            "x fastest",
            "x floor",
            "cmd/pg",
            "wbsync cmd/pg",
            "BullMQ cmd/job",
            "calls/pg",
        ]
        rows = [
            [
                name,
                s["rows_per_page"],
                *(s["cpu_ms_per_page"][m] for m in MODES),
                s["ratio_to_fastest_bare"],
                s["ratio_to_floor"],
                s["redis_commands_per_page"],
                s["wbsync_commands_per_page"],
                s["bullmq_commands_per_job"],
                s["client_calls_per_page"],
            ]
            for name, s in r["syncs"].items()
        ]
        title = f"page: worker CPU ms per page, {r['database']}"
        out.append(table(title, columns, rows))
    return out
