"""``wbsync secrets``: rotate WBSYNC_SECRET_KEY, the key that encrypts cabinet tokens."""

from __future__ import annotations

import sys

import typer

from wbsync.cli.running import EXIT_CONFIG, configured_settings, fail, open_store, run_async

app = typer.Typer(help="Manage WBSYNC_SECRET_KEY, the key that encrypts cabinet tokens.")


@app.command("rotate")
def secrets_rotate() -> None:
    """Re-encrypt every stored token with a new key (read from stdin or a hidden prompt).

    WBSYNC_SECRET_KEY must hold the current key. The new key is never taken from the command
    line, where the shell history and the process list would keep it.
    """
    if sys.stdin.isatty():
        new = typer.prompt("new secret key", hide_input=True, confirmation_prompt=True)
    else:
        new = sys.stdin.readline()
    new = new.strip()
    if not new:
        fail("no new key given: pipe it in or type it at the prompt", code=EXIT_CONFIG)
    if new == configured_settings().secret_key_value():
        fail("the new key is the current WBSYNC_SECRET_KEY; give a different one", code=EXIT_CONFIG)

    async def go() -> int:
        async with open_store(verify=False) as store:
            return await store.cabinets.rotate_key(new)

    count = run_async(go)
    typer.echo(f"re-encrypted {count} token(s); now set WBSYNC_SECRET_KEY to the new key")
