"""``soak``: a simulated week of every sync on its interval; do the tables stay flat?

1. The WB emulator (a child process, ``time_scale``), a private ``redis-server``, a fresh
   database (SQLite, or with ``--postgres`` a new PostgreSQL database) holding ``cabinets``
   cabinets, and one ``wbsync run`` process: its fan-out leader enqueues every queue on its
   default interval and runs the retention pass every ``prune_interval_s`` (its default), all
   compressed by ``time_scale`` (at 0.0005 a simulated week is about 5 real minutes, the
   booking monitor's minute 30 ms).
2. Every ``sample_hours`` of simulated time: every table's row count and, on PostgreSQL, its
   relation size (``pg_total_relation_size``, indexes and TOAST included) and dead tuples.
3. Per table: rows and size at the end of the warm-up (the first half) and at the end, and the
   growth over the second half as a share of the first half's end. Flat means about 0.

4. The calendar is scaled from the run's start (``WBSYNC_CALENDAR_ORIGIN``, the emulator's
   ``calendar_origin``): each simulated day is a calendar day, so new days appear in the dated
   datasets and old ones age out of their retention (``wbsync_bench.soak_retention``).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import text

from wbsync.emulator import Emulator, EmulatorConfig
from wbsync.errors import ConfigError
from wbsync.shared.runtime import Runtime
from wbsync.store import Database
from wbsync.store.cabinets import NewCabinet
from wbsync.store.schema import dataset_table
from wbsync.syncs import SYNCS
from wbsync.system import clock
from wbsync_bench import soak_retention
from wbsync_bench.common import fresh_database, report_life, table
from wbsync_bench.processes import WorkerProcesses, redis_under_test, seller_id
from wbsync_bench.upstream import EmulatorProcess

__all__ = ["GROWTH_FLAT", "Params", "plot", "render", "run", "tables"]

#: Growth over the second half (a share of the first half's end) still called flat.
GROWTH_FLAT = 0.02
_DAY_S = 86_400.0
_SKIP = {"alembic_version"}


@dataclass
class Params:
    """What to run."""

    cabinets: int = 3
    days: float = 7.0
    time_scale: float = 0.0005
    sample_hours: float = 3.0
    postgres: str | None = None

    def __post_init__(self) -> None:
        if self.cabinets < 1 or self.days <= 0 or self.time_scale <= 0:
            raise ConfigError("cabinets must be >= 1, days and time_scale > 0")
        if not 0 < self.sample_hours <= self.days * 24 / 4:
            raise ConfigError("sample_hours must be > 0 and leave at least 4 samples in days")


async def _sample(database: Database) -> dict[str, Any]:
    """Every table's rows (and on PostgreSQL its size in bytes and dead tuples), the dated
    datasets' days and the calendar's today."""
    pg = database.dialect == "postgresql"
    names_query = (
        "SELECT relname FROM pg_stat_user_tables"
        if pg
        else "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    )
    out: dict[str, dict[str, int]] = {}
    async with database.connection() as conn:
        names = sorted(set((await conn.scalars(text(names_query))).all()) - _SKIP)
        for name in names:
            figures = {"rows": int(await conn.scalar(text(f'SELECT count(*) FROM "{name}"')) or 0)}
            if pg:
                row = (
                    await conn.execute(
                        text(
                            "SELECT pg_total_relation_size(relid) AS size, n_dead_tup AS dead "
                            "FROM pg_stat_user_tables WHERE relname = :name"
                        ),
                        {"name": name},
                    )
                ).one()
                figures.update(bytes=int(row.size), dead=int(row.dead))
            out[name] = figures
        dated = await soak_retention.sample(conn)
    return {"today": clock.today().isoformat(), "tables": out, "dated": dated}


async def run(params: Params | None = None) -> dict[str, Any]:
    """Run the simulated week; the samples and each table's growth."""
    params = params or Params()
    try:
        return await _run(params)
    finally:
        clock.set_calendar(None)  # the process's calendar is real again


async def _run(params: Params) -> dict[str, Any]:
    # One scaled calendar for the emulator, the workers and the samples: a simulated day is a
    # calendar day.
    origin = datetime.now(UTC)
    config = EmulatorConfig(
        time_scale=params.time_scale,
        anchor_date=origin.date(),
        calendar_origin=origin,
        report_tasks=report_life(params.time_scale),
        serve_disabled_in_docs=True,
    )
    samples: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="wbsync-soak-") as tmp:
        async with EmulatorProcess(config) as emu:
            async with redis_under_test("single") as redis:
                async with fresh_database(params.postgres, Path(tmp), name="soak") as db_url:
                    workers = WorkerProcesses(
                        emu,
                        redis,
                        time_scale=params.time_scale,
                        concurrency=5,
                        scaled_pruning=True,
                    )
                    settings = workers.settings(db_url).model_copy(
                        update={"calendar_origin": origin}
                    )
                    runtime = await Runtime(settings, redis_url=redis.url).start()
                    try:
                        model = Emulator(emu.config)
                        await runtime.store.cabinets.add_many(
                            [
                                NewCabinet(f"soak-{i}", model.token(seller_id(i)), seller_id(i))
                                for i in range(params.cabinets)
                            ]
                        )
                        workers.spawn(settings, 1, Path(tmp))
                        try:
                            await workers.until_listening(runtime.queue_prefix)
                            await _soak(params, workers, runtime.database, samples)
                            served = await emu.counters()
                        finally:
                            workers.stop()
                    finally:
                        await runtime.aclose()
    return {
        "params": {k: v for k, v in asdict(params).items() if k != "postgres"},
        "database": "postgresql" if params.postgres else "sqlite",
        "wb_requests": served["total"],
        "wb_requests_by_method": _by_method(served),
        "samples": samples,
        "growth": _growth(samples),
        "calendar_origin": origin.isoformat(),
        "retention": soak_retention.retention(samples),
    }


