"""The soak benchmark's section (its text lives beside the benchmark, ``wbsync_bench.soak``)."""

from __future__ import annotations

from typing import Any

from wbsync_bench import soak
from wbsync_bench.docs.markdown import table

TITLE = "soak: table sizes over simulated days"


def render(r: dict[str, Any]) -> str:
    """The section's text."""
    return soak.render(r, table)
