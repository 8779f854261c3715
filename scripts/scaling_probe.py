"""Measure what one page of sync work costs, for docs/scaling.md.

Runs every sync once for N cabinets in this process (the workers, the limiter, SQLite) against
the emulator in a child process, on a private Redis, and prints JSON: pages, rows, this
process's CPU seconds per 1,000 pages, Redis commands per page (``INFO commandstats``, which
counts the commands inside Lua scripts too), and Redis memory per cabinet while each cabinet
has its nine jobs queued.

    .venv/bin/python scripts/scaling_probe.py [cabinets] [time_scale]
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from redis.asyncio import Redis

from wbsync import clock
from wbsync.bench.upstream import EmulatorProcess
from wbsync.config import Settings
from wbsync.emulator import Emulator, EmulatorConfig
from wbsync.jobs.fanout import FanOut
from wbsync.jobs.queue import Outcome
from wbsync.jobs.workers import build_workers
from wbsync.metrics import SYNC_PAGES, SYNC_ROWS, queue_value
from wbsync.redis_server import EmbeddedRedis
from wbsync.runtime import Runtime
from wbsync.service import active_cabinet_ids
from wbsync.syncs import SYNCS


async def _info(redis: Redis) -> tuple[int, int]:
    stats = await redis.info("commandstats")
    calls = sum(int(v["calls"]) for k, v in stats.items() if k.startswith("cmdstat_"))
    memory = int((await redis.info("memory"))["used_memory"])
    return calls, memory


async def probe(cabinets: int, scale: float) -> dict[str, Any]:
    config = EmulatorConfig(time_scale=scale, anchor_date=clock.today(), grace_ms=100)
    model = Emulator(config)  # mints the tokens the emulator process accepts
    with EmbeddedRedis() as server, tempfile.TemporaryDirectory() as tmp:
        async with EmulatorProcess(config) as emu:
            settings = Settings(
                redis_url=server.url,
                database_url=f"sqlite+aiosqlite:///{Path(tmp) / 'probe.db'}",
                secret_key=SecretStr("scaling-probe"),
                wb_base_url=emu.base_url,
                time_scale=scale,
            )
            runtime = await Runtime(settings, redis_url=server.url).start()
            redis = Redis.from_url(server.url, decode_responses=True)
            try:
                for i in range(cabinets):
                    seller = str(uuid.UUID(int=i + 1, version=4))
                    await runtime.store.cabinets.add(f"probe-{i}", model.token(seller), seller)
                queues = {name: runtime.queue(name) for name in SYNCS}
                fanout = FanOut(
                    queues, lambda: active_cabinet_ids(runtime), {n: 1e9 for n in SYNCS}
                )
                _, memory_before = await _info(redis)
                await fanout.run_once()
                calls_before, memory_queued = await _info(redis)
                jobs, finished, done = cabinets * len(SYNCS), [0], asyncio.Event()

                def count(outcome: Outcome) -> None:
                    if outcome.outcome in ("completed", "failed"):
                        finished[0] += 1
                        if finished[0] == jobs:
                            done.set()

                workers = build_workers(runtime, on_outcome=count)
                cpu, started = time.process_time(), time.monotonic()
                for worker in workers:
                    await worker.start()
                await done.wait()
                cpu, wall = time.process_time() - cpu, time.monotonic() - started
                calls_after, _ = await _info(redis)
                for worker in workers:
                    await worker.close()
            finally:
                await redis.aclose()
                await runtime.aclose()
            counters = await emu.counters()
    pages = sum(queue_value(SYNC_PAGES, name) for name in SYNCS)
    rows = sum(queue_value(SYNC_ROWS, name) for name in SYNCS)
    return {
        "cabinets": cabinets,
        "time_scale": scale,
        "pages": int(pages),
        "rows": int(rows),
        "wall_s": round(wall, 2),
        "cpu_s_per_1000_pages": round(cpu / pages * 1000, 2),
        "redis_commands_per_page": round((calls_after - calls_before) / pages, 1),
        "redis_bytes_per_cabinet_queued": round((memory_queued - memory_before) / cabinets),
        "upstream_requests": counters.get("total", {}).get("requests", counters),
        "per_cabinet_by_queue": {
            name: {
                "pages": round(queue_value(SYNC_PAGES, name) / cabinets, 2),
                "rows": round(queue_value(SYNC_ROWS, name) / cabinets, 1),
            }
            for name in SYNCS
        },
    }


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.01
    print(json.dumps(asyncio.run(probe(n, s)), indent=2))
