"""Operations: liveness and readiness probes (no key), Prometheus metrics, the status as JSON."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from wbsync.api.auth import require_key
from wbsync.api.deps import RuntimeDep
from wbsync.api.problems import Problem, problems
from wbsync.api.status import queue_counts, snapshot

__all__ = ["probes", "router"]

log = logging.getLogger(__name__)

_PROBE_TIMEOUT_S = 2.0

probes = APIRouter(tags=["ops"])
router = APIRouter(tags=["ops"], dependencies=[Depends(require_key)], responses=problems(401, 503))


@probes.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up and serving."""
    return {"status": "ok"}


@probes.get("/readyz", responses=problems(503))
async def readyz(runtime: RuntimeDep) -> dict[str, Any]:
    """Redis and the database answer; 503 (naming what failed) otherwise."""
    checks = {
        "redis": runtime.redis.ping(),
        "database": runtime.database.current_revision(),
    }
    results = await asyncio.gather(
        *(asyncio.wait_for(c, _PROBE_TIMEOUT_S) for c in checks.values()), return_exceptions=True
    )
    failed = {
        name: type(r).__name__
        for name, r in zip(checks, results, strict=True)
        if isinstance(r, BaseException)
    }
    if failed:
        log.warning("not ready: %s", failed)
        raise Problem(
            503,
            "not-ready",
            "Not ready",
            f"unreachable: {', '.join(failed)}",
            checks={n: n not in failed for n in checks},
        )
    return {"status": "ready", "checks": dict.fromkeys(checks, True)}


@router.get("/metrics", response_class=Response)
async def metrics(runtime: RuntimeDep) -> Response:
    """Every wbsync metric in Prometheus' text format; queue depths are read at scrape time."""
    await queue_counts(runtime)
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
