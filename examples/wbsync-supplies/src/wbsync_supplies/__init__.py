"""wbsync-supplies: WB's list of FBW supplies as a wbsync plugin (docs/extending.md).

The two callables the entry points name. Each imports its side inside itself, so the
emulator never imports the client and wbsync never imports the emulator for this plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wbsync.extend import Registrar


def register(registrar: Registrar) -> None:
    """The ``wbsync.plugins`` entry point: the supplies sync (its method, section and
    dataset) and the section's ``/ping``, which no sync calls."""
    from wbsync_supplies.sync import PING, SYNC

    registrar.declare(SYNC, PING)


def register_emulated(registrar: Registrar) -> None:
    """The ``wbsync.emulator`` entry point: WB's supplies list in the emulator."""
    from wbsync_supplies.emulated import EMULATED, EMULATED_PING

    registrar.declare(EMULATED, EMULATED_PING)
