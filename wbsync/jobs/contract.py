"""The job contract: what a job's data must hold, checked before any processor sees it.

Producers in other languages (see docs/interop.md) add jobs to wbsync's queues, so a job's data
is input like any other. A sync job's data is a JSON object with ``cabinet``: the cabinet's id
as a string (an integer is accepted and normalised to its decimal string). The counts the job
layer keeps in it (``COUNTS``), when present, are integers >= 0; its ``cursor`` is checked
against the sync's declared shape when the sync runs (``wbsync.syncs.base``). Anything else is
a malformed job: it fails at once, without retries, with the reason as its ``failedReason``.
A fleet-wide sync's queue has one job for the whole fleet: its ``cabinet`` is :data:`FLEET_JOB`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wbsync.errors import MalformedJobError

__all__ = ["COUNTS", "FLEET_JOB", "cabinet_of", "normalised"]

FLEET_JOB = "fleet"
"""The ``cabinet`` of a fleet-wide sync's one job (no cabinet's: a cabinet that may ask carries
it, ``wbsync.composition.fleet``); its job id is derived from it as any cabinet's."""

# Cabinet ids are database ids; any reference longer than this is not one.
_CABINET_MAX_CHARS = 200
#: The counts the job layer keeps in a job's data (pages stored, rows fetched (``rows``), rows
#: written and tombstoned, upstream failures and infrastructure retries since the last
#: progress, deferrals).
COUNTS = (
    "pages",
    "rows",
    "rows_written",
    "tombstoned",
    "failures",
    "infra_retries",
    "deferrals",
)


def cabinet_of(data: Any) -> str:
    """The job's cabinet as a string; ``MalformedJobError`` saying what is wrong otherwise."""
    if not isinstance(data, Mapping):
        raise MalformedJobError(
            f"job data must be a JSON object with a 'cabinet', got {type(data).__name__}"
        )
    if "cabinet" not in data:
        raise MalformedJobError("job data has no 'cabinet' (the cabinet's id, a string)")
    cabinet = data["cabinet"]
    if isinstance(cabinet, int) and not isinstance(cabinet, bool):
        cabinet = str(cabinet)
    if not isinstance(cabinet, str):
        raise MalformedJobError(
            f"job data 'cabinet' must be a string (the cabinet's id), got {type(cabinet).__name__}"
        )
    if not cabinet.strip() or len(cabinet) > _CABINET_MAX_CHARS or "\x00" in cabinet:
        raise MalformedJobError(
            f"job data 'cabinet' must be a non-empty id of at most {_CABINET_MAX_CHARS} characters"
        )
    return cabinet


def _check_counts(data: Mapping[str, Any]) -> None:
    for name in COUNTS:
        value = data.get(name)
        if value is not None and (type(value) is not int or value < 0):
            raise MalformedJobError(
                f"job data {name!r} must be an integer >= 0 (a count wbsync keeps), got "
                f"{value!r:.60}"
            )


def normalised(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """``data`` with its cabinet as a string, or None when it is already so (nothing to store);
    ``MalformedJobError`` when it breaks the contract."""
    cabinet = cabinet_of(data)
    _check_counts(data)
    return None if data["cabinet"] == cabinet else {**data, "cabinet": cabinet}
