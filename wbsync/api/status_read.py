"""The status read: the shared index of every cabinet, and one page of the status model
(``StatusOut``) composed on it.

* The **index** (``build_index``): every cabinet (no token) with the state of its job in each
  queue, the oldest of its syncs' last successes, whether a sync last met a method WB switched
  off, and whether its seller has a learned limit or a penalty from WB. It costs one database
  query, one Redis pipeline that reads job ids only, one read of the learned limits' index and
  one of the penalties in force (``RateLimiter.penalties``), and two queries for what needs
  attention (the suspensions in force, the active cabinets' token expiries;
  ``wbsync.api.attention``). Search, filters, sorting and paging run on it in memory.
* The **page** (``compose``): the index's totals, and the details of one page of cabinets only:
  their jobs' data (one pipeline), their last runs (one query) and their buckets (one pipeline
  of peeks), read as the API reads them for one cabinet (``wbsync.api.live``).

``wbsync.api.status`` keeps the index and the pages it composes, and bounds the reads.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from wbsync.api.attention import ATTENTION_SHOWN, attention_out, flagged
from wbsync.api.live import buckets_of, counters
from wbsync.api.schemas.attention import AttentionOut
from wbsync.api.schemas.cabinets import cabinet_out
from wbsync.api.schemas.jobs import JobOut, RunOut, at_ms, job_out, run_out
from wbsync.api.schemas.penalties import PenaltyOut, penalty_out
from wbsync.api.schemas.status import (
    STATES,
    CabinetBucketOut,
    CabinetJobOut,
    CabinetStatusOut,
    LagOut,
    StatusOut,
    StatusQuery,
)
from wbsync.cabinets.penalties import by_seller
from wbsync.errors import ConfigError, TokenError
from wbsync.jobs.lag import LAG_WINDOW_S
from wbsync.jobs.views import job_states, read_jobs
from wbsync.ratelimit import Penalty
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet, CabinetOverview
from wbsync.syncs import SYNCS, unserved_queues
from wbsync.system import clock
from wbsync.wb.tokens import parse_token

__all__ = [
    "BUSIEST",
    "PENALTIES_SHOWN",
    "Index",
    "build_index",
    "compose",
    "in_force",
    "penalties_out",
]

BUSIEST = 12
"""The most buckets a status page lists (the emptiest first)."""
PENALTIES_SHOWN = 50
"""The most penalties a status page lists (the longest first); the API's route lists them all."""
_YIELD_EVERY = 1000
# Which job states each filter selects (a cabinet matches when any of its jobs is in one).
_FILTER_STATES: dict[str, frozenset[str]] = {
    "failed": frozenset({"failed"}),
    "deferred": frozenset({"delayed"}),
    "running": frozenset({"active"}),
    "waiting": frozenset({"waiting", "prioritized"}),
}


@dataclass(frozen=True, slots=True)
class _Row:
    cabinet: CabinetOverview
    states: dict[str, str]  # queue -> its job's state, for queues with a stored job
    stuck_since_ms: float | None  # None: nothing pending or failed
    learned: bool  # a bucket of its seller follows a limit learned from WB's replies
    penalised: bool  # WB's penalty holds a bucket of its seller
    attention: bool = False  # suspended, or its token expired or expires soon


@dataclass(frozen=True, slots=True)
class Index:
    """Every cabinet's row and the totals over all of them, as of ``built_at``."""

    rows: list[_Row]
    queues: dict[str, dict[str, int]]
    lag: dict[str, LagOut]
    built_at: float  # monotonic seconds
    penalties: list[Penalty]
    sellers: dict[str, list[CabinetOverview]]  # seller id -> its cabinets
    attention: AttentionOut = field(default_factory=AttentionOut)  # as of built_at, shown rows
    unloaded: list[str] = field(default_factory=list)


