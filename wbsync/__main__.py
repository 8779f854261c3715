"""``python -m wbsync``: the command line."""

from wbsync.cli import app

app()
