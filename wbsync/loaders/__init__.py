"""Loaders: clients of wbsync's HTTP change feed that load it into somewhere else.

A loader talks to a running wbsync over its API (docs/data.md, "The change feed") and imports
nothing of the store, the jobs or the service: it runs wherever the warehouse's tooling runs.
``wbsync.loaders.dlt`` is a dlt source (the ``dlt`` extra); ``wbsync.loaders.feed`` is the HTTP
side it reads the feed with.
"""
