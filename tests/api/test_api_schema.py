"""schemathesis over the served /openapi.json: with a key no 5xx and every reply as documented
(status, content type, body schema); without a key every protected route is 401, body unread.

Everything is real and out of process: ``wbsync emulator`` and ``wbsync api`` as child processes
(schemathesis calls synchronously, so nothing may share the test's event loop).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import Case
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.result import Ok
from schemathesis.schemas import APIOperation
from schemathesis.specs.openapi.schemas import OpenApiSchema

from tests.support.api import API_KEY, AUTH
from wbsync.emulator import Emulator, EmulatorConfig
from wbsync.system.procs import free_port, stop_child

SELLER = "0000000a-0000-4000-8000-0000000000a0"
SCALE = "0.01"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
# Each operation gets this many generated requests: a few seconds for the whole schema.
EXAMPLES = 5


def _wait_up(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60  # generous: imports take seconds on a loaded machine
    while True:
        if process.poll() is not None:
            said = process.stderr.read().decode(errors="replace") if process.stderr else ""
            raise AssertionError(f"the child process exited ({process.returncode}): {said}")
        try:
            if httpx.get(url, timeout=5).status_code < 500:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{url} did not come up"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def served(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``wbsync api`` over the emulator, with one cabinet stored; yields the API's base URL."""
    folder: Path = tmp_path_factory.mktemp("schema")
    # The sandbox port is given: the emulator's default (its port + 1) may be the API's.
    emu_port, sandbox_port, api_port = free_port(), free_port(), free_port()
    emulator = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wbsync",
            "emulator",
            "--port",
            str(emu_port),
            "--sandbox-port",
            str(sandbox_port),
            "--time-scale",
            SCALE,
            "--serve-disabled-in-docs",  # the API's acceptance-coefficients read is under test
        ],
        stderr=subprocess.PIPE,
    )
    env = {
        **os.environ,
        "WBSYNC_REDIS_URL": redis_url,
        "WBSYNC_REDIS_PREFIX": f"wbsync-test:{uuid.uuid4().hex[:12]}",
        "WBSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{folder / 'api.db'}",
        "WBSYNC_API_KEYS": f'["{API_KEY}"]',
        "WBSYNC_SECRET_KEY": "schema-test-secret",
        "WBSYNC_WB_BASE_URL": f"http://127.0.0.1:{emu_port}",
        "WBSYNC_TIME_SCALE": SCALE,
        "WBSYNC_LOG_LEVEL": "WARNING",
    }
    api = subprocess.Popen(
        [sys.executable, "-m", "wbsync", "api", "--port", str(api_port)],
        env=env,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{api_port}"
    try:
        _wait_up(f"http://127.0.0.1:{emu_port}/__emulator/counters", emulator)
        _wait_up(f"{base}/healthz", api)
        token = Emulator(EmulatorConfig()).token(SELLER)  # the default signing key: it accepts
        added = httpx.post(
            f"{base}/api/v1/cabinets", json={"name": "shop", "token": token}, headers=AUTH
        )
        assert added.status_code == 201, added.text
        yield base
    finally:
        stop_child(api, timeout_s=30)
        stop_child(emulator)


@pytest.fixture(scope="module")
def api_schema(served: str) -> OpenApiSchema:
    return schemathesis.openapi.from_url(f"{served}/openapi.json", headers=AUTH)


def _operations(schema: OpenApiSchema) -> list[APIOperation[Any, Any, Any, Any]]:
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result  # the served schema is valid
        operations.append(result.ok())
    return operations


@pytest.mark.long
def test_generated_requests_get_documented_replies_and_no_5xx(api_schema: OpenApiSchema) -> None:
    operations = _operations(api_schema)
    assert len(operations) >= 12
    for operation in operations:  # one hypothesis run per operation, a few examples each

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def call(case: Case[Any]) -> None:
            case.call_and_validate(headers=AUTH, checks=CHECKS)

        call()


@pytest.mark.long  # beside the test above: they share the served API
def test_without_a_key_every_protected_route_is_401(served: str, api_schema: OpenApiSchema) -> None:
    protected = 0
    for operation in _operations(api_schema):
        path = operation.path.replace("{cabinet_id}", "1").replace("{queue}", "pricing-bulk")
        if path in ("/healthz", "/readyz"):
            continue
        for headers in ({}, {"Authorization": "Bearer " + "x" * 40}):
            reply = httpx.request(
                operation.method.upper(), served + path, headers=headers, content=b"{" * 100_000
            )
            assert reply.status_code == 401, (operation.method, path, reply.text)
            assert reply.headers["content-type"] == "application/problem+json"
        protected += 1
    assert protected >= 10
