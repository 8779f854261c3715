"""Children die with their parent: a benchmark killed by a timeout leaves nothing running; and
the benchmarks' wait for their API process says why it ended."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

import pytest
from wbsync_bench.status import _served

from tests.support.waiting import wait_for
from wbsync.system import procs

# What `wbsync bench scaleout` starts, started the way it starts them: its private Redis, the
# emulator process and a `wbsync run` worker process (on a SQLite file), all up and listening.
PARENT = """
import asyncio, json, sys
from pathlib import Path
from wbsync.redis import keys
from wbsync_bench.processes import RedisUnderTest, WorkerProcesses
from wbsync_bench.upstream import EmulatorProcess
from wbsync.emulator import EmulatorConfig
from wbsync.redis.redis_server import EmbeddedRedis

async def main(tmp: Path) -> None:
    with EmbeddedRedis() as redis:
        async with EmulatorProcess(EmulatorConfig()) as emu:
            under_test = RedisUnderTest(redis.url, [redis.url])
            run = WorkerProcesses(emu, under_test, time_scale=0.001, concurrency=5)
            settings = run.settings(f"sqlite+aiosqlite:///{tmp / 'bench.db'}")
            run.spawn(settings, 1, tmp)
            await run.until_listening(keys.queue_prefix(settings.redis_prefix))
            print(json.dumps([redis.pid, emu.pid, *(p.pid for p in run.procs)]), flush=True)
            await asyncio.sleep(600)

asyncio.run(main(Path(sys.argv[1])))
"""
CHILDREN_STOP_S = 30.0  # a `wbsync run` stops within its shutdown grace; the rest at once


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie waits for init, which may be slow to reap)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.long
@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
async def test_a_killed_benchmark_takes_its_children_with_it(tmp_path: Path) -> None:
    """SIGKILL (what a timeout sends) gives the parent no chance to stop anything: its Redis,
    emulator and `wbsync run` children must stop by themselves."""
    with (tmp_path / "parent.log").open("wb") as log:
        parent = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            PARENT,
            str(tmp_path),
            stdout=asyncio.subprocess.PIPE,
            stderr=log,
            env={k: v for k, v in os.environ.items() if not k.startswith("WBSYNC_")},
        )
    children: list[int] = []
    try:
        assert parent.stdout is not None
        # Until the children are up (or the parent died: then the line is empty).
        line = await asyncio.wait_for(parent.stdout.readline(), timeout=180)
        assert line, (tmp_path / "parent.log").read_text()[-2000:]
        children = json.loads(line)
        assert len(children) == 3 and all(_running(pid) for pid in children)

        parent.send_signal(signal.SIGKILL)
        await asyncio.wait_for(parent.wait(), timeout=10)
        await wait_for(lambda: not any(_running(pid) for pid in children), CHILDREN_STOP_S)
    finally:
        if parent.returncode is None:
            parent.kill()
            await parent.wait()
        for pid in children:  # what survived (the fault under test) is ours to stop
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


def _exits_saying(message: str, stderr: IO[bytes]) -> subprocess.Popen[bytes]:
    code = f"import sys; sys.stderr.write({message!r}); sys.exit(3)"
    return subprocess.Popen([sys.executable, "-c", code], stderr=stderr)


async def test_an_api_that_exits_before_it_serves_says_why() -> None:
    """The benchmarks' wait for their API process ends with what it wrote, not just its status."""
    with tempfile.TemporaryFile() as log:
        child = _exits_saying("address already in use", log)
        with pytest.raises(RuntimeError, match="exited with 3: address already in use"):
            await _served(procs.free_port(), child, log)
