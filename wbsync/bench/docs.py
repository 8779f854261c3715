"""``--write-docs``: results into ``docs/benchmarks.md`` and plots into ``docs/*.png``.

Results accumulate in ``docs/benchmarks.json`` (one entry per benchmark, the latest run), and
the whole page is rendered from it, so running one benchmark updates its section only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wbsync.bench import plots
from wbsync.bench.common import rounded

ORDER = (
    "slots",
    "limiter",
    "reschedule",
    "lateness",
    "scale",
    "status",
    "scaleout",
    "page",
    "capacity",
    "data",
)

_HEADER = """# Benchmarks

Measured by `wbsync bench` (`make bench` runs `wbsync bench all --write-docs`). Every benchmark
uses the real stack: Redis (`WBSYNC_REDIS_URL`, else a private embedded `redis-server`), BullMQ
workers, and, where WB is called, the real `WbClient` against the WB emulator served by uvicorn
in a child process on loopback. Comparisons are measured in the same run, interleaved: the
implementations or modes alternate in rounds (ABBA order), so a machine that slows down during
the run does not favour one side. Medians are over rounds; latency percentiles over every call.
Each section names the command that produced it and the machine it ran on; the raw results are
in `benchmarks.json`. Regenerate with `make bench` (about 15 minutes on the machine below: the
first five benchmarks about 7, page about 2 on SQLite alone, capacity 2-3 minutes per N, 5 to 20
in all: it stops at the first N a whole interval late; `wbsync bench all
--postgres URL` measures page on PostgreSQL too and runs capacity on it). `all` runs scale with
1,000 cabinets, and `wbsync bench scale --write-docs` adds the 10,000-cabinet run, about 7
minutes more. `status` and `scaleout` run on their own (`wbsync bench status --write-docs`,
about 10 s; `wbsync bench scaleout --write-docs`, about 20 minutes at its default 1,000
cabinets); each scaleout configuration (cabinets, jobs per queue per process) keeps its own
section. `data` runs on its own too (`wbsync bench data --postgres <admin
URL> --write-docs`, about 4 minutes).

