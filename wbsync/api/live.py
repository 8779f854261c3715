"""Live reads for the API, uncached: a cabinet's jobs and buckets, the queues' counts and the
process's counters.

Each is one round of reads (a pipeline or a gather); the status reader (``wbsync.api.status``)
uses the buckets and the counters for its pages, the routes the rest.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Sequence

from prometheus_client import REGISTRY

from wbsync.api.attention import state_counts
from wbsync.api.schemas import BucketOut, JobOut, LearnedOut, LimitOut, at_ms, job_out
from wbsync.errors import ConfigError, TokenError
from wbsync.jobs.model import LIVE_STATES
from wbsync.observability.metrics import (
    CABINETS,
    QUEUE_JOBS,
    SECTIONS_SUSPENDED,
    TOKEN_LEAST_REMAINING,
    WB_PENALTIES,
    WB_PENALTY_REMAINING,
)
from wbsync.ratelimit import GLOBAL_GROUP, BucketScope, Learned
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.syncs import SYNCS
from wbsync.system import clock
from wbsync.wb.endpoints import ENDPOINTS
from wbsync.wb.tokens import parse_token

log = logging.getLogger(__name__)


async def cabinet_jobs(runtime: Runtime, cabinet_id: int) -> list[JobOut]:
    """The cabinet's live jobs over every queue."""
    views = await asyncio.gather(*(runtime.queue(q).job(str(cabinet_id)) for q in SYNCS))
    return [job_out(v) for v in views if v is not None and v.state in LIVE_STATES]


async def buckets_of(runtime: Runtime, cabinets: Sequence[Cabinet]) -> list[tuple[str, BucketOut]]:
    """Every bucket of these cabinets, read without taking a token, in one pipeline.

    A cabinet whose token cannot be read (expired, no secret key) is left out with a warning.
    """
    scale = runtime.settings.time_scale
    wanted: list[tuple[str, str, list[str], BucketScope]] = []
    for cabinet in cabinets:
        try:
            token = parse_token(cabinet.token(), cabinet=cabinet.name)
        except (TokenError, ConfigError) as exc:
            log.warning("status: no buckets for cabinet %s: %s", cabinet.id, exc)
            continue
        groups: dict[str, list[str]] = defaultdict(list)
        for ep in ENDPOINTS.values():
            if ep.allows(token.type):
                groups[ep.group].append(ep.name)
        for group, methods in groups.items():
            limit = ENDPOINTS[methods[0]].limit_for(token.type, runtime.settings.limit_overrides)
            wanted.append(
                (cabinet.name, group, methods, BucketScope(token.seller_id, group, limit))
            )
    peeks = await runtime.limiter.peek_many([w[3] for w in wanted])
    learned = await runtime.limiter.learned_many([w[3] for w in wanted])
    now = clock.now_ms()
    out = []
    for (name, group, methods, scope), peek, known in zip(wanted, peeks, learned, strict=True):
        limit, wait = scope.limit, 0 if peek.acquired else peek.wait_ms
        capacity = min(limit.burst, known.burst) if known is not None else limit.burst
        bucket = BucketOut(
            group=group,
            methods=methods,
            limit=LimitOut(
                period_s=limit.period_s, limit=limit.limit, burst=limit.burst, time_scale=scale
            ),
            tokens_left=min(peek.remaining, capacity),
            capacity=capacity,
            next_token_in_ms=wait,
            next_token_at=at_ms(now + wait),
            learned=_learned_out(known, scale),
        )
        out.append((name, bucket))
    return out


def _learned_out(known: Learned | None, scale: float) -> LearnedOut | None:
    if known is None:
        return None
    limit = known.as_limit(scale)
    return LearnedOut(
        period_s=limit.period_s,
        limit=limit.limit,
        burst=limit.burst,
        expires_in_ms=known.expires_in_ms,
    )


async def cabinet_buckets(runtime: Runtime, cabinet: Cabinet) -> list[BucketOut]:
    """Every limit group the cabinet's token may spend, read without taking a token."""
    parse_token(cabinet.token(), cabinet=cabinet.name)  # a bad token is the caller's error
    return [bucket for _, bucket in await buckets_of(runtime, [cabinet])]


async def queue_counts(runtime: Runtime) -> dict[str, dict[str, int]]:
    """Jobs per state of every queue; also sets the queue-depth gauges."""
    counts = await asyncio.gather(*(runtime.queue(q).counts() for q in SYNCS))
    for name, by_state in zip(SYNCS, counts, strict=True):
        for state, n in by_state.items():
            QUEUE_JOBS.labels(name, state).set(n)
    return dict(zip(SYNCS, counts, strict=True))


async def penalty_gauges(runtime: Runtime) -> None:
    """Set the penalty gauges from the penalties in force (one read of the limiter's records).

    A group without a penalty now reads 0 rather than vanishing, once it had one (and the
    global limiter always), so an alert on it resolves.
    """
    count: dict[str, int] = defaultdict(int)
    longest: dict[str, float] = defaultdict(float)
    for penalty in await runtime.limiter.penalties():
        count[penalty.group] += 1
        longest[penalty.group] = max(longest[penalty.group], penalty.remaining_ms / 1000.0)
    had = {s.labels["group"] for m in WB_PENALTIES.collect() for s in m.samples}
    for group in had | {GLOBAL_GROUP} | set(count):
        WB_PENALTIES.labels(group).set(count.get(group, 0))
        WB_PENALTY_REMAINING.labels(group).set(longest.get(group, 0.0))


async def cabinet_gauges(runtime: Runtime) -> None:
    """Set the cabinets' state gauges from two queries (the suspensions in force, the active
    cabinets' token expiries). A section once suspended reads 0 rather than vanishing."""
    store = runtime.store
    suspensions, expiries = await asyncio.gather(store.suspensions(), store.token_expiries())
    counts = state_counts(suspensions, expiries, at_ms(clock.now_ms()))
    for state, n in counts.states.items():
        CABINETS.labels(state).set(n)
    had = {s.labels["section"] for m in SECTIONS_SUSPENDED.collect() for s in m.samples}
    for section in had | set(counts.sections):
        SECTIONS_SUSPENDED.labels(section).set(counts.sections.get(section, 0))
    TOKEN_LEAST_REMAINING.set(counts.least_remaining_s)


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
