"""Cabinets: WB seller accounts with their encrypted tokens."""

from __future__ import annotations

import builtins
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Row, bindparam, delete, false, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from wbsync.errors import CabinetNotFoundError, ConfigError, StoreError
from wbsync.store.crypto import TokenCipher
from wbsync.store.db import Database
from wbsync.store.schema import CABINET_ID_MAX, cabinets, key_checks, sync_cursors, utcnow

__all__ = [
    "REMOVED_PREFIX",
    "AddManyResult",
    "Cabinet",
    "CabinetRef",
    "CabinetRepository",
    "NewCabinet",
    "removed_name",
]

log = logging.getLogger(__name__)

# Names looked up per IN (...) query: SQLite allows 32,766 parameters, PostgreSQL 65,535.
_IN_BATCH = 5000

CabinetRef = int | str
"""A cabinet's id (int) or name (str)."""

_CHECK_ID = 1
_CHECK_VALUE = "wbsync key check v1"
_NO_KEY = (
    "WBSYNC_SECRET_KEY: not set, and the database holds {n} cabinet(s) whose tokens are "
    "encrypted: set it to the key they were stored with"
)
_WRONG_KEY = (
    "WBSYNC_SECRET_KEY: not the key the database's cabinet tokens were stored with: set that "
    "key (to change keys, run `wbsync secrets rotate` with the old key set)"
)


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


@dataclass(frozen=True, slots=True)
class AddManyResult:
    """What ``add_many`` did: the cabinets added, and the names skipped with the reason."""

    added: builtins.list[Cabinet]
    skipped: builtins.list[tuple[str, str]]


