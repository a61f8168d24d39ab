"""Large pages on Apache Kafka with its stock broker config (message.max.bytes about 1 MiB).

The firehose Shoal creates admits KAFKA_PRODUCER_MAX_REQUEST_SIZE; a topic without Shoal's configs
(auto-created, as a per-appid topic) refuses a 5 MiB page, which must then arrive once without its
body; nothing is released to be fetched again, and an error no retry mends dead-letters the request.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from crawler.meta import LEASE
from crawler.pipelines import Deliveries, KafkaPipeline
from crawler.signals import _ATTRIBUTE
from tests.support.kafka import TopicReader
from utils.config.clients import ensure_topics, kafka_producer
from utils.config.settings import Settings
from utils.frontier.types import Lease

pytestmark = pytest.mark.integration

MIB = 1024 * 1024


class ReactorStandIn:
    """Takes reactor.callFromThread calls from the producer's thread; the test runs them itself."""

    def __init__(self) -> None:
        self.calls: queue.Queue[Callable[[], None]] = queue.Queue()

    def __call__(self, call: Callable[[], None]) -> None:
        self.calls.put(call)

    def run_until(self, done: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, "the pipeline did not settle in time"
            try:
                self.calls.get(timeout=0.1)()
            except queue.Empty:
                pass


class Settled:
    """The crawler stand-in: records each settled lease as (outcome, details)."""

    def __init__(self) -> None:
        self.outcomes: list[tuple[str, dict[str, Any]]] = []
        setattr(self, _ATTRIBUTE, lambda lease, outcome, details: self.outcomes.append((outcome, details)))


@pytest.fixture
def settings(kafka_bootstrap: str, unique_topic_prefix: str) -> Settings:
    return Settings.load(environ={
        "SHOAL_KAFKA_HOSTS": kafka_bootstrap, "SHOAL_KAFKA_TOPIC_PREFIX": unique_topic_prefix,
        "SHOAL_KAFKA_TOPIC_PARTITIONS": "1",
    })  # fmt: skip


@pytest.fixture
def pipeline(settings: Settings) -> Iterator[tuple[KafkaPipeline, Settled, ReactorStandIn]]:
    crawler = Settled()
    reactor = ReactorStandIn()
    pipe = KafkaPipeline(crawler, settings, kafka_producer(settings))  # type: ignore[arg-type]
    pipe.deliveries = Deliveries(reactor)
    yield pipe, crawler, reactor
    pipe.producer.close(timeout=10)


def _page(url: str, size: int) -> dict[str, Any]:
    record = {"url": url, "appid": "big", "crawlid": "c1", "spiderid": "link", "attempt": 0}
    lease = Lease("link", "127.0.0.1", url[-16:].rjust(16, "0"), record)
    return {"url": url, "appid": "big", "crawlid": "c1", "spiderid": "link", "status_code": 200,
            "body": "x" * size, LEASE: lease}  # fmt: skip


def _crawl(pipe: KafkaPipeline, crawler: Settled, reactor: ReactorStandIn, pages: list[dict[str, Any]]) -> None:
    for page in pages:
        pipe.process_item(page)
    reactor.run_until(lambda: len(crawler.outcomes) == len(pages), timeout=120)


def test_shoal_topics_admit_the_largest_page_the_producer_sends(settings: Settings, kafka_bootstrap: str) -> None:
    firehose = settings.topic("crawled_firehose")
    ensure_topics(settings, [firehose, settings.topic("dead_letter")])

    resource = ConfigResource("topic", firehose)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    configs = admin.describe_configs([resource])[resource].result(30)

    assert int(configs["max.message.bytes"].value) > settings.get_int("KAFKA_PRODUCER_MAX_REQUEST_SIZE")
    assert configs["retention.ms"].value == str(settings.get_int("KAFKA_FIREHOSE_RETENTION_MS"))


def test_a_5_mib_and_a_12_mib_page_each_end_in_exactly_one_message(
    settings: Settings, pipeline: tuple[KafkaPipeline, Settled, ReactorStandIn]
) -> None:
    pipe, crawler, reactor = pipeline
    ensure_topics(settings, [settings.topic("crawled_firehose")])
    reader = TopicReader(settings.get_list("KAFKA_HOSTS")[0], settings.topic("crawled_firehose"))
    try:
        pages = [_page("http://127.0.0.1/5mib", 5 * MIB), _page("http://127.0.0.1/12mib", 12 * MIB)]
        _crawl(pipe, crawler, reactor, pages)
        reader.wait_for(lambda messages: len(messages) >= 2, timeout=60)
        reader.poll(2)  # nothing more arrives
    finally:
        reader.close()

    by_url = {message["url"]: message for message in reader.messages}
    assert len(reader.messages) == 2
    assert len(by_url["http://127.0.0.1/5mib"]["body"]) == 5 * MIB
    assert by_url["http://127.0.0.1/12mib"]["body"] is None
    assert by_url["http://127.0.0.1/12mib"]["body_dropped"] is True
    assert [outcome for outcome, _ in crawler.outcomes] == ["crawled", "crawled"]


def test_a_page_a_stock_topic_refuses_is_sent_once_without_body_not_released(
    settings: Settings, pipeline: tuple[KafkaPipeline, Settled, ReactorStandIn]
) -> None:
    pipe, crawler, reactor = pipeline
    pipe.firehose = settings.topic("stock")  # auto-created by the broker: stock max.message.bytes (1 MiB)
    reader = TopicReader(settings.get_list("KAFKA_HOSTS")[0], pipe.firehose)
    try:
        pages = [_page("http://127.0.0.1/5mib", 5 * MIB), _page("http://127.0.0.1/small", 1000)]
        _crawl(pipe, crawler, reactor, pages)
        reader.wait_for(lambda messages: len(messages) >= 2, timeout=60)
        reader.poll(2)
    finally:
        reader.close()

    by_url = {message["url"]: message for message in reader.messages}
    assert len(reader.messages) == 2
    assert by_url["http://127.0.0.1/5mib"]["body_dropped"] is True
    assert by_url["http://127.0.0.1/5mib"]["body_bytes"] > 5 * MIB
    assert len(by_url["http://127.0.0.1/small"]["body"]) == 1000
    assert [outcome for outcome, _ in crawler.outcomes] == ["crawled", "crawled"]


def test_an_error_no_retry_mends_dead_letters_the_request(
    settings: Settings, pipeline: tuple[KafkaPipeline, Settled, ReactorStandIn]
) -> None:
    pipe, crawler, reactor = pipeline
    pipe.firehose = "bad topic name!"  # refused for good, however often it is tried

    _crawl(pipe, crawler, reactor, [_page("http://127.0.0.1/page", 1000)])

    [(outcome, details)] = crawler.outcomes
    assert outcome == "dead"
    assert details["dead_letter"]["url"] == "http://127.0.0.1/page"
    assert "illegal" in details["dead_letter"]["error"]
