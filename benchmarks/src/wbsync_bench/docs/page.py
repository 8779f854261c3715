"""The ``page`` section of docs/benchmarks.md: worker CPU and Redis commands per page, against bare
pipelines.
"""

from __future__ import annotations

from typing import Any

from wbsync_bench.common import REPORT_KEPT_REAL_S
from wbsync_bench.docs.markdown import check, fmt, table

TITLE = "page: worker CPU and Redis commands per page, against bare pipelines"


def render(r: dict[str, Any]) -> str:
    p = r["params"]
    variants = p["variants"]
    bare = [v for v in variants if v not in ("wbsync", "floor")]
    out = [
        f"Each sync's job enqueued for {p['cabinets']} new cabinets at a time (a first run of "
        "each) and worked by one `wbsync run` process (every queue's worker, "
        f"{p['concurrency']} jobs per queue) on a private Redis, a fresh database and the WB "
        "emulator answering at once on loopback, at a time scale where WB's minute lasts "
        f"{p['wb_minute_ms']:g} ms (no run waits for WB's limits). A fleet-wide sync (one job "
        f"for the whole fleet) runs {p['cabinets']} fleet jobs instead, one after the other, "
        "each enqueued as BullMQ ends the one before (not once its run is recorded: the run "
        "log writes behind), over the pages the worker counted (its throughput history: a "
        "run record is one per carrier, so two runs of one carrier may leave one); "
        f"the emulator keeps a built report {REPORT_KEPT_REAL_S / 60:g} real minutes (WB's 2 "
        "hours would be milliseconds "
        "at this scale), so a report sync's runs create, poll (deferring while WB builds) and "
        "download as at WB. wbsync's CPU is the worker "
        "process's (its threads' `schedstat`) from the enqueue to the last run recorded, over "
        "the pages recorded; commands are `INFO commandstats` deltas of the private Redis "
        "(Lua's inner commands included; the producer's enqueue and the idle workers' blocking "
        "waits are in it, as in production). The bare pipelines replay, in the benchmark's "
        "process, the requests one recorded run of the sync sent (same URLs, bodies, token) "
        "with nothing around them: the request, the JSON parse of the reply, one `EVALSHA` "
        "of the bucket script per request, and per page one batched upsert of the page's rows "
        "(asyncpg `executemany` into a `jsonb` table on PostgreSQL, aiosqlite `executemany` "
        "and a commit into a JSON-text table on SQLite); their CPU is that process's "
        "`process_time` over the same pages. `floor` is the fastest pair (aiohttp, orjson) run "
        "the way the design runs every sync: each run a job of its own, taken and finished by "
        "wbsync's job layer (`SyncWorker` over BullMQ, as many jobs at once as wbsync's workers; "
        "the jobs added beforehand, as by a producer elsewhere), the run's cursor saved in the "
        "job's data after each page; its CPU is this process's from the worker's start to the "
        "last job's completion. `x fastest` is wbsync over the fastest bare variant of the "
        "sync, `x floor` wbsync over the floor: what wbsync's own work (the sync runner, the "
        "store, the WB client and limiter, the run's bookkeeping) adds to the job the design "
        f"requires. Medians of {p['rounds']} rounds; in each round every sync is "
        "measured by every variant, in ABBA order. A `MONITOR` of the same Redis tells the "
        "commands apart (`wbsync_bench.monitor`): `BullMQ cmd/job` are BullMQ's own per job "
        "(its scripts with their inner commands: add, moveToActive, moveToFinished; its "
        "blocking waits), `wbsync cmd/page` all the others per page (buckets, cursor save with "
        "the throughput count and the change-stream entry, the producer's check for live "
        "jobs), `calls/page` "
        "the commands clients sent rather than scripts ran (a pipeline's commands count one "
        "each: a page's round trips are at most that).",
    ]
    for run in r["runs"]:
        rows = [
            [
                name,
                s["rows_per_page"],
                s["requests_per_run"] / s["pages_per_run"] if s["pages_per_run"] else None,
                *(s["cpu_ms_per_page"].get(v) for v in variants),
                f"{s['ratio_to_fastest_bare']:.2f} ({s['fastest_bare']})",
                s.get("ratio_to_floor"),
                s["redis_commands_per_page"],
                s.get("wbsync_commands_per_page"),
                s.get("bullmq_commands_per_job"),
                s.get("client_calls_per_page"),
            ]
            for name, s in run["syncs"].items()
        ]
        out += [
            "",
            f"**{run['database']}**: CPU ms per page",
            "",
            table(
                [
                    "sync",
                    "rows/page",
                    "requests/page",
                    *variants,
                    "x fastest",
                    "x floor",
                    "Redis cmd/page",
                    "wbsync cmd/page",
                    "BullMQ cmd/job",
                    "calls/page",
                ],
                rows,
            ),
            "",
            f"Redis commands per page by name ({run['database']}; those at 0.5 a page or more):",
            "",
            table(
                ["sync", "commands"],
                [
                    [
                        name,
                        ", ".join(
                            f"{cmd} {n:.2g}"
                            for cmd, n in s["redis_commands_per_page_by_name"].items()
                            if n >= 0.5
                        ),
                    ]
                    for name, s in run["syncs"].items()
                ],
            ),
        ]
    for database, t in r.get("targets", {}).items():
        out += [
            "",
            f"Targets for the 40-row finance page ({database}): <= 3 ms CPU: "
            f"{check(t['finance_cpu_met'])} ({fmt(t['finance_cpu_ms_per_page'])} ms); <= 1.5x "
            f"the fastest bare pipeline: {check(t['finance_ratio_met'])} "
            f"({fmt(t['finance_ratio'])}x; the floor alone is "
            f"{fmt(t.get('finance_floor_ratio'))}x the fastest bare pipeline, so the ratio "
            f"{'can' if t.get('finance_floor_ratio_met') else 'cannot'} be met by a run that "
            "is a job); <= 15 Redis commands: "
            f"{check(t['finance_commands_met'])} ({fmt(t['finance_commands_per_page'])}); "
            "wbsync's own <= 15 Redis commands a page (BullMQ's per-job scripts left out): "
            f"{check(t.get('finance_wbsync_commands_met', False))} "
            f"({fmt(t.get('finance_wbsync_commands_per_page'))}).",
        ]
    out += ["", f"Bare variants: {', '.join(bare)}.", "", "![page](bench-page.png)"]
    return "\n".join(out)
