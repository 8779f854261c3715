"""``data``: what re-syncing unchanged data writes, by wbsync's count and PostgreSQL's own.

1. The WB emulator (in this process) serves N sellers; a fresh database (SQLite, or with
   ``--postgres`` a PostgreSQL database created for the run, autovacuum off on its tables so
   dead tuples stay countable) gets N cabinets.
2. Every sync runs R times for every cabinet, as a worker runs it (``run_sync``; the cabinets of
   one sync side by side; a fleet-wide sync once, as its one job), each run after the previous
   one ended. Per run and sync: the rows WB returned, the rows written (inserted or changed),
   the rows tombstoned.
3. With PostgreSQL, after the runs (the pool closed, so every backend flushed its statistics):
   ``pg_stat_user_tables`` inserts, updates and dead tuples of the dataset tables, against the
   rows that really changed: every write wbsync counted (all runs, tombstones included) less
   the rows the tables hold at the end (each of those was inserted once, dead tuples none).
   The check: dead tuples within ``DEAD_TOLERANCE`` of the rows really changed.

The emulator's data is stable between runs, except what a run itself changes: the autobidder
moves bids toward its target each run (real changes, written and counted).
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from wbsync.catalog.registry import BUILTIN
from wbsync.config import Settings
from wbsync.emulator import EmulatorConfig, running_emulator
from wbsync.shared.runtime import Runtime, open_runtime
from wbsync.store import Cabinet, ChangeEvent
from wbsync.syncs import SYNCS, SyncInput, SyncPage, run_sync
from wbsync.system.clock import monotonic, wb_today
from wbsync_bench.common import fresh_database, report_life, table, unique_prefix

__all__ = ["DEAD_TOLERANCE", "Params", "run", "tables"]

#: How far (as a fraction) dead tuples may be from the rows that really changed.
DEAD_TOLERANCE = 0.05
_SECRET = "wbsync-bench-data-secret"
_STATS_WAIT_S = 30.0


@dataclass
class Params:
    """What to run."""

    cabinets: int = 10
    runs: int = 3
    time_scale: float = 0.001
    postgres: str | None = None


def _seller(i: int) -> str:
    return str(uuid.UUID(int=0xDA7A_0000 + i + 1, version=4))


async def _one_sync(runtime: Runtime, name: str, cabinets: list[Cabinet]) -> dict[str, int]:
    """One run of sync ``name`` for every cabinet, side by side: rows fetched, written, gone.
    A fleet-wide sync (``Sync.fleet``) runs once, with the first cabinet's token: its rows are
    the fleet's, one job for the fleet in wbsync."""
    store, sync = runtime.store, SYNCS[name]
    fetched = 0

    async def counted(page: SyncPage, _event: ChangeEvent | None) -> None:
        nonlocal fetched
        fetched += len(page.rows)

    async def one(cabinet: Cabinet) -> tuple[int, int]:
        cursor = await store.cursors.get(cabinet.id, name) if sync.incremental else None
        inp = SyncInput(
            runtime.client(cabinet), store, cabinet.id, cursor, wb_today(), runtime.sync_options
        )
        totals = await run_sync(sync, inp, on_page=counted)
        return totals.rows, totals.tombstoned

    done = await asyncio.gather(*(one(c) for c in (cabinets[:1] if sync.fleet else cabinets)))
    return {
        "fetched": fetched,
        "written": sum(w for w, _ in done),
        "tombstoned": sum(t for _, t in done),
    }


def _syncs() -> list[str]:
    """The syncs measured: wbsync's own, read from the registry (the emulator serves their WB
    methods; a plugin's may have none here)."""
    return [name for name in SYNCS if SYNCS.owner(name) == BUILTIN]


async def _one_run(runtime: Runtime, cabinets: list[Cabinet]) -> dict[str, dict[str, int]]:
    return {name: await _one_sync(runtime, name, cabinets) for name in _syncs()}


async def _pg_counters(url: str, written: int) -> dict[str, dict[str, int]]:
    """Per dataset table: inserts, updates, dead tuples, once every backend's are flushed."""
    engine = create_async_engine(url)
    tables = _dataset_tables()
    query = text(
        "SELECT relname, n_tup_ins, n_tup_upd, n_dead_tup FROM pg_stat_user_tables "
        "WHERE relname LIKE 'wb\\_%' ORDER BY relname"
    )
    try:
        deadline = monotonic() + _STATS_WAIT_S
        while True:
            async with engine.connect() as conn:
                rows = (await conn.execute(query)).all()
            counted = sum(r.n_tup_ins + r.n_tup_upd for r in rows if r.relname in tables)
            # Closed backends flush their counts as they exit, a moment after the pool closed.
            if counted >= written or monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        async with engine.connect() as conn:
            held = {
                name: int(await conn.scalar(text(f"SELECT count(*) FROM {name}")) or 0)
                for name in sorted(tables)
            }
    finally:
        await engine.dispose()
    return {
        r.relname: {
            "ins": r.n_tup_ins,
            "upd": r.n_tup_upd,
            "dead": r.n_dead_tup,
            **({"rows": held[r.relname]} if r.relname in held else {}),
        }
        for r in rows
    }


