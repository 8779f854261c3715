"""The rows of the per-queue settings: one ``QueueOption`` a setting, and its ``Settings`` field."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from wbsync.values.queue_options import QueueOption

QUEUE_OPTIONS: dict[str, QueueOption] = {
    option.key: option
    for option in (
        QueueOption(
            key="concurrency",
            field="queue_concurrency",
            meaning="Jobs a queue's worker runs at once in each process",
            unit="job at once",
            minimum=1,
            own="concurrency",
            fallback="sync_queue_concurrency",
            example=20,
        ),
        QueueOption(
            key="fanout_interval_s",
            field="fanout_intervals_s",
            meaning="How often the fan-out enqueues a queue's job of each cabinet (seconds)",
            unit="s",
            minimum=0,
            above=True,
            own="interval_s",
            scaled=True,
            example=3600,
        ),
        QueueOption(
            key="failure_budget",
            field="queue_failure_budget",
            meaning="Upstream failures a queue's job may meet without progress",
            unit="failure",
            minimum=1,
            fallback="job_failure_budget",
            example=20,
        ),
        QueueOption(
            key="defer_threshold_ms",
            field="queue_defer_threshold_ms",
            meaning="The longest rate-limit wait a long sync's job sleeps in place, not deferred "
            "(ms)",
            unit="ms",
            minimum=0,
            fallback="defer_threshold_ms",
            scaled=True,
            example=20000,
        ),
    )
}
"""Every per-queue setting, by key (``wbsync.values.queue_options``). A new one is a row here and a
``Settings`` field of ``per_queue``; its bound check, the start-up check of its queue
names, ``wbsync.composition.workers.queue_option`` and docs/settings.md follow from the row."""


def per_queue(key: str) -> Any:
    """The ``Settings`` field of per-queue option ``key``: described and checked by its row."""
    return Field(default_factory=dict, description=QUEUE_OPTIONS[key].describe())
