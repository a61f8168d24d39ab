"""Apache Kafka (KRaft, one combined broker+controller node) from the jars `make kafka` caches.

The jars come from Maven Central once (services/kafka/pom.xml, `make kafka`) into
~/.cache/shoal/kafka-<version>/libs; starting a broker never touches the network. The log lives in
`<data_dir>/log`, formatted on first start only, so a stopped and restarted node keeps its topics
and offsets. The broker keeps Kafka's stock message and topic defaults: Shoal's topics carry their
own configs (utils/config/clients.ensure_topics), as they must on a production cluster.
"""

from __future__ import annotations

import base64
import os
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from utils.config.settings import KAFKA_HEAP_ENV, KAFKA_LIBS_ENV
from utils.services.process import free_port

KAFKA_VERSION = "4.2.0"  # also in services/kafka/pom.xml and the Makefile (a unit test checks)
KAFKA_MAIN = "kafka.Kafka"
STORAGE_TOOL = "kafka.tools.StorageTool"
KAFKA_HEAP = "-Xmx512m"  # a test broker holds a few MB; the JVM default is a quarter of the RAM ($SHOAL_KAFKA_HEAP)
FORMAT_TIMEOUT = 120  # seconds for formatting the log dir (one JVM start, slow on a loaded machine)
CLUSTER_ID_FILE = "cluster.id"


class KafkaNotInstalled(RuntimeError):
    """The broker's jars are not cached: `make kafka` fetches them."""


def kafka_libs() -> Path:
    """The jar directory: $SHOAL_KAFKA_LIBS, else ~/.cache/shoal/kafka-<version>/libs."""
    override = os.environ.get(KAFKA_LIBS_ENV)
    if override:
        return Path(override)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "shoal" / f"kafka-{KAFKA_VERSION}" / "libs"


def classpath() -> str:
    """`<libs>/*`, after checking the broker's own jar is there."""
    libs = kafka_libs()
    if not (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").is_file():
        raise KafkaNotInstalled(f"Apache Kafka {KAFKA_VERSION} is not in {libs}: run `make kafka`")
    return f"{libs}/*"


LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = {level}
logger.state.name = state.change.logger
logger.state.level = warn
"""


def server_properties(
    host: str, port: int, controller_port: int, data_dir: Path, extra: Mapping[str, str] | None = None
) -> str:
    """One combined KRaft node: clients on `port`, the controller quorum on `controller_port`.

    Only what a single node needs differs from Kafka's defaults (replication factors of its internal
    topics, no initial rebalance delay, fewer idle no-op metadata records); message and topic size
    limits stay stock.
    """
    lines = [
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@{host}:{controller_port}",
        f"listeners=PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        f"advertised.listeners=PLAINTEXT://{host}:{port}",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        f"log.dirs={(data_dir / 'log').absolute()}",
        "num.partitions=1",
        "offsets.topic.replication.factor=1",
        "offsets.topic.num.partitions=8",  # 50 by default: slow to create on a small test machine
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "transaction.state.log.num.partitions=4",
        "group.initial.rebalance.delay.ms=0",  # a lone consumer group starts at once (tests, a small node)
        # The controller appends a no-op record to the metadata log every 500 ms by default, only to
        # show the quorum alive: 0.85 of an idle broker's 1.98 % of a core (issue 37, bench/idle_node.py).
        "metadata.max.idle.interval.ms=5000",
        "auto.create.topics.enable=true",
    ]
    config = dict(line.split("=", 1) for line in lines)
    config.update(extra or {})  # e.g. a SASL_SSL listener beside the plain one (tests of secured Kafka)
    return "".join(f"{name}={value}\n" for name, value in config.items())


def _java(*args: str) -> list[str]:
    heap = (os.environ.get(KAFKA_HEAP_ENV) or KAFKA_HEAP).split()
    return ["java", *heap, "-XX:+UseSerialGC", "-Djava.awt.headless=true", *args]


def format_storage(config: Path, data_dir: Path, scram_users: Sequence[str] = ()) -> None:
    """Format the log dir once (a cluster id kept in `data_dir`); an already formatted one is kept.

    `scram_users` are `kafka-storage format --add-scram` credentials, e.g.
    `SCRAM-SHA-256=[name=shoal,password=secret]`: KRaft stores them in its metadata log.
    """
    if (data_dir / "log" / "meta.properties").is_file():
        return
    id_file = data_dir / CLUSTER_ID_FILE
    if not id_file.is_file():
        # A KRaft cluster id is a base64url UUID without padding, as `kafka-storage random-uuid` makes.
        # One in 64 starts with '-': it is passed as `--cluster-id=<id>` so the tool's parser takes it.
        raw = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        id_file.write_text(raw + "\n", encoding="ascii")
    cluster_id = id_file.read_text(encoding="ascii").strip()
    argv = _java(
        "-cp", classpath(), f"-Dlog4j2.configurationFile={(data_dir / 'log4j2.properties').absolute()}",
        STORAGE_TOOL, "format", "--config", str(config.absolute()), f"--cluster-id={cluster_id}",
        "--ignore-formatted", *(arg for user in scram_users for arg in ("--add-scram", user)),
    )  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=FORMAT_TIMEOUT, check=False)
    if done.returncode != 0:
        why = (done.stderr or done.stdout)[-2000:]
        raise RuntimeError(f"formatting the Kafka log in {data_dir} failed (exit {done.returncode}): {why}")


def kafka_argv(
    host: str,
    port: int,
    data_dir: Path,
    controller_port: int | None = None,
    extra: Mapping[str, str] | None = None,
    scram_users: Sequence[str] = (),
) -> list[str]:
    """Apache Kafka in the foreground on `host:port`; writes its configs and formats `data_dir` first.

    The controller listens on `controller_port` (a free port when None): with a static voter set the
    port is not part of the formatted log, so a restart may take another one.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    cp = classpath()
    config = data_dir / "server.properties"
    properties = server_properties(host, port, controller_port or free_port(host), data_dir, extra)
    config.write_text(properties, encoding="utf-8")
    log4j = data_dir / "log4j2.properties"
    log4j.write_text(LOG4J2.format(level="warn"), encoding="utf-8")
    format_storage(config, data_dir, scram_users)
    return _java(
        "-cp", cp, f"-Dlog4j2.configurationFile={log4j.absolute()}",
        f"-Dkafka.logs.dir={data_dir.absolute()}", KAFKA_MAIN, str(config.absolute()),
    )  # fmt: skip