async def _soak(
    params: Params, workers: WorkerProcesses, database: Database, samples: list[dict[str, Any]]
) -> None:
    """Sample every ``sample_hours`` of simulated time until ``days`` have passed."""
    step_s = params.sample_hours * 3600 * params.time_scale
    count = round(params.days * 24 / params.sample_hours)
    began = time.monotonic()
    for i in range(count + 1):
        await asyncio.sleep(max(0.0, began + i * step_s - time.monotonic()))
        died = workers.died()
        if died:
            raise ConfigError(died)
        day = (time.monotonic() - began) / params.time_scale / _DAY_S
        samples.append({"day": day, **await _sample(database)})


def _by_method(served: dict[str, Any]) -> dict[str, int]:
    """WB requests served per method, every seller together: how often each sync ran."""
    out: dict[str, int] = {}
    for methods in served["sellers"].values():
        for method, c in methods.items():
            out[method] = out.get(method, 0) + c["requests"]
    return dict(sorted(out.items()))


def _growth(samples: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per table: rows (and bytes) at the half and at the end, and the growth between."""
    mid, end = samples[len(samples) // 2]["tables"], samples[-1]["tables"]
    out: dict[str, dict[str, Any]] = {}
    for name, last in end.items():
        half = mid.get(name, {"rows": 0})
        entry: dict[str, Any] = {"rows_half": half["rows"], "rows_end": last["rows"]}
        entry["rows_growth"] = _share(last["rows"] - half["rows"], half["rows"])
        if "bytes" in last:
            entry.update(bytes_half=half.get("bytes", 0), bytes_end=last["bytes"])
            entry["bytes_growth"] = _share(last["bytes"] - entry["bytes_half"], entry["bytes_half"])
            entry["dead_end"] = last["dead"]
        entry["flat"] = entry["rows_growth"] <= GROWTH_FLAT
        out[name] = entry
    return out


def _share(delta: int, base: int) -> float:
    if base == 0:
        return 0.0 if delta == 0 else float("inf")
    return delta / base


def _rows(result: dict[str, Any]) -> list[list[Any]]:
    out = []
    for name, g in result["growth"].items():
        row = [name, g["rows_half"], g["rows_end"], _signed(g["rows_growth"])]
        if "bytes_end" in g:
            row += [g["bytes_end"] / 1024, _signed(g["bytes_growth"]), g["dead_end"]]
        out.append(row)
    return out


def _columns(result: dict[str, Any]) -> list[str]:
    days = result["params"]["days"]
    columns = ["table", f"rows at day {days / 2:g}", f"rows at day {days:g}", "rows growth"]
    if result["database"] == "postgresql":
        columns += ["KiB at the end", "size growth", "dead tuples at the end"]
    return columns


def tables(result: dict[str, Any]) -> list[Any]:
    """Per table: rows (and size) at the half and at the end of the simulated week."""
    p = result["params"]
    title = (
        f"soak: {p['cabinets']} cabinets, {p['days']:g} simulated days at time scale "
        f"{p['time_scale']:g} ({result['database']})"
    )
    return [table(title, _columns(result), _rows(result))]


def render(r: dict[str, Any], markdown_table: Any) -> str:
    """The docs section (``markdown_table`` is docs' table helper)."""
    p, growth = r["params"], r["growth"]
    dated = {dataset_table(n).name for n in soak_retention.dated_datasets()}
    measured = sorted(n for n in dated if n in growth)  # a dataset newer than the run has none
    grown = sorted(n for n, g in growth.items() if not g["flat"])
    real_s = p["days"] * _DAY_S * p["time_scale"]
    return "\n".join(
        [
            f"{p['cabinets']} cabinets, every sync on its default interval and the retention "
            f"pass on its own, for {p['days']:g} simulated days at time scale "
            f"{p['time_scale']:g} (about {real_s:.0f} real seconds; the booking monitor's "
            f"minute is {60_000 * p['time_scale']:g} ms), one `wbsync run` process, "
            f"{r['database']}, the emulator in a child process "
            f"({r['wb_requests']['requests']:,} WB requests served, "
            + ", ".join(f"`{m}` {n:,}" for m, n in r.get("wb_requests_by_method", {}).items())
            + "). Every "
            f"{p['sample_hours']:g} simulated hours: every table's rows"
            + (
                ", size (`pg_total_relation_size`) and dead tuples (autovacuum off)"
                if r["database"] == "postgresql"
                else ""
            )
            + ". Growth is over the second half, as a share of the rows (size) at its start; "
            f"flat means at most {GROWTH_FLAT:.0%}.",
            "",
            markdown_table(_columns(r), _rows(r)),
            "",
            _pace(r),
            "",
            "Rows flat over the second half: "
            + ("every table." if not grown else f"all but {', '.join(f'`{n}`' for n in grown)}.")
            + " Dated datasets ("
            + ", ".join(f"`{n}`" for n in measured)
            + "): "
            + ", ".join(_signed(growth[n]["rows_growth"]) for n in measured)
            + ". "
            + _sizes(growth),
            "",
            soak_retention.render(r, markdown_table),
            "",
            _dated(r),
            "",
            "![soak](bench-soak.png)",
        ]
    )


def _dated(r: dict[str, Any]) -> str:
    """What the dated datasets' rows did over the second half, and why."""
    kept = r.get("retention") or {}
    if not kept:
        return ""
    within = all(k["within"] for k in kept.values())
    return (
        (
            "Every dated dataset stayed within its retention"
            if within
            else "A dated dataset held a day past its retention (table above)"
        )
        + ". Their rows per day kept are the measure of flatness here: the stored days grow "
        "by one a simulated day until a day ages out (the funnel and advert history keep 400 "
        "days, the acceptance coefficients 30, so a week's soak stores every day it has seen; "
        "the coefficients' past days are tombstones, removed 7 days after they left WB's list)."
    )


def _pace(r: dict[str, Any]) -> str:
    """How often the booking monitor (one request a run) ran against its schedule."""
    p = r["params"]
    polls = r.get("wb_requests_by_method", {}).get("tariffs.acceptance_coefficients", 0)
    scheduled = p["days"] * _DAY_S / SYNCS["booking-slot-monitor"].interval_s
    return (
        f"The booking monitor ran {polls / p['cabinets']:,.0f} times per cabinet of the "
        f"{scheduled:,.0f} its interval asks for in {p['days']:g} days: the fan-out skips a "
        "cabinet whose previous job is still live, so at this time scale every sync runs back "
        "to back, as fast as one `wbsync run` completes it on this (loaded) machine. The week "
        "is that many runs of every sync, each a full pass of its tables, with the retention "
        "pass between them."
    )


def _sizes(growth: dict[str, dict[str, Any]]) -> str:
    """Which relations grew over the second half (PostgreSQL only)."""
    if not any("bytes_growth" in g for g in growth.values()):
        return ""
    grown = {
        n: g
        for n, g in growth.items()
        if "bytes_growth" in g and (g["bytes_growth"] is None or g["bytes_growth"] > GROWTH_FLAT)
    }
    if not grown:
        return "Relation sizes flat over the second half: every table."
    named = ", ".join(
        f"`{n}` {_signed(g['bytes_growth'], 0)} ({g['dead_end']:,} dead tuples)"
        for n, g in grown.items()
    )
    return (
        f"Relation sizes that grew over the second half: {named}. With autovacuum off (this "
        "server) the space of deleted rows is never reused (only VACUUM records it as free), "
        "while old versions of rows updated in place are reclaimed by page pruning; a table "
        "whose rows come and go (new days, their tombstones) grows until a VACUUM. Every "
        "other relation is flat."
    )


def plot(result: dict[str, Any], path: Path) -> None:
    """Rows (and on PostgreSQL relation size) of every table against the simulated day."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = result["samples"]
    sized = "bytes" in next(iter(samples[-1]["tables"].values()), {})
    fig, axes = plt.subplots(1, 2 if sized else 1, figsize=(12 if sized else 8, 5), squeeze=False)
    days = [s["day"] for s in samples]
    styles = ("-", "--", ":", "-.")
    for i, name in enumerate(sorted(result["growth"])):
        rows = [s["tables"].get(name, {}).get("rows", 0) for s in samples]
        style = {"label": name, "linewidth": 1.2, "linestyle": styles[i // 10 % len(styles)]}
        axes[0][0].plot(days, [max(r, 0.5) for r in rows], **style)
        if sized:
            kib = [s["tables"].get(name, {}).get("bytes", 0) / 1024 for s in samples]
            axes[0][1].plot(days, kib, **style)
    axes[0][0].set_yscale("log")
    axes[0][0].set_ylabel("rows (0 drawn at 0.5)")
    if sized:
        axes[0][1].set_ylabel("relation size, KiB (autovacuum off)")
    for ax in axes[0]:
        ax.set_xlabel("simulated day")
    fig.suptitle(f"soak: every table over {result['params']['days']:g} simulated days")
    axes[0][-1].legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _signed(growth: float | None, digits: int = 1) -> str:
    """A growth as a signed share; ``None`` is a table empty at the half (the stored results hold
    no infinity), which grew from nothing."""
    return "from 0" if growth is None else f"{growth:+.{digits}%}"
