"""The ``slots`` section of docs/benchmarks.md: worker slots while windows are closed: the modes'
makespans, and against K.
"""

from __future__ import annotations

import math
from typing import Any

from wbsync_bench.docs.markdown import check, fmt, table
from wbsync_bench.slots import COLUMNS

TITLE = "slots: worker slots while windows are closed"


def render(r: dict[str, Any]) -> str:
    p, modes = r["params"], r["modes"]
    rows = [[m, *(v.get(c) for c in COLUMNS)] for m, v in modes.items()]
    defer = modes.get("defer", {})
    speed = r.get("speedup_defer_vs_block") or math.nan
    clean = all(v["upstream_429"] == 0 and v["failed_jobs"] == 0 for v in modes.values())
    out = [
        f"K={p['cabinets']} cabinets each pull P={p['pages']} pages of the finance detailed "
        f"report (1 request per 60 s, burst 1; time scale {p['time_scale']:g}, so the window is "
        f"{p['period_s']:g} s) through a worker of C={p['concurrency']} slot(s); "
        f"{p['rounds']} round(s) of defer and retry in ABBA order with block (a minute at the "
        "defaults) once in the middle of the sequence. Modes: `defer` (RescheduleService: the "
        "job goes to delayed for the rest of the window, no attempt spent), `block` (no "
        "deferral context: `acquire` sleeps in the slot; its ceiling is raised to three "
        "periods so it is never reached: a "
        "job waits at most one period for its own bucket, two after a 429), `retry` (the "
        "closed window becomes a plain error; BullMQ retries after a fixed backoff of one "
        "period, spending an attempt each time). `lower_bound_s` = (P - burst) x period, or "
        "K x P x page time / C when larger; `efficiency` = lower bound / makespan. "
        "`upstream_*` are the emulator's own counters (429s and failed jobs summed over the "
        "rounds); `attempts_made_max` is the highest `attemptsMade` a run of a job started "
        "with. The limiter is wired as in production: each token's interval gets the refill "
        "margin (2 % of the scaled interval, at most 25 real ms: 12 ms, 2 % of the window at "
        "this time scale, 0.04 % at real scale), which keeps requests from reaching WB a hair "
        "early. "
        "`startup_aware_bound_s` = (P - burst) x (period + margin) + ((K - 1) // C + 1) x page "
        "time, what one slot must do before the last cabinet's first page: not a target, it "
        "shows how much of the gap to the lower bound is the margin and the slot's own work.",
        "",
        table(["mode", *COLUMNS], rows),
        "",
        f"Speedup of defer over block: **{fmt(speed)}x**. Targets: defer efficiency >= 0.9: "
        f"{check((defer.get('efficiency') or 0) >= 0.9)} ({fmt(defer.get('efficiency'))}); "
        f"speedup >= 10: {check(speed >= 10)}; no 429 and no failed job in any mode: "
        f"{check(clean)}; defer spends no attempt: "
        f"{check(defer.get('attempts_made_max', 1) == 0)}.",
    ]
    return "\n".join(out)


def render_sweep(r: dict[str, Any]) -> str:
    modes = list(next(iter(r["sweep"].values())))
    rows = [[k, *(v[m] for m in modes)] for k, v in r["sweep"].items()]
    p = r["params"]
    return "\n".join(
        [
            f"Makespan (s) of every mode for K in {', '.join(r['sweep'])} (P={p['pages']}, "
            f"C={p['concurrency']}; K={p['cabinets']} is the run above, the other points one round "
            "each). Blocking grows as "
            "K x (P - 1) x period / C: each job holds the slot through its own windows; deferring "
            "stays at the window bound until the slot's work (K x P pages) catches up with it.",
            "",
            table(["K", *modes], rows),
            "",
            "![slots](bench-slots.png)",
        ]
    )
