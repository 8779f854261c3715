"""``wbsync bench``: the benchmarks as a typer sub-app (mounted by ``wbsync.cli``).

Each command runs one benchmark on the real stack and prints a table; ``--json`` prints exactly
one JSON object on stdout instead (tables and logs go to stderr); ``--write-docs`` writes the
result and its plots into ``docs/benchmarks.md`` and ``docs/*.png``.

Only typer and the standard library at the top: the main CLI imports this module to build its
command tree, so a benchmark's modules (Redis, the job layer, the emulator) load when it runs.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import time
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Annotated, Any, TypeVar

import typer

from wbsync.system import eventloop
from wbsync_bench.options import (
    ConcurrencyOpt,
    PostgresOpt,
    RedisOpt,
    TimeScaleOpt,
    bench_params,
    command,
    command_line,
    ints,
)

__all__ = ["app"]

app = typer.Typer(
    help="Benchmarks that prove the design (see docs/benchmarks.md).", no_args_is_help=True
)

SWEEP = (1, 5, 20, 50)
ALL_SCALE_CABINETS = 1_000
#: What ``all`` runs of the change-feed benchmarks: each a few minutes at most.
ALL_FEED_SIZES = (10_000, 30_000, 100_000)
ALL_SOAK_DAYS = 1.0
ALL_DATA_CABINETS = 10

Runner = Callable[[str], Awaitable[dict[str, Any]]]
T = TypeVar("T")


async def _measure(
    name: str, runner: Runner, *, private: bool, redis: str | None = None
) -> dict[str, Any]:
    from wbsync_bench.common import bench_redis, machine

    with contextlib.nullcontext(redis) if redis else bench_redis(private=private) as url:
        began = time.perf_counter()
        result = await runner(url)
        result["wall_s"] = time.perf_counter() - began
        result["machine"] = await machine(url)
    result["benchmark"] = name
    return result


def _run_one(
    ctx: typer.Context, name: str, runner: Runner, *, private: bool, redis: str | None = None
) -> None:
    """Run one benchmark (on ``redis`` when given); the shared options (``--json``,
    ``--write-docs``, ...) from ``ctx``."""
    from wbsync_bench.common import setup_logging

    setup_logging(ctx.params["verbose"])
    command = command_line(ctx)
    result = eventloop.run(_measure(name, runner, private=private, redis=redis))
    _finish({name: result}, ctx, command=command)


def _finish(results: dict[str, dict[str, Any]], ctx: typer.Context, *, command: str) -> None:
    from wbsync_bench.common import emit

    # Each benchmark's module (wbsync_bench.<name>) shows its own tables.
    modules = {name: importlib.import_module(f"wbsync_bench.{name}") for name in results}
    tables = [t for name, r in results.items() for t in modules[name].tables(r)]
    payload: dict[str, Any] = results if len(results) > 1 else next(iter(results.values()))
    emit(payload, tables, as_json=ctx.params["as_json"])
    if ctx.params["write_docs"]:
        from wbsync_bench import docs  # matplotlib only when asked for

        docs.write_docs(results, docs_dir=ctx.params["docs_dir"], command=command)


class SlotsScenario(StrEnum):
    """What ``slots`` runs."""

    pages = "pages"
    reports = "reports"


@command(app, "slots")
def slots_cmd(
    ctx: typer.Context,
    scenario: Annotated[
        SlotsScenario,
        typer.Option(
            help="pages: K cabinets x P pages of the finance report, waiting three ways "
            "(defer, block, retry); reports: K cabinets backfilling paid storage through "
            "report tasks (slot efficiency against WB's bound)."
        ),
    ] = SlotsScenario.pages,
    cabinets: Annotated[
        int | None, typer.Option("--cabinets", "-k", help="K cabinets (pages 20, reports 50).")
    ] = None,
    pages: Annotated[int, typer.Option("--pages", "-p", help="P pages per cabinet.")] = 6,
    days: Annotated[
        int, typer.Option(help="reports: days each cabinet backfills (8 a task: 90 are 12).")
    ] = 90,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", "-c", help="Worker slots (pages 1, reports 16).")
    ] = None,
    time_scale: Annotated[
        float | None, typer.Option(help="Multiplies WB's periods (pages 0.01, reports 0.1).")
    ] = None,
    rounds: Annotated[
        int | None,
        typer.Option(
            help="pages: rounds of defer and retry (ABBA; block runs once, mid-way), 2; "
            "reports: rounds of the backfill, 3."
        ),
    ] = None,
    sweep: Annotated[
        bool, typer.Option("--sweep", help=f"pages: also run K in {SWEEP}; plot.")
    ] = False,
    postgres: PostgresOpt = None,
) -> None:
    """Worker slots while WB makes jobs wait: finance pages (defer vs block vs retry), or
    report tasks (a fleet's backfill against WB's bound)."""
    chosen = {
        k: v
        for k, v in ctx.params.items()
        if k in ("cabinets", "concurrency", "time_scale", "rounds") and v is not None
    }
    if scenario is SlotsScenario.reports:
        from wbsync.errors import ConfigError
        from wbsync_bench import slots_reports

        try:
            report_params = slots_reports.Params(days=days, postgres=postgres, **chosen)
        except ConfigError as exc:
            raise typer.BadParameter(str(exc)) from None
        _run_one(
            ctx, "slots_reports", lambda url: slots_reports.run(url, report_params), private=False
        )
        return
    from wbsync_bench import slots

    params = slots.Params(pages=pages, **chosen)
    sizes = SWEEP if sweep else ()
    _run_one(ctx, "slots", lambda url: slots.run(url, params, sweep=sizes), private=False)


@command(app, "limiter")
def limiter_cmd(
    ctx: typer.Context,
    tasks: Annotated[int, typer.Option(help="Concurrent tasks.")] = 64,
    window_s: Annotated[float, typer.Option(help="Seconds per implementation per round.")] = 0.5,
    rounds: Annotated[int, typer.Option(help="Rounds (ABBA order).")] = 10,
) -> None:
    """try_acquire throughput and latency vs a bare EVALSHA, limits and pyrate-limiter."""
    from wbsync_bench import limiter

    params = bench_params(limiter.Params, ctx)
    _run_one(ctx, "limiter", lambda url: limiter.run(url, params), private=False)


@command(app, "reschedule")
def reschedule_cmd(
    ctx: typer.Context,
    n: Annotated[int, typer.Option("-n", help="Deferrals (and try_acquires) to count.")] = 100,
) -> None:
    """Redis commands per deferral and per try_acquire (private Redis, exact counts)."""
    from wbsync_bench import reschedule

    params = bench_params(reschedule.Params, ctx)
    _run_one(ctx, "reschedule", lambda url: reschedule.run(url, params), private=True)


@command(app, "lateness")
def lateness_cmd(
    ctx: typer.Context,
    samples: Annotated[int, typer.Option(help="Deferrals to time.")] = 200,
    stagger_ms: Annotated[float, typer.Option(help="Gap between jobs added.")] = 25.0,
) -> None:
    """How late deferred jobs start after their resume_at_ms."""
    from wbsync_bench import lateness

    params = bench_params(lateness.Params, ctx)
    _run_one(ctx, "lateness", lambda url: lateness.run(url, params), private=False)


@command(app, "scale")
def scale_cmd(
    ctx: typer.Context,
    cabinets: Annotated[int, typer.Option(help="Cabinets (one job per long queue each).")] = 10_000,
    concurrency: Annotated[int, typer.Option(help="Slots per queue's worker.")] = 20,
) -> None:
    """Fan-out of many cabinets over the long queues: enqueue time, memory, throughput."""
    from wbsync_bench import scale

    params = bench_params(scale.Params, ctx)
    _run_one(ctx, "scale", lambda url: scale.run(url, params), private=True)


@command(app, "fanout")
def fanout_cmd(
    ctx: typer.Context,
    cabinets: Annotated[int, typer.Option(help="Cabinets N, every one due in the pass.")] = 10_000,
    runs: Annotated[int, typer.Option(help="Runs, each on a queue of its own; medians.")] = 3,
    redis: RedisOpt = None,
) -> None:
    """One fan-out pass over N cabinets each due at its own time, then one where every job is
    still live: round trips and wall time."""
    from wbsync_bench import fanout

    params = bench_params(fanout.Params, ctx)
    _run_one(ctx, "fanout", lambda url: fanout.run(url, params), private=True, redis=redis)


@command(app, "status")
def status_cmd(
    ctx: typer.Context,
    cabinets: Annotated[int, typer.Option(help="Cabinets (one job per long queue each).")] = 10_000,
    readers: Annotated[int, typer.Option(help="Concurrent readers.")] = 20,
    requests: Annotated[int, typer.Option(help="Requests per reader.")] = 20,
) -> None:
    """The status page and /api/v1/status under concurrent readers: p50/p95, 5xx."""
    from wbsync_bench import status

    params = bench_params(status.Params, ctx)
    _run_one(ctx, "status", lambda url: status.run(url, params), private=False)


@command(app, "data")
def data_cmd(
    ctx: typer.Context,
    cabinets: Annotated[int, typer.Option(help="Cabinets (each runs every sync).")] = 10,
    runs: Annotated[int, typer.Option(help="Runs of every sync, one after the other.")] = 3,
    time_scale: TimeScaleOpt = 0.001,
    postgres: PostgresOpt = None,
) -> None:
    """Rows written when every sync runs again on unchanged data (0 is the goal); with
    --postgres, dead tuples against the rows that really changed."""
    from wbsync_bench import data

    params = bench_params(data.Params, ctx)
    _run_one(ctx, "data", lambda url: data.run(url, params), private=False)


@command(app, "feed")
def feed_cmd(
    ctx: typer.Context,
    rows: Annotated[
        str, typer.Option(help="Feed sizes to read whole, comma-separated.")
    ] = "100000,300000,1000000",
    postgres: PostgresOpt = None,
) -> None:
    """A long change feed read whole through the API and wbsync export: rows/s, peak RSS."""
    from wbsync_bench import feed

    params = bench_params(feed.Params, ctx, sizes=ints(rows, "--rows"))
    _run_one(ctx, "feed", lambda url: feed.run(url, params), private=False)


@command(app, "soak")
def soak_cmd(
    ctx: typer.Context,
    cabinets: Annotated[int, typer.Option(help="Cabinets (each runs every sync).")] = 3,
    days: Annotated[float, typer.Option(help="Simulated days.")] = 7.0,
    time_scale: Annotated[
        float, typer.Option(help="Multiplies every period: 0.0005 makes a week ~5 minutes.")
    ] = 0.0005,
    sample_hours: Annotated[float, typer.Option(help="Simulated hours between samples.")] = 3.0,
    postgres: PostgresOpt = None,
) -> None:
    """A simulated week of every sync on its interval and the retention pass: table sizes."""
    from wbsync_bench import soak

    params = bench_params(soak.Params, ctx)
    _run_one(ctx, "soak", lambda _url: soak.run(params), private=True)


@command(app, "scaleout")
def scaleout_cmd(
    ctx: typer.Context,
    cabinets: Annotated[int, typer.Option(help="Cabinets (one job per sync each).")] = 1_000,
    processes: Annotated[
        str, typer.Option(help="`wbsync run` process counts to compare, comma-separated.")
    ] = "1,2,4",
    redis: Annotated[
        str, typer.Option(help="single, cluster (3 masters; needs Redis >= 7) or both.")
    ] = "single,cluster",
    concurrency: ConcurrencyOpt = 5,
    latency_ms: Annotated[float, typer.Option(help="The emulator's median reply time.")] = 150.0,
    latency_sigma: Annotated[
        float, typer.Option(help="Log-normal shape of the reply time (the tail).")
    ] = 0.6,
    time_scale: TimeScaleOpt = 0.001,
    postgres: PostgresOpt = None,
    rounds: Annotated[int, typer.Option(help="Runs per configuration (ABBA); median.")] = 1,
) -> None:
    """N cabinets, every sync, end to end on 1/2/4 processes, single Redis and a cluster."""
    from wbsync_bench import scaleout

    kinds = tuple(k.strip() for k in redis.split(",") if k.strip())
    params = bench_params(
        scaleout.Params, ctx, processes=ints(processes, "--processes"), redis=kinds
    )
    _run_one(ctx, "scaleout", lambda _url: scaleout.run(params), private=True)


@command(app, "page")
def page_cmd(
    ctx: typer.Context,
    db: Annotated[
        list[str] | None,
        typer.Option(
            "--db",
            help="sqlite, or a PostgreSQL server URL (postgresql+asyncpg://...: a new database "
            "on it per run, dropped after); repeat for both. Default: sqlite.",
        ),
    ] = None,
    cabinets: Annotated[int, typer.Option(help="Cabinets (first runs) per measurement.")] = 10,
    rounds: Annotated[int, typer.Option(help="Rounds (ABBA); medians.")] = 3,
    concurrency: ConcurrencyOpt = 5,
    sync: Annotated[
        list[str] | None, typer.Option("--sync", help="Measure only this sync; repeatable.")
    ] = None,
) -> None:
    """Worker CPU and Redis commands per page of each sync, next to bare pipelines."""
    from wbsync_bench import page

    params = bench_params(
        page.Params, ctx, databases=tuple(db or ("sqlite",)), only=tuple(sync or ())
    )
    _run_one(ctx, "page", lambda _url: page.run(params), private=True)


@command(app, "capacity")
def capacity_cmd(
    ctx: typer.Context,
    cabinets: Annotated[
        str, typer.Option(help="Cabinet counts N to hold, comma-separated.")
    ] = "10,30,60,120,250,500,1000",
    time_scale: Annotated[
        float, typer.Option(help="Multiplies WB's periods and the fan-out intervals.")
    ] = 0.1,
    processes: Annotated[int, typer.Option(help="`wbsync run` processes.")] = 2,
    concurrency: ConcurrencyOpt = 5,
    queue_concurrency: Annotated[
        str,
        typer.Option(
            help='Per queue, replacing --concurrency, JSON: {"booking-slot-monitor": 20} '
            "(WBSYNC_QUEUE_CONCURRENCY)."
        ),
    ] = "{}",
    latency_ms: Annotated[float, typer.Option(help="The emulator's median reply time.")] = 0.0,
    window_s: Annotated[
        float, typer.Option(help="Measured seconds per N (after the first pass).")
    ] = 30.0,
    drain_s: Annotated[
        float, typer.Option(help="Seconds after the window for its last runs to complete.")
    ] = 10.0,
    settle_limit_s: Annotated[
        float,
        typer.Option(
            help="Seconds after the first pass its backlog may take to drain before the window "
            "starts anyway."
        ),
    ] = 60.0,
    postgres: PostgresOpt = None,
) -> None:
    """Steady state of N cabinets on every sync's interval: freshness lag and CPU against N."""
    from wbsync_bench import capacity

    params = bench_params(
        capacity.Params,
        ctx,
        cabinets=ints(cabinets, "--cabinets"),
        queue_concurrency=_queue_concurrency(queue_concurrency),
    )
    _run_one(ctx, "capacity", lambda _url: capacity.run(params), private=True)


