"""The benchmarks are a package beside wbsync's: reached as ``wbsync bench`` through wbsync's
``wbsync.commands`` entry points, and not in wbsync's own distribution."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import distribution, entry_points

from wbsync.cli.added import GROUP


def test_wbsync_bench_is_the_installed_entry_point_s_app() -> None:
    (bench,) = [ep for ep in entry_points(group=GROUP) if ep.name == "bench"]
    assert bench.value == "wbsync_bench.cli:app"
    assert bench.dist is not None and bench.dist.name == "wbsync-bench"
    done = subprocess.run(
        [sys.executable, "-m", "wbsync", "bench", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert all(name in done.stdout for name in ("limiter", "reschedule", "scaleout", "all"))


def test_each_distribution_holds_its_own_package() -> None:
    """wbsync's distribution is the package ``wbsync`` alone, the benchmarks' ``wbsync_bench``."""
    for dist, package in (("wbsync", "wbsync"), ("wbsync-bench", "wbsync_bench")):
        top_level = distribution(dist).read_text("top_level.txt") or ""
        assert top_level.split() == [package], (dist, top_level)
