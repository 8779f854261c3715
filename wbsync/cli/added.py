"""Commands other installed packages add to ``wbsync``: the ``wbsync.commands`` entry points.

Each entry of the group names a ``typer.Typer`` app; ``wbsync <entry name> ...`` runs it (the
benchmarks' package adds ``bench`` this way, docs/extending.md). The apps are imported when the
command tree is built, so ``wbsync --help`` lists them: an app's module should import only typer
and light modules at its top, and what a command runs inside the command.

One package cannot take every command down with it: an entry that cannot be imported, or is
not a typer app, becomes a command of its name that says so in one line (exit 2); an entry
whose name is one of wbsync's own commands, or taken by an entry before it (in the order of
name, then value), is left out, with one warning line. A command of wbsync's repository that is
not installed (``KNOWN``) is a command that says in one line how to install it (exit 2).
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.metadata import EntryPoint, entry_points

import typer
from rich.console import Console
from rich.markup import escape
from typer.models import CommandInfo, TyperInfo

from wbsync.cli.running import EXIT_CONFIG, fail

__all__ = ["GROUP", "KNOWN", "add_installed"]

GROUP = "wbsync.commands"
"""The entry-point group of commands added to ``wbsync``."""

KNOWN = {
    "bench": (
        "the benchmarks",
        "run `pip install -e benchmarks` in wbsync's repository (`make bench` installs them and "
        "runs every benchmark)",
    ),
}
"""Commands of packages in wbsync's repository, by name: what they are, and how to install them."""

# The stand-ins take any arguments and options (``--help`` included) and answer them all alike.
_ANY_ARGUMENTS = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def add_installed(app: typer.Typer, installed: Iterable[EntryPoint] | None = None) -> None:
    """Add to ``app`` the app of every entry point of ``installed`` (by default, the installed
    ones of ``GROUP``) under its name, then a stand-in for each of ``KNOWN`` still missing."""
    own = {_name(info) for info in app.registered_commands}
    own |= {_name(info) for info in app.registered_groups}
    eps = entry_points(group=GROUP) if installed is None else installed
    added = set()
    for ep in sorted(eps, key=lambda ep: (ep.name, ep.value)):
        if ep.name in own or ep.name in added:
            who = "wbsync has" if ep.name in own else "another package adds"
            _warn(f"the command {ep.name!r} of {ep.value} is not added: {who} one of its name")
            continue
        try:
            sub = ep.load()
        except Exception as exc:  # anything a broken package raises on import
            _stand_in(app, ep.name, f"{ep.value} cannot be imported: {type(exc).__name__}: {exc}")
        else:
            if isinstance(sub, typer.Typer):
                app.add_typer(sub, name=ep.name)
            else:
                _stand_in(app, ep.name, f"{ep.value} is not a typer app")
        added.add(ep.name)
    for name, (what, how) in KNOWN.items():
        if name not in own and name not in added:
            _stand_in(
                app, name, f"{what} are not installed: {how}", summary=f"Not installed: {what}."
            )


def _name(info: CommandInfo | TyperInfo) -> str | None:
    """The name a registered command or sub-app is called by (typer's: the function's)."""
    if info.name:
        return info.name
    callback = info.callback if isinstance(info, CommandInfo) else None
    return callback.__name__.lower().replace("_", "-") if callback is not None else None


def _stand_in(app: typer.Typer, name: str, message: str, *, summary: str | None = None) -> None:
    """A command ``name`` that fails with ``message`` (exit 2) whatever it is given."""

    def stand_in() -> None:
        fail(f"wbsync {name}: {message}", code=EXIT_CONFIG)

    app.command(
        name, help=summary or message, context_settings=_ANY_ARGUMENTS, add_help_option=False
    )(stand_in)


def _warn(message: str) -> None:
    Console(stderr=True, soft_wrap=True).print(
        f"[yellow]warning:[/yellow] {escape(message)}", highlight=False
    )
