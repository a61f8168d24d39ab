"""A local Redis Cluster of N masters (no replicas) from Debian's redis-server, for tests and benchmarks.

Each node is a LocalService with its own data dir, log and pid file under `run_dir`; its cluster
bus listens on a second free port (`cluster-port`), since the default bus port (port + 10000)
is past 65535 for any port above 55535, and may be taken. The nodes are joined with `redis-cli --cluster create`
and awaited until every node says `cluster_state:ok`. No data is persisted, only the cluster
membership (`nodes.conf`): a node restarted with `nodes[i].restart()` rejoins with its slots, empty
and without its scripts (measured: `cluster_state:ok` again ~2 s after the restart).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from utils.services.argv import FRONTIER_TUNING, FULL_POLICY, HOST
from utils.services.probes import PROBE_TIMEOUT, exchange, redis_ready
from utils.services.process import POLL_INTERVAL, LocalService, ServiceError, free_ports

log = logging.getLogger(__name__)

SLOTS = 16384
NODE_TIMEOUT_MS = 5000  # cluster-node-timeout; the nodes never fail over (no replicas), 15 s default
CLIENT_TIMEOUT = 5.0  # seconds per socket operation of the clients made by the handle
CREATE_TIMEOUT = 60.0  # seconds `redis-cli --cluster create` may take (it polls the join once a second)


def cluster_node_argv(port: int, bus_port: int, data_dir: Path) -> list[str]:
    """A cluster-enabled redis-server without persistence; creates `data_dir` (its `--dir`)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    return [
        "redis-server",
        "--port", str(port),
        "--cluster-port", str(bus_port),
        "--bind", HOST,
        "--protected-mode", "no",
        "--daemonize", "no",
        "--dir", str(data_dir.absolute()),
        "--cluster-enabled", "yes",
        "--cluster-config-file", "nodes.conf",  # relative to --dir: one per node
        "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
        "--appendonly", "no",
        "--save", "",
        *FULL_POLICY,
        *FRONTIER_TUNING,
    ]  # fmt: skip


