"""WB's words travel: a job that fails on WB's answer keeps what WB said in its failedReason,
its run record, the status page and the log line; a URL WB does not serve fails the job at
once, naming the URL and the setting to fix."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from tests.support.api import API_KEY, AUTH
from tests.support.databases import DatabaseFactory
from tests.support.runtimes import runtime_maker
from tests.support.waiting import wait_for
from wbsync.api import create_app
from wbsync.composition.workers import build_workers
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes, running_emulator
from wbsync.emulator.config import FaultRule
from wbsync.jobs.model import Outcome
from wbsync.shared.runtime import Runtime
from wbsync.system import clock

SCALE = 0.005  # WB's minute is 300 ms
SELLER = "0000000e-0000-4000-8000-0000000000aa"
FINANCE = "rnp-finance-sync"
METHOD = "finance.detailed_report"
WORDS = "invalid start day"


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        time_scale=SCALE, anchor_date=clock.wb_today(), sizes=SellerSizes(report_rows=4)
    )
    async with running_emulator(config) as emu:
        yield emu


@pytest.fixture
async def runtime_factory(
    redis_url: str, prefix: str, database_factory: DatabaseFactory, emulator: Emulator
) -> AsyncIterator[Callable[..., Any]]:
    database_url = await database_factory.new_migrated_url("sqlite")
    async with runtime_maker(
        redis_url,
        prefix,
        database_url,
        emulator.base_url,
        time_scale=SCALE,
        api_keys=[SecretStr(API_KEY)],
    ) as make:
        yield make


async def _run_until_gone(runtime: Runtime, cabinet_id: int) -> list[str]:
    outcomes: list[Outcome] = []
    [worker] = build_workers(runtime, [FINANCE], concurrency=1, on_outcome=outcomes.append)
    queue = runtime.queue(FINANCE)

    async def gone() -> bool:
        job = await queue.job(str(cabinet_id))
        return job is None or job.state in ("completed", "failed")

    await worker.start()
    try:
        await queue.enqueue(str(cabinet_id))
        await wait_for(gone)
    finally:
        await worker.close()
    return [o.outcome for o in outcomes]


async def _status_page(runtime: Runtime) -> tuple[dict[str, Any], str]:
    transport = httpx.ASGITransport(app=create_app(runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://wbsync.test") as api:

        async def listed() -> bool:  # the status index is rebuilt within its TTL
            reply = await api.get("/api/v1/status", params={"state": "failed"}, headers=AUTH)
            return bool(reply.json()["matched"] == 1)

        await wait_for(listed)
        body = (await api.get("/api/v1/status", params={"state": "failed"}, headers=AUTH)).json()
        page = (await api.get("/", params={"state": "failed"}, headers=AUTH)).text
    return body, page


async def test_wbs_words_reach_the_failure_reason_run_record_status_page_and_log(
    runtime_factory: Callable[..., Any], emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    runtime: Runtime = await runtime_factory()
    cabinet = await runtime.store.cabinets.add(
        f"cab-{uuid.uuid4().hex[:8]}", emulator.token(SELLER), SELLER
    )
    emulator.set_faults(
        [FaultRule(kind="refuse", method=METHOD, status=400, shape="errors", words=WORDS)]
    )
    caplog.set_level(logging.ERROR, logger="wbsync.jobs.worker")

    outcomes = await _run_until_gone(runtime, cabinet.id)

    assert outcomes.count("failed") == runtime.settings.job_attempts
    job = await runtime.queue(FINANCE).job(str(cabinet.id))
    assert job is not None and job.state == "failed"
    assert f'WB said: "{WORDS}"' in (job.failed_reason or "")
    [record] = await runtime.store.runs.of_cabinets([cabinet.id])
    assert f'WB said: "{WORDS}"' in (record.failure_reason or "")
    body, page = await _status_page(runtime)
    [entry] = body["failed"]
    assert WORDS in entry["job"]["failed_reason"]
    assert WORDS in body["cabinets"][0]["runs"][0]["failure_reason"]
    assert WORDS in page
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("job ")]
    assert lines and all(WORDS in line for line in lines)


async def test_a_url_wb_does_not_serve_fails_the_job_at_once_naming_the_setting(
    runtime_factory: Callable[..., Any], emulator: Emulator
) -> None:
    wrong = f"{emulator.base_url}/finance-api"
    runtime: Runtime = await runtime_factory(wb_base_urls={"finance": wrong})
    cabinet = await runtime.store.cabinets.add(
        f"cab-{uuid.uuid4().hex[:8]}", emulator.token(SELLER), SELLER
    )

    outcomes = await _run_until_gone(runtime, cabinet.id)

    assert outcomes == ["failed"]  # no retry: a setting is wrong
    job = await runtime.queue(FINANCE).job(str(cabinet.id))
    assert job is not None and job.state == "failed" and job.attempts_made <= 1
    reason = job.failed_reason or ""
    assert f"{wrong}/api/finance/v1/sales-reports/detailed was not found" in reason
    assert 'WBSYNC_WB_BASE_URLS["finance"]' in reason and "finance section" in reason
    [record] = await runtime.store.runs.of_cabinets([cabinet.id])
    assert (record.failure_reason or "").startswith("WbPathNotFoundError: ")
    assert sum(emulator.counters.unserved.values()) == 1

    # A second cabinet of the process sends nothing to the stopped section.
    other = await runtime.store.cabinets.add(
        f"cab-{uuid.uuid4().hex[:8]}", emulator.token(SELLER), SELLER
    )
    assert await _run_until_gone(runtime, other.id) == ["failed"]
    again = await runtime.queue(FINANCE).job(str(other.id))
    assert again is not None and "nothing sent" in (again.failed_reason or "")
    assert sum(emulator.counters.unserved.values()) == 1
