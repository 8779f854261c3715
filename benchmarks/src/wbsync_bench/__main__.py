"""``python -m wbsync_bench ...``: the benchmarks without the main CLI."""

from wbsync_bench.cli import app

app(prog_name="wbsync bench")
