"""Who sent which Redis command: a ``MONITOR`` of a benchmark's private Redis, told apart by origin.

``INFO commandstats`` counts commands by name; it cannot say which were BullMQ's and which
wbsync's, nor which a client sent and which a Lua script ran. ``MONITOR`` shows every command
with its client (``lua`` for a script's inner commands, each after the ``EVALSHA`` that ran it),
so a log of it splits the commands of a measurement into:

* BullMQ's: its scripts (known by their SHA1, ``bullmq_script_shas``)
  with their inner commands, its blocking wait for jobs (``BZPOPMIN``) and the transaction
  around its bulk add (``MULTI``/``EXEC``): what a job costs BullMQ, which wbsync can only make
  run less often;
* wbsync's: everything else (the bucket, the cursor save with the change stream, the throughput and
  lag figures, the producer's check for live jobs);
* client calls: commands a client sent (not run by a script). A pipeline's commands count one
  each, so a page's round trips are at most its calls.

It also counts the jobs BullMQ ended (its ``moveToFinished`` script: a job completed, or
failed for good), so a benchmark can wait for a job's end without sending a command of its own.

Left out: the benchmark's own ``INFO`` reads and the clients' handshakes (``HELLO``, mostly
the benchmark's: it opens a client per ``INFO``; the worker's connections are open before a
measurement starts). ``MONITOR`` slows Redis a little, not the worker whose CPU is measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

from redis.asyncio import Redis

__all__ = ["CommandLog", "Origins", "bullmq_script_shas", "monitored"]

_LINE = re.compile(r'\[\d+ (\S+)\] "((?:[^"\\]|\\.)*)"(?: "((?:[^"\\]|\\.)*)")?')
_BULLMQ_CLIENT_COMMANDS = frozenset({"bzpopmin", "multi", "exec"})
_EXCLUDED = frozenset({"info", "hello", "echo"})  # the benchmark's reads, handshakes, end mark
_END_TIMEOUT_S = 30.0
_JOB_ENDS = "moveToFinished"  # BullMQ's script that ends a job (completed, or failed for good)


def bullmq_script_shas() -> dict[str, str]:
    """BullMQ's Lua scripts by the SHA1 its clients call them by (``EVALSHA``)."""
    from bullmq.redis_connection import SCRIPT_DEFINITIONS, loadScript

    return {
        hashlib.sha1(loadScript(file).encode()).hexdigest(): name
        for name, file in SCRIPT_DEFINITIONS.items()
    }


@dataclass(frozen=True, slots=True)
class Origins:
    """Commands of one measurement by origin (see the module's docstring)."""

    total: int
    bullmq: int
    client_calls: int

    @property
    def wbsync(self) -> int:
        """Commands that were not BullMQ's."""
        return self.total - self.bullmq


class CommandLog:
    """The commands one ``MONITOR`` connection saw, counted by origin as they arrive."""

    def __init__(self) -> None:
        self._shas = bullmq_script_shas()
        self.total = self.bullmq = self.client_calls = 0
        self.jobs_ended = 0
        """Jobs BullMQ ended (``moveToFinished``) since the log began."""
        self._in_bullmq_script = False
        self._end_mark: str | None = None
        self.ended = asyncio.Event()
        self._job_ended = asyncio.Event()

    def origins(self) -> Origins:
        """The counts so far."""
        return Origins(self.total, self.bullmq, self.client_calls)

    def see(self, line: str) -> None:
        """Count one line of ``MONITOR``'s output (after its timestamp)."""
        found = _LINE.match(line)
        if found is None:
            return
        client, name, first_arg = found.group(1), found.group(2).lower(), found.group(3)
        if name == "echo" and first_arg == self._end_mark:
            self.ended.set()
        if name in _EXCLUDED:
            return
        self.total += 1
        if client == "lua":
            self.bullmq += self._in_bullmq_script
            return
        self.client_calls += 1
        script = self._shas.get(first_arg or "") if name == "evalsha" else None
        self._in_bullmq_script = script is not None
        self.bullmq += self._in_bullmq_script or name in _BULLMQ_CLIENT_COMMANDS
        if script == _JOB_ENDS:
            self.jobs_ended += 1
            self._job_ended.set()

    async def job_ended(self, after: int) -> None:
        """Return once more than ``after`` jobs have ended (``jobs_ended``)."""
        while self.jobs_ended <= after:
            self._job_ended.clear()
            await self._job_ended.wait()

    def end_mark(self) -> str:
        """A fresh mark to ``ECHO``: once seen, every command sent before it was counted."""
        self.ended.clear()
        self._end_mark = f"wbsync-bench-end-{uuid.uuid4().hex}"
        return self._end_mark


@contextlib.asynccontextmanager
async def monitored(url: str) -> AsyncIterator[CommandLog]:
    """A ``MONITOR`` of the Redis at ``url`` counting into a ``CommandLog``; on exit, waits until
    every command sent before the exit was seen."""
    log = CommandLog()
    client = Redis.from_url(url)
    try:
        # MONITOR has answered OK once entered: every command from then on is seen.
        async with client.monitor() as monitor:
            conn = monitor.connection
            assert conn is not None

            async def read() -> None:
                while True:
                    raw = await conn.read_response()
                    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
                    log.see(text.partition(" ")[2])

            reader = asyncio.create_task(read())
            try:
                yield log
                mark = log.end_mark()
                await client.echo(mark)
                await asyncio.wait_for(log.ended.wait(), _END_TIMEOUT_S)
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reader
    finally:
        await client.aclose()
