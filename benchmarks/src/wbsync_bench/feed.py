"""``feed``: reading a long change feed, through the API and through ``wbsync export``.

1. A fresh database (SQLite, or with ``--postgres`` a PostgreSQL database created for the run)
   gets one cabinet; the ``cards`` feed is filled by one bulk ``INSERT ... SELECT`` per size
   (rows shaped like a WB card, sequence numbers 1..N, the dataset's sequence set to N), not by
   syncing: the measurement is the read, and a million synced cards would take an hour.
2. At each size N (ascending; the table grows between them), three readers, each a fresh child
   process, read the whole feed from ``after=0``:
   - ``api``: ``wbsync api`` serves on loopback; this process pages the fleet-wide route
     ``/api/v1/datasets/cards/changes`` with ``limit`` = the largest page and its ``next`` cursor
     until ``more`` is false;
   - ``export jsonl`` and ``export csv``: ``wbsync export cards --format ...`` to /dev/null.
3. Per reader and N: rows read (checked against N, and the last cursor against N), wall time
   and rows per second, the child's CPU seconds, and its peak RSS (``VmHWM`` of
   ``/proc/<pid>/status`` for the API server, read before it stops; ``ru_maxrss`` of
   ``wait4`` for the export, the same high-water mark read once the process has exited).

Constant memory means the peak RSS does not grow with N; rows per second should not fall.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import httpx
from sqlalchemy import bindparam, text

from wbsync.errors import ConfigError
from wbsync.store import Database, NewCabinet, Store
from wbsync.store.changes import FEED_PAGE_MAX
from wbsync.store.schema import UtcDateTime
from wbsync.system.procs import dies_with_parent, free_port, stop_child
from wbsync.wb.tokens import Category, mint_token
from wbsync_bench.common import delete_prefix, fresh_database, redis_client, table, unique_prefix
from wbsync_bench.processes import process_cpu_s
from wbsync_bench.status import _served

__all__ = ["READERS", "Params", "render", "run", "tables"]

READERS = ("api", "export jsonl", "export csv")
_DATASET = "cards"
_SECRET = secrets.token_hex(32)
_SELLER = "00000000-0000-4000-8000-0000000fee0d"
_CHUNK = 100_000  # rows per INSERT ... SELECT (bounded transactions)

# One WB card per row, about 250 bytes of JSON, keys in sorted order (SQLite stores the text).
_PG_ROW = (
    "jsonb_build_object('brand', 'Brand ' || (g % 50), 'nmID', g, 'sizes', "
    "jsonb_build_array(jsonb_build_object('chrtID', g * 10, 'price', 1000 + g % 500, "
    "'skus', jsonb_build_array('46' || lpad(g::text, 11, '0')))), 'subjectName', 'T-shirts', "
    "'title', 'Item ' || g, 'updatedAt', '2026-12-01T10:00:00Z', 'vendorCode', 'vc-' || g)"
)
_SQLITE_ROW = (
    "json_object('brand', 'Brand ' || (g % 50), 'nmID', g, 'sizes', "
    "json_array(json_object('chrtID', g * 10, 'price', 1000 + g % 500, "
    "'skus', json_array('46' || substr('00000000000' || g, -11)))), 'subjectName', 'T-shirts', "
    "'title', 'Item ' || g, 'updatedAt', '2026-12-01T10:00:00Z', 'vendorCode', 'vc-' || g)"
)


@dataclass
class Params:
    """What to run."""

    sizes: tuple[int, ...] = (100_000, 300_000, 1_000_000)
    postgres: str | None = None

    def __post_init__(self) -> None:
        if not self.sizes or any(n < 1 for n in self.sizes):
            raise ConfigError(f"sizes must be whole numbers >= 1, got {self.sizes}")
        self.sizes = tuple(sorted(set(self.sizes)))


async def _fill(db: Database, cabinet_id: int, lo: int, hi: int) -> None:
    """Cards ``lo..hi`` (sequence numbers alike) in chunks; the sequence's end set to ``hi``."""
    columns = f"wb_{_DATASET} (cabinet_id, nm_id, data, changed_at, seq, deleted_at)"
    if db.dialect == "postgresql":
        sql = (
            f"INSERT INTO {columns} SELECT CAST(:cabinet AS integer), g, {_PG_ROW}, :at, g, NULL "
            "FROM generate_series(CAST(:lo AS bigint), CAST(:hi AS bigint)) AS g"
        )
    else:  # no generate_series in every SQLite build: a recursive CTE counts
        sql = (
            "WITH RECURSIVE s(g) AS (SELECT :lo UNION ALL SELECT g + 1 FROM s WHERE g < :hi) "
            f"INSERT INTO {columns} SELECT :cabinet, g, {_SQLITE_ROW}, :at, g, NULL FROM s"
        )
    insert = text(sql).bindparams(bindparam("at", type_=UtcDateTime))
    at = datetime.now(UTC)
    for start in range(lo, hi + 1, _CHUNK):
        end = min(hi, start + _CHUNK - 1)
        async with db.transaction() as conn:
            await conn.execute(insert, {"cabinet": cabinet_id, "lo": start, "hi": end, "at": at})
    async with db.transaction() as conn:
        await conn.execute(
            text("UPDATE wb_change_sequences SET last_seq = :hi WHERE dataset = :name"),
            {"hi": hi, "name": _DATASET},
        )


