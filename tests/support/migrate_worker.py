"""A migrating process for the migration-lock tests:
``python -m tests.support.migrate_worker <url>``.

It connects to the database, prints ``ready``, waits for a line on stdin (so every process
migrates at the same moment, however long each took to start), migrates and prints what
``migrate`` did (``created``, ``upgraded`` or ``current``).
"""

from __future__ import annotations

import asyncio
import sys

from wbsync import syncs  # noqa: F401  the built-in datasets, declared, as `wbsync migrate` has
from wbsync.store import Database
from wbsync.system import eventloop


async def main(url: str) -> None:
    """Connect, wait for the go line, migrate, print the action."""
    async with Database(url) as db:
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        print((await db.migrate()).action, flush=True)


if __name__ == "__main__":
    eventloop.run(main(sys.argv[1]))  # the loop of wbsync's processes
