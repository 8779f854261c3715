"""Logging: JSON lines that carry the correlation id and the job (queue, job id, cabinet).

The context filter sits on the handler, so every record that reaches it, from wbsync or from a
library, gets the fields of the task that logged it.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

from wbsync.observability.context import correlation_id, current_job

_CONTEXT_FIELDS = ("correlation_id", "queue", "job_id", "cabinet")


class ContextFilter(logging.Filter):
    """Puts the current correlation id and job on each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        job = current_job()
        record.correlation_id = getattr(record, "correlation_id", None) or correlation_id()
        # Outside a job, fields given through ``extra=`` (e.g. by an HTTP route) are kept.
        record.queue = job.queue if job else getattr(record, "queue", None)
        record.job_id = job.job_id if job else getattr(record, "job_id", None)
        record.cabinet = job.cabinet if job else getattr(record, "cabinet", None)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for field in _CONTEXT_FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                entry[field] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure_logging(level: str = "INFO", *, stream: Any = None) -> logging.Handler:
    """Send wbsync's and its libraries' logs as JSON lines to ``stream`` (stderr by default)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Alembic's INFO lines narrate each migration step; wbsync.store.db logs the outcome once.
    logging.getLogger("alembic").setLevel(max(root.level, logging.WARNING))
    return handler
