"""The ``capacity`` section of docs/benchmarks.md: the steady state of N cabinets on every sync's
interval.
"""

from __future__ import annotations

from typing import Any

from wbsync_bench.docs.markdown import fmt, table

TITLE = "capacity: steady state of N cabinets on every sync's interval"


def _share(value: float | None) -> str:
    return f"{value:.1%}" if value is not None and value == value else "-"


def render(r: dict[str, Any]) -> str:
    p = r["params"]
    columns = ["N", "load", "settle s", "pages/s", "runs", "missed"]
    columns += ["lag p50", "lag p95", "lag max", "start lag p95", "workers", "Redis", "database"]
    columns += ["emulator", "run-queue wait", "db connects"]
    columns += ["worst queue (p95 s / start p95 s / interval s)"]
    rows = []
    for run in r["runs"]:
        cores = run["cpu_cores"]
        worst = max(
            run["per_queue"].items(),
            key=lambda kv: (kv[1]["lag_p95_s"] or 0) / kv[1]["interval_s"],
            default=None,
        )
        rows.append(
            [
                run["cabinets"],
                run.get("load_average_1min", "-"),
                _settle(run),
                run["pages_per_s"],
                run["runs"],
                run["missed"],
                _share(run["lag_share_p50"]),
                _share(run["lag_share_p95"]),
                _share(run["lag_share_max"]),
                _share(run.get("start_lag_share_p95")),
                cores["workers"],
                cores["redis"],
                cores["database"] if cores["database"] is not None else "in workers",
                cores["emulator"],
                run.get("workers_wait_per_cpu_s", "-"),
                run.get("database_connections_opened") or 0,
                f"{worst[0]} ({fmt(worst[1]['lag_p95_s'])} / "
                f"{fmt(worst[1].get('start_lag_p95_s'))} / {fmt(worst[1]['interval_s'])})"
                if worst
                else "-",
            ]
        )
    largest = r.get("capacity_cabinets")
    verdict = (
        f"the largest N within the target: **{largest}** cabinets at time scale "
        f"{p['time_scale']:g}, the page rate of **{fmt(r['capacity_cabinets_at_real_time'])}** "
        "cabinets at WB's real intervals"
        if largest
        else "no N measured stayed within the target"
    )
    last = max(r["runs"], key=lambda x: x["cabinets"], default=None)
    if last is not None:
        cores = last["cpu_cores"]
        stack = cores["workers"] + cores["redis"] + (cores["database"] or 0.0)
        machine = r.get("machine", {}).get("cores") or 1
        verdict += (
            f". At N = {last['cabinets']} wbsync's stack (workers, Redis, database) used "
            f"{stack:.2f} of the machine's {machine} cores while its worker threads waited "
            f"{fmt(last.get('workers_wait_per_cpu_s'))} s on the run queue for every second "
            f"they ran (load average {fmt(last.get('load_average_1min'))})"
        )
    return "\n".join(
        [
            f"N cabinets, every sync fanned out on its default interval by the `wbsync run` "
            f"processes' own leader ({p['processes']} processes, {_slots_text(p)} each), time "
            f"scale {p['time_scale']:g} (N cabinets ask for the pages of "
            f"N / {p['time_scale']:g} at WB's real intervals), {r['database']}, the emulator "
            f"answering after {p['latency_ms']:g} ms. Each N gets its own Redis and database; "
            "the first fan-out (every cabinet of every queue at once; the dated report tasks "
            "start from their recent days, WBSYNC_SYNC_REPORT_HORIZON_DAYS = "
            f"{p.get('report_horizon_days', 90)}: a history's backfill is a one-time load, "
            "measured apart, not the steady state) is let drain, then the "
            "backlog of the runs enqueued on schedule while it ran (settle: until no queue has "
            "more jobs waiting than its slots over the processes at "
            f"{p.get('settle_polls')} polls in a row, at most {fmt(p.get('settle_limit_s'))} s; "
            "marked * where it did not drain and the window measured it too), then a "
            f"{p['window_s']:g} s window is measured, in which the leader enqueues each "
            "(cabinet, queue) at its own offset in the interval. Lag (freshness): when the "
            "run that served a due time completed (`sync_runs`) minus the time it was due "
            "(its offset in the interval, the leader's schedule), as a share of the queue's "
            "interval, pooled over every due time of every queue in the window (queues with "
            "intervals longer than the window have fewer); it includes the run itself, WB's "
            "windows between the pages of a multi-page sync too. Start lag: the run's first "
            "start minus its due time (recorded by the workers in Redis): the waiting that is "
            f"wbsync's. Missed: due times unserved {p['drain_s']:g} s after the window "
            "(counted at the lag they had then). CPU in cores (CPU seconds per second of the "
            "window): the worker processes, Redis (`INFO cpu`), PostgreSQL's backends serving "
            "the run's database (read from `/proc`; the benchmark's own connections left out; "
            "with SQLite the database works inside the workers) and, apart, the emulator (WB's "
            "work, not ours). Run-queue wait: seconds the worker threads were ready but waited "
            "for a core, per second they ran (`/proc/<pid>/task/*/schedstat`): the share of a "
            "run's wall time the machine's other load adds. db connects: connections the "
            "workers' pools opened during the window. Load: the 1-minute load average at the "
            "window's end.",
            "",
            table(columns, rows),
            "",
            f"Target: lag p95 within {r['lag_target']:.0%} of the interval; {verdict}."
            + (
                f" N = {r['overloaded']['cabinets']} was the last run: "
                f"{r['overloaded']['reason']} (larger N were not run)."
                if r.get("overloaded")
                else ""
            ),
            "",
            "![capacity](bench-capacity.png)",
        ]
    )


def _settle(run: dict[str, Any]) -> str:
    """How long the backlog took to drain; * where it had not drained by the limit."""
    if "settle_s" not in run:
        return "-"
    return fmt(run["settle_s"]) + ("" if run["settled"] else "*")


def _slots_text(p: dict[str, Any]) -> str:
    """The jobs each queue runs at once per process, the queues with another figure named."""
    slots = p.get("slots", p.get("queue_concurrency", {}))
    own = ", ".join(f"{q} {n}" for q, n in sorted(slots.items()) if n != p["concurrency"])
    every = f"{p['concurrency']} jobs per queue"
    return f"{every} ({own})" if own else every
