"""``--write-docs``: results into ``docs/benchmarks.md`` and plots into ``docs/*.png``.

Results accumulate in ``docs/benchmarks.json`` (one entry per benchmark, the latest run), and
the whole page is rendered from it, so running one benchmark updates its section only. Each
benchmark's section is a module of this package (its ``TITLE`` and ``render``); ``markdown``
holds what they are made of.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

from wbsync_bench import plots
from wbsync_bench import soak as soak_bench
from wbsync_bench.common import rounded
from wbsync_bench.docs import (
    capacity,
    data,
    fanout,
    feed,
    lateness,
    limiter,
    page,
    reschedule,
    scale,
    scaleout,
    slots,
    slots_reports,
    soak,
    status,
)
from wbsync_bench.docs.markdown import meta

SECTIONS: dict[str, ModuleType] = {
    "slots": slots,
    "slots_reports": slots_reports,
    "limiter": limiter,
    "reschedule": reschedule,
    "lateness": lateness,
    "scale": scale,
    "fanout": fanout,
    "status": status,
    "scaleout": scaleout,
    "page": page,
    "capacity": capacity,
    "data": data,
    "feed": feed,
    "soak": soak,
}
"""Each benchmark's section, in the page's order."""
ORDER = tuple(SECTIONS)

_HEADER = """# Benchmarks

The benchmarks are the package `wbsync-bench` in [benchmarks/](../benchmarks) (`wbsync_bench`),
beside wbsync and not part of its distribution: `make bench` (and the install step of every
`make` target) installs it, elsewhere `pip install -e benchmarks` from the repository. It adds
the command `wbsync bench` (the entry-point group `wbsync.commands`, docs/extending.md) and
brings the libraries only benchmarks use (limits, pyrate-limiter, httpx, matplotlib): wbsync's
former `bench` extra is gone. `python -m wbsync_bench` runs the same commands on its own.

