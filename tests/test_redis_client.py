"""What counts as a failure of a Redis call (``wbsync.redis.redis_client.redis_failures``)."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from wbsync.errors import RedisUnavailableError
from wbsync.redis.redis_client import is_redis_failure, redis_failures


async def test_an_error_raised_inside_redis_py_is_a_redis_failure(redis: Redis) -> None:
    """redis-py's own code may raise what is not one of its errors (before 8.2 its cluster
    client raised ``AttributeError`` from a connection it dropped under a command): anything
    raised inside redis-py is a Redis failure, and an error of the caller's own code is not."""
    script = redis.register_script("return 1")
    with pytest.raises(RedisUnavailableError, match="the script: TypeError") as caught:
        with redis_failures("the script"):
            await script(keys=5)  # type: ignore[arg-type]  # redis-py iterates over it
    assert isinstance(caught.value.__cause__, TypeError)
    with pytest.raises(TypeError), redis_failures("the caller's own"):
        int([])  # type: ignore[call-overload]
    assert not is_redis_failure(TypeError("made here"))
    assert await script() == 1
