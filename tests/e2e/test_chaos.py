"""Chaos (issue 21 item 3): a crawl of the demo site while, in turn, a crawler, a kafka monitor,
the redis monitor, Redis (restarted with its data), the Kafka broker (restarted; Apache Kafka keeps
its log) and ZooKeeper are killed.

Two crawls run through the whole pipeline (every request enters through Kafka and a kafka
monitor): `chaos` follows the site's links from its seeds, `chaos-fed` is one request per page,
fed in chunks just before each fault so that every fault finds messages in flight. Each stage
waits until the crawl has moved on, kills its victim with SIGKILL and starts it again (as
supervisord would); Redis and the broker are restarted on their data, ZooKeeper killed and
started again later.

At the end every expected page has arrived, nothing else; each request is counted once in its
crawl's progress; and every duplicate on the firehose is an at-least-once one the test can
explain: the copies of a URL share the request id and differ in `attempt`, i.e. the page was sent
but its lease was not acknowledged, the lease came back through the reaper and the request was
crawled again. A copy no lease explains (a request queued twice, a page sent twice by one lease)
fails the test. The lease settings are the shipped ones.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.e2e.test_crawler_helpers import crawler_started, progress, settled
from tests.support.cluster import Component, TestCluster
from tests.support.delivery import check_delivery
from tests.support.kafka import TopicReader
from tests.support.services import SERVICE_START_TIMEOUT, wait_until
from utils.config.clients import ensure_topics, redis_client
from utils.demosite import SiteServer, generate_site
from utils.frontier import keys
from utils.services import LocalServices, free_port, start_local_services

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(420)]

MAXDEPTH = 10
LINKED, FED = "chaos", "chaos-fed"
# A per-host throttle keeps the crawl going for the whole sequence of faults; the leases and the
# reaper keep their shipped settings.
SETTINGS = {"QUEUE_HITS": 6, "QUEUE_WINDOW": 1, "CONCURRENT_REQUESTS": 4, "KAFKA_TOPIC_PARTITIONS": 3}


@pytest.fixture(scope="module")
def chaos_services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServices]:
    """Redis, ZooKeeper and broker of this module alone: killing them disturbs no other test."""
    with start_local_services(tmp_path_factory.mktemp("chaos-services"), timeout=SERVICE_START_TIMEOUT) as services:
        yield services


@pytest.fixture
def site_server() -> Iterator[tuple]:
    site = generate_site(hosts=4, pages_per_host=110, seed=2121, network="127.21.0", base_ip_octet=10,
                         port=free_port())  # fmt: skip
    with SiteServer(site, delay=0.05) as server:
        yield site, server


@pytest.fixture
def chaos(chaos_services: LocalServices, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[TestCluster]:
    cluster = TestCluster(chaos_services, tmp_path, **SETTINGS)
    yield cluster
    cluster.stop_all()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print("\n".join(cluster.logs()))


class Pipeline:
    """The running components, by role; a victim is killed and replaced as supervisord would."""

    def __init__(self, cluster: TestCluster) -> None:
        self.cluster = cluster
        self.roles: dict[str, list[Component]] = defaultdict(list)

    def start(self, role: str) -> Component:
        argv = {"crawler": ("crawl", "--spider", "link"), "kafka-monitor": ("kafka-monitor",),
                "redis-monitor": ("redis-monitor",)}[role]  # fmt: skip
        component = self.cluster.start(*argv, name=f"{role}-{len(self.cluster.components)}")
        self.roles[role].append(component)
        return component

    def kill_and_replace(self, role: str) -> None:
        victim = self.roles[role].pop(0)
        assert victim.alive(), f"{victim.name} died before its turn:\n{victim.log_tail()}"
        victim.kill()
        self.start(role)

    def all_alive(self) -> list[str]:
        return [c.name for comps in self.roles.values() for c in comps if not c.alive()]


def feed(bootstrap: str, topic: str, messages: list[dict[str, Any]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 120000})
    for message in messages:
        producer.produce(topic, json.dumps(message))
    assert producer.flush(120) == 0


def crawled(cluster: TestCluster) -> int:
    return sum(progress(cluster, crawlid).get("crawled", 0) for crawlid in (LINKED, FED))


def test_a_crawl_survives_every_component_killed_in_turn(
    chaos: TestCluster, chaos_services: LocalServices, site_server
) -> None:
    site, _server = site_server
    bootstrap = chaos.settings.get_list("KAFKA_HOSTS")[0]
    incoming = chaos.settings.incoming_topic
    ensure_topics(chaos.settings, [incoming])
    firehose = TopicReader(bootstrap, chaos.settings.topic("crawled_firehose"))
    pipeline = Pipeline(chaos)
    for role in ("kafka-monitor", "kafka-monitor", "redis-monitor", "crawler", "crawler"):
        pipeline.start(role)
    wait_until(lambda: crawler_started(chaos, 2), timeout=60, message="crawlers did not start")

    linked = site.reachable(site.seed_urls(), MAXDEPTH, deny_extensions=())
    fed_urls = sorted(linked)
    base = {"appid": "testapp", "deny_extensions": []}
    feed(bootstrap, incoming, [{**base, "url": u, "crawlid": LINKED, "maxdepth": MAXDEPTH} for u in site.seed_urls()])

    def restart_redis() -> None:
        chaos_services.redis.restart()

    def restart_broker() -> None:
        chaos_services.broker.restart(60)

    def kill_zookeeper() -> None:
        chaos_services.zookeeper.kill()
        threading.Timer(3.0, restart_zookeeper).start()  # back a few seconds later, the crawl going on

    def restart_zookeeper() -> None:
        chaos_services.zookeeper.start()

    stages: list[tuple[str, Callable[[], None]]] = [
        ("crawler", lambda: pipeline.kill_and_replace("crawler")),
        ("kafka monitor", lambda: pipeline.kill_and_replace("kafka-monitor")),
        ("redis monitor", lambda: pipeline.kill_and_replace("redis-monitor")),
        ("redis", restart_redis),
        ("broker", restart_broker),
        ("zookeeper", kill_zookeeper),
    ]
    chunks = [fed_urls[i :: len(stages)] for i in range(len(stages))]
    total = len(linked) + len(fed_urls)
    began = time.monotonic()
    timeline = []
    try:
        for k, ((name, fault), chunk) in enumerate(zip(stages, chunks, strict=True)):
            threshold = total * (k + 1) // (len(stages) + 2)
            wait_until(lambda t=threshold: crawled(chaos) >= t, timeout=120, interval=0.1,
                       message=f"the crawl stalled before the {name} stage")  # fmt: skip
            requests = [{**base, "url": u, "crawlid": FED, "maxdepth": 0} for u in chunk]
            feeder = threading.Thread(target=feed, args=(bootstrap, incoming, requests))
            feeder.start()  # the fault lands while the chunk is on its way through Kafka and the monitors
            time.sleep(0.3)
            fault()
            feeder.join(120)
            timeline.append(f"{name} at {time.monotonic() - began:.1f} s ({crawled(chaos)} of {total} crawled)")
    finally:
        wait_until(lambda: chaos_services.zookeeper.running, timeout=10)  # the timer starts it again
        chaos_services.zookeeper.wait_ready(30)
    last_fault = time.monotonic()

    wanted = {(LINKED, u) for u in linked} | {(FED, u) for u in fed_urls}
    firehose.wait_for(lambda got: {(p["crawlid"], p["url"]) for p in got} >= wanted, timeout=180)
    everything = time.monotonic() - last_fault
    wait_until(lambda: settled(progress(chaos, LINKED)) and settled(progress(chaos, FED)), timeout=60)
    firehose.poll(2.0)
    assert not pipeline.all_alive(), f"components died: {pipeline.all_alive()}"

    report = []
    for crawlid, expected in ((LINKED, set(linked)), (FED, set(fed_urls))):
        pages = [p for p in firehose.messages if p["crawlid"] == crawlid]
        report.append(f"[{crawlid}] " + check_delivery(pages, expected, progress(chaos, crawlid)))
    r = redis_client(chaos.settings)
    assert r.zcard(keys.inflight("link")) == 0
    firehose.close()
    print("\n" + "\n".join(["[chaos] " + line for line in timeline] + report
                           + [f"[chaos] every page {everything:.1f} s after the last fault, "
                              f"{time.monotonic() - began:.1f} s in all"]))  # fmt: skip
