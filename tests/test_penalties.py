"""What an operator reads of a penalty: its remaining time, and the groups one may be on."""

from __future__ import annotations

import pytest

from wbsync.cabinets.penalties import GroupUnknown, check_group, known_groups, remaining_text
from wbsync.ratelimit import GLOBAL_GROUP
from wbsync.syncs.finance import FINANCE_DETAILED_REPORT
from wbsync.wb.endpoints import GROUPS


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (18_236_000, "5 h 03 min"),  # WB's finance penalty: 5 h 3 min 56 s
        (564_000, "9 min 24 s"),
        (29_000, "29 s"),
        (1, "1 s"),
        (-5, "0 s"),
    ],
)
def test_remaining_time_reads_in_hours_minutes_or_seconds(ms: int, text: str) -> None:
    assert remaining_text(ms) == text


def test_groups_are_the_global_limiter_and_every_method_group() -> None:
    assert known_groups() == [GLOBAL_GROUP, *sorted(GROUPS)]
    check_group(GLOBAL_GROUP)
    check_group(FINANCE_DETAILED_REPORT.group)
    with pytest.raises(GroupUnknown, match=f"no limit group 'nope'; groups: {GLOBAL_GROUP}, "):
        check_group("nope")
