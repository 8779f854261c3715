"""Client processes for the multi-process client tests: each runs ``tests/support/wb_worker.py``
(``python -m tests.support.wb_worker <json args>``) from the repository's root."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from tests.support.paths import ROOT


async def spawn(args: dict[str, Any]) -> asyncio.subprocess.Process:
    """Start a worker process with ``args`` (see ``wb_worker``), its stdin and stdout piped."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.wb_worker",
        json.dumps(args),
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )


def kill(procs: list[asyncio.subprocess.Process]) -> None:
    """Kill those of ``procs`` still running."""
    for proc in procs:
        if proc.returncode is None:
            proc.kill()


async def result(proc: asyncio.subprocess.Process, timeout_s: float = 30.0) -> dict[str, Any]:
    """The JSON of the last line a worker printed; it must have exited with status 0."""
    out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    assert proc.returncode == 0, out
    value: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return value
