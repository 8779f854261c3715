"""The event loop: wbsync's processes and this suite run on the same one, uvloop here."""

from __future__ import annotations

import asyncio

import pytest

from wbsync import eventloop

uvloop = pytest.importorskip("uvloop")  # where it has no build, asyncio's loop runs


async def _loop_kind() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


def test_processes_run_on_uvloop_where_it_is_built() -> None:
    assert eventloop.NAME == "uvloop"
    assert issubclass(eventloop.run(_loop_kind()), uvloop.Loop)


async def test_the_suite_runs_on_the_processes_loop() -> None:
    assert isinstance(asyncio.get_running_loop(), uvloop.Loop)


def test_run_gives_back_the_result_and_closes_its_loop() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def main() -> int:
        loops.append(asyncio.get_running_loop())
        return 7

    assert eventloop.run(main()) == 7
    assert loops[0].is_closed()
