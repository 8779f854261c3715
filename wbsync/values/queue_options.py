"""A per-queue setting as a value: its variable, bound, meaning and where a queue not named takes
its value from. Imports nothing of wbsync: ``Settings`` is built on it, and the rows (the
settings themselves) are declared with the other settings, ``wbsync.config.QUEUE_OPTIONS``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["QueueOption"]


@dataclass(frozen=True)
class QueueOption:
    """One per-queue setting: a JSON object of values by queue name, read from
    ``WBSYNC_<FIELD>``. A queue not named takes its sync's own figure (the ``Sync`` attribute
    ``own``), else the setting ``fallback``. Each row of ``wbsync.config.QUEUE_OPTIONS`` is one:
    the field's description and bound check, the start-up check of its queue names
    (``wbsync.composition.startup``), the lookup (``wbsync.composition.workers.queue_option``)
    and docs/settings.md all read it."""

    key: str
    """The option's name in ``queue_option(settings, queue, key)``."""
    field: str
    """The ``Settings`` field (and so the variable ``WBSYNC_<FIELD>``)."""
    meaning: str
    """What a value is, the start of the settings table's line."""
    unit: str
    """What a value counts, after the bound in words ("job at once", "s")."""
    minimum: float
    """The least value accepted."""
    above: bool = False
    """True: the minimum itself is refused (a value must be above it)."""
    own: str | None = None
    """The ``Sync`` attribute holding a queue's own default, if syncs declare one."""
    fallback: str | None = None
    """The ``Settings`` field every other queue takes; None: every sync declares ``own``."""
    scaled: bool = False
    """Multiplied by ``WBSYNC_TIME_SCALE`` where it is used."""
    example: float = 1
    """The value of the settings table's JSON example."""

    @property
    def variable(self) -> str:
        """The environment variable."""
        return f"WBSYNC_{self.field.upper()}"

    @property
    def bound(self) -> str:
        """The least value, in words: "at least 1 job at once", "above 0 s"."""
        return f"{'above' if self.above else 'at least'} {self.minimum:g} {self.unit}"

    @property
    def default(self) -> str:
        """Where a queue not named takes its value from, in words."""
        words = [f"its sync's own `{self.own}`"] if self.own else []
        if self.fallback:
            words.append(f"`WBSYNC_{self.fallback.upper()}`")
        return ", else ".join(words)

    def describe(self) -> str:
        """The field's description, the settings table's line."""
        example = json.dumps({"rnp-finance-sync": self.example})
        scaled = " Scaled by time_scale." if self.scaled else ""
        return (
            f"{self.meaning}, per queue, JSON: {example}; each {self.bound}. A queue not named "
            f"takes {self.default}.{scaled}"
        )

    def problem(self, values: Mapping[str, float]) -> str | None:
        """What is wrong with ``values`` on their own (a bound), in one line, or None."""
        low = sorted(
            q for q, v in values.items() if v < self.minimum or (self.above and v == self.minimum)
        )
        return f"{', '.join(low)}: give each queue {self.bound}" if low else None
