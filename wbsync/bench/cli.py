"""``wbsync bench``: the benchmarks as a typer sub-app (mounted by ``wbsync.cli``).

Each command runs one benchmark on the real stack and prints a table; ``--json`` prints exactly
one JSON object on stdout instead (tables and logs go to stderr); ``--write-docs`` writes the
result and its plots into ``docs/benchmarks.md`` and ``docs/*.png``.

Only typer and the standard library at the top: the main CLI imports this module to build its
command tree, so a benchmark's modules (Redis, the job layer, the emulator) load when it runs.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

__all__ = ["app"]

app = typer.Typer(
    help="Benchmarks that prove the design (see docs/benchmarks.md).", no_args_is_help=True
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
DocsOpt = Annotated[
    bool, typer.Option("--write-docs", help="Write docs/benchmarks.md and docs/*.png.")
]
DocsDirOpt = Annotated[Path, typer.Option("--docs-dir", help="Where --write-docs writes.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Log at INFO to stderr.")]
SWEEP = (1, 5, 20, 50)
ALL_SCALE_CABINETS = 1_000

Runner = Callable[[str], Awaitable[dict[str, Any]]]
T = TypeVar("T")


def _command_line(ctx: typer.Context) -> str:
    """The command as typed, minus options left at their defaults (reproducible, short)."""
    words = ["wbsync bench", ctx.info_name or ""]
    for param in ctx.command.params:  # typer's options are click-like, not click subclasses
        value = ctx.params.get(param.name or "")
        if param.param_type_name != "option" or value == param.default:
            continue
        if getattr(param, "is_flag", False):
            flags = param.opts if value else param.secondary_opts
            words.append(flags[0] if flags else "")
        elif isinstance(value, list | tuple):  # a repeatable option: once per value
            words += [f"{param.opts[0]} {item}" for item in value]
        else:
            words.append(f"{param.opts[0]} {value}")
    return " ".join(w for w in words if w)


async def _measure(name: str, runner: Runner, *, private: bool) -> dict[str, Any]:
    from wbsync.bench.common import bench_redis, machine

    with bench_redis(private=private) as url:
        began = time.perf_counter()
        result = await runner(url)
        result["wall_s"] = time.perf_counter() - began
        result["machine"] = await machine(url)
    result["benchmark"] = name
    return result


def _finish(
    results: dict[str, dict[str, Any]],
    *,
    as_json: bool,
    write_docs: bool,
    docs_dir: Path,
    command: str,
) -> None:
    from wbsync.bench.common import emit

    tables = [t for name, r in results.items() for t in _module(name).tables(r)]
    payload: dict[str, Any] = results if len(results) > 1 else next(iter(results.values()))
    emit(payload, tables, as_json=as_json)
    if write_docs:
        from wbsync.bench import docs  # matplotlib only when asked for

        docs.write_docs(results, docs_dir=docs_dir, command=command)


def _module(name: str) -> Any:
    """The benchmark's module (``wbsync.bench.<name>``), imported when a benchmark runs."""
    return importlib.import_module(f"wbsync.bench.{name}")


def _run_one(
    ctx: typer.Context,
    name: str,
    runner: Runner,
    *,
    private: bool,
    as_json: bool,
    write_docs: bool,
    docs_dir: Path,
    verbose: bool,
) -> None:
    from wbsync.bench.common import setup_logging

    setup_logging(verbose)
    command = _command_line(ctx)
    result = asyncio.run(_measure(name, runner, private=private))
    _finish(
        {name: result}, as_json=as_json, write_docs=write_docs, docs_dir=docs_dir, command=command
    )


@app.command("slots")
def slots_cmd(
    ctx: typer.Context,
    cabinets: Annotated[int, typer.Option("--cabinets", "-k", help="K cabinets.")] = 20,
    pages: Annotated[int, typer.Option("--pages", "-p", help="P pages per cabinet.")] = 6,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", help="Worker slots.")] = 1,
    time_scale: Annotated[float, typer.Option(help="Multiplies WB's 60 s window.")] = 0.01,
    rounds: Annotated[
        int, typer.Option(help="Rounds of defer and retry (ABBA); block runs once, mid-way.")
    ] = 2,
    sweep: Annotated[bool, typer.Option("--sweep", help=f"Also run K in {SWEEP}; plot.")] = False,
    as_json: JsonOpt = False,
    write_docs: DocsOpt = False,
    docs_dir: DocsDirOpt = Path("docs"),
    verbose: VerboseOpt = False,
) -> None:
    """Makespan of K cabinets x P pages of the finance report: defer vs block vs retry."""
    from wbsync.bench import slots

    params = slots.Params(
        cabinets=cabinets,
        pages=pages,
        concurrency=concurrency,
        time_scale=time_scale,
        rounds=rounds,
    )
    _run_one(
        ctx,
        "slots",
        lambda url: slots.run(url, params, sweep=SWEEP if sweep else ()),
        private=False,
        as_json=as_json,
        write_docs=write_docs,
        docs_dir=docs_dir,
        verbose=verbose,
    )


