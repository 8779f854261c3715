"""Cabinets: WB seller accounts with their encrypted tokens, as stored and as added.

The repository that stores them is :mod:`wbsync.store.cabinet_repository`; the statements it
reads them with, :mod:`wbsync.store.cabinet_queries`; the check of the key their tokens are
sealed with, :mod:`wbsync.store.key_check`.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from datetime import datetime

from wbsync.store.crypto import TokenCipher

__all__ = [
    "REMOVED_PREFIX",
    "AddManyResult",
    "Cabinet",
    "CabinetRef",
    "NewCabinet",
    "removed_name",
]

CabinetRef = int | str
"""A cabinet's id (int) or name (str)."""


@dataclass(frozen=True, slots=True)
class Cabinet:
    """A stored cabinet. The token stays encrypted until :meth:`token` is called.

    Neither ``repr`` nor equality looks at the token or the cipher.
    """

    id: int
    name: str
    seller_id: str
    active: bool
    created_at: datetime
    _sealed: str = field(repr=False, compare=False)
    _cipher: TokenCipher = field(repr=False, compare=False)
    removed_at: datetime | None = None
    """When the cabinet was removed (None: it was not): its record stays, hidden from
    listings and syncing, until its tombstones are pruned."""
    token_expires_at: datetime | None = None
    """The token's ``exp`` (None: stored before it was kept, until the token is next read)."""
    suspended: bool | None = field(default=None, compare=False)
    """Whether any suspension of it is in force, read with it by a job's reads (``get`` by id,
    ``with_cursor``); None where it was not read."""

    @property
    def sealed_token(self) -> str:
        """The stored ciphertext of the token: it changes when the token is replaced."""
        return self._sealed

    def token(self) -> str:
        """Decrypt the WB token (ConfigError when WBSYNC_SECRET_KEY is unset or wrong)."""
        return self._cipher.decrypt(self._sealed)


@dataclass(frozen=True, slots=True)
class NewCabinet:
    """A cabinet to add: its name, WB token (encrypted before it is stored) and seller id."""

    name: str
    token: str = field(repr=False)
    seller_id: str
    token_expires_at: datetime | None = None
    """The token's ``exp``, when the caller has read it (an expired token is never sent)."""


@dataclass(frozen=True, slots=True)
class AddManyResult:
    """What ``add_many`` did: the cabinets added, and the names skipped with the reason."""

    added: builtins.list[Cabinet]
    skipped: builtins.list[tuple[str, str]]


REMOVED_PREFIX = "removed-"
"""A removed cabinet's name is ``removed-<id>: <its name>``: its own name is free again."""


def removed_name(cabinet: Cabinet) -> str:
    """The name a removed cabinet keeps (cut to the column's 200 characters)."""
    return f"{REMOVED_PREFIX}{cabinet.id}: {cabinet.name}"[:200]
