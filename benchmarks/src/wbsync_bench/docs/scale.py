"""The ``scale`` section of docs/benchmarks.md: the fan-out of many cabinets: enqueue rates and
Redis memory.
"""

from __future__ import annotations

from typing import Any

from wbsync_bench.docs.markdown import check, table

TITLE = "scale: fan-out of many cabinets"


def render(r: dict[str, Any]) -> str:
    d = r["detail"]
    rows = [
        ["jobs (cabinets x queues)", f"{r['jobs']:,} ({r['cabinets']:,} x {d['queues']})"],
        [
            "enqueue, `enqueue_many`",
            f"{r['enqueue_s']:.2f} s ({d['enqueue_many_jobs_per_s']:,.0f} jobs/s)",
        ],
        [
            "enqueue one by one, `enqueue` (1,000-job sample, 64 in flight on BullMQ's single "
            "connection)",
            f"{d['enqueue_one_by_one_jobs_per_s']:,.0f} jobs/s",
        ],
        ["Redis memory per delayed job", f"{r['redis_bytes_per_delayed_job']:,.0f} bytes"],
        [
            "  the job's own keys (no event streams, no client buffers)",
            f"{d['redis_bytes_per_delayed_job_keys_only']:,.0f} bytes",
        ],
        [
            "Redis memory per waiting job (before the first run)",
            f"{d['redis_bytes_per_waiting_job']:,.0f} bytes",
        ],
        ["Redis memory per empty bucket", f"{d['redis_bytes_per_bucket']:,.0f} bytes"],
        ["first runs (each job defers)", f"{d['first_runs_jobs_per_s']:,.0f} jobs/s"],
        ["resumed runs once windows open", f"{r['jobs_per_s']:,.0f} jobs/s"],
    ]
    return "\n".join(
        [
            "A fan-out of every cabinet over the seven long queues on a private embedded Redis; "
            "one "
            f"worker process with one worker of {d['worker_concurrency_per_queue']} slots per "
            "queue. Every job takes its bucket's one token (1 per hour) and asks for another, so "
            "it is deferred by the real path; with every job delayed, `used_memory` is read, the "
            "bucket keys are deleted (the windows open) and `used_memory` read again: bytes per "
            "delayed job = (that - before the fan-out) / jobs, BullMQ's event streams (capped at "
            "~10,000 entries per queue, so their share per job falls as cabinets grow) included; "
            "the second line takes out the streams (MEMORY USAGE) and the connections' buffers "
            "(`mem_clients_normal`): what the jobs' own keys cost. Then every "
            "delayed job is made due at once "
            "(`promote_delayed`) and the same process runs them all to completion.",
            "",
            table(["measure", "value"], rows),
            "",
            f"Target <= 2 KB per delayed job: {check(r['redis_bytes_per_delayed_job'] <= 2048)}.",
        ]
    )