Measured by `wbsync bench` (`make bench` runs `wbsync bench all --write-docs`). Every benchmark
uses the real stack: Redis (`WBSYNC_REDIS_URL`, else a private embedded `redis-server`), BullMQ
workers, and, where WB is called, the real `WbClient` against the WB emulator served by uvicorn
in a child process on loopback. Comparisons are measured in the same run, interleaved: the
implementations or modes alternate in rounds (ABBA order), so a machine that slows down during
the run does not favour one side. Medians are over rounds; latency percentiles over every call.
Each section names the command that produced it and the machine it ran on; the raw results are
in `benchmarks.json`. Regenerate with `make bench` (about 20 minutes on the machine below: the
first five benchmarks about 7, fanout (a pass over 10,000 cabinets and its live repeat, 3
runs) about 10 s, page about 2 on SQLite alone, capacity 2-3 minutes per N, 5 to 20
in all: it stops at the first N a whole interval late; data, feed and soak
at `all`'s sizes about 5; `wbsync bench all
--postgres URL` measures page on PostgreSQL too and runs capacity on it). `all` runs scale with
1,000 cabinets, and `wbsync bench scale --write-docs` adds the 10,000-cabinet run, about 7
minutes more. `status` and `scaleout` run on their own (`wbsync bench status --write-docs`,
about 10 s; `wbsync bench scaleout --write-docs`, about 20 minutes at its default 1,000
cabinets); each scaleout configuration (cabinets, jobs per queue per process) keeps its own
section. The report tasks' slots run on their own too (`wbsync bench slots --scenario reports
--write-docs`, 3 rounds of about a minute and ten seconds at its defaults). `all` runs the change
feed's benchmarks small (data: 10 cabinets, 3 runs; feed: up to
100,000 rows; soak: one simulated day); their full sizes run on their own, each size keeping its
section: `wbsync bench data --cabinets 100 --runs 10 --postgres <admin URL> --write-docs`,
`wbsync bench feed --postgres <admin URL> --write-docs` (up to 1,000,000 rows) and
`wbsync bench soak --postgres <admin URL> --write-docs` (a simulated week, about 5 minutes).

The machine is small and shared: two cores for Redis, the benchmark, the emulator and whatever
else runs (other test suites ran alongside, load average 2-3; page and capacity ran with load
average 4-11, two to five busy processes per core, which slows every CPU-second and lengthens
every wait, so their absolute CPU figures and lags are worse than on a quiet machine; sections
measured since the load average was recorded give it). Absolute throughput is therefore low and
moves by tens of percent between runs; read the ratios measured within one run, and the counts
(commands, requests, 429s, attempts), which do not depend on load.
"""
_PLOTS = {
    "slots": (plots.slots_plot, "bench-slots.png"),
    "limiter": (plots.limiter_plot, "bench-limiter.png"),
    "lateness": (plots.lateness_plot, "bench-lateness.png"),
    "page": (plots.page_plot, "bench-page.png"),
    "capacity": (plots.capacity_plot, "bench-capacity.png"),
    "soak": (soak_bench.plot, "bench-soak.png"),
}


def write_docs(results: dict[str, dict[str, Any]], *, docs_dir: Path, command: str) -> None:
    """Merge ``results`` into ``docs_dir``'s benchmarks.json; render the page and plots."""
    from datetime import UTC, datetime

    docs_dir.mkdir(parents=True, exist_ok=True)
    store = docs_dir / "benchmarks.json"
    merged: dict[str, Any] = json.loads(store.read_text("utf-8")) if store.exists() else {}
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    for name, result in results.items():
        entry = rounded({**result, "command": command, "measured_at": stamp})
        merged[_store_key(name, result)] = entry
        if name == "slots" and "sweep" in result:
            merged["slots_sweep"] = entry  # kept until the next sweep: plain runs have none
        if name == "scaleout":
            plots.scaleout_plot(result, docs_dir / scaleout.plot_name(result))
        if name in _PLOTS:
            plot, file = _PLOTS[name]
            plot(merged.get("slots_sweep", result) if name == "slots" else result, docs_dir / file)
    store.write_text(json.dumps(merged, indent=1, ensure_ascii=False) + "\n", "utf-8")
    sections = [_HEADER]
    for name in ORDER:
        for key in sorted(
            (k for k in merged if k == name or k.startswith(f"{name}@")), key=_size_order
        ):
            entry = merged[key]
            sections.append(
                f"## {SECTIONS[name].TITLE}{_size_title(key)}\n\n{meta(entry)}\n\n"
                f"{SECTIONS[name].render(entry)}\n"
            )
        if name == "slots" and "slots_sweep" in merged:
            sweep = merged["slots_sweep"]
            sections.append(
                f"### slots: makespan against K\n\n{meta(sweep)}\n\n{slots.render_sweep(sweep)}\n"
            )
    (docs_dir / "benchmarks.md").write_text("\n".join(sections), "utf-8")


def _store_key(name: str, result: dict[str, Any]) -> str:
    # Runs of different sizes are kept side by side: make bench runs a small scale.
    if name in ("scale", "fanout"):
        return f"{name}@{result['cabinets']}"
    if name == "scaleout":
        p = result["params"]
        return f"{name}@{p['cabinets']}:{p['concurrency']}"
    if name in ("data", "soak"):  # `all` runs them smaller: each size keeps its section
        return f"{name}@{result['params']['cabinets']}"
    if name == "feed":
        return f"{name}@{max(result['params']['sizes'])}"
    return name


def _size_order(key: str) -> tuple[int, ...]:
    return tuple(int(n) for n in key.split("@", 1)[1].split(":")) if "@" in key else ()


def _size_title(key: str) -> str:
    if "@" not in key:
        return ""
    sizes = [int(n) for n in key.split("@", 1)[1].split(":")]
    per_queue = f", {sizes[1]} per queue per process" if len(sizes) > 1 else ""
    unit = "rows" if key.startswith("feed@") else "cabinets"
    return f" ({sizes[0]:,} {unit}{per_queue})"
