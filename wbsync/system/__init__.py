"""The process and its host: the clock, the event loop, child processes, the garbage collector's
settings and the supervision of background tasks.

At the bottom of the layers beside the value types: nothing here imports anything of wbsync
outside this package.
"""
