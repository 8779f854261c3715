"""``wbsync demo``: every sync once for a handful of demo cabinets, on embedded defaults.

A private Redis (unless ``WBSYNC_REDIS_URL`` is set; then keys under a prefix of the demo's own),
a fresh SQLite file, and the WB emulator at time scale 0.01 (WB's minute is 0.6 s). One worker
slot per queue. The summary compares what was stored with what the emulator holds, counts
deferrals, upstream 429s and slot time spent sleeping, and sets the makespan against the lower
bound that WB's limits allow.
"""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from rich.console import Console

from wbsync.composition.service import active_cabinet_ids
from wbsync.composition.workers import build_workers
from wbsync.config import Settings
from wbsync.demo.expected import expected_datasets, expected_methods
from wbsync.demo.progress import Progress, Tally, stored_rows
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes, running_emulator
from wbsync.emulator.wbdocs import METHODS
from wbsync.errors import WbSyncError
from wbsync.jobs.fanout import FanOut
from wbsync.observability.metrics import SLOT_SLEEP, SYNC_PAGES, queue_value, upstream_rate_limited
from wbsync.shared.runtime import Runtime, open_runtime
from wbsync.store.ledger import PriceTarget
from wbsync.syncs import SYNCS
from wbsync.system import clock
from wbsync.wb.endpoints import ENDPOINTS

DEMO_SCALE = 0.01
DEMO_REPORT_HORIZON_DAYS = 8
"""How far back the demo's dated report tasks reach: one window of paid storage."""
DEMO_SIZES = SellerSizes(products=60, campaigns=6, report_rows=60, orders=40, sales=30)
# Pages small enough that the brutal buckets (finance, sales) need several windows.
DEMO_PAGES = {"finance.detailed_report": 10, "statistics.orders": 10, "statistics.sales": 10}
# The emulator shares the demo's process and event loop with every queue's busy worker, so when
# it sees a request lags by tens of ms more or less than when our limiter granted it; it
# forgives 100 ms.
DEMO_GRACE_MS = 100.0


def demo_queues() -> list[str]:
    """The queues the demo runs and checks row by row, read from the registry: every sync
    (wbsync's and the loaded plugins') whose methods the emulator serves and whose datasets'
    rows it computes (``expected.expected_methods``); a plugin's other syncs run under
    ``wbsync run``."""
    computed = expected_methods()
    return [
        name
        for name, sync in SYNCS.items()
        if all(m in METHODS for m in sync.methods) and all(d in computed for d in sync.datasets)
    ]


def demo_sizes(settings: Settings) -> SellerSizes:
    """The demo sellers' sizes, with no more days of dated history than the shortest window a
    sync pulls, so that every dataset's expected rows are its method's over one window
    (``expected.window``)."""
    days = min(
        DEMO_SIZES.days,
        settings.sync_stats_days,
        settings.sync_funnel_days,
        settings.sync_lookback_days + 1,
    )
    return DEMO_SIZES.model_copy(update={"days": days})


@dataclass(frozen=True)
class Baseline:
    """The process-wide counters before the demo, so the summary counts only the demo."""

    pages: dict[str, float]
    slot_sleep: dict[str, float]
    upstream_429: dict[str, float]

    @classmethod
    def now(cls) -> Baseline:
        """The counters' values now."""
        return cls(
            pages={q: queue_value(SYNC_PAGES, q) for q in demo_queues()},
            slot_sleep={q: queue_value(SLOT_SLEEP, q) for q in demo_queues()},
            upstream_429={q: upstream_rate_limited(q) for q in demo_queues()},
        )


async def _register(runtime: Runtime, emu: Emulator, cabinets: int) -> dict[int, str]:
    """Demo cabinets with Personal tokens, and a few price targets for pricing-bulk each."""
    sellers = {}
    for i in range(cabinets):
        seller = str(uuid.UUID(int=0xDE30_0000 + i))
        cabinet = await runtime.store.cabinets.add(f"demo-{i + 1}", emu.token(seller), seller)
        goods = emu.expected(seller, "prices.goods_list")[:5]
        await runtime.store.ledger.set_price_targets(
            cabinet.id,
            [
                PriceTarget(nm_id=g["nmID"], price=int(g["sizes"][0]["price"]) + 100, discount=15)
                for g in goods
            ],
        )
        sellers[cabinet.id] = seller
    return sellers


def _lower_bound_s(emu: Emulator, time_scale: float) -> float:
    """The longest (requests - burst) x interval over every (seller, limit group) bucket, less
    the emulator's grace (given once: it keeps the debt of an early request)."""
    requests: Counter[tuple[str, str]] = Counter()
    limits = {}
    for seller, methods in emu.counters.snapshot()["sellers"].items():
        for method, counts in methods.items():
            ep = ENDPOINTS[method]
            requests[(seller, ep.group)] += counts["requests"]
            limits[ep.group] = ep.limits.personal
    bound = 0.0
    for (_, group), n in requests.items():
        limit = limits[group]
        bound = max(bound, max(0, n - limit.burst) * limit.interval_ms / 1000 * time_scale)
    return max(0.0, bound - emu.config.grace_ms / 1000)


