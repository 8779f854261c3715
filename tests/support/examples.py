"""The example plugins (``examples/``) as the end-to-end tests run them: found installed or put
on ``PYTHONPATH``, and wbsync processes that load them (every process that loads a plugin is a
subprocess: the test's own stays stock)."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any

import httpx

from tests.support.paths import ROOT
from tests.support.plugins import EMULATOR_GROUP, GROUP, install

__all__ = ["example", "example_sites", "run_wbsync", "serving", "stored"]


def example(name: str) -> Path:
    """The example plugin's directory: ``examples/wbsync-<name>``."""
    return ROOT / "examples" / f"wbsync-{name}"


def example_sites(site: Path, *names: str) -> list[Path]:
    """What processes need on ``PYTHONPATH`` to find the example plugins ``names`` (nothing for
    one pip-installed): a distribution with its entry points under ``site``, and its sources."""
    found: list[Path] = []
    for name in names:
        try:
            distribution(f"wbsync-{name}")
        except PackageNotFoundError:
            entries = {
                GROUP: {name: f"wbsync_{name}:register"},
                EMULATOR_GROUP: {name: f"wbsync_{name}:register_emulated"},
            }
            found += [install(site / name, f"wbsync-{name}", entries), example(name) / "src"]
    return found


@contextmanager
def serving(argv: list[str], env: dict[str, str], url: str) -> Iterator[subprocess.Popen[str]]:
    """A wbsync process answering at ``url``; SIGTERM and a clean exit at the end (the
    emulator, a development server, may also end by the signal itself)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "wbsync", *argv], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                httpx.get(url, timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, f"{argv[0]} did not come up"
                time.sleep(0.05)
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    clean = (0, -signal.SIGTERM) if argv[0] == "emulator" else (0,)
    assert process.returncode in clean, stderr


def run_wbsync(env: dict[str, str], *argv: str) -> str:
    """``wbsync argv`` to its end, which must be a success; its output."""
    done = subprocess.run(
        [sys.executable, "-m", "wbsync", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def stored(db: Path, table: str) -> list[dict[str, Any]]:
    """The live rows' data of a dataset's table in the SQLite database ``db``."""
    with sqlite3.connect(db) as conn:
        query = f"SELECT data FROM {table} WHERE deleted_at IS NULL"
        return [json.loads(data) for (data,) in conn.execute(query)]
