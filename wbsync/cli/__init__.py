"""The command line: run, api, demo, cabinets, limits, secrets, emulator, migrate, plugins, and
the commands installed packages add (``bench``: ``wbsync.cli.added``).

Every command that reads the settings loads the plugins first (``wbsync.composition.startup``); the
emulator loads its own plugin group.

Only typer, rich, the standard library and light wbsync modules are imported at the top (and by
the sub-apps' modules): building the command tree for ``--help`` must not load settings,
SQLAlchemy, Redis or the web stack. Each command imports what it runs; a test checks this.

This module is the command tree, in the order ``wbsync --help`` lists it; the commands are in
the modules of their group: ``serve`` (run, api), ``install`` (settings, plugins, migrate),
``demo``, ``export``, ``cabinets``, ``limits`` and ``secrets`` (sub-apps), and what every
command runs on (settings, errors and exit statuses, the database and the store) in ``running``.
"""

from __future__ import annotations

import typer

from wbsync.cli import added, cabinets, demo, export, install, limits, secrets, serve
from wbsync.cli.running import OneLineErrors
from wbsync.emulator.cli import app as emulator_app

__all__ = ["app"]

app = typer.Typer(
    cls=OneLineErrors,
    help="Keep many Wildberries seller accounts in sync without stalling on rate limits.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.command()(serve.run)
app.command()(serve.api)
app.command("settings")(install.settings_cmd)
app.command()(install.plugins)
app.command()(install.migrate)
app.command()(demo.demo)
app.command("export")(export.export)
app.add_typer(cabinets.app, name="cabinets")
app.add_typer(limits.app, name="limits")
app.add_typer(secrets.app, name="secrets")
app.add_typer(emulator_app, name="emulator")

added.add_installed(app)