async def build_index(runtime: Runtime) -> Index:
    """Read every cabinet's row and the totals (the reads are in the module's docstring)."""
    queues = [runtime.queue(q) for q in SYNCS]
    store = runtime.store
    (
        (overview, states, learned, lag, recorded, penalties),
        (suspensions, expiries),
    ) = await asyncio.gather(
        asyncio.gather(
            store.runs.overview(),
            job_states(runtime.redis, queues),
            runtime.limiter.learned_cabinets(),
            runtime.lag.recent(list(SYNCS)),
            store.runs.queues(),
            runtime.limiter.penalties(),
        ),
        asyncio.gather(store.suspensions(), store.token_expiries()),
    )
    penalised = {p.seller for p in penalties}
    now = at_ms(clock.now_ms())
    needs = flagged(suspensions, expiries, now)
    counts = {q: dict.fromkeys(STATES, 0) for q in SYNCS}
    for name, by_cabinet in states.items():
        for state, n in Counter(by_cabinet.values()).items():
            counts[name][state] = n
    rows = []
    for n, cabinet in enumerate(overview):
        if n % _YIELD_EVERY == 0:
            await asyncio.sleep(0)  # let requests through while a large index is built
        key = str(cabinet.id)
        mine = {q: by_cabinet[key] for q, by_cabinet in states.items() if key in by_cabinet}
        seller = cabinet.seller_id
        since = _stuck_since(cabinet, mine)
        rows.append(
            _Row(cabinet, mine, since, seller in learned, seller in penalised, cabinet.id in needs)
        )
    return Index(
        rows=rows,
        queues=counts,
        lag={q: LagOut.model_validate(f, from_attributes=True) for q, f in lag.items()},
        built_at=clock.monotonic(),
        penalties=penalties,
        sellers=by_seller(overview),
        attention=attention_out(suspensions, expiries, now, shown=ATTENTION_SHOWN),
        unloaded=[q for q in recorded if q not in SYNCS],
    )


