"""The kafka monitor on the real broker and Redis: crawl requests queued, bad input answered."""

from __future__ import annotations

import json
import time

import pytest

from kafka_monitor.monitor import KafkaMonitor
from tests.support.cluster import TestCluster
from tests.support.kafka import produce
from utils import crawl_request, keys
from utils.clients import redis_client

pytestmark = pytest.mark.integration


def drain(monitor: KafkaMonitor, expected: int, timeout: float = 30) -> int:
    handled, deadline = 0, time.monotonic() + timeout
    while handled < expected and time.monotonic() < deadline:
        handled += monitor.run_once()
    return handled


@pytest.fixture
def monitor(cluster: TestCluster):
    km = KafkaMonitor.from_settings(cluster.settings)
    yield km
    km.close()


def test_a_crawl_request_is_queued_with_defaults_ts_and_expiry(
    cluster: TestCluster, monitor, topic_reader
) -> None:
    bootstrap = cluster.settings.get_list("KAFKA_HOSTS")[0]
    request = {"url": "http://www.dmoztools.net/", "appid": "testapp", "crawlid": "abc123", "maxdepth": 2,
               "priority": 90, "expires": 1999999999, "uuid": "ack-1"}  # fmt: skip
    outbound = topic_reader("outbound_firehose")
    produce(bootstrap, cluster.settings.incoming_topic, [request])
    assert drain(monitor, 1) == 1

    r = redis_client(cluster.settings)
    ((member, score),) = r.zrange(keys.queue("link", "dmoztools.net"), 0, -1, withscores=True)
    assert score == -90
    stored = crawl_request.from_record(
        crawl_request.decode(r.hget(keys.payloads("link", "dmoztools.net"), member))
    )
    for field, value in {**request, "spiderid": "link", "domain_max_pages": None, "allowed_domains": None,
                         "useragent": None, "attrs": None, "curdepth": 0}.items():  # fmt: skip
        assert stored[field] == value, field
    assert abs(stored["ts"] - time.time()) < 30
    assert r.get(keys.timeout("link", "testapp", "abc123")) == b"1999999999"

    (ack,) = outbound.wait_for(lambda got: len(got) >= 1, timeout=15)
    assert ack["action"] == "crawl" and ack["status"] == "queued"  # noqa: PT018
    assert (ack["uuid"], ack["appid"], ack["crawlid"]) == ("ack-1", "testapp", "abc123")


BAD = [
    (b"{not json", "Unparseable JSON Received", None),
    (b'["a list"]', "Did not find schema to validate request", None),
    (
        b'{"url": "http://a.com", "appid": "app", "crawlid": "c", "uuid": "u-unknown", "colour": "red"}',
        "Did not find schema to validate request",
        "colour",
    ),
    (
        b'{"url": "http://a.com", "appid": "app", "crawlid": "c", "uuid": "u-range", "priority": 500}',
        "Did not find schema to validate request",
        "priority",
    ),
    (
        b'{"url": "http://", "appid": "app", "crawlid": "c", "uuid": "u-nohost"}',
        "invalid crawl request",
        "url",
    ),
]


def test_every_rejected_message_is_answered_and_dead_lettered(
    cluster: TestCluster, monitor, topic_reader
) -> None:
    bootstrap = cluster.settings.get_list("KAFKA_HOSTS")[0]
    outbound = topic_reader("outbound_firehose")
    dead = topic_reader("dead_letter")
    produce(bootstrap, cluster.settings.incoming_topic, [raw for raw, _, _ in BAD])
    assert drain(monitor, len(BAD)) == len(BAD)

    answers = outbound.wait_for(lambda got: len(got) >= len(BAD), timeout=15)
    letters = dead.wait_for(lambda got: len(got) >= len(BAD), timeout=15)
    by_data = {_key(answer["data"]): answer for answer in answers}  # partitions do not keep order
    letter_by_data = {_key(letter["data"]): letter for letter in letters}
    for raw, message, cause in BAD:
        answer, letter = by_data[_key(raw)], letter_by_data[_key(raw)]
        assert answer["action"] == "error"
        assert answer["error"]["message"] == message
        if cause:
            assert cause in answer["error"]["cause"]
            assert answer["uuid"].startswith("u-")
            assert answer["appid"] == "app"
        assert isinstance(answer["server_time"], int)
        assert letter["source"] == "kafka-monitor"
        assert message in letter["error"]
    assert redis_client(cluster.settings).dbsize() == 0  # nothing half-written


def _key(data: object) -> str:
    """The same key for a raw message and for its echo in an answer's `data`."""
    if isinstance(data, bytes):
        try:
            data = json.loads(data)
        except ValueError:
            data = data.decode()
    return json.dumps(data, sort_keys=True)
