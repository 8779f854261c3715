"""``slots --scenario reports``: a fleet backfilling WB's paid storage report, task by task.

K cabinets each backfill D days of paid storage (WB builds it as a report task of at most 8
days: 90 days are 12 tasks) through the real stack: one process's worker of C slots for the
``paid-storage-sync`` queue, the reschedule service, the limiter in Redis, a database (a new
SQLite file, or a PostgreSQL database with ``--postgres``), and the WB emulator in a child
process, whose report tasks are ``new`` 2 s, ``processing`` until 20 s after their creation,
then ``done`` (WB seconds, scaled). Each task is created, waited for with the slot given back
(a deferral labelled ``report``, no attempt spent), downloaded (WB: 1 a minute, burst 1) and
stored.

WB's limits bound one cabinet's backfill from below: its first report built, then one
download a minute for each later task, ``(BUILD_S + (W - 1) x 60 s) x time scale``. The
makespan is from the jobs' enqueue to the last job's completion; slot efficiency is that bound
over the makespan, as ``slots`` measures it for rate-limit waits. The figures beside it say
where slot time went: runs (each one a slot taken), the seconds slots were held, the
seconds they slept in place, deferrals by reason, WB's 429s, status calls.

Each round starts afresh (a new key prefix, a new database, the emulator's buckets full and
counters zero); the machine's load average is read at each round's end.
"""

from __future__ import annotations

import asyncio
import math
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY
from pydantic import SecretStr

from wbsync.composition.workers import build_workers
from wbsync.config import Settings
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes
from wbsync.emulator.report_tasks import BUILD_S
from wbsync.errors import ConfigError
from wbsync.jobs.model import Outcome
from wbsync.shared.runtime import Runtime, open_runtime
from wbsync.store.datasets import DATASETS
from wbsync.syncs.paid_storage import DOWNLOAD, WINDOW_DAYS
from wbsync.system.clock import wb_today
from wbsync.wb.tokens import TokenType
from wbsync_bench.common import (
    fresh_database,
    median,
    ratio,
    redis_client,
    report_life,
    table,
    unique_prefix,
)
from wbsync_bench.upstream import EmulatorProcess

__all__ = ["COLUMNS", "QUEUE", "Params", "run", "tables"]

QUEUE = "paid-storage-sync"
_CREATE, _STATUS = "analytics.paid_storage", "analytics.paid_storage_status"
_DOWNLOAD_PERIOD_S = DOWNLOAD.limit_for(TokenType.PERSONAL).period_s  # 60 s, burst 1
_SECRET = "wbsync-bench-slots-secret"
_OUTCOMES = ("completed", "deferred", "failed", "abandoned", "cancelled")
COLUMNS = (
    "round",
    "makespan_s",
    "bound_s",
    "efficiency",
    "runs",
    "held_s",
    "slept_s",
    "report_deferrals",
    "rate_limit_deferrals",
    "status_calls",
    "upstream_429",
    "attempts_spent",
    "failed_jobs",
    "rows_ok",
    "load_1m",
)
"""Each round's figures, in the order the terminal's table and docs/benchmarks.md show them."""


@dataclass
class Params:
    """What to run."""

    cabinets: int = 50
    days: int = 90
    concurrency: int = 16
    time_scale: float = 0.1
    rounds: int = 3
    postgres: str | None = None

    def __post_init__(self) -> None:
        if self.cabinets < 1 or self.days < 1 or self.concurrency < 1 or self.rounds < 1:
            raise ConfigError("cabinets, days, concurrency and rounds must each be >= 1")
        if not self.time_scale > 0:
            raise ConfigError(f"time_scale must be > 0, got {self.time_scale}")

    @property
    def windows(self) -> int:
        """Report tasks per cabinet: D days in tasks of at most 8."""
        return math.ceil(self.days / WINDOW_DAYS)

    @property
    def bound_s(self) -> float:
        """What WB's limits force on one cabinet: its first report built, then one download
        a minute for each later task (scaled)."""
        return (BUILD_S + (self.windows - 1) * _DOWNLOAD_PERIOD_S) * self.time_scale


