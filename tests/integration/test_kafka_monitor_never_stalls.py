"""Issue 30 on the real broker and Redis: one partition, hostile messages between valid ones, then
more valid ones. Every valid message is queued within seconds and every hostile one is answered
and dead-lettered; before the fix, several of these (a proxy port that is no number, 500 nested
`[`, a plugin whose Redis command raised) stopped the partition for good: the batch was read again
and failed again, forever.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from kafka_monitor.batch import Batch, Origin
from kafka_monitor.monitor import KafkaMonitor
from kafka_monitor.plugins.stats import StatsHandler
from tests.support.cluster import TestCluster
from tests.support.frontier_keys import in_shard
from tests.support.kafka import produce
from utils.config.clients import redis_client
from utils.frontier import keys

pytestmark = pytest.mark.integration

CRAWL = {"url": "http://good.example.com/", "appid": "goodapp", "crawlid": "good1"}


class CommandFails(StatsHandler):
    """A plugin whose Redis command raises (uuid `boom…`) or holds what redis-py cannot encode
    (`enc…`) once the batch is written: after the dispatcher, in the writer."""

    def handle(self, message: dict[str, Any], origin: Origin, batch: Batch) -> None:
        if message["uuid"].startswith("boom"):
            batch.commands.append(lambda pipe: pipe.set("x", 1 / 0))
        elif message["uuid"].startswith("enc"):
            batch.commands.append(lambda pipe: pipe.set("x", {"a dict": "is no Redis value"}))
        else:
            super().handle(message, origin, batch)


def valid(n: int) -> dict[str, Any]:
    return {**CRAWL, "url": f"http://good.example.com/{n}", "uuid": f"good-{n}"}


def hostile() -> list[tuple[str, bytes]]:
    """(uuid or a mark found in the dead letter, raw message)."""
    crawl = json.dumps({**CRAWL, "uuid": "X"})[:-1]  # an open crawl object: append fields, then '}'

    def with_(uuid: str, fields: str) -> bytes:
        return (crawl.replace('"X"', json.dumps(uuid)) + ", " + fields + "}").encode()

    return [
        ("bare-proxy", b'{"proxy":"http://u:p@h:x", "uuid": "bare-proxy"}'),
        ("port", with_("port", '"proxy": "http://u:p@h:99999"')),
        ("port-x", with_("port-x", '"proxy": "http://u:p@h:x"')),
        ("[[[[", b"[" * 500 + b"]" * 500),
        ("[" * 4000, b"[" * 100_000),
        ("deep-attrs", with_("deep-attrs", '"attrs": {"x": ' + "[" * 500 + "]" * 500 + "}")),
        ("inf", with_("inf", '"attrs": {"x": 1e400}')),
        ("nan", with_("nan", '"priority": NaN')),
        ("big-int", with_("big-int", '"attrs": {"n": ' + "9" * 30 + "}")),
        ("surrogate", with_("surrogate", '"attrs": {"s": "\\udc80"}')),
        ("dot", with_("dot", '"spiderid": ".."')),
        ("dots", with_("dots", '"crawlid": "."')),
        ("not json", b"\xff\xfe not json"),
        ("boom", b'{"uuid": "boom-1", "appid": "goodapp", "stats": "all"}'),
        ("enc", b'{"uuid": "enc-1", "appid": "goodapp", "stats": "all"}'),
    ]


def drain(monitor: KafkaMonitor, expected: int, timeout: float) -> int:
    handled, deadline = 0, time.monotonic() + timeout
    while handled < expected and time.monotonic() < deadline:
        handled += monitor.run_once()
    return handled + monitor.flush()


def test_hostile_messages_between_valid_ones_on_one_partition_cost_no_valid_one(
    cluster: TestCluster, topic_reader
) -> None:
    plugins = {**cluster.settings.get_dict("KAFKA_MONITOR_PLUGINS"), f"{__name__}.CommandFails": 250}
    settings = cluster.settings.copy_with(KAFKA_TOPIC_PARTITIONS=1, KAFKA_MONITOR_PLUGINS=plugins)
    monitor = KafkaMonitor.from_settings(settings)
    outbound, dead = topic_reader("outbound_firehose"), topic_reader("dead_letter")
    attacks = hostile()
    batch: list[Any] = []
    for n, (_, raw) in enumerate(attacks):
        batch += [valid(n), raw]
    later = [valid(100 + n) for n in range(5)]
    try:
        produce(settings.get_list("KAFKA_HOSTS")[0], settings.incoming_topic, batch + [valid(99)])
        started = time.monotonic()
        assert drain(monitor, len(batch) + 1, timeout=20) == len(batch) + 1
        produce(settings.get_list("KAFKA_HOSTS")[0], settings.incoming_topic, later)
        assert drain(monitor, len(later), timeout=20) == len(later)
        elapsed = time.monotonic() - started
    finally:
        monitor.close()
    r = redis_client(settings)
    assert r.zcard(in_shard(r, keys.queue("link", "example.com"), "example.com")) == len(attacks) + 1 + len(later)
    assert elapsed < 20

    acks = outbound.wait_for(lambda got: sum(a.get("action") == "crawl" for a in got) >= len(attacks) + 6, 20)
    assert {a["uuid"] for a in acks if a.get("action") == "crawl"} == {
        f"good-{n}" for n in [*range(len(attacks)), 99, *range(100, 105)]
    }
    letters = dead.wait_for(lambda got: len(got) >= len(attacks), 20, "a hostile message was not dead-lettered")
    assert len(letters) == len(attacks)
    shown = [json.dumps(letter) for letter in letters]
    for mark, _ in attacks:
        assert any(mark in text for text in shown), mark
    assert not any("u:p@" in text for text in shown)  # credentials never shown, even of a broken URL
    errors = {a.get("uuid") for a in outbound.messages if a.get("action") == "error"}
    assert {"bare-proxy", "port", "port-x", "inf", "boom-1", "enc-1", "dot"} <= errors
