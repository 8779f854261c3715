"""Serving the app with uvicorn: ``wbsync api`` alone, or beside the workers in ``wbsync run``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Generator

import uvicorn

from wbsync.api.app import create_app
from wbsync.api.auth import api_keys
from wbsync.composition.service import Extra, watch_health
from wbsync.config import Settings
from wbsync.errors import WbSyncError
from wbsync.shared.runtime import Runtime, open_runtime

__all__ = ["ApiServer", "api_extra", "run_api", "serve_api", "uvicorn_config"]

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


class ApiServer(uvicorn.Server):
    """uvicorn that leaves signals to its host (``serve_api`` or ``run_service``)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def uvicorn_config(runtime: Runtime, *, host: str, port: int) -> uvicorn.Config:
    """uvicorn's configuration: our logging (no access log of its own: it would print query
    strings, where the status page's key may be), no lifespan (the runtime is already open)."""
    return uvicorn.Config(
        create_app(runtime),
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=5,
        server_header=False,
    )


async def _serve(server: ApiServer, *, host: str, port: int) -> None:
    try:
        await server.serve()
    except SystemExit:
        # uvicorn exits when it cannot bind. Caught inside the task: a SystemExit leaving a
        # task would end the whole event loop at once, skipping the workers' clean stop.
        raise WbSyncError(f"the API could not listen on {host}:{port}") from None


async def run_api(runtime: Runtime, stop: asyncio.Event, *, host: str, port: int) -> None:
    """Serve the API on ``host:port`` until ``stop`` is set; ``WbSyncError`` if it cannot."""
    server = ApiServer(uvicorn_config(runtime, host=host, port=port))
    serving = asyncio.create_task(_serve(server, host=host, port=port), name="api")
    stopping = asyncio.create_task(stop.wait(), name="api-stop")
    try:
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        server.should_exit = True
        stopping.cancel()
        await serving
    if not stop.is_set():
        raise WbSyncError("the API server stopped by itself")


def api_extra(*, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> Extra:
    """``run_service``'s ``extra``: the API beside the workers; if it fails, the service stops."""

    async def extra(runtime: Runtime, stop: asyncio.Event) -> None:
        try:
            await run_api(runtime, stop, host=host, port=port)
        except WbSyncError as exc:
            log.error("%s; stopping the service", exc)
            stop.set()
            raise

    return extra


async def serve_api(
    settings: Settings,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    embedded_redis: bool = False,
) -> None:
    """``wbsync api``: the API alone, until SIGINT or SIGTERM; on a private Redis only with
    ``embedded_redis`` (see ``open_runtime``)."""
    api_keys(settings)  # refuse to start before opening anything
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with open_runtime(settings, embedded_redis=embedded_redis) as runtime:
        log.info("API on http://%s:%d", host, port)
        health = asyncio.create_task(watch_health(runtime, stop), name="health")
        try:
            await run_api(runtime, stop, host=host, port=port)
        finally:
            stop.set()
            await health
