"""Shoal against Redis as managed services run it: TLS with client certificates and an ACL user
that may touch only Shoal's keys. A crawl runs through it: the kafka monitor queues a seed, a
crawler crawls a small site, every Redis call over TLS as the restricted user."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.e2e.test_crawler_fields import start_crawler
from tests.e2e.test_crawler_helpers import progress, settled
from tests.support.cluster import TestCluster
from tests.support.kafka import produce
from tests.support.secure_redis import SERVER_NAME, USER, SecureRedis, start_secure_redis, start_secure_redis_cluster
from tests.support.services import wait_until
from utils.config.clients import redis_client
from utils.config.settings import Settings
from utils.demosite import SiteServer, generate_site
from utils.frontier import Frontier, NewRequest, keys
from utils.services import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PASSWORD = "s3cret-redis-password"


@pytest.fixture(scope="module")
def secure_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureRedis]:
    server = start_secure_redis(tmp_path_factory.mktemp("secure-redis"), PASSWORD, "admin-password")
    yield server
    server.service.stop()


def shoal_settings(secure_redis: SecureRedis, tmp_path: Path, **extra: str) -> Settings:
    values = {**secure_redis.settings(tmp_path / "redis-password"), **extra}
    return Settings.load(environ={f"SHOAL_{k}": v for k, v in values.items()})


def test_the_restricted_user_reaches_shoals_keys_over_tls_and_nothing_else(
    secure_redis: SecureRedis, tmp_path: Path
) -> None:
    client = redis_client(shoal_settings(secure_redis, tmp_path), ping=True)
    assert client.acl_whoami() in ("shoal", b"shoal")
    client.set("shoal:tls-check", b"1", ex=60)
    assert client.get("shoal:tls-check") == b"1"
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.get("someone-elses:key")
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.flushall()
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.config_get("requirepass")


def test_no_tls_a_wrong_password_or_an_unknown_ca_is_refused(secure_redis: SecureRedis, tmp_path: Path) -> None:
    plain = redis.Redis(host="127.22.0.30", port=secure_redis.port, socket_timeout=2)
    with pytest.raises(redis.ConnectionError):
        plain.ping()
    with pytest.raises(redis.AuthenticationError):
        secure_redis.client(USER, "wrong").ping()
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_bytes(secure_redis.tls.client_cert.read_bytes())  # not the CA that signed the server
    with pytest.raises(redis.ConnectionError):
        redis_client(shoal_settings(secure_redis, tmp_path, REDIS_SSL_CA_FILE=str(other_ca)), ping=True)


def test_the_server_name_setting_checks_the_certificate_against_that_name(
    secure_redis: SecureRedis, tmp_path: Path
) -> None:
    named = redis_client(shoal_settings(secure_redis, tmp_path, REDIS_SSL_SERVER_NAME=SERVER_NAME), ping=True)
    assert named.acl_whoami() in ("shoal", b"shoal")  # dialled by IP, the certificate checked for the name
    with pytest.raises(redis.ConnectionError, match="Hostname mismatch"):
        redis_client(shoal_settings(secure_redis, tmp_path, REDIS_SSL_SERVER_NAME="other.shoal.test"), ping=True)


def test_a_crawl_runs_through_tls_and_the_acl_user(
    secure_redis: SecureRedis, services, tmp_path: Path
) -> None:
    values = secure_redis.settings(tmp_path / "redis-password")
    cluster = TestCluster(services, tmp_path, **values, QUEUE_HITS=0, ZOOKEEPER_ENABLED="false")
    site = generate_site(hosts=1, pages_per_host=12, seed=22, base_ip_octet=22, port=free_port("127.0.0.22"))
    expected = site.reachable(site.seed_urls(), 2, obey_robots=True)
    try:
        with SiteServer(site):
            cluster.start("kafka-monitor", name="kafka-monitor")
            start_crawler(cluster)
            produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic,
                    [{"url": site.seed_urls()[0], "appid": "tls", "crawlid": "secure", "maxdepth": 2}])  # fmt: skip
            wait_until(lambda: settled(progress(cluster, "secure", appid="tls")), timeout=120)
        counts = progress(cluster, "secure", appid="tls")
        assert counts["crawled"] == len(expected), counts
        logs = "\n".join(cluster.logs())
        assert PASSWORD not in logs
    except BaseException:
        print("\n".join(cluster.logs()))
        raise
    finally:
        cluster.stop_all()


def test_a_redis_cluster_over_tls_with_the_acl_user_runs_the_frontier(tmp_path: Path) -> None:
    nodes = start_secure_redis_cluster(tmp_path / "cluster", PASSWORD, "admin-password")
    try:
        settings = shoal_settings(nodes[0], tmp_path, REDIS_CLUSTER="true")
        client = redis_client(settings, ping=True)
        frontier = Frontier.from_settings(settings, client)
        entries = [NewRequest(spiderid="link", domain=f"d{i}.test", priority=1, appid="tls", crawlid="cluster",
                              payload=f'{{"url": "http://d{i}.test/"}}', fingerprint=None, seed=True)
                   for i in range(30)]  # fmt: skip
        assert frontier.enqueue(entries) == ["queued"] * 30  # every shard's scripts, over TLS, as the ACL user
        masters = {client.get_node_from_key(keys.queue("link", e.domain)).port for e in entries}
        assert len(masters) > 1
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.get("someone-elses:key")
        by_name = shoal_settings(nodes[0], tmp_path, REDIS_CLUSTER="true", REDIS_SSL_SERVER_NAME=SERVER_NAME)
        named = redis_client(by_name)
        more = [NewRequest(spiderid="link", domain=f"n{i}.test", priority=1, appid="tls", crawlid="named",
                           payload=f'{{"url": "http://n{i}.test/"}}', fingerprint=None, seed=True)
                for i in range(30)]  # fmt: skip
        assert Frontier.from_settings(settings, named).enqueue(more) == ["queued"] * 30  # every node, by name
        with pytest.raises(redis.exceptions.RedisClusterException):
            redis_client(shoal_settings(nodes[0], tmp_path, REDIS_CLUSTER="true", REDIS_SSL_SERVER_NAME="x.test"))
    finally:
        for node in nodes:
            node.service.stop()
