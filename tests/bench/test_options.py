"""The command line a benchmark records (docs/benchmarks.json) shows no URL's password."""

from __future__ import annotations

import typer
from typer.testing import CliRunner
from wbsync_bench.options import PostgresOpt, RedisOpt, command, command_line


def test_a_urls_password_is_masked_in_the_recorded_command_line() -> None:
    probe = typer.Typer()
    lines: list[str] = []

    @command(probe, "probe")
    def probe_cmd(ctx: typer.Context, redis: RedisOpt = None, postgres: PostgresOpt = None) -> None:
        lines.append(command_line(ctx))

    reply = CliRunner().invoke(
        probe,
        [
            "--redis",
            "redis://:s3cret@127.0.0.1:6379/0",
            "--postgres",
            "postgresql+asyncpg://admin:pa55@db:5432/postgres",
        ],
    )
    assert reply.exit_code == 0, reply.output
    [line] = lines
    assert "s3cret" not in line and "pa55" not in line
    assert "--redis redis://:***@127.0.0.1:6379/0" in line
    assert "--postgres postgresql+asyncpg://admin:***@db:5432/postgres" in line
    reply = CliRunner().invoke(probe, ["--postgres", "postgresql+asyncpg://postgres@db/postgres"])
    assert reply.exit_code == 0, reply.output
    assert lines[-1].endswith("--postgres postgresql+asyncpg://postgres@db/postgres")  # no password
