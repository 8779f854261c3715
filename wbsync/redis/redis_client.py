"""The one place that turns a Redis URL into a client: one server, or a Redis Cluster.

``redis://`` and ``rediss://`` URLs (redis-py's form) name one server. A cluster is named by
its seed nodes: ``redis+cluster://[user:password@]host1:port1,host2:port2`` (``rediss+cluster``
for TLS); the client asks the seeds for the slot map and follows it (MOVED, ASK, fail-overs).

wbsync's keys are laid out for a cluster: each queue's BullMQ keys share one hash tag (the
queue's name, see ``wbsync.redis.keys``) and each bucket's key has its own, so every Lua call's keys
sit in one slot while the queues and the buckets spread over the masters.

Every failure of a Redis call is translated here, at one boundary (``redis_failures``), into
wbsync's infrastructure error: a job that meets one spends no attempt. A failure is any of
redis-py's errors (connection, timeout, loading, read-only replica, MOVED/ASK/TRYAGAIN past the
client's retries, cluster down) and anything else raised from inside redis-py's own code: before
8.2 its async cluster client raised ``AttributeError`` ("'NoneType' object has no attribute
'writelines'") from a connection it dropped while a command was under way, as it does during a
fail-over (8.2 sends the command again on a fresh connection), and a transport may still leak
``TypeError`` or ``AttributeError`` on some Python versions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.commands.core import AsyncScript
from redis.exceptions import RedisClusterException, RedisError

from wbsync.errors import ConfigError, RedisUnavailableError, WbSyncError

RedisClient = Redis | RedisCluster
"""What every part of wbsync that talks to Redis accepts."""

# redis-py's own error classes; a cluster's routing errors are not ``RedisError``s.
_REDIS_ERRORS: tuple[type[Exception], ...] = (RedisError, RedisClusterException)


def is_redis_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure of a Redis call (see the module's docstring).

    A cancellation is not one, nor is an error of wbsync's own or one raised outside redis-py
    (a bug in the caller stays a bug).
    """
    if isinstance(exc, _REDIS_ERRORS):
        return True
    if not isinstance(exc, Exception) or isinstance(exc, WbSyncError):
        return False
    return _raised_in_redis_py(exc)


def _raised_in_redis_py(exc: BaseException) -> bool:
    """Whether ``exc`` passed through redis-py's code on its way up."""
    tb = exc.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if module == "redis" or module.startswith("redis."):
            return True
        tb = tb.tb_next
    return False


def describe(exc: BaseException) -> str:
    """A Redis failure in a few words: redis-py's message, with the class when it is not one of
    redis-py's errors (a bare "'NoneType' object has no attribute ..." says nothing)."""
    if isinstance(exc, _REDIS_ERRORS):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__} in the Redis client: {exc}"


@contextmanager
def redis_failures(
    what: str, error: Callable[[str], WbSyncError] = RedisUnavailableError
) -> Iterator[None]:
    """Translate a Redis failure inside the block into ``error("<what>: <why>")``.

    ``error`` is an infrastructure error (``RedisUnavailableError``, or ``QueueError`` for the
    job queue's operations); anything that is not a Redis failure passes through untouched.
    """
    try:
        yield
    except Exception as exc:
        if not is_redis_failure(exc):
            raise
        raise error(f"{what}: {describe(exc)}") from exc


_CLUSTER_SCHEMES = {"redis+cluster": False, "rediss+cluster": True}
_EXAMPLE = "redis+cluster://host1:6379,host2:6379"


@dataclass(frozen=True, slots=True)
class ClusterSeeds:
    """A cluster URL taken apart: the seed nodes and the credentials."""

    nodes: tuple[tuple[str, int], ...]
    username: str | None
    password: str | None
    ssl: bool

    def __repr__(self) -> str:  # never show the password
        return f"ClusterSeeds(nodes={self.nodes!r}, ssl={self.ssl})"


def is_cluster(url: str) -> bool:
    """Whether ``url`` names a Redis Cluster."""
    return url.split("://", 1)[0].lower() in _CLUSTER_SCHEMES


