"""A job's data as the job layer writes it: lock-checked, in one round trip (``job_data.lua``).

BullMQ's own ``updateData`` writes whatever the caller holds, lock or not: a worker whose lock
expired while it was stalled would overwrite the cursor of the worker that took the job over.
Every write of a running job's data goes through here instead (a deferral writes the data inside
BullMQ's lock-checked ``moveToDelayed``, see ``wbsync.jobs.queue``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

from wbsync.errors import JobLockLostError, QueueError
from wbsync.redis_client import RedisClient, redis_failures

__all__ = ["JobDataWriter", "encode"]

_SCRIPT = resources.files("wbsync.jobs").joinpath("job_data.lua").read_text(encoding="utf-8")


def encode(data: Mapping[str, Any]) -> str:
    """The job data's JSON, byte for byte as BullMQ stores it."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False)


class JobDataWriter:
    """Writes one queue's job data while the writer holds the job's lock."""

    def __init__(self, redis: RedisClient, job_key: Callable[[str], str]) -> None:
        self._script = redis.register_script(_SCRIPT)
        self._job_key = job_key

    async def save(self, job_id: str, token: str, data: Mapping[str, Any]) -> None:
        """Replace ``job_id``'s data; ``JobLockLostError`` if ``token`` no longer holds its lock."""
        key = self._job_key(job_id)
        with redis_failures(f"could not save data of job {job_id}", QueueError):
            result = await self._script(keys=[key, f"{key}:lock"], args=[token, encode(data)])
        if int(result) != 1:
            raise JobLockLostError(
                f"job {job_id}: its lock is no longer this worker's; its data was not written"
            )
