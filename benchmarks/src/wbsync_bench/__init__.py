"""Benchmarks that prove the design: ``wbsync bench <name> [--json] [--write-docs]``.

One module per benchmark (``slots``, ``limiter``, ``reschedule``, ``lateness``, ``scale``),
``common`` for what they share, ``peers`` for the libraries the limiter is compared with,
``upstream`` for the emulator child process, ``docs`` for the report, ``cli`` for the commands.
"""
