"""The ``data`` section of docs/benchmarks.md: rows written when every sync runs again on unchanged
data.
"""

from __future__ import annotations

from typing import Any

from wbsync.bench.docs.markdown import table

TITLE = "data: rows written when every sync runs again on unchanged data"


def render(r: dict[str, Any]) -> str:
    p = r["params"]
    columns = ("first_fetched", "first_written", "later_fetched", "later_written", "tombstoned")
    rows = [[f"`{name}`", *(s[c] for c in columns)] for name, s in r["syncs"].items()]
    lines = [
        f"Every sync runs {p['runs']} times for {p['cabinets']} cabinets against the emulator "
        f"({r['database']}), one run after the other; rows WB returned and rows written "
        "(inserted or changed). The emulator's data does not change between runs, except the "
        "bids the autobidder itself moves each run.",
        "",
        table(
            ["sync", "run 1 fetched", "run 1 written", "later fetched", "later written", "gone"],
            rows,
        ),
    ]
    if r["postgres"]:
        counters = [[f"`{n}`", c["ins"], c["upd"], c["dead"]] for n, c in r["postgres"].items()]
        lines += [
            "",
            "PostgreSQL's own counters (`pg_stat_user_tables`) after the runs, autovacuum off: "
            "dead tuples in the dataset tables are the rows that really changed; the "
            "bookkeeping tables add one row version per changed page (`wb_change_sequences`) "
            "and per snapshot page (`wb_snapshot_keys`, `wb_snapshot_runs`).",
            "",
            table(["table", "inserted", "updated", "dead tuples"], counters),
        ]
    return "\n".join(lines)
