"""``wbsync export``: a dataset's change feed to stdout."""

from __future__ import annotations

import sys
from typing import Annotated, Literal

import typer

from wbsync.cli.cabinets import cabinet_ref
from wbsync.cli.running import EXIT_CONFIG, configured_settings, fail, open_store, run_async


def export(
    dataset: Annotated[str, typer.Argument(help="The dataset, e.g. stocks (see docs/data.md).")],
    cabinet: Annotated[
        str | None, typer.Option(help="Only this cabinet's changes (its id or name).")
    ] = None,
    after: Annotated[
        str,
        typer.Option(
            help="Start after this cursor: the last line's seq, or the token <dataset>:<seq> "
            "(checked against the dataset)."
        ),
    ] = "0",
    fmt: Annotated[str, typer.Option("--format", help="jsonl or csv.")] = "jsonl",
) -> None:
    """Write a dataset's change feed to stdout (inserts, updates, tombstones in seq order)."""
    if fmt not in ("jsonl", "csv"):
        fail(f"--format must be jsonl or csv, got {fmt!r}", code=EXIT_CONFIG)
    from wbsync.cabinets.export import export_changes
    from wbsync.store.datasets import dataset as find_dataset

    fmt_: Literal["jsonl", "csv"] = "csv" if fmt == "csv" else "jsonl"

    async def go() -> None:
        configured_settings()  # loads the plugins first: their datasets are exported too
        ds = find_dataset(dataset)
        async with open_store(verify=False) as store:
            cabinet_id = (
                None
                if cabinet is None
                else (await store.cabinets.get(cabinet_ref(cabinet), removed=True)).id
            )
            stats = await export_changes(
                store, ds, sys.stdout, cabinet_id=cabinet_id, after=after, fmt=fmt_
            )
        last = stats.last_seq if stats.last_seq is not None else after
        typer.echo(f"{stats.rows} changes; next --after {last}", err=True)

    run_async(go)
