"""The ``fanout`` section of docs/benchmarks.md: one fan-out pass over N cabinets."""

from __future__ import annotations

from typing import Any

from wbsync_bench.docs.markdown import check, fmt, table
from wbsync_bench.fanout import COLUMNS, row

TITLE = "fanout: one fan-out pass, its round trips and wall time"


def render(r: dict[str, Any]) -> str:
    p, cases, bound = r["params"], r["cases"], r["round_trip_bound"]
    n = r["cabinets"]
    due, live = cases["due"], cases["live"]
    return "\n".join(
        [
            f"One leader's pass (`FanOut.fan_out_due`) over {n:,} active cabinets on a private "
            "embedded Redis (unless `--redis`), its schedule set one interval "
            f"({fmt(p['interval_s'])} s) back, so every cabinet is due, each at its own time in "
            "the interval: the *due* pass adds them all. The *live* pass follows on the same "
            "queue over the same due times: every job is still waiting, so it adds none. Each "
            f"of {p['runs']} run(s) uses a queue of its own; figures are medians "
            "(`round_trips_max` the highest), `added` and `waiting_after` each run's values. "
            "Round trips are the client's sends to Redis (one per command, one per pipeline), "
            "counted at redis-py's connection for the pass's own task only; the connections "
            "are open before the pass. The bound is ceil(N / "
            f"{p['enqueue_batch']:,}) x {p['round_trips_per_batch']} + "
            f"{p['round_trips_per_pass']}: the due pass takes per batch of cabinets a pipelined "
            "EXISTS, redis-py's SCRIPT EXISTS before a pipeline of scripts and the pipelined "
            "`addBulk`, and per pass the schedule's read and write; the live pass per batch the "
            "EXISTS only, and per pass the schedule's read and write and one read of the "
            "queue's job states (SCRIPT EXISTS and the script); either loads a script once on a "
            "fresh server (one more in the first run). On a Redis Cluster the adds are one call "
            "each: the bound is for one server.",
            "",
            table(["pass", *COLUMNS], [row(case, figures) for case, figures in cases.items()]),
            "",
            f"Targets: round trips per pass <= {bound}: "
            f"{check(max(due['round_trips_max'], live['round_trips_max']) <= bound)}; every "
            f"cabinet added once: {check(due['added'] == due['waiting_after'] == [n])}; the "
            f"live pass adds none: {check(live['added'] == [0] and live['waiting_after'] == [n])}.",
        ]
    )