async def compose(runtime: Runtime, index: Index, query: StatusQuery) -> StatusOut:
    """One page of the status: the index's totals and the page's cabinets read in detail."""
    matched = _select(index.rows, query)
    start = (query.page - 1) * query.per_page
    cabinets, buckets = await _details(runtime, matched[start : start + query.per_page])
    jobs = [CabinetJobOut(cabinet=c.cabinet, job=j) for c in cabinets for j in c.jobs]
    now = clock.now_ms()
    live = in_force(index.penalties, now)
    return StatusOut(
        generated_at=at_ms(now),
        time_scale=runtime.settings.time_scale,
        counters=counters(),
        queues=index.queues,
        lag=index.lag,
        lag_window_s=LAG_WINDOW_S,
        unloaded_queues=index.unloaded,
        total=len(index.rows),
        matched=len(matched),
        page=query.page,
        per_page=query.per_page,
        pages=max(1, -(-len(matched) // query.per_page)),
        cabinets=cabinets,
        # Soonest resume first; latest failure first.
        waiting=sorted(
            (e for e in jobs if e.job.state == "delayed"), key=lambda e: e.job.resume_in_ms or 0
        ),
        failed=sorted(
            (e for e in jobs if e.job.state == "failed"),
            key=lambda e: e.job.failed_at or e.cabinet.created_at,
            reverse=True,
        ),
        busiest_buckets=buckets,
        penalties=penalties_out(live[:PENALTIES_SHOWN], index.sellers, now),
        penalties_total=len(live),
        attention=index.attention,
    )


async def _details(
    runtime: Runtime, rows: Sequence[_Row]
) -> tuple[list[CabinetStatusOut], list[CabinetBucketOut]]:
    wanted = [
        (runtime.queue(q), str(row.cabinet.id), state)
        for row in rows
        for q, state in row.states.items()
    ]
    ids = [row.cabinet.id for row in rows]
    views, runs, cabinets = await asyncio.gather(
        read_jobs(runtime.redis, wanted),
        runtime.store.runs.of_cabinets(ids),
        runtime.store.cabinets.many(ids),
    )
    jobs: dict[str, list[JobOut]] = defaultdict(list)
    for view in views:
        if view is not None:
            jobs[view.cabinet].append(job_out(view))
    runs_of: dict[int, list[RunOut]] = defaultdict(list)
    for record in runs:
        runs_of[record.cabinet_id].append(run_out(record))
    unserved = {c.id: _unserved(c) for c in cabinets}
    statuses = [
        CabinetStatusOut(
            cabinet=cabinet_out(row.cabinet),
            jobs=jobs.get(str(row.cabinet.id), []),
            runs=sorted(runs_of.get(row.cabinet.id, []), key=lambda r: _queue_order(r.queue)),
            stuck_since=None if row.stuck_since_ms is None else at_ms(row.stuck_since_ms),
            unserved=unserved.get(row.cabinet.id, {}),
        )
        for row in rows
    ]
    buckets = await buckets_of(runtime, [c for c in cabinets if c.active])
    busy = [b for b in buckets if b[1].tokens_left < b[1].capacity]
    busy.sort(key=lambda b: (b[1].tokens_left / b[1].capacity, -b[1].next_token_in_ms))
    return statuses, [CabinetBucketOut(cabinet=n, bucket=b) for n, b in busy[:BUSIEST]]


def _queue_order(queue: str) -> tuple[int, str]:
    """Registered queues in their declared order, then queues this process does not know
    (a plugin loaded elsewhere) by name."""
    known = list(SYNCS)
    return (known.index(queue), "") if queue in SYNCS else (len(known), queue)


def _unserved(cabinet: Cabinet) -> dict[str, str]:
    """The queues the cabinet's token cannot serve (the fan-out skips them), with why."""
    try:
        return unserved_queues(parse_token(cabinet.token(), cabinet=cabinet.name))
    except (TokenError, ConfigError):
        return {}


def _stuck_since(cabinet: CabinetOverview, states: dict[str, str]) -> float | None:
    """Since when the cabinet waits for a success: None when none of its jobs is pending.

    That is its oldest last success over every sync, or its creation when a sync never
    succeeded for it.
    """
    if not states:
        return None
    since = cabinet.created_at
    if cabinet.oldest_success is not None and cabinet.successes >= len(SYNCS):
        since = cabinet.oldest_success
    return since.timestamp() * 1000.0


def _select(rows: Sequence[_Row], query: StatusQuery) -> list[_Row]:
    """The rows matching the query's search and filter, in its order."""
    found = list(rows)
    needle = query.search.strip().lower()
    if needle:
        found = [
            r
            for r in found
            if needle in r.cabinet.name.lower()
            or needle == str(r.cabinet.id)
            or r.cabinet.seller_id.lower().startswith(needle)
        ]
    if query.state == "idle":
        found = [r for r in found if not r.states]
    elif query.state == "disabled-method":
        found = [r for r in found if r.cabinet.disabled_methods]
    elif query.state == "learned-limit":
        found = [r for r in found if r.learned]
    elif query.state == "penalty":
        found = [r for r in found if r.penalised]
    elif query.state == "needs-attention":
        found = [r for r in found if r.attention]
    elif query.state != "all":
        wanted = _FILTER_STATES[query.state]
        found = [r for r in found if any(s in wanted for s in r.states.values())]
    if query.sort == "name":
        found.sort(key=lambda r: (r.cabinet.name.lower(), r.cabinet.id))
    elif query.sort == "stuck":
        found.sort(key=lambda r: (r.stuck_since_ms is None, r.stuck_since_ms or 0, r.cabinet.id))
    return found  # "id": the index is already in id order


def in_force(penalties: Sequence[Penalty], now_ms: float) -> list[Penalty]:
    """The penalties still in force at ``now_ms`` (an index's may have lifted since), the
    longest first."""
    return sorted((p for p in penalties if p.until_ms > now_ms), key=lambda p: -p.until_ms)


def penalties_out(
    penalties: Sequence[Penalty], sellers: dict[str, list[CabinetOverview]], now_ms: float
) -> list[PenaltyOut]:
    """The penalties as the API shows them, each with its seller's cabinets."""
    return [
        penalty_out(p, [cabinet_out(c) for c in sellers.get(p.seller, [])], now_ms)
        for p in penalties
    ]
