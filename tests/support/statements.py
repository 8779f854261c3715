"""What a test's code sends to a database: every statement, by either way wbsync sends one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import asyncpg
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine


class Sent(NamedTuple):
    """One statement: its first word (upper case) and its isolation level ("AUTOCOMMIT" for
    a statement on its own, None inside a transaction)."""

    word: str
    isolation: str | None


@contextmanager
def sent_statements() -> Iterator[list[Sent]]:
    """Every statement this process sends meanwhile, in order: through SQLAlchemy (its engines'
    ``before_cursor_execute``) and straight through asyncpg (``Database.fetch``, seen by
    wrapping asyncpg's ``Connection.fetch``, which still runs)."""
    sent: list[Sent] = []

    def through_sqlalchemy(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        isolation = conn.get_execution_options().get("isolation_level")
        sent.append(Sent(_first_word(statement), isolation))

    fetch = asyncpg.Connection.fetch

    async def through_the_driver(
        self: asyncpg.Connection, query: str, *args: Any, **kw: Any
    ) -> Any:
        sent.append(Sent(_first_word(query), None if self.is_in_transaction() else "AUTOCOMMIT"))
        return await fetch(self, query, *args, **kw)

    event.listen(Engine, "before_cursor_execute", through_sqlalchemy)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(asyncpg.Connection, "fetch", through_the_driver)
            yield sent
    finally:
        event.remove(Engine, "before_cursor_execute", through_sqlalchemy)


def _first_word(statement: str) -> str:
    return statement.split(None, 1)[0].upper()
