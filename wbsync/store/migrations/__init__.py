"""Alembic migrations of the wbsync schema (run with ``await Database.migrate()``)."""
