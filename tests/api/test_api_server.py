"""wbsync's HTTP servers (the API and the WB emulator) parse HTTP with httptools, uvicorn's
parser in C, which uvicorn takes when it is installed (docs/scaling.md)."""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from wbsync.api.server import uvicorn_config
from wbsync.emulator import Emulator
from wbsync.emulator.server import _uvicorn_config
from wbsync.shared.runtime import Runtime


async def test_the_api_parses_http_with_httptools(api_runtime: Runtime) -> None:
    config = uvicorn_config(api_runtime, host="127.0.0.1", port=0)
    config.load()
    assert config.http_protocol_class is HttpToolsProtocol


def test_the_emulator_parses_http_with_httptools() -> None:
    config = _uvicorn_config(Emulator(), log_level="warning")
    config.load()
    assert config.http_protocol_class is HttpToolsProtocol