def parse_cluster_url(url: str) -> ClusterSeeds:
    """The seeds of a ``redis+cluster://`` URL; a ``ConfigError`` saying what is wrong otherwise."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in _CLUSTER_SCHEMES:
        raise ConfigError(f"not a Redis Cluster URL (expected {_EXAMPLE})")
    auth, _, hosts = rest.rpartition("@")
    hosts = hosts.split("/", 1)[0].split("?", 1)[0]
    username: str | None = None
    password: str | None = None
    if auth:
        user, has_password, secret = auth.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if has_password else None
    nodes = []
    for seed in hosts.split(","):
        host, colon, port = seed.strip().rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(
                f"cluster seed {seed.strip()!r} is not host:port (expected {_EXAMPLE})"
            )
        nodes.append((host.strip("[]"), int(port)))
    return ClusterSeeds(tuple(nodes), username, password, _CLUSTER_SCHEMES[scheme.lower()])


_SERVER_SCHEMES = ("redis", "rediss", "unix")
_FORMS = (
    "write redis://host:6379/0 (rediss:// for TLS, unix:///path/to/redis.sock, or "
    f"{_EXAMPLE} for a cluster)"
)


def url_problem(url: str) -> str | None:
    """What is wrong with a Redis URL and how to write it, or None when it will do.

    The words never repeat the URL's password (nor its user or host). redis-py would take a
    database number that is not a number for database 0, and a bad scheme only at the first
    command, with a traceback.
    """
    if is_cluster(url):
        try:
            parse_cluster_url(url)
        except ConfigError as exc:
            return str(exc)
        return None
    scheme, sep, _ = url.partition("://")
    if not sep or scheme.lower() not in _SERVER_SCHEMES:
        return f"not a Redis URL: {_FORMS}"
    parts = urlsplit(url)
    if scheme.lower() == "unix":
        return None if parts.path else f"no socket path: {_FORMS}"
    if not _port_ok(parts):
        return f"the port is not a number from 1 to 65535: {_FORMS}"
    if not parts.hostname:
        return f"no host: {_FORMS}"
    database = parts.path.strip("/")
    if database and not database.isdigit():
        return (
            f"the database number {database!r} is not a number: end the URL with /0, or another "
            "database the server has (0-15 unless its `databases` setting says more)"
        )
    return None


def _port_ok(parts: SplitResult) -> bool:
    try:
        return parts.port is None or parts.port > 0
    except ValueError:  # not a number, or out of range
        return False


def connect(url: str, *, decode_responses: bool = True, **options: Any) -> RedisClient:
    """A client of ``url`` (one server or a cluster); no I/O until its first command.

    ``options`` (timeouts, retry) go to the client as they are.
    """
    if not is_cluster(url):
        return Redis.from_url(url, decode_responses=decode_responses, **options)
    seeds = parse_cluster_url(url)
    return RedisCluster(
        startup_nodes=[ClusterNode(host, port) for host, port in seeds.nodes],
        username=seeds.username,
        password=seeds.password,
        ssl=seeds.ssl,
        decode_responses=decode_responses,
        **options,
    )


async def run_scripts(
    client: RedisClient, calls: Sequence[tuple[AsyncScript, list[str], list[Any]]]
) -> list[Any]:
    """Run many script calls (script, keys, args) and return their replies in order.

    One pipeline on one server (two round trips: redis-py checks the scripts are loaded with a
    SCRIPT EXISTS first); on a cluster each call goes to its own slot's
    node, concurrently (each call's keys share one slot).
    """
    if isinstance(client, RedisCluster):
        return list(await asyncio.gather(*(s(keys=k, args=a) for s, k, a in calls)))
    if not calls:
        return []
    async with client.pipeline(transaction=False) as pipe:
        for script, keys, args in calls:
            await script(keys=keys, args=args, client=pipe)
        return list(await pipe.execute())


__all__ = [
    "ClusterSeeds",
    "RedisClient",
    "as_text",
    "connect",
    "describe",
    "is_cluster",
    "is_redis_failure",
    "parse_cluster_url",
    "redis_failures",
    "run_scripts",
    "url_problem",
]


def as_text(value: str | bytes) -> str:
    """A Redis reply as text (replies are bytes unless the client decodes them)."""
    return value.decode() if isinstance(value, bytes) else value
