"""Stopping ``wbsync run`` with many cabinets: within the grace, nothing left active, resumable."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from pydantic import SecretStr

from tests.support.runtimes import runtime_starter
from tests.support.waiting import wait_for
from wbsync import clock
from wbsync.config import Settings
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes, running_emulator
from wbsync.errors import QueueError
from wbsync.redis_server import EmbeddedRedis
from wbsync.runtime import Runtime
from wbsync.syncs import SYNCS

T = TypeVar("T")

SCALE = 0.05  # WB's minute is 3 s: runs outlast the grace
SECRET = "stop-test-secret"
CABINETS = 200
GRACE_S = 1.0
# What a stop may take beyond the grace: cancelling, putting jobs back, closing connections.
STOP_BOUND_S = 30.0  # generous for a loaded machine; before, a stop took 84-120 s


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        time_scale=SCALE, anchor_date=clock.today(), sizes=SellerSizes(report_rows=20)
    )
    async with running_emulator(config) as emu:
        yield emu


@pytest.fixture
async def runtime(
    tmp_path: Path, redis_url: str, prefix: str, emulator: Emulator
) -> AsyncIterator[Runtime]:
    settings = Settings(
        redis_url=redis_url,
        redis_prefix=prefix,
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'stop.db'}",
        secret_key=SecretStr(SECRET),
        wb_base_url=emulator.base_url,
        time_scale=SCALE,
    )
    async with runtime_starter(redis_url, prefix) as start:
        yield await start(settings)


async def _read(read: Callable[[], Awaitable[T]], timeout_s: float = 30.0) -> T:
    """``read()``, asked again while the test's Redis is too busy to answer (a loaded machine's
    private server can take longer than the 2 s connect bound); fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await read()
        except QueueError:
            assert time.monotonic() < deadline, "the test's Redis did not answer in time"
            await asyncio.sleep(0.1)


async def _counts(runtime: Runtime) -> dict[str, int]:
    """Jobs per state over every queue (nine round trips: polled every 50 ms, not every 5 ms,
    so the polling does not starve the emulator this process serves)."""
    await asyncio.sleep(0.05)
    total: dict[str, int] = {}
    for name in SYNCS:
        for state, n in (await _read(runtime.queue(name).counts)).items():
            total[state] = total.get(state, 0) + n
    return total


async def _run(runtime: Runtime, emulator: Emulator, grace_s: float) -> asyncio.subprocess.Process:
    s = runtime.settings
    env = {
        **os.environ,
        "WBSYNC_REDIS_URL": runtime.redis_url,
        "WBSYNC_REDIS_PREFIX": s.redis_prefix,
        "WBSYNC_DATABASE_URL": s.database_url,
        "WBSYNC_SECRET_KEY": SECRET,
        "WBSYNC_WB_BASE_URL": emulator.base_url,
        "WBSYNC_TIME_SCALE": str(SCALE),
        "WBSYNC_SHUTDOWN_GRACE_S": str(grace_s),
        # Sleep in place rather than defer, so runs hold their slots when the stop comes.
        "WBSYNC_DEFER_THRESHOLD_MS": "1000000",
    }
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "wbsync", "run", env=env, stderr=asyncio.subprocess.PIPE
    )


async def _serving(process: asyncio.subprocess.Process) -> None:
    """Wait until the process logs that it serves its queues (each line read is JSON too)."""
    assert process.stderr is not None
    while True:
        line = await asyncio.wait_for(process.stderr.readline(), 60)
        assert line, "the process ended before serving"
        if "SIGINT or SIGTERM stops" in json.loads(line)["msg"]:
            return


async def _stopped(process: asyncio.subprocess.Process, bound_s: float) -> list[str]:
    """Wait (bounded) for the process to exit 0; its stderr lines, each a JSON log line."""
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), bound_s)
    except TimeoutError:
        process.kill()
        _, stderr = await process.communicate()
        raise AssertionError(stderr.decode()[-3000:]) from None
    lines = stderr.decode().splitlines()
    assert process.returncode == 0, lines[-5:]
    for line in lines:
        json.loads(line)  # nothing but JSON log lines: no traceback, no "Exception ignored"
    return lines