def _queue_concurrency(text: str) -> dict[str, int]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and type(v) is int and v >= 1 for k, v in value.items()
    ):
        raise typer.BadParameter(
            f"{text!r} is not a JSON object of queue names to whole numbers >= 1, e.g. "
            '{"booking-slot-monitor": 20}',
            param_hint="--queue-concurrency",
        )
    return value


@command(app, "all")
def all_cmd(
    ctx: typer.Context,
    scale_cabinets: Annotated[
        int, typer.Option(help="Cabinets for scale (its own default, 10,000, takes ~8 min).")
    ] = ALL_SCALE_CABINETS,
    sweep: Annotated[bool, typer.Option("--sweep/--no-sweep", help="slots sweep.")] = True,
    postgres: PostgresOpt = None,
) -> None:
    """Every benchmark; with --postgres, page measures it next to SQLite and capacity, data,
    feed and soak run on it. scale runs with 1,000 cabinets (its 70,000 jobs take ~8 minutes
    on 2 cores), fanout at its defaults (~10 s), feed reads up to 100,000 rows, soak simulates
    one day."""
    from wbsync_bench.common import setup_logging

    setup_logging(ctx.params["verbose"])
    command = command_line(ctx)
    names = ("reschedule", "lateness", "limiter", "slots", "scale", "fanout", "page", "capacity")
    b = {n: importlib.import_module(f"wbsync_bench.{n}") for n in (*names, "data", "feed", "soak")}
    databases = ("sqlite", postgres) if postgres else ("sqlite",)
    data = b["data"].Params(cabinets=ALL_DATA_CABINETS, postgres=postgres)
    soak = b["soak"].Params(days=ALL_SOAK_DAYS, postgres=postgres)
    plan: list[tuple[str, Runner, bool]] = [
        ("reschedule", lambda url: b["reschedule"].run(url), True),
        ("lateness", lambda url: b["lateness"].run(url), False),
        ("limiter", lambda url: b["limiter"].run(url), False),
        ("slots", lambda url: b["slots"].run(url, sweep=SWEEP if sweep else ()), False),
        ("scale", lambda url: b["scale"].run(url, b["scale"].Params(scale_cabinets)), True),
        ("fanout", lambda url: b["fanout"].run(url), True),
        ("page", lambda _url: b["page"].run(b["page"].Params(databases=databases)), True),
        ("capacity", lambda _url: b["capacity"].run(b["capacity"].Params(postgres=postgres)), True),
        ("data", lambda url: b["data"].run(url, data), False),
        ("feed", lambda url: b["feed"].run(url, b["feed"].Params(ALL_FEED_SIZES, postgres)), False),
        ("soak", lambda _url: b["soak"].run(soak), True),
    ]
    results = {}
    for name, runner, private in plan:
        typer.echo(f"running {name} ...", err=True)
        results[name] = eventloop.run(_measure(name, runner, private=private))
    _finish(results, ctx, command=command)
