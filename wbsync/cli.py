"""The command line: run, api, demo, cabinets, secrets, emulator, bench, migrate, plugins.

Every command that reads the settings loads the plugins first (``wbsync.startup``); the
emulator loads its own plugin group.

Only typer, rich, the standard library and light wbsync modules are imported at the top (and by
the sub-apps' modules): building the command tree for ``--help`` must not load settings,
SQLAlchemy, Redis or the web stack. Each command imports what it runs; a test checks this.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from wbsync.emulator.cli import app as emulator_app
from wbsync.errors import ConfigError, WbSyncError
from wbsync.logs import configure_logging

if TYPE_CHECKING:
    from wbsync.config import Settings
    from wbsync.store import Database, Store
    from wbsync.store.migrator import Migration

T = TypeVar("T")

log = logging.getLogger(__name__)

# Exit statuses: 1 = the command failed; 2 = it was misconfigured and did not start (click uses
# 2 for a misused command line too).
EXIT_FAILED = 1
EXIT_CONFIG = 2


class _OneLineErrors(TyperGroup):
    """Every command, sub-apps included: a ``ConfigError`` is one ``error:`` line and status 2.

    The one place where misconfiguration meets the user, so no command prints a traceback for a
    setting, and no command needs its own handling of it.
    """

    def invoke(self, ctx: Any) -> Any:  # typer's own (vendored) click Context
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            _fail(str(exc), code=EXIT_CONFIG)


app = typer.Typer(
    cls=_OneLineErrors,
    help="Keep many Wildberries seller accounts in sync without stalling on rate limits.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
cabinets_app = typer.Typer(help="Manage cabinets (seller accounts and their WB tokens).")
app.add_typer(cabinets_app, name="cabinets")
secrets_app = typer.Typer(help="Manage WBSYNC_SECRET_KEY, the key that encrypts cabinet tokens.")
app.add_typer(secrets_app, name="secrets")
app.add_typer(emulator_app, name="emulator")


def _settings() -> Settings:
    """The settings, with the plugins loaded and every name checked: each command's start."""
    from wbsync.startup import load_settings

    return load_settings()  # a ConfigError is reported by _OneLineErrors


def _fail(message: str, *, code: int = EXIT_FAILED) -> NoReturn:
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {message}", highlight=False)
    raise typer.Exit(code)


