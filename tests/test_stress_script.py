"""scripts/stress.py stops its CPU hogs and the running suite when it is killed (SIGTERM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "stress.py"


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        found.update(int(p) for p in (task / "children").read_text().split())
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _until(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.01)


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc's process tree")
def test_a_killed_stress_run_leaves_no_hog_or_suite_behind(tmp_path: Path) -> None:
    waiting = tmp_path / "test_waits.py"
    waiting.write_text("import time\n\ndef test_waits():\n    time.sleep(120)\n")
    suite = ["-q", "-p", "no:cacheprovider", str(waiting)]
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # no stress-ng: Python hogs
    script = subprocess.Popen(
        [sys.executable, str(_SCRIPT), "--runs", "1", "--hogs", "2", "--", *suite],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    children: set[int] = set()
    try:
        # The suite runs (its process is the script's child running pytest) beside the hogs.
        _until(lambda: any("pytest" in _cmdline(p) for p in _children(script.pid)))
        children = _children(script.pid)
        script.send_signal(signal.SIGTERM)
        assert script.wait(timeout=60) == 128 + signal.SIGTERM
        _until(lambda: not any(_alive(pid) for pid in children))
    finally:
        if script.poll() is None:
            script.kill()
        for pid in children:  # a failed check leaves nothing spinning either
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="POSIX signal masks")
def test_the_suite_it_runs_can_be_sent_sigint_and_sigterm(tmp_path: Path) -> None:
    # The script holds both back while it starts the suite; the suite must not inherit that:
    # its own tests stop the processes they start with these signals.
    probe = tmp_path / "test_mask.py"
    probe.write_text(
        "import signal\n\n"
        "def test_mask():\n"
        "    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])\n"
        "    assert not {signal.SIGINT, signal.SIGTERM} & blocked\n"
    )
    run = subprocess.run(
        [sys.executable, str(_SCRIPT), "--runs", "1", "--hogs", "0", "--", "-q", str(probe)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""
