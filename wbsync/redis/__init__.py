"""The Redis plumbing: the one client factory and its bounds, the embedded server and the local
cluster, every key name, the Lua loader, and the throughput counts kept in Redis.

Below the limiter and the jobs, which build on it; above configuration and observability.
"""
