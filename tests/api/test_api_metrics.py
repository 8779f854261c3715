"""/metrics after a run that defers: Prometheus' parser reads it, every metric has its labels."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.api import AUTH
from tests.support.waiting import wait_for
from wbsync.composition.workers import build_workers
from wbsync.emulator import Emulator, FaultRule
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.syncs.finance import FINANCE_DETAILED_REPORT as FINANCE_EP
from wbsync.wb.methods import TARIFFS_ACCEPTANCE_COEFFICIENTS as COEFFICIENTS

FINANCE = "rnp-finance-sync"


async def test_metrics_after_a_run_that_defers(
    api: httpx.AsyncClient,
    api_runtime: Runtime,
    api_emulator: Emulator,
    add_cabinet: Callable[..., Awaitable[Cabinet]],
) -> None:
    cabinet = await add_cabinet()
    client = api_runtime.client(cabinet)
    # WB answers the first finance call with a 429; the closed window then defers the job.
    api_emulator.set_faults([FaultRule(kind="rate_limit", method=FINANCE_EP.name, count=1)])
    await api_runtime.limiter.penalize(client.scope(FINANCE_EP), 200)
    [worker] = build_workers(api_runtime, [FINANCE], concurrency=1)
    await worker.start()
    try:
        assert (
            await api.post(f"/api/v1/cabinets/{cabinet.id}/syncs/{FINANCE}", headers=AUTH)
        ).status_code == 202
        await wait_for(lambda: _finished(api_runtime, cabinet))
    finally:
        await worker.close()
    # An on-demand read that sleeps, and one refused past its ceiling.
    coefficients = f"/api/v1/cabinets/{cabinet.id}/wb/acceptance-coefficients"
    # 500 ms: under the 625 ms ceiling, and long enough to be still closed when the read comes.
    await api_runtime.limiter.penalize(client.scope(COEFFICIENTS), 500)
    assert (await api.get(coefficients, headers=AUTH)).status_code == 200
    await api_runtime.limiter.penalize(client.scope(COEFFICIENTS), 5000)
    assert (await api.get(coefficients, headers=AUTH)).status_code == 429

    reply = await api.get("/metrics", headers=AUTH)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(reply.text)}
    samples = {name: [s.labels for s in f.samples] for name, f in families.items()}

    assert {"queue": FINANCE, "scope": FINANCE_EP.group} in samples["wbsync_rate_limit_reschedules"]
    upstream = samples["wbsync_upstream_requests"]
    for status in ("200", "429"):
        assert {"section": "finance", "status": status, "queue": FINANCE} in upstream
    waits = {(s["scope"], s["outcome"]) for s in samples["wbsync_limiter_wait_seconds"]}
    assert {
        (FINANCE_EP.group, "deferred"),
        (FINANCE_EP.group, "acquired"),
        (COEFFICIENTS.group, "slept"),
        (COEFFICIENTS.group, "refused"),
    } <= waits
    durations = {(s["queue"], s["outcome"]) for s in samples["wbsync_job_duration_seconds"]}
    assert {(FINANCE, "deferred"), (FINANCE, "completed")} <= durations
    depths = {
        (s.labels["queue"], s.labels["state"]): s.value
        for s in families["wbsync_queue_jobs"].samples
    }
    assert depths[(FINANCE, "delayed")] == 0 and depths[(FINANCE, "active")] == 0
    assert {"waiting", "delayed", "active", "prioritized", "completed", "failed"} == {
        state for queue, state in depths if queue == FINANCE
    }


async def _finished(runtime: Runtime, cabinet: Cabinet) -> bool:
    return await runtime.queue(FINANCE).job(str(cabinet.id)) is None
