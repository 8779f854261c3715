"""The app factory: ``create_app(runtime)`` wires routers, auth, error mapping and the context."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI

from wbsync import __version__
from wbsync.api import page
from wbsync.api.auth import api_keys, require_key
from wbsync.api.middleware import BodyGuard, RequestContext
from wbsync.api.problems import install_handlers
from wbsync.api.routes import attention, cabinets, datasets, discovery, ops, penalties, wb
from wbsync.api.status import StatusReader
from wbsync.shared.runtime import Runtime

__all__ = ["create_app"]


def create_app(runtime: Runtime) -> FastAPI:
    """The HTTP API over a started ``runtime``; ``ConfigError`` if no API key is configured."""
    app = FastAPI(
        title="wbsync",
        version=__version__,
        description="Cabinets, sync triggers, live jobs, buckets, WB's penalties, on-demand WB "
        "reads, metrics.",
        # The schema is served below, behind the key like every route but the probes.
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.runtime = runtime
    app.state.api_keys = api_keys(runtime.settings)
    app.state.status = StatusReader(runtime)
    guarded = [Depends(require_key)]
    app.include_router(ops.probes)
    app.include_router(ops.router)
    app.include_router(cabinets.router, dependencies=guarded)
    app.include_router(wb.router, dependencies=guarded)
    app.include_router(datasets.router, dependencies=guarded)
    app.include_router(discovery.router, dependencies=guarded)
    app.include_router(penalties.router, dependencies=guarded)
    app.include_router(attention.router, dependencies=guarded)
    app.include_router(page.router)
    app.mount("/static", page.static_files(), name="static")

    @app.get("/openapi.json", include_in_schema=False, dependencies=guarded)
    async def openapi() -> dict[str, Any]:
        return app.openapi()

    install_handlers(app)
    app.add_middleware(BodyGuard, keys=app.state.api_keys)  # inside: the access line covers it
    app.add_middleware(RequestContext)
    return app