def _seller(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


def _metric(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _slot_figures() -> dict[str, float]:
    """The queue's slot figures so far in this process (the round takes differences)."""
    held = sum(
        _metric("wbsync_job_duration_seconds_sum", {"queue": QUEUE, "outcome": o})
        for o in _OUTCOMES
    )
    runs = sum(
        _metric("wbsync_job_duration_seconds_count", {"queue": QUEUE, "outcome": o})
        for o in _OUTCOMES
    )
    return {
        "held_s": held,
        "runs": runs,
        "slept_s": _metric("wbsync_slot_sleep_seconds_total", {"queue": QUEUE}),
        "report_deferrals": _metric("wbsync_deferrals_total", {"queue": QUEUE, "reason": "report"}),
        "rate_limit_deferrals": _metric(
            "wbsync_deferrals_total", {"queue": QUEUE, "reason": "rate_limit"}
        ),
    }


class _Fleet:
    """One round: the cabinets, the worker, the jobs to completion."""

    def __init__(self, runtime: Runtime, twin: Emulator, params: Params) -> None:
        self.runtime = runtime
        self.twin = twin
        self.params = params
        self.finished = 0
        self.failed = 0
        self.done = asyncio.Event()

    def seen(self, outcome: Outcome) -> None:
        if outcome.outcome in ("completed", "failed"):
            self.finished += 1
            self.failed += outcome.outcome == "failed"
            if self.finished == self.params.cabinets:
                self.done.set()

    async def run(self) -> dict[str, Any]:
        p, store = self.params, self.runtime.store
        ids = [
            (await store.cabinets.add(f"slots-{i}", self.twin.token(_seller(i)), _seller(i))).id
            for i in range(p.cabinets)
        ]
        [worker] = build_workers(
            self.runtime, [QUEUE], concurrency=p.concurrency, on_outcome=self.seen
        )
        queue = self.runtime.queue(QUEUE)
        before = _slot_figures()
        await worker.start()
        try:
            started = time.perf_counter()
            await queue.enqueue_many([str(i) for i in ids])
            try:
                await asyncio.wait_for(self.done.wait(), 60.0 + 3 * p.bound_s)
                makespan = time.perf_counter() - started
            except TimeoutError:
                makespan = math.nan  # some job did not end within the budget: no figure
        finally:
            await worker.close()
        after = _slot_figures()
        return {
            "makespan_s": makespan,
            **{k: after[k] - before[k] for k in after},
            "attempts_spent": self.failed,  # a failed run spends one; a deferral none
            "failed_jobs": (await queue.counts())["failed"],
            "rows_ok": await self._rows_ok(ids),
        }

    async def _rows_ok(self, ids: list[int]) -> bool:
        """Every cabinet's stored rows are the report's, key by key."""
        spec, today = DATASETS["paid_storage"], self.twin.config.anchor_date
        first = today - timedelta(days=self.params.days - 1)
        for i, cabinet_id in enumerate(ids):
            want = self.twin.expected(_seller(i), _CREATE, date_from=first, date_to=today)
            rows = await self.runtime.store.fetch("paid_storage", cabinet_id)
            if {spec.row_key(r) for r in rows} != {spec.row_key(r) for r in want}:
                return False
        return True


async def _round(url: str, emu: EmulatorProcess, twin: Emulator, params: Params) -> dict[str, Any]:
    prefix = unique_prefix("slots-reports")
    await emu.reset()
    async with redis_client(url, cleanup_prefix=prefix):  # the round's keys deleted after it
        with tempfile.TemporaryDirectory(prefix="wbsync-slots-") as tmp:
            async with fresh_database(params.postgres, Path(tmp), name="slots") as database_url:
                settings = Settings(
                    redis_url=url,
                    redis_prefix=prefix,
                    database_url=database_url,
                    secret_key=SecretStr(_SECRET),
                    wb_base_url=emu.base_url,
                    time_scale=params.time_scale,
                    sync_report_horizon_days=params.days,
                    log_level="WARNING",
                )
                async with open_runtime(settings) as runtime:
                    got = await _Fleet(runtime, twin, params).run()
    counters = (await emu.counters())["sellers"]
    methods = [m for seller in counters.values() for m in seller.values()]
    got["upstream_429"] = sum(int(m.get("rate_limited", 0)) for m in methods)
    got["status_calls"] = sum(
        int(seller.get(_STATUS, {}).get("requests", 0)) for seller in counters.values()
    )
    got["bound_s"] = params.bound_s
    got["efficiency"] = ratio(params.bound_s, got["makespan_s"])
    got["load_1m"] = os.getloadavg()[0]
    return got


def emulator_config(params: Params) -> EmulatorConfig:
    """WB's report task life (a built report kept long enough at any scale), time-scaled."""
    return EmulatorConfig(
        time_scale=params.time_scale,
        anchor_date=wb_today(),
        sizes=SellerSizes(products=2),
        report_tasks=report_life(params.time_scale),
    )


async def run(url: str, params: Params | None = None) -> dict[str, Any]:
    """``params.rounds`` rounds of the fleet's backfill; medians over them."""
    params = params or Params()
    config = emulator_config(params)
    twin = Emulator(config)  # not served: its tokens and expected rows are the child's
    rounds = []
    async with EmulatorProcess(config) as emu:
        for r in range(params.rounds):
            rounds.append({"round": r + 1, **await _round(url, emu, twin, params)})
    return {
        "params": {
            **{k: v for k, v in asdict(params).items() if k != "postgres"},
            "windows": params.windows,
            "database": "postgresql" if params.postgres else "sqlite",
        },
        "bound_s": params.bound_s,
        "makespan_s": median([x["makespan_s"] for x in rounds]),
        "efficiency": median([x["efficiency"] for x in rounds]),
        "load_1m": median([x["load_1m"] for x in rounds]),
        "rounds": rounds,
    }


def tables(result: dict[str, Any]) -> list[Any]:
    """One row per round."""
    p = result["params"]
    return [
        table(
            f"slots, report tasks: K={p['cabinets']} cabinets x {p['windows']} tasks, "
            f"C={p['concurrency']}, time scale {p['time_scale']:g} (median efficiency "
            f"{result['efficiency']:.3f})",
            list(COLUMNS),
            [[x.get(c) for c in COLUMNS] for x in result["rounds"]],
        )
    ]
