"""Every Prometheus metric wbsync exports, defined once on the default registry."""

from __future__ import annotations

from prometheus_client import REGISTRY, Counter, Gauge, Histogram

from wbsync.observability.context import current_job

RESCHEDULES = Counter(
    "wbsync_rate_limit_reschedules",
    "Jobs moved to delayed because a rate-limit window was longer than the deferral threshold; "
    "counted by the worker process that deferred the job, so a process running no workers "
    "(a standalone `wbsync api`) counts none: read the workers' /metrics.",
    ["queue", "scope"],
)

DEFERRALS = Counter(
    "wbsync_deferrals",
    "Jobs moved to delayed on a wait that is not theirs, by reason: rate_limit (a window longer "
    "than the deferral threshold; wbsync_rate_limit_reschedules has its limit group) or report "
    "(WB still building a report task the job asked for); counted by the worker process that "
    "deferred the job.",
    ["queue", "reason"],
)

LIMITER_WAIT = Histogram(
    "wbsync_limiter_wait_seconds",
    "Time acquire() waited for a token, by limit group and outcome "
    "(acquired: no wait; slept; deferred; refused).",
    ["scope", "outcome"],
    buckets=(0.0, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 125.0),
)

LEARNED_LIMITS = Counter(
    "wbsync_learned_limits",
    "Times a bucket was tightened to a stricter limit that WB's replies showed (per limit "
    "group); the learned limit holds until learned_limit_ttl_s passes.",
    ["group"],
)

SLOT_SLEEP = Counter(
    "wbsync_slot_sleep_seconds",
    "Seconds a queue's worker slots spent sleeping on rate-limit windows.",
    ["queue"],
)

UPSTREAM_REQUESTS = Counter(
    "wbsync_upstream_requests_total",
    "Requests sent to WB (or the emulator), by section and reply status "
    "('transport' when no reply came), and the queue whose job sent it ('' outside jobs).",
    ["section", "status", "queue"],
)


def count_upstream(section: str, status: str) -> None:
    """Count one request to WB, labelled with the queue of the job that sent it, if any."""
    job = current_job()
    UPSTREAM_REQUESTS.labels(section, status, job.queue if job else "").inc()


REFUSED_ITEMS = Counter(
    "wbsync_wb_refused_items_total",
    "Items of a batch write that WB refused one by one (the rest of the batch went through).",
    ["method"],
)

BID_WRITES = Counter(
    "wbsync_bid_writes_total",
    "Bids the autobidder wrote to WB, per item, by outcome: ok (WB applied it) or refused (WB "
    "refused that item; its words are the bid row's last_write_error).",
    ["outcome"],
)

SYNC_PAGES = Counter("wbsync_sync_pages", "Pages a sync fetched and stored.", ["queue"])

SYNC_ROWS = Counter(
    "wbsync_sync_rows",
    "Rows a sync fetched from WB and stored (upserted: written only where they changed, see "
    "wbsync_sync_rows_written).",
    ["queue"],
)

SYNC_ROWS_WRITTEN = Counter(
    "wbsync_sync_rows_written",
    "Rows a sync wrote: inserted or changed (a row WB sent again unchanged is not written).",
    ["queue"],
)

JOB_DURATION = Histogram(
    "wbsync_job_duration_seconds",
    "Duration of one run of a job, by queue and outcome (completed, deferred, failed, "
    "abandoned: the lock was lost, another worker has the job).",
    ["queue", "outcome"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0),
)

FAILURE_BUDGET_EXHAUSTED = Counter(
    "wbsync_job_failure_budget_exhausted",
    "Jobs failed for good because their upstream failures reached the failure budget.",
    ["queue"],
)

JOB_RETRIES = Counter(
    "wbsync_job_retries",
    "Jobs sent back to delayed after a failure, without spending an attempt, by reason "
    "(upstream: a WB call gave up below the budget; infrastructure: database or Redis "
    "unavailable; rate_limit: a short queue's wait past the ceiling).",
    ["queue", "reason"],
)

QUEUE_JOBS = Gauge(
    "wbsync_queue_jobs",
    "Jobs in each queue by state (active, waiting, delayed, prioritized, completed, failed); "
    "read from Redis when /metrics is scraped.",
    ["queue", "state"],
)

SYNC_LAG = Histogram(
    "wbsync_sync_lag_seconds",
    "How late each (cabinet, queue) run the fan-out scheduled started after it was due "
    "(real seconds; measured once per run, at its first start, by the process that ran it).",
    ["queue"],
    buckets=(0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0),
)

WB_PENALTIES = Gauge(
    "wbsync_wb_penalties",
    "Penalties WB gave that are in force now, per limit group (the seller's global limiter "
    "included), over every seller; read from Redis when /metrics is scraped.",
    ["group"],
)

WB_PENALTY_REMAINING = Gauge(
    "wbsync_wb_penalty_remaining_seconds",
    "The longest time one of the group's penalties in force still holds (max over sellers; "
    "0 with none); read from Redis when /metrics is scraped.",
    ["group"],
)

CABINETS = Gauge(
    "wbsync_cabinets",
    "Cabinets by state: active (every active cabinet); expiring (of those, a token expiring "
    "within 14 days); expired (a token past its exp: nothing is sent); refused (suspended as a "
    "whole cabinet for what WB said). Read from the database when /metrics is scraped.",
    ["state"],
)

SECTIONS_SUSPENDED = Gauge(
    "wbsync_cabinet_sections_suspended",
    "Active cabinets with a WB section suspended (a category, token type, payment or refused "
    "request), "
    "per section; read from the database when /metrics is scraped.",
    ["section"],
)

TOKEN_LEAST_REMAINING = Gauge(
    "wbsync_cabinet_token_least_remaining_seconds",
    "The least time before an active cabinet's token expires, over the tokens not yet expired "
    "(+Inf with none); read from the database when /metrics is scraped.",
)

FANOUT_LEADER = Gauge(
    "wbsync_fanout_leader",
    "1 while this process leads the queue's fan-out (holds its lease in Redis), else 0.",
    ["queue"],
)


def sample(name: str, **labels: str) -> float:
    """The current value of one sample of the default registry (0 if it was never set)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


def queue_value(counter: Counter, queue: str) -> float:
    """A per-queue counter's value for ``queue``."""
    [family] = counter.describe()
    return sample(f"{family.name}_total", queue=queue)


def upstream_rate_limited(queue: str) -> float:
    """429s WB (or the emulator) sent to ``queue``'s jobs, over every section."""
    return sum(
        s.value
        for metric in UPSTREAM_REQUESTS.collect()
        for s in metric.samples
        if s.name.endswith("_total")
        and s.labels.get("queue") == queue
        and s.labels.get("status") == "429"
    )
