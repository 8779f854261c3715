"""What this installation is: ``wbsync settings``, ``wbsync plugins`` and ``wbsync migrate``
(the database schema)."""

from __future__ import annotations

import json
import sys
from collections.abc import Collection
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from wbsync.cli.running import EXIT_CONFIG, configured_settings, fail, open_database, run_async
from wbsync.errors import ConfigError

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
        from wbsync.config.settings_doc import settings_markdown

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
    """The installed plugins: which are loaded (WBSYNC_PLUGINS), what each declared, and why
    a refused one was refused; exit status 2 after the listing when the start was refused."""
    from wbsync.catalog import plugins as loader

    problem, allow = _start()
    refused = loader.diagnose(allow=allow) if problem and not loader.loaded() else {}
    rows = _plugin_rows(problem, allow, refused)
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
    elif not rows:
        typer.echo("no plugins installed (entry-point groups: " + ", ".join(loader.GROUPS) + ")")
    else:
        table = Table("group", "plugin", "entry point", "state", "declares")
        for row in rows:
            declared = row["declared"].items()
            declares = "; ".join(f"{kind}: {', '.join(keys)}" for kind, keys in declared)
            state = f"{row['state']}: {row['error']}" if row["error"] else row["state"]
            plugin = f"{row['name']} ({row['dist']})" if row["dist"] else row["name"]
            table.add_row(row["group"], plugin, row["value"], state, declares)
        Console(width=None if sys.stdout.isatty() else 200).print(table)
    if problem:
        fail(problem, code=EXIT_CONFIG)


def _start() -> tuple[str | None, Collection[str] | None]:
    """The start's refusal (None when it started), and the allow-list (None: every plugin)."""
    from wbsync.config import get_settings

    try:
        configured_settings()
    except ConfigError as exc:
        problem: str | None = str(exc)
    else:
        problem = None
    try:
        return problem, get_settings().plugins
    except ConfigError:
        return problem, None


def _plugin_rows(
    problem: str | None, allow: Collection[str] | None, refused: dict[tuple[str, str], str]
) -> list[dict[str, Any]]:
    """One row per installed entry point: ``state`` loaded, not allowed, refused (``error``
    says why) or not loaded because another was refused."""
    from wbsync.catalog import plugins as loader

    loaded = {(p.group, p.name): p for p in loader.loaded()}
    rows = []
    for group in loader.GROUPS:
        for ep in loader.installed(group):
            one = loaded.get((group, ep.name))
            error = refused.get((group, ep.name))
            if error is None and problem and problem.startswith(f"plugin {ep.name!r}"):
                error = problem  # refused beside another plugin (a clash between the two)
            if one is not None:
                state = "loaded"
            elif allow is not None and ep.name not in allow:
                state = "not allowed (WBSYNC_PLUGINS)"
            else:
                state = "refused" if error else "not loaded (the start was refused)"
            rows.append(
                {
                    "group": group,
                    "name": ep.name,
                    "value": ep.value,
                    "dist": one.dist if one else None,
                    "loaded": one is not None,
                    "state": state,
                    "error": error,
                    "declared": one.declared if one else {},
                }
            )
    return rows


def migrate() -> None:
    """Create or upgrade the database schema to the latest version (waits for another
    process's migration of the same database instead of racing it)."""

    async def go() -> Migration:
        async with open_database() as db:
            return await db.migrate()

    typer.echo(str(run_async(go)))
