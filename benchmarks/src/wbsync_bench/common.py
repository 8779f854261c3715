"""What every benchmark shares: Redis, the machine's description, rounds, statistics, output.

Benchmarks compare implementations or modes in the same run, interleaved: ``rounds`` yields the
modes in ABBA order (reversed every other round), so a machine that gets slower or faster during
the run shifts every mode alike instead of favouring whichever ran first.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import platform
import statistics
import sys
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from redis.asyncio import Redis
from rich.console import Console
from rich.table import Table

from wbsync.catalog.registry import BUILTIN
from wbsync.config import get_settings
from wbsync.emulator.config import ReportTaskLife
from wbsync.redis.redis_server import EmbeddedRedis
from wbsync.redis.redis_server import redis_url as resolve_redis_url
from wbsync.syncs import SYNCS, Sync

T = TypeVar("T")

#: Tables and logs go to stderr, so ``--json`` leaves exactly one JSON object on stdout.
STDERR = Console(stderr=True)
STDOUT = Console()


def syncs() -> dict[str, Sync]:
    """The syncs the benchmarks run, by queue name: the one place they are read from.

    wbsync's own, read from the registry when asked; an installed plugin's are left out (its
    ``wbsync run`` children load no plugins), so figures compare across installations.
    """
    return {name: sync for name, sync in SYNCS.items() if SYNCS.owner(name) == BUILTIN}


#: Real seconds a benchmark's emulator keeps a built report at least (``report_life``).
REPORT_KEPT_REAL_S = 600.0


def report_life(time_scale: float) -> ReportTaskLife:
    """The emulator's report task life for a benchmark at ``time_scale``: WB's, except that a
    built report is kept at least ``REPORT_KEPT_REAL_S`` real seconds.

    WB keeps a report 2 hours, hours more than a run takes from its status to its download. At
    a benchmark's scale those 2 hours shrink (7 ms at a WB minute of 60 us) while the machine's
    round trips and queues do not, so WB's figure would have the report purged before its
    download and the run fail, which WB's real 2 hours never do.
    """
    wb = ReportTaskLife()
    return wb.model_copy(update={"kept_s": max(wb.kept_s, REPORT_KEPT_REAL_S / time_scale)})


def setup_logging(verbose: bool = False) -> None:
    """Log to stderr; warnings only unless ``verbose``."""
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )


@contextlib.contextmanager
def bench_redis(*, private: bool = False) -> Iterator[str]:
    """WBSYNC_REDIS_URL (or a private embedded server); always private when ``private``.

    ``private`` is for measurements that read server-wide numbers (commandstats, memory),
    which other clients of a shared server would pollute.
    """
    if private:
        with EmbeddedRedis() as server:
            yield server.url
        return
    with resolve_redis_url(get_settings().redis_url) as url:
        yield url


def unique_prefix(name: str) -> str:
    """A key prefix of this run's own, so runs on a shared Redis never see each other."""
    return f"wbsync-bench:{name}:{uuid.uuid4().hex[:10]}"


@contextlib.asynccontextmanager
async def redis_client(url: str, *, cleanup_prefix: str | None = None) -> AsyncIterator[Redis]:
    """A client of ``url``; on exit deletes every key under ``cleanup_prefix``."""
    client = Redis.from_url(url)
    try:
        yield client
    finally:
        if cleanup_prefix is not None:
            await delete_prefix(client, cleanup_prefix)
        await client.aclose()


async def delete_prefix(client: Redis, prefix: str) -> None:
    """Delete every key under ``prefix`` (SCAN, so a shared Redis is never blocked long)."""
    batch: list[bytes] = []
    async for key in client.scan_iter(match=f"{prefix}*", count=1000):
        batch.append(key)
        if len(batch) >= 1000:
            await client.unlink(*batch)
            batch.clear()
    if batch:
        await client.unlink(*batch)


def rounds(modes: Sequence[T], n: int) -> Iterator[tuple[int, T]]:
    """``(round, mode)`` for ``n`` rounds, in ABBA order (see the module docstring)."""
    for r in range(n):
        for mode in modes if r % 2 == 0 else tuple(reversed(modes)):
            yield r, mode


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by the nearest-rank method; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def median(values: Sequence[float]) -> float:
    """The median; NaN when empty."""
    return statistics.median(values) if values else math.nan


def ratio(a: float, b: float) -> float:
    """``a / b``, NaN when ``b`` is zero or NaN."""
    return a / b if b and not math.isnan(b) else math.nan


def rounded(value: Any, digits: int = 4) -> Any:
    """``value`` with its floats rounded, recursively (JSON stays readable)."""
    if isinstance(value, float):
        return round(value, digits) if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v, digits) for v in value]
    return value


def cpu_model() -> str:
    """The CPU's model name (Linux), else the platform's processor string."""
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


async def machine(redis_url: str) -> dict[str, Any]:
    """The machine a result was measured on: CPU, cores, Python, Redis."""
    client = Redis.from_url(redis_url)
    try:
        server = await client.info("server")
    finally:
        await client.aclose()
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "redis": str(server.get("redis_version", "unknown")),
        "os": f"{platform.system()} {platform.release()}",
        # The machine is shared: how busy it was says how far absolute figures can be trusted.
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Table:
    """A rich table; floats shown with sensible precision."""
    out = Table(title=title)
    for i, column in enumerate(columns):
        out.add_column(column, justify="left" if i == 0 else "right")
    for row in rows:
        out.add_row(*(fmt(cell) for cell in row))
    return out


def fmt(cell: Any) -> str:
    """One table cell."""
    if isinstance(cell, float):
        if math.isnan(cell):
            return "-"
        return f"{cell:,.0f}" if abs(cell) >= 1000 else f"{cell:.3g}"
    return str(cell)


def emit(result: Mapping[str, Any], tables: Sequence[Table], *, as_json: bool) -> None:
    """Show ``tables``; with ``as_json`` print ``result`` as the one JSON object on stdout."""
    console = STDERR if as_json else STDOUT
    for t in tables:
        console.print(t)
    if as_json:
        sys.stdout.write(json.dumps(rounded(result), sort_keys=False) + "\n")
        sys.stdout.flush()


@contextlib.asynccontextmanager
async def fresh_database(postgres: str | None, tmp: Path, *, name: str) -> AsyncIterator[str]:
    """The URL of a new empty database: a SQLite file in ``tmp``, or (with ``postgres``, an
    admin URL) a PostgreSQL database created for the run and dropped after it."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url
    from sqlalchemy.ext.asyncio import create_async_engine

    db_name = f"wbsync_{name}_{uuid.uuid4().hex[:10]}"
    if postgres is None:
        yield f"sqlite+aiosqlite:///{tmp / db_name}.db"
        return
    admin = create_async_engine(postgres, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'CREATE DATABASE "{db_name}"'))
        try:
            yield make_url(postgres).set(database=db_name).render_as_string(hide_password=False)
        finally:
            async with admin.connect() as conn:
                await conn.execute(text(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)'))
    finally:
        await admin.dispose()
