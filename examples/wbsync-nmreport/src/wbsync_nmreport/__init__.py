"""wbsync-nmreport: WB's sales funnel by item and day as a wbsync plugin, a report task.

Two entry points (pyproject.toml): :func:`register` declares the sync for every wbsync command,
:func:`register_emulated` the emulated methods for ``wbsync emulator``. Each imports only what
its side needs: the emulator never loads the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wbsync.extend import Registrar


def register(registrar: Registrar) -> None:
    """Declare the nm-report sync (its three WB methods, limits and dataset come with it)."""
    from wbsync_nmreport.sync import SYNC

    registrar.declare(SYNC)


def register_emulated(registrar: Registrar) -> None:
    """Declare the emulated nm-report methods: create, the list, the file."""
    from wbsync_nmreport.emulated import EMULATED

    registrar.declare(*EMULATED)
