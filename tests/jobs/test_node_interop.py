"""Node BullMQ against wbsync's queues: it counts wbsync's workers, reads a deferred job's resume
time as timestamp + delay, and adds jobs the Python workers run (or fail, when malformed)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.jobs import Harness
from tests.support.waiting import wait_for
from wbsync.jobs.handle import JobHandle
from wbsync.jobs.model import job_id
from wbsync.redis import keys

# The Node releases this test was written against; npm installs them once per machine.
NODE_PACKAGES = ("bullmq@6.7.0", "ioredis@6.0.0")
SCRIPT = Path(__file__).parent / "node" / "interop.cjs"
QUEUE = "interop-sync"


@pytest.fixture(scope="session")
def node_bullmq() -> Iterator[Path]:
    """A folder whose node_modules holds Node BullMQ; skips when Node or npm is missing."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js and npm are not installed: the Node interop test needs them")
    cached = Path(tempfile.gettempdir()) / ("wbsync-node-" + "-".join(NODE_PACKAGES))
    if not (cached / "node_modules" / "bullmq").is_dir():
        fresh = Path(tempfile.mkdtemp(prefix="wbsync-node-"))
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--silent", *NODE_PACKAGES],
            cwd=fresh,
            capture_output=True,
            text=True,
            timeout=240,
        )
        if done.returncode != 0:
            shutil.rmtree(fresh, ignore_errors=True)
            pytest.skip(f"npm could not install {NODE_PACKAGES}: {done.stderr[-300:]}")
        try:
            fresh.rename(cached)  # atomic: a concurrent session's copy wins, ours is dropped
        except OSError:
            shutil.rmtree(fresh, ignore_errors=True)
    yield cached


async def _node(folder: Path, args: dict[str, Any]) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(SCRIPT),
        json.dumps(args),
        cwd=folder,
        env={**os.environ, "NODE_PATH": str(folder / "node_modules")},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    result: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return result


async def test_node_bullmq_sees_wbsync_as_it_is(
    node_bullmq: Path,
    harness: Harness,
    redis_url: str,
    prefix: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str] = []

    async def process(job: JobHandle) -> str:
        if job.cabinet == "slow":
            await job.defer(3_600_000, note={"deferred_by": "test"})  # an hour: stays delayed
        seen.append(job.cabinet)
        return "done"

    queue = harness.queue(QUEUE)
    await harness.worker(QUEUE, process)
    await queue.enqueue("slow")

    async def slow_is_delayed() -> bool:
        view = await queue.job("slow")
        return view is not None and view.state == "delayed"

    await wait_for(slow_is_delayed, 30)
    numeric, malformed = job_id(QUEUE, "7"), f"{QUEUE}.bad-{uuid.uuid4().hex[:6]}"
    result = await _node(
        node_bullmq,
        {
            "redisUrl": redis_url,
            "prefix": keys.queue_prefix(prefix),
            "queue": keys.bullmq_queue_name(QUEUE),
            "queueName": QUEUE,
            "deferredJobId": job_id(QUEUE, "slow"),
            "jobs": [
                {"id": numeric, "data": {"cabinet": 7}, "attempts": 3},
                {"id": malformed, "data": {"cursor": None}, "attempts": 3},
            ],
        },
    )

    assert (
        result["workers"] == 1
    )  # one SyncWorker: Node counts it (and would show it in Bull Board)
    deferred = result["deferred"]
    assert deferred["state"] == "delayed"
    assert deferred["timestamp"] + deferred["delay"] == deferred["resumeAtMs"]  # "will run at"

    done = result["finished"]
    assert done[numeric]["state"] == "completed" and done[numeric]["data"]["cabinet"] == "7"
    assert seen == ["7"]  # the numeric cabinet was normalised before the processor saw it
    bad = done[malformed]
    assert bad["state"] == "failed" and bad["attemptsMade"] == 1  # at once: no retries
    assert "no 'cabinet'" in bad["failedReason"]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any(malformed in m and "malformed" in m for m in errors), errors
    assert result["counts"]["delayed"] == 1 and result["counts"]["completed"] == 1
    view = await queue.job("7")
    assert view is not None and view.cabinet == "7" and view.state == "completed"
