"""What this installation is: ``wbsync settings``, ``wbsync plugins`` and ``wbsync migrate``
(the database schema)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from wbsync.cli.running import configured_settings, open_database, run_async

if TYPE_CHECKING:
    from wbsync.store.migrator import Migration


def settings_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON object.")] = False,
    markdown: Annotated[
        bool,
        typer.Option("--markdown", help="Print the settings reference (docs/settings.md)."),
    ] = False,
) -> None:
    """Every setting with its current value (secrets masked) and what it means."""
    if markdown:
        from wbsync.settings_doc import settings_markdown

        typer.echo(settings_markdown(), nl=False)
        return
    rows = configured_settings().described()
    if as_json:
        typer.echo(json.dumps({name: value for name, value, _ in rows}, indent=1))
        return
    table = Table("variable", "value", "meaning")
    for row in rows:
        table.add_row(*row)
    Console(width=None if sys.stdout.isatty() else 200).print(table)


def plugins(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
) -> None:
    """The installed plugins: which are loaded (WBSYNC_PLUGINS) and what each declared."""
    settings = configured_settings()
    from wbsync import plugins as loader

    loaded = {(p.group, p.name): p for p in loader.loaded()}
    installed = [(group, ep) for group in loader.GROUPS for ep in loader.installed(group)]
    rows = [(group, ep, loaded.get((group, ep.name))) for group, ep in installed]
    if as_json:
        listing = [
            {
                "group": group,
                "name": ep.name,
                "value": ep.value,
                "loaded": one is not None,
                "declared": one.declared if one else {},
            }
            for group, ep, one in rows
        ]
        typer.echo(json.dumps(listing, indent=1))
        return
    if not rows:
        typer.echo("no plugins installed (entry-point groups: " + ", ".join(loader.GROUPS) + ")")
        return
    table = Table("group", "plugin", "entry point", "loaded", "declares")
    allowed = "all installed" if settings.plugins is None else "WBSYNC_PLUGINS"
    for group, ep, one in rows:
        declared = one.declared if one else {}
        table.add_row(
            group,
            f"{ep.name} ({one.dist})" if one else ep.name,
            ep.value,
            "yes" if one else f"no (not in {allowed})",
            "; ".join(f"{kind}: {', '.join(keys)}" for kind, keys in declared.items()),
        )
    Console(width=None if sys.stdout.isatty() else 200).print(table)


def migrate() -> None:
    """Create or upgrade the database schema to the latest version (waits for another
    process's migration of the same database instead of racing it)."""

    async def go() -> Migration:
        async with open_database() as db:
            return await db.migrate()

    typer.echo(str(run_async(go)))
