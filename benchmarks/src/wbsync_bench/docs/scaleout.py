"""The ``scaleout`` section of docs/benchmarks.md: every sync end to end on many processes and a
Redis Cluster.
"""

from __future__ import annotations

from typing import Any

from wbsync_bench.docs.markdown import check, table

TITLE = "scaleout: every sync end to end on many processes and a Redis Cluster"


def render(r: dict[str, Any]) -> str:
    p = r["params"]
    columns = [
        "Redis, processes",
        "makespan s",
        "WB bound s",
        "efficiency",
        "pages/s",
        "jobs/s",
        "DB rows/s",
        "requests",
        "429s",
        "failed jobs",
        "worker CPU s / 1k pages",
        "machine CPU busy",
        "Redis cmds / page",
        "Redis peak MB",
    ]
    rows = [
        [
            f"{x['redis']}, {x['processes']}",
            x["makespan_s"],
            x["lower_bound_s"],
            x["efficiency"],
            x["pages_per_s"],
            x["jobs_per_s"],
            x["db_rows_per_s"],
            x["requests"],
            x["rate_limited"],
            x["failed_jobs"],
            x["worker_cpu_s_per_1000_pages"],
            f"{x['machine_cpu_share']:.0%}",
            x["redis_commands_per_page"],
            x["redis_memory_peak_bytes"] / 1e6,
        ]
        for x in r["runs"]
    ]
    clean = all(x["rate_limited"] == 0 and x["failed_jobs"] == 0 for x in r["runs"])
    lines = [
        f"{p['cabinets']:,} cabinets x 9 syncs, {p['concurrency']} job(s) per queue per process, "
        f"the emulator answering after {p['latency_ms']:g} ms (median; log-normal, sigma "
        f"{p['latency_sigma']:g}), time scale {p['time_scale']:g}, {r['database']}. Each run "
        "starts its own Redis (a private server, or three cluster masters) and database; the "
        "`wbsync run` processes start idle, and the clock runs from one fan-out pass to the "
        "last job's recorded success. The WB bound is what WB's limits alone force (the "
        "busiest bucket's requests beyond its burst, times its interval); efficiency is that "
        "bound over the makespan, so a low figure means WB's limits were not what took the "
        "time. CPU: the worker processes' own; machine CPU busy is the share of both cores "
        "busy with anything (the emulator, Redis and the database included).",
        "",
        table(columns, rows),
        "",
        f"Zero 429s and zero failed jobs in every run: {check(clean)}.",
    ]
    for kind, ratios in r.get("speedup", {}).items():
        text = ", ".join(f"{n} processes {v:.2f}x" for n, v in ratios.items() if n != "1")
        lines.append(f"\n{kind}: pages/s over one process: {text}.")
        if "4" not in ratios:
            continue
        four = next(x for x in r["runs"] if x["redis"] == kind and x["processes"] == 4)
        verdict = (
            "met"
            if ratios["4"] >= 2.5
            else f"not reached: the two cores were {four['machine_cpu_share']:.0%} busy with "
            "4 processes, the run was CPU-bound, not bound by WB or by slots"
        )
        lines.append(f"\n{kind}: 4 processes >= 2.5x the pages/s of one: {verdict}.")
    cost = r.get("cluster_cost", {})
    if cost:
        text = ", ".join(f"{n} process(es) {v:.0%}" for n, v in cost.items())
        worst = max(cost.values())
        lines.append(
            f"\nCluster cost against single Redis (share of pages/s lost): {text}; target "
            f"<= 15 %: {check(worst <= 0.15)}."
        )
    if "redis_server" in r:
        lines.append(f"\nredis-server: {r['redis_server']}")
    for kind, reason in r.get("skipped", {}).items():
        lines.append(f"\n{kind} skipped: {reason}")
    lines += ["", f"![scaleout]({plot_name(r)})"]
    return "\n".join(lines)


def plot_name(r: dict[str, Any]) -> str:
    """The plot file of a scaleout run (one per cabinets x concurrency)."""
    return f"bench-scaleout-{r['params']['cabinets']}-c{r['params']['concurrency']}.png"