def _hwm_mb(pid: int) -> float:
    """Peak resident memory of a live process (``VmHWM``), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def _spawn(
    args: list[str], env: dict[str, str], *, stderr: int | IO[bytes]
) -> subprocess.Popen[bytes]:
    """``python -m wbsync <args>``, dying with this process (a killed bench leaves none)."""
    return subprocess.Popen(
        [sys.executable, "-m", "wbsync", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        preexec_fn=dies_with_parent(),
    )


async def _via_api(env: dict[str, str], key: str) -> dict[str, Any]:
    with tempfile.TemporaryFile() as log:
        return await _read_api(env, key, log)


async def _read_api(env: dict[str, str], key: str, log: IO[bytes]) -> dict[str, Any]:
    port = free_port()
    child = _spawn(["api", "--port", str(port)], env, stderr=log)
    try:
        await _served(port, child, log)
        rows, after, pages = 0, 0, 0
        cpu0, began = process_cpu_s(child.pid), time.perf_counter()
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {key}"},
            timeout=120,
        ) as client:
            while True:
                reply = await client.get(
                    f"/api/v1/datasets/{_DATASET}/changes",
                    params={"after": after, "limit": FEED_PAGE_MAX},
                )
                reply.raise_for_status()
                page = reply.json()
                rows += len(page["changes"])
                after, pages = page["next"], pages + 1
                if not page["more"]:
                    break
        wall = time.perf_counter() - began
        return {
            "rows": rows,
            "last_seq": after,
            "pages": pages,
            "wall_s": wall,
            "cpu_s": process_cpu_s(child.pid) - cpu0,
            "peak_rss_mb": _hwm_mb(child.pid),
        }
    finally:
        stop_child(child)


async def _via_export(env: dict[str, str], fmt: str) -> dict[str, Any]:
    began = time.perf_counter()
    child = _spawn(["export", _DATASET, "--format", fmt], env, stderr=subprocess.PIPE)
    try:
        _, status, usage = await asyncio.to_thread(os.wait4, child.pid, 0)
        wall = time.perf_counter() - began
        child.returncode = os.waitstatus_to_exitcode(status)
        said = child.stderr.read().decode() if child.stderr else ""
    finally:
        stop_child(child)
    if child.returncode != 0:
        raise RuntimeError(f"wbsync export exited with {child.returncode}: {said[-500:]}")
    # Its last line: "<rows> changes; next --after <seq>".
    counted, _, rest = said.strip().splitlines()[-1].partition(" changes; next --after ")
    return {
        "rows": int(counted),
        "last_seq": int(rest),
        "wall_s": wall,  # the process's whole life: its start (imports, migration check) too
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
    }


async def run(url: str, params: Params | None = None) -> dict[str, Any]:
    """Fill the feed to each size and read it whole with every reader."""
    params = params or Params()
    prefix = unique_prefix("feed")
    key = secrets.token_hex(32)
    measured: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="wbsync-feed-") as tmp:
        async with fresh_database(params.postgres, Path(tmp), name="feed") as database_url:
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("WBSYNC_")},
                "WBSYNC_REDIS_URL": url,
                "WBSYNC_REDIS_PREFIX": prefix,
                "WBSYNC_DATABASE_URL": database_url,
                "WBSYNC_SECRET_KEY": _SECRET,
                "WBSYNC_API_KEYS": f'["{key}"]',
                "WBSYNC_LOG_LEVEL": "WARNING",
            }
            try:
                async with Database(database_url) as db:
                    await db.migrate()
                    token = mint_token(
                        key="wbsync-bench-feed-signing-key-0123456789",
                        seller_id=_SELLER,
                        categories=tuple(Category),
                    )
                    store = Store(db, secret_key=_SECRET)
                    added = await store.cabinets.add_many([NewCabinet("feed", token, _SELLER)])
                    cabinet_id, filled = added.added[0].id, 0
                    for size in params.sizes:
                        began = time.perf_counter()
                        await _fill(db, cabinet_id, filled + 1, size)
                        fill_s, filled = time.perf_counter() - began, size
                        readers = {"api": await _via_api(env, key)}
                        for fmt in ("jsonl", "csv"):
                            readers[f"export {fmt}"] = await _via_export(env, fmt)
                        for m in readers.values():  # every row, each once, the cursor at the end
                            m["complete"] = m["rows"] == size and m["last_seq"] == size
                        measured.append({"rows": size, "fill_s": fill_s, "readers": readers})
            finally:
                async with redis_client(url) as client:
                    await delete_prefix(client, prefix)
    return {
        "params": {k: v for k, v in asdict(params).items() if k != "postgres"},
        "database": "postgresql" if params.postgres else "sqlite",
        "page_limit": FEED_PAGE_MAX,
        "load_average": os.getloadavg()[0],
        "sizes": measured,
    }


def _rows(result: dict[str, Any]) -> list[list[Any]]:
    out = []
    for size in result["sizes"]:
        for reader in READERS:
            m = size["readers"][reader]
            out.append(
                [
                    f"{size['rows']:,}",
                    reader,
                    m["rows"],
                    m["rows"] / m["wall_s"],
                    m["rows"] / m["cpu_s"] if m["cpu_s"] else float("nan"),
                    m["peak_rss_mb"],
                ]
            )
    return out


_COLUMNS = ["feed rows", "reader", "rows read", "rows/s", "rows per CPU s", "peak RSS MiB"]


def tables(result: dict[str, Any]) -> list[Any]:
    """Per size and reader: rows, rate, and the reading process's peak RSS."""
    return [
        table(
            f"feed: the cards feed read whole ({result['database']})",
            _COLUMNS,
            _rows(result),
        )
    ]


