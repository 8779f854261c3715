"""Dependencies shared by the routers: the runtime and a cabinet looked up by id."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request

from wbsync.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.store.schema import CABINET_ID_MAX

__all__ = ["CabinetDep", "RuntimeDep", "get_cabinet", "get_runtime"]


def get_runtime(request: Request) -> Runtime:
    """The runtime the app was created with."""
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


async def get_cabinet(
    runtime: RuntimeDep,
    cabinet_id: Annotated[int, Path(ge=1, le=CABINET_ID_MAX, description="The cabinet's id.")],
) -> Cabinet:
    """The cabinet of the path's id (404 via CabinetNotFoundError when there is none)."""
    return await runtime.store.cabinets.get(cabinet_id)


CabinetDep = Annotated[Cabinet, Depends(get_cabinet)]
