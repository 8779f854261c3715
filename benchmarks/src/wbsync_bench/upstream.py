"""The WB emulator as a child process on loopback, for benchmarks that make upstream requests.

A separate process, so the emulator's request handling does not share the benchmark's event
loop (the workers' lateness would otherwise include the emulator's work). Its counters of
requests and 429s are read over HTTP, as any client of the emulator would.

``python -m wbsync_bench.upstream CONFIG.json PORT`` is the child's entry point.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from wbsync.emulator import EmulatorConfig
from wbsync.errors import ConfigError
from wbsync.system import eventloop
from wbsync.system.procs import dies_with_parent, free_port, stop_child

_CONTROL = "/__emulator"


class EmulatorProcess:
    """``async with EmulatorProcess(config) as emu``: ``emu.base_url``, ``await emu.counters()``."""

    def __init__(self, config: EmulatorConfig, *, start_timeout_s: float = 20.0) -> None:
        self.config = config
        self._start_timeout_s = start_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self.base_url = ""

    async def __aenter__(self) -> EmulatorProcess:
        self._dir = tempfile.TemporaryDirectory(prefix="wbsync-bench-emu-")
        path = Path(self._dir.name) / "config.json"
        path.write_text(self.config.model_dump_json(), encoding="utf-8")
        port = free_port()
        # Popen returns at once (fork/exec); the wait for readiness below is async.
        self._proc = subprocess.Popen(  # noqa: ASYNC220
            [sys.executable, "-m", "wbsync_bench.upstream", str(path), str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=os.environ.copy(),
            preexec_fn=dies_with_parent(),  # a killed bench leaves no emulator behind
            process_group=0,  # a Ctrl-C reaches the bench only, which stops this child
        )
        self.base_url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + self._start_timeout_s
        async with httpx.AsyncClient(base_url=self.base_url, timeout=1.0) as http:
            while True:
                try:
                    if (await http.get(f"{_CONTROL}/counters")).status_code == 200:
                        return self
                except httpx.TransportError:
                    pass
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    stderr = self._proc.stderr
                    err = stderr.read().decode(errors="replace") if stderr else ""
                    await self.__aexit__(None, None, None)
                    raise ConfigError(f"the emulator did not start: {err[-2000:]}")
                await asyncio.sleep(0.05)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._proc is not None:
            await asyncio.to_thread(stop_child, self._proc)
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    @property
    def pid(self) -> int:
        """The emulator process's id (it must be running)."""
        if self._proc is None:
            raise ConfigError("the emulator process is not running")
        return self._proc.pid

    async def counters(self) -> dict[str, Any]:
        """Requests, 429s and faults served, as the emulator reports them."""
        async with httpx.AsyncClient(base_url=self.base_url, timeout=10.0) as http:
            reply = await http.get(f"{_CONTROL}/counters")
            reply.raise_for_status()
            data: dict[str, Any] = reply.json()
            return data

    async def reset(self) -> None:
        """Zero the counters and refill every bucket."""
        async with httpx.AsyncClient(base_url=self.base_url, timeout=10.0) as http:
            reply = await http.post(f"{_CONTROL}/reset", json={})
            reply.raise_for_status()


def _main(config_path: str, port: str) -> None:
    from wbsync.emulator import serve

    config = EmulatorConfig.model_validate_json(Path(config_path).read_text(encoding="utf-8"))
    eventloop.run(serve(config, host="127.0.0.1", port=int(port), log_level="warning"))


if __name__ == "__main__":
    _main(*sys.argv[1:3])
