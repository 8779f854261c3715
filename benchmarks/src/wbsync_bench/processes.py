"""The processes a benchmark runs the production code in, and the CPU they use.

Redis under test (a private ``redis-server`` or an embedded 3-master cluster, with the figures
read from every node), ``wbsync run`` child processes on one Redis, database and emulator, and
the CPU time of a process, of its threads and of the whole machine (Linux ``/proc``). Shared by
the benchmarks that run the production worker: scaleout, page and capacity.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from redis.asyncio import Redis

from wbsync.config import Settings
from wbsync.errors import ConfigError
from wbsync.redis import keys
from wbsync.redis.redis_cluster import EmbeddedCluster
from wbsync.redis.redis_server import EmbeddedRedis
from wbsync.system.procs import dies_with_parent, stop_child
from wbsync_bench.common import syncs
from wbsync_bench.upstream import EmulatorProcess

SECRET_KEY = "wbsync-bench-scaleout-secret-key"
FAR_AHEAD_MS = 10**15  # the fan-out schedule's "not before" (year 33658): the bench fans out
_FAILED_RETRY_REAL_S = 300.0
_PRUNE_INTERVAL_S = Settings.model_fields["prune_interval_s"].default
_POLL_S = 0.25
_CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- the machine's and the processes' CPU (Linux /proc) -------------------------------------


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def machine_cpu_s() -> tuple[float, float]:
    """CPU seconds every core spent on anything but idling, and in all, since boot.

    The share of the machine a run kept busy is the ratio of the two differences: both come from
    the same reads, so it never exceeds 1 however the reads fall against the run's own clock.
    """
    with open("/proc/stat", encoding="ascii") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    every = sum(values[:8])
    return (every - idle) / _CLK_TCK, every / _CLK_TCK


# --- Redis: one server or a cluster, and the numbers read from every node --------------------


def threads_cpu_s(pid: int) -> float:
    """CPU seconds of process ``pid``'s live threads (``schedstat``, ns), else its ticks."""
    total = 0
    paths = glob.glob(f"/proc/{pid}/task/*/schedstat")
    for path in paths:
        with contextlib.suppress(OSError), open(path, encoding="ascii") as stat:
            total += int(stat.read().split()[0])
    return total / 1e9 if total else process_cpu_s(pid)


@dataclass
class RedisUnderTest:
    url: str
    nodes: list[str]
    _readers: dict[str, Redis] = field(default_factory=dict, repr=False)

    async def _info(self, *sections: str) -> list[dict[str, Any]]:
        """``INFO`` of ``sections`` on every node, read on one connection per node kept for
        the run: its handshake (``HELLO``) runs once, before the first read, so the commands
        counted between two reads hold none of the benchmark's own but its ``INFO``."""
        out = []
        for node in self.nodes:
            reader = self._readers.get(node)
            if reader is None:
                reader = self._readers[node] = Redis.from_url(node, single_connection_client=True)
            out.append(await reader.info(*sections))
        return out

    async def aclose(self) -> None:
        for reader in self._readers.values():
            await reader.aclose()
        self._readers.clear()

    async def memory(self) -> int:
        """``used_memory`` summed over the nodes."""
        return sum(int(info["used_memory"]) for info in await self._info("memory"))

    async def totals(self) -> dict[str, Any]:
        """Commands run (in all and by name), CPU seconds and used memory, summed over the
        nodes, from one ``INFO`` a node."""
        by_name: dict[str, int] = {}
        infos = await self._info("commandstats", "cpu", "memory")
        for info in infos:
            for name, stat in info.items():
                if name.startswith("cmdstat_"):
                    command = name.removeprefix("cmdstat_")
                    by_name[command] = by_name.get(command, 0) + int(stat["calls"])
        return {
            "commands": sum(by_name.values()),
            "by_name": by_name,
            "cpu_s": sum(float(i["used_cpu_user"]) + float(i["used_cpu_sys"]) for i in infos),
            "memory": sum(int(i["used_memory"]) for i in infos),
        }

    async def client_names(self) -> list[str]:
        """The names of every client connected to any node."""
        names = []
        for node in self.nodes:
            client = Redis.from_url(node, decode_responses=True)
            try:
                names += [c.get("name", "") for c in await client.client_list()]
            finally:
                await client.aclose()
        return names