async def test_sigterm_stops_a_busy_run_within_the_grace_and_leaves_nothing_active(
    runtime: Runtime, emulator: Emulator
) -> None:
    for i in range(CABINETS):
        seller = str(uuid.UUID(int=0x5709_0000 + i))
        await runtime.store.cabinets.add(f"stop-{i}", emulator.token(seller), seller)

    # A single SIGTERM while workers are busy (and the fan-out likely still going).
    first = await _run(runtime, emulator, GRACE_S)
    await wait_for(lambda: _has_active(runtime), timeout_s=60)
    first.send_signal(signal.SIGTERM)
    began = time.monotonic()
    lines = await _stopped(first, GRACE_S + STOP_BOUND_S)
    assert time.monotonic() - began < GRACE_S + STOP_BOUND_S
    after_first = await _counts(runtime)
    assert after_first["active"] == 0 and after_first["failed"] == 0
    put_back = after_first["delayed"]  # no deferrals here: every delayed job was put back
    assert put_back > 0
    assert any("cancelling the jobs still running" in json.loads(x)["msg"] for x in lines)
    delayed = {q: (await _read(runtime.queue(q).counts))["delayed"] for q in SYNCS}
    busiest = max(delayed, key=delayed.__getitem__)
    for view in (await _read(runtime.queue(busiest).live_jobs)).values():
        assert view.attempts_made == 0  # a stop spends no attempt

    # The next run takes the put-back jobs (due now); a second signal cuts a long grace short
    # (SIGTERM then SIGINT: two different signals are never merged into one).
    second = await _run(runtime, emulator, 600.0)
    await _serving(second)
    await wait_for(lambda: _delayed_below(runtime, put_back), timeout_s=60)
    second.send_signal(signal.SIGTERM)
    second.send_signal(signal.SIGINT)
    began = time.monotonic()
    await _stopped(second, STOP_BOUND_S)
    assert time.monotonic() - began < STOP_BOUND_S  # far below the 600 s grace
    after_second = await _counts(runtime)
    assert after_second["active"] == 0 and after_second["failed"] == 0


async def _has_active(runtime: Runtime) -> bool:
    return (await _counts(runtime))["active"] > 0


async def _delayed_below(runtime: Runtime, count: int) -> bool:
    return (await _counts(runtime))["delayed"] < count


def _children(pid: int) -> list[int]:
    found = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


def _redis_children(pid: int) -> list[int]:
    return [p for p in _children(pid) if b"redis" in Path(f"/proc/{p}/cmdline").read_bytes()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped) is not alive either.
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def test_ctrl_c_ends_the_demo_promptly_and_stops_its_private_redis(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "WBSYNC_REDIS_URL"}  # private Redis
    # Its own session, as a terminal's foreground job: Ctrl-C is SIGINT to the whole group.
    demo = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "wbsync",
        "demo",
        "--json",
        "--cabinets",
        "2",
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    log = tmp_path / "wbsync-demo.log"
    # Mid-run: its Redis started and a first sync done (the demo's rate-limited syncs go on for
    # seconds after; its log has a line per run, not per request).
    await wait_for(
        lambda: log.exists() and b'"wbsync.syncs.runner"' in log.read_bytes(), timeout_s=60
    )
    [redis] = _redis_children(demo.pid)
    os.killpg(demo.pid, signal.SIGINT)
    began = time.monotonic()
    _, stderr = await asyncio.wait_for(demo.communicate(), STOP_BOUND_S)
    assert time.monotonic() - began < STOP_BOUND_S
    assert demo.returncode == 130, stderr.decode()[-2000:]
    assert not _alive(redis)


REDIS_GONE_GRACE_S = 30.0


async def test_sigterm_with_redis_gone_stops_without_waiting_for_the_grace(tmp_path: Path) -> None:
    """Redis killed under an idle ``wbsync run``: a SIGTERM stops it well within its grace (its
    workers fetch nothing once stopping; BullMQ retried the failed fetches at once, spinning,
    until the grace was over). Nothing runs, so nothing justifies waiting for the grace."""
    with EmbeddedRedis() as redis:
        env = {
            **os.environ,
            "WBSYNC_REDIS_URL": redis.url,
            "WBSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'gone.db'}",
            "WBSYNC_SECRET_KEY": SECRET,
            "WBSYNC_SHUTDOWN_GRACE_S": str(REDIS_GONE_GRACE_S),
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "wbsync", "run", env=env, stderr=asyncio.subprocess.PIPE
        )
        await _serving(process)
        os.kill(redis.pid, signal.SIGKILL)
    process.send_signal(signal.SIGTERM)
    began = time.monotonic()
    await _stopped(process, REDIS_GONE_GRACE_S)
    assert time.monotonic() - began < REDIS_GONE_GRACE_S