def _run(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine; our errors become a one-line message (exit 1; 2 for a ConfigError)."""
    try:
        return asyncio.run(make())
    except ConfigError:
        raise
    except WbSyncError as exc:
        _fail(str(exc))


EmbeddedRedisOpt = Annotated[
    bool,
    typer.Option(
        "--embedded-redis",
        help="With no WBSYNC_REDIS_URL: run on a private Redis started for this process alone, "
        "discarded at exit with its jobs and buckets. For trying wbsync out.",
    ),
]

_EMBEDDED_REDIS_WARNING = (
    "--embedded-redis: this process runs on a private Redis of its own; at exit it is discarded "
    "with every delayed job and rate-limit bucket, and no other wbsync process can see it (an "
    "`api` process sees no worker's jobs). Set WBSYNC_REDIS_URL for anything but a trial"
)


def _embedded_redis(settings: Settings, wanted: bool) -> bool:
    """The ``--embedded-redis`` choice, checked against the settings and warned about once
    (logging must be configured)."""
    if wanted and settings.redis_url is not None:
        raise ConfigError(
            "--embedded-redis starts a private Redis, but WBSYNC_REDIS_URL is set too: "
            "drop the option or unset the variable"
        )
    if wanted:
        log.warning(_EMBEDDED_REDIS_WARNING)
    return wanted


@app.command()
def run(
    queues: Annotated[
        str | None, typer.Option(help="Comma-separated queues to serve; all by default.")
    ] = None,
    with_api: Annotated[
        bool, typer.Option("--with-api", help="Serve the HTTP API in this process too.")
    ] = False,
    host: Annotated[str, typer.Option(help="The API's address (with --with-api).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The API's port (with --with-api).")] = 8000,
    embedded_redis: EmbeddedRedisOpt = False,
) -> None:
    """Run the workers of the sync queues and the fan-out until SIGINT/SIGTERM."""
    settings = _settings()  # a bad setting is refused before the heavy imports
    from wbsync.service import run_service

    configure_logging(settings.log_level)
    names = [q.strip() for q in queues.split(",") if q.strip()] if queues else None
    extra = None
    if with_api:  # the web stack is loaded only when served
        from wbsync.api import api_extra
        from wbsync.api.auth import api_keys

        api_keys(settings)  # refuse before any worker starts
        extra = api_extra(host=host, port=port)
    embedded = _embedded_redis(settings, embedded_redis)
    _run(lambda: run_service(settings, queues=names, extra=extra, embedded_redis=embedded))


@app.command()
def api(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    embedded_redis: EmbeddedRedisOpt = False,
) -> None:
    """Serve the HTTP API, /metrics and the status page (needs WBSYNC_API_KEYS)."""
    settings = _settings()  # a bad setting is refused before the heavy imports
    from wbsync.api import serve_api
    from wbsync.api.auth import api_keys

    configure_logging(settings.log_level)
    api_keys(settings)  # refuse before anything is started
    embedded = _embedded_redis(settings, embedded_redis)
    _run(lambda: serve_api(settings, host=host, port=port, embedded_redis=embedded))


@app.command("settings")
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
    rows = _settings().described()
    if as_json:
        typer.echo(json.dumps({name: value for name, value, _ in rows}, indent=1))
        return
    table = Table("variable", "value", "meaning")
    for row in rows:
        table.add_row(*row)
    Console(width=None if sys.stdout.isatty() else 200).print(table)


@app.command()
def plugins(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
) -> None:
    """The installed plugins: which are loaded (WBSYNC_PLUGINS) and what each declared."""
    settings = _settings()
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


@app.command()
def migrate() -> None:
    """Create or upgrade the database schema to the latest version (waits for another
    process's migration of the same database instead of racing it)."""

    async def go() -> Migration:
        async with _database() as db:
            return await db.migrate()

    typer.echo(str(_run(go)))


@app.command()
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

    settings = _settings()
    with log_file.open("w", encoding="utf-8") as stream:
        configure_logging(settings.log_level, stream=stream)
        summary = _run(
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
        _fail("; ".join(problems))


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


@cabinets_app.command("add")
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
        _fail(str(exc))

    async def go() -> None:
        async with _store() as store:
            cabinet = await store.cabinets.add(name, raw, parsed.seller_id)
        typer.echo(f"added cabinet {cabinet.id} {cabinet.name!r} (seller {cabinet.seller_id})")
        _tell_unserved(parsed)

    _run(go)


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


def _ref(ref: str) -> int | str:
    return int(ref) if ref.isdigit() else ref


@cabinets_app.command("token")
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
        _fail(str(exc))

    async def go() -> None:
        async with _store() as store:
            cabinet = await store.cabinets.replace_token(_ref(ref), raw, parsed.seller_id)
        typer.echo(f"replaced the token of cabinet {cabinet.id} {cabinet.name!r}")
        _tell_unserved(parsed)

    _run(go)


@cabinets_app.command("activate")
def cabinets_activate(
    ref: Annotated[str, typer.Argument(help="The cabinet's id or name.")],
) -> None:
    """Sync a deactivated cabinet again."""

    async def go() -> None:
        async with _store() as store:
            cabinet = await store.cabinets.set_active(_ref(ref), True)
        typer.echo(f"activated cabinet {cabinet.id} {cabinet.name!r}")

    _run(go)


@cabinets_app.command("rename")
def cabinets_rename(
    ref: Annotated[str, typer.Argument(help="The cabinet's id or name.")],
    new_name: Annotated[str, typer.Argument(help="Its new name.")],
) -> None:
    """Give a cabinet a new name."""

    async def go() -> None:
        async with _store() as store:
            cabinet = await store.cabinets.rename(_ref(ref), new_name)
        typer.echo(f"renamed cabinet {cabinet.id} to {cabinet.name!r}")

    _run(go)


@cabinets_app.command("import")
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
        _fail(f"cannot read {source}: {exc}", code=EXIT_CONFIG)

    async def go() -> Any:
        async with _store() as store:
            return await import_cabinets(store.cabinets, text)

    report = _run(go)
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


@cabinets_app.command("list")
def cabinets_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
) -> None:
    """List cabinets (tokens are never shown)."""

    async def go() -> None:
        async with _store() as store:
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

    _run(go)


@cabinets_app.command("remove")
def cabinets_remove(
    ref: Annotated[str, typer.Argument(help="The cabinet's id or name.")],
) -> None:
    """Remove a cabinet and everything stored for it."""

    async def go() -> None:
        async with _store() as store:
            await store.cabinets.remove(int(ref) if ref.isdigit() else ref)
        typer.echo(f"removed cabinet {ref}")

    _run(go)


@cabinets_app.command("deactivate")
def cabinets_deactivate(
    ref: Annotated[str, typer.Argument(help="The cabinet's id or name.")],
) -> None:
    """Stop syncing a cabinet, keeping its data."""

    async def go() -> None:
        async with _store() as store:
            await store.cabinets.deactivate(int(ref) if ref.isdigit() else ref)
        typer.echo(f"deactivated cabinet {ref}")

    _run(go)


@secrets_app.command("rotate")
def secrets_rotate() -> None:
    """Re-encrypt every stored token with a new key (read from stdin or a hidden prompt).

    WBSYNC_SECRET_KEY must hold the current key. The new key is never taken from the command
    line, where the shell history and the process list would keep it.
    """
    if sys.stdin.isatty():
        new = typer.prompt("new secret key", hide_input=True, confirmation_prompt=True)
    else:
        new = sys.stdin.readline()
    new = new.strip()
    if not new:
        _fail("no new key given: pipe it in or type it at the prompt", code=EXIT_CONFIG)
    if new == _settings().secret_key_value():
        _fail(
            "the new key is the current WBSYNC_SECRET_KEY; give a different one", code=EXIT_CONFIG
        )

    async def go() -> int:
        async with _store(verify=False) as store:
            return await store.cabinets.rotate_key(new)

    count = _run(go)
    typer.echo(f"re-encrypted {count} token(s); now set WBSYNC_SECRET_KEY to the new key")


@app.command("export")
def export(
    dataset: Annotated[str, typer.Argument(help="The dataset, e.g. stocks (see docs/data.md).")],
    cabinet: Annotated[
        str | None, typer.Option(help="Only this cabinet's changes (its id or name).")
    ] = None,
    after: Annotated[
        int, typer.Option(min=0, help="Start after this sequence number (the last one read).")
    ] = 0,
    fmt: Annotated[str, typer.Option("--format", help="jsonl or csv.")] = "jsonl",
) -> None:
    """Write a dataset's change feed to stdout (inserts, updates, tombstones in seq order)."""
    if fmt not in ("jsonl", "csv"):
        _fail(f"--format must be jsonl or csv, got {fmt!r}", code=EXIT_CONFIG)
    from wbsync.export import export_changes
    from wbsync.store.datasets import dataset as find_dataset

    fmt_: Literal["jsonl", "csv"] = "csv" if fmt == "csv" else "jsonl"

    async def go() -> None:
        _settings()  # loads the plugins first: their datasets are exported too
        ds = find_dataset(dataset)
        async with _store(verify=False) as store:
            cabinet_id = None if cabinet is None else (await store.cabinets.get(_ref(cabinet))).id
            stats = await export_changes(
                store, ds, sys.stdout, cabinet_id=cabinet_id, after=after, fmt=fmt_
            )
        typer.echo(f"{stats.rows} changes; next --after {stats.last_seq or after}", err=True)

    _run(go)


@asynccontextmanager
async def _database() -> AsyncIterator[Database]:
    """The configured database, started (``ConfigError`` when it cannot be reached)."""
    from wbsync.store import Database

    db = Database(_settings().database_url)
    try:
        await db.start_configured()
        yield db
    finally:
        await db.aclose()


@asynccontextmanager
async def _store(*, verify: bool = True) -> AsyncIterator[Store]:
    """A Store on the configured database, migrated to the latest schema, its key verified."""
    from wbsync.store import Store

    async with _database() as db:
        await db.migrate()
        store = Store(db, secret_key=_settings().secret_key_value())
        if verify:
            await store.cabinets.verify_key()
        yield store


def _mount_optional() -> None:
    """Sub-apps whose dependencies are optional extras, if those are installed.

    Looked up, not imported: the bench's modules load only when a benchmark runs.
    """
    if all(find_spec(name) for name in ("limits", "pyrate_limiter")):  # the bench extra
        from wbsync.bench.cli import app as bench_app

        app.add_typer(bench_app, name="bench")


_mount_optional()
