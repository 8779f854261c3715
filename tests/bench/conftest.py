"""The benchmarks' tests need their package installed (``make test`` installs it): without it,
the run stops at once with what to do, not with an import error per module."""

from __future__ import annotations

from importlib.util import find_spec

import pytest

if find_spec("wbsync_bench") is None:
    raise pytest.UsageError(
        "tests/bench needs the benchmarks' package wbsync_bench: run `pip install -e benchmarks` "
        "(make test installs it), or leave tests/bench out"
    )
