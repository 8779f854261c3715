"""Run the test suite on a loaded machine: one CPU hog per core beside it, N times in a row.

    python scripts/stress.py [--runs N] [--hogs K] [-- PYTEST ARGS...]

The hogs are `stress-ng --cpu K` when stress-ng is on PATH, else K Python busy-loop processes.
The suite runs with this interpreter's pytest (``-q`` unless other arguments are given); the
script stops at the first failing run, prints each run's wall time, and exits with the failing
run's status (0 when every run passed). The hogs and a running suite are stopped however the
script ends: at its end, at Ctrl-C, and at SIGTERM (``kill``), which ends it as Ctrl-C does.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line: ``--runs``, ``--hogs``, and pytest's arguments after ``--``."""
    parser = argparse.ArgumentParser(
        prog="stress.py", description="Run the test suite N times beside one CPU hog per core."
    )
    parser.add_argument("--runs", type=_positive, default=3, help="passes of the suite (3)")
    parser.add_argument(
        "--hogs",
        type=_at_least_zero,
        default=os.cpu_count() or 1,
        help="busy loops beside the suite (one per core)",
    )
    parser.add_argument("pytest_args", nargs="*", help="arguments for pytest (after --)")
    return parser.parse_args(argv)


def _positive(text: str) -> int:
    value = _at_least_zero(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def _at_least_zero(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return value


def _spin() -> None:
    while True:
        pass


@contextmanager
def cpu_hogs(count: int) -> Iterator[str]:
    """``count`` busy loops until the block ends; yields what runs them."""
    if count == 0:
        yield "no hogs"
        return
    stress_ng = shutil.which("stress-ng")
    if stress_ng:
        proc = subprocess.Popen(
            [stress_ng, "--cpu", str(count), "--quiet"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            yield f"stress-ng --cpu {count}"
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        return
    context = multiprocessing.get_context("spawn")
    loops = [context.Process(target=_spin, daemon=True) for _ in range(count)]
    for loop in loops:
        loop.start()
    try:
        yield f"{count} Python busy loops"
    finally:
        for loop in loops:
            loop.terminate()
        for loop in loops:
            loop.join(timeout=30)


_STOPS = {signal.SIGINT, signal.SIGTERM}


_MASKS = hasattr(signal, "pthread_sigmask")  # POSIX only


def _hold(how: int) -> None:
    if _MASKS:
        signal.pthread_sigmask(how, _STOPS)


def _release() -> None:
    # In the child, before exec: a blocked signal stays blocked across exec, and the suite's
    # own tests stop the processes they start with SIGTERM and SIGINT.
    _hold(signal.SIG_UNBLOCK)


def _run(command: Sequence[str]) -> int:
    """Run ``command`` to its end; a Ctrl-C or SIGTERM kills it on the way out.

    Both are held back here while it starts (on POSIX), not in it: one landing inside
    ``Popen``, whose child may have started already, would leave the suite running with no one
    to stop it.
    """
    _hold(signal.SIG_BLOCK)
    proc = None
    try:
        # The script has one thread, so the child may run Python before its exec.
        proc = subprocess.Popen(command, preexec_fn=_release if _MASKS else None)
        _hold(signal.SIG_UNBLOCK)  # one held back is handled here, with ``proc`` known
        return proc.wait()
    finally:
        _hold(signal.SIG_UNBLOCK)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the passes; the exit status of the first failing one, else 0."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # SIGTERM's default ends the process at once, leaving the hogs spinning: exit instead, so
    # the running suite is killed and the hogs are stopped on the way out.
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    command = [sys.executable, "-m", "pytest", *(args.pytest_args or ["-q"])]
    times: list[float] = []
    with cpu_hogs(args.hogs) as hogs:
        print(f"stress: {args.runs} run(s) of {' '.join(command[1:])} beside {hogs}", flush=True)
        for run in range(1, args.runs + 1):
            started = time.monotonic()
            status = _run(command)
            times.append(time.monotonic() - started)
            print(f"stress: run {run}/{args.runs} took {times[-1]:.1f} s", flush=True)
            if status != 0:
                print(f"stress: run {run} failed (exit status {status})", flush=True)
                return status
    print(f"stress: {args.runs} run(s) passed: " + ", ".join(f"{t:.1f} s" for t in times))
    return 0


if __name__ == "__main__":
    sys.exit(main())
