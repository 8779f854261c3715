"""A benchmark's worker processes run on the benchmark's own settings object: every setting
reaches the child as the parent holds it (``Settings.environment``), none copied by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pydantic import SecretStr
from wbsync_bench.processes import WorkerProcesses

from wbsync.config import QUEUE_OPTIONS, Settings

FINANCE = "rnp-finance-sync"


def test_every_setting_reaches_a_started_worker_as_the_parent_holds_it(tmp_path: Path) -> None:
    emu: Any = SimpleNamespace(base_url="http://127.0.0.1:9/emulator")
    redis: Any = SimpleNamespace(url="redis://127.0.0.1:9/0")
    workers = WorkerProcesses(emu, redis, time_scale=0.001, concurrency=3)
    bench = workers.settings(f"sqlite+aiosqlite:///{tmp_path / 'bench.db'}")
    settings = Settings.model_validate(
        bench.model_dump()
        | {
            # Settings the benchmark never set by hand before, a per-queue one of each kind
            # among them: they reach the child all the same.
            **{o.field: {FINANCE: o.minimum + 2} for o in QUEUE_OPTIONS.values()},
            "calendar_origin": datetime(2026, 1, 1, tzinfo=UTC),
            "api_keys": [SecretStr("k" * 40)],
            "job_attempts": 7,
            "wb_disabled_methods": ["tariffs.acceptance_coefficients"],
        }
    )
    done = subprocess.run(
        [sys.executable, "-m", "wbsync", "settings", "--json"],
        env=workers.environment(settings),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    parent = {name: value for name, value, _ in settings.described()}
    assert json.loads(done.stdout) == parent
    assert parent["WBSYNC_TIME_SCALE"] == "0.001" and parent["WBSYNC_PLUGINS"] == "[]"
