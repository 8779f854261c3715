"""This process's recent reads of cabinets, for the run of a job (``CabinetRepository.recent``).

A sync job reads its cabinet (is it active, which token) at every run; a long sync runs once a
page, and a cabinet has a job in each queue. The copy read at most ``CABINET_CACHE_S`` ago
serves instead of a database round trip, and the token's decryption is kept with it.

How fast a change takes effect in a worker:

* made by this process (``set_active``, ``replace_token``, ``rename``, ``remove``, a key
  rotation): at once, every copy is dropped;
* made by another process (the API, the CLI): at the latest ``CABINET_CACHE_S`` later; a
  deactivated cabinet gets no new jobs from the fan-out's next pass anyway (it lists the active
  cabinets from the database), so only runs already under way see the old copy.

Bounded: at most ``CABINET_CACHE_MAX`` cabinets are kept, the least recently used go first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from wbsync import clock

__all__ = ["CABINET_CACHE_MAX", "CABINET_CACHE_S", "Recent"]

CABINET_CACHE_S = 30.0
"""How long a worker uses its copy of a cabinet before reading it again (seconds)."""
CABINET_CACHE_MAX = 10_000
"""Cabinets a process keeps copies of (the least recently used go first)."""

T = TypeVar("T")


class Recent(Generic[T]):
    """``read(id)``'s results, each reused for ``ttl_s`` seconds; at most ``max_entries``."""

    def __init__(
        self,
        read: Callable[[int], Awaitable[T]],
        *,
        ttl_s: float = CABINET_CACHE_S,
        max_entries: int = CABINET_CACHE_MAX,
    ) -> None:
        if ttl_s < 0 or max_entries < 1:
            raise ValueError(f"need ttl_s >= 0 and max_entries >= 1, got {ttl_s}, {max_entries}")
        self._read = read
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._kept: OrderedDict[int, tuple[float, T]] = OrderedDict()
        self._generation = 0  # a read that a clear() overtook keeps nothing

    def __len__(self) -> int:
        return len(self._kept)

    async def get(self, key: int) -> T:
        """The copy of ``key`` read at most ``ttl_s`` ago, else a fresh read (kept)."""
        kept = self.fresh(key)
        if kept is not None:
            return kept
        generation = self.generation
        value = await self._read(key)  # raises for a missing one: nothing kept
        self.keep(key, value, generation)
        return value

    def fresh(self, key: int) -> T | None:
        """The copy of ``key`` read at most ``ttl_s`` ago, or None."""
        kept = self._kept.get(key)
        if kept is None or clock.monotonic() - kept[0] >= self.ttl_s:
            return None
        self._kept.move_to_end(key)
        return kept[1]

    @property
    def generation(self) -> int:
        """Changes at every ``clear``: read it before a read, give it to ``keep`` after."""
        return self._generation

    def keep(self, key: int, value: T, generation: int) -> None:
        """Keep ``value``, read since ``generation``, unless a ``clear`` came meanwhile."""
        if generation != self._generation:
            return
        self._kept[key] = (clock.monotonic(), value)
        self._kept.move_to_end(key)
        while len(self._kept) > self.max_entries:
            self._kept.popitem(last=False)

    def clear(self) -> None:
        """Drop every copy (a change this process made), and what reads under way return."""
        self._generation += 1
        self._kept.clear()
