"""Children die with their parent: a benchmark killed by a timeout leaves nothing running."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.support.waiting import wait_for
from wbsync.bench.status import _served
from wbsync.system import procs

# What `wbsync bench scaleout` starts, started the way it starts them: its private Redis, the
# emulator process and a `wbsync run` worker process (on a SQLite file), all up and listening.
PARENT = """
import asyncio, json, sys
from pathlib import Path
from wbsync.redis import keys
from wbsync.bench.processes import RedisUnderTest, WorkerProcesses
from wbsync.bench.upstream import EmulatorProcess
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


class _Picks:
    """A stand-in for ``free_port``'s random source that picks the given ports in turn."""

    def __init__(self, *ports: int) -> None:
        self._ports = list(ports)
        self.calls = 0

    def randrange(self, start: int, stop: int) -> int:
        self.calls += 1
        port = self._ports.pop(0) if len(self._ports) > 1 else self._ports[0]
        assert start <= port < stop, f"{port} is not in [{start}, {stop})"
        return port


def _ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


@pytest.fixture
def clean_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procs, "_GIVEN", deque(maxlen=procs._GIVEN.maxlen))


@pytest.mark.skipif(not Path("/proc/sys/net/ipv4").is_dir(), reason="Linux's port ranges")
def test_a_free_port_is_below_the_ephemeral_range_bindable_and_not_given_twice(
    clean_picks: None,
) -> None:
    """Outgoing connections take their local ports from the ephemeral range: a port picked
    there could be taken before the server binds it."""
    ports = [procs.free_port() for _ in range(300)]
    assert all(procs._PORTS_FROM <= p < _ephemeral_low() for p in ports)
    assert len(set(ports[-256:])) == 256  # none of its last 256 picks given again
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))  # nothing took it


@pytest.fixture
def bound_port() -> Iterator[int]:
    """A port of the kernel's ephemeral range, bound for the test's length."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        yield taken.getsockname()[1]


def test_a_bound_port_or_one_already_given_is_passed_over(
    monkeypatch: pytest.MonkeyPatch, clean_picks: None, bound_port: int
) -> None:
    low = procs._ephemeral_low()
    unbound = (p for p in range(low - 1, procs._PORTS_FROM, -1) if procs._bindable(p))
    given, free = next(unbound), next(unbound)
    monkeypatch.setattr(procs, "_ephemeral_low", lambda: bound_port + 1)
    monkeypatch.setattr(procs, "_RNG", _Picks(given))
    assert procs.free_port() == given
    monkeypatch.setattr(procs, "_RNG", _Picks(bound_port, given, free))
    assert procs.free_port() == free


@pytest.mark.skipif(not Path("/proc/sys/net/ipv4").is_dir(), reason="Linux's port ranges")
def test_with_every_pick_bound_the_kernel_picks(
    monkeypatch: pytest.MonkeyPatch, clean_picks: None, bound_port: int
) -> None:
    """After ``_PORT_TRIES`` bound picks: a bind to port 0, which still gives a free port."""
    monkeypatch.setattr(procs, "_ephemeral_low", lambda: bound_port + 1)
    picks = _Picks(bound_port)
    monkeypatch.setattr(procs, "_RNG", picks)
    port = procs.free_port()
    assert picks.calls == procs._PORT_TRIES
    assert port != bound_port and port >= _ephemeral_low()  # the kernel's pick
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def _exits_saying(message: str, stderr: IO[bytes]) -> subprocess.Popen[bytes]:
    code = f"import sys; sys.stderr.write({message!r}); sys.exit(3)"
    return subprocess.Popen([sys.executable, "-c", code], stderr=stderr)


async def test_an_api_that_exits_before_it_serves_says_why() -> None:
    """The benchmarks' wait for their API process ends with what it wrote, not just its status."""
    with tempfile.TemporaryFile() as log:
        child = _exits_saying("address already in use", log)
        with pytest.raises(RuntimeError, match="exited with 3: address already in use"):
            await _served(procs.free_port(), child, log)
