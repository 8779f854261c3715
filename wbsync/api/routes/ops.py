"""Operations: liveness and readiness probes (no key), Prometheus metrics, the status as JSON."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from wbsync import health
from wbsync.api.auth import require_key
from wbsync.api.deps import RuntimeDep, StatusQueryDep, status_reader
from wbsync.api.live import penalty_gauges, queue_counts
from wbsync.api.problems import Problem, problems
from wbsync.api.schemas import StatusOut, ThroughputOut
from wbsync.api.status_model import status_out
from wbsync.errors import QueueError, RedisUnavailableError

__all__ = ["probes", "router"]

log = logging.getLogger(__name__)

probes = APIRouter(tags=["ops"])
router = APIRouter(tags=["ops"], dependencies=[Depends(require_key)], responses=problems(401, 503))


@probes.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up and serving."""
    return {"status": "ok"}


@probes.get("/readyz", responses=problems(503))
async def readyz(runtime: RuntimeDep) -> dict[str, Any]:
    """Redis and the database answer; 503 (naming what failed) otherwise."""
    probes = runtime.probes()
    failed = await health.check(runtime.health, probes)
    if failed:
        raise Problem(
            503,
            "not-ready",
            "Not ready",
            f"unreachable: {', '.join(failed)}",
            checks={n: n not in failed for n in probes},
        )
    return {"status": "ready", "checks": dict.fromkeys(probes, True)}


@router.get("/metrics", response_class=Response)
async def metrics(runtime: RuntimeDep) -> Response:
    """Every wbsync metric in Prometheus' text format; queue depths and WB's penalties are read
    at scrape time.

    With Redis away the process's own metrics are still served (queue depths and penalties as
    last read, ``wbsync_dependency_up{dependency="redis"}`` 0).
    """
    try:
        await asyncio.gather(queue_counts(runtime), penalty_gauges(runtime))
    except (QueueError, RedisUnavailableError) as exc:  # the queues' reads, the limiter's
        runtime.health.down("redis", exc)
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)


@router.get("/api/v1/status", response_model=StatusOut)
async def status(request: Request, query: StatusQueryDep) -> Response:
    """What the status page shows, as JSON: totals, and one page of matching cabinets."""
    page = await status_reader(request).read(query)
    if "json" not in page.rendered:
        page.rendered["json"] = status_out(page).model_dump_json().encode()
    return Response(page.rendered["json"], media_type="application/json")


@router.get("/api/v1/throughput", response_model=ThroughputOut)
async def throughput(request: Request) -> Response:
    """Pages stored and 429s from WB per queue and minute over the last hour, every process."""
    return Response(await status_reader(request).throughput(), media_type="application/json")
