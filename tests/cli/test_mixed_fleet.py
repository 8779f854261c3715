"""A mixed fleet: processes that load plugins and processes that do not share one set of
settings. A stock process meets the plugins' queues and limit groups in the per-queue settings
and ``WBSYNC_LIMIT_OVERRIDES``: one ``warning:`` line naming them all (not loaded here), never an
exit; a bad value is still refused (exit 2) whatever the queue."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.api import API_KEY
from tests.support.commands import invoke_clean
from wbsync.system.procs import free_port

QUEUE = "wb-deductions-sync"  # the example plugins' (examples/wbsync-deductions)
GROUP = "analytics.deductions"
SUPPLIES_QUEUE = "wb-supplies-sync"  # (examples/wbsync-supplies)
SUPPLIES_GROUP = "supplies.list"
SHARED = {
    "WBSYNC_FANOUT_INTERVALS_S": (
        f'{{"{QUEUE}": 600, "{SUPPLIES_QUEUE}": 1800, "rnp-finance-sync": 3600}}'
    ),
    "WBSYNC_QUEUE_CONCURRENCY": f'{{"{QUEUE}": 3, "{SUPPLIES_QUEUE}": 2}}',
    "WBSYNC_LIMIT_OVERRIDES": (
        f'{{"{GROUP}": {{"period_s": 60, "burst": 1}}, '
        f'"{SUPPLIES_GROUP}": {{"period_s": 60, "limit": 20, "burst": 5}}}}'
    ),
}


def _stock(tmp_path: Path, **settings: str) -> dict[str, str]:
    """A clean environment of a process that loads no plugin, with the fleet's settings."""
    env = {
        "PATH": os.environ["PATH"],
        "WBSYNC_PLUGINS": "[]",
        "WBSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'wbsync.db'}",
        **SHARED,
        **settings,
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def _says_not_loaded_once(stderr: str) -> None:
    assert "Traceback" not in stderr
    assert stderr.count("warning:") == 1 and "not loaded here" in stderr, stderr
    (line,) = [line for line in stderr.splitlines() if "warning:" in line]
    names = ("WBSYNC_FANOUT_INTERVALS_S", "WBSYNC_QUEUE_CONCURRENCY", "WBSYNC_LIMIT_OVERRIDES")
    for name in (*names, QUEUE, GROUP, SUPPLIES_QUEUE, SUPPLIES_GROUP):
        assert name in line
    assert "rnp-finance-sync'" not in line  # a known queue is not named


def test_a_stock_process_lists_cabinets_with_a_plugins_names_in_the_settings(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wbsync", "cabinets", "list"],
        env=_stock(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    _says_not_loaded_once(done.stderr)


@pytest.mark.long
def test_a_stock_worker_starts_and_stops_cleanly_with_a_plugins_names_in_the_settings(
    tmp_path: Path, redis_url: str, prefix: str
) -> None:
    port = free_port()
    env = _stock(
        tmp_path,
        WBSYNC_REDIS_URL=redis_url,
        WBSYNC_REDIS_PREFIX=prefix,
        WBSYNC_API_KEYS=f'["{API_KEY}"]',
        WBSYNC_SECRET_KEY="mixed-fleet-secret-key",
    )
    # `wbsync run` migrates the new database as it starts: no `wbsync migrate` process first.
    process = subprocess.Popen(
        [sys.executable, "-m", "wbsync", "run", "--with-api", "--port", str(port)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "wbsync run did not come up"
                time.sleep(0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    _says_not_loaded_once(stderr)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("WBSYNC_QUEUE_CONCURRENCY", f'{{"{QUEUE}": 0}}'),
        ("WBSYNC_QUEUE_CONCURRENCY", '{"rnp-finance-sync": 0}'),
        ("WBSYNC_FANOUT_INTERVALS_S", '{"rnp-finance-sync": "hourly"}'),
        ("WBSYNC_LIMIT_OVERRIDES", '{"prices": {"period_s": 0, "burst": 1}}'),
    ],
)
def test_a_bad_value_is_refused_whether_or_not_its_queue_is_loaded_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    env = _stock(tmp_path, **{variable: value})
    settings = {name: value for name, value in env.items() if name.startswith("WBSYNC_")}
    done = invoke_clean(["cabinets", "list"], settings, tmp_path, monkeypatch)
    assert done.exit_code == 2, done.stderr
    assert done.stderr.startswith(f"error: {variable}") and done.stderr.count("\n") == 1
    assert next(iter(json.loads(value))) in done.stderr  # the queue or group with the bad value
