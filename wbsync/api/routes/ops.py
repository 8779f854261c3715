"""Operations: liveness and readiness probes (no key), Prometheus metrics, the status as JSON."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from wbsync import health
from wbsync.api.auth import require_key
from wbsync.api.deps import RuntimeDep
from wbsync.api.problems import Problem, problems
from wbsync.api.status import queue_counts, snapshot
from wbsync.errors import QueueError

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
    """Every wbsync metric in Prometheus' text format; queue depths are read at scrape time.

    With Redis away the process's own metrics are still served (queue depths as last read,
    ``wbsync_dependency_up{dependency="redis"}`` 0).
    """
    try:
        await queue_counts(runtime)
    except QueueError as exc:
        runtime.health.down("redis", exc)
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)


@router.get("/api/v1/status")
async def status(runtime: RuntimeDep) -> JSONResponse:
    """What the status page shows, as JSON."""
    snap = await snapshot(runtime)
    body = {
        "generated_at": snap.generated_at,
        "time_scale": snap.time_scale,
        "counters": snap.counters,
        "queues": snap.queues,
        "cabinets": [{"cabinet": c.cabinet, "jobs": c.jobs} for c in snap.cabinets],
        "waiting": [{"cabinet": c, "job": j} for c, j in snap.waiting],
        "busiest_buckets": [{"cabinet": name, "bucket": b} for name, b in snap.buckets],
    }
    return JSONResponse(jsonable_encoder(body))
