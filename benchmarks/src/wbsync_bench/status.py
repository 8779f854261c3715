"""``status``: the status page and ``/api/v1/status`` under concurrent readers, at scale.

1. A fresh SQLite database gets N cabinets in one transaction; the long queues get one job per
   cabinet each: four queues' jobs waiting, the others' delayed. What
   the "needs attention" panel reads is there too: 1 % of the cabinets suspended as a whole,
   1 % with a section suspended, 5 % with a token expiring in 3 days and 2 % expired.
2. ``wbsync api`` runs as a child process on loopback, as in production.
3. One warm-up read of each (the server's first read builds its index), then R readers, each
   in a loop, alternately load the page's first page (``/``) and
   ``/api/v1/status`` (its first page), with the bearer key; every reply's latency and status
   is recorded. p50/p95 per kind, and the 5xx count.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import httpx

from wbsync.jobs.queue import SyncQueue
from wbsync.redis import keys
from wbsync.store import Database, NewCabinet, Store
from wbsync.system.procs import dies_with_parent, free_port, stop_child
from wbsync.wb.tokens import Category, mint_token
from wbsync_bench.common import delete_prefix, redis_client, table, unique_prefix
from wbsync_bench.scale import LONG_QUEUES

_DELAYED = LONG_QUEUES[4:]  # these queues' jobs wait on a window; the others are waiting
_DELAY_MS = 3_600_000
_SELLERS = 50  # cabinets share this many sellers' tokens (what the page peeks does not care)


@dataclass
class Params:
    """What to run."""

    cabinets: int = 10_000
    readers: int = 20
    requests: int = 20  # per reader, alternating the page and the JSON


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _populate(url: str, prefix: str, database_url: str, params: Params) -> float:
    """Cabinets and jobs; returns the seconds the cabinets' one transaction took."""
    sellers = [f"{i:08d}-0000-4000-8000-00000000be{i % 100:02d}" for i in range(_SELLERS)]
    tokens = [
        mint_token(
            key="wbsync-bench-status-signing-key-0123456789",
            seller_id=s,
            categories=tuple(Category),
        )
        for s in sellers
    ]
    async with Database(database_url) as db:
        await db.migrate()
        store = Store(db, secret_key=_SECRET)
        began = time.perf_counter()
        report = await store.cabinets.add_many(
            [
                NewCabinet(
                    f"bench-{i:06d}",
                    tokens[i % _SELLERS],
                    sellers[i % _SELLERS],
                    token_expires_at=_expiry(i),
                )
                for i in range(params.cabinets)
            ]
        )
        insert_s = time.perf_counter() - began
        await _suspend(store, [c.id for c in report.added])
    ids = [str(c.id) for c in report.added]
    for name in LONG_QUEUES:
        queue = SyncQueue(name, redis_url=url, prefix=keys.queue_prefix(prefix))
        try:
            await queue.enqueue_many(ids, delay_ms=_DELAY_MS if name in _DELAYED else 0)
        finally:
            await queue.close()
    return insert_s


_SECRET = secrets.token_hex(32)


def _expiry(i: int) -> datetime:
    """A token's exp: 5 % in 3 days, 2 % a day ago, the rest in 180 days."""
    now = datetime.now(UTC)
    if i % 20 == 0:
        return now + timedelta(days=3)
    return now - timedelta(days=1) if i % 50 == 1 else now + timedelta(days=180)


async def _suspend(store: Store, ids: list[int]) -> None:
    """1 % of the cabinets suspended as a whole (a revoked token), 1 % in a section (payment)."""
    probe = datetime.now(UTC) + timedelta(hours=6)
    for cabinet_id in ids[::100]:
        await store.suspended.suspend(
            cabinet_id, None, kind="token", words="token problem; token is revoked", probe_at=probe
        )
    for cabinet_id in ids[50::100]:
        await store.suspended.suspend(
            cabinet_id, "finance", kind="payment", words="insufficient funds", probe_at=None
        )


def _start_api(port: int, env: dict[str, str], stderr: IO[bytes]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "wbsync", "api", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        preexec_fn=dies_with_parent(),  # a killed bench leaves no API behind
    )


