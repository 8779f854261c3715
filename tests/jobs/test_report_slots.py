"""Report tasks through the real job stack (BullMQ workers, the reschedule service, the limiter,
the emulator, a database) at time scale: the slots a report sync holds while WB builds its
reports, the deferral's own label, and a fleet backfilling paid storage without a held slot.

These are properties that hold at any speed: counts of calls, runs and deferrals, rows, attempts.
How close a fleet's backfill comes to WB's bound (its slot efficiency) is a figure of
``wbsync bench slots --scenario reports`` (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY

from tests.support.databases import POSTGRES_ENV, DatabaseFactory
from tests.support.runtimes import MakeRuntime, runtime_maker
from tests.support.waiting import wait_for
from wbsync.composition.workers import build_workers, queue_option
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes
from wbsync.emulator.report_tasks import BUILD_S
from wbsync.jobs.model import Outcome
from wbsync.shared.runtime import Runtime
from wbsync.store.datasets import DATASETS
from wbsync.system import clock
from wbsync.system.procs import dies_with_parent, free_port, stop_child

QUEUE = "paid-storage-sync"


def _seller(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


def _held_s() -> float:
    """Seconds the queue's slots were held, over every run of its jobs (this process)."""
    total = 0.0
    for outcome in ("completed", "deferred", "failed", "abandoned"):
        labels = {"queue": QUEUE, "outcome": outcome}
        total += REGISTRY.get_sample_value("wbsync_job_duration_seconds_sum", labels) or 0.0
    return total


def _slept_s() -> float:
    """Seconds the queue's slots slept in place on a wait (this process)."""
    labels = {"queue": QUEUE}
    return REGISTRY.get_sample_value("wbsync_slot_sleep_seconds_total", labels) or 0.0


def _deferrals(reason: str) -> float:
    labels = {"queue": QUEUE, "reason": reason}
    return REGISTRY.get_sample_value("wbsync_deferrals_total", labels) or 0.0


@dataclass
class Upstream:
    """The emulator in a child process (its CPU not the workers'), and a twin in this process,
    not served, with the same config: its tokens and expected rows are the child's."""

    base_url: str
    twin: Emulator

    @property
    def time_scale(self) -> float:
        return self.twin.config.time_scale

    async def counters(self) -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=self.base_url) as http:
            reply = await http.get("/__emulator/counters")
            reply.raise_for_status()
            counted: dict[str, Any] = reply.json()["sellers"]
            return counted

    async def requests(self, seller: str, method: str) -> int:
        counted = await self.counters()
        return int(counted.get(seller, {}).get(method, {}).get("requests", 0))


