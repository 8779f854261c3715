"""The secret key's check: proof, stored with the cabinets, of the key their tokens are sealed with.

The first token stored binds the key (``key_checks`` gets a value sealed with it); every later
write of a token, and the start of ``wbsync run`` and ``wbsync api``, checks that the configured
key opens it, so tokens are never sealed with two keys. A database whose tokens predate the
check gets its check row once a stored token proves the key right.
"""

from __future__ import annotations

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from wbsync.errors import ConfigError
from wbsync.store.cabinet_queries import LIVE, count_live
from wbsync.store.crypto import TokenCipher
from wbsync.store.schema import cabinets, key_checks, utcnow

__all__ = ["check_key", "reseal_tokens", "verify_key", "write_check"]

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


async def verify_key(conn: AsyncConnection, cipher: TokenCipher) -> None:
    """ConfigError unless ``cipher`` opens the stored tokens (any key, or none, with none)."""
    stored = await count_live(conn)
    if stored:
        if not cipher.configured:
            raise ConfigError(_NO_KEY.format(n=stored))
        await check_key(conn, cipher)


async def check_key(conn: AsyncConnection, cipher: TokenCipher) -> None:
    """ConfigError unless ``cipher`` opens the key check (or, before there is one, a stored
    token, which then writes the check)."""
    sealed = await conn.scalar(select(key_checks.c.sealed).where(key_checks.c.id == _CHECK_ID))
    if sealed is None:  # tokens stored before the check existed: one of them decides
        sealed = await conn.scalar(select(cabinets.c.token_encrypted).where(LIVE).limit(1))
        if sealed is not None and not cipher.opens(sealed):
            raise ConfigError(_WRONG_KEY)
        await write_check(conn, cipher)
    elif not cipher.opens(sealed):
        raise ConfigError(_WRONG_KEY)


async def reseal_tokens(conn: AsyncConnection, old: TokenCipher, new: TokenCipher) -> int:
    """Re-encrypt every live token and the check from ``old`` to ``new`` in the caller's
    transaction (``old`` verified first); how many tokens were rewritten."""
    await verify_key(conn, old)
    tokens = select(cabinets.c.id, cabinets.c.token_encrypted).where(LIVE)
    rows = (await conn.execute(tokens)).all()
    for row in rows:
        resealed = new.encrypt(old.decrypt(row.token_encrypted))
        await conn.execute(
            update(cabinets).where(cabinets.c.id == row.id).values(token_encrypted=resealed)
        )
    await write_check(conn, new)
    return len(rows)


async def write_check(conn: AsyncConnection, cipher: TokenCipher) -> None:
    """Bind the key: the check, sealed with ``cipher``, replaces any other."""
    await conn.execute(delete(key_checks))
    await conn.execute(
        insert(key_checks).values(
            id=_CHECK_ID, sealed=cipher.encrypt(_CHECK_VALUE), created_at=utcnow()
        )
    )
