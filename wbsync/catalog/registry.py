"""The registry: named tables of what this process knows (sections, WB methods, limit groups,
datasets, queues), filled through one transactional :class:`Registrar`.

Every declaration (a WB section, a method, a dataset, a sync) says which table keys it claims
(:meth:`Declaration.claims`): a sync claims its queue and, through its methods and datasets,
their names, their limit groups and their sections. A :class:`Registrar` collects the
declarations of one owner (wbsync itself, or one plugin) and commits them all or none: a key
already held by another owner with a different value, or claimed twice with different values
by the same owner, is a clash that names the owner, the key and who holds it. Declaring exactly
what is already registered (a plugin's sync calling a built-in method) is no clash.

The tables are live mappings: whoever reads them reads them when it needs them, never a copy
taken at import. This module sits at the bottom (it imports nothing of wbsync but ``errors``);
each layer keeps its own table of the values it defines (``wb.endpoints.ENDPOINTS``,
``store.datasets.DATASETS``, ``syncs.base.SYNCS``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from wbsync.errors import ConfigError

__all__ = ["BUILTIN", "Claim", "Declaration", "Registrar", "Table", "commit_all"]

BUILTIN = "wbsync"
"""The owner of the built-in declarations."""

T = TypeVar("T")


class Table(Mapping[str, T], Generic[T]):
    """One named table of the registry: key to value, each with the owner that declared it."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._owners: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"Table({self.kind!r}, {len(self._items)} entries)"

    def __getitem__(self, key: str) -> T:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def owner(self, key: str) -> str | None:
        """Who declared ``key`` (``"wbsync"`` for the built-ins), None if nobody."""
        return self._owners.get(key)

    def _put(self, key: str, value: T, owner: str) -> None:
        self._items[key] = value
        self._owners.setdefault(key, owner)

    def _drop(self, key: str) -> None:
        self._items.pop(key, None)
        self._owners.pop(key, None)


class Claim(NamedTuple):
    """One key a declaration takes in one table, with the value it puts there."""

    table: Table[Any]
    key: str
    value: object


class Declaration(Protocol):
    """Anything that can be registered: it lists the keys it claims."""

    def claims(self) -> Iterable[Claim]:
        """Every (table, key, value) this declaration takes, its dependencies included."""
        ...


class Registrar:
    """Collects one owner's declarations and commits them together, or refuses them all.

    A plugin's entry point receives one (see ``wbsync.extend``); the built-in declarations go
    through one owned by ``"wbsync"``.
    """

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._claims: list[Claim] = []
        self._committed = False

    def __repr__(self) -> str:
        return f"Registrar({self.owner!r}, {len(self._claims)} claims)"

    def declare(self, *declarations: Declaration) -> None:
        """Add declarations to commit (a sync brings its methods, datasets and sections)."""
        if self._committed:
            raise RuntimeError(f"the registrar of {self.owner!r} is already committed")
        for declaration in declarations:
            self._claims.extend(declaration.claims())

    def declared(self, table: Table[T]) -> list[str]:
        """The keys this registrar claims in ``table`` (new or already registered), in order."""
        return list(dict.fromkeys(c.key for c in self._claims if c.table is table))

    def check(self) -> None:
        """``ConfigError`` naming the owner and the first clash; nothing is registered."""
        mine: dict[tuple[int, str], object] = {}
        for table, key, value in self._claims:
            held = mine.setdefault((id(table), key), value)
            if held != value:
                raise ConfigError(
                    f"plugin {self.owner!r}: {table.kind} {key!r} is declared twice, differently"
                )
            if key in table and table[key] != value:
                raise ConfigError(
                    f"plugin {self.owner!r}: {table.kind} {key!r} is already declared by "
                    f"{table.owner(key)!r}{_names(table[key], value)}"
                )

    def commit(self) -> None:
        """Check, then register every claim; ``ConfigError`` (and nothing registered) on a
        clash."""
        commit_all([self])


def _names(held: object, value: object) -> str:
    # A table of names (a route to its method) says which two names clash; other values are
    # whole declarations, too long for one line.
    if isinstance(held, str) and isinstance(value, str):
        return f" as {held!r}, so {value!r} cannot take it"
    return ""


def commit_all(registrars: Iterable[Registrar]) -> None:
    """Commit several owners at once: every clash (within one, or between two of them) is
    refused before anything is registered, so a refused start registers nothing."""
    pending = list(registrars)
    done: list[Claim] = []
    try:
        for registrar in pending:
            registrar.check()
            for claim in registrar._claims:
                if claim.key not in claim.table:
                    claim.table._put(claim.key, claim.value, registrar.owner)
                    done.append(claim)
            registrar._committed = True
    except ConfigError:
        for claim in done:  # this owner's or an earlier one's: nothing half-loads
            claim.table._drop(claim.key)
        for registrar in pending:
            registrar._committed = False
        raise
