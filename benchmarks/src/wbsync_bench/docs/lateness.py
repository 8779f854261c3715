"""The ``lateness`` section of docs/benchmarks.md: how late deferred jobs resume."""

from __future__ import annotations

from typing import Any

from wbsync_bench.docs.markdown import check, fmt, table

TITLE = "lateness: how late deferred jobs resume"


def render(r: dict[str, Any]) -> str:
    p = r["params"]
    return "\n".join(
        [
            f"{r['samples']} jobs, each deferred once by the real path (limiter -> "
            f"RateLimitDeferred -> RescheduleService -> moveToDelayed) for a "
            f"{fmt(p['window_ms'])} ms window. Lateness = the resumed processor's start minus "
            '`job.data["resume_at_ms"]` (both on this host\'s clock). Jobs are added '
            f"{fmt(p['stagger_ms'])} ms apart and the worker has {p['concurrency']} slots, so "
            "resumes rarely coincide and a slot is free when one is due: the figure is the queue's "
            "wake-up delay, not jobs queueing behind one another on one slot.",
            "",
            table(
                ["samples", "p50 ms", "p95 ms", "max ms", "min ms"],
                [[r["samples"], r["p50_ms"], r["p95_ms"], r["max_ms"], r["min_ms"]]],
            ),
            "",
            f"Target p95 <= 50 ms: {check(r['p95_ms'] <= 50)}.",
            "",
            "![lateness](bench-lateness.png)",
        ]
    )
