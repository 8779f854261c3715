"""``wbsync api`` and ``wbsync run --with-api`` as processes: no keys, no start; serve; stop."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.api import API_KEY, AUTH
from wbsync.system.procs import free_port

WBSYNC = [sys.executable, "-m", "wbsync"]


@pytest.mark.long
def test_api_and_run_with_api_refuse_to_start_without_api_keys(tmp_path: Path) -> None:
    env = {**os.environ, "WBSYNC_API_KEYS": "[]"}
    processes = [
        subprocess.Popen(
            [*WBSYNC, *command],
            env=env,
            cwd=tmp_path,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for command in (["api"], ["run", "--with-api"])
    ]
    for process in processes:
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == 2
        assert stderr.startswith("error: WBSYNC_API_KEYS: ") and stderr.count("\n") == 1
        assert "WBSYNC_API_KEYS='[\"...\"]'" in stderr
    assert not (tmp_path / "wbsync.db").exists()  # nothing was opened


@pytest.mark.long
def test_run_with_api_serves_beside_the_workers_and_stops_on_sigterm(
    tmp_path: Path, redis_url: str, prefix: str
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "WBSYNC_REDIS_URL": redis_url,
        "WBSYNC_REDIS_PREFIX": prefix,
        "WBSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'run.db'}",
        "WBSYNC_API_KEYS": f'["{API_KEY}"]',
    }
    command = [*WBSYNC, "run", "--with-api", "--port", str(port), "--queues", "pricing-bulk"]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60  # a start on a loaded machine
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the API did not come up"
                time.sleep(0.05)
        assert httpx.get(f"{base}/readyz").status_code == 200
        assert httpx.get(f"{base}/metrics").status_code == 401
        assert "wbsync_queue_jobs" in httpx.get(f"{base}/metrics", headers=AUTH).text
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr
    assert API_KEY not in stderr


@pytest.mark.long
def test_run_whose_api_cannot_listen_stops_with_an_error(tmp_path: Path, redis_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {
            **os.environ,
            "WBSYNC_REDIS_URL": redis_url,
            "WBSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'run.db'}",
            "WBSYNC_API_KEYS": f'["{API_KEY}"]',
        }
        command = [*WBSYNC, "run", "--with-api", "--port", str(port), "--queues", "pricing-bulk"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr[-2000:]
    assert f"error: the API could not listen on 127.0.0.1:{port}" in done.stderr
