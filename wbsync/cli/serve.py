"""Serving: ``wbsync run`` (the workers and the fan-out) and ``wbsync api`` (the HTTP API)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Annotated

import typer

from wbsync.cli.running import configured_settings, run_async
from wbsync.errors import ConfigError
from wbsync.observability.logs import configure_logging

if TYPE_CHECKING:
    from wbsync.config import Settings

# The command line's logger: its lines name `wbsync.cli`, whichever of its modules logs.
log = logging.getLogger("wbsync.cli")

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
    settings = configured_settings()  # a bad setting is refused before the heavy imports
    from wbsync.composition.service import run_service

    configure_logging(settings.log_level)
    names = [q.strip() for q in queues.split(",") if q.strip()] if queues else None
    extra = None
    if with_api:  # the web stack is loaded only when served
        from wbsync.api import api_extra
        from wbsync.api.auth import api_keys

        api_keys(settings)  # refuse before any worker starts
        extra = api_extra(host=host, port=port)
    embedded = _embedded_redis(settings, embedded_redis)
    run_async(lambda: run_service(settings, queues=names, extra=extra, embedded_redis=embedded))


def api(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    embedded_redis: EmbeddedRedisOpt = False,
) -> None:
    """Serve the HTTP API, /metrics and the status page (needs WBSYNC_API_KEYS)."""
    settings = configured_settings()  # a bad setting is refused before the heavy imports
    from wbsync.api import serve_api
    from wbsync.api.auth import api_keys

    configure_logging(settings.log_level)
    api_keys(settings)  # refuse before anything is started
    embedded = _embedded_redis(settings, embedded_redis)
    run_async(lambda: serve_api(settings, host=host, port=port, embedded_redis=embedded))
