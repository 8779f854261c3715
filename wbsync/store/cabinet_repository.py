"""Cabinets' repository: add (one or many), list, find, rename, re-key, (de)activate, remove."""

from __future__ import annotations

import builtins
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, delete, insert, select, update

from wbsync.errors import CabinetNotFoundError, ConfigError, StoreError
from wbsync.store.cabinet_queries import (
    BY_ID,
    BY_ID_ANY,
    LIVE,
    SET_EXPIRY,
    WITH_CURSOR,
    count_live,
    live,
    match,
    possible_id,
    removed_match,
)
from wbsync.store.cabinets import AddManyResult, Cabinet, CabinetRef, NewCabinet, removed_name
from wbsync.store.crypto import TokenCipher
from wbsync.store.db import Database
from wbsync.store.key_check import check_key, reseal_tokens, verify_key, write_check
from wbsync.store.schema import cabinet_suspensions, cabinets, sync_cursors, utcnow

__all__ = ["CabinetRepository"]

log = logging.getLogger(__name__)

# Names looked up per IN (...) query: SQLite allows 32,766 parameters, PostgreSQL 65,535.
_IN_BATCH = 5000


class CabinetRepository:
    """Add (one or many), list, find, rename, re-key, (de)activate and remove cabinets."""

    def __init__(self, database: Database, cipher: TokenCipher) -> None:
        self._db = database
        self._cipher = cipher

    async def with_cursor(self, cabinet_id: int, sync: str) -> tuple[Cabinet, Any]:
        """The cabinet and ``sync``'s saved cursor for it (None if it has none), in one query:
        the cabinet's row joined with its cursor; CabinetNotFoundError if there is none."""
        row = None
        if possible_id(cabinet_id):  # else no cabinet has it: no query
            params = {"cabinet_id": cabinet_id, "sync": sync}
            rows = await self._db.fetch(WITH_CURSOR, params)
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
            token_expires_at=values["token_expires_at"],
            suspended=_suspended(values),
        )

    async def verify_key(self) -> None:
        """ConfigError unless the configured secret key opens the stored tokens.

        With no cabinet stored, any key (or none) will do. A database whose tokens predate the
        key check gets its check row here, once a stored token proves the key right.
        """
        async with self._db.transaction() as conn:
            await verify_key(conn, self._cipher)

    async def rotate_key(self, new_secret_key: str) -> int:
        """Re-encrypt every token (and the check) with ``new_secret_key``, in one transaction.

        The configured key must open the stored tokens. Returns how many tokens were rewritten.
        This repository keeps the old key: open a new Store with the new one.
        """
        new = TokenCipher(new_secret_key)
        if not new.configured:
            raise ConfigError("the new secret key is empty; give a long random string")
        async with self._db.transaction() as conn:
            rewritten = await reseal_tokens(conn, self._cipher, new)
        log.info("secret key rotated: %d token(s) re-encrypted", rewritten)
        return rewritten

    async def add(
        self, name: str, token: str, seller_id: str, *, token_expires_at: datetime | None = None
    ) -> Cabinet:
        """Store a new active cabinet (with its token's ``exp``, when known); StoreError if the
        name is taken.

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
            if await count_live(conn):
                await check_key(conn, self._cipher)
            else:
                await write_check(conn, self._cipher)
            result = await conn.execute(
                insert(cabinets)
                .values(
                    name=name,
                    token_encrypted=sealed,
                    seller_id=seller_id,
                    active=True,
                    created_at=utcnow(),
                    token_expires_at=token_expires_at,
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
            if await count_live(conn):  # the key must be the one the stored tokens were sealed with
                await check_key(conn, self._cipher)
            elif len(taken) < len(wanted):
                await write_check(conn, self._cipher)
            rows = [
                {
                    "name": item.name,
                    "token_encrypted": self._cipher.encrypt(item.token),
                    "seller_id": item.seller_id,
                    "active": True,
                    "created_at": now,
                    "token_expires_at": item.token_expires_at,
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
        query = select(cabinets).where(LIVE).order_by(cabinets.c.id)
        if active_only:
            query = query.where(cabinets.c.active.is_(True))
        async with self._db.connection() as conn:
            result = await conn.execute(query)
            return [self._record(row) for row in result]

    async def many(self, ids: Sequence[int]) -> builtins.list[Cabinet]:
        """The cabinets of these ids that exist (and were not removed), by id."""
        if not ids:
            return []
        query = select(cabinets).where(cabinets.c.id.in_(list(ids)), LIVE).order_by(cabinets.c.id)
        async with self._db.connection() as conn:
            result = await conn.execute(query)
            return [self._record(row) for row in result]

    async def get(self, ref: CabinetRef, *, removed: bool = False) -> Cabinet:
        """The cabinet of that id or name; CabinetNotFoundError if there is none.

        A removed cabinet is found only with ``removed`` (by its id, or the name it had).
        """
        row: Any = None
        if possible_id(ref):  # a job's read: a statement built once, through the driver
            found = await self._db.fetch(BY_ID_ANY if removed else BY_ID, {"cabinet_id": ref})
            row = found[0] if found else None
        elif removed:
            query = select(cabinets).where(match(ref) | removed_match(ref)).limit(1)
            row = (await self._db.execute(query.order_by(cabinets.c.id.desc()))).first()
        else:
            row = (await self._db.execute(select(cabinets).where(live(ref)))).one_or_none()
        if row is None:
            raise CabinetNotFoundError(f"no cabinet {ref!r}")
        return self._record(row)

    async def set_active(self, ref: CabinetRef, active: bool) -> Cabinet:
        """Mark a cabinet active or inactive (inactive cabinets are not synced)."""
        async with self._db.transaction() as conn:
            result = await conn.execute(
                update(cabinets).where(live(ref)).values(active=active).returning(*cabinets.c)
            )
            row = result.one_or_none()
        if row is None:
            raise CabinetNotFoundError(f"no cabinet {ref!r}")
        log.info("cabinet %r %s", row.name, "activated" if active else "deactivated")
        return self._record(row)

    async def replace_token(
        self,
        ref: CabinetRef,
        token: str,
        seller_id: str,
        *,
        token_expires_at: datetime | None = None,
    ) -> Cabinet:
        """Store a new token for the cabinet (with its ``exp``, when known); its rows, cursors
        and runs stay, and its suspensions are lifted in the same transaction (what WB refused
        was the old token).

        StoreError if the token belongs to another seller than the cabinet's.
        """
        sealed = self._cipher.encrypt(token)
        async with self._db.transaction() as conn:
            current = (await conn.execute(select(cabinets).where(live(ref)))).one_or_none()
            if current is None:
                raise CabinetNotFoundError(f"no cabinet {ref!r}")
            await check_key(conn, self._cipher)
            if current.seller_id != seller_id:
                raise StoreError(
                    f"the new token is for seller {seller_id}, but cabinet {current.name!r} is "
                    f"seller {current.seller_id}; add it as a new cabinet instead"
                )
            result = await conn.execute(
                update(cabinets)
                .where(cabinets.c.id == current.id)
                .values(token_encrypted=sealed, token_expires_at=token_expires_at)
                .returning(*cabinets.c)
            )
            cabinet = self._record(result.one())
            lifted = await conn.execute(
                delete(cabinet_suspensions).where(cabinet_suspensions.c.cabinet_id == current.id)
            )
        said = f"; {lifted.rowcount} suspension(s) lifted" if lifted.rowcount else ""
        log.info("cabinet %r: token replaced%s", cabinet.name, said)
        return cabinet

    async def set_token_expiry(self, cabinet_id: int, expires_at: datetime) -> None:
        """Keep the ``exp`` of the cabinet's stored token (read from the token itself: a row
        stored before the expiry was kept gets it when its token is next decrypted).

        A job's write (its cabinet's first job): one statement built once, through the driver,
        in autocommit (no BEGIN and COMMIT round trips)."""
        await self._db.fetch(SET_EXPIRY, {"cabinet_id": cabinet_id, "expires_at": expires_at})

    async def set_token_expiries(self, expiries: Mapping[int, datetime]) -> None:
        """``set_token_expiry`` for many cabinets in one transaction (the fan-out's first read
        after the migration fills every older row at once)."""
        if not expiries:
            return
        rows = [{"cabinet_id": k, "expires_at": v} for k, v in expiries.items()]
        async with self._db.transaction() as conn:
            await conn.execute(SET_EXPIRY, rows)

    async def rename(self, ref: CabinetRef, name: str) -> Cabinet:
        """Give the cabinet a new name; StoreError if it is empty or taken."""
        if not name.strip():
            raise StoreError("a cabinet needs a non-empty name")
        async with self._db.transaction() as conn:
            taken = await conn.scalar(select(cabinets.c.id).where(cabinets.c.name == name))
            if taken is not None:
                raise StoreError(f"cabinet {name!r} already exists")
            result = await conn.execute(
                update(cabinets).where(live(ref)).values(name=name).returning(*cabinets.c)
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
            # Nothing syncs it again: where its syncs stood goes (its runs stay, for the log),
            # and so do its suspensions (nothing of it needs attention any more).
            await conn.execute(delete(sync_cursors).where(sync_cursors.c.cabinet_id == found.id))
            await conn.execute(
                delete(cabinet_suspensions).where(cabinet_suspensions.c.cabinet_id == found.id)
            )
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


def _suspended(values: Any) -> bool | None:
    try:
        flag = values["suspended"]
    except KeyError:  # a read that did not ask
        return None
    return bool(flag)
