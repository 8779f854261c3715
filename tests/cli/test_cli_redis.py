"""``wbsync run`` and ``wbsync api`` never start a throw-away Redis unasked: without
WBSYNC_REDIS_URL they refuse, with ``--embedded-redis`` they warn once and run on a private one."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.support.api import API_KEY
from wbsync.cli import app
from wbsync.config import get_settings

START_BOUND_S = 30.0


def _clean_env(tmp_path: Path) -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "WBSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'trial.db'}",
        "WBSYNC_API_KEYS": f'["{API_KEY}"]',
    }


def test_run_and_api_without_a_redis_url_refuse_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WBSYNC_REDIS_URL", raising=False)
    for name, value in _clean_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        results = [CliRunner().invoke(app, command) for command in (["run"], ["api"])]
    finally:
        get_settings.cache_clear()
    for result in results:
        assert result.exit_code == 2, result.output
        assert result.output.startswith("error: WBSYNC_REDIS_URL is not set: set it to your Redis")
        assert "--embedded-redis" in result.output and result.output.count("\n") == 1
    assert not (tmp_path / "trial.db").exists()  # refused before opening anything


async def test_run_with_embedded_redis_warns_once_runs_and_stops_cleanly(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "wbsync", "run", "--embedded-redis", "--queues", "pricing-bulk"),
        env=_clean_env(tmp_path),
        cwd=tmp_path,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    records: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + START_BOUND_S
        while not any(r["msg"].startswith("running 1 queues") for r in records):
            line = await asyncio.wait_for(process.stderr.readline(), deadline - time.monotonic())
            assert line, f"exited early: {records}"
            records.append(json.loads(line))
    finally:
        process.send_signal(signal.SIGTERM)
        _, rest = await asyncio.wait_for(process.communicate(), START_BOUND_S)
    assert process.returncode == 0
    records += [json.loads(line) for line in rest.splitlines()]
    warnings = [r["msg"] for r in records if r["level"] == "WARNING"]
    assert len(warnings) == 1, warnings
    assert "discarded" in warnings[0] and "delayed job and rate-limit bucket" in warnings[0]
    assert "WBSYNC_REDIS_URL" in warnings[0]