def _dataset_tables() -> set[str]:
    """The tables of the datasets the syncs store (read from the registry when needed)."""
    return {ds.table_name for name in _syncs() for ds in SYNCS[name].stores}


async def run(url: str, params: Params | None = None) -> dict[str, Any]:
    """Run the benchmark on Redis ``url``."""
    params = params or Params()
    runs: list[dict[str, dict[str, int]]] = []
    with tempfile.TemporaryDirectory(prefix="wbsync-data-") as tmp:
        emulator = EmulatorConfig(
            time_scale=params.time_scale,
            anchor_date=wb_today(),
            report_tasks=report_life(params.time_scale),
            serve_disabled_in_docs=True,  # every sync runs, the booking monitor's too
        )
        async with (
            running_emulator(emulator) as emu,
            fresh_database(params.postgres, Path(tmp), name="data") as database_url,
        ):
            settings = Settings(
                redis_url=url,
                redis_prefix=unique_prefix("data"),
                database_url=database_url,
                secret_key=SecretStr(_SECRET),
                wb_base_url=emu.base_url,
                time_scale=params.time_scale,
                log_level="WARNING",
            )
            async with open_runtime(settings) as runtime:
                if params.postgres is not None:
                    async with runtime.database.transaction() as conn:
                        for name in sorted(_dataset_tables()):
                            await conn.execute(
                                text(f"ALTER TABLE {name} SET (autovacuum_enabled = false)")
                            )
                cabinets = [
                    await runtime.store.cabinets.add(f"data-{i}", emu.token(_seller(i)), _seller(i))
                    for i in range(params.cabinets)
                ]
                for _ in range(params.runs):
                    runs.append(await _one_run(runtime, cabinets))
            written = sum(f["written"] + f["tombstoned"] for r in runs for f in r.values())
            counters = (
                await _pg_counters(database_url, written) if params.postgres is not None else {}
            )
    dead = sum(c["dead"] for n, c in counters.items() if n in _dataset_tables())
    changed = written - sum(c.get("rows", 0) for c in counters.values())
    return {
        "params": {k: v for k, v in asdict(params).items() if k != "postgres"},
        "database": "postgresql" if params.postgres else "sqlite",
        "syncs": {name: _summary(name, runs) for name in _syncs()},
        "written_after_first": sum(
            f["written"] + f["tombstoned"] for r in runs[1:] for f in r.values()
        ),
        "postgres": counters,
        "dead_tuples": dead,
        "check": _check(dead, changed) if counters else None,
    }


def _check(dead: int, changed: int) -> dict[str, Any]:
    """Dead tuples of the dataset tables against the rows that really changed."""
    ratio = dead / changed if changed else (1.0 if dead == 0 else float("inf"))
    return {
        "dead_tuples": dead,
        "really_changed": changed,
        "ratio": ratio,
        "tolerance": DEAD_TOLERANCE,
        "met": abs(ratio - 1.0) <= DEAD_TOLERANCE,
    }


def _summary(name: str, runs: list[dict[str, dict[str, int]]]) -> dict[str, int]:
    """One sync's rows in the first run and in all the later ones together."""
    first, later = runs[0][name], [r[name] for r in runs[1:]]
    return {
        "first_fetched": first["fetched"],
        "first_written": first["written"],
        "later_fetched": sum(r["fetched"] for r in later),
        "later_written": sum(r["written"] for r in later),
        "tombstoned": sum(r[name]["tombstoned"] for r in runs),
    }


_COLUMNS = ("first_fetched", "first_written", "later_fetched", "later_written", "tombstoned")


def tables(result: dict[str, Any]) -> list[Any]:
    """Per sync: rows fetched and written in the first run and in the later ones."""
    rows = [[name, *(s[c] for c in _COLUMNS)] for name, s in result["syncs"].items()]
    out = [
        table(
            f"data: {result['params']['cabinets']} cabinets, {result['params']['runs']} runs "
            f"of every sync ({result['database']})",
            [
                "sync",
                "run 1 fetched",
                "run 1 written",
                "later runs fetched",
                "later runs written",
                "tombstoned",
            ],
            rows,
        )
    ]
    if result["postgres"]:
        out.append(
            table(
                "PostgreSQL's counters after the runs (autovacuum off)",
                ["table", "inserted", "updated", "dead tuples"],
                [[n, c["ins"], c["upd"], c["dead"]] for n, c in result["postgres"].items()],
            )
        )
    if result.get("check"):
        c = result["check"]
        out.append(
            table(
                "dead tuples of the dataset tables against the rows really changed",
                ["dead tuples", "rows really changed", "ratio", "within", "check"],
                [
                    [
                        c["dead_tuples"],
                        c["really_changed"],
                        c["ratio"],
                        f"{c['tolerance']:.0%}",
                        "met" if c["met"] else "missed",
                    ]
                ],
            )
        )
    return out
