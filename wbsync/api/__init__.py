"""The HTTP service: the API, ``/metrics``, the probes and the status page (see docs/api.md)."""

from wbsync.api.app import create_app
from wbsync.api.server import api_extra, run_api, serve_api

__all__ = ["api_extra", "create_app", "run_api", "serve_api"]