def cluster_info(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> dict[str, str]:
    """The fields of `CLUSTER INFO` of one node; empty when it does not answer (plain socket, no retry)."""
    try:
        reply = exchange(host, port, b"CLUSTER INFO\r\n", _bulk_complete, timeout)
    except OSError:
        return {}
    if not reply.startswith(b"$"):
        return {}
    body = reply.split(b"\r\n", 1)[1].decode("ascii", errors="replace")
    return dict(line.split(":", 1) for line in body.splitlines() if ":" in line)


def _bulk_complete(reply: bytes) -> bool:
    """Whether `reply` holds a whole RESP bulk string (or a one-line error/status)."""
    head, sep, rest = reply.partition(b"\r\n")
    if not sep:
        return False
    if not head.startswith(b"$"):
        return True
    return len(rest) >= int(head[1:]) + 2


def cluster_ok(host: str, port: int) -> bool:
    """The node serves every slot: `cluster_state:ok` with all 16384 slots assigned and ok."""
    info = cluster_info(host, port)
    return info.get("cluster_state") == "ok" and info.get("cluster_slots_ok") == str(SLOTS)


@dataclass
class RedisClusterHandle:
    """A started cluster: give clients `host:port` (any node is a start-up node); `stop()` ends it."""

    host: str
    port: int
    ports: list[int]
    run_dir: Path
    nodes: list[LocalService] = field(repr=False)

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        """Every master as (host, port)."""
        return [(self.host, port) for port in self.ports]

    @property
    def pids(self) -> list[int]:
        """Pids of the nodes still running."""
        return [node.pid for node in self.nodes if node.pid is not None]

    def client(self, decode: bool = False, timeout: float = CLIENT_TIMEOUT) -> redis.RedisCluster:
        """A RedisCluster client with this cluster's first master as its start-up node."""
        return redis.RedisCluster(
            host=self.host, port=self.port, decode_responses=decode,
            socket_timeout=timeout, socket_connect_timeout=timeout,
        )  # fmt: skip

    def flush(self) -> None:
        """FLUSHALL and SCRIPT FLUSH on every master, each through a plain connection of its own.

        Per node rather than through a cluster client: it empties each node whatever a client's
        slot map says, and forgets the scripts, so a test never passes on its predecessor's.
        """
        for port in self.ports:
            with redis.Redis(host=self.host, port=port, socket_timeout=CLIENT_TIMEOUT) as node:
                node.flushall()
                node.script_flush()

    def stop(self, timeout: float = 10) -> None:
        """Stop every node (SIGTERM, SIGKILL after `timeout`), then remove the run dir's node files."""
        errors = []
        for node in self.nodes:
            try:
                node.stop(timeout)
            except OSError as exc:
                errors.append(f"{node.name}: {exc}")
        _remove_files(self.run_dir, self.nodes)
        if errors:
            raise ServiceError("could not stop Redis Cluster nodes: " + "; ".join(errors))
        log.info("stopped Redis Cluster on ports %s", self.ports)


def _remove_files(run_dir: Path, nodes: list[LocalService]) -> None:
    """Data dirs, logs and pid files of the nodes, and `run_dir` itself when that leaves it empty."""
    for node in nodes:
        shutil.rmtree(node.data_dir, ignore_errors=True)
        node.log_path.unlink(missing_ok=True)
        if node.pid_path is not None:
            node.pid_path.unlink(missing_ok=True)
    try:
        run_dir.rmdir()
    except OSError:
        pass  # not empty: the caller keeps other things there


def _node(run_dir: Path, index: int, port: int, bus_port: int) -> LocalService:
    """Node `index`, laid out under `run_dir` as `redis-cluster-<index>{/,.log,.pid}`."""
    name = f"redis-cluster-{index}"
    data_dir = run_dir / name
    return LocalService(
        name=name, argv=cluster_node_argv(port, bus_port, data_dir), port=port,
        log_path=run_dir / f"{name}.log", data_dir=data_dir, probe=redis_ready, host=HOST,
        pid_path=run_dir / f"{name}.pid",
    )  # fmt: skip


def _build_nodes(run_dir: Path, masters: int) -> list[LocalService]:
    """Not yet started nodes on free client and bus ports (all drawn at once, so all distinct)."""
    ports = free_ports(2 * masters)
    return [_node(run_dir, i, ports[i], ports[masters + i]) for i in range(masters)]


def _create(nodes: list[LocalService], timeout: float) -> None:
    """Assign the slots evenly and join the nodes: `redis-cli --cluster create`."""
    argv = ["redis-cli", "--cluster", "create", *(n.address for n in nodes), "--cluster-replicas", "0"]
    try:
        done = subprocess.run([*argv, "--cluster-yes"], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServiceError(f"redis-cli --cluster create failed: {exc}") from exc
    if done.returncode != 0:
        raise ServiceError(f"redis-cli --cluster create exited {done.returncode}:\n{done.stdout}{done.stderr}")


def _wait_cluster_ok(nodes: list[LocalService], deadline: float) -> None:
    """Poll every node until each serves all slots; ServiceError naming the laggards on timeout."""
    while True:
        waiting = [n for n in nodes if not cluster_ok(n.host, n.port)]
        if not waiting:
            return
        if time.monotonic() >= deadline:
            names = ", ".join(f"{n.name} {cluster_info(n.host, n.port)}" for n in waiting)
            raise ServiceError(f"Redis Cluster not ok in time on: {names}")
        time.sleep(POLL_INTERVAL)


def start_redis_cluster(run_dir: Path, masters: int = 3, timeout: float = CREATE_TIMEOUT) -> RedisClusterHandle:
    """Start `masters` nodes on free loopback ports, join them, wait for `cluster_state:ok` everywhere.

    On any failure every node already started is stopped, its files removed, and ServiceError raised.
    """
    if masters < 3:
        raise ValueError(f"redis-cli --cluster create needs at least 3 masters, got {masters}")
    run_dir.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    nodes = _build_nodes(run_dir, masters)
    handle = RedisClusterHandle(HOST, nodes[0].port, [n.port for n in nodes], run_dir, nodes)
    try:
        for node in nodes:
            node.start()
        for node in nodes:
            node.wait_ready(max(timeout - (time.monotonic() - began), 0.1))
        _create(nodes, max(timeout - (time.monotonic() - began), 1.0))
        _wait_cluster_ok(nodes, began + timeout)
    except BaseException:
        handle.stop()
        raise
    log.info("Redis Cluster of %d masters ready in %.2f s on ports %s", masters, time.monotonic() - began, handle.ports)
    return handle
