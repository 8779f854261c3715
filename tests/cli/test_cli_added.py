"""Commands installed packages add (``wbsync.commands``): each app under its entry's name; a
broken entry, a name wbsync has, or a command of the repository not installed, each said in
one line."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest
import typer
from typer.testing import CliRunner

from wbsync.cli.added import GROUP, KNOWN, add_installed
from wbsync.cli.running import EXIT_CONFIG, OneLineErrors


def _app(*installed: tuple[str, str]) -> typer.Typer:
    """A command line with one command of its own (``run``) and the given entries added."""
    app = typer.Typer(cls=OneLineErrors, no_args_is_help=True)

    @app.command()
    def run() -> None:
        typer.echo("the own run")

    add_installed(app, [EntryPoint(name, value, GROUP) for name, value in installed])
    return app


def test_an_entry_s_app_is_a_command_under_the_entry_s_name() -> None:
    app = _app(("fake-wb", "wbsync.emulator.cli:app"))
    reply = CliRunner().invoke(app, ["fake-wb", "--help"])
    assert reply.exit_code == 0, reply.output
    assert "emulator" in reply.output.lower()


def test_a_repository_command_not_installed_says_how_to_install_it_whatever_it_is_given() -> None:
    app = _app()
    for argv in (["bench"], ["bench", "limiter", "--rounds", "2"], ["bench", "--help"]):
        reply = CliRunner().invoke(app, argv)
        assert reply.exit_code == EXIT_CONFIG, (argv, reply.output)
        lines = reply.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: wbsync bench:"), reply.output
        assert "pip install -e benchmarks" in lines[0]
    listed = CliRunner().invoke(app, ["--help"]).output
    assert f"Not installed: {KNOWN['bench'][0]}." in listed


def test_a_broken_entry_is_a_command_that_says_why_and_the_others_still_work() -> None:
    app = _app(
        ("gone", "wbsync_no_such_module:app"),
        ("text", "wbsync.cli.added:GROUP"),
        ("fake-wb", "wbsync.emulator.cli:app"),
    )
    runner = CliRunner()
    gone = runner.invoke(app, ["gone", "x"])
    assert gone.exit_code == EXIT_CONFIG
    assert "wbsync_no_such_module:app cannot be imported: ModuleNotFoundError" in gone.output
    text = runner.invoke(app, ["text"])
    assert text.exit_code == EXIT_CONFIG
    assert "wbsync.cli.added:GROUP is not a typer app" in text.output
    assert runner.invoke(app, ["fake-wb", "--help"]).exit_code == 0


def test_an_entry_named_as_an_own_command_or_an_added_one_is_left_out_with_a_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    app = _app(
        ("run", "wbsync.emulator.cli:app"),
        ("bench", "wbsync.emulator.cli:app"),
        ("bench", "wbsync.emulator.cli:missing"),
    )
    warned = capsys.readouterr().err.strip().splitlines()
    assert warned == [
        "warning: the command 'bench' of wbsync.emulator.cli:missing is not added: another "
        "package adds one of its name",
        "warning: the command 'run' of wbsync.emulator.cli:app is not added: wbsync has one of "
        "its name",
    ]
    reply = CliRunner().invoke(app, ["run"])
    assert reply.exit_code == 0 and "the own run" in reply.output
    # An installed entry of a repository command's name takes its place (no stand-in).
    assert CliRunner().invoke(app, ["bench", "--help"]).exit_code == 0
