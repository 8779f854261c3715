"""The page benchmark's bare pipeline: a sync's recorded run, replayed with nothing around it.

A recording is one run of a sync made in the benchmark's process with a WB client whose HTTP
client keeps every request (method, URL, token, body) and every page's rows. A bare run replays
those requests: the request, the JSON parse of the reply, one ``EVALSHA`` of the bucket script
per request, and per page one batched upsert of the page's rows into a ``jsonb`` (PostgreSQL,
asyncpg directly) or JSON-text (SQLite, aiosqlite) table keyed like wbsync's. Variants: HTTP by
httpx or aiohttp, JSON (the parse and the rows' encoding) by the standard ``json`` or orjson;
each variant keeps one HTTP client, one database connection and one Redis client, as a lean
service would. ``wbsync_bench.page`` measures wbsync against it.

The floor (``FLOOR``) is the fastest pair (aiohttp, orjson) run the way the design runs every
sync: one job per (cabinet, sync) run, taken and finished by wbsync's job layer (``SyncWorker``
over BullMQ, as many jobs at once as wbsync's workers), the run's cursor saved in the job's data
after each page. What wbsync costs above the floor is its own work (the sync runner, the store,
the WB client and limiter, the run's bookkeeping); what the floor costs above the bare pipeline
is the job per run that the design requires.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import aiohttp
import aiosqlite
import asyncpg
import httpx
import orjson
from redis.asyncio import Redis
from sqlalchemy.engine import make_url
from yarl import URL

from wbsync.errors import ConfigError
from wbsync.jobs.handle import JobHandle
from wbsync.jobs.model import Outcome
from wbsync.jobs.queue import SyncQueue
from wbsync.jobs.worker import SyncWorker
from wbsync.ratelimit import BucketScope, Limit
from wbsync.redis import keys
from wbsync.shared.runtime import Runtime
from wbsync.store.cabinets import Cabinet
from wbsync.store.changes import ChangeEvent
from wbsync.syncs import Sync, SyncInput, SyncPage, run_sync
from wbsync.system.clock import wb_today
from wbsync.wb.client import WbClient
from wbsync.wb.http import HttpPool, HttpReply, query

HTTP_LIBRARIES = ("httpx", "aiohttp")
JSON_LIBRARIES = ("json", "orjson")
BARE_VARIANTS = tuple(f"{h}+{j}" for h in HTTP_LIBRARIES for j in JSON_LIBRARIES)
FLOOR = "floor"
"""The fastest pair (aiohttp+orjson) in a job per run, its cursor saved after each page."""
_FLOOR_PAIR = "aiohttp+orjson"
_FLOOR_QUEUE = "bench-floor"
_FLOOR_PREFIX = "wbsync-bench-floor"
_FLOOR_TIMEOUT_S = 120.0
_FLOOR_CLOSE_GRACE_S = 5.0
_BARE_TABLE = "bench_page_rows"
_BUCKET_LUA = resources.files("wbsync.ratelimit").joinpath("bucket.lua").read_text("utf-8")
#: The bare pipeline's bucket: WB's most common limit shape; only the call's cost matters.
_BARE_LIMIT = Limit(period_s=60.0, limit=300, burst=5)


# --- a recorded run of a sync: what the bare pipeline replays --------------------------------


@dataclass
class _Request:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Recording:
    """One run of a sync as the bare pipeline replays it: its requests and its pages' rows."""

    requests: list[_Request] = field(default_factory=list)
    pages: list[tuple[str, list[Mapping[str, Any]]]] = field(default_factory=list)

    @property
    def rows(self) -> int:
        """Rows over every page."""
        return sum(len(rows) for _, rows in self.pages)


async def record(runtime: Runtime, cabinet: Cabinet, sync: Sync) -> Recording:
    """Run ``sync`` for ``cabinet`` here, keeping every request sent and every page stored."""
    out = Recording()

    async def on_page(page: SyncPage, _event: ChangeEvent | None) -> None:
        if page.dataset is not None:
            out.pages.append((page.dataset, list(page.rows)))

    async with _RecordingPool(out) as http:
        client = WbClient(
            cabinet.name,
            cabinet.token(),
            runtime.limiter,
            options=runtime.client_options,
            http=http,
        )
        async with client:
            inp = SyncInput(
                client=client,
                store=runtime.store,
                cabinet_id=cabinet.id,
                cursor=None,
                today=wb_today(),
            )
            await run_sync(sync, inp, on_page=on_page)
    return out


