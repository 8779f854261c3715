"""Redis bounds: a hung, dead or restarted Redis costs a bounded time, on every client we make."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tests.waiting import wait_for
from wbsync import keys, redis_bounds
from wbsync.errors import QueueError
from wbsync.jobs.queue import JobHandle, SyncQueue, SyncWorker
from wbsync.redis_server import EmbeddedRedis

# Generous: the bound is what matters, not how close to it a loaded machine gets.
SLACK_S = 5.0


@pytest.fixture
def private_redis() -> Iterator[EmbeddedRedis]:
    """A redis-server of this test's own, which it may pause, kill or restart."""
    with EmbeddedRedis() as server:
        try:
            yield server
        finally:
            os.kill(server.pid, signal.SIGCONT)


@pytest.fixture
async def refusing_server() -> AsyncIterator[tuple[str, list[int]]]:
    """A TCP server that accepts and at once drops every connection; counts the connections."""
    accepted: list[int] = []

    async def drop(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        writer.close()

    server = await asyncio.start_server(drop, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"redis://127.0.0.1:{port}/0", accepted
    finally:
        server.close()
        await server.wait_closed()


async def test_a_hung_redis_fails_commands_after_the_command_timeout(
    private_redis: EmbeddedRedis,
) -> None:
    """Both our own client and BullMQ's (through the queue) give up after the timeout."""
    client = redis_bounds.connect(private_redis.url)
    queue = SyncQueue("qbound", redis_url=private_redis.url, prefix="bounds:q")
    try:
        await client.ping()
        await queue.enqueue("cab-1")
        os.kill(private_redis.pid, signal.SIGSTOP)
        began = time.monotonic()
        bound = redis_bounds.COMMAND_TIMEOUT_S + SLACK_S
        get, enqueue = await asyncio.gather(
            asyncio.wait_for(client.get("k"), bound),
            asyncio.wait_for(queue.enqueue("cab-2"), bound),
            return_exceptions=True,
        )
        assert isinstance(get, RedisTimeoutError)
        assert isinstance(enqueue, QueueError)
        # A timeout is not retried: one timeout, not RETRIES + 1 of them.
        assert time.monotonic() - began < 2 * redis_bounds.COMMAND_TIMEOUT_S
    finally:
        os.kill(private_redis.pid, signal.SIGCONT)
        await client.aclose()
        await queue.close()


async def test_a_dropped_connection_is_retried_a_bounded_number_of_times(
    refusing_server: tuple[str, list[int]],
) -> None:
    url, accepted = refusing_server
    client = redis_bounds.connect(url)
    try:
        with pytest.raises(RedisConnectionError):
            await asyncio.wait_for(client.ping(), SLACK_S)
    finally:
        await client.aclose()
    assert len(accepted) == redis_bounds.RETRIES + 1


async def test_a_restarted_redis_is_used_again_without_an_error() -> None:
    with EmbeddedRedis() as first:
        port = int(first.url.rsplit(":", 1)[1].split("/")[0])
        client = redis_bounds.connect(first.url)
        await client.set("k", "before")
    try:
        # The pooled connection is stale now; the command retries on a fresh one.
        with EmbeddedRedis(port=port):
            assert await client.set("k", "after")
            assert await client.get("k") == "after"
    finally:
        await client.aclose()


async def test_an_idle_worker_never_times_out_its_wait_for_jobs(
    private_redis: EmbeddedRedis,
) -> None:
    """The blocking wait is capped below the command timeout: idling longer than the timeout
    costs no client-side timeout (each would drop the worker's connection)."""
    done = asyncio.Event()

    async def process(_job: JobHandle) -> None:
        done.set()

    control = redis_bounds.connect(private_redis.url)

    async def worker_connections() -> set[str]:
        clients = await control.client_list()
        return {
            c["id"]
            for c in clients
            if c["name"] == keys.bullmq_worker_connection_name("bounds:q", "qidle")
        }

    queue = SyncQueue("qidle", redis_url=private_redis.url, prefix="bounds:q")
    worker = SyncWorker("qidle", process, redis_url=private_redis.url, prefix="bounds:q")
    try:
        await queue.enqueue("cab-first")
        await worker.start()
        await asyncio.wait_for(done.wait(), SLACK_S)  # the worker's connections are all open
        done.clear()
        connections = await worker_connections()
        assert connections
        began = time.monotonic()
        await wait_for(lambda: time.monotonic() - began > redis_bounds.COMMAND_TIMEOUT_S + 1)
        assert await worker_connections() == connections
        await queue.enqueue("cab-idle")
        await asyncio.wait_for(done.wait(), SLACK_S)
    finally:
        await worker.close()
        await queue.close()
        await control.aclose()
