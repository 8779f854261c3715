"""The ``capacity`` section of docs/benchmarks.md: the steady state of N cabinets on every sync's
interval.
"""

from __future__ import annotations

from typing import Any

from wbsync.bench.docs.markdown import fmt, table

TITLE = "capacity: steady state of N cabinets on every sync's interval"


def render(r: dict[str, Any]) -> str:
    p = r["params"]
    columns = ["N", "pages/s", "runs", "missed", "lag p50", "lag p95", "lag max"]
    columns += ["workers", "Redis", "database", "emulator", "worst queue (p95 s / interval s)"]
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
                run["pages_per_s"],
                run["runs"],
                run["missed"],
                f"{run['lag_share_p50']:.1%}" if run["lag_share_p50"] is not None else "-",
                f"{run['lag_share_p95']:.1%}" if run["lag_share_p95"] is not None else "-",
                f"{run['lag_share_max']:.1%}" if run["lag_share_max"] is not None else "-",
                cores["workers"],
                cores["redis"],
                cores["database"] if cores["database"] is not None else "in workers",
                cores["emulator"],
                f"{worst[0]} ({fmt(worst[1]['lag_p95_s'])} / {fmt(worst[1]['interval_s'])})"
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
            f"{stack:.2f} of the machine's {machine} cores"
            + (
                ": the CPU was not the bound. The fan-out enqueues every cabinet at once, and "
                "each run's wall time (its Redis and database round trips, each waiting for a "
                "core on a machine busy with other work) is what the lag is made of"
                if stack < 0.5 * machine
                else ""
            )
        )
    return "\n".join(
        [
            f"N cabinets, every sync fanned out on its default interval by the `wbsync run` "
            f"processes' own leader ({p['processes']} processes, {p['concurrency']} jobs per "
            f"queue each), time scale {p['time_scale']:g} (N cabinets ask for the pages of "
            f"N / {p['time_scale']:g} at WB's real intervals), {r['database']}, the emulator "
            f"answering after {p['latency_ms']:g} ms. Each N gets its own Redis and database; "
            "the first fan-out (every queue at once) is let drain, then a "
            f"{p['window_s']:g} s window is measured. Lag: how late each (cabinet, queue) run "
            "completes after its fan-out (the schedule in Redis; completions from "
            "`sync_runs`), as a share of the queue's interval, pooled over every run of every "
            "queue whose fan-out fell in the window (queues with intervals longer than the "
            f"window have none); missed: fan-outs unserved {p['drain_s']:g} s after the window "
            "(counted at the lag they had then). CPU in cores (CPU seconds per second of the "
            "window): the worker processes, Redis (`INFO cpu`), PostgreSQL's backends serving "
            "the run's database (looked for at every poll, as the pools open and close "
            "connections, and read from `/proc`; the benchmark's own connections left out; "
            "with SQLite the database works inside the workers) "
            "and, apart, the emulator (WB's work, not ours).",
            "",
            table(columns, rows),
            "",
            f"Target: lag p95 within {r['lag_target']:.0%} of the interval; {verdict}."
            + (
                f" N = {r['overloaded']['cabinets']} was not held: "
                f"{r['overloaded']['reason']} (larger N were not run)."
                if r.get("overloaded")
                else ""
            ),
            "",
            "![capacity](bench-capacity.png)",
        ]
    )
