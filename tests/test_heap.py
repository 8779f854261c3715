"""A started process's collector: what it held at start frozen, the young collected less often,
cycles made later still freed (in a child process: this suite's own collector is left alone)."""

from __future__ import annotations

import json
import subprocess
import sys

from wbsync.system import heap

_CHILD = """
import gc, json, weakref
from wbsync.system import heap

class Node:
    pass

def cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)

before = cycle()  # garbage at start: collected by settle, not frozen
heap.settle()
after = cycle()  # garbage made later: the collector still frees it
gc.collect()
print(json.dumps({
    "threshold": gc.get_threshold(),
    "frozen": gc.get_freeze_count(),
    "before_freed": before() is None,
    "after_freed": after() is None,
}))
"""


def test_settle_freezes_the_start_and_still_frees_later_cycles() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=60, check=True
    )
    seen = json.loads(done.stdout)
    assert seen["threshold"] == [heap.YOUNG_THRESHOLD, heap.OLDER_THRESHOLD, heap.OLDER_THRESHOLD]
    assert seen["frozen"] > 1000  # the modules and libraries loaded at start
    assert seen["before_freed"]
    assert seen["after_freed"]
