"""Reading the system's state for the API and the status page: jobs, buckets, queues, counters."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from prometheus_client import REGISTRY

from wbsync import clock
from wbsync.api.schemas import BucketOut, CabinetOut, JobOut, LimitOut, at_ms, cabinet_out, job_out
from wbsync.errors import ConfigError, TokenError
from wbsync.jobs.queue import LIVE_STATES
from wbsync.metrics import QUEUE_JOBS
from wbsync.ratelimit import BucketScope
from wbsync.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.syncs import SYNCS
from wbsync.wb.endpoints import ENDPOINTS
from wbsync.wb.tokens import parse_token

__all__ = [
    "CabinetStatus",
    "Snapshot",
    "cabinet_buckets",
    "cabinet_jobs",
    "counters",
    "queue_counts",
    "snapshot",
]

log = logging.getLogger(__name__)

# The page peeks every bucket of this many active cabinets at most, so a refresh stays cheap.
PAGE_CABINETS = 100
BUSIEST = 12


async def cabinet_jobs(runtime: Runtime, cabinet_id: int) -> list[JobOut]:
    """The cabinet's live jobs over every queue."""
    views = await asyncio.gather(*(runtime.queue(q).job(str(cabinet_id)) for q in SYNCS))
    return [job_out(v) for v in views if v is not None and v.state in LIVE_STATES]


async def cabinet_buckets(runtime: Runtime, cabinet: Cabinet) -> list[BucketOut]:
    """Every limit group the cabinet's token may spend, read without taking a token."""
    token = parse_token(cabinet.token(), cabinet=cabinet.name)
    groups: dict[str, list[str]] = defaultdict(list)
    for ep in ENDPOINTS.values():
        if ep.allows(token.type):
            groups[ep.group].append(ep.name)
    scale = runtime.settings.time_scale
    limits = {g: ENDPOINTS[names[0]].limit_for(token.type) for g, names in groups.items()}
    peeks = await asyncio.gather(
        *(runtime.limiter.peek(BucketScope(token.seller_id, g, limits[g])) for g in groups)
    )
    now = clock.now_ms()
    out = []
    for (group, methods), peek in zip(groups.items(), peeks, strict=True):
        limit, wait = limits[group], 0 if peek.acquired else peek.wait_ms
        out.append(
            BucketOut(
                group=group,
                methods=methods,
                limit=LimitOut(
                    period_s=limit.period_s, limit=limit.limit, burst=limit.burst, time_scale=scale
                ),
                tokens_left=peek.remaining,
                capacity=limit.burst,
                next_token_in_ms=wait,
                next_token_at=at_ms(now + wait),
            )
        )
    return out


async def _page_buckets(runtime: Runtime, cabinet: Cabinet) -> list[tuple[str, BucketOut]]:
    try:
        return [(cabinet.name, b) for b in await cabinet_buckets(runtime, cabinet)]
    except (TokenError, ConfigError) as exc:
        # One cabinet with an expired or unreadable token must not take the page down.
        log.warning("status page: no buckets for cabinet %s: %s", cabinet.id, exc)
        return []


async def queue_counts(runtime: Runtime) -> dict[str, dict[str, int]]:
    """Jobs per state of every queue; also sets the queue-depth gauges."""
    counts = await asyncio.gather(*(runtime.queue(q).counts() for q in SYNCS))
    for name, by_state in zip(SYNCS, counts, strict=True):
        for state, n in by_state.items():
            QUEUE_JOBS.labels(name, state).set(n)
    return dict(zip(SYNCS, counts, strict=True))


def counters() -> dict[str, float]:
    """Process-wide totals of the counters the page shows."""
    totals: dict[str, float] = defaultdict(float)
    for metric in REGISTRY.collect():
        for s in metric.samples:
            if s.name == "wbsync_rate_limit_reschedules_total":
                totals["reschedules"] += s.value
            elif s.name == "wbsync_upstream_requests_total" and s.labels.get("status") == "429":
                totals["upstream_429"] += s.value
            elif s.name == "wbsync_limiter_wait_seconds_count" and (
                s.labels.get("outcome") == "refused"
            ):
                totals["local_429"] += s.value
    return {k: totals[k] for k in ("reschedules", "upstream_429", "local_429")}


@dataclass
class CabinetStatus:
    """A cabinet with its live jobs."""

    cabinet: CabinetOut
    jobs: list[JobOut]


@dataclass
class Snapshot:
    """Everything the status page shows."""

    generated_at: datetime
    time_scale: float
    queues: dict[str, dict[str, int]]
    cabinets: list[CabinetStatus]
    counters: dict[str, float]
    buckets: list[tuple[str, BucketOut]] = field(default_factory=list)
    buckets_of: int = 0

    @property
    def waiting(self) -> list[tuple[CabinetOut, JobOut]]:
        """Delayed jobs with their cabinet, soonest resume first."""
        rows = [(c.cabinet, j) for c in self.cabinets for j in c.jobs if j.state == "delayed"]
        return sorted(rows, key=lambda row: row[1].resume_in_ms or 0)


async def snapshot(runtime: Runtime) -> Snapshot:
    """Read queues, live jobs, cabinets and the busiest buckets."""
    queues = await queue_counts(runtime)
    live = await asyncio.gather(*(runtime.queue(q).live_jobs() for q in SYNCS))
    jobs: dict[str, list[JobOut]] = defaultdict(list)
    for by_cabinet in live:
        for cabinet_id, view in by_cabinet.items():
            jobs[cabinet_id].append(job_out(view))
    cabinets = await runtime.store.cabinets.list()
    statuses = [CabinetStatus(cabinet_out(c), jobs.get(str(c.id), [])) for c in cabinets]
    active = [c for c in cabinets if c.active][:PAGE_CABINETS]
    per_cabinet = await asyncio.gather(*(_page_buckets(runtime, c) for c in active))
    buckets = [row for rows in per_cabinet for row in rows]
    busy = [row for row in buckets if row[1].tokens_left < row[1].capacity]
    busy.sort(key=lambda row: (row[1].tokens_left / row[1].capacity, -row[1].next_token_in_ms))
    return Snapshot(
        generated_at=at_ms(clock.now_ms()),
        time_scale=runtime.settings.time_scale,
        queues=queues,
        cabinets=statuses,
        counters=counters(),
        buckets=busy[:BUSIEST],
        buckets_of=len(active),
    )
