"""The job contract: a cabinet string (an integer is normalised), anything else is malformed."""

from __future__ import annotations

from typing import Any

import pytest

from wbsync.errors import MalformedJobError
from wbsync.jobs.contract import cabinet_of, normalised


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({}, "no 'cabinet'"),
        ([1, 2], "must be a JSON object"),
        ("7", "must be a JSON object"),
        ({"cabinet": None}, "must be a string"),
        ({"cabinet": True}, "must be a string"),
        ({"cabinet": 7.5}, "must be a string"),
        ({"cabinet": {"id": 7}}, "must be a string"),
        ({"cabinet": "  "}, "non-empty id"),
        ({"cabinet": "x" * 201}, "non-empty id"),
        ({"cabinet": "a\x00b"}, "non-empty id"),
    ],
)
def test_malformed_data_says_what_is_wrong(data: Any, said: str) -> None:
    with pytest.raises(MalformedJobError, match=said):
        cabinet_of(data)


def test_an_integer_cabinet_is_normalised_and_a_string_left_alone() -> None:
    assert cabinet_of({"cabinet": 7}) == "7"
    assert normalised({"cabinet": 7, "cursor": 3}) == {"cabinet": "7", "cursor": 3}
    assert normalised({"cabinet": "7"}) is None
