"""Session-wide real services on free ports, and per-test unique names so tests never collide.

A service that does not start fails the tests that need it, with its log; it is never skipped.
"""

from __future__ import annotations

import os
import tracemalloc  # noqa: F401 - see below
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from kazoo.client import KazooClient

from tests.support.cluster import TestCluster, next_database
from tests.support.kafka import TopicReader
from tests.support.services import SERVICE_START_TIMEOUT, started_or_fail
from utils.services import LocalServices, start_local_services
from utils.services.redis_cluster import RedisClusterHandle

# tracemalloc is otherwise first imported lazily (warnings does, to format a warning): when the garbage
# collector finalizes an object (an unclosed socket) during that import, pytest's unraisable-exception
# hook finds a half-made module and fails whichever test runs then. Imported here, it is whole first.
# Session fixtures: Redis Cluster (issue 12), PostgreSQL (19), the fault tests' services behind Toxiproxy
pytest_plugins = ["tests.support.redis_cluster", "tests.support.postgres", "tests.support.wire"]

# Every JVM the tests start (brokers, ZooKeepers, Kafka's storage tool, those of `shoal up` nodes)
# lives seconds to minutes: the C1 compiler alone and the serial collector cut a broker's start from
# 9-10 to 6 CPU seconds and a ZooKeeper's from 1.0 to 0.7 (measured on 2 cores), with dozens started
# per run. Production brokers keep the JVM's defaults: only processes started from here inherit this.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData"
os.environ["JAVA_TOOL_OPTIONS"] = f"{TEST_JVM_OPTIONS} {os.environ.get('JAVA_TOOL_OPTIONS', '')}".strip()

MARKERS = {
    "integration": "needs the real Redis, ZooKeeper and broker of the session fixture",
    "e2e": "runs the whole cluster under supervisord against the generated site",
    "slow": "takes more than a few seconds",
    "single_redis": "needs one redis-server (its own, restarted; or the one-shard layout): not run on the cluster",
    "serial": "runs alone, after the parallel phase (machine-wide state, CPU-timed): docs/operations/tests.md",
}


def pytest_configure(config: pytest.Config) -> None:
    for name, description in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With `-n`, the slowest kinds of test go out first, and a module's tests go to one worker when
    they share a module-scoped fixture (tests/support/scheduling.py); an explicit `--dist` is obeyed."""
    if config.getvalue("dist") != "load":  # xdist's default
        return None
    from tests.support.scheduling import SharedFixtureScheduling  # imports xdist: only when it runs

    return SharedFixtureScheduling(config, log)


@pytest.fixture(scope="session")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServices]:
    """Redis, ZooKeeper and the broker on free ports for the whole session, stopped at its end."""
    run_dir = tmp_path_factory.mktemp("services")
    started = started_or_fail(lambda: start_local_services(run_dir, timeout=SERVICE_START_TIMEOUT), "local services")
    with started:
        yield started


@pytest.fixture
def key_prefix() -> str:
    """A Redis key prefix (and ZooKeeper path segment) unique to this test, e.g. `t1a2b3c4d`."""
    return f"t{uuid.uuid4().hex[:8]}"


@pytest.fixture
def unique_topic_prefix() -> str:
    """A Kafka topic prefix (and group id stem) unique to this test, e.g. `test1a2b3c4d`."""
    return f"test{uuid.uuid4().hex[:8]}"


@pytest.fixture
def redis_client(services: LocalServices) -> Iterator[redis.Redis]:
    """A bytes-returning client of the session Redis; nothing is flushed, use `key_prefix`."""
    client = redis.Redis(
        host=services.redis.host, port=services.redis.port, decode_responses=False,
        socket_timeout=5, socket_connect_timeout=5,
    )  # fmt: skip
    yield client
    client.close()


BACKENDS = ("redis", "redis-cluster")  # one redis-server; a three-master Redis Cluster (issue 12)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Integration tests that use Redis through `cluster` or `redis_db` run once per backend."""
    uses_redis = {"cluster", "redis_db"} & set(metafunc.fixturenames)
    if metafunc.definition.get_closest_marker("single_redis"):
        return
    if uses_redis and "tests/integration/" in str(metafunc.definition.path).replace("\\", "/"):
        metafunc.parametrize("redis_backend", BACKENDS, indirect=True)


@pytest.fixture
def redis_backend(request: pytest.FixtureRequest) -> str:
    """`redis` (the session redis-server) unless the test is parametrized over both backends."""
    return getattr(request, "param", "redis")


@pytest.fixture
def backend_settings(redis_backend: str, request: pytest.FixtureRequest) -> dict[str, str]:
    """Settings that point a test's components at its Redis backend (the cluster emptied first)."""
    if redis_backend != "redis-cluster":
        return {}
    handle: RedisClusterHandle = request.getfixturevalue("redis_cluster")
    handle.flush()
    return {"REDIS_CLUSTER": "true", "REDIS_HOST": handle.host, "REDIS_PORT": str(handle.port)}


@pytest.fixture
def redis_db(services: LocalServices, backend_settings: dict[str, str]) -> Iterator[Any]:
    """A client of an empty Redis of its own: a database of the session redis-server, or the
    (flushed) session Redis Cluster, for tests that inspect whole keyspaces."""
    client: Any
    if backend_settings:
        client = redis.RedisCluster(host=backend_settings["REDIS_HOST"], port=int(backend_settings["REDIS_PORT"]))
    else:
        client = redis.Redis(host=services.redis.host, port=services.redis.port, db=next_database())
        client.flushdb()
    yield client
    if not backend_settings:
        client.flushdb()
    client.close()


@pytest.fixture
def zk_client(services: LocalServices) -> Iterator[KazooClient]:
    """A started kazoo client of the session ZooKeeper, stopped and closed after the test."""
    client = KazooClient(hosts=services.zookeeper.address, timeout=6.0)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def kafka_bootstrap(services: LocalServices) -> str:
    """The session broker's bootstrap address, `127.0.0.1:PORT`."""
    return services.broker.address


@pytest.fixture
def cluster(
    services: LocalServices, tmp_path: Path, request: pytest.FixtureRequest, backend_settings: dict[str, str]
) -> Iterator[TestCluster]:
    """Per-test settings (own Redis DB, topics, group, ZooKeeper path) and component processes.

    Every process still running at the end is stopped with SIGTERM; when the test failed, the tail
    of each component's log is printed.
    """
    test_cluster = TestCluster(services, tmp_path, **{**backend_settings, **getattr(request, "param", {})})
    yield test_cluster
    test_cluster.stop_all()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print("\n".join(test_cluster.logs()))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Keep each phase's report on the test item, so fixtures can see whether the test failed."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
def topic_reader(cluster: TestCluster) -> Iterator[Callable[[str], TopicReader]]:
    """`topic_reader("outbound_firehose")`: a reader of one of this test's topics, from its start."""
    readers: list[TopicReader] = []

    def open_reader(suffix: str) -> TopicReader:
        reader = TopicReader(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.topic(suffix))
        readers.append(reader)
        return reader

    yield open_reader
    for reader in readers:
        reader.close()
