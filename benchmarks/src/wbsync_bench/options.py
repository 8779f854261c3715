"""The options every ``wbsync bench`` command shares, declared once, and their helpers.

``command(app, name)`` registers a benchmark's function as ``app.command(name)`` with the shared
options (``--json``, ``--write-docs``, ``--docs-dir``, ``--verbose``) added to its signature, so
no command repeats them; the command reads them from ``ctx.params``. The other option types
(``PostgresOpt``, ``RedisOpt``, ``ConcurrencyOpt``, ``TimeScaleOpt``) are for the commands that
take them.
Only typer and the standard library: the main CLI imports this to build its command tree.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

__all__ = [
    "ConcurrencyOpt",
    "PostgresOpt",
    "RedisOpt",
    "TimeScaleOpt",
    "bench_params",
    "command",
    "command_line",
    "ints",
]

T = TypeVar("T")
_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")

# The options every benchmark shares, declared once (typer reads them from the annotation).
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
DocsOpt = Annotated[
    bool, typer.Option("--write-docs", help="Write docs/benchmarks.md and docs/*.png.")
]
DocsDirOpt = Annotated[Path, typer.Option("--docs-dir", help="Where --write-docs writes.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Log at INFO to stderr.")]
PostgresOpt = Annotated[
    str | None,
    typer.Option(
        "--postgres",
        help="A PostgreSQL server URL (postgresql+asyncpg://...): each run creates a database "
        "there and drops it after. Default: a new SQLite file per run.",
    ),
]
RedisOpt = Annotated[
    str | None,
    typer.Option(
        "--redis",
        help="A Redis URL to run on (the run's keys under a prefix of its own, deleted after). "
        "Default: a private embedded redis-server.",
    ),
]
ConcurrencyOpt = Annotated[
    int, typer.Option(help="Jobs per queue per process (WBSYNC_SYNC_QUEUE_CONCURRENCY).")
]
TimeScaleOpt = Annotated[float, typer.Option(help="Multiplies WB's limits' periods.")]
_SHARED = (
    ("as_json", JsonOpt, False),
    ("write_docs", DocsOpt, False),
    ("docs_dir", DocsDirOpt, Path("docs")),
    ("verbose", VerboseOpt, False),
)


def command(app: typer.Typer, name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """``app.command(name)`` with the options every benchmark shares added to its signature
    (declared once in ``_SHARED``); the command reads them from ``ctx.params``."""

    def register(fn: Callable[..., None]) -> Callable[..., None]:
        own = inspect.signature(fn, eval_str=True)
        shared = [
            inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=a, default=d)
            for n, a, d in _SHARED
        ]

        @functools.wraps(fn)
        def with_shared(**kwargs: Any) -> None:
            fn(**{k: v for k, v in kwargs.items() if k in own.parameters})

        with_shared.__signature__ = own.replace(  # type: ignore[attr-defined]
            parameters=[*own.parameters.values(), *shared]
        )
        app.command(name)(with_shared)
        return fn

    return register


def command_line(ctx: typer.Context) -> str:
    """The command as typed, minus options left at their defaults (reproducible, short); a
    URL's password shown as ``***`` (the line goes into docs/benchmarks.json)."""
    words = ["wbsync bench", ctx.info_name or ""]
    for param in ctx.command.params:  # typer's options are click-like, not click subclasses
        value = ctx.params.get(param.name or "")
        if param.param_type_name != "option" or value == param.default:
            continue
        if getattr(param, "is_flag", False):
            flags = param.opts if value else param.secondary_opts
            words.append(flags[0] if flags else "")
        elif isinstance(value, list | tuple):  # a repeatable option: once per value
            words += [f"{param.opts[0]} {_shown(item)}" for item in value]
        else:
            words.append(f"{param.opts[0]} {_shown(value)}")
    return " ".join(w for w in words if w)


def _shown(value: Any) -> str:
    return _PASSWORD.sub(r"\1***@", str(value))


def bench_params(cls: Callable[..., T], ctx: typer.Context, **given: Any) -> T:
    """A benchmark's ``Params``: its fields from the options of the same name, then ``given``;
    what they refuse is a usage error (exit 2), said as is."""
    from wbsync.errors import ConfigError

    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    try:
        return cls(**{**{k: v for k, v in ctx.params.items() if k in names}, **given})
    except ConfigError as exc:
        raise typer.BadParameter(str(exc)) from None


def ints(text: str, option: str) -> tuple[int, ...]:
    """``"1,2,4"`` as numbers; anything else is a usage error naming ``option``."""
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is not a comma-separated list of whole numbers", param_hint=option
        ) from None