@contextlib.asynccontextmanager
async def redis_under_test(kind: str) -> AsyncIterator[RedisUnderTest]:
    """A private Redis server (``single``) or cluster, discarded at exit."""
    with contextlib.ExitStack() as servers:
        if kind == "single":
            server = servers.enter_context(EmbeddedRedis())
            redis = RedisUnderTest(server.url, [server.url])
        else:
            cluster = servers.enter_context(EmbeddedCluster())
            redis = RedisUnderTest(cluster.url, [f"redis://127.0.0.1:{p}" for p in cluster.ports])
        try:
            yield redis
        finally:
            await redis.aclose()


# --- the database: a fresh SQLite file or a fresh PostgreSQL database -----------------------


# --- `wbsync run` processes and the cabinets they sync ----------------------------------------


def seller_id(i: int) -> str:
    return str(uuid.UUID(int=i + 1, version=4))


class WorkerProcesses:
    """`wbsync run` child processes on one Redis, database and emulator, and their CPU.

    Shared by the benchmarks that run the production worker: scaleout, page, capacity and soak.
    The retention pass keeps its real period (an hour: none in a run) unless ``scaled_pruning``
    (the soak's): an hourly pass does not come more often when pages do, and scaled it would
    run every 3.6 ms at the page benchmark's time scale, a third of a worker's CPU measured.
    """

    def __init__(
        self,
        emu: EmulatorProcess,
        redis: RedisUnderTest,
        *,
        time_scale: float,
        concurrency: int,
        queue_concurrency: dict[str, int] | None = None,
        scaled_pruning: bool = False,
    ) -> None:
        self.emu, self.redis = emu, redis
        self.time_scale, self.concurrency = time_scale, concurrency
        self.queue_concurrency = queue_concurrency or {}
        self.scaled_pruning = scaled_pruning
        self.procs: list[subprocess.Popen[bytes]] = []
        self.logs: list[Any] = []

    def settings(self, database_url: str) -> Settings:
        return Settings(
            redis_url=self.redis.url,
            database_url=database_url,
            secret_key=SecretStr(SECRET_KEY),
            wb_base_url=self.emu.base_url,
            time_scale=self.time_scale,
            sync_queue_concurrency=self.concurrency,
            queue_concurrency=self.queue_concurrency,
            # The leader looks for failed jobs every quarter of this, scaled: at time scale
            # 0.001 WB's 300 s would be a look every 75 ms. Keep the real period (75 s).
            failed_retry_s=_FAILED_RETRY_REAL_S / self.time_scale,
            prune_interval_s=_PRUNE_INTERVAL_S / (1.0 if self.scaled_pruning else self.time_scale),
            log_level="WARNING",
            # wbsync's own syncs are measured: an installed plugin's queue would add jobs the
            # run does not count (and a method the benchmark's emulator may not serve).
            plugins=[],
        )

    def environment(self, settings: Settings) -> dict[str, str]:
        """This environment without its WBSYNC_ variables, then every one of ``settings``."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("WBSYNC_")}
        return env | settings.environment()

    def spawn(self, settings: Settings, count: int, tmp: Path) -> None:
        env = self.environment(settings)
        for i in range(count):
            log = open(tmp / f"run-{i}.log", "w+b")  # closed in stop()
            self.logs.append(log)
            # Popen returns at once (fork/exec); readiness is awaited below.
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "wbsync", "run"],
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    env=env,
                    preexec_fn=dies_with_parent(),  # a killed bench leaves no worker behind
                    process_group=0,
                )
            )

    def died(self) -> str | None:
        for proc, log in zip(self.procs, self.logs, strict=True):
            if proc.poll() is not None:
                log.seek(0)
                tail = log.read().decode(errors="replace")[-1500:]
                return f"a `wbsync run` process exited with {proc.returncode}: {tail}"
        return None

    async def until_listening(self, queue_prefix: str, timeout_s: float = 120.0) -> None:
        """Until every process's worker of every queue holds its blocking connection."""
        wanted = {keys.bullmq_worker_connection_name(queue_prefix, q) for q in syncs()}
        deadline = time.monotonic() + timeout_s
        while True:
            names = await self.redis.client_names()
            if all(names.count(name) >= len(self.procs) for name in wanted):
                return
            died = self.died()
            if died or time.monotonic() > deadline:
                raise ConfigError(died or f"the workers did not start within {timeout_s:.0f} s")
            await asyncio.sleep(_POLL_S)

    def cpu_s(self) -> tuple[float, float]:
        """CPU seconds so far of the worker processes, and of the emulator."""
        workers = sum(process_cpu_s(p.pid) for p in self.procs)
        return workers, process_cpu_s(self.emu.pid)

    def stop(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            stop_child(proc)
        for log in self.logs:
            log.close()