@app.command("limiter")
def limiter_cmd(
    ctx: typer.Context,
    tasks: Annotated[int, typer.Option(help="Concurrent tasks.")] = 64,
    window_s: Annotated[float, typer.Option(help="Seconds per implementation per round.")] = 0.5,
    rounds: Annotated[int, typer.Option(help="Rounds (ABBA order).")] = 10,
    as_json: JsonOpt = False,
    write_docs: DocsOpt = False,
    docs_dir: DocsDirOpt = Path("docs"),
    verbose: VerboseOpt = False,
) -> None:
    """try_acquire throughput and latency vs a bare EVALSHA, limits and pyrate-limiter."""
    from wbsync.bench import limiter

    params = limiter.Params(tasks=tasks, window_s=window_s, rounds=rounds)
    _run_one(
        ctx,
        "limiter",
        lambda url: limiter.run(url, params),
        private=False,
        as_json=as_json,
        write_docs=write_docs,
        docs_dir=docs_dir,
        verbose=verbose,
    )


@app.command("reschedule")
def reschedule_cmd(
    ctx: typer.Context,
    n: Annotated[int, typer.Option("-n", help="Deferrals (and try_acquires) to count.")] = 100,
    as_json: JsonOpt = False,
    write_docs: DocsOpt = False,
    docs_dir: DocsDirOpt = Path("docs"),
    verbose: VerboseOpt = False,
) -> None:
    """Redis commands per deferral and per try_acquire (private Redis, exact counts)."""
    from wbsync.bench import reschedule

    params = reschedule.Params(n=n)
    _run_one(
        ctx,
        "reschedule",
        lambda url: reschedule.run(url, params),
        private=True,
        as_json=as_json,
        write_docs=write_docs,
        docs_dir=docs_dir,
        verbose=verbose,
    )


@app.command("lateness")
def lateness_cmd(
    ctx: typer.Context,
    samples: Annotated[int, typer.Option(help="Deferrals to time.")] = 200,
    stagger_ms: Annotated[float, typer.Option(help="Gap between jobs added.")] = 25.0,
    as_json: JsonOpt = False,
    write_docs: DocsOpt = False,
    docs_dir: DocsDirOpt = Path("docs"),
    verbose: VerboseOpt = False,
) -> None:
    """How late deferred jobs start after their resume_at_ms."""
    from wbsync.bench import lateness

    params = lateness.Params(samples=samples, stagger_ms=stagger_ms)
    _run_one(
        ctx,
        "lateness",
        lambda url: lateness.run(url, params),
        private=False,
        as_json=as_json,
        write_docs=write_docs,
        docs_dir=docs_dir,
        verbose=verbose,
    )


@app.command("scale")
def scale_cmd(
    ctx: typer.Context,
    cabinets: Annotated[int, typer.Option(help="Cabinets (x 7 long queues = jobs).")] = 10_000,
    concurrency: Annotated[int, typer.Option(help="Slots per queue's worker.")] = 20,
    as_json: JsonOpt = False,
    write_docs: DocsOpt = False,
    docs_dir: DocsDirOpt = Path("docs"),
    verbose: VerboseOpt = False,
) -> None:
    """Fan-out of many cabinets over the long queues: enqueue time, memory, throughput."""
    from wbsync.bench import scale

    params = scale.Params(cabinets=cabinets, concurrency=concurrency)
    _run_one(
        ctx,
        "scale",
        lambda url: scale.run(url, params),
        private=True,
        as_json=as_json,
        write_docs=write_docs,
        docs_dir=docs_dir,
        verbose=verbose,
    )


@app.command("status")
def status_cmd(
    ctx: typer.Context,
    cabinets: Annotated[int, typer.Option(help="Cabinets (x 7 long queues = jobs).")] = 10_000,
    readers: Annotated[int, typer.Option(help="Concurrent readers.")] = 20,
    requests: Annotated[int, typer.Option(help="Requests per reader.")] = 20,
    as_json: JsonOpt = False,
    write_docs: DocsOpt = False,
    docs_dir: DocsDirOpt = Path("docs"),
    verbose: VerboseOpt = False,
) -> None:
    """The status page and /api/v1/status under concurrent readers: p50/p95, 5xx."""
    from wbsync.bench import status

    params = status.Params(cabinets=cabinets, readers=readers, requests=requests)
    _run_one(
        ctx,
        "status",
        lambda url: status.run(url, params),
        private=False,
        as_json=as_json,
        write_docs=write_docs,
        docs_dir=docs_dir,
        verbose=verbose,
    )


