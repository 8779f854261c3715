"""The demo: every sync once for a handful of cabinets against the emulator."""
