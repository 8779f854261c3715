"""Operations: liveness and readiness probes (no key), Prometheus metrics, the status as JSON."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from wbsync.api.auth import require_key
from wbsync.api.deps import RuntimeDep, StatusQueryDep, status_reader
from wbsync.api.live import cabinet_gauges, penalty_gauges, queue_counts
from wbsync.api.problems import Problem, problems
from wbsync.api.schemas.status import StatusOut, ThroughputOut
from wbsync.errors import QueueError, RedisUnavailableError, StoreError
from wbsync.observability import health
from wbsync.shared.runtime import Runtime

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
    """Every wbsync metric in Prometheus' text format; queue depths, WB's penalties and the
    cabinets' states are read at scrape time.

    With Redis or the database away the process's own metrics are still served (what that one
    feeds as last read, ``wbsync_dependency_up{dependency=...}`` 0).
    """
    redis, database = await asyncio.gather(
        asyncio.gather(queue_counts(runtime), penalty_gauges(runtime)),
        cabinet_gauges(runtime),
        return_exceptions=True,
    )
    _down_or_raise(runtime, "redis", redis, (QueueError, RedisUnavailableError))
    _down_or_raise(runtime, "database", database, (StoreError,))
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)


def _down_or_raise(
    runtime: Runtime, name: str, outcome: object, expected: tuple[type[Exception], ...]
) -> None:
    """Mark the dependency down when its read failed as expected; raise anything else."""
    if isinstance(outcome, expected):
        runtime.health.down(name, outcome)
    elif isinstance(outcome, BaseException):
        raise outcome


@router.get("/api/v1/status", response_model=StatusOut)
async def status(request: Request, query: StatusQueryDep) -> Response:
    """What the status page shows, as JSON: totals, and one page of matching cabinets."""
    page = await status_reader(request).read(query)
    body = page.rendered("json", lambda p: p.model_dump_json().encode())
    return Response(body, media_type="application/json")


@router.get("/api/v1/throughput", response_model=ThroughputOut)
async def throughput(request: Request) -> Response:
    """Pages stored and 429s from WB per queue and minute over the last hour, every process."""
    return Response(await status_reader(request).throughput(), media_type="application/json")
