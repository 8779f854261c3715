"""Value types at the bottom of the layers: a bucket's scope, the limit overrides, a per-queue
option. They import nothing of wbsync; the errors, the settings and the limiter are built on them.
"""
