"""``wbsync cabinets``: add, import, list, rename, (de)activate and remove cabinets, replace
their tokens, check them against WB."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from wbsync.cli import checks
from wbsync.cli.running import (
    EXIT_CONFIG,
    EXIT_FAILED,
    configured_settings,
    fail,
    open_store,
    operator,
    run_async,
)
from wbsync.errors import WbSyncError

_CHECK_HELP = (
    "Ask WB first (/ping of each section, seller info, through the shared buckets; needs "
    "WBSYNC_REDIS_URL); a token WB refuses is not stored (exit 2)."
)

app = typer.Typer(help="Manage cabinets (seller accounts and their WB tokens).")


@app.command("add")
def cabinets_add(
    name: Annotated[str, typer.Argument(help="A name of your choice for the cabinet.")],
    token: Annotated[
        str | None,
        typer.Option(help="The WB API token; omit it to be asked (input hidden) or pipe it."),
    ] = None,
    check: Annotated[bool, typer.Option("--check", help=_CHECK_HELP)] = False,
) -> None:
    """Store a cabinet with its WB token (encrypted with WBSYNC_SECRET_KEY)."""
    from wbsync.wb.tokens import parse_token

    raw = _read_token(token)
    try:
        parsed = parse_token(raw, cabinet=name)
    except WbSyncError as exc:
        fail(str(exc))
    if check:
        _checked_first([(name, raw)])

    async def go() -> None:
        async with open_store() as store:
            cabinet = await store.cabinets.add(
                name, raw, parsed.seller_id, token_expires_at=parsed.expires_at
            )
        typer.echo(f"added cabinet {cabinet.id} {cabinet.name!r} (seller {cabinet.seller_id})")
        _tell_unserved(parsed)

    run_async(go)


def _checked_first(named: list[tuple[str, str]]) -> None:
    """Check tokens with WB before storing them: print each report; refuse (exit 2) when WB
    refused any, fail (exit 1) when any could not be checked."""
    results = run_async(lambda: checks.check_tokens(named))
    for result in results:
        for line in checks.render(result):
            typer.echo(line)
    checks.warn_expiry(results)
    refused = [r for r in results if r.refused]
    for result in refused:
        typer.echo(f"refused: {result.name!r}: {result.why_not()}", err=True)
    if refused:
        fail("WB refused the token; nothing stored", code=EXIT_CONFIG)
    unsure = [r for r in results if not r.ok]
    if unsure:
        why = "; ".join(f"{r.name!r}: {r.why_not()}" for r in unsure)
        fail(f"could not check the token ({why}); nothing stored")


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
            cabinet = await store.cabinets.replace_token(
                cabinet_ref(ref), raw, parsed.seller_id, token_expires_at=parsed.expires_at
            )
        typer.echo(f"replaced the token of cabinet {cabinet.id} {cabinet.name!r}")
        _tell_unserved(parsed)

    run_async(go)


@app.command("resume")
def cabinets_resume(
    ref: Annotated[str, typer.Argument(help="The cabinet's id or name.")],
    section: Annotated[
        str | None,
        typer.Option(help="Lift only this WB section's suspension (e.g. statistics)."),
    ] = None,
) -> None:
    """Lift a cabinet's suspensions (what WB refused for good), all or one section's; its jobs
    continue from their cursors at the fan-out's next read."""
    from wbsync.cabinets.suspending import resume

    async def go() -> None:
        async with open_store() as store:
            cabinet = await store.cabinets.get(cabinet_ref(ref))
            lifted = await resume(store, cabinet, section, by=operator())
        where = f" in section {section}" if section else ""
        if not lifted:
            typer.echo(f"cabinet {cabinet.id} {cabinet.name!r}: nothing suspended{where}")
        for s in lifted:
            said = f" (WB said: {s.words})" if s.words else ""
            typer.echo(
                f"cabinet {cabinet.id} {cabinet.name!r}: lifted {s.section or 'whole cabinet'} "
                f"{s.kind}{said}"
            )

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
    check: Annotated[bool, typer.Option("--check", help=_CHECK_HELP)] = False,
) -> None:
    """Add many cabinets in one transaction; report what was added, skipped and refused.

    Exit status 1 when any line was refused (the others are added all the same). With
    ``--check`` every token goes to WB first, and one WB refuses stores nothing (exit 2).
    """
    from wbsync.cabinets.cabinet_import import import_cabinets, parse_lines

    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read {source}: {exc}", code=EXIT_CONFIG)
    if check:
        good, _ = parse_lines(text)
        _checked_first([(cabinet.name, cabinet.token) for _, cabinet, _ in good])

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
        for line in _unserved_summary(report.unserved):
            typer.echo(line, err=True)
    if report.refused:
        raise typer.Exit(EXIT_FAILED)


#: Cabinets an import's warning names before it says "and N more" (``--json`` names them all).
UNSERVED_NAMED = 3


def _unserved_summary(unserved: dict[str, dict[str, str]]) -> list[str]:
    """One warning per (queue, reason) with how many imported cabinets it applies to: one
    line per cabinet and queue would bury the report under thousands."""
    by_gap: dict[tuple[str, str], list[str]] = {}
    for name, gaps in unserved.items():
        for queue, why in gaps.items():
            by_gap.setdefault((queue, why), []).append(name)
    lines = []
    for (queue, why), names in by_gap.items():
        shown = ", ".join(repr(n) for n in names[:UNSERVED_NAMED])
        more = f" and {len(names) - UNSERVED_NAMED} more" if len(names) > UNSERVED_NAMED else ""
        count = f"{len(names)} cabinet{'s' if len(names) != 1 else ''}"
        lines.append(f"warning: {queue}: {why}: {count} ({shown}{more}; --json lists them)")
    return lines


@app.command("check")
def cabinets_check(
    ref: Annotated[str | None, typer.Argument(help="The cabinet's id or name (or --all).")] = None,
    every: Annotated[bool, typer.Option("--all", help="Check every cabinet.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check cabinets' tokens with WB: each section's /ping and the seller information.

    Exit status 0 when every section took the token and it is the cabinet's seller's; 1 when any
    section refused it or could not be checked, or the token is another seller's.
    """
    if (ref is None) != every:
        fail("name one cabinet, or pass --all", code=EXIT_CONFIG)
    target = None if ref is None else cabinet_ref(ref)
    results = run_async(lambda: checks.check_cabinets(target))
    good = all(r.ok for r in results)
    if as_json:
        report = {"ok": good, "cabinets": [r.as_dict() for r in results]}
        typer.echo(json.dumps(report, indent=1, ensure_ascii=False))
    else:
        for result in results:
            for line in checks.render(result):
                typer.echo(line)
    checks.warn_expiry(results)
    if not good:
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
            from wbsync.shared.runtime import open_runtime

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
