"""``slots``: K cabinets pull P pages each of the finance report (1 a minute, burst 1).

Every page goes through the real stack: a BullMQ worker of ``concurrency`` slots runs one job
per cabinet, the job pages through the finance detailed report with the real ``WbClient``
against the WB emulator (a child process on loopback, time-scaled like the limiter), and every
request takes a token from the shared limiter in Redis. Three ways to wait for a window:

* ``defer`` (wbsync's design): the processor is wrapped by ``RescheduleService``; a wait over
  the threshold (5 s, scaled) moves the job to delayed for exactly the wait, no attempt spent.
* ``block``: the processor is not wrapped, so there is no deferral context and ``acquire``
  sleeps in the slot. Its ceiling is two periods plus a margin; the margin here is one more
  period, so the ceiling (three periods) is never reached by design: one job per cabinet
  means a job waits at most one period for its own bucket, two if WB's 429 pushed the bucket.
* ``retry``: the processor runs in the deferral context, turns ``RateLimitDeferred`` into a
  plain error, and BullMQ retries the job after a fixed backoff of one period, spending an
  attempt per window (the job gets ``3 * P`` attempts).

Each round runs every mode once, in ABBA order, with fresh buckets (new key prefix, emulator
reset). The lower bound of a makespan is ``(P - burst) * period`` (each cabinet's own windows),
or the slot-work bound ``K * P * page_s / C`` when larger (``page_s``: the median time of one
page in defer mode, where pages do not wait). The limiter is wired as in production, with its
refill margin (real milliseconds added to each token's interval against clock jitter with WB).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from prometheus_client import REGISTRY
from redis.asyncio import Redis

from wbsync.config import Settings
from wbsync.emulator import EmulatorConfig, SellerSizes
from wbsync.errors import RateLimitDeferred
from wbsync.jobs.handle import JobHandle, Processor
from wbsync.jobs.model import Outcome
from wbsync.jobs.queue import SyncQueue
from wbsync.jobs.reschedule import RescheduleService
from wbsync.jobs.worker import SyncWorker
from wbsync.observability.context import run_with_rate_limit_deferral
from wbsync.ratelimit import RateLimiter
from wbsync.shared.runtime import client_options, limiter_options
from wbsync.syncs.finance import FINANCE_DETAILED_REPORT, finance_detailed_report
from wbsync.wb.client import WbClient
from wbsync.wb.http import HttpPool
from wbsync.wb.tokens import Category, TokenType, mint_token
from wbsync_bench.common import delete_prefix, median, ratio, rounds, table, unique_prefix
from wbsync_bench.upstream import EmulatorProcess

MODES = ("defer", "block", "retry")
COLUMNS = (
    "makespan_s",
    "lower_bound_s",
    "efficiency",
    "slot_sleep_s",
    "upstream_requests",
    "upstream_429",
    "deferrals",
    "attempts_made_max",
    "failed_jobs",
    "startup_aware_bound_s",
)
"""Each mode's figures, in the order the terminal's table and docs/benchmarks.md show them."""
_LIMIT = FINANCE_DETAILED_REPORT.limit_for(TokenType.PERSONAL)  # 1 per 60 s, burst 1
_THRESHOLD_MS = 5000.0
_PAGE_ROWS = 5
_CATEGORIES = (Category.FINANCE,)
_ANCHOR_DAYS = 30


@dataclass
class Params:
    """What to run."""

    cabinets: int = 20
    pages: int = 6
    concurrency: int = 1
    time_scale: float = 0.01
    rounds: int = 2
    modes: tuple[str, ...] = MODES

    @property
    def period_s(self) -> float:
        """The scaled window of the finance report."""
        return _LIMIT.period_s * self.time_scale


class WindowClosedError(RuntimeError):
    """Retry mode's plain error for a closed window: BullMQ retries it after the backoff."""


@dataclass
class _Run:
    """What one mode's run observed."""

    mode: str
    started: float = 0.0
    finished: float = 0.0
    completed: int = 0
    deferrals: int = 0
    attempts_made_max: int = 0
    page_s: list[float] = field(default_factory=list)
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def on_outcome(self, outcome: Outcome, expected: int) -> None:
        if outcome.outcome == "deferred":
            self.deferrals += 1
        elif outcome.outcome == "completed":
            self.completed += 1
            if self.completed == expected:
                self.finished = time.perf_counter()
                self.done.set()


