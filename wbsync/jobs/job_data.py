"""A job's data as the job layer reads and writes it: writes lock-checked, in one round trip
(``job_data.lua``, which also writes what goes with a stored page: its count in the throughput
history, the run's start lag, its change-stream event); reads that say what is wrong with data
that cannot be read.

BullMQ's own ``updateData`` writes whatever the caller holds, lock or not: a worker whose lock
expired while it was stalled would overwrite the cursor of the worker that took the job over.
Every write of a running job's data goes through here instead (a deferral writes the data inside
BullMQ's lock-checked ``moveToDelayed``, see ``wbsync.jobs.worker``).

Data is input: a producer in another language or a hand edit can store anything in the job
hash's ``data`` field. ``decode`` turns what cannot be read into a ``MalformedJobError`` (the job
fails at once, without retries) instead of an exception deep in BullMQ.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from redis.asyncio.cluster import RedisCluster

from wbsync.errors import JobLockLostError, MalformedJobError, QueueError
from wbsync.jobs.lag import LagSample
from wbsync.redis.lua import lua_script
from wbsync.redis.redis_client import RedisClient, redis_failures
from wbsync.redis.throughput import Count

__all__ = ["JobDataWriter", "StreamEntry", "decode", "encode"]

_SCRIPT = lua_script("wbsync.jobs", "job_data.lua")


# How much of unreadable data a failure reason quotes: enough to recognise it, no more.
_QUOTED_CHARS = 40


def decode(raw: str | bytes) -> Any:
    """The stored job data ``raw`` (JSON); ``MalformedJobError`` naming what is wrong otherwise."""
    try:
        return json.loads(raw)
    except ValueError as exc:  # JSONDecodeError, and UnicodeDecodeError for bytes
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        quoted = text[:_QUOTED_CHARS] + ("..." if len(text) > _QUOTED_CHARS else "")
        raise MalformedJobError(f"job data is not JSON: {exc}; it reads {quoted!r}") from None


def encode(data: Mapping[str, Any]) -> str:
    """The job data's JSON, byte for byte as BullMQ stores it."""
    return json.dumps(data, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True, slots=True)
class StreamEntry:
    """One entry to append to a capped stream (``XADD key MAXLEN ~ maxlen * fields``) in the
    call that saves a job's data; ``counter`` (a key of the stream's hash tag, and a field)
    numbers it: the key is incremented and the field carries its new value."""

    key: str
    fields: Mapping[str, str | int]
    maxlen: int
    counter: tuple[str, str] | None = None


class JobDataWriter:
    """Writes one queue's job data while the writer holds the job's lock."""

    def __init__(self, redis: RedisClient, job_key: Callable[[str], str]) -> None:
        self._script = redis.register_script(_SCRIPT)
        self._job_key = job_key
        self._cluster = isinstance(redis, RedisCluster)

    async def save(
        self,
        job_id: str,
        token: str,
        data: Mapping[str, Any],
        count: Count | None = None,
        *,
        lag: LagSample | None = None,
        entry: StreamEntry | None = None,
    ) -> None:
        """Replace ``job_id``'s data and, in the same call, add ``count`` to the throughput
        history, ``lag`` to the queue's recent lags and ``entry`` to its stream;
        ``JobLockLostError`` if ``token`` no longer holds its lock (then only ``entry`` is
        written: it tells of rows already committed).

        ``count``'s and ``lag``'s keys must share the job's hash tag (the queue's), so on a
        cluster the call's keys are in one slot; so must ``entry``'s on a cluster (else the
        caller sends it apart), ``ValueError`` otherwise.
        """
        key = self._job_key(job_id)
        script_keys = [key, f"{key}:lock"]
        parts = ""
        extra: list[str | int] = []
        if count is not None:
            _same_slot(count.key, key)
            parts += "t"
            script_keys.append(count.key)
            extra += [count.keep_s, count.field, count.amount]
        if lag is not None:
            _same_slot(lag.key, key)
            parts += "l"
            script_keys.append(lag.key)
            extra += [lag.entry, lag.samples, lag.keep_s]
        if entry is not None:
            if self._cluster:
                _same_slot(entry.key, key)
            if entry.counter is not None:
                if self._cluster:
                    _same_slot(entry.counter[0], key)
                parts += "n"
                script_keys.append(entry.counter[0])
                extra.append(entry.counter[1])
            parts += "s"
            script_keys.append(entry.key)
            extra.append(entry.maxlen)
            for name, value in entry.fields.items():
                extra += [name, value]
        args: list[str | int] = [token, encode(data), parts, *extra]
        with redis_failures(f"could not save data of job {job_id}", QueueError):
            result = await self._script(keys=script_keys, args=args)
        if int(result) != 1:
            raise JobLockLostError(
                f"job {job_id}: its lock is no longer this worker's; its data was not written"
            )


def _same_slot(other: str, key: str) -> None:
    if _hash_tag(other) != _hash_tag(key):
        raise ValueError(f"{other!r} is not in the slot of job key {key!r}")


def _hash_tag(key: str) -> str:
    """The part of ``key`` Redis Cluster hashes: the first ``{...}``, else the whole key."""
    start = key.find("{")
    end = key.find("}", start + 1)
    return key[start + 1 : end] if start >= 0 and end > start + 1 else key
