"""The Markdown every section of docs/benchmarks.md is made of: figures, tables, the run's
line (command, machine, load) and a target's verdict.
"""

from __future__ import annotations

import math
from typing import Any


def fmt(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.{digits}g}"
    return str(value)


def table(columns: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def meta(r: dict[str, Any]) -> str:
    m = r.get("machine", {})
    return (
        f"Command: `{r.get('command', '?')}` ({r.get('measured_at', '?')}, "
        f"{fmt(r.get('wall_s'))} s). Machine: {m.get('cpu')}, {m.get('cores')} cores, "
        f"Python {m.get('python')}, Redis {m.get('redis')}, {m.get('os')}"
        + (
            f"; load average {', '.join(f'{x:g}' for x in m['load_average'])} at the end "
            "(1, 5, 15 min)."
            if m.get("load_average")
            else "."
        )
    )


def check(ok: bool) -> str:
    return "met" if ok else "**missed**"