class _RecordingPool(HttpPool):
    """wbsync's HTTP pool, keeping every request that got a reply as the pool sent it: the URL
    with its query as aiohttp builds it, the body's bytes, the token and the content type."""

    def __init__(self, out: Recording) -> None:
        super().__init__()
        self._out = out

    async def exchange(
        self,
        method: str,
        url: str,
        *,
        name: str,
        params: Mapping[str, Any] | None,
        body: Any,
        headers: dict[str, str],
        deadline_s: float,
        read_timeout_s: float,
        max_body_bytes: int,
    ) -> HttpReply:
        reply = await super().exchange(
            method,
            url,
            name=name,
            params=params,
            body=body,
            headers=headers,
            deadline_s=deadline_s,
            read_timeout_s=read_timeout_s,
            max_body_bytes=max_body_bytes,
        )
        pairs = query(params)
        sent = URL(url).extend_query(pairs) if pairs else URL(url)
        kept = {k: v for k, v in headers.items() if k.lower() == "authorization"}
        data = b""
        if body is not None:
            data = orjson.dumps(body)
            kept["Content-Type"] = "application/json"
        self._out.requests.append(_Request(method, str(sent), kept, data))
        return reply


# --- the bare pipeline -------------------------------------------------------------------------


Send = Callable[[_Request], Awaitable[bytes]]
Upsert = Callable[[int, str, list[Mapping[str, Any]], Callable[[Any], str]], Awaitable[None]]


