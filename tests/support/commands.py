"""A wbsync command run in this process as a fresh process would meet it, for tests of what a
command says about its settings: no child process (its interpreter and imports cost about a
second of CPU each), the same code path.

The environment holds only the given ``WBSYNC_*`` variables, the working directory is the
given one, and what a process reads once (the settings, a once-a-process warning) is read
afresh. An exception the command lets out fails the caller with its traceback, and a thread
it leaves running that is not a daemon (one that would hold a real process's exit) fails it
too. What only a process shows (exit through the interpreter, stderr as it ends) stays with
the tests that start one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from wbsync.cli import app
from wbsync.cli.running import _warn_once
from wbsync.config import get_settings

__all__ = ["invoke_clean"]

# Seconds a thread the command started may take to end once the command has returned.
JOIN_BOUND_S = 10.0


def invoke_clean(
    argv: Sequence[str], settings: Mapping[str, str], cwd: Path, monkeypatch: pytest.MonkeyPatch
) -> Result:
    """``wbsync <argv>`` with only ``settings`` set among the ``WBSYNC_*`` variables, in
    ``cwd``; its result (``exit_code``, ``stdout``, ``stderr``)."""
    for var in [v for v in os.environ if v.startswith("WBSYNC_")]:
        monkeypatch.delenv(var)
    for var, value in settings.items():
        monkeypatch.setenv(var, value)
    monkeypatch.chdir(cwd)
    get_settings.cache_clear()
    _warn_once.cache_clear()
    threads = set(threading.enumerate())
    try:
        done = CliRunner().invoke(app, list(argv), catch_exceptions=False)
    finally:
        get_settings.cache_clear()
    for thread in set(threading.enumerate()) - threads:
        thread.join(timeout=0 if thread.daemon else JOIN_BOUND_S)
        assert thread.daemon or not thread.is_alive(), f"{thread!r} outlived the command"
    return done
