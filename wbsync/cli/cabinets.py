"""``wbsync cabinets``: add, import, list, rename, (de)activate and remove cabinets, replace
their tokens."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from wbsync.cli.running import (
    EXIT_CONFIG,
    EXIT_FAILED,
    configured_settings,
    fail,
    open_store,
    run_async,
)
from wbsync.errors import WbSyncError

app = typer.Typer(help="Manage cabinets (seller accounts and their WB tokens).")


@app.command("add")
def cabinets_add(
    name: Annotated[str, typer.Argument(help="A name of your choice for the cabinet.")],
    token: Annotated[
        str | None,
        typer.Option(help="The WB API token; omit it to be asked (input hidden) or pipe it."),
    ] = None,
) -> None:
    """Store a cabinet with its WB token (encrypted with WBSYNC_SECRET_KEY)."""
    from wbsync.wb.tokens import parse_token

    raw = _read_token(token)
    try:
        parsed = parse_token(raw, cabinet=name)
    except WbSyncError as exc:
        fail(str(exc))

    async def go() -> None:
        async with open_store() as store:
            cabinet = await store.cabinets.add(name, raw, parsed.seller_id)
        typer.echo(f"added cabinet {cabinet.id} {cabinet.name!r} (seller {cabinet.seller_id})")
        _tell_unserved(parsed)

    run_async(go)


def _read_token(token: str | None) -> str:
    """The token given, else one line of stdin, else a hidden prompt; stripped."""
    if token is None:
        token = (
            sys.stdin.readline()
            if not sys.stdin.isatty()
            else typer.prompt("WB token", hide_input=True)
        )
    return token.strip()


def _tell_unserved(token: Any) -> None:
    """Say which queues the token cannot serve (each cabinet's runs of them fail until fixed)."""
    from wbsync.syncs import unserved_queues

    for queue, why in unserved_queues(token).items():
        typer.echo(f"warning: {queue}: {why}", err=True)


def cabinet_ref(ref: str) -> int | str:
    """A cabinet's id (all digits) or else its name, as the store looks cabinets up."""
    return int(ref) if ref.isdigit() else ref


@app.command("token")
def cabinets_token(
    ref: Annotated[str, typer.Argument(help="The cabinet's id or name.")],
    token: Annotated[
        str | None,
        typer.Option(help="The new WB API token; omit it to be asked (input hidden) or pipe it."),
    ] = None,
) -> None:
    """Replace a cabinet's token (same seller); its rows, cursors and runs stay."""
    from wbsync.wb.tokens import parse_token

    raw = _read_token(token)
    try:
        parsed = parse_token(raw, cabinet=ref)
    except WbSyncError as exc:
        fail(str(exc))

    async def go() -> None:
        async with open_store() as store:
            cabinet = await store.cabinets.replace_token(cabinet_ref(ref), raw, parsed.seller_id)
        typer.echo(f"replaced the token of cabinet {cabinet.id} {cabinet.name!r}")
        _tell_unserved(parsed)

    run_async(go)


@app.command("activate")
def cabinets_activate(
    ref: Annotated[str, typer.Argument(help="The cabinet's id or name.")],
) -> None:
    """Sync a deactivated cabinet again."""

    async def go() -> None:
        async with open_store() as store:
            cabinet = await store.cabinets.set_active(cabinet_ref(ref), True)
        typer.echo(f"activated cabinet {cabinet.id} {cabinet.name!r}")

    run_async(go)


@app.command("rename")
def cabinets_rename(
    ref: Annotated[str, typer.Argument(help="The cabinet's id or name.")],
    new_name: Annotated[str, typer.Argument(help="Its new name.")],
) -> None:
    """Give a cabinet a new name."""

    async def go() -> None:
        async with open_store() as store:
            cabinet = await store.cabinets.rename(cabinet_ref(ref), new_name)
        typer.echo(f"renamed cabinet {cabinet.id} to {cabinet.name!r}")

    run_async(go)


@app.command("import")
def cabinets_import(
    source: Annotated[
        str, typer.Argument(help="A CSV (name,token) or JSON lines file; - = stdin.")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Add many cabinets in one transaction; report what was added, skipped and refused.

    Exit status 1 when any line was refused (the others are added all the same).
    """
    from wbsync.cabinet_import import import_cabinets

    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read {source}: {exc}", code=EXIT_CONFIG)

    async def go() -> Any:
        async with open_store() as store:
            return await import_cabinets(store.cabinets, text)

    report = run_async(go)
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=1))
    else:
        typer.echo(
            f"added {len(report.added)}, skipped {len(report.skipped)}, "
            f"refused {len(report.refused)}"
        )
        for kind in ("skipped", "refused"):
            for entry in getattr(report, kind):
                name = f" {entry['name']!r}" if entry["name"] else ""
                typer.echo(f"{kind}: line {entry['line']}{name}: {entry['reason']}")
        for name, gaps in report.unserved.items():
            for queue, why in gaps.items():
                typer.echo(f"warning: {name!r}: {queue}: {why}", err=True)
    if report.refused:
        raise typer.Exit(EXIT_FAILED)


@app.command("list")
def cabinets_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
) -> None:
    """List cabinets (tokens are never shown)."""

    async def go() -> None:
        async with open_store() as store:
            rows = await store.cabinets.list()
        if as_json:
            typer.echo(
                json.dumps(
                    [
                        {
                            "id": c.id,
                            "name": c.name,
                            "seller_id": c.seller_id,
                            "active": c.active,
                            "created_at": c.created_at.isoformat(),
                        }
                        for c in rows
                    ],
                    indent=1,
                )
            )
            return
        table = Table("id", "name", "seller", "active", "created")
        for c in rows:
            table.add_row(
                str(c.id),
                c.name,
                c.seller_id,
                "yes" if c.active else "no",
                c.created_at.isoformat(timespec="seconds"),
            )
        # Piped, rich would fit the table to 80 columns and cut seller ids: never cut them.
        Console(width=None if sys.stdout.isatty() else 10_000).print(table)

    run_async(go)


@app.command("remove")
def cabinets_remove(
    ref: Annotated[str, typer.Argument(help="The cabinet's id or name.")],
) -> None:
    """Remove a cabinet: its rows become deletes in the change feed (tombstones, pruned after
    their grace with the cabinet's record). Run it again to finish an interrupted removal."""

    async def go() -> None:
        settings = configured_settings()
        if settings.redis_url is None:  # the feed has the deletes; the stream's doorbell not
            typer.echo("WBSYNC_REDIS_URL is not set: no change stream events sent", err=True)
            async with open_store() as store:
                cabinet = await store.remove_cabinet(cabinet_ref(ref))
        else:
            from wbsync.runtime import open_runtime

            async with open_runtime(settings) as runtime:
                cabinet = await runtime.store.remove_cabinet(cabinet_ref(ref))
        typer.echo(f"removed cabinet {ref} (id {cabinet.id}): its rows are tombstoned")

    run_async(go)


@app.command("deactivate")
def cabinets_deactivate(
    ref: Annotated[str, typer.Argument(help="The cabinet's id or name.")],
) -> None:
    """Stop syncing a cabinet, keeping its data."""

    async def go() -> None:
        async with open_store() as store:
            await store.cabinets.deactivate(cabinet_ref(ref))
        typer.echo(f"deactivated cabinet {ref}")

    run_async(go)