def render(r: dict[str, Any], markdown_table: Any) -> str:
    """The docs section (``markdown_table`` is docs' table helper)."""
    sizes = r["sizes"]
    growth = {
        reader: sizes[-1]["readers"][reader]["peak_rss_mb"]
        - sizes[0]["readers"][reader]["peak_rss_mb"]
        for reader in READERS
    }
    return "\n".join(
        [
            f"The `cards` feed ({r['database']}) filled by bulk inserts to each size (one "
            "cabinet, rows shaped like a WB card, ~250 bytes of JSON), then read whole from "
            "`after=0` by three readers, each a fresh child process: `wbsync api` paged by this "
            f"process over loopback ({r['page_limit']} changes a page, the fleet-wide route and "
            "its `next` cursor), and `wbsync export` as JSON lines and as CSV to /dev/null. "
            "rows/s is over wall time (the export's includes its start-up, a few seconds "
            "under load); rows per CPU s counts the serving or exporting process's own CPU, "
            "the figure that does not depend on what else the machine runs (on a loaded "
            "machine the reader gets a fraction of a core). Peak RSS is the "
            "child's high-water mark (`VmHWM` of the API server before it stops, `ru_maxrss` "
            "of the export). "
            + (
                "Every reader read exactly the rows filled, its last cursor the last sequence "
                "number. "
                if all(m["complete"] for s in sizes for m in s["readers"].values())
                else "**A reader did not read every row once** (see benchmarks.json). "
            )
            + f"Load average {r['load_average']:.1f} at the end.",
            "",
            markdown_table(_COLUMNS, _rows(r)),
            "",
            "Peak RSS from the smallest to the largest feed: "
            + ", ".join(f"{reader} {growth[reader]:+.1f} MiB" for reader in READERS)
            + f" for {sizes[-1]['rows'] / sizes[0]['rows']:.0f}x the rows: memory holds one page "
            "whatever the feed's length.",
        ]
    )
