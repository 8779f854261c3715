"""How a command runs: its settings, its errors and exit status, its database and store.

Every command starts from the settings with the plugins loaded (``configured_settings``); a
``ConfigError`` anywhere in a command (sub-apps included) is one ``error:`` line and status 2
(``OneLineErrors``, the root app's group), wbsync's other errors one line and status 1
(``run_async``). The database and the store are opened here only when a command asks.
"""

from __future__ import annotations

import getpass
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from functools import cache
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from wbsync.errors import ConfigError, WbSyncError
from wbsync.system import eventloop

if TYPE_CHECKING:
    from wbsync.config import Settings
    from wbsync.store import Database, Store

T = TypeVar("T")

# Exit statuses: 1 = the command failed; 2 = it was misconfigured and did not start (click uses
# 2 for a misused command line too).
EXIT_FAILED = 1
EXIT_CONFIG = 2


class OneLineErrors(TyperGroup):
    """Every command, sub-apps included: a ``ConfigError`` is one ``error:`` line and status 2.

    The one place where misconfiguration meets the user, so no command prints a traceback for a
    setting, and no command needs its own handling of it.
    """

    def invoke(self, ctx: Any) -> Any:  # typer's own (vendored) click Context
        try:
            return super().invoke(ctx)
        except ConfigError as exc:
            fail(str(exc), code=EXIT_CONFIG)


def configured_settings() -> Settings:
    """The settings, with the plugins loaded and every name checked: each command's start.

    Names of queues and limit groups no loaded plugin declares are one ``warning:`` line, once
    a process: in a mixed fleet another process may load them (never an exit)."""
    from wbsync.composition.startup import load_settings, not_loaded_here

    settings = load_settings()  # a ConfigError is reported by OneLineErrors
    notice = not_loaded_here(settings)
    if notice:
        _warn_once(notice)
    return settings


@cache
def _warn_once(message: str) -> None:
    Console(stderr=True, soft_wrap=True).print(
        f"[yellow]warning:[/yellow] {escape(message)}", highlight=False
    )


def fail(message: str, *, code: int = EXIT_FAILED) -> NoReturn:
    """One ``error:`` line on stderr, then the exit status ``code``."""
    Console(stderr=True, soft_wrap=True).print(
        f"[red]error:[/red] {escape(message)}", highlight=False
    )
    raise typer.Exit(code)


def run_async(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine; our errors become a one-line message (exit 1; 2 for a ConfigError)."""
    try:
        return eventloop.run(make())
    except ConfigError:
        raise
    except WbSyncError as exc:
        fail(str(exc))


@asynccontextmanager
async def open_database() -> AsyncIterator[Database]:
    """The configured database, started (``ConfigError`` when it cannot be reached)."""
    from wbsync.store import Database

    db = Database(configured_settings().database_url)
    try:
        await db.start_configured()
        yield db
    finally:
        await db.aclose()


@asynccontextmanager
async def open_store(*, verify: bool = True) -> AsyncIterator[Store]:
    """A Store on the configured database, migrated to the latest schema, its key verified."""
    from wbsync.store import Store

    async with open_database() as db:
        await db.migrate()
        store = Store(db, secret_key=configured_settings().secret_key_value())
        if verify:
            await store.cabinets.verify_key()
        yield store


def operator() -> str:
    """Who runs the command, as the audit line names them."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no login name (a container's unnamed uid)
        user = "an unnamed user"
    return f"the command line (user {user})"
