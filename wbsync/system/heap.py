"""The garbage collector's settings for a long-running wbsync process.

Python's cyclic collector runs its youngest generation every ``700`` new container objects, and
an older one every tenth of those. A page allocates thousands (each row of a reply is a dict, a
booking-monitor page holds 112 of them), so a worker ran its young collection several times a
page, and every full collection walked the whole heap, most of which is the code and the
libraries loaded at start-up and never freed. ``settle`` is called once the process has started
(its modules imported, its connections open):

* ``gc.freeze()`` moves everything alive then into a permanent generation, which no collection
  walks again;
* the youngest generation is collected every ``YOUNG_THRESHOLD`` new objects, the older ones
  every ``OLDER_THRESHOLD`` collections of the one below.

Cycles are still collected, later: what a page leaves is freed by reference counting as soon as
the page is done; the collector only finds cycles, which the young generation holds a few
thousand objects longer. The figures that decided it are in docs/scaling.md ("The garbage
collector").
"""

from __future__ import annotations

import gc

__all__ = ["OLDER_THRESHOLD", "YOUNG_THRESHOLD", "settle"]

YOUNG_THRESHOLD = 20_000
"""New container objects between two collections of the youngest generation (Python: 700)."""
OLDER_THRESHOLD = 50
"""Collections of a generation between two of the next older one (Python: 10)."""


def settle() -> None:
    """Freeze what the started process holds, and collect the young less often (see above)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, OLDER_THRESHOLD, OLDER_THRESHOLD)
