"""Where the repository is, for tests that read its files or run its scripts from its root."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root (the folder holding ``wbsync`` and ``tests``)."""
