"""A method WB has switched off: the emulator answers as WB, the client says so, the job waits.

WB's documents mark acceptance coefficients (what booking-slot-monitor polls) "temporarily
disabled". A job meeting such a method neither fails nor polls WB: it comes back after
``disabled_retry_s``, one request (or none, when configured off) per cabinet per interval.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Callable
from itertools import pairwise
from typing import Any

import httpx
import pytest

from tests.support.databases import DatabaseFactory
from tests.support.runtimes import runtime_maker
from tests.support.waiting import wait_for
from wbsync.composition.workers import build_workers
from wbsync.config import Settings
from wbsync.emulator import Emulator, EmulatorConfig, running_emulator
from wbsync.errors import WbMethodDisabledError
from wbsync.jobs.model import Outcome
from wbsync.shared.runtime import Runtime, client_options
from wbsync.system import clock
from wbsync.wb import methods
from wbsync.wb.client import WbClient

SCALE = 0.005
# The session's migrated databases are shared: every test that uses them uses one key.
METHOD = "tariffs.acceptance_coefficients"
PATH = "/api/tariffs/v1/acceptance/coefficients"
SELLERS = ["0000000d-0000-4000-8000-00000000000a", "0000000d-0000-4000-8000-00000000000b"]
RETRY_S = 80.0  # 0.4 s at SCALE


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(time_scale=SCALE, anchor_date=clock.wb_today(), disabled=[METHOD])
    async with running_emulator(config) as emu:
        yield emu


@pytest.fixture
async def runtime_factory(
    redis_url: str, prefix: str, database_factory: DatabaseFactory, emulator: Emulator
) -> AsyncIterator[Callable[..., Any]]:
    # A database of its own: the session's shared one may hold another test's key check.
    database_url = await database_factory.new_url("sqlite")
    async with runtime_maker(
        redis_url,
        prefix,
        database_url,
        emulator.base_url,
        time_scale=SCALE,
        disabled_retry_s=RETRY_S,
    ) as make:
        yield make


async def test_the_emulator_answers_a_disabled_method_as_wb_and_can_switch_it_on(
    emulator: Emulator,
) -> None:
    headers = {"Authorization": emulator.token(SELLERS[0])}
    async with httpx.AsyncClient(base_url=emulator.base_url) as http:
        off = await http.get(PATH, headers=headers)
        assert off.status_code == 404 and off.json()["title"] == "method is disabled"
        assert off.headers["X-Ratelimit-Remaining"] == "6"  # no token spent
        listed = await http.get("/__emulator/disabled")
        assert listed.json() == {"disabled": [METHOD]}
        bad = await http.post("/__emulator/disabled", json={"methods": ["nope"]})
        assert bad.status_code == 400 and "nope" in bad.json()["detail"]
        assert (await http.delete("/__emulator/disabled")).json() == {"disabled": []}
        assert (await http.get(PATH, headers=headers)).status_code == 200


async def test_the_client_raises_method_disabled_and_sends_nothing_when_configured_off(
    emulator: Emulator, limiter_factory: Callable[..., Any]
) -> None:
    limiter = limiter_factory(time_scale=SCALE)
    token = emulator.token(SELLERS[0])
    on_wb = Settings(wb_base_url=emulator.base_url, time_scale=SCALE)
    async with WbClient("c", token, limiter, options=client_options(on_wb)) as client:
        with pytest.raises(WbMethodDisabledError) as caught:
            await methods.acceptance_coefficients(client)
    assert caught.value.status == 404 and "disabled" in str(caught.value)
    assert emulator.counters.total(seller=SELLERS[0]) == 1
    configured = Settings(
        wb_base_url=emulator.base_url, time_scale=SCALE, wb_disabled_methods=[METHOD]
    )
    async with WbClient("c", token, limiter, options=client_options(configured)) as client:
        with pytest.raises(WbMethodDisabledError, match="WBSYNC_WB_DISABLED_METHODS"):
            await methods.acceptance_coefficients(client)
    assert emulator.counters.total(seller=SELLERS[0]) == 1  # nothing sent


def _times(emulator: Emulator, seller: str) -> list[float]:
    return [e["t"] for e in emulator.counters.journal if e["seller"] == seller]


async def test_booking_monitor_waits_out_a_disabled_method_then_completes(
    runtime_factory: Callable[..., Any],
    emulator: Emulator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    runtime: Runtime = await runtime_factory()
    cabinets = [
        await runtime.store.cabinets.add(f"cab-{uuid.uuid4().hex[:8]}", emulator.token(s), s)
        for s in SELLERS
    ]
    outcomes: list[Outcome] = []
    [worker] = build_workers(
        runtime, ["booking-slot-monitor"], concurrency=2, on_outcome=outcomes.append
    )
    queue = runtime.queue("booking-slot-monitor")
    caplog.set_level(logging.WARNING, logger="wbsync.jobs.failures")
    await worker.start()
    try:
        for cabinet in cabinets:
            await queue.enqueue(str(cabinet.id))
        # Each cabinet tries, is told the method is off, and comes back one interval later.
        await wait_for(lambda: all(len(_times(emulator, s)) >= 3 for s in SELLERS))
        waiting = await queue.job(str(cabinets[0].id))
        assert waiting is not None and waiting.data["retry_reason"] == "disabled"
        assert waiting.data["deferred_by"] == (
            f"{METHOD} (switched off by WB: method is disabled: the method is temporarily "
            "disabled, see https://dev.wildberries.ru/en/release-notes?id=570)"
        )
        emulator.enable()
        await queue.promote_delayed()
        await wait_for(lambda: sum(o.outcome == "completed" for o in outcomes) == 2)
    finally:
        await worker.close()
    interval_s = RETRY_S * SCALE
    for seller in SELLERS:
        times = _times(emulator, seller)
        off = times[:-1]  # the last one, after the switch-on, succeeded
        # A lower bound only (load makes gaps longer, never shorter); 5 % for clock reads.
        assert all(b - a >= interval_s * 0.95 for a, b in pairwise(off))
    assert not any(o.outcome == "failed" for o in outcomes)
    warnings = [r.getMessage() for r in caplog.records if "disabled" in r.getMessage()]
    # One WARNING per cabinet and try, never one per request retried in a loop.
    assert len(warnings) == sum(len(_times(emulator, s)) - 1 for s in SELLERS)
    for cabinet in cabinets:
        assert await runtime.store.count("acceptance_coefficients", cabinet.id) > 0


async def test_a_method_this_deployment_switched_off_says_so_on_the_job(
    runtime_factory: Callable[..., Any], emulator: Emulator
) -> None:
    runtime: Runtime = await runtime_factory(wb_disabled_methods=[METHOD])
    seller = SELLERS[0]
    cabinet = await runtime.store.cabinets.add(
        f"cab-{uuid.uuid4().hex[:8]}", emulator.token(seller), seller
    )
    [worker] = build_workers(runtime, ["booking-slot-monitor"], concurrency=1)
    queue = runtime.queue("booking-slot-monitor")
    await worker.start()
    try:
        await queue.enqueue(str(cabinet.id))

        async def deferred_by() -> object:
            job = await queue.job(str(cabinet.id))
            return None if job is None else job.data.get("deferred_by")

        await wait_for(deferred_by)
        assert await deferred_by() == f"{METHOD} (switched off by WBSYNC_WB_DISABLED_METHODS)"
    finally:
        await worker.close()
    assert _times(emulator, seller) == []  # WB was never asked