@app.command("data")
def data_cmd(
    ctx: typer.Context,
    cabinets: Annotated[int, typer.Option(help="Cabinets (each runs every sync).")] = 10,
    runs: Annotated[int, typer.Option(help="Runs of every sync, one after the other.")] = 3,
    time_scale: Annotated[float, typer.Option(help="Multiplies WB's limits' periods.")] = 0.001,
    postgres: Annotated[
        str | None,
        typer.Option(
            help="A PostgreSQL admin URL (postgresql+asyncpg://...): the run creates and drops "
            "a database there and reports PostgreSQL's own counters. Default: SQLite."
        ),
    ] = None,
    as_json: JsonOpt = False,
    write_docs: DocsOpt = False,
    docs_dir: DocsDirOpt = Path("docs"),
    verbose: VerboseOpt = False,
) -> None:
    """Rows written when every sync runs again on unchanged data (0 is the goal), dead tuples."""
    from wbsync.bench import data

    params = data.Params(cabinets=cabinets, runs=runs, time_scale=time_scale, postgres=postgres)
    _run_one(
        ctx,
        "data",
        lambda url: data.run(url, params),
        private=False,
        as_json=as_json,
        write_docs=write_docs,
        docs_dir=docs_dir,
        verbose=verbose,
    )


@app.command("scaleout")
def scaleout_cmd(
    ctx: typer.Context,
    cabinets: Annotated[int, typer.Option(help="Cabinets (x 9 syncs = jobs).")] = 1_000,
    processes: Annotated[
        str, typer.Option(help="`wbsync run` process counts to compare, comma-separated.")
    ] = "1,2,4",
    redis: Annotated[
        str, typer.Option(help="single, cluster (3 masters; needs Redis >= 7) or both.")
    ] = "single,cluster",
    concurrency: Annotated[
        int, typer.Option(help="Jobs per queue per process (WBSYNC_SYNC_QUEUE_CONCURRENCY).")
    ] = 5,
    latency_ms: Annotated[float, typer.Option(help="The emulator's median reply time.")] = 150.0,
    latency_sigma: Annotated[
        float, typer.Option(help="Log-normal shape of the reply time (the tail).")
    ] = 0.6,
    time_scale: Annotated[float, typer.Option(help="Multiplies WB's limits' periods.")] = 0.001,
    postgres: Annotated[
        str | None,
        typer.Option(
            help="A PostgreSQL server URL (postgresql+asyncpg://...): each run gets a new "
            "database on it, dropped after. Default: a new SQLite file per run."
        ),
    ] = None,
    rounds: Annotated[int, typer.Option(help="Runs per configuration (ABBA); median.")] = 1,
    as_json: JsonOpt = False,
    write_docs: DocsOpt = False,
    docs_dir: DocsDirOpt = Path("docs"),
    verbose: VerboseOpt = False,
) -> None:
    """N cabinets, every sync, end to end on 1/2/4 processes, single Redis and a cluster."""
    from wbsync.bench import scaleout

    params = scaleout.Params(
        cabinets=cabinets,
        processes=_ints(processes, "--processes"),
        redis=tuple(k.strip() for k in redis.split(",") if k.strip()),
        concurrency=concurrency,
        latency_ms=latency_ms,
        latency_sigma=latency_sigma,
        time_scale=time_scale,
        postgres=postgres,
        rounds=rounds,
    )
    _run_one(
        ctx,
        "scaleout",
        lambda _url: scaleout.run(params),
        private=True,
        as_json=as_json,
        write_docs=write_docs,
        docs_dir=docs_dir,
        verbose=verbose,
    )


@app.command("page")
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
    concurrency: Annotated[
        int, typer.Option(help="Jobs per queue of the worker (WBSYNC_SYNC_QUEUE_CONCURRENCY).")
    ] = 5,
    sync: Annotated[
        list[str] | None, typer.Option("--sync", help="Measure only this sync; repeatable.")
    ] = None,
    as_json: JsonOpt = False,
    write_docs: DocsOpt = False,
    docs_dir: DocsDirOpt = Path("docs"),
    verbose: VerboseOpt = False,
) -> None:
    """Worker CPU and Redis commands per page of each sync, next to bare pipelines."""
    from wbsync.bench import page

    params = _checked(
        lambda: page.Params(
            cabinets=cabinets,
            rounds=rounds,
            databases=tuple(db or ("sqlite",)),
            concurrency=concurrency,
            only=tuple(sync or ()),
        )
    )
    _run_one(
        ctx,
        "page",
        lambda _url: page.run(params),
        private=True,
        as_json=as_json,
        write_docs=write_docs,
        docs_dir=docs_dir,
        verbose=verbose,
    )


