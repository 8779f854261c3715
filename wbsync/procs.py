"""Child processes wbsync starts itself (the embedded Redis, the benchmarks' emulator)."""

from __future__ import annotations

import socket
import subprocess


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_child(proc: subprocess.Popen[bytes], *, timeout_s: float = 5.0) -> None:
    """Terminate ``proc`` (kill it if it lingers), wait for it, and close its stderr pipe."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stderr:
        proc.stderr.close()
