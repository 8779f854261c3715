"""The soak's dated datasets on its scaled calendar: days kept against retention, rows per day.

The soak runs the emulator and the workers on one scaled calendar (``wbsync.system.clock``): every
simulated day is a calendar day, so the syncs ask for new days, the emulator serves them, and
the retention pass ages days out. Per dated dataset (``retention_days`` and a date key in the
registry), each sample notes its rows, distinct days, oldest and newest day (tombstones
included: pruning removes both), and the calendar's today.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from wbsync.store import DATASETS
from wbsync.store.schema import dataset_table

__all__ = ["dated_datasets", "render", "retention", "sample"]


def dated_datasets() -> list[str]:
    """The registered datasets kept by date: a retention and a date key."""
    return sorted(
        name
        for name, ds in DATASETS.items()
        if ds.retention_days is not None and ds.date_column is not None
    )


async def sample(conn: AsyncConnection) -> dict[str, dict[str, Any]]:
    """Per dated dataset: rows, distinct days, oldest and newest day (ISO), now."""
    out: dict[str, dict[str, Any]] = {}
    for name in dated_datasets():
        ds = DATASETS[name]
        assert ds.date_column is not None
        table = dataset_table(ds)
        day = table.c[ds.date_column]
        row = (
            await conn.execute(
                select(func.count(), func.count(day.distinct()), func.min(day), func.max(day))
            )
        ).one()
        out[name] = {"rows": int(row[0]), "days": int(row[1]), "oldest": row[2], "newest": row[3]}
    return out


def retention(samples: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per dated dataset, at the half and at the end: days kept, the oldest day's age against
    the retention, rows per day kept; ``within``: no sample held a day past retention (a pass
    runs every scaled hour, so a day may outlive its cutoff by that long: one day of slack)."""
    half, end = samples[len(samples) // 2], samples[-1]
    out: dict[str, dict[str, Any]] = {}
    for name in dated_datasets():
        keep = DATASETS[name].retention_days
        assert keep is not None
        ages = [_age(s, name) for s in samples if s["dated"][name]["oldest"] is not None]
        h, e = half["dated"][name], end["dated"][name]
        out[name] = {
            "retention_days": keep,
            "today_end": end["today"],
            "oldest_end": e["oldest"],
            "newest_end": e["newest"],
            "oldest_age_max": max(ages, default=None),
            "within": all(a <= keep + 1 for a in ages),
            "days_half": h["days"],
            "days_end": e["days"],
            "rows_per_day_half": h["rows"] / h["days"] if h["days"] else 0.0,
            "rows_per_day_end": e["rows"] / e["days"] if e["days"] else 0.0,
        }
    return out


def _age(s: dict[str, Any], name: str) -> int:
    return (date.fromisoformat(s["today"]) - date.fromisoformat(s["dated"][name]["oldest"])).days


def render(result: dict[str, Any], markdown_table: Any) -> str:
    """The soak section's paragraph and table on retention by date."""
    kept = result.get("retention")
    if not kept:
        return ""
    columns = [
        "dataset",
        "retention (days)",
        "days kept at the half",
        "days kept at the end",
        "oldest day's age, max (days)",
        "within retention",
        "rows per day kept, half / end",
    ]
    rows = [
        [
            f"`{name}`",
            k["retention_days"],
            k["days_half"],
            k["days_end"],
            "-" if k["oldest_age_max"] is None else k["oldest_age_max"],
            "yes" if k["within"] else "NO",
            f"{k['rows_per_day_half']:,.1f} / {k['rows_per_day_end']:,.1f}",
        ]
        for name, k in kept.items()
    ]
    p = result["params"]
    return "\n".join(
        [
            "Retention by date: the emulator and the workers share one scaled calendar "
            f"(`WBSYNC_CALENDAR_ORIGIN`, the run's start; a calendar day is "
            f"{86_400 * p['time_scale']:g} real seconds), so each simulated day is a new "
            "calendar day: the syncs' windows move, the emulator serves the new days, the "
            "acceptance coefficients of past days become tombstones, and the retention pass "
            "runs on the calendar's date. Per dated dataset (tombstones included):",
            "",
            markdown_table(columns, rows),
        ]
    )