class CabinetRepository:
    """Add (one or many), list, find, rename, re-key, (de)activate and remove cabinets."""

    def __init__(self, database: Database, cipher: TokenCipher) -> None:
        self._db = database
        self._cipher = cipher

    async def with_cursor(self, cabinet_id: int, sync: str) -> tuple[Cabinet, Any]:
        """The cabinet and ``sync``'s saved cursor for it (None if it has none), in one query:
        the cabinet's row joined with its cursor; CabinetNotFoundError if there is none."""
        row = None
        if _possible_id(cabinet_id):  # else no cabinet has it: no query
            params = {"cabinet_id": cabinet_id, "sync": sync}
            rows = await self._db.fetch(_WITH_CURSOR, params)
            row = rows[0] if rows else None
        if row is None:
            raise CabinetNotFoundError(f"no cabinet {cabinet_id!r}")
        return self._record(row), row["cursor"]

    def _record(self, row: Any) -> Cabinet:
        """The cabinet of a row, SQLAlchemy's or ``Database.fetch``'s."""
        values = row._mapping if isinstance(row, Row) else row
        return Cabinet(
            id=values["id"],
            name=values["name"],
            seller_id=values["seller_id"],
            active=values["active"],
            created_at=values["created_at"],
            _sealed=values["token_encrypted"],
            _cipher=self._cipher,
            removed_at=values["removed_at"],
        )

    async def verify_key(self) -> None:
        """ConfigError unless the configured secret key opens the stored tokens.

        With no cabinet stored, any key (or none) will do. A database whose tokens predate the
        key check gets its check row here, once a stored token proves the key right.
        """
        async with self._db.transaction() as conn:
            await self._verify_key(conn)

    async def _verify_key(self, conn: AsyncConnection) -> None:
        stored = await _count(conn)
        if stored:
            if not self._cipher.configured:
                raise ConfigError(_NO_KEY.format(n=stored))
            await self._check_key(conn)

    async def _check_key(self, conn: AsyncConnection) -> None:
        sealed = await conn.scalar(select(key_checks.c.sealed).where(key_checks.c.id == _CHECK_ID))
        if sealed is None:  # tokens stored before the check existed: one of them decides
            sealed = await conn.scalar(select(cabinets.c.token_encrypted).where(_LIVE).limit(1))
            if sealed is not None and not self._cipher.opens(sealed):
                raise ConfigError(_WRONG_KEY)
            await _write_check(conn, self._cipher)
        elif not self._cipher.opens(sealed):
            raise ConfigError(_WRONG_KEY)

    async def rotate_key(self, new_secret_key: str) -> int:
        """Re-encrypt every token (and the check) with ``new_secret_key``, in one transaction.

        The configured key must open the stored tokens. Returns how many tokens were rewritten.
        This repository keeps the old key: open a new Store with the new one.
        """
        new = TokenCipher(new_secret_key)
        if not new.configured:
            raise ConfigError("the new secret key is empty; give a long random string")
        async with self._db.transaction() as conn:
            await self._verify_key(conn)
            tokens = select(cabinets.c.id, cabinets.c.token_encrypted).where(_LIVE)
            rows = (await conn.execute(tokens)).all()
            for row in rows:
                resealed = new.encrypt(self._cipher.decrypt(row.token_encrypted))
                await conn.execute(
                    update(cabinets).where(cabinets.c.id == row.id).values(token_encrypted=resealed)
                )
            await _write_check(conn, new)
        log.info("secret key rotated: %d token(s) re-encrypted", len(rows))
        return len(rows)

    async def add(self, name: str, token: str, seller_id: str) -> Cabinet:
        """Store a new active cabinet; StoreError if the name is taken.

        ConfigError if the configured key is not the one the other tokens were stored with; the
        first token binds the key (writes the key check).
        """
        if not name.strip() or "\x00" in name:
            raise StoreError("a cabinet needs a non-empty name without NUL characters")
        sealed = self._cipher.encrypt(token)
        async with self._db.transaction() as conn:
            taken = await conn.scalar(select(cabinets.c.id).where(cabinets.c.name == name))
            if taken is not None:
                raise StoreError(f"cabinet {name!r} already exists")
            if await _count(conn):
                await self._check_key(conn)
            else:
                await _write_check(conn, self._cipher)
            result = await conn.execute(
                insert(cabinets)
                .values(
                    name=name,
                    token_encrypted=sealed,
                    seller_id=seller_id,
                    active=True,
                    created_at=utcnow(),
                )
                .returning(*cabinets.c)
            )
            cabinet = self._record(result.one())
        log.info("cabinet %r added (id %d)", name, cabinet.id)
        return cabinet

    async def add_many(self, new: Sequence[NewCabinet]) -> AddManyResult:
        """Add many cabinets in one transaction; a name already stored (or repeated) is skipped."""
        skipped: builtins.list[tuple[str, str]] = []
        wanted: dict[str, NewCabinet] = {}
        for item in new:
            if not item.name.strip() or "\x00" in item.name:
                skipped.append((item.name, "the name is empty or holds a NUL character"))
            elif item.name in wanted:
                skipped.append((item.name, "the name appears twice in this batch"))
            else:
                wanted[item.name] = item
        now = utcnow()
        async with self._db.transaction() as conn:
            names = list(wanted)
            taken: set[str] = set()
            for start in range(0, len(names), _IN_BATCH):
                chunk = names[start : start + _IN_BATCH]
                found = await conn.scalars(
                    select(cabinets.c.name).where(cabinets.c.name.in_(chunk))
                )
                taken.update(found)
            skipped += [(name, "a cabinet of this name already exists") for name in sorted(taken)]
            if await _count(conn):  # the key must be the one the stored tokens were sealed with
                await self._check_key(conn)
            elif len(taken) < len(wanted):
                await _write_check(conn, self._cipher)
            rows = [
                {
                    "name": item.name,
                    "token_encrypted": self._cipher.encrypt(item.token),
                    "seller_id": item.seller_id,
                    "active": True,
                    "created_at": now,
                }
                for item in wanted.values()
                if item.name not in taken
            ]
            added = []
            if rows:
                result = await conn.execute(insert(cabinets).returning(*cabinets.c), rows)
                added = [self._record(row) for row in result]
        log.info("%d cabinets added, %d skipped", len(added), len(skipped))
        return AddManyResult(added=sorted(added, key=lambda c: c.id), skipped=skipped)

    async def list(self, *, active_only: bool = False) -> builtins.list[Cabinet]:
        """Every cabinet not removed (or only the active ones), by id."""
        query = select(cabinets).where(_LIVE).order_by(cabinets.c.id)
        if active_only:
            query = query.where(cabinets.c.active.is_(True))
        async with self._db.connection() as conn:
            result = await conn.execute(query)
            return [self._record(row) for row in result]

    async def many(self, ids: Sequence[int]) -> builtins.list[Cabinet]:
        """The cabinets of these ids that exist (and were not removed), by id."""
        if not ids:
            return []
        query = select(cabinets).where(cabinets.c.id.in_(list(ids)), _LIVE).order_by(cabinets.c.id)
        async with self._db.connection() as conn:
            result = await conn.execute(query)
            return [self._record(row) for row in result]

    async def get(self, ref: CabinetRef, *, removed: bool = False) -> Cabinet:
        """The cabinet of that id or name; CabinetNotFoundError if there is none.

        A removed cabinet is found only with ``removed`` (by its id, or the name it had).
        """
        row: Any = None
        if _possible_id(ref):  # a job's read: a statement built once, through the driver
            found = await self._db.fetch(_BY_ID_ANY if removed else _BY_ID, {"cabinet_id": ref})
            row = found[0] if found else None
        elif removed:
            query = select(cabinets).where(_match(ref) | _removed_name(ref)).limit(1)
            row = (await self._db.execute(query.order_by(cabinets.c.id.desc()))).first()
        else:
            row = (await self._db.execute(select(cabinets).where(_live(ref)))).one_or_none()
        if row is None:
            raise CabinetNotFoundError(f"no cabinet {ref!r}")
        return self._record(row)

    async def set_active(self, ref: CabinetRef, active: bool) -> Cabinet:
        """Mark a cabinet active or inactive (inactive cabinets are not synced)."""
        async with self._db.transaction() as conn:
            result = await conn.execute(
                update(cabinets).where(_live(ref)).values(active=active).returning(*cabinets.c)
            )
            row = result.one_or_none()
        if row is None:
            raise CabinetNotFoundError(f"no cabinet {ref!r}")
        log.info("cabinet %r %s", row.name, "activated" if active else "deactivated")
        return self._record(row)

    async def replace_token(self, ref: CabinetRef, token: str, seller_id: str) -> Cabinet:
        """Store a new token for the cabinet; its rows, cursors and runs stay.

        StoreError if the token belongs to another seller than the cabinet's.
        """
        sealed = self._cipher.encrypt(token)
        async with self._db.transaction() as conn:
            current = (await conn.execute(select(cabinets).where(_live(ref)))).one_or_none()
            if current is None:
                raise CabinetNotFoundError(f"no cabinet {ref!r}")
            await self._check_key(conn)
            if current.seller_id != seller_id:
                raise StoreError(
                    f"the new token is for seller {seller_id}, but cabinet {current.name!r} is "
                    f"seller {current.seller_id}; add it as a new cabinet instead"
                )
            result = await conn.execute(
                update(cabinets)
                .where(cabinets.c.id == current.id)
                .values(token_encrypted=sealed)
                .returning(*cabinets.c)
            )
            cabinet = self._record(result.one())
        log.info("cabinet %r: token replaced", cabinet.name)
        return cabinet

    async def rename(self, ref: CabinetRef, name: str) -> Cabinet:
        """Give the cabinet a new name; StoreError if it is empty or taken."""
        if not name.strip():
            raise StoreError("a cabinet needs a non-empty name")
        async with self._db.transaction() as conn:
            taken = await conn.scalar(select(cabinets.c.id).where(cabinets.c.name == name))
            if taken is not None:
                raise StoreError(f"cabinet {name!r} already exists")
            result = await conn.execute(
                update(cabinets).where(_live(ref)).values(name=name).returning(*cabinets.c)
            )
            row = result.one_or_none()
        if row is None:
            raise CabinetNotFoundError(f"no cabinet {ref!r}")
        log.info("cabinet %d renamed to %r", row.id, name)
        return self._record(row)

    async def deactivate(self, ref: CabinetRef) -> Cabinet:
        """Stop syncing a cabinet, keeping its data."""
        return await self.set_active(ref, False)

    async def remove(self, ref: CabinetRef) -> Cabinet:
        """Mark a cabinet removed: inactive, gone from listings, jobs and its name (free for a
        new cabinet), its record kept; the removed cabinet.

        Its rows are not touched here: ``Store.remove_cabinet`` tombstones them (each a change
        in the feed) and the retention pass finishes an interrupted removal and deletes the
        record once its tombstones are pruned. A removed cabinet is found again (by its id or
        the name it had), so a removal can be resumed.
        """
        found = await self.get(ref, removed=True)
        if found.removed_at is not None:
            return found
        async with self._db.transaction() as conn:
            result = await conn.execute(
                update(cabinets)
                .where(cabinets.c.id == found.id, cabinets.c.removed_at.is_(None))
                # The token goes: nothing will call WB for it again, and a new secret key may
                # start afresh once no live cabinet holds a token.
                .values(
                    active=False, removed_at=utcnow(), name=removed_name(found), token_encrypted=""
                )
                .returning(*cabinets.c)
            )
            row = result.one_or_none()
            # Nothing syncs it again: where its syncs stood goes (its runs stay, for the log).
            await conn.execute(delete(sync_cursors).where(sync_cursors.c.cabinet_id == found.id))
        if row is None:  # removed meanwhile
            return await self.get(found.id, removed=True)
        log.info("cabinet %r removed (id %d)", found.name, found.id)
        return self._record(row)

    async def removed(self) -> builtins.list[Cabinet]:
        """The removed cabinets whose records remain, by id."""
        query = select(cabinets).where(cabinets.c.removed_at.is_not(None)).order_by(cabinets.c.id)
        async with self._db.connection() as conn:
            return [self._record(row) for row in await conn.execute(query)]

    async def forget(self, cabinet_id: int) -> bool:
        """Delete a removed cabinet's record (and, by cascade, its cursors, runs and logs);
        whether it was there. The caller has checked that no dataset holds a row of it."""
        async with self._db.transaction() as conn:
            result = await conn.execute(
                delete(cabinets).where(
                    cabinets.c.id == cabinet_id, cabinets.c.removed_at.is_not(None)
                )
            )
        return bool(result.rowcount)


