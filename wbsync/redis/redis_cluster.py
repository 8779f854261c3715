"""A private Redis Cluster of three masters on loopback, for the tests and the benchmarks.

Each master is a ``redis-server --cluster-enabled yes`` child on a free port with a directory
of its own; the slots are split in three equal ranges and the nodes introduced to each other
(``CLUSTER ADDSLOTSRANGE`` and ``CLUSTER MEET``, so ``redis-cli`` is not needed). ``restart``
stops one master after saving its data and starts it again on the same port and directory,
as a rolling restart of a production node does. With ``replicas=1`` each master gets a replica
(``CLUSTER REPLICATE``), and ``failover`` has a master's replica take over (``CLUSTER
FAILOVER``, the manual fail-over an operator runs, without data loss).
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import redis

from wbsync.errors import RedisUnavailableError
from wbsync.redis.redis_server import _ping, find_redis_server
from wbsync.system.procs import dies_with_parent, free_port, stop_child

SLOTS = 16384


class EmbeddedCluster:
    """``with EmbeddedCluster() as cluster: cluster.url`` (a ``redis+cluster://`` URL)."""

    def __init__(
        self, *, masters: int = 3, replicas: int = 0, startup_timeout_s: float = 20.0
    ) -> None:
        if masters < 1 or replicas not in (0, 1):
            raise ValueError(f"need masters >= 1 and replicas 0 or 1, got {masters}, {replicas}")
        self._masters = masters
        self._replicas = replicas
        self.replica_ports: list[int] = []
        """Master ``i``'s replica listens on ``replica_ports[i]`` (until a fail-over swaps
        them: ``failover`` keeps ``ports`` the masters' and ``replica_ports`` the replicas')."""
        self._startup_timeout_s = startup_timeout_s
        self._binary = ""
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self.ports: list[int] = []
        self._bus_ports: dict[int, int] = {}
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._stopped = False

    @property
    def url(self) -> str:
        """The cluster's URL, naming every master as a seed node."""
        if not self.ports:
            raise RedisUnavailableError("the embedded cluster is not started")
        nodes = [*self.ports, *self.replica_ports]
        return "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in nodes)

    def start(self) -> EmbeddedCluster:
        """Start the masters, assign the slots, and wait until every node reports the cluster ok."""
        if self._stopped or self.ports:
            raise RedisUnavailableError("an EmbeddedCluster can be started only once")
        self._binary = find_redis_server()
        self._dir = tempfile.TemporaryDirectory(prefix="wbsync-cluster-")
        self.ports = [free_port() for _ in range(self._masters)]
        self.replica_ports = [free_port() for _ in range(self._masters * self._replicas)]
        # The cluster bus defaults to port + 10000, which may be taken or past 65535.
        self._bus_ports = {port: free_port() for port in (*self.ports, *self.replica_ports)}
        try:
            for port in (*self.ports, *self.replica_ports):
                self._spawn(port)
            self._form()
        except BaseException:
            self.stop()
            raise
        return self

    def failover(self, index: int) -> None:
        """Have master ``index``'s replica take over (``CLUSTER FAILOVER``); wait until the
        replica is master and every node reports the cluster ok."""
        master, replica = self.ports[index], self.replica_ports[index]
        with redis.Redis(port=replica, socket_timeout=5, decode_responses=True) as node:
            node.execute_command("CLUSTER", "FAILOVER")
            deadline = time.monotonic() + self._startup_timeout_s
            while node.execute_command("ROLE")[0] != "master":
                if time.monotonic() > deadline:
                    raise RedisUnavailableError(f"the replica on {replica} did not take over")
                time.sleep(0.05)
        self.ports[index], self.replica_ports[index] = replica, master
        self._wait_ok()

    def restart(self, index: int) -> None:
        """Save master ``index``'s data, stop it, and start it again on the same port."""
        port = self.ports[index]
        # A bare socket: a client library would retry the connection the server closes.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"SHUTDOWN SAVE\r\n")
            sock.recv(16)
        self._procs[port].wait(timeout=10)
        stop_child(self._procs.pop(port))
        self._spawn(port)
        self._wait_ok()

    def stop(self) -> None:
        """Stop every master and remove their directories."""
        self._stopped = True
        for proc in self._procs.values():
            stop_child(proc)
        self._procs.clear()
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def _spawn(self, port: int) -> None:
        assert self._dir is not None
        node_dir = Path(self._dir.name) / str(port)
        node_dir.mkdir(exist_ok=True)
        args = [
            self._binary,
            *("--port", str(port), "--bind", "127.0.0.1", "--dir", str(node_dir)),
            *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
            *("--cluster-port", str(self._bus_ports[port]), "--cluster-node-timeout", "2000"),
            *("--save", "", "--appendonly", "no", "--daemonize", "no"),
            *("--loglevel", "warning", "--logfile", "log", "--maxmemory-policy", "noeviction"),
        ]
        proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=dies_with_parent()
        )
        self._procs[port] = proc
        deadline = time.monotonic() + self._startup_timeout_s
        while not _ping(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                log = node_dir / "log"
                err = log.read_text(errors="replace") if log.exists() else ""
                raise RedisUnavailableError(
                    f"redis-server ({self._binary}) did not start as a cluster node on port "
                    f"{port} (cluster mode with --cluster-port needs Redis >= 7): {err.strip()}"
                )
            time.sleep(0.01)

    def _form(self) -> None:
        share = SLOTS // self._masters
        for i, port in enumerate(self.ports):
            last = SLOTS - 1 if i == self._masters - 1 else (i + 1) * share - 1
            with redis.Redis(port=port, socket_timeout=5) as node:
                node.execute_command("CLUSTER", "ADDSLOTSRANGE", i * share, last)
                for other in self.ports[:i]:
                    node.execute_command(
                        "CLUSTER", "MEET", "127.0.0.1", other, self._bus_ports[other]
                    )
        for master, replica in zip(self.ports, self.replica_ports, strict=False):
            with redis.Redis(port=replica, socket_timeout=5, decode_responses=True) as node:
                node.execute_command(
                    "CLUSTER", "MEET", "127.0.0.1", master, self._bus_ports[master]
                )
        for master, replica in zip(self.ports, self.replica_ports, strict=False):
            self._replicate(replica, master)
        self._wait_ok()

    def _replicate(self, replica: int, master: int) -> None:
        """Make ``replica`` a replica of ``master`` once it has learnt the master's node id."""
        with redis.Redis(port=master, socket_timeout=5, decode_responses=True) as node:
            master_id = str(node.execute_command("CLUSTER", "MYID"))
        deadline = time.monotonic() + self._startup_timeout_s
        with redis.Redis(port=replica, socket_timeout=5, decode_responses=True) as node:
            while True:
                try:
                    node.execute_command("CLUSTER", "REPLICATE", master_id)
                    return
                except redis.ResponseError:  # the master is not known to it yet
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)

    def _wait_ok(self) -> None:
        deadline = time.monotonic() + self._startup_timeout_s
        while not all(self._node_ok(port) for port in (*self.ports, *self.replica_ports)):
            if time.monotonic() > deadline:
                raise RedisUnavailableError("the embedded cluster did not reach state ok")
            time.sleep(0.05)

    def _node_ok(self, port: int) -> bool:
        with redis.Redis(port=port, socket_timeout=5, decode_responses=True) as node:
            info = node.execute_command("CLUSTER", "INFO")
            text = info if isinstance(info, str) else str(info)
            nodes = self._masters * (1 + self._replicas)
            known = f"cluster_known_nodes:{nodes}" in text
            return known and "cluster_state:ok" in text

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


__all__ = ["EmbeddedCluster"]
