"""What ``scaleout`` reads of a run: the limits' lower bound on its time, and its runs'
progress and pages per sync (from ``sync_runs``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select

from wbsync.emulator.tokens import Kind
from wbsync.emulator.wbdocs import METHODS
from wbsync.store import Database
from wbsync.store.schema import sync_runs
from wbsync_bench.common import syncs


def lower_bound_s(counters: dict[str, Any], time_scale: float, grace_s: float) -> float:
    """The busiest bucket's requests beyond its burst, times its interval (scaled seconds), less
    the emulator's grace (it lets the last request through that much early: the debt is kept, so
    the grace is given once, not per request).

    Requests WB refused count too: the emulator takes a token only for the ones it let through,
    but every one of them had to wait its turn.
    """
    worst = 0.0
    for methods in counters.get("sellers", {}).values():
        per_group: dict[str, tuple[int, float, int]] = {}
        for method, count in methods.items():
            spec = METHODS.get(method)
            rate = spec.rate(Kind.PERSONAL) if spec else None
            if spec is None or rate is None:
                continue
            interval = rate.period_s / rate.limit * time_scale
            done, _, burst = per_group.get(spec.group, (0, interval, rate.burst))
            per_group[spec.group] = (done + int(count["requests"]), interval, burst)
        for done, interval, burst in per_group.values():
            worst = max(worst, max(0, done - burst) * interval)
    return max(0.0, worst - grace_s)


async def progress(database: Database, since: datetime) -> tuple[int, int, int, int]:
    """(succeeded, failed for good, pages, rows) of the runs recorded since ``since``."""
    async with database.connection() as conn:
        ok = sync_runs.c.success_at >= since
        failed = (sync_runs.c.failure_at >= since) & (
            sync_runs.c.success_at.is_(None) | (sync_runs.c.success_at < since)
        )
        row = (
            await conn.execute(
                select(
                    func.count().filter(ok),
                    func.count().filter(failed),
                    func.coalesce(func.sum(sync_runs.c.success_pages).filter(ok), 0),
                    func.coalesce(func.sum(sync_runs.c.success_rows).filter(ok), 0),
                )
            )
        ).one()
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])


async def per_sync(database: Database, since: datetime, cabinets: int) -> dict[str, Any]:
    """Pages and rows a cabinet's run of each sync took (from ``sync_runs``); a fleet-wide
    sync's, its one run for the fleet (whichever cabinet carried it), not shared out."""
    async with database.connection() as conn:
        rows = await conn.execute(
            select(
                sync_runs.c.sync,
                func.sum(sync_runs.c.success_pages),
                func.sum(sync_runs.c.success_rows),
            )
            .where(sync_runs.c.success_at >= since)
            .group_by(sync_runs.c.sync)
        )
        fleet = {name for name, sync in syncs().items() if sync.fleet}
        out = {}
        for sync, pages, stored in rows:
            runs = 1 if sync in fleet else cabinets
            out[sync] = {"pages": int(pages) / runs, "rows": int(stored) / runs}
        return out