REMOVED_PREFIX = "removed-"
"""A removed cabinet's name is ``removed-<id>: <its name>``: its own name is free again."""


def removed_name(cabinet: Cabinet) -> str:
    """The name a removed cabinet keeps (cut to the column's 200 characters)."""
    return f"{REMOVED_PREFIX}{cabinet.id}: {cabinet.name}"[:200]


def _removed_name(ref: CabinetRef) -> ColumnElement[bool]:
    if isinstance(ref, int) or "\x00" in ref:
        return false()
    return cabinets.c.name.like(f"{REMOVED_PREFIX}%: " + ref.replace("%", "_"))


async def _count(conn: AsyncConnection) -> int:
    query = select(func.count()).select_from(cabinets).where(_LIVE)
    return int(await conn.scalar(query) or 0)


async def _write_check(conn: AsyncConnection, cipher: TokenCipher) -> None:
    await conn.execute(delete(key_checks))
    await conn.execute(
        insert(key_checks).values(
            id=_CHECK_ID, sealed=cipher.encrypt(_CHECK_VALUE), created_at=utcnow()
        )
    )


_LIVE = cabinets.c.removed_at.is_(None)

_BY_ID_ANY = select(cabinets).where(cabinets.c.id == bindparam("cabinet_id"))
"""A cabinet by its id, removed or not, built once (see ``_WITH_CURSOR``)."""