@app.command("capacity")
def capacity_cmd(
    ctx: typer.Context,
    cabinets: Annotated[
        str, typer.Option(help="Cabinet counts N to hold, comma-separated.")
    ] = "10,30,60,120,250,500,1000",
    time_scale: Annotated[
        float, typer.Option(help="Multiplies WB's periods and the fan-out intervals.")
    ] = 0.1,
    processes: Annotated[int, typer.Option(help="`wbsync run` processes.")] = 2,
    concurrency: Annotated[
        int, typer.Option(help="Jobs per queue per process (WBSYNC_SYNC_QUEUE_CONCURRENCY).")
    ] = 5,
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
    postgres: Annotated[
        str | None,
        typer.Option(
            help="A PostgreSQL server URL (postgresql+asyncpg://...): each N gets a new "
            "database on it, dropped after. Default: a new SQLite file per N."
        ),
    ] = None,
    as_json: JsonOpt = False,
    write_docs: DocsOpt = False,
    docs_dir: DocsDirOpt = Path("docs"),
    verbose: VerboseOpt = False,
) -> None:
    """Steady state of N cabinets on every sync's interval: freshness lag and CPU against N."""
    from wbsync.bench import capacity

    counts = _ints(cabinets, "--cabinets")
    params = _checked(
        lambda: capacity.Params(
            cabinets=counts,
            time_scale=time_scale,
            processes=processes,
            concurrency=concurrency,
            queue_concurrency=_queue_concurrency(queue_concurrency),
            latency_ms=latency_ms,
            window_s=window_s,
            drain_s=drain_s,
            postgres=postgres,
        )
    )
    _run_one(
        ctx,
        "capacity",
        lambda _url: capacity.run(params),
        private=True,
        as_json=as_json,
        write_docs=write_docs,
        docs_dir=docs_dir,
        verbose=verbose,
    )


def _checked(build: Callable[[], T]) -> T:
    """A benchmark's parameters; what they refuse is a usage error (exit 2), said as is."""
    from wbsync.errors import ConfigError

    try:
        return build()
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from None


def _ints(text: str, option: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is not a comma-separated list of whole numbers", param_hint=option
        ) from None


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


@app.command("all")
def all_cmd(
    ctx: typer.Context,
    scale_cabinets: Annotated[
        int, typer.Option(help="Cabinets for scale (its own default, 10,000, takes ~8 min).")
    ] = ALL_SCALE_CABINETS,
    sweep: Annotated[bool, typer.Option("--sweep/--no-sweep", help="slots sweep.")] = True,
    postgres: Annotated[
        str | None,
        typer.Option(
            help="A PostgreSQL server URL: page measures it next to SQLite, capacity runs on it "
            "(a new database per run, dropped after). Default: SQLite only."
        ),
    ] = None,
    as_json: JsonOpt = False,
    write_docs: DocsOpt = False,
    docs_dir: DocsDirOpt = Path("docs"),
    verbose: VerboseOpt = False,
) -> None:
    """Every benchmark with its defaults, slots with its sweep, scale with fewer cabinets.

    scale's 70,000 jobs alone take about 8 minutes on a 2-core machine, so ``all`` runs it with
    1,000 cabinets (7,000 jobs) unless told otherwise.
    """
    from wbsync.bench import capacity, lateness, limiter, page, reschedule, scale, slots
    from wbsync.bench.common import setup_logging

    setup_logging(verbose)
    command = _command_line(ctx)
    databases = ("sqlite", postgres) if postgres else ("sqlite",)
    plan: list[tuple[str, Runner, bool]] = [
        ("reschedule", lambda url: reschedule.run(url), True),
        ("lateness", lambda url: lateness.run(url), False),
        ("limiter", lambda url: limiter.run(url), False),
        ("slots", lambda url: slots.run(url, sweep=SWEEP if sweep else ()), False),
        ("scale", lambda url: scale.run(url, scale.Params(cabinets=scale_cabinets)), True),
        ("page", lambda _url: page.run(page.Params(databases=databases)), True),
        ("capacity", lambda _url: capacity.run(capacity.Params(postgres=postgres)), True),
    ]
    results = {}
    for name, runner, private in plan:
        typer.echo(f"running {name} ...", err=True)
        results[name] = asyncio.run(_measure(name, runner, private=private))
    _finish(results, as_json=as_json, write_docs=write_docs, docs_dir=docs_dir, command=command)