@pytest.fixture
async def upstream(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Upstream]:
    scale: float = request.param
    config = EmulatorConfig(
        time_scale=scale, anchor_date=clock.wb_today(), sizes=SellerSizes(products=2)
    )
    path = tmp_path / "emulator.json"
    path.write_text(config.model_dump_json(), encoding="utf-8")
    port = free_port()
    log = (tmp_path / "emulator.log").open("wb")
    proc = subprocess.Popen(  # noqa: ASYNC220  (returns at once; readiness is awaited below)
        [sys.executable, "-m", "wbsync", "emulator", "--config", str(path), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=dies_with_parent(),
    )
    base_url = f"http://127.0.0.1:{port}"

    async def ready() -> bool:
        try:
            async with httpx.AsyncClient(base_url=base_url, timeout=1.0) as http:
                return (await http.get("/__emulator/counters")).status_code == 200
        except httpx.TransportError:
            return False

    try:
        try:
            await wait_for(ready, timeout_s=60)
        except AssertionError:
            said = (tmp_path / "emulator.log").read_text(errors="replace")[-2000:]
            raise AssertionError(f"the emulator did not start: {said}") from None
        yield Upstream(base_url, Emulator(config))
    finally:
        await asyncio.to_thread(stop_child, proc)
        log.close()


@pytest.fixture
async def make(
    redis_url: str, prefix: str, database_factory: DatabaseFactory, upstream: Upstream
) -> AsyncIterator[MakeRuntime]:
    backend = "postgresql" if os.environ.get(POSTGRES_ENV) else "sqlite"
    url = await database_factory.new_migrated_url(backend)
    scale = upstream.time_scale
    async with runtime_maker(redis_url, prefix, url, upstream.base_url, time_scale=scale) as m:
        yield m


async def _backfill(
    runtime: Runtime, upstream: Upstream, cabinets: int, *, concurrency: int
) -> dict[str, Any]:
    """Every cabinet's paid storage from nothing to today, through one worker; what it took."""
    ids = []
    for i in range(cabinets):
        seller = _seller(i)
        cab = await runtime.store.cabinets.add(
            f"c{i}-{uuid.uuid4().hex[:6]}", upstream.twin.token(seller), seller
        )
        ids.append(cab.id)
    outcomes: list[Outcome] = []
    done = asyncio.Event()
    labels: set[str] = set()
    attempts: set[int] = set()

    def seen(outcome: Outcome) -> None:
        outcomes.append(outcome)
        if sum(o.outcome in ("completed", "failed") for o in outcomes) == cabinets:
            done.set()

    [worker] = build_workers(runtime, [QUEUE], concurrency=concurrency, on_outcome=seen)
    queue = runtime.queue(QUEUE)
    held, reports, slept = _held_s(), _deferrals("report"), _slept_s()
    await worker.start()
    started = time.monotonic()

    try:
        for cabinet_id in ids:
            await queue.enqueue(str(cabinet_id))
        deadline = started + 120.0
        while not done.is_set():
            assert time.monotonic() < deadline, "the backfill did not finish in time"
            view = await queue.job(str(ids[0]))
            if view is not None and view.state == "delayed":
                labels.add(str(view.data.get("deferred_by")))
                attempts.add(view.attempts_made)
            await asyncio.sleep(0.1)
        makespan = time.monotonic() - started
    finally:
        await worker.close()
    return {
        "slept_s": _slept_s() - slept,
        "ids": ids,
        "makespan_s": makespan,
        "held_s": _held_s() - held,
        "report_deferrals": _deferrals("report") - reports,
        "failed": sum(o.outcome == "failed" for o in outcomes),
        "runs": len(outcomes),
        "labels": labels,
        "attempts": attempts,
    }


@pytest.mark.parametrize("upstream", [0.01], indirect=True)
async def test_a_report_sync_holds_no_slot_while_wb_builds(
    make: MakeRuntime, upstream: Upstream
) -> None:
    runtime = await make(sync_report_horizon_days=16)  # two 8-day windows a cabinet
    got = await _backfill(runtime, upstream, 3, concurrency=1)
    assert got["failed"] == 0 and got["attempts"] <= {0}
    label = "waiting on WB's report paid storage (task "
    assert any(seen.startswith(label) for seen in got["labels"]), got["labels"]
    # Every task waited for WB with its slot given back; no run waited in place, for WB or for
    # a budget, and none asked for a status more than once: the slot is held for the calls.
    statuses = await _calls_per_window(runtime, upstream, got, cabinets=3, windows=2)
    building_s = 6 * BUILD_S * upstream.time_scale
    print(
        f"\nreport slots: 3 cabinets x 2 tasks, 1 slot: WB built reports for {building_s:.2f} s, "
        f"the slot was held {got['held_s']:.2f} s over {got['runs']} runs ({statuses} status "
        f"calls, {got['report_deferrals']:.0f} report deferrals, {got['slept_s']:.2f} s slept "
        "in place)"
    )


#: The fleet: cabinets, days each backfills (5 report tasks of 8 days), time scale.
FLEET_CABINETS, FLEET_DAYS, FLEET_SCALE = 10, 40, 0.02
CONCURRENCY = 16  # the slots of one process for the queue


@pytest.mark.parametrize("upstream", [FLEET_SCALE], indirect=True)
async def test_a_fleet_backfills_paid_storage(make: MakeRuntime, upstream: Upstream) -> None:
    """Cabinets backfilling paid storage (a report task per 8 days), all at once: every row
    stored, no attempt spent, each task created and downloaded once, its status asked at most
    once a run, and no slot held sleeping: a wait for WB's build or for the download's budget
    gives the slot back. A 429 (a request reaching WB a hair early on a loaded machine) costs
    one download more and WB's Retry slept in place, never a window."""
    cabinets, days = FLEET_CABINETS, FLEET_DAYS
    windows = -(-days // 8)
    runtime = await make(sync_report_horizon_days=days)
    got = await _backfill(runtime, upstream, cabinets, concurrency=CONCURRENCY)
    today = upstream.twin.config.anchor_date
    spec = DATASETS["paid_storage"]
    for i, cabinet_id in enumerate(got["ids"]):
        first = today - timedelta(days=days - 1)
        want = upstream.twin.expected(
            _seller(i), "analytics.paid_storage", date_from=first, date_to=today
        )
        rows = await runtime.store.fetch("paid_storage", cabinet_id)
        assert {spec.row_key(r) for r in rows} == {spec.row_key(r) for r in want}
    assert got["failed"] == 0 and got["attempts"] <= {0}
    await _calls_per_window(runtime, upstream, got, cabinets=cabinets, windows=windows)


async def _calls_per_window(
    runtime: Runtime, upstream: Upstream, got: dict[str, Any], *, cabinets: int, windows: int
) -> int:
    """Each cabinet's task of each window created once and downloaded once (a download WB
    refused with a 429 once more), waited for with the slot given back at least once, its
    status asked at most once a run; no slot slept in place but for WB's Retry after a 429
    (under the deferral threshold). The status calls."""
    counts = await upstream.counters()
    limited = 0
    for i in range(cabinets):
        methods = counts[_seller(i)]
        assert methods["analytics.paid_storage"]["requests"] == windows
        download = methods["analytics.paid_storage_download"]
        assert download["requests"] == windows + download["rate_limited"]
        limited += sum(m["rate_limited"] for m in methods.values())
    statuses = sum(
        int(counts[_seller(i)]["analytics.paid_storage_status"]["requests"])
        for i in range(cabinets)
    )
    assert got["report_deferrals"] >= cabinets * windows
    assert cabinets * windows <= statuses <= got["runs"]
    scale = runtime.settings.time_scale
    threshold_s = queue_option(runtime.settings, QUEUE, "defer_threshold_ms") * scale / 1000.0
    assert got["slept_s"] <= limited * threshold_s, (got["slept_s"], limited)
    return statuses
