"""Plain functions behind ``wbsync emulator`` (run it) and ``wbsync emulator token`` (mint one)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from wbsync.emulator.config import EmulatorConfig
from wbsync.emulator.server import serve
from wbsync.emulator.tokens import mint

__all__ = ["issue_token", "load_config", "load_plugins", "needed", "run_emulator"]


def load_plugins() -> None:
    """Register the emulated methods of the allowed plugins (``WBSYNC_PLUGINS``, entry-point
    group ``wbsync.emulator``), before a config file names them."""
    from wbsync.catalog import plugins
    from wbsync.config import get_settings
    from wbsync.emulator.wbdocs import METHODS

    plugins.load(allow=get_settings().plugins, groups=(plugins.EMULATOR_GROUP,), tables=(METHODS,))


def load_config(
    path: str | Path | None = None,
    *,
    seed: int | None = None,
    time_scale: float | None = None,
    calendar_origin: datetime | None = None,
    signing_key: str | None = None,
    serve_disabled_in_docs: bool | None = None,
) -> EmulatorConfig:
    """The emulator's config: a JSON file (optional) with command-line options on top."""
    given = {
        "seed": seed,
        "time_scale": time_scale,
        "calendar_origin": calendar_origin,
        "signing_key": signing_key,
        "serve_disabled_in_docs": serve_disabled_in_docs,
    }
    overrides: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    base = EmulatorConfig.from_file(path) if path else EmulatorConfig()
    # Revalidate so an override is checked like a file value.
    return EmulatorConfig.model_validate(base.model_dump() | overrides)


async def run_emulator(
    config: EmulatorConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8700,
    sandbox_port: int | None = None,
    log_level: str = "info",
) -> None:
    """Serve the emulator in the foreground until interrupted (sandbox hosts on
    ``sandbox_port``, default ``port + 1``)."""
    sandbox_port = port + 1 if sandbox_port is None else sandbox_port
    await serve(config, host=host, port=port, sandbox_port=sandbox_port, log_level=log_level)


def issue_token(
    *,
    seller: str,
    token_type: str = "personal",
    categories: list[str] | str = (),  # type: ignore[assignment]
    days: float = 180.0,
    config: EmulatorConfig | None = None,
) -> str:
    """A token the emulator with ``config`` accepts; categories by name ("finance,prices")."""
    names = categories.split(",") if isinstance(categories, str) else list(categories)
    cfg = config or EmulatorConfig()
    return mint(
        key=cfg.signing_key,
        seller=seller,
        kind=token_type,
        categories=[n for n in names if n.strip()],
        lifetime=timedelta(days=days),
    )


def needed() -> list[str]:
    """Every token category a registered emulated method needs (the loaded plugins' too)."""
    from wbsync.emulator.wbdocs import METHODS

    return list(dict.fromkeys(m.category for m in METHODS.values() if m.category))
