"""The job model: job ids, what an enqueue did, how a run ended, and the exceptions that pass
between a processor and its worker."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wbsync.errors import MalformedJobError
from wbsync.jobs import contract

LIVE_STATES = ("active", "waiting", "delayed", "prioritized")
FINISHED_STATES = ("completed", "failed")


def job_id(queue: str, cabinet: str) -> str:
    """The id of (queue, cabinet)'s job: at most one such job is live at a time."""
    return f"{queue}.{cabinet}"


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    """What ``enqueue`` did: ``added`` is False when the cabinet's job was already live."""

    job_id: str
    added: bool
    state: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one run of a job ended: "completed", "deferred" or "failed" (an attempt failed)."""

    outcome: str
    queue: str
    cabinet: str
    job_id: str
    result: Any = None
    """A completed run's return value (e.g. ``{"outcome": "needs_attention", ...}``)."""


OutcomeListener = Callable[[Outcome], None]


class Deferred(Exception):
    """Raised out of a processor after the job was moved to delayed (see ``JobHandle.defer``);
    private to the job layer: the worker catches it."""


class JobFailedForGood(Exception):
    """Raised by a processor to fail its job now, whatever attempts are left; the message is
    the job's failedReason."""


def cabinet_or_blank(data: Any) -> str:
    """The cabinet of a job's data, or "" when the data breaks the contract."""
    try:
        return contract.cabinet_of(data)
    except MalformedJobError:
        return ""
