"""wbsync-deductions: a wbsync plugin that syncs WB's deductions report.

Two entry points (pyproject.toml): :func:`register` declares the sync for every wbsync command,
:func:`register_emulated` the emulated method for ``wbsync emulator``. Each imports only what its
side needs: the emulator never loads the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wbsync.extend import Registrar


def register(registrar: Registrar) -> None:
    """Declare the deductions sync (its WB method, limits and dataset come with it)."""
    from wbsync_deductions.sync import SYNC

    registrar.declare(SYNC)


def register_emulated(registrar: Registrar) -> None:
    """Declare the emulated deductions method."""
    from wbsync_deductions.emulated import EMULATED

    registrar.declare(EMULATED)
