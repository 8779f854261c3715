"""wbsync: keep many Wildberries seller accounts in sync without stalling on rate limits."""

__version__ = "0.1.0"
