"""The ``data`` section of docs/benchmarks.md: rows written when every sync runs again on unchanged
data.
"""

from __future__ import annotations

from typing import Any

from wbsync_bench.docs.markdown import check, table

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
    if r.get("check"):
        c = r["check"]
        lines += [
            "",
            f"Dead tuples of the dataset tables: {c['dead_tuples']:,} against "
            f"{c['really_changed']:,} rows that really changed (every write wbsync counted, "
            "tombstones included, less the rows the tables hold at the end, each inserted "
            f"once): ratio {c['ratio']:.3f}; within {c['tolerance']:.0%}: {check(c['met'])}. "
            "The bookkeeping tables' dead tuples, "
            f"{sum(v['dead'] for v in r['postgres'].values() if 'rows' not in v):,}, are one "
            "row version per snapshot run and per snapshot page (whatever the rows) and per "
            "sequence or cursor update (HOT, mostly reclaimed by page pruning).",
        ]
    return "\n".join(lines)