async def _summary(
    runtime: Runtime,
    emu: Emulator,
    sellers: dict[int, str],
    state: Tally,
    before: Baseline,
    makespan_s: float,
) -> dict[str, Any]:
    options = runtime.sync_options
    expected = {
        cid: expected_datasets(emu, seller, today=clock.wb_today(), options=options)
        for cid, seller in sellers.items()
    }
    queues = {}
    for name in demo_queues():
        sync = SYNCS[name]
        # A fleet-wide sync's rows are stored once, the same for every seller.
        owners = list(sellers)[:1] if sync.fleet else list(sellers)
        queues[name] = {
            "pages": int(queue_value(SYNC_PAGES, name) - before.pages[name]),
            "rows_stored": await stored_rows(runtime.store, name),
            "rows_expected": sum(len(expected[cid][d]) for cid in owners for d in sync.datasets),
            "deferrals": state.count(name, "deferred"),
            "upstream_429": int(upstream_rate_limited(name) - before.upstream_429[name]),
            "slot_sleep_s": round(queue_value(SLOT_SLEEP, name) - before.slot_sleep[name], 3),
        }
    return {
        "queues": queues,
        "makespan_s": round(makespan_s, 3),
        "lower_bound_s": round(_lower_bound_s(emu, runtime.settings.time_scale), 3),
        "cabinets": len(sellers),
        "failed_runs": sum(state.count(q, "failed") for q in demo_queues()),
        "upstream_429_total": emu.counters.total("rate_limited"),
    }


async def run_demo(
    base: Settings,
    *,
    cabinets: int,
    database: Path,
    progress: Console | None,
    timeout_s: float = 110.0,
) -> dict[str, Any]:
    """Run the demo; returns the summary (see the module docstring). The live table goes to
    ``progress`` when that is a terminal."""
    await asyncio.to_thread(database.unlink, missing_ok=True)
    settings = base.model_copy(
        update={
            "time_scale": DEMO_SCALE,
            "database_url": f"sqlite+aiosqlite:///{database}",
            "secret_key": base.secret_key or SecretStr(secrets.token_urlsafe(32)),
            "redis_prefix": f"{base.redis_prefix}-demo-{uuid.uuid4().hex[:8]}",
            # The dated report tasks' recent days, not a history's backfill (12 paid storage
            # tasks a cabinet by default): the demo shows each report's life once a cabinet.
            "sync_report_horizon_days": DEMO_REPORT_HORIZON_DAYS,
        }
    )
    config = EmulatorConfig(
        time_scale=DEMO_SCALE,
        sizes=demo_sizes(settings),
        page_size=DEMO_PAGES,
        anchor_date=clock.wb_today(),
        grace_ms=DEMO_GRACE_MS,
        serve_disabled_in_docs=True,  # the demo shows every sync, the booking monitor's too
    )
    async with running_emulator(config) as emu:
        settings = settings.model_copy(update={"wb_base_url": emu.base_url})
        async with open_runtime(settings, embedded_redis=True) as runtime:
            try:
                return await _run(runtime, emu, cabinets, progress, timeout_s)
            finally:
                await _forget(runtime)


async def _run(
    runtime: Runtime, emu: Emulator, cabinets: int, console: Console | None, timeout_s: float
) -> dict[str, Any]:
    sellers = await _register(runtime, emu, cabinets)
    names = demo_queues()
    fleet = frozenset(name for name in names if SYNCS[name].fleet)
    state = Tally(cabinets=cabinets, queues=tuple(names), fleet=fleet)
    workers = build_workers(runtime, names, concurrency=1, on_outcome=state.record)
    before = Baseline.now()
    queues = {name: runtime.queue(name) for name in names}
    fanout = FanOut(
        queues, lambda: active_cabinet_ids(runtime), dict.fromkeys(names, 3600.0), fleet=fleet
    )
    progress = Progress(state, queues, runtime.store, console=console)
    started = clock.monotonic()
    for worker in workers:
        await worker.start()
    try:
        await fanout.run_once()
        async with progress:
            await asyncio.wait_for(state.done.wait(), timeout=timeout_s)
    except TimeoutError:
        raise WbSyncError(
            f"the demo did not finish within {timeout_s:g} s; not done: {state.unfinished()}"
        ) from None
    finally:
        makespan = clock.monotonic() - started
        for worker in workers:
            await worker.close()
    return await _summary(runtime, emu, sellers, state, before, makespan)


async def _forget(runtime: Runtime) -> None:
    """Delete the demo's Redis keys (it may have run on a shared server)."""
    async for key in runtime.redis.scan_iter(match=f"{runtime.settings.redis_prefix}*"):
        await runtime.redis.delete(key)
