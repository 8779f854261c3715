"""``wbsync emulator``: a typer sub-app to mount on the main CLI (``app.add_typer(...)``).

Only typer and the standard library at the top: the main CLI imports this module to build its
command tree, and the emulator's own modules load when a command runs.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["app"]

app = typer.Typer(help="The local WB API emulator.", no_args_is_help=False)

ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="JSON config file (sizes, limits, faults).")
]


@app.callback(invoke_without_command=True)
def main(
    ctx: typer.Context,
    config: ConfigOpt = None,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8700,
    sandbox_port: Annotated[
        int | None,
        typer.Option(help="Port of WB's -sandbox hosts (Test tokens only); default port + 1."),
    ] = None,
    time_scale: Annotated[
        float | None, typer.Option(help="Multiply every WB period (0.01: a minute is 0.6 s).")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed of the generated data.")] = None,
    calendar_origin: Annotated[
        datetime | None,
        typer.Option(
            help="Scale the calendar from this instant (UTC; wbsync's WBSYNC_CALENDAR_ORIGIN): "
            "the dated data's days then run 1/time-scale as fast as real time.",
            formats=["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S%z"],
        ),
    ] = None,
    serve_disabled_in_docs: Annotated[
        bool,
        typer.Option(
            help="Serve the methods WB's documents mark temporarily disabled (acceptance "
            "coefficients) as working; by default they answer 404, as WB's do."
        ),
    ] = False,
) -> None:
    """Run the emulator in the foreground (unless a subcommand is given)."""
    if ctx.invoked_subcommand is not None:
        return
    from wbsync.emulator.cli_support import load_config, load_plugins, run_emulator
    from wbsync.system import eventloop

    load_plugins()
    cfg = load_config(
        config,
        seed=seed,
        time_scale=time_scale,
        calendar_origin=None if calendar_origin is None else _aware(calendar_origin),
        serve_disabled_in_docs=serve_disabled_in_docs or None,
    )
    eventloop.run(run_emulator(cfg, host=host, port=port, sandbox_port=sandbox_port))


def _aware(moment: datetime) -> datetime:
    """A naive instant given on the command line is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@app.command()
def token(
    seller: Annotated[
        str | None, typer.Option(help="Seller UUID (sid); a new random one if omitted.")
    ] = None,
    type: Annotated[
        str, typer.Option("--type", help="base, test, personal or service.")
    ] = "personal",
    categories: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated: content,analytics,prices,statistics,...; default: every "
            "category the emulated methods need, the allowed plugins' included."
        ),
    ] = None,
    days: Annotated[float, typer.Option(help="Lifetime in days.")] = 180.0,
    config: ConfigOpt = None,
) -> None:
    """Print a token the emulator accepts; an unknown category is one error line, status 2."""
    from wbsync.emulator.cli_support import issue_token, load_config, load_plugins, needed
    from wbsync.errors import ConfigError

    load_plugins()
    cfg = load_config(config)
    try:
        raw = issue_token(
            seller=seller or str(uuid.uuid4()),
            token_type=type,
            categories=needed() if categories is None else categories,
            days=days,
            config=cfg,
        )
    except ValueError as exc:  # an unknown category or token type: the user's words, not a bug
        raise ConfigError(str(exc)) from None
    typer.echo(raw)
