"""The ``status`` section of docs/benchmarks.md: the status page under concurrent readers."""

from __future__ import annotations

from typing import Any

from wbsync_bench.docs.markdown import check, table

TITLE = "status: the status page under concurrent readers"


def render(r: dict[str, Any]) -> str:
    rows = [
        [
            "cabinets, jobs, concurrent readers",
            f"{r['cabinets']:,}, {r['jobs']:,}, {r['readers']}",
        ],
        ["cabinets inserted (`add_many`, one transaction)", f"{r['insert_cabinets_s']:.2f} s"],
        [
            "status page, first page: p50 / p95",
            f"{r['page_p50_ms']:.0f} ms / {r['page_p95_ms']:.0f} ms",
        ],
        [
            "`/api/v1/status`, first page: p50 / p95",
            f"{r['api_p50_ms']:.0f} ms / {r['api_p95_ms']:.0f} ms",
        ],
        ["5xx replies", f"{r['errors_5xx']} (non-200: {r['non_200']})"],
        ["machine load average while measured", f"{r['load_average']:.1f}"],
    ]
    worst = max(r["page_p95_ms"], r["api_p95_ms"])
    return "\n".join(
        [
            "A fresh SQLite database gets the cabinets in one transaction; the seven long queues "
            "get one job per cabinet (four queues' jobs waiting, three queues' delayed); 1 % of "
            "the cabinets are suspended as a whole, 1 % in a section, 5 % have a token expiring "
            "in 3 days and 2 % an expired one, so the needs-attention panel is full. "
            "`wbsync api` runs in a child process on loopback; after one warm-up read of each "
            "(the process's first read builds its status index), the readers, each in a loop, "
            "alternately load the page's first page and `/api/v1/status` with the bearer key. "
            "Every reply's latency is recorded; the load average is the machine's while the "
            "readers ran (other work on the two cores slows every figure).",
            "",
            table(["measure", "value"], rows),
            "",
            f"Target p95 <= 300 ms with no 5xx: {check(worst <= 300 and r['errors_5xx'] == 0)}.",
        ]
    )
