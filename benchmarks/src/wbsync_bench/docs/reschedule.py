"""The ``reschedule`` section of docs/benchmarks.md: Redis commands per deferral."""

from __future__ import annotations

from typing import Any

from wbsync_bench.docs.markdown import check, fmt, table

TITLE = "reschedule: Redis commands per deferral"


def render(r: dict[str, Any]) -> str:
    d = r["detail"]
    rows = [
        [
            label,
            v["commands"],
            v["executions"],
            ", ".join(f"{k} {x:g}" for k, x in v.get("commands_by_name", {}).items()),
        ]
        for label, v in d.items()
    ]
    return "\n".join(
        [
            f"Over n={r['n']} operations on a private embedded Redis. Each operation runs in a "
            "window "
            "bracketed by ECHO markers while nothing else talks to Redis (the worker runs one job "
            "at a time and fetches nothing while its processor runs). *Commands* are the top-level "
            "commands sent in the window (client round trips), read from MONITOR, which tags the "
            "commands run inside Lua; *executions* are the `INFO commandstats` delta, Lua-internal "
            "calls included. The deferral window runs from `RescheduleService` catching "
            "`RateLimitDeferred` (the processor raises it, so no limiter call is inside) through "
            "the wake-up at the due time: `moveToDelayed` carrying the job's data (cursor, "
            "deferral count, scope, resume_at_ms) as fields it writes after its lock check (one "
            "EVALSHA) and the queue wake-up marker (one ZADD). The first job, which loads "
            "BullMQ's scripts, is not counted. The full cycle is everything per job of a run "
            "where each job is added, deferred once and completed (enqueue's state checks, "
            "fetches, the deferral, completion).",
            "",
            table(
                ["operation", "commands (round trips)", "executions (incl. Lua)", "commands"], rows
            ),
            "",
            f"Targets: <= 2 commands per deferral: {check(r['redis_commands_per_deferral'] <= 2)} "
            f"({fmt(r['redis_commands_per_deferral'])}); exactly 1 per try_acquire: "
            f"{check(r['redis_commands_per_try_acquire'] == 1)} "
            f"({fmt(r['redis_commands_per_try_acquire'])}).",
        ]
    )
