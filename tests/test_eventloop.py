"""The event loop: wbsync's processes and this suite run on the same one, uvloop here."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from wbsync.system import eventloop

uvloop = pytest.importorskip("uvloop")  # where it has no build, asyncio's loop runs


async def _loop_kind() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


def test_processes_run_on_uvloop_where_it_is_built() -> None:
    assert eventloop.NAME == "uvloop"
    assert issubclass(eventloop.run(_loop_kind()), uvloop.Loop)


async def test_the_suite_runs_on_the_processes_loop() -> None:
    assert isinstance(asyncio.get_running_loop(), uvloop.Loop)


def test_run_gives_back_the_result_and_closes_its_loop() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def main() -> int:
        loops.append(asyncio.get_running_loop())
        return 7

    assert eventloop.run(main()) == 7
    assert loops[0].is_closed()


_HUNG = """
import asyncio

from wbsync.system import eventloop


def test_waits_forever_in_the_loop():
    eventloop.run(asyncio.Event().wait())
"""


@pytest.mark.long
def test_a_test_hung_in_the_loop_fails_past_the_suites_timeout(tmp_path: Path) -> None:
    """The suite's bound on one test (pyproject.toml's ``timeout``, here cut to 2 s) reaches a
    test blocked in uvloop's C loop, where a signal would not: it fails, naming the test,
    instead of holding the run until CI's own limit."""
    (tmp_path / "test_hung.py").write_text(_HUNG, encoding="utf-8")
    command = [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml")]
    command += ["-p", "no:cacheprovider", "-o", "timeout=2", str(tmp_path / "test_hung.py")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "Timeout" in out and "test_waits_forever_in_the_loop" in out, out[-3000:]


_STUCK = """
import asyncio


async def test_awaits_an_event_nobody_sets():
    await asyncio.Event().wait()


def test_after_it():
    pass
"""


@pytest.mark.long
def test_an_async_test_near_the_suites_bound_fails_with_its_loops_tasks(tmp_path: Path) -> None:
    """Before the bound (cut to 4 s here) kills its process, a stuck asyncio test is cancelled
    with every task's stack in its report, and the run goes on (``tests.support.hangs``)."""
    (tmp_path / "test_stuck.py").write_text(_STUCK, encoding="utf-8")
    command = [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml")]
    command += ["-p", "no:cacheprovider", "-p", "tests.conftest", "-o", "timeout=4"]
    command += ["-rN", str(tmp_path / "test_stuck.py")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    assert "1 failed, 1 passed" in out, out[-3000:]
    assert "asyncio tasks" in out and "still running after 4 s" in out, out[-3000:]
    assert "await asyncio.Event().wait()" in out, out[-3000:]  # the stuck await, in its stack
    assert "+ Timeout +" not in out, out[-3000:]


def test_a_cancel_lost_inside_still_ends_the_run_as_cancelled() -> None:
    # A Ctrl-C cancels a command's main task; a part that loses the cancel (as Python 3.11's
    # wait_for can) must not turn the stop into a success (the command exits 130, not 0).
    async def losing_its_cancel() -> str:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().call_soon(task.cancel)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            pass  # lost here
        return "finished"

    with pytest.raises(asyncio.CancelledError):
        eventloop.run(losing_its_cancel())


def test_a_run_not_cancelled_returns_its_result() -> None:
    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert eventloop.run(answer()) == 42