class Bare:
    """The bare pipeline's clients: both HTTP libraries, one database connection, Redis."""

    def __init__(self, redis_url: str, database_url: str, *, time_scale: float) -> None:
        self._redis_url, self._database_url = redis_url, database_url
        self._time_scale = time_scale
        self._stack = contextlib.AsyncExitStack()
        self._next_cabinet = 0
        self.send: dict[str, Send] = {}
        self.upsert: Upsert | None = None
        self._redis: Redis | None = None
        self._sha = ""
        self._db_lock = asyncio.Lock()

    async def __aenter__(self) -> Bare:
        http = await self._stack.enter_async_context(httpx.AsyncClient(timeout=30.0))
        session = await self._stack.enter_async_context(aiohttp.ClientSession())

        async def by_httpx(req: _Request) -> bytes:
            reply = await http.request(req.method, req.url, headers=req.headers, content=req.body)
            return reply.content

        async def by_aiohttp(req: _Request) -> bytes:
            async with session.request(
                req.method, req.url, headers=req.headers, data=req.body or None
            ) as reply:
                return await reply.read()

        self.send = {"httpx": by_httpx, "aiohttp": by_aiohttp}
        self._redis = Redis.from_url(self._redis_url)
        self._stack.push_async_callback(self._redis.aclose)
        self._sha = await self._redis.script_load(_BUCKET_LUA)
        url = make_url(self._database_url)
        if url.get_backend_name() == "postgresql":
            self.upsert = await self._asyncpg(url.set(drivername="postgresql"))
        else:
            self.upsert = await self._aiosqlite(url.database or "")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def _asyncpg(self, url: Any) -> Upsert:
        conn = await asyncpg.connect(url.render_as_string(hide_password=False))
        self._stack.push_async_callback(conn.close)
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {_BARE_TABLE} (cabinet_id bigint, dataset text, "
            "key integer, data jsonb NOT NULL, PRIMARY KEY (cabinet_id, dataset, key))"
        )
        sql = (
            f"INSERT INTO {_BARE_TABLE} VALUES ($1, $2, $3, $4::jsonb) ON CONFLICT "
            "(cabinet_id, dataset, key) DO UPDATE SET data = excluded.data"
        )

        async def upsert(
            cabinet: int, dataset: str, rows: list[Mapping[str, Any]], dumps: Callable[[Any], str]
        ) -> None:
            async with self._db_lock:  # the floor's runs share the one connection
                await conn.executemany(
                    sql, [(cabinet, dataset, i, dumps(r)) for i, r in enumerate(rows)]
                )

        return upsert

    async def _aiosqlite(self, path: str) -> Upsert:
        conn = await self._stack.enter_async_context(aiosqlite.connect(path))
        await conn.execute(
            f"CREATE TABLE IF NOT EXISTS {_BARE_TABLE} (cabinet_id integer, dataset text, "
            "key integer, data json NOT NULL, PRIMARY KEY (cabinet_id, dataset, key))"
        )
        await conn.commit()
        sql = (
            f"INSERT INTO {_BARE_TABLE} VALUES (?, ?, ?, ?) ON CONFLICT "
            "(cabinet_id, dataset, key) DO UPDATE SET data = excluded.data"
        )

        async def upsert(
            cabinet: int, dataset: str, rows: list[Mapping[str, Any]], dumps: Callable[[Any], str]
        ) -> None:
            async with self._db_lock:  # the floor's runs share the one connection
                await conn.executemany(
                    sql, [(cabinet, dataset, i, dumps(r)) for i, r in enumerate(rows)]
                )
                await conn.commit()

        return upsert

    async def run(self, variant: str, recording: Recording, repeats: int) -> float:
        """CPU seconds of this process for ``repeats`` bare runs of ``recording``."""
        replay = self._replayer(variant, recording)
        started = time.process_time()
        for _ in range(repeats):
            self._next_cabinet += 1
            await replay(self._next_cabinet, None)
        return time.process_time() - started

    async def run_floor(self, recording: Recording, repeats: int, *, concurrency: int) -> float:
        """CPU seconds of this process for ``repeats`` runs of ``recording`` by the floor: each
        a job of a ``SyncWorker`` running ``concurrency`` at once, from the worker's start to
        the last job's completion (the jobs are added before, as a producer elsewhere would)."""
        replay = self._replayer(_FLOOR_PAIR, recording)
        ended: list[Outcome] = []
        all_done = asyncio.Event()

        def on_outcome(outcome: Outcome) -> None:
            ended.append(outcome)
            if len(ended) == repeats:
                all_done.set()

        async def process(job: JobHandle) -> None:
            await replay(int(job.cabinet), job)

        first = self._next_cabinet + 1
        self._next_cabinet += repeats
        # One attempt: a run that fails is reported, not retried into the figure.
        queue = SyncQueue(_FLOOR_QUEUE, redis_url=self._redis_url, prefix=_FLOOR_PREFIX, attempts=1)
        worker = SyncWorker(
            _FLOOR_QUEUE,
            process,
            redis_url=self._redis_url,
            prefix=_FLOOR_PREFIX,
            concurrency=concurrency,
            on_outcome=on_outcome,
        )
        try:
            await queue.enqueue_many([str(c) for c in range(first, first + repeats)])
            started = time.process_time()
            await worker.start()
            await asyncio.wait_for(all_done.wait(), _FLOOR_TIMEOUT_S)
            cpu = time.process_time() - started
        finally:
            # Every job has ended by now, unless the wait timed out: a run still going is cut
            # after the grace.
            await worker.close(grace_s=_FLOOR_CLOSE_GRACE_S)
            await queue.close()
        not_completed = [o for o in ended if o.outcome != "completed"]
        if not_completed:
            first_end = not_completed[0]
            raise ConfigError(f"{len(not_completed)} floor jobs did not complete: {first_end}")
        return cpu

    def _replayer(
        self, variant: str, recording: Recording
    ) -> Callable[[int, JobHandle | None], Awaitable[None]]:
        """One bare run of ``recording`` for a cabinet number by ``variant``; given a job, the
        run saves its cursor (the page's number) in the job after each page."""
        http_name, json_name = variant.split("+")
        send = self.send[http_name]
        loads: Callable[[bytes], Any] = orjson.loads if json_name == "orjson" else json.loads
        dumps = _orjson_dumps if json_name == "orjson" else _json_dumps
        upsert, redis = self.upsert, self._redis
        assert upsert is not None and redis is not None  # entered
        args: list[str | int] = [
            1,  # cost
            "0.0",  # penalty_ms
            -1,  # level
            repr(3_600_000.0 * self._time_scale),  # max_wait_ms: WB's longest period, scaled
            repr(_BARE_LIMIT.interval_ms * self._time_scale),
            _BARE_LIMIT.burst,
            "0.0",  # margin_ms
        ]

        async def replay(cabinet: int, job: JobHandle | None) -> None:
            scope = BucketScope(cabinet=f"bare-{cabinet}", group="bench", limit=_BARE_LIMIT)
            bucket = [
                keys.bucket_key("wbsync-bench", scope),
                keys.learned_key("wbsync-bench", scope),
            ]
            for req in recording.requests:
                await redis.evalsha(self._sha, 2, *bucket, *args)
                body = await send(req)
                if body:
                    loads(body)
            for number, (dataset, rows) in enumerate(recording.pages):
                if rows:
                    await upsert(cabinet, dataset, rows, dumps)
                if job is not None:
                    await job.save_cursor(number)

        return replay


def _json_dumps(row: Any) -> str:
    return json.dumps(row, default=str)


def _orjson_dumps(row: Any) -> str:
    return orjson.dumps(row, default=str).decode()
