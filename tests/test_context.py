"""Context variables: isolation between concurrent tasks, and log records that carry them."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import random

import pytest

from wbsync.errors import RateLimitDeferred, ReportPending
from wbsync.observability.context import (
    JobInfo,
    correlation,
    correlation_id,
    current_job,
    deferral_threshold_ms,
    run_with_rate_limit_deferral,
    running_job,
    wait_for_upstream,
)
from wbsync.observability.logs import ContextFilter, JsonFormatter
from wbsync.ratelimit import BucketScope, Limit


async def test_two_hundred_tasks_see_only_their_own_context() -> None:
    async def task(i: int) -> tuple[int, float | None, str | None]:
        inside = i % 2 == 0
        with correlation(f"cid-{i}"):

            async def body() -> tuple[int, float | None, str | None]:
                # Interleave with the others several times before reading the context.
                for _ in range(3):
                    await asyncio.sleep(random.random() / 1000)
                return i, deferral_threshold_ms(), correlation_id()

            if inside:
                return await run_with_rate_limit_deferral(float(i), body)
            return await body()

    results = await asyncio.gather(*(task(i) for i in range(200)))
    for i, threshold, cid in results:
        assert cid == f"cid-{i}"
        assert threshold == (float(i) if i % 2 == 0 else None)
    assert deferral_threshold_ms() is None and correlation_id() is None


async def test_context_is_reset_after_an_exception() -> None:
    async def fail() -> None:
        raise ValueError("boom")

    try:
        await run_with_rate_limit_deferral(5.0, fail)
    except ValueError:
        pass
    assert deferral_threshold_ms() is None


async def test_every_log_record_of_a_job_has_its_correlation_id() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("wbsync.test.ctx")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:

        async def job(i: int) -> None:
            with correlation(f"job-{i}"), running_job(JobInfo("q", f"q.c{i}", f"c{i}")):
                await asyncio.sleep(0)
                logger.info("page stored")

        await asyncio.gather(*(job(i) for i in range(20)))
    finally:
        logger.removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 20
    for line in lines:
        n = line["cabinet"][1:]
        assert line["correlation_id"] == f"job-{n}"
        assert line["job_id"] == f"q.c{n}" and line["queue"] == "q"
    assert current_job() is None


async def test_a_wait_on_wb_defers_inside_a_job_however_short_and_is_slept_outside() -> None:
    scope = BucketScope("seller", "analytics.paid_storage_status", Limit(5.0, 1, 5))

    def pending() -> ReportPending:
        return ReportPending(1, scope, report="paid storage", task_id="t-1")

    async def inside() -> None:
        await wait_for_upstream(1.0, pending)  # far below the threshold: deferred all the same

    with pytest.raises(RateLimitDeferred) as deferred:
        await run_with_rate_limit_deferral(5000.0, inside)
    assert deferred.value.reason == "report"
    assert deferred.value.waiting_on == "waiting on WB's report paid storage (task t-1)"
    await wait_for_upstream(1.0, pending)  # outside a job: slept, nothing raised
