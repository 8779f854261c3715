"""Database failures as the store's errors: the SQLSTATEs and driver errors that say "not now"
(``StoreUnavailableError``, a job waits and costs no attempt) apart from a refusal (``StoreError``).

Only ``wbsync.store.db`` calls it, at the one boundary where SQLAlchemy and the drivers' errors
are caught.
"""

from __future__ import annotations

import asyncpg
from sqlalchemy.exc import (
    DBAPIError,
    DisconnectionError,
    InterfaceError,
    OperationalError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from wbsync.errors import StoreError, StoreUnavailableError

__all__ = ["store_error", "unavailable"]


def _describe(exc: BaseException) -> str:
    """A short, parameter-free description of a database failure."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        return f"{type(exc.orig).__name__}: {exc.orig}".strip()
    return f"{type(exc).__name__}: {exc}".strip()


#: SQLSTATEs (or their two-character classes) with which PostgreSQL says "not now": the server
#: cannot take the connection or the statement at the moment, and the same work can succeed
#: later. A failover shows as these (and as refused or reset connections).
_UNAVAILABLE_SQLSTATES = frozenset(
    {
        "08",  # connection_exception: the connection failed or was lost
        "53300",  # too_many_connections (server-wide, per role or per database)
        "55000",  # object_not_in_prerequisite_state: the database has ALLOW_CONNECTIONS false
        "57P01",  # admin_shutdown: pg_terminate_backend, or a fast shutdown
        "57P02",  # crash_shutdown: another backend crashed, the server restarts
        "57P03",  # cannot_connect_now: starting up, shutting down, in recovery
        "57P05",  # idle_session_timeout
    }
)


def _sqlstate(exc: BaseException) -> str | None:
    """PostgreSQL's SQLSTATE of ``exc``: asyncpg's error (SQLAlchemy keeps it as ``orig``)."""
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    state = getattr(orig, "sqlstate", None)
    return state if isinstance(state, str) else None


def unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` says the database could not be reached or is busy, not that it refused.

    Connection refused or reset, a dropped connection, a pool timeout, SQLite's "database is
    locked", and every SQLSTATE of ``_UNAVAILABLE_SQLSTATES`` (asyncpg reports most of them as a
    plain ``DBAPIError``): waiting and trying again can succeed. A refused statement (a
    constraint, a missing table, a wrong password) is not retried. asyncpg's own errors (a
    statement sent to the driver directly) count as SQLAlchemy's wrapping of them would.
    """
    if isinstance(
        exc,
        (OSError, TimeoutError, PoolTimeoutError, DisconnectionError, asyncpg.InterfaceError),
    ):
        return True
    state = _sqlstate(exc)
    if state is not None and {state, state[:2]} & _UNAVAILABLE_SQLSTATES:
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated or isinstance(exc, InterfaceError):
            return True
        if isinstance(exc, OperationalError) and state is None:
            return not str(exc.orig).startswith("no such")  # SQLite's missing table or column
    return False


def store_error(url: str, exc: BaseException) -> StoreError:
    """``exc`` as the store's error: ``StoreUnavailableError`` when waiting can help."""
    kind = StoreUnavailableError if unavailable(exc) else StoreError
    return kind(f"database {url}: {_describe(exc)}")
