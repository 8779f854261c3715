"""``python -m wbsync.bench ...``: the benchmarks without the main CLI."""

from wbsync.bench.cli import app

app(prog_name="wbsync bench")
