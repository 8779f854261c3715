"""``wbsync limits``: WB's penalties in force over every process, and lifting one by hand.

Both read the shared Redis (``WBSYNC_REDIS_URL``: a private embedded one would hold no
penalty) and the database, for the cabinets' names.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from wbsync.cli.cabinets import cabinet_ref
from wbsync.cli.running import configured_settings, fail, operator, run_async

if TYPE_CHECKING:
    from wbsync.shared.runtime import Runtime

app = typer.Typer(help="WB's rate-limit penalties: list them, lift one by hand.")


@asynccontextmanager
async def _runtime(*, logging: bool = False) -> AsyncIterator[Runtime]:
    """A runtime on the configured Redis and database; with ``logging``, the process's log
    lines (a lift's audit line) go to stderr as JSON, as the services' do."""
    from wbsync.observability.logs import configure_logging
    from wbsync.shared.runtime import open_runtime

    settings = configured_settings()
    if logging:
        configure_logging(settings.log_level)
    async with open_runtime(settings) as runtime:
        yield runtime


@app.command("penalties")
def limits_penalties(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
) -> None:
    """List WB's penalties in force now, the longest first, with their sellers' cabinets."""

    async def go() -> list[Any]:
        from wbsync.api.schemas import cabinet_out, penalty_out
        from wbsync.cabinets.penalties import by_seller
        from wbsync.system import clock

        async with _runtime() as runtime:
            found = await runtime.limiter.penalties()
            sellers = by_seller(await runtime.store.cabinets.list())
        now = clock.now_ms()
        found.sort(key=lambda p: -p.until_ms)
        return [
            penalty_out(p, [cabinet_out(c) for c in sellers.get(p.seller, [])], now) for p in found
        ]

    rows = run_async(go)
    if as_json:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in rows], indent=1))
        return
    _print_table(rows)


def _print_table(rows: list[Any]) -> None:
    from wbsync.cabinets.penalties import remaining_text

    if not rows:
        typer.echo("no penalty from WB is in force")
        return
    table = Table("cabinet", "seller", "group", "lifts at", "in", "WB said")
    for p in rows:
        names = ", ".join(f"{c.name} (#{c.id})" for c in p.cabinets) or "(no cabinet)"
        group = f"{p.group} (global limiter)" if p.global_limiter else p.group
        when = p.until.isoformat(timespec="seconds")
        table.add_row(names, p.seller_id, group, when, remaining_text(p.remaining_ms), p.words)
    # Piped, rich would fit the table to 80 columns and cut seller ids: never cut them.
    Console(width=None if sys.stdout.isatty() else 10_000).print(table)


@app.command("lift")
def limits_lift(
    ref: Annotated[str, typer.Argument(help="The cabinet's id or name.", metavar="CABINET")],
    group: Annotated[
        str,
        typer.Argument(
            # The name of wbsync.ratelimit.GLOBAL_GROUP, which --help must not import (a test
            # checks the two agree).
            help="The limit group as `wbsync limits penalties` lists it; `seller` for the "
            "seller's global limiter.",
            metavar="GROUP",
        ),
    ],
) -> None:
    """End the penalty of the cabinet's seller on GROUP for every process, now.

    Every cabinet of that seller is freed. One audit line (WARNING) names who lifted it and
    the time that remained. Exit status 1 when there is no such cabinet, group or penalty.
    """

    async def go() -> Any:
        from wbsync.cabinets import penalties

        try:
            penalties.check_group(group)
        except penalties.GroupUnknown as exc:
            fail(str(exc))
        async with _runtime(logging=True) as runtime:
            cabinet = await runtime.store.cabinets.get(cabinet_ref(ref))
            lifted = await penalties.lift(runtime.limiter, cabinet, group, by=operator())
        if lifted is None:
            fail(
                f"cabinet {cabinet.id} {cabinet.name!r} (seller {cabinet.seller_id}) has no "
                f"penalty in force on {group}"
            )
        typer.echo(
            f"lifted the penalty of cabinet {cabinet.id} {cabinet.name!r} on {group}; "
            f"{penalties.remaining_text(lifted.remaining_ms)} remained"
        )

    run_async(go)
