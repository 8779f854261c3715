"""Read views of stored jobs over many queues: a few pipelined calls for thousands of jobs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from wbsync.errors import MalformedJobError, QueueError
from wbsync.jobs.job_data import decode
from wbsync.jobs.model import job_id
from wbsync.redis import redis_client
from wbsync.redis.lua import lua_script
from wbsync.redis.redis_client import RedisClient, as_text, redis_failures


@dataclass(frozen=True, slots=True)
class JobView:
    """A stored job as the rest of wbsync sees it."""

    job_id: str
    queue: str
    cabinet: str
    state: str
    data: Mapping[str, Any]
    attempts_made: int
    attempts_started: int
    run_at_ms: int | None  # for a delayed job: when it may run again
    failed_reason: str | None
    created_ms: int | None = None  # when the job was added
    finished_ms: int | None = None  # for a failed job: when its last attempt ended


# The BullMQ structures that hold job ids, by the state they mean ("paused" jobs wait too).
_STATE_LISTS = (("active", "active"), ("wait", "waiting"), ("paused", "waiting"))
_STATE_ZSETS = (("prioritized", "prioritized"), ("delayed", "delayed"), ("failed", "failed"))
# BullMQ writes attempts made as "atm" (older versions: "attemptsMade").
_JOB_FIELDS = ("data", "atm", "attemptsMade", "failedReason", "timestamp", "finishedOn")
_STATES_SCRIPT = lua_script("wbsync.jobs", "states.lua")


class _Queue(Protocol):
    """What the views read of a queue (a ``SyncQueue``): its name and BullMQ's queue."""

    @property
    def name(self) -> str: ...

    @property
    def _queue(self) -> Any: ...


async def job_states(client: RedisClient, queues: Sequence[_Queue]) -> dict[str, dict[str, str]]:
    """Per queue, every cabinet with a stored job and that job's state.

    One ``states.lua`` call per queue, pipelined: job ids only, joined into one string per
    state server-side, so tens of thousands of jobs cost a few bulk strings to parse.
    """
    lists = [name for name, _ in _STATE_LISTS]
    zsets = [name for name, _ in _STATE_ZSETS]
    script = client.register_script(_STATES_SCRIPT)
    calls = [
        (
            script,
            [queue._queue.keys[name] for name in (*lists, *zsets)],
            [len(lists), len(queue.name) + 1],
        )
        for queue in queues
    ]
    with redis_failures("could not read job states", QueueError):
        replies = await redis_client.run_scripts(client, calls)
    out: dict[str, dict[str, str]] = {}
    for queue, joined in zip(queues, replies, strict=True):
        states: dict[str, str] = {}
        for (_, state), ids in zip((*_STATE_LISTS, *_STATE_ZSETS), joined, strict=True):
            text = as_text(ids)
            if text:
                states.update(dict.fromkeys(text.split(","), state))
        out[queue.name] = states
    return out


async def read_jobs(
    client: RedisClient, jobs: Sequence[tuple[_Queue, str, str]]
) -> list[JobView | None]:
    """The stored jobs of (queue, cabinet, state) triples, in one pipeline; None where gone.

    A delayed job's time to run again is read with it.
    """
    with redis_failures("could not read jobs", QueueError):
        async with client.pipeline(transaction=False) as pipe:
            for queue, cabinet, state in jobs:
                jid = job_id(queue.name, cabinet)
                pipe.hmget(queue._queue.toKey(jid), list(_JOB_FIELDS))
                if state == "delayed":
                    pipe.zscore(queue._queue.keys["delayed"], jid)
            replies = iter(await pipe.execute())
    views: list[JobView | None] = []
    for queue, cabinet, state in jobs:
        fields = next(replies)
        score = next(replies) if state == "delayed" else None
        data, atm, attempts, reason, created, finished = (as_text(f) if f else None for f in fields)
        if data is None:
            views.append(None)
            continue
        views.append(
            JobView(
                job_id=job_id(queue.name, cabinet),
                queue=queue.name,
                cabinet=cabinet,
                state=state,
                data=_readable(data),
                attempts_made=int(atm or attempts or 0),
                attempts_started=0,
                run_at_ms=int(score) // 0x1000 if score is not None else None,
                failed_reason=reason,
                created_ms=int(created) if created else None,
                finished_ms=int(finished) if finished else None,
            )
        )
    return views


def _readable(raw: str) -> Mapping[str, Any]:
    """Stored data as a view shows it: ``{}`` when it cannot be read (a worker fails such a job,
    naming why in its failedReason)."""
    try:
        data = decode(raw)
    except MalformedJobError:
        return {}
    return data if isinstance(data, Mapping) else {}
