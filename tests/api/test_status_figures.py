"""The status's figures over every cabinet: the lag of scheduled runs (a metric too), and the
queues recorded by another process that this one does not load.

Real Redis, a real database per backend, the emulator on loopback; the app in process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from tests.support.api import AUTH, SELLERS
from tests.support.waiting import wait_for
from wbsync.composition.service import TokenGaps
from wbsync.composition.workers import build_workers
from wbsync.jobs.fanout import FanOut
from wbsync.jobs.lag import LAG_WINDOW_S
from wbsync.jobs.leader import FanOutLeases
from wbsync.jobs.model import Outcome
from wbsync.observability.metrics import sample
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.syncs import SYNCS

AddCabinet = Callable[..., Awaitable[Cabinet]]
FINANCE = "rnp-finance-sync"
CATALOG = "catalog-sync"


async def _status(api: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    reply = await api.get("/api/v1/status", params=params, headers=AUTH)
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


async def test_the_lag_of_scheduled_runs_is_a_metric_and_a_status_figure(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: AddCabinet
) -> None:
    """Real runs the fan-out schedules (an interval of 0.4 s, every cabinet's job run by a real
    worker against the emulator): each run's lag is observed once, at its first start, in the
    histogram and in Redis, and the status API and page show the queue's figure."""
    queue = CATALOG
    cabinets = [await add_cabinet(i) for i in range(len(SELLERS))]
    before = sample("wbsync_sync_lag_seconds_count", queue=queue)
    outcomes: list[Outcome] = []
    [worker] = build_workers(api_runtime, [queue], concurrency=2, on_outcome=outcomes.append)
    fanout = FanOut(
        {queue: api_runtime.queue(queue)}, TokenGaps(api_runtime).active_ids, {queue: 0.4}
    )
    leases = FanOutLeases(
        api_runtime.redis, prefix=api_runtime.settings.redis_prefix, lease_ms=3000
    )
    stop = asyncio.Event()
    await worker.start()
    fanning = asyncio.create_task(fanout.run(stop, leases))
    try:
        # Every cabinet twice: once at the first pass, then again at its own time.
        await wait_for(lambda: _completed(outcomes) >= 2 * len(cabinets))
        stop.set()
        await fanning
        await wait_for(lambda: _no_live(api_runtime, queue))
    finally:
        stop.set()
        await fanning
        await worker.close()
    runs = _completed(outcomes)
    assert sample("wbsync_sync_lag_seconds_count", queue=queue) - before == runs  # once each
    assert sample("wbsync_sync_lag_seconds_sum", queue=queue) >= 0

    async def figure_shown() -> bool:  # the status index is rebuilt within INDEX_TTL_S
        return queue in (await _status(api))["lag"]

    await wait_for(figure_shown)
    body = await _status(api)
    figure = body["lag"][queue]
    assert figure["runs"] == runs
    assert 0 <= figure["p50_s"] <= figure["p95_s"] <= figure["max_s"]
    assert body["lag_window_s"] == LAG_WINDOW_S
    assert set(body["lag"]) == {queue}  # no other queue ran
    html = (await api.get("/", headers=AUTH)).text
    assert f"{figure['p95_s']:.1f} s" in html and "lag p95" in html


def _completed(outcomes: list[Outcome]) -> int:
    return sum(1 for o in outcomes if o.outcome == "completed")


async def _no_live(runtime: Runtime, queue: str) -> bool:
    return not await runtime.queue(queue).live_jobs()


async def test_a_run_of_a_queue_not_loaded_here_is_shown_so_and_never_fails_the_page(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: AddCabinet
) -> None:
    """A plugin's queue recorded by another process sharing the database (this one does not
    load the plugin): the page and the status answer 200 and mark the run not loaded here."""
    cabinet = await add_cabinet(0)
    elsewhere = "plugin-elsewhere-sync"
    assert elsewhere not in SYNCS
    await api_runtime.store.runs.succeeded(cabinet.id, elsewhere, pages=2, rows=7)
    await api_runtime.store.runs.succeeded(cabinet.id, FINANCE, pages=1, rows=1)

    rows: list[dict[str, Any]] = []

    bodies: list[dict[str, Any]] = []

    async def listed() -> bool:  # the index is rebuilt within INDEX_TTL_S
        bodies[:] = [await _status(api, q=cabinet.name)]
        rows[:] = [c for c in bodies[0]["cabinets"] if c["cabinet"]["id"] == cabinet.id]
        return bool(rows) and len(rows[0]["runs"]) == 2

    await wait_for(listed)
    row = rows[0]
    assert bodies[0]["unloaded_queues"] == [elsewhere]
    assert elsewhere not in bodies[0]["queues"]
    # Known queues first, in their declared order; the unknown one after, marked.
    assert [(r["queue"], r["loaded"]) for r in row["runs"]] == [
        (FINANCE, True),
        (elsewhere, False),
    ]
    page = await api.get("/", params={"q": cabinet.name}, headers=AUTH)
    assert page.status_code == 200, page.text
    assert f"{elsewhere} (not loaded here):" in page.text
    assert f'<tr class="unloaded"><td>{elsewhere}</td>' in page.text