The machine is small and shared: two cores for Redis, the benchmark, the emulator and whatever
else runs (other test suites ran alongside, load average 2-3; page and capacity ran with load
average 4-11, two to five busy processes per core, which slows every CPU-second and lengthens
every wait, so their absolute CPU figures and lags are worse than on a quiet machine; sections
measured since the load average was recorded give it). Absolute throughput is therefore low and
moves by tens of percent between runs; read the ratios measured within one run, and the counts
(commands, requests, 429s, attempts), which do not depend on load.
"""


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.{digits}g}"
    return str(value)


def _table(columns: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _meta(r: dict[str, Any]) -> str:
    m = r.get("machine", {})
    return (
        f"Command: `{r.get('command', '?')}` ({r.get('measured_at', '?')}, "
        f"{_fmt(r.get('wall_s'))} s). Machine: {m.get('cpu')}, {m.get('cores')} cores, "
        f"Python {m.get('python')}, Redis {m.get('redis')}, {m.get('os')}"
        + (
            f"; load average {', '.join(f'{x:g}' for x in m['load_average'])} at the end "
            "(1, 5, 15 min)."
            if m.get("load_average")
            else "."
        )
    )


def _check(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _slots(r: dict[str, Any]) -> str:
    p, modes = r["params"], r["modes"]
    cols = [
        "makespan_s",
        "lower_bound_s",
        "efficiency",
        "slot_sleep_s",
        "upstream_requests",
        "upstream_429",
        "deferrals",
        "attempts_made_max",
        "failed_jobs",
        "startup_aware_bound_s",
    ]
    rows = [[m, *(v.get(c) for c in cols)] for m, v in modes.items()]
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
        _table(["mode", *cols], rows),
        "",
        f"Speedup of defer over block: **{_fmt(speed)}x**. Targets: defer efficiency >= 0.9: "
        f"{_check((defer.get('efficiency') or 0) >= 0.9)} ({_fmt(defer.get('efficiency'))}); "
        f"speedup >= 10: {_check(speed >= 10)}; no 429 and no failed job in any mode: "
        f"{_check(clean)}; defer spends no attempt: "
        f"{_check(defer.get('attempts_made_max', 1) == 0)}.",
    ]
    return "\n".join(out)


def _sweep(r: dict[str, Any]) -> str:
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
            _table(["K", *modes], rows),
            "",
            "![slots](bench-slots.png)",
        ]
    )


def _limiter(r: dict[str, Any]) -> str:
    out = [
        f"One process, {r['params']['tasks']} asyncio tasks calling one implementation for "
        f"{r['params']['window_s']:g} s, implementations alternating, {r['params']['rounds']} "
        f"rounds; limit {r['params']['limit_per_s']}/s, burst {r['params']['limit_per_s']}. "
        "`many_buckets`: tasks walk 10,000 buckets (nearly every call admitted, the writing "
        "path); `hot_bucket`: one bucket (nearly every call refused). `bare_evalsha` is one "
        "EVALSHA of `return 0`: the ceiling of any one-round-trip design. `limits_*` run on "
        "`limits`' async Redis storage through redis-py (the same client as ours). "
        "`pyrate_limiter` is its public `Limiter.try_acquire_async(blocking=False)` over "
        "`RedisBucket`, which holds a per-limiter asyncio lock around each call (one call in "
        "flight per process); `pyrate_bucket` calls `RedisBucket.put` directly (its one "
        "EVALSHA, no lock). `x bare` is the median over rounds of the ratio to the bare call "
        "measured in the same round. On a shared 2-core machine (Redis, this process and "
        "whatever else runs) throughput moves with everyone's load, so two steadier costs are "
        "shown too, medians over rounds: this process's CPU time per call (`process_time`, "
        "the client side: encoding, parsing, the library's own code) and Redis's time per "
        "script call (`INFO commandstats` usec of EVALSHA/EVAL over the window).",
    ]
    for name, s in r["scenarios"].items():
        rows = [
            [
                impl,
                m["ops_per_s"],
                m["p50_ms"],
                m["p99_ms"],
                s["ratio_to_bare"].get(impl),
                m.get("client_cpu_us_per_call"),
                m.get("redis_us_per_call"),
                m.get("admitted_share"),
            ]
            for impl, m in s["implementations"].items()
        ]
        out += [
            "",
            f"**{name}**",
            "",
            _table(
                [
                    "implementation",
                    "ops/s",
                    "p50 ms",
                    "p99 ms",
                    "x bare",
                    "client CPU µs/call",
                    "Redis µs/call",
                    "admitted",
                ],
                rows,
            ),
        ]
    out += ["", _limiter_verdict(r), "", "![limiter](bench-limiter.png)"]
    return "\n".join(out)


def _limiter_verdict(r: dict[str, Any]) -> str:
    parts = []
    for name, s in r["scenarios"].items():
        ours = s["implementations"]["wbsync"]["ops_per_s"]
        peers = {
            k: v["ops_per_s"]
            for k, v in s["implementations"].items()
            if k not in ("wbsync", "bare_evalsha")
        }
        beaten = [k for k, v in peers.items() if v >= ours]
        parts.append(
            f"{name}: {_fmt(s['ratio_to_bare']['wbsync'])} of bare "
            f"({_check(s['ratio_to_bare']['wbsync'] >= 0.8)}), "
            + ("faster than every peer" if not beaten else f"not faster than {', '.join(beaten)}")
        )
    return "Targets (>= 0.8 of bare, faster than every peer): " + "; ".join(parts) + "."


def _reschedule(r: dict[str, Any]) -> str:
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
            _table(
                ["operation", "commands (round trips)", "executions (incl. Lua)", "commands"], rows
            ),
            "",
            f"Targets: <= 2 commands per deferral: {_check(r['redis_commands_per_deferral'] <= 2)} "
            f"({_fmt(r['redis_commands_per_deferral'])}); exactly 1 per try_acquire: "
            f"{_check(r['redis_commands_per_try_acquire'] == 1)} "
            f"({_fmt(r['redis_commands_per_try_acquire'])}).",
        ]
    )


def _lateness(r: dict[str, Any]) -> str:
    p = r["params"]
    return "\n".join(
        [
            f"{r['samples']} jobs, each deferred once by the real path (limiter -> "
            f"RateLimitDeferred -> RescheduleService -> moveToDelayed) for a "
            f"{_fmt(p['window_ms'])} ms window. Lateness = the resumed processor's start minus "
            '`job.data["resume_at_ms"]` (both on this host\'s clock). Jobs are added '
            f"{_fmt(p['stagger_ms'])} ms apart and the worker has {p['concurrency']} slots, so "
            "resumes rarely coincide and a slot is free when one is due: the figure is the queue's "
            "wake-up delay, not jobs queueing behind one another on one slot.",
            "",
            _table(
                ["samples", "p50 ms", "p95 ms", "max ms", "min ms"],
                [[r["samples"], r["p50_ms"], r["p95_ms"], r["max_ms"], r["min_ms"]]],
            ),
            "",
            f"Target p95 <= 50 ms: {_check(r['p95_ms'] <= 50)}.",
            "",
            "![lateness](bench-lateness.png)",
        ]
    )


def _scale(r: dict[str, Any]) -> str:
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
            _table(["measure", "value"], rows),
            "",
            f"Target <= 2 KB per delayed job: {_check(r['redis_bytes_per_delayed_job'] <= 2048)}.",
        ]
    )


def _status(r: dict[str, Any]) -> str:
    rows = [
        [
            "cabinets, jobs, concurrent readers",
            f"{r['cabinets']:,}, {r['jobs']:,}, {r['readers']}",
        ],
        ["cabinets inserted (`add_many`, one transaction)", f"{r['insert_cabinets_s']:.2f} s"],
        [
            "status page, first page: p50 / p95",
            f"{r['page_p50_ms']:.0f} ms / {r['page_p95_ms']:.0f} ms",
        ],
        [
            "`/api/v1/status`, first page: p50 / p95",
            f"{r['api_p50_ms']:.0f} ms / {r['api_p95_ms']:.0f} ms",
        ],
        ["5xx replies", f"{r['errors_5xx']} (non-200: {r['non_200']})"],
        ["machine load average while measured", f"{r['load_average']:.1f}"],
    ]
    worst = max(r["page_p95_ms"], r["api_p95_ms"])
    return "\n".join(
        [
            "A fresh SQLite database gets the cabinets in one transaction; the seven long queues "
            "get one job per cabinet (four queues' jobs waiting, three queues' delayed). "
            "`wbsync api` runs in a child process on loopback; after one warm-up read of each "
            "(the process's first read builds its status index), the readers, each in a loop, "
            "alternately load the page's first page and `/api/v1/status` with the bearer key. "
            "Every reply's latency is recorded; the load average is the machine's while the "
            "readers ran (other work on the two cores slows every figure).",
            "",
            _table(["measure", "value"], rows),
            "",
            f"Target p95 <= 300 ms with no 5xx: {_check(worst <= 300 and r['errors_5xx'] == 0)}.",
        ]
    )


def _data(r: dict[str, Any]) -> str:
    p = r["params"]
    columns = ("first_fetched", "first_written", "later_fetched", "later_written", "tombstoned")
    rows = [[f"`{name}`", *(s[c] for c in columns)] for name, s in r["syncs"].items()]
    lines = [
        f"Every sync runs {p['runs']} times for {p['cabinets']} cabinets against the emulator "
        f"({r['database']}), one run after the other; rows WB returned and rows written "
        "(inserted or changed). The emulator's data does not change between runs, except the "
        "bids the autobidder itself moves each run.",
        "",
        _table(
            ["sync", "run 1 fetched", "run 1 written", "later fetched", "later written", "gone"],
            rows,
        ),
    ]
    if r["postgres"]:
        counters = [[f"`{n}`", c["ins"], c["upd"], c["dead"]] for n, c in r["postgres"].items()]
        lines += [
            "",
            "PostgreSQL's own counters (`pg_stat_user_tables`) after the runs, autovacuum off: "
            "dead tuples in the dataset tables are the rows that really changed; the "
            "bookkeeping tables add one row version per changed page (`wb_change_sequences`) "
            "and per snapshot page (`wb_snapshot_keys`, `wb_snapshot_runs`).",
            "",
            _table(["table", "inserted", "updated", "dead tuples"], counters),
        ]
    return "\n".join(lines)


def _scaleout(r: dict[str, Any]) -> str:
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
        _table(columns, rows),
        "",
        f"Zero 429s and zero failed jobs in every run: {_check(clean)}.",
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
            f"<= 15 %: {_check(worst <= 0.15)}."
        )
    if "redis_server" in r:
        lines.append(f"\nredis-server: {r['redis_server']}")
    for kind, reason in r.get("skipped", {}).items():
        lines.append(f"\n{kind} skipped: {reason}")
    lines += ["", f"![scaleout]({scaleout_plot_name(r)})"]
    return "\n".join(lines)


def scaleout_plot_name(r: dict[str, Any]) -> str:
    """The plot file of a scaleout run (one per cabinets x concurrency)."""
    return f"bench-scaleout-{r['params']['cabinets']}-c{r['params']['concurrency']}.png"


def _page(r: dict[str, Any]) -> str:
    p = r["params"]
    variants = p["variants"]
    bare = [v for v in variants if v != "wbsync"]
    out = [
        f"Each sync's job enqueued for {p['cabinets']} new cabinets at a time (a first run of "
        "each) and worked by one `wbsync run` process (every queue's worker, "
        f"{p['concurrency']} jobs per queue) on a private Redis, a fresh database and the WB "
        "emulator answering at once on loopback, at a time scale where WB's minute lasts "
        f"{p['wb_minute_ms']:g} ms (no run waits for WB's limits). wbsync's CPU is the worker "
        "process's (its threads' `schedstat`) from the enqueue to the last run recorded, over "
        "the pages recorded; commands are `INFO commandstats` deltas of the private Redis "
        "(Lua's inner commands included; the producer's enqueue and the idle workers' blocking "
        "waits are in it, as in production). The bare pipelines replay, in the benchmark's "
        "process, the requests one recorded run of the sync sent (same URLs, bodies, token) "
        "with nothing around them: the request, the JSON parse of the reply, one `EVALSHA` "
        "of the bucket script per request, and per page one batched upsert of the page's rows "
        "(asyncpg `executemany` into a `jsonb` table on PostgreSQL, aiosqlite `executemany` "
        "and a commit into a JSON-text table on SQLite); their CPU is that process's "
        "`process_time` over the same pages. `x fastest` is wbsync over the fastest bare "
        f"variant of the sync. Medians of {p['rounds']} rounds; in each round every sync is "
        "measured by every variant, in ABBA order.",
    ]
    for run in r["runs"]:
        rows = [
            [
                name,
                s["rows_per_page"],
                s["requests_per_run"] / s["pages_per_run"] if s["pages_per_run"] else None,
                *(s["cpu_ms_per_page"].get(v) for v in variants),
                f"{s['ratio_to_fastest_bare']:.2f} ({s['fastest_bare']})",
                s["redis_commands_per_page"],
            ]
            for name, s in run["syncs"].items()
        ]
        out += [
            "",
            f"**{run['database']}**: CPU ms per page",
            "",
            _table(
                ["sync", "rows/page", "requests/page", *variants, "x fastest", "Redis cmd/page"],
                rows,
            ),
            "",
            f"Redis commands per page by name ({run['database']}; those at 0.5 a page or more):",
            "",
            _table(
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
            f"{_check(t['finance_cpu_met'])} ({_fmt(t['finance_cpu_ms_per_page'])} ms); <= 1.5x "
            f"the fastest bare pipeline: {_check(t['finance_ratio_met'])} "
            f"({_fmt(t['finance_ratio'])}x); <= 15 Redis commands: "
            f"{_check(t['finance_commands_met'])} ({_fmt(t['finance_commands_per_page'])}).",
        ]
    out += ["", f"Bare variants: {', '.join(bare)}.", "", "![page](bench-page.png)"]
    return "\n".join(out)


def _share(value: float | None) -> str:
    return f"{value:.1%}" if value is not None and value == value else "-"


def _capacity(r: dict[str, Any]) -> str:
    p = r["params"]
    columns = ["N", "load", "pages/s", "runs", "missed", "lag p50", "lag p95", "lag max"]
    columns += ["start lag p95", "workers", "Redis", "database", "emulator", "run-queue wait"]
    columns += ["db connects", "worst queue (p95 s / start p95 s / interval s)"]
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
                f"{worst[0]} ({_fmt(worst[1]['lag_p95_s'])} / "
                f"{_fmt(worst[1].get('start_lag_p95_s'))} / {_fmt(worst[1]['interval_s'])})"
                if worst
                else "-",
            ]
        )
    largest = r.get("capacity_cabinets")
    verdict = (
        f"the largest N within the target: **{largest}** cabinets at time scale "
        f"{p['time_scale']:g}, the page rate of **{_fmt(r['capacity_cabinets_at_real_time'])}** "
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
            f"{_fmt(last.get('workers_wait_per_cpu_s'))} s on the run queue for every second "
            f"they ran (load average {_fmt(last.get('load_average_1min'))})"
        )
    return "\n".join(
        [
            f"N cabinets, every sync fanned out on its default interval by the `wbsync run` "
            f"processes' own leader ({p['processes']} processes, {p['concurrency']} jobs per "
            f"queue each), time scale {p['time_scale']:g} (N cabinets ask for the pages of "
            f"N / {p['time_scale']:g} at WB's real intervals), {r['database']}, the emulator "
            f"answering after {p['latency_ms']:g} ms. Each N gets its own Redis and database; "
            "the first fan-out (every cabinet of every queue at once) is let drain, then a "
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
            _table(columns, rows),
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


_RENDER: dict[str, Callable[[dict[str, Any]], str]] = {
    "slots": _slots,
    "limiter": _limiter,
    "reschedule": _reschedule,
    "lateness": _lateness,
    "scale": _scale,
    "status": _status,
    "scaleout": _scaleout,
    "page": _page,
    "capacity": _capacity,
    "data": _data,
}
_TITLES = {
    "slots": "slots: worker slots while windows are closed",
    "limiter": "limiter: try_acquire throughput and latency",
    "reschedule": "reschedule: Redis commands per deferral",
    "lateness": "lateness: how late deferred jobs resume",
    "scale": "scale: fan-out of many cabinets",
    "status": "status: the status page under concurrent readers",
    "scaleout": "scaleout: every sync end to end on many processes and a Redis Cluster",
    "page": "page: worker CPU and Redis commands per page, against bare pipelines",
    "capacity": "capacity: steady state of N cabinets on every sync's interval",
    "data": "data: rows written when every sync runs again on unchanged data",
}
_PLOTS = {
    "slots": (plots.slots_plot, "bench-slots.png"),
    "limiter": (plots.limiter_plot, "bench-limiter.png"),
    "lateness": (plots.lateness_plot, "bench-lateness.png"),
    "page": (plots.page_plot, "bench-page.png"),
    "capacity": (plots.capacity_plot, "bench-capacity.png"),
}


def write_docs(results: dict[str, dict[str, Any]], *, docs_dir: Path, command: str) -> None:
    """Merge ``results`` into ``docs_dir``'s benchmarks.json; render the page and plots."""
    from datetime import UTC, datetime

    docs_dir.mkdir(parents=True, exist_ok=True)
    store = docs_dir / "benchmarks.json"
    merged: dict[str, Any] = json.loads(store.read_text("utf-8")) if store.exists() else {}
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    for name, result in results.items():
        entry = rounded({**result, "command": command, "measured_at": stamp})
        merged[_store_key(name, result)] = entry
        if name == "slots" and "sweep" in result:
            merged["slots_sweep"] = entry  # kept until the next sweep: plain runs have none
        if name == "scaleout":
            plots.scaleout_plot(result, docs_dir / scaleout_plot_name(result))
        if name in _PLOTS:
            plot, file = _PLOTS[name]
            plot(merged.get("slots_sweep", result) if name == "slots" else result, docs_dir / file)
    store.write_text(json.dumps(merged, indent=1, ensure_ascii=False) + "\n", "utf-8")
    sections = [_HEADER]
    for name in ORDER:
        for key in sorted(
            (k for k in merged if k == name or k.startswith(f"{name}@")), key=_size_order
        ):
            entry = merged[key]
            sections.append(
                f"## {_TITLES[name]}{_size_title(key)}\n\n{_meta(entry)}\n\n"
                f"{_RENDER[name](entry)}\n"
            )
        if name == "slots" and "slots_sweep" in merged:
            sweep = merged["slots_sweep"]
            sections.append(f"### slots: makespan against K\n\n{_meta(sweep)}\n\n{_sweep(sweep)}\n")
    (docs_dir / "benchmarks.md").write_text("\n".join(sections), "utf-8")


def _store_key(name: str, result: dict[str, Any]) -> str:
    # Runs of different sizes are kept side by side: make bench runs a small scale.
    if name == "scale":
        return f"{name}@{result['cabinets']}"
    if name == "scaleout":
        p = result["params"]
        return f"{name}@{p['cabinets']}:{p['concurrency']}"
    return name


def _size_order(key: str) -> tuple[int, ...]:
    return tuple(int(n) for n in key.split("@", 1)[1].split(":")) if "@" in key else ()


def _size_title(key: str) -> str:
    if "@" not in key:
        return ""
    sizes = [int(n) for n in key.split("@", 1)[1].split(":")]
    per_queue = f", {sizes[1]} per queue per process" if len(sizes) > 1 else ""
    return f" ({sizes[0]:,} cabinets{per_queue})"
