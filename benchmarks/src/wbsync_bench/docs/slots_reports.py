"""The ``slots --scenario reports`` section of docs/benchmarks.md: a fleet backfilling paid
storage through report tasks, its slot efficiency against WB's bound."""

from __future__ import annotations

from typing import Any

from wbsync_bench.docs.markdown import check, fmt, table
from wbsync_bench.slots_reports import COLUMNS

TITLE = "slots: report tasks, a fleet backfilling paid storage"
#: The efficiency the design asks of a fleet's backfill.
TARGET = 0.9


def render(r: dict[str, Any]) -> str:
    p, rounds = r["params"], r["rounds"]
    clean = all(x["rows_ok"] and x["attempts_spent"] == 0 and x["failed_jobs"] == 0 for x in rounds)
    out = [
        f"K={p['cabinets']} cabinets each backfill {p['days']} days of paid storage from "
        f"nothing: {p['windows']} report tasks of at most 8 days, through one process's worker "
        f"of C={p['concurrency']} slots (the reschedule service, the limiter in Redis, "
        f"{p['database']}), against the emulator in a child process, time scale "
        f"{p['time_scale']:g}. WB builds a task in 20 s (`new` 2 s, then `processing`), and "
        "downloads 1 a minute, burst 1: WB's bound for one cabinet is its first report built "
        f"and then one download a minute for each later task, {fmt(r['bound_s'])} s at this "
        "scale. `efficiency` = that bound / makespan (the enqueue to the last job's "
        "completion), as the finance pages' figure above is for rate-limit waits; "
        f"{p['rounds']} round(s), each afresh (new keys, new database, WB's buckets full). "
        "`runs` counts every slot taken (a run ends completed or deferred), `held_s` the "
        "seconds they were held, `slept_s` the seconds a slot slept in place on a wait; "
        "`report_deferrals` are the waits for WB's build (and for the download's budget to "
        "open), `rate_limit_deferrals` the limiter's; `status_calls` and `upstream_429` are "
        "the emulator's counts; `rows_ok`: every cabinet's rows are the report's, key by key; "
        "`load_1m`: the 1-minute load average at the round's end. Where the gap to the bound "
        "goes: [scaling.md](scaling.md#a-fleets-report-backfill-against-wbs-bound).",
        "",
        table(list(COLUMNS), [[x.get(c) for c in COLUMNS] for x in rounds]),
        "",
        f"Medians over the rounds: makespan {fmt(r['makespan_s'])} s, efficiency "
        f"**{fmt(r['efficiency'])}**, load average {fmt(r['load_1m'])}. Targets: efficiency "
        f">= {TARGET}: {check((r['efficiency'] or 0) >= TARGET)}; every row stored, no "
        f"attempt spent, no failed job in any round: {check(clean)}.",
    ]
    return "\n".join(out)
