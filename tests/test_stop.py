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
from wbsync.config import Settings
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes, running_emulator
from wbsync.errors import QueueError
from wbsync.jobs.views import JobView
from wbsync.redis.redis_server import EmbeddedRedis
from wbsync.shared.runtime import Runtime
from wbsync.syncs import SYNCS
from wbsync.system import clock

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
        time_scale=SCALE, anchor_date=clock.wb_today(), sizes=SellerSizes(report_rows=20)
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


class _Run:
    """A ``wbsync run`` process whose stderr (JSON log lines) is read as it comes: a pipe left
    unread fills (64 KiB, a few hundred lines) and stops the process at its next log line."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._serving = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, env: dict[str, str]) -> _Run:
        return cls(
            await asyncio.create_subprocess_exec(
                sys.executable, "-m", "wbsync", "run", env=env, stderr=asyncio.subprocess.PIPE
            )
        )

    async def _read(self) -> None:
        assert self.process.stderr is not None
        async for line in self.process.stderr:
            self.lines.append(line.decode())
            if b"SIGINT or SIGTERM stops" in line:  # each line is checked as JSON at the end
                self._serving.set()

    async def serving(self) -> None:
        """Until the process logs that it serves its queues (fails if it ends first)."""
        serving = asyncio.ensure_future(self._serving.wait())
        await asyncio.wait({serving, self._reader}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        serving.cancel()
        assert self._serving.is_set(), f"the process did not serve: {self.lines[-5:]}"

    async def stopped(self, bound_s: float) -> list[str]:
        """Wait (bounded) for the process to exit 0; its stderr lines, each a JSON log line."""
        try:
            await asyncio.wait_for(self.process.wait(), bound_s)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
            raise AssertionError("".join(self.lines)[-3000:]) from None
        finally:
            await self._reader
        assert self.process.returncode == 0, self.lines[-5:]
        for line in self.lines:
            json.loads(line)  # nothing but JSON log lines: no traceback, no "Exception ignored"
        return self.lines

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    async def close(self) -> None:
        """Kill the process if it still runs (a failed test) and stop reading."""
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        await self._reader


async def _run(runtime: Runtime, emulator: Emulator, grace_s: float) -> _Run:
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
    return await _Run.start(env)


async def test_sigterm_stops_a_busy_run_within_the_grace_and_leaves_nothing_active(
    runtime: Runtime, emulator: Emulator
) -> None:
    for i in range(CABINETS):
        seller = str(uuid.UUID(int=0x5709_0000 + i))
        await runtime.store.cabinets.add(f"stop-{i}", emulator.token(seller), seller)

    # A single SIGTERM while a run sleeps through WB's window (and the fan-out likely still
    # going): it outlasts the grace, whatever else the workers run then.
    first = await _run(runtime, emulator, GRACE_S)
    try:
        await wait_for(lambda: _a_run_in_wbs_window(runtime), timeout_s=60)
        first.signal(signal.SIGTERM)
        began = time.monotonic()
        lines = await first.stopped(GRACE_S + STOP_BOUND_S)
        assert time.monotonic() - began < GRACE_S + STOP_BOUND_S
    finally:
        await first.close()
    after_first = await _counts(runtime)
    assert after_first["active"] == 0 and after_first["failed"] == 0
    put_back = after_first["delayed"]  # no deferrals here: every delayed job was put back
    assert put_back > 0
    assert any("cancelling the jobs still running" in json.loads(x)["msg"] for x in lines)
    put_back_jobs = await _delayed_jobs(runtime)
    assert sum(map(len, put_back_jobs.values())) == put_back
    for views in put_back_jobs.values():
        assert all(view.attempts_made == 0 for view in views.values())  # no attempt spent

    # The next run takes the put-back jobs (due now); a second signal cuts a long grace short
    # (SIGTERM then SIGINT: two different signals are never merged into one).
    second = await _run(runtime, emulator, 600.0)
    try:
        await second.serving()
        # A put-back job taken: its view changes (the fan-out of this run adds delayed jobs of
        # its own, so the delayed count alone can stay up on a slow machine).
        await wait_for(lambda: _one_taken(runtime, put_back_jobs), timeout_s=60)
        second.signal(signal.SIGTERM)
        second.signal(signal.SIGINT)
        began = time.monotonic()
        await second.stopped(STOP_BOUND_S)
        assert time.monotonic() - began < STOP_BOUND_S  # far below the 600 s grace
    finally:
        await second.close()
    after_second = await _counts(runtime)
    assert after_second["active"] == 0 and after_second["failed"] == 0


async def _a_run_in_wbs_window(runtime: Runtime) -> bool:
    """Whether a finance run is between its pages: its first page stored (its cursor saved in
    the job), its next request waiting in place for WB's one request a minute (3 s here), so
    it is still running a grace later. Polled every 50 ms, as ``_counts``."""
    await asyncio.sleep(0.05)
    live = await _read(runtime.queue("rnp-finance-sync").live_jobs)
    return any(view.state == "active" and view.data.get("cursor") for view in live.values())


async def _delayed_jobs(runtime: Runtime) -> dict[str, dict[str, JobView]]:
    """The delayed jobs of every queue, by cabinet."""
    jobs = {}
    for name in SYNCS:
        live = await _read(runtime.queue(name).live_jobs)
        jobs[name] = {cabinet: v for cabinet, v in live.items() if v.state == "delayed"}
    return jobs


async def _one_taken(runtime: Runtime, delayed: dict[str, dict[str, JobView]]) -> bool:
    """Whether one of the ``delayed`` jobs was taken since (its stored view changed)."""
    await asyncio.sleep(0.05)  # polled every 50 ms, as ``_counts``
    for name, views in delayed.items():
        if not views:
            continue
        live = await _read(runtime.queue(name).live_jobs)
        if any(live.get(cabinet) != view for cabinet, view in views.items()):
            return True
    return False


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
        # The most cabinets the demo takes: its one slot a queue leaves ~10 s of runs after the
        # first ends (4 s with 2 cabinets, which a loaded machine's test noticed too late), and
        # the more the machine is loaded, the longer they last.
        "--cabinets",
        "50",
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
        run = await _Run.start(env)
        try:
            await run.serving()
            os.kill(redis.pid, signal.SIGKILL)
            run.signal(signal.SIGTERM)
            began = time.monotonic()
            await run.stopped(REDIS_GONE_GRACE_S)
            assert time.monotonic() - began < REDIS_GONE_GRACE_S
        finally:
            await run.close()
