"""Redis bounds: a hung, dead, restarted, refusing or half-open Redis costs a bounded time and
a bounded number of calls, on every client we make, and loses no job."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from redis._parsers import _AsyncHiredisParser
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from tests.support.relay import Relay
from tests.support.waiting import wait_for
from wbsync.errors import QueueError
from wbsync.jobs.handle import JobHandle
from wbsync.jobs.queue import SyncQueue
from wbsync.jobs.worker import SyncWorker
from wbsync.redis import keys, redis_bounds
from wbsync.redis.redis_server import EmbeddedRedis
from wbsync.redis.throughput import Throughput
from wbsync.system.procs import free_port

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


async def test_replies_are_parsed_in_c_by_hiredis(private_redis: EmbeddedRedis) -> None:
    # A dependency redis-py takes by itself when installed: a job's take returns a whole hash,
    # four times cheaper to parse in C (docs/scaling.md).
    client = redis_bounds.connect(private_redis.url)
    try:
        await client.hset("h", mapping={"a": "1", "b": "2"})
        assert await client.hgetall("h") == {"a": "1", "b": "2"}
        pool = client.connection_pool  # type: ignore[union-attr]
        conn = await pool.get_connection()
        try:
            assert isinstance(conn._parser, _AsyncHiredisParser)
        finally:
            await pool.release(conn)
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


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def _messages(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


async def test_a_run_whose_end_cannot_be_written_is_written_once_redis_answers(
    private_redis: EmbeddedRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """BullMQ's completion meets a Redis that went away: it is written once Redis answers
    (one attempt allowed, none spent), not failed with "Error 111 connecting" nor left active."""
    caplog.set_level(logging.WARNING, logger="wbsync.jobs.bullmq_worker")
    async with Relay("127.0.0.1", _port(private_redis.url)) as proxy:
        outcomes: list[str] = []

        async def process(_job: JobHandle) -> None:
            proxy.refuse()  # the run is done; its end meets a Redis that is gone

        queue = SyncQueue("qend", redis_url=private_redis.url, prefix="bounds:end", attempts=1)
        worker = SyncWorker(
            "qend",
            process,
            redis_url=proxy.redis_url,
            prefix="bounds:end",
            on_outcome=lambda o: outcomes.append(o.outcome),
        )
        await worker.start()
        try:
            await queue.enqueue("cab-1")
            await wait_for(lambda: _messages(caplog, "the end of its run could not be written"))
            proxy.heal()
            await wait_for(lambda: outcomes == ["completed"])
            counts = await queue.counts()
            assert counts["failed"] == counts["active"] == 0
        finally:
            await worker.close()
            await queue.close()


def _fetch_calls(stats: dict[str, dict[str, int]]) -> int:
    """Calls (run or refused) of the commands a worker fetches jobs with."""
    return sum(
        stats.get(f"cmdstat_{name}", {}).get(field, 0)
        for name in ("bzpopmin", "evalsha", "eval")
        for field in ("calls", "rejected_calls")
    )


async def test_a_worker_whose_fetches_fail_backs_off_instead_of_spinning(
    private_redis: EmbeddedRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """A Redis that refuses every write (a replica: READONLY, as a demoted master answers
    after a fail-over) is not a connection error to BullMQ, which tried again every 0.1 s per
    slot; the worker pauses (FailureBackoff) instead: at most a call per slot per
    RECONNECT_DELAY_S, fewer as the failures go on."""
    caplog.set_level(logging.WARNING, logger="wbsync.jobs.bullmq_worker")
    control = redis_bounds.connect(private_redis.url)
    worker = SyncWorker(
        "qspin", _never_run, redis_url=private_redis.url, prefix="bounds:spin", concurrency=2
    )
    await worker.start()
    try:
        await control.execute_command("REPLICAOF", "127.0.0.1", str(free_port()))
        await wait_for(lambda: _messages(caplog, "read only replica"))
        await control.config_resetstat()
        began = time.monotonic()
        await wait_for(lambda: time.monotonic() - began > WINDOW_S)
        calls = _fetch_calls(await control.info("commandstats"))
        # Each slot: one call at once, then one per pause of at least RECONNECT_DELAY_S.
        assert calls <= 2 * (1 + WINDOW_S / redis_bounds.RECONNECT_DELAY_S)
    finally:
        await control.execute_command("REPLICAOF", "NO", "ONE")
        await worker.close()
        await control.aclose()


WINDOW_S = 5.0


async def _never_run(_job: JobHandle) -> None:
    raise AssertionError("no job is added")


async def test_a_fetch_given_up_on_that_ran_late_puts_its_job_back(
    private_redis: EmbeddedRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """A half-open link: a job's completion, which takes the next job in the same call, times
    out on the client and runs on the server when the link heals; the next job, locked by a
    call nobody waits for, is put back at once, not left active until the stalled-job check (a
    2-minute lock here)."""
    caplog.set_level(logging.WARNING, logger="wbsync.jobs.bullmq_worker")
    async with Relay("127.0.0.1", _port(private_redis.url)) as proxy:
        done: list[str] = []

        async def process(job: JobHandle) -> None:
            done.append(job.cabinet)
            if len(done) == 2:  # the first run's end loaded BullMQ's script on the server
                proxy.hold()  # the run's end (and the next job's fetch) goes into a half-open link

        queue = SyncQueue("qlate", redis_url=private_redis.url, prefix="bounds:late")
        worker = SyncWorker(
            "qlate",
            process,
            redis_url=proxy.redis_url,
            prefix="bounds:late",
            lock_duration_ms=120_000,
        )
        await queue.enqueue_many(["cab-a", "cab-b", "cab-c"])
        await worker.start()
        try:
            await wait_for(lambda: _messages(caplog, "the end of its run could not be written"))
            proxy.heal()
            await wait_for(lambda: len(done) == 3)  # far within the lock's 120 s
            [line] = _messages(caplog, "taken by a fetch this worker had given up on")
            assert "job qlate.cab-c" in line and "put back" in line
            assert done == ["cab-a", "cab-b", "cab-c"]
        finally:
            await worker.close()
            await queue.close()


async def test_throughput_counts_against_a_refusing_redis_cost_a_bounded_number_of_calls(
    refusing_server: tuple[str, list[int]], caplog: pytest.LogCaptureFixture
) -> None:
    """Pages stored while Redis refuses: the first count's call fails (one WARNING), the next
    ones within the pause are dropped without a call, instead of one failing call (and one
    WARNING) per page."""
    url, accepted = refusing_server
    client = redis_bounds.connect(url)
    caplog.set_level(logging.WARNING, logger="wbsync.redis.throughput")
    try:
        throughput = Throughput(client, prefix="bounds:tp")
        began = time.monotonic()
        for _ in range(50):
            await throughput.record("q-refused", pages=1)
        took_s = time.monotonic() - began
    finally:
        await client.aclose()
    # At most one call (retried on fresh connections) per pause of RECONNECT_DELAY_S or more,
    # however slow the machine; before, 50 calls.
    calls = len(accepted) / (redis_bounds.RETRIES + 1)
    assert calls <= 1 + took_s / redis_bounds.RECONNECT_DELAY_S
    assert len(_messages(caplog, "throughput of q-refused not recorded")) == 1
