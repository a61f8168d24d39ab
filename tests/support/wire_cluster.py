"""A test's components on the wire (tests/support/wire.py): each started with its role's links and a
/metrics port, so a test can ask whether it names a service it cannot reach and whether it is healthy.

`Pipeline` runs every component from a crawl request to its PostgreSQL row (kafka monitor, redis
monitor, crawler, sink, revisit, REST) and checks each crawl fed through it with the delivery rules of
tests/e2e/test_chaos.py (tests/support/delivery.py), in the firehose and in the sink's tables.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from rest.overview import processes
from tests.e2e.test_crawler_helpers import crawler_started, progress, settled
from tests.support.cluster import Component, TestCluster
from tests.support.delivery import check_delivery
from tests.support.kafka import TopicReader
from tests.support.metrics import scrape
from tests.support.services import wait_until
from tests.support.sink import rows, sink_settings
from tests.support.wire import Wire
from utils.config.clients import ensure_topics, redis_client
from utils.demosite.generator import Site
from utils.observability.stats import live_processes
from utils.services import free_port

HEALED_WITHIN_S = 30.0  # every process healthy again this soon after a heal
# How long a component may take to notice: two of its longest client timeouts in a row (a command
# already waiting when the link went, then the next one), REDIS_SOCKET_TIMEOUT 10 s, plus slack for load.
DETECTED_WITHIN_S = 25.0
# Seconds between two polls that scrape /metrics (every process's, for health): each scrape costs the
# component its collectors (several read Redis) and the test a parse, so wait_until's 50 ms default,
# six processes at a time, kept a core of the two busy while a test waited on a fault.
SCRAPE_EVERY_S = 0.25


def feed(bootstrap: str, topic: str, messages: list[dict[str, Any]]) -> None:
    """Produce `messages` on the plain listener (no proxy) and wait until the broker has them."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 120000})
    for message in messages:
        producer.produce(topic, json.dumps(message))
    assert producer.flush(120) == 0


class Faulted:
    """One test's cluster on the wire: components started per role with a metrics port each."""

    def __init__(self, wire: Wire, cluster: TestCluster) -> None:
        self.wire = wire
        self.cluster = cluster
        self.metrics: dict[str, str] = {}  # component name -> its /metrics URL
        self.roles: dict[str, str] = {}  # component name -> its role

    def start(self, role: str, *argv: str, **settings: Any) -> Component:
        port = free_port()
        settings = {**self.wire.settings_for(role), "METRICS_PORT": port, **settings}
        component = self.cluster.start(*argv, name=f"{role}-{len(self.cluster.components)}", settings=settings)
        self.metrics[component.name] = f"http://127.0.0.1:{port}/metrics"
        self.roles[component.name] = role
        return component

    def of_role(self, role: str) -> Component:
        return next(c for c in self.cluster.components if self.roles.get(c.name) == role)

    def dependency_up(self, component: Component, service: str) -> float | None:
        """`shoal_dependency_up` of `service` at `component` (None while /metrics does not answer)."""
        return self._sample(component, "shoal_dependency_up", service)

    def outages(self, component: Component, service: str) -> float:
        return self._sample(component, "shoal_dependency_outages_total", service) or 0.0

    def _sample(self, component: Component, metric: str, service: str) -> float | None:
        try:
            samples = scrape(self.metrics[component.name])
        except OSError:
            return None
        found = [v for (name, labels), v in samples.items() if name == metric and ("dependency", service) in labels]
        return found[0] if found else None

    def unwell(self) -> list[str]:
        """Components that are dead, do not answer /metrics, are not healthy or name a service down."""
        found = []
        for component in self.cluster.components:
            if not component.alive():
                found.append(f"{component.name}: dead")
                continue
            try:
                samples = scrape(self.metrics[component.name])
            except OSError as exc:
                found.append(f"{component.name}: /metrics {exc}")
                continue
            down = sorted(dict(labels).get("dependency", "") for (name, labels), v in samples.items()
                          if name == "shoal_dependency_up" and v == 0)  # fmt: skip
            healthy = [v for (name, _labels), v in samples.items() if name == "shoal_healthy"]
            if down or healthy != [1.0]:
                found.append(f"{component.name}: healthy {healthy}, down {down}")
        return found

    def card(self, role: str) -> dict[str, Any]:
        """The dashboard's health of `role` ({"unreachable": {service: processes}, "late": n})."""
        found = processes(redis_client(self.cluster.settings), self.cluster.settings.get_int("HEARTBEAT_TIMEOUT"))
        return {k: found[role][k] for k in ("unreachable", "late")}

    def dead(self) -> list[str]:
        return [f"{c.name}:\n{c.log_tail()}" for c in self.cluster.components if not c.alive()]


def healed(faulted: Faulted, what: str) -> float:
    """Wait until every process is alive and healthy, naming no service down; seconds it took."""
    began = time.monotonic()
    wait_until(lambda: not faulted.unwell(), timeout=HEALED_WITHIN_S, interval=SCRAPE_EVERY_S,
               message=f"{HEALED_WITHIN_S:g} s after healing {what}: {faulted.unwell()}")  # fmt: skip
    return time.monotonic() - began


