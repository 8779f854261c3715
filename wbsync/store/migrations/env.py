"""Alembic environment for wbsync, for async engines.

``Database.migrate()`` hands over an open connection in ``config.attributes["connection"]``;
that is the normal path. Without one (a developer running ``alembic`` commands through
``wbsync.store.migrator.alembic_config``), the environment opens a :class:`Database` itself,
so engine creation stays in ``wbsync.store.db``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlalchemy import Connection

from wbsync.store.db import Database
from wbsync.store.schema import UtcDateTime, metadata

config = context.config


def _render_item(kind: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    # Revisions must not import project code: a later change to a type would rewrite history.
    if kind == "type" and isinstance(obj, UtcDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    # Dataset tables come from their datasets' declarations (store/declared.py), not from
    # wbsync's own model: autogenerate leaves them alone.
    return type_ != "table" or name in metadata.tables or not str(name).startswith("wb_")


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        # A plugin's own revisions keep their own version table (wbsync.store.declared).
        version_table=config.attributes.get("version_table", "alembic_version"),
        # SQLite can only add columns; batch mode rebuilds tables for anything else.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        render_item=_render_item,
        include_name=_include_name,
    )


def _run(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


async def _run_with_own_database(url: str) -> None:
    async with Database(url) as db:
        await db.run_sync(_run)


def _run_offline(url: str) -> None:
    context.configure(
        url=url,
        target_metadata=metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    """Run the migrations Alembic asked for, on the connection we were given if any."""
    url = config.get_main_option("sqlalchemy.url") or ""
    connection = config.attributes.get("connection")
    if context.is_offline_mode():
        _run_offline(url)
    elif connection is not None:
        _run(connection)
    else:
        asyncio.run(_run_with_own_database(url))


main()
