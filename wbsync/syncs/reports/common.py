"""What the report task syncs share: WB's analytics section, as the built-ins declare it."""

from __future__ import annotations

from wbsync.values.scope import Limit
from wbsync.wb.endpoints import Endpoint, NoData, TypeLimits
from wbsync.wb.sections import ANALYTICS
from wbsync.wb.tokens import Category

__all__ = ["ANALYTICS", "HOUR", "MINUTE", "TASK_UNKNOWN", "endpoint"]

MINUTE = 60.0
HOUR = 3600.0


#: WB's 404 for a task id it does not know (never had, or purged): ``{"title": "Not Found",
#: "detail": "not found"}``. An answer about the task, not a wrong path.
TASK_UNKNOWN = NoData(404, "not found")


def endpoint(
    name: str, path: str, personal: tuple[float, int, int], base: tuple[float, int, int]
) -> Endpoint:
    """A GET of WB's analytics section, its own limit group, with WB's table: ``personal``
    for Personal, Service, Base-with-secret (and Test) tokens, ``base`` for Base tokens, each
    as (period in seconds, requests per period, burst). A path naming a task answers WB's 404
    for an unknown task id as no data (``TASK_UNKNOWN``)."""
    return Endpoint(
        name=name,
        section=ANALYTICS,
        method="GET",
        path=path,
        group=name,
        category=Category.ANALYTICS,
        limits=TypeLimits.same(Limit(*personal), base=Limit(*base)),
        no_data=(TASK_UNKNOWN,) if "{task_id}" in path else (),
    )
