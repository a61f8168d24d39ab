"""Shoal's Kafka clients against Apache Kafka over SASL_SSL with a SCRAM user (certificates made
by the test): a round trip through the kafka monitor's topics, and a wrong password failing fast."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import TestCluster
from tests.support.kafka import TopicReader
from tests.support.secure_kafka import SecureKafka, start_secure_kafka
from tests.support.services import wait_until
from utils.config.clients import ensure_topics, kafka_consumer, kafka_producer
from utils.config.settings import Settings
from utils.demosite import SiteServer, generate_site
from utils.services import LocalServices, free_port

pytestmark = pytest.mark.integration

PASSWORD = "pw-" + uuid.uuid4().hex  # a value to look for in every output


@pytest.fixture(scope="module")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    broker = start_secure_kafka(tmp_path_factory.mktemp("sasl-ssl"), PASSWORD)
    yield broker
    broker.service.stop(30)


def _settings(broker: SecureKafka, **values: str) -> Settings:
    environ = {f"SHOAL_{name}": value for name, value in {**broker.settings(), **values}.items()}
    return Settings.load(environ={**environ, "SHOAL_KAFKA_TOPIC_PREFIX": "secure"})


def test_producer_consumer_and_admin_work_over_sasl_ssl(secure_kafka: SecureKafka) -> None:
    settings = _settings(secure_kafka)
    topic = settings.topic("crawled_firehose")
    ensure_topics(settings, [topic], partitions=1)
    producer = kafka_producer(settings)
    producer.send(topic, key=b"k", value=b"page").get(timeout=60)
    producer.close(10)
    consumer = kafka_consumer(settings, [topic], "secure-group")
    try:
        records = wait_until(lambda: [r for batch in consumer.poll(500).values() for r in batch], timeout=60)
    finally:
        consumer.close()

    assert [r.value for r in records] == [b"page"]


def test_a_wrong_password_is_one_clear_error_and_a_non_zero_exit(secure_kafka: SecureKafka, tmp_path: Path) -> None:
    env = {f"SHOAL_{name}": value for name, value in secure_kafka.settings(password="wrong-" + PASSWORD).items()}
    request = '{"url": "http://127.0.0.1:1/", "appid": "a", "crawlid": "c"}'
    done = subprocess.run(
        [sys.executable, "-m", "utils.cli.main", "feed", request],
        env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True, timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip

    assert done.returncode == 1
    last = done.stderr.splitlines()[-1]
    assert last.startswith("shoal feed: ")
    assert f"Kafka producer cannot connect to {secure_kafka.secure_address} over SASL_SSL" in last
    assert "Traceback" not in done.stderr
    assert PASSWORD not in done.stdout + done.stderr


@pytest.mark.timeout(240)
def test_a_crawl_runs_end_to_end_through_sasl_ssl(
    secure_kafka: SecureKafka, services: LocalServices, tmp_path: Path
) -> None:
    site = generate_site(hosts=1, pages_per_host=30, seed=17, base_ip_octet=17, port=free_port())
    expected = set(site.reachable(site.seed_urls(), 10, deny_extensions=()))
    cluster = TestCluster(services, tmp_path, **secure_kafka.settings(), QUEUE_HITS=0)
    plain = secure_kafka.service.address  # the test's own reader uses the broker's plain listener
    firehose = TopicReader(plain, cluster.settings.topic("crawled_firehose"))
    try:
        with SiteServer(site):
            cluster.start("kafka-monitor")
            cluster.start("crawl", "--spider", "link")
            request = {"url": site.seed_urls()[0], "appid": "secure", "crawlid": "tls", "maxdepth": 10,
                       "deny_extensions": []}  # fmt: skip
            done = subprocess.run(
                [sys.executable, "-m", "utils.cli.main", "feed", json.dumps(request)], env=cluster.env,
                capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2],
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            firehose.wait_for(lambda got: {p["url"] for p in got} >= expected, timeout=180)
        logs = "".join(log.read_text(errors="replace") for log in tmp_path.glob("*.log"))
    finally:
        firehose.close()
        cluster.stop_all()

    assert {page["url"] for page in firehose.messages} == expected
    assert PASSWORD not in logs + done.stdout + done.stderr