class _QuietRetries(logging.Filter):
    """Drops the worker's error log of retry mode's expected failures (they are the point)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], WindowClosedError))


def _pages_processor(
    clients: dict[str, WbClient], params: Params, run: _Run
) -> Callable[[JobHandle], Awaitable[int]]:
    """The sync: P pages of the finance report, cursor and page count saved after each."""
    day_to = EmulatorConfig().anchor_date
    day_from = day_to - timedelta(days=_ANCHOR_DAYS)

    async def process(job: JobHandle) -> int:
        run.attempts_made_max = max(run.attempts_made_max, job.attempts_made)
        done = int(job.data.get("pages", 0))
        if done >= params.pages:
            return done
        pager = finance_detailed_report(
            clients[job.cabinet],
            date_from=day_from,
            date_to=day_to,
            rrd_id=int(job.cursor or 0),
            limit=_PAGE_ROWS,
        )
        async with contextlib.aclosing(pager) as pages:  # type: ignore[type-var]
            began = time.perf_counter()
            async for page in pages:
                done += 1
                await job.update_data({"cursor": page.cursor, "pages": done})
                run.page_s.append(time.perf_counter() - began)
                if done >= params.pages:
                    break
                began = time.perf_counter()
        return done

    return process


def _mode_processor(mode: str, inner: Processor, params: Params) -> Processor:
    threshold = _THRESHOLD_MS * params.time_scale
    if mode == "defer":
        return RescheduleService(threshold_ms=threshold).wrap(inner)
    if mode == "block":
        return inner

    async def retrying(job: JobHandle) -> Any:
        try:
            return await run_with_rate_limit_deferral(threshold, lambda: inner(job))
        except RateLimitDeferred as deferred:
            raise WindowClosedError(f"window closed for {deferred.wait_ms} ms") from None

    return retrying


def _slot_sleep(queue: str) -> float:
    value = REGISTRY.get_sample_value("wbsync_slot_sleep_seconds_total", {"queue": queue})
    return value or 0.0


class _Bench:
    """One emulator, one Redis, one HTTP client: runs the modes."""

    def __init__(self, url: str, emu: EmulatorProcess, http: HttpPool) -> None:
        self.url = url
        self.emu = emu
        self.http = http

    async def run_mode(self, mode: str, params: Params, r: int) -> dict[str, Any]:
        prefix = unique_prefix(f"slots:{mode}")
        name = f"bench-slots-{mode}-{r}-{prefix[-6:]}"
        await self.emu.reset()
        redis = Redis.from_url(self.url)
        # Block mode's ceiling: two periods plus one more (see the module docstring), under a
        # cap of three periods. The refill margin is production's, as the runtime wires it.
        period_ms = int(_LIMIT.period_s * 1000.0)
        settings = Settings(
            wb_base_url=self.emu.base_url,
            time_scale=params.time_scale,
            redis_prefix=prefix,
            wait_ceiling_margin_ms=period_ms,
            wait_ceiling_cap_ms=3 * period_ms,
        )
        limiter = RateLimiter(redis, limiter_options(settings))
        sellers = [f"00000000-0000-4000-8000-{i:012d}" for i in range(params.cabinets)]
        key = self.emu.config.signing_key
        clients = {
            s: WbClient(
                s,
                mint_token(key=key, seller_id=s, categories=_CATEGORIES),
                limiter,
                options=client_options(settings),
                http=self.http,
            )
            for s in sellers
        }
        run = _Run(mode)
        processor = _mode_processor(mode, _pages_processor(clients, params, run), params)
        period_ms = int(params.period_s * 1000)
        queue = SyncQueue(
            name,
            redis_url=self.url,
            prefix=f"{prefix}:q",
            attempts=3 * params.pages,
            backoff_ms=period_ms,
            backoff_type="fixed",
        )
        worker = SyncWorker(
            name,
            processor,
            redis_url=self.url,
            prefix=f"{prefix}:q",
            concurrency=params.concurrency,
            on_outcome=lambda o: run.on_outcome(o, params.cabinets),
        )
        sleep_before = _slot_sleep(name)
        await worker.start()
        try:
            run.started = time.perf_counter()
            await queue.enqueue_many(sellers)
            await self._until_done(run, queue, params)
            failed = (await queue.counts())["failed"]
        finally:
            await worker.close()
            await queue.obliterate()
            await queue.close()
            await delete_prefix(redis, prefix)
            await redis.aclose()
        counters = (await self.emu.counters())["total"]
        return {
            "makespan_s": run.finished - run.started if run.finished else float("nan"),
            "slot_sleep_s": _slot_sleep(name) - sleep_before,
            "upstream_requests": counters["requests"],
            "upstream_429": counters["rate_limited"],
            "deferrals": run.deferrals,
            "attempts_made_max": run.attempts_made_max,
            "failed_jobs": failed,
            "page_s": median(run.page_s),
        }

    async def _until_done(self, run: _Run, queue: SyncQueue, params: Params) -> None:
        budget_s = 60 + params.cabinets * params.pages * params.period_s * 3
        deadline = time.perf_counter() + budget_s
        while not run.done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.done.wait(), timeout=0.5)
            counts = await queue.counts()
            if run.completed + counts["failed"] >= params.cabinets and not run.done.is_set():
                return  # some jobs failed for good: the run is over, makespan undefined
            if time.perf_counter() > deadline:
                return


def schedule(modes: tuple[str, ...], n: int) -> list[tuple[int, str]]:
    """ABBA rounds of the quick modes with ``block`` once in the middle (it takes a minute).

    The order is a palindrome, so a machine drifting during the run shifts both sides of the
    defer/block comparison alike; the quick modes get ``n`` runs each, block one.
    """
    quick = tuple(m for m in modes if m != "block")
    order = list(rounds(quick, n))
    if "block" in modes:
        order.insert(len(order) // 2, (0, "block"))
    return order


def emulator_config(params: Params) -> EmulatorConfig:
    """Enough finance rows for P full pages (never the last page), time-scaled."""
    rows = (params.pages + 1) * _PAGE_ROWS
    return EmulatorConfig(
        time_scale=params.time_scale,
        sizes=SellerSizes(report_rows=rows),
        page_size={"finance.detailed_report": _PAGE_ROWS},
    )


async def _run_k(bench: _Bench, params: Params) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in params.modes}
    for r, mode in schedule(params.modes, params.rounds):
        runs[mode].append(await bench.run_mode(mode, params, r))
    page_s = median([x["page_s"] for x in runs.get("defer", [])]) if "defer" in runs else 0.0
    window_bound = (params.pages - _LIMIT.burst) * params.period_s
    work_bound = params.cabinets * params.pages * (page_s or 0.0) / params.concurrency
    lower = max(window_bound, work_bound)
    # With C slots the K first pages cannot all start at once: the last cabinet's windows start
    # after (K - 1) // C pages. Approximate (median page time), for reading the gap only.
    startup = ((params.cabinets - 1) // params.concurrency + 1) * (page_s or 0.0)
    # The limiter spaces tokens by interval + refill margin (2 % of the scaled interval, at
    # most 25 real ms), so the pacing itself is a little longer than the window bound.
    defaults = Settings()
    interval_ms = _LIMIT.interval_ms * params.time_scale
    margin_ms = min(
        defaults.limiter_refill_margin_ratio * interval_ms,
        defaults.limiter_refill_margin_cap_ms,
    )
    margin_s = margin_ms / 1000.0
    paced = (params.pages - _LIMIT.burst) * (params.period_s + margin_s)
    modes = {}
    for mode, results in runs.items():
        makespan = median([x["makespan_s"] for x in results])
        modes[mode] = {
            "makespan_s": makespan,
            "lower_bound_s": lower,
            "efficiency": ratio(lower, makespan),
            "slot_sleep_s": median([x["slot_sleep_s"] for x in results]),
            "upstream_requests": max(x["upstream_requests"] for x in results),
            "upstream_429": sum(x["upstream_429"] for x in results),  # every round's, summed
            "deferrals": max(x["deferrals"] for x in results),
            "attempts_made_max": max(x["attempts_made_max"] for x in results),
            "failed_jobs": sum(x["failed_jobs"] for x in results),
            "makespans_s": [x["makespan_s"] for x in results],
            "startup_aware_bound_s": paced + startup,
        }
    out: dict[str, Any] = {"modes": modes, "page_s": page_s}
    if "defer" in modes and "block" in modes:
        out["speedup_defer_vs_block"] = ratio(
            modes["block"]["makespan_s"], modes["defer"]["makespan_s"]
        )
    return out


async def run(
    url: str, params: Params | None = None, *, sweep: tuple[int, ...] = ()
) -> dict[str, Any]:
    """The modes at ``params.cabinets`` (and, with ``sweep``, at each K of it)."""
    params = params or Params()
    async with (
        EmulatorProcess(emulator_config(params)) as emu,
        HttpPool(max_connections=200) as http,
    ):
        bench = _Bench(url, emu, http)
        quiet = _QuietRetries()
        logging.getLogger("wbsync.jobs.worker").addFilter(quiet)
        try:
            result = await _run_k(bench, params)
            curve = {}
            for k in sweep:
                point = (
                    result
                    if k == params.cabinets
                    # One round per other point: block at K=50 alone takes 150 s.
                    else await _run_k(bench, replace(params, cabinets=k, rounds=1))
                )
                curve[str(k)] = {m: v["makespan_s"] for m, v in point["modes"].items()}
        finally:
            logging.getLogger("wbsync.jobs.worker").removeFilter(quiet)
    result["params"] = {
        "cabinets": params.cabinets,
        "pages": params.pages,
        "concurrency": params.concurrency,
        "time_scale": params.time_scale,
        "period_s": params.period_s,
        "burst": _LIMIT.burst,
        "rounds": params.rounds,
    }
    if sweep:
        result["sweep"] = curve
    return result


def tables(result: dict[str, Any]) -> list[Any]:
    """Modes side by side (and the sweep)."""
    p = result["params"]
    rows = [[mode, *(m[c] for c in COLUMNS)] for mode, m in result["modes"].items()]
    speedup = result.get("speedup_defer_vs_block", float("nan"))
    out = [
        table(
            f"slots: K={p['cabinets']} cabinets x P={p['pages']} pages, C={p['concurrency']}"
            f" (speedup defer vs block: {speedup:.1f}x)",
            ["mode", *COLUMNS],
            rows,
        )
    ]
    if "sweep" in result:
        modes = list(next(iter(result["sweep"].values())))
        rows = [[k, *(v[m] for m in modes)] for k, v in result["sweep"].items()]
        out.append(table("slots sweep: makespan (s) by K", ["K", *modes], rows))
    return out