async def _served(port: int, child: subprocess.Popen[bytes], stderr: IO[bytes]) -> None:
    """Wait until the API ``child`` answers on ``port``; if it exits first, say what it wrote
    to ``stderr`` (a file: a pipe nobody reads could fill and stall it)."""
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        while time.monotonic() < deadline:
            if child.poll() is not None:
                stderr.seek(0)
                said = stderr.read().decode(errors="replace").strip()
                raise RuntimeError(f"wbsync api exited with {child.returncode}: {said[-800:]}")
            try:
                if (await client.get("/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("wbsync api did not start within 60 s")


async def _read(port: int, key: str, params: Params) -> dict[str, list[tuple[float, int]]]:
    seen: dict[str, list[tuple[float, int]]] = {"page": [], "api": []}
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=params.readers)

    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60, limits=limits
    ) as client:

        async def reader(n: int) -> None:
            for i in range(params.requests):
                kind = "page" if (i + n) % 2 == 0 else "api"
                began = time.perf_counter()
                reply = await client.get("/" if kind == "page" else "/api/v1/status")
                seen[kind].append((1000 * (time.perf_counter() - began), reply.status_code))

        # The first read builds the process's index (cold start); the figures are steady state.
        for path in ("/", "/api/v1/status"):
            (await client.get(path)).raise_for_status()
        await asyncio.gather(*(reader(n) for n in range(params.readers)))
    return seen


async def run(url: str, params: Params | None = None) -> dict[str, Any]:
    """Populate, serve, read; the latency figures."""
    params = params or Params()
    prefix = unique_prefix("status")
    key = secrets.token_hex(32)
    with tempfile.TemporaryDirectory(prefix="wbsync-bench-status-") as tmp:
        database_url = f"sqlite+aiosqlite:///{Path(tmp) / 'status.db'}"
        try:
            insert_s = await _populate(url, prefix, database_url, params)
            port = free_port()
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("WBSYNC_")},
                "WBSYNC_REDIS_URL": url,
                "WBSYNC_REDIS_PREFIX": prefix,
                "WBSYNC_DATABASE_URL": database_url,
                "WBSYNC_SECRET_KEY": _SECRET,
                "WBSYNC_API_KEYS": f'["{key}"]',
                "WBSYNC_LOG_LEVEL": "WARNING",
            }
            with tempfile.TemporaryFile() as log:
                child = _start_api(port, env, log)
                try:
                    await _served(port, child, log)
                    load_before = os.getloadavg()[0]
                    seen = await _read(port, key, params)
                    load_after = os.getloadavg()[0]
                finally:
                    stop_child(child)
        finally:
            async with redis_client(url) as client:
                await delete_prefix(client, prefix)
    result: dict[str, Any] = {
        "cabinets": params.cabinets,
        "jobs": params.cabinets * len(LONG_QUEUES),
        "readers": params.readers,
        "insert_cabinets_s": insert_s,
        # Other work on the machine slows every figure: the 1-minute load average, as measured.
        "load_average": max(load_before, load_after),
        "errors_5xx": sum(s >= 500 for kind in seen.values() for _, s in kind),
        "non_200": sum(s != 200 for kind in seen.values() for _, s in kind),
    }
    for kind, samples in seen.items():
        ms = [m for m, _ in samples]
        result[f"{kind}_p50_ms"] = _percentile(ms, 0.5)
        result[f"{kind}_p95_ms"] = _percentile(ms, 0.95)
        result[f"{kind}_requests"] = len(ms)
    return result


def tables(result: dict[str, Any]) -> list[Any]:
    """The figures."""
    rows = [
        [
            "cabinets, jobs, readers",
            f"{result['cabinets']:,}, {result['jobs']:,}, {result['readers']}",
        ],
        ["cabinets inserted (one transaction)", f"{result['insert_cabinets_s']:.2f} s"],
        ["status page, first page: p50 / p95", _pair(result, "page")],
        ["/api/v1/status, first page: p50 / p95", _pair(result, "api")],
        ["5xx replies (any non-200)", f"{result['errors_5xx']} ({result['non_200']})"],
        ["machine load average while measured", f"{result['load_average']:.1f}"],
    ]
    return [table("status: the page under concurrent readers", ["measure", "value"], rows)]


def _pair(result: dict[str, Any], kind: str) -> str:
    return (
        f"{result[f'{kind}_p50_ms']:.0f} ms / {result[f'{kind}_p95_ms']:.0f} ms "
        f"({result[f'{kind}_requests']} requests)"
    )
