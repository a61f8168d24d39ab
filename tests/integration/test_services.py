"""The local service launcher against the real Redis, ZooKeeper and Apache Kafka."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from confluent_kafka import Consumer, KafkaError, Message, Producer
from kazoo.client import KazooClient

from tests.support.services import wait_until
from utils.services import (
    LocalService,
    LocalServices,
    ServiceError,
    broker_ready,
    free_port,
    redis_ready,
    start_local_services,
    stop_by_pidfile,
    zookeeper_ready,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def running_redis(services: LocalServices) -> Iterator[LocalService]:
    """The session Redis, brought back up after the test whatever the test did to it."""
    yield services.redis
    if not services.redis.running:
        services.redis.start()
    services.redis.wait_ready(10)


def _sleeper(tmp_path: Path, script: str, name: str = "sleeper") -> LocalService:
    """A stand-in service running `sh -c script` that never answers its probe."""
    return LocalService(
        name=name, argv=["sh", "-c", script], port=free_port(), log_path=tmp_path / f"{name}.log",
        data_dir=tmp_path / name, probe=lambda host, port: False, pid_path=tmp_path / f"{name}.pid",
    )  # fmt: skip


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_every_service_answers_and_records_its_pid(services: LocalServices) -> None:
    probes = {"redis": redis_ready, "zookeeper": zookeeper_ready, "kafka": broker_ready}

    for name, probe in probes.items():
        service = services[name]
        assert probe(service.host, service.port), name
        assert service.address == f"127.0.0.1:{service.port}"
        assert (services.run_dir / f"{name}.pid").read_text().strip() == str(service.pid)
        assert (services.run_dir / name).is_dir()


def test_probes_say_no_on_a_closed_port() -> None:
    port = free_port()

    assert not redis_ready("127.0.0.1", port)
    assert not zookeeper_ready("127.0.0.1", port)
    assert not broker_ready("127.0.0.1", port)


def test_redis_keeps_its_data_across_a_restart(
    running_redis: LocalService, redis_client: redis.Redis, key_prefix: str
) -> None:
    key = f"{key_prefix}:survives-restart"
    redis_client.set(key, b"kept")

    running_redis.restart()  # SIGTERM: Redis fsyncs the append-only file before it exits

    with redis.Redis(host=running_redis.host, port=running_redis.port, socket_timeout=5) as fresh:
        assert fresh.get(key) == b"kept"


def test_redis_keeps_fsynced_data_across_a_kill(
    running_redis: LocalService, redis_client: redis.Redis, key_prefix: str
) -> None:
    key = f"{key_prefix}:survives-kill"
    redis_client.config_set("appendfsync", "always")  # everysec could lose the last second on SIGKILL
    redis_client.set(key, b"kept")

    running_redis.kill()
    running_redis.start()
    running_redis.wait_ready(10)

    with redis.Redis(
        running_redis.host, running_redis.port, socket_timeout=5, decode_responses=True
    ) as fresh:
        assert fresh.get(key) == "kept"
        assert fresh.config_get("appendfsync") == {"appendfsync": "everysec"}  # back to the argv's


def test_zookeeper_stores_and_returns_a_node(zk_client: KazooClient, key_prefix: str) -> None:
    path = f"/{key_prefix}/node"
    zk_client.create(path, b"value", makepath=True)

    data, stat = zk_client.get(path)

    assert data == b"value"
    assert stat.version == 0
    zk_client.delete(f"/{key_prefix}", recursive=True)


def _value(consumer: Consumer) -> bytes | None:
    """The value of the next message, None if none arrived within the poll."""
    message: Message | None = consumer.poll(0.5)
    if message is None:
        return None
    error: KafkaError | None = message.error()
    assert error is None, error
    value: bytes | None = message.value()
    return value


def _message(consumer: Consumer) -> Message | None:
    """The next message, None if none arrived within the poll (a topic not yet known is no error)."""
    message: Message | None = consumer.poll(0.5)
    if message is None or (message.error() and message.error().code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        return None
    assert message.error() is None, message.error()
    return message


def test_broker_round_trips_a_message_through_a_consumer_group(
    kafka_bootstrap: str, unique_topic_prefix: str
) -> None:
    topic = f"{unique_topic_prefix}.round-trip"
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "message.timeout.ms": 10000})
    producer.produce(topic, key=b"k", value=b"hello")
    assert producer.flush(15) == 0
    consumer = Consumer({
        "bootstrap.servers": kafka_bootstrap,
        "group.id": f"{unique_topic_prefix}-group",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000,
    })  # fmt: skip
    consumer.subscribe([topic])
    try:
        value = wait_until(lambda: _value(consumer), timeout=30, interval=0, message="no message consumed")
    finally:
        consumer.close()

    assert value == b"hello"


def test_kafka_keeps_its_log_and_committed_offsets_across_a_restart(tmp_path: Path) -> None:
    with start_local_services(tmp_path / "own", services=["kafka"]) as own:
        bootstrap = own.broker.address
        producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 20000})
        for value in (b"one", b"two"):
            producer.produce("kept", value=value)
        assert producer.flush(30) == 0
        group = {
            "bootstrap.servers": bootstrap, "group.id": "kept-group", "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 6000,
        }  # fmt: skip
        first = Consumer(group)
        first.subscribe(["kept"])
        message = wait_until(lambda: _message(first), timeout=60, interval=0, message="nothing consumed")
        first.commit(message=message, asynchronous=False)
        first.close()

        own.broker.restart(90)

        second = Consumer(group)
        second.subscribe(["kept"])
        try:
            again = wait_until(lambda: _message(second), timeout=60, interval=0, message="nothing after restart")
        finally:
            second.close()

    assert (message.value(), again.value()) == (b"one", b"two")


def test_a_paused_broker_stops_answering_until_resumed(services: LocalServices) -> None:
    broker = services.broker
    broker.pause()
    try:
        assert not broker_ready(broker.host, broker.port, timeout=0.5)
    finally:
        broker.resume()

    broker.wait_ready(10)


def test_wait_ready_reports_an_early_exit_with_the_log_tail(tmp_path: Path) -> None:
    service = _sleeper(tmp_path, "for i in $(seq 1 50); do echo line $i; done; exit 3")
    service.start()

    with pytest.raises(ServiceError, match="exited with code 3") as info:
        service.wait_ready(10)

    assert "line 50\n" in str(info.value)
    assert "line 11\n" in str(info.value)
    assert "line 10\n" not in str(info.value)  # the last 40 lines only


def test_wait_ready_times_out_on_a_silent_service(tmp_path: Path) -> None:
    service = _sleeper(tmp_path, "echo starting; exec sleep 30")
    service.start()
    try:
        with pytest.raises(ServiceError, match=r"did not answer within 0.3 s(.|\n)*starting"):
            service.wait_ready(0.3)
    finally:
        service.stop()


def test_stop_kills_a_service_that_ignores_sigterm(tmp_path: Path) -> None:
    service = _sleeper(tmp_path, "trap '' TERM; echo trapped; while :; do sleep 0.1; done")
    service.start()
    pid = service.pid
    assert pid is not None
    wait_until(lambda: "trapped" in service.log_path.read_text(), timeout=5)

    service.stop(timeout=0.5)

    assert _gone(pid)
    assert service.pid is None
    assert not (tmp_path / "sleeper.pid").exists()


def test_start_refuses_a_port_that_is_taken(tmp_path: Path) -> None:
    service = _sleeper(tmp_path, "exec sleep 30")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", service.port))
        taken.listen()

        with pytest.raises(ServiceError, match="already in use"):
            service.start()


def test_stop_by_pidfile_stops_a_service_it_did_not_start(tmp_path: Path) -> None:
    service = _sleeper(tmp_path, "exec sleep 30")
    service.start()
    pid = service.pid
    assert pid is not None

    assert stop_by_pidfile(tmp_path, "sleeper", timeout=5)

    assert _gone(pid)
    assert not (tmp_path / "sleeper.pid").exists()
    assert not stop_by_pidfile(tmp_path, "sleeper")


def test_stop_by_pidfile_ignores_a_stale_pid(tmp_path: Path) -> None:
    exited = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
    )
    (tmp_path / "ghost.pid").write_text(exited.stdout.decode())

    assert not stop_by_pidfile(tmp_path, "ghost")
    assert not (tmp_path / "ghost.pid").exists()


def test_pause_of_a_stopped_service_is_an_error(tmp_path: Path) -> None:
    service = _sleeper(tmp_path, "exec sleep 30")

    with pytest.raises(ServiceError, match="not running"):
        service.pause()


def test_a_kafka_cluster_id_that_starts_with_a_dash_is_formatted(tmp_path: Path) -> None:
    """One random KRaft cluster id in 64 starts with '-'; the storage tool once took it for an option."""
    from utils.services.kafka import CLUSTER_ID_FILE, format_storage, server_properties

    data_dir = tmp_path / "kafka"
    data_dir.mkdir()
    (data_dir / CLUSTER_ID_FILE).write_text("-" + "A" * 21 + "\n", encoding="ascii")  # 22 base64url characters
    config = data_dir / "server.properties"
    config.write_text(server_properties("127.0.0.1", free_port(), free_port(), data_dir), encoding="utf-8")
    (data_dir / "log4j2.properties").write_text("", encoding="utf-8")
    format_storage(config, data_dir)
    meta = (data_dir / "log" / "meta.properties").read_text(encoding="utf-8")
    assert "cluster.id=-" + "A" * 21 in meta