_BY_ID = _BY_ID_ANY.where(_LIVE)
"""A cabinet not removed by its id, built once."""

_WITH_CURSOR = (
    select(cabinets, sync_cursors.c.cursor)
    .select_from(
        cabinets.outerjoin(
            sync_cursors,
            (sync_cursors.c.cabinet_id == bindparam("cabinet_id"))
            & (sync_cursors.c.sync == bindparam("sync")),
        )
    )
    .where(cabinets.c.id == bindparam("cabinet_id"), _LIVE)
)
"""A cabinet (not removed) joined with one sync's cursor; built once, so SQLAlchemy finds its
compiled form without computing the statement's cache key (a statement built per call cost
~0.2 ms a job)."""


def _possible_id(ref: CabinetRef) -> bool:
    """True for an id a cabinet can have; False for a name or an id out of range."""
    # bool is an int subclass; True as a cabinet id is a caller bug, not cabinet 1.
    if isinstance(ref, bool):
        raise TypeError("a cabinet reference is an id (int) or a name (str)")
    return isinstance(ref, int) and 1 <= ref <= CABINET_ID_MAX


def _live(ref: CabinetRef) -> ColumnElement[bool]:
    return _match(ref) & _LIVE


def _match(ref: CabinetRef) -> ColumnElement[bool]:
    # A reference no cabinet can have matches nothing, rather than reaching the database, which
    # refuses it (PostgreSQL: integer out of range, NUL in text) with an error of its own.
    if _possible_id(ref):
        return cabinets.c.id == ref
    if isinstance(ref, int):
        return false()
    return cabinets.c.name == ref if "\x00" not in ref else false()
