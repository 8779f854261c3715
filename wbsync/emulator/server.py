"""Running the emulator: in-process on a free loopback port (tests, demo) or in the foreground."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Generator, Iterable
from datetime import datetime, timedelta
from typing import Any

import uvicorn

from wbsync.emulator.app import build_app
from wbsync.emulator.config import MOSCOW, EmulatorConfig, FaultRule, LimitOverride
from wbsync.emulator.dataset import Row
from wbsync.emulator.emulated import expected
from wbsync.emulator.state import Counters, EmulatorState
from wbsync.emulator.tokens import CATEGORY_BITS, LIFETIME, Kind, mint, token_id
from wbsync.system.supervise import reap

__all__ = ["ALL_CATEGORIES", "Emulator", "running_emulator", "serve"]

#: Every method category, without the read-only bit.
ALL_CATEGORIES = tuple(name for name in CATEGORY_BITS if name != "read_only")

log = logging.getLogger(__name__)


class _EmbeddedServer(uvicorn.Server):
    """uvicorn that leaves the host process's signal handlers alone."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class Emulator:
    """A configured emulator: its state, its ASGI app and, once running, its base URL."""

    def __init__(self, config: EmulatorConfig | None = None) -> None:
        self.config = config or EmulatorConfig()
        self.state = EmulatorState(self.config)
        self.app = build_app(self.state)
        self.base_url = ""
        #: Where WB's ``-sandbox`` hosts are (Test tokens work only there), once running.
        self.sandbox_url = ""

    @property
    def counters(self) -> Counters:
        """Requests, 429s and faults served, per seller and method."""
        return self.state.counters

    def token(
        self,
        seller_id: str,
        *,
        token_type: str = Kind.PERSONAL,
        categories: Iterable[str | int] = ALL_CATEGORIES,
        lifetime: timedelta = LIFETIME,
    ) -> str:
        """A token this emulator accepts (every category, read-write, unless told otherwise);
        categories by WB's name or bit number."""
        return mint(
            key=self.config.signing_key,
            seller=seller_id,
            kind=token_type,
            categories=categories,
            lifetime=lifetime,
        )

    def expected(self, seller_id: str, method: str, **params: Any) -> list[Row]:
        """The rows a full pull of ``method`` returns now (see ``emulated.expected_rows``)."""
        return expected(self.state, seller_id, method, **params)

    def set_faults(self, rules: list[FaultRule], seed: int | None = None) -> None:
        """Replace the active fault rules."""
        self.state.faults.replace(rules, seed)

    def edit_campaign(
        self,
        seller_id: str,
        advert_id: int,
        *,
        bid_type: str | None = None,
        payment_type: str | None = None,
        status: int | None = None,
        updated: datetime | None = None,
    ) -> None:
        """Change a campaign as its seller would in WB's portal (set-bids then follows it):
        pausing (11) or finishing (7) it at ``updated`` (Moscow wall time, its last change)
        ends its statistics there."""
        change = self.state.seller(seller_id).campaign_edits.setdefault(advert_id, {})
        if bid_type is not None:
            change["bid_type"] = bid_type
        if payment_type is not None:
            change.setdefault("settings", {})["payment_type"] = payment_type
        if status is not None:
            change["status"] = status
        if updated is not None:
            wall = updated.astimezone(MOSCOW) if updated.tzinfo else updated
            stamp = f"{wall.replace(tzinfo=None).isoformat()}+03:00"
            change.setdefault("timestamps", {})["updated"] = stamp

    def revoke(self, token: str) -> None:
        """Revoke ``token`` as its seller does in WB's portal: 401 "token problem; token is
        revoked" for it from now on (until ``reset``)."""
        tid = token_id(token)
        if not tid:
            raise ValueError("not a token of this emulator (no id claim)")
        self.state.revoked.add(tid)

    def set_balance(self, seller_id: str, *, empty: bool, method: str = "*") -> None:
        """Empty (or refill) the seller's balance for ``method`` (every method by default):
        WB answers 402 while it is empty."""
        if empty:
            self.state.unpaid.add((seller_id, method))
        else:
            self.state.unpaid.discard((seller_id, method))

    def disable(self, *methods: str) -> None:
        """Switch methods off as WB does (they answer 404 until ``enable``)."""
        self.state.disable(list(methods))

    def enable(self, *methods: str) -> None:
        """Switch methods on again (all when none is named)."""
        if methods:
            self.state.disabled.difference_update(methods)
        else:
            self.state.disabled.clear()

    def change_limits(self, limits: dict[str, LimitOverride]) -> None:
        """Make WB's limits of some groups different from now on (as WB does without notice)."""
        self.state.change_limits(limits)

    def reset(self, **what: bool) -> None:
        """Forget counters, buckets, faults, sellers' edits and run-time limit changes (all
        unless told otherwise)."""
        self.state.reset(**what)


def _uvicorn_config(emu: Emulator, *, log_level: str) -> uvicorn.Config:
    return uvicorn.Config(
        emu.app, log_level=log_level, access_log=False, lifespan="off", timeout_graceful_shutdown=1
    )


def _bind(host: str, port: int) -> socket.socket:
    # proto must be IPPROTO_TCP: asyncio sets TCP_NODELAY only on such sockets' connections, and
    # without it Nagle and delayed ACKs add ~40 ms to every reply.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


@contextlib.asynccontextmanager
async def running_emulator(
    config: EmulatorConfig | None = None, *, host: str = "127.0.0.1", start_timeout_s: float = 10.0
) -> AsyncIterator[Emulator]:
    """Run an emulator in this event loop on free ports of ``host``; yields it with base_url
    (WB's production hosts) and sandbox_url (WB's ``-sandbox`` hosts)."""
    emu = Emulator(config)
    sock, sandbox = _bind(host, 0), _bind(host, 0)
    port, sandbox_port = sock.getsockname()[1], sandbox.getsockname()[1]
    emu.state.sandbox_ports.add(sandbox_port)
    server = _EmbeddedServer(_uvicorn_config(emu, log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[sock, sandbox]), name=f"wb-emulator:{port}")
    try:
        deadline = asyncio.get_running_loop().time() + start_timeout_s
        while not server.started:
            if task.done():
                task.result()  # surfaces the startup error
                raise RuntimeError("emulator stopped during startup")
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"emulator did not start within {start_timeout_s} s")
            await asyncio.sleep(0.005)
        emu.base_url = f"http://{host}:{port}"
        emu.sandbox_url = f"http://{host}:{sandbox_port}"
        yield emu
    finally:
        server.should_exit = True
        await reap(task)
        sock.close()
        sandbox.close()


async def serve(
    config: EmulatorConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8700,
    sandbox_port: int | None = None,
    log_level: str = "info",
) -> None:
    """Run the emulator in the foreground until interrupted (the CLI's ``wbsync emulator``):
    WB's production hosts on ``port``, its ``-sandbox`` hosts on ``sandbox_port`` (a free one
    when None, logged)."""
    emu = Emulator(config)
    sockets = [_bind(host, port), _bind(host, sandbox_port or 0)]
    sandbox_port = sockets[1].getsockname()[1]
    emu.state.sandbox_ports.add(sandbox_port)
    cfg = _uvicorn_config(emu, log_level=log_level)
    log.info(
        "WB emulator on http://%s:%d, sandbox hosts on http://%s:%d (time scale %s)",
        host,
        port,
        host,
        sandbox_port,
        config.time_scale,
    )
    try:
        await uvicorn.Server(cfg).serve(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()
