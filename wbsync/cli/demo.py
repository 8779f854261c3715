"""``wbsync demo``: every sync once against the bundled emulator, and its summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from wbsync.cli.running import configured_settings, fail, run_async
from wbsync.observability.logs import configure_logging


def demo(
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    cabinets: Annotated[int, typer.Option(min=1, max=50, help="Demo cabinets.")] = 5,
    database: Annotated[Path, typer.Option(help="SQLite file the demo (re)creates.")] = Path(
        "wbsync-demo.db"
    ),
    log_file: Annotated[Path, typer.Option(help="Where the demo's JSON log lines go.")] = Path(
        "wbsync-demo.log"
    ),
) -> None:
    """Every sync once for demo cabinets against the bundled WB emulator (time scale 0.01)."""
    from wbsync.demo.run import run_demo

    settings = configured_settings()
    with log_file.open("w", encoding="utf-8") as stream:
        configure_logging(settings.log_level, stream=stream)
        summary = run_async(
            lambda: run_demo(
                settings,
                cabinets=cabinets,
                database=database.resolve(),
                progress=None if as_json else Console(stderr=True),
            )
        )
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        _print_summary(summary, log_file)
    problems = _demo_problems(summary)
    if problems:
        fail("; ".join(problems))


_SUMMARY_COLUMNS = {  # JSON field: column header
    "pages": "pages",
    "rows_stored": "rows",
    "rows_expected": "expected",
    "deferrals": "deferrals",
    "upstream_429": "429s",
    "slot_sleep_s": "sleep s",
}


def _print_summary(summary: dict[str, Any], log_file: Path) -> None:
    table = Table(title="wbsync demo: summary", title_justify="left")
    table.add_column("queue", no_wrap=True)
    for header in _SUMMARY_COLUMNS.values():
        table.add_column(header, justify="right", no_wrap=True)
    for name, row in summary["queues"].items():
        table.add_row(name, *(str(row[field]) for field in _SUMMARY_COLUMNS))
    console = Console()
    console.print(table)
    console.print(
        f"makespan {summary['makespan_s']} s; lower bound from WB's limits "
        f"{summary['lower_bound_s']} s; {summary['cabinets']} cabinets; logs in {log_file}"
    )


def _demo_problems(summary: dict[str, Any]) -> list[str]:
    problems = [
        f"{name}: stored {row['rows_stored']} rows, emulator holds {row['rows_expected']}"
        for name, row in summary["queues"].items()
        if row["rows_stored"] != row["rows_expected"]
    ]
    if summary["upstream_429_total"]:
        problems.append(f"{summary['upstream_429_total']} upstream 429s")
    if summary["failed_runs"]:
        problems.append(f"{summary['failed_runs']} failed job runs")
    return problems
