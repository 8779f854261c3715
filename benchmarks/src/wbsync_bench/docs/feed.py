"""The feed benchmark's section (its text lives beside the benchmark, ``wbsync_bench.feed``)."""

from __future__ import annotations

from typing import Any

from wbsync_bench import feed
from wbsync_bench.docs.markdown import table

TITLE = "feed: a long change feed read through the API and wbsync export"


def render(r: dict[str, Any]) -> str:
    """The section's text."""
    return feed.render(r, table)