class Pipeline:
    """Every component from a crawl request to its row, each on its own links; crawls fed through
    the kafka monitor (from the test's own producer, no proxy) and checked at the end."""

    def __init__(self, faulted: Faulted, site: Site, schema: str, maxdepth: int) -> None:
        self.faulted = faulted
        self.cluster = faulted.cluster
        self.site = site
        self.schema = schema
        self.maxdepth = maxdepth
        self.crawls: dict[str, set[str]] = {}  # crawlid -> the URLs it must deliver
        self.rest_url = ""
        self.firehose: TopicReader | None = None

    def start(self, **sink: Any) -> None:
        postgres = self.faulted.wire.postgres
        assert postgres is not None, "start_wire(..., roles=PIPELINE_ROLES) starts PostgreSQL"
        sink_settings(self.cluster, postgres, self.schema, SINK_BATCH_LINGER=0.05, REVISIT_POLL=0.2,
                      REVISIT_SINK_CHECK=0.5, **sink)  # fmt: skip
        settings = self.cluster.settings
        ensure_topics(settings, [settings.incoming_topic, settings.topic("crawled_firehose")])
        self.firehose = TopicReader(settings.get_list("KAFKA_HOSTS")[0], settings.topic("crawled_firehose"))
        rest_port = free_port()
        self.rest_url = f"http://127.0.0.1:{rest_port}"
        self.faulted.start("sink", "sink")
        self.faulted.start("kafka-monitor", "kafka-monitor")
        self.faulted.start("redis-monitor", "redis-monitor")
        self.faulted.start("crawler", "crawl", "--spider", "link")
        self.faulted.start("revisit", "revisit")
        self.faulted.start("rest", "rest", REST_PORT=rest_port)
        wait_until(lambda: crawler_started(self.cluster), timeout=90, message="the crawler did not start")
        client = redis_client(settings)
        wait_until(lambda: live_processes(client, "sink", 60), 90, message="no sink heartbeat")
        wait_until(lambda: not self.faulted.unwell(), timeout=90, interval=SCRAPE_EVERY_S,
                   message=f"not healthy: {self.faulted.unwell()}")  # fmt: skip

    def feed(self, crawlid: str, seeds: list[str] | None = None, **fields: Any) -> None:
        """Feed a crawl of the site (its own appid, so its sink rows are its own) from `seeds`: by
        default the first host's index alone (the other hosts are linked from it). A seed is queued
        even when its URL was found already, and the kafka monitor may take the second seed after the
        first one's links named it: crawled twice under two request ids, by design, not by a fault."""
        seeds = seeds or self.site.seed_urls()[:1]
        self.crawls[crawlid] = set(self.site.reachable(seeds, self.maxdepth, deny_extensions=(), obey_robots=False))
        base = {"appid": crawlid, "crawlid": crawlid, "maxdepth": self.maxdepth, "deny_extensions": [], **fields}
        feed(self.cluster.settings.get_list("KAFKA_HOSTS")[0], self.cluster.settings.incoming_topic,
             [{**base, "url": url} for url in seeds])  # fmt: skip

    def crawled(self, crawlid: str) -> int:
        return progress(self.cluster, crawlid, appid=crawlid).get("crawled", 0)

    def wait_crawled(self, crawlid: str, share: float) -> None:
        """Until `share` of the crawl is crawled (work in flight for a fault)."""
        wanted = int(len(self.crawls[crawlid]) * share)
        wait_until(lambda: self.crawled(crawlid) >= wanted, timeout=90, message=f"{crawlid} did not start")

    def check(self, timeout: float = 150) -> list[str]:
        """Every crawl fed: delivery rules over its firehose pages and progress, and its sink rows:
        every page's row, one crawl-log row per page message (no batch stored twice)."""
        assert self.firehose is not None
        postgres = self.faulted.wire.postgres
        assert postgres is not None
        self.firehose.wait_for(lambda got: all(
            {p["url"] for p in got if p["crawlid"] == crawlid} >= urls for crawlid, urls in self.crawls.items()
        ), timeout=timeout)  # fmt: skip
        for crawlid in self.crawls:
            wait_until(lambda c=crawlid: settled(progress(self.cluster, c, appid=c)), timeout=60,
                       message=f"{crawlid} did not settle")  # fmt: skip
        self.firehose.poll(2.0)
        lines = []
        for crawlid, expected in self.crawls.items():
            pages = [p for p in self.firehose.messages if p["crawlid"] == crawlid]
            summary = check_delivery(pages, expected, progress(self.cluster, crawlid, appid=crawlid))
            sent = Counter((p["request_id"], p["attempt"]) for p in pages)

            def stored(c: str = crawlid) -> tuple[set[str], Counter[tuple[str, int]]]:
                urls = {r["url"] for r in rows(postgres, self.schema, "pages", "url") if r["appid"] == c}
                log = Counter((r["request_id"], r["attempt"]) for r in rows(postgres, self.schema, "crawl_log", "id")
                              if r["appid"] == c)  # fmt: skip
                return urls, log

            wait_until(lambda e=expected, s=sent, f=stored: f() == (e, s), timeout=60,
                       message=f"{crawlid}: the sink's rows differ from the pages sent")  # fmt: skip
            lines.append(f"[{crawlid}] {summary}; sink rows exact")
        return lines

    def close(self) -> None:
        if self.firehose is not None:
            self.firehose.close()


def hold(fault: Callable[[], Any], seconds: float) -> None:
    """Keep `fault` (a context manager factory) on for `seconds`."""
    with fault():
        time.sleep(seconds)


@contextlib.contextmanager
def pipeline_on(wire: Wire, tmp_path: Path, request: pytest.FixtureRequest, site: Site, schema: str, maxdepth: int,
                **settings: Any) -> Iterator[Pipeline]:  # fmt: skip
    """A test's pipeline on the module's wire; afterwards every fault healed before the pipeline's
    clients close (a half-open link would hold them), every process stopped, and the processes' logs
    printed when the test failed."""
    cluster = TestCluster(wire.services, tmp_path, **settings)
    started = Pipeline(Faulted(wire, cluster), site, schema, maxdepth)
    try:
        yield started
    finally:
        wire.toxiproxy.reset()
        started.close()
        cluster.stop_all()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            print("\n".join(cluster.logs()))
