"""What one wbsync process shares (``Runtime``: settings, Redis, the limiter, the database, HTTP,
the queues) and the change stream its syncs' pages are announced on.
"""
