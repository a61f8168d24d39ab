"""Revisits end to end (issue 31): kafka monitor, a `link` crawler, sinks and `shoal revisit` processes
against the demo site's changing pages (utils/demosite/changing.py) and a real PostgreSQL.

Intervals are seconds (min 1, max 4) so the adaptive rule plays out in a few revisits: a page that
never changes is fetched with its validators and answered 304 every time, no new version is
written, and its interval doubles to the max; a page that changes between any two visits (20
changes/s) is stored once per change and its interval halves to the min.
"""

from __future__ import annotations

import os
import signal
from collections import defaultdict
from datetime import datetime
from typing import Any

import pytest

from tests.support.cluster import TestCluster
from tests.support.kafka import produce
from tests.support.postgres import Postgres
from tests.support.services import wait_until
from tests.support.sink import rows, sink_settings
from utils.config.clients import redis_client
from utils.demosite import SiteServer, generate_site
from utils.demosite.changing import ChangingPages
from utils.observability.stats import live_processes
from utils.services import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

FAST = {"QUEUE_HITS": 1000, "QUEUE_WINDOW": 1, "QUEUE_MODERATED": False}
POLICY = {"interval": 1, "min": 1, "max": 4, "inc": 2, "dec": 0.5, "pages": r"/fresh/\d+\.html$"}


def start(cluster: TestCluster, postgres: Postgres, schema: str, revisits: int) -> None:
    sink_settings(cluster, postgres, schema, REVISIT_POLL=0.2, REVISIT_LEASE=4, REVISIT_SINK_CHECK=0.5,
                  SINK_BATCH_LINGER=0.05)  # fmt: skip
    cluster.start("kafka-monitor")
    cluster.start("crawl", "--spider", "link")
    cluster.start("sink", name="sink-a")
    for n in range(revisits):
        cluster.start("revisit", name=f"revisit-{n}")
    client = redis_client(cluster.settings)  # a crawl with `revisit` is refused until a sink beats
    wait_until(lambda: live_processes(client, "sink", 60), 60, message="no sink heartbeat")


def crawl(cluster: TestCluster, url: str, crawlid: str) -> None:
    request = {"url": url, "appid": "fresh", "crawlid": crawlid, "maxdepth": 1, "revisit": POLICY}
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, [request])


def by_url(postgres: Postgres, schema: str, table: str, order: str) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows(postgres, schema, table, order):
        found[row["url"] if "url" in row else row["key"]].append(row)
    return found


def fetch_times(postgres: Postgres, schema: str) -> dict[str, list[datetime]]:
    return {url: [r["fetched_at"] for r in log] for url, log in by_url(postgres, schema, "crawl_log", "id").items()}


@pytest.mark.parametrize("cluster", [FAST], indirect=True)
def test_unchanged_pages_get_304s_up_to_max_changing_ones_are_stored_per_change_down_to_min(
    cluster: TestCluster, postgres: Postgres, pg_schema: str
) -> None:
    site = generate_site(hosts=1, pages_per_host=3, seed=31, base_ip_octet=131, port=free_port())
    pages = ChangingPages(site.hosts[0], [0.0, 0.0, 0.0, 20.0, 20.0, 20.0])
    static, changing = [pages.url(i) for i in range(3)], [pages.url(i) for i in range(3, 6)]
    start(cluster, postgres, pg_schema, revisits=2)
    with SiteServer(site, changing=pages):
        crawl(cluster, pages.index_url, "c1")

        def settled() -> bool:
            state = {r["url"]: r for r in rows(postgres, pg_schema, "revisits", "url")}
            return len(state) == 6 and all(state[u]["unchanged_count"] >= 3 for u in static) and all(
                state[u]["interval_s"] == 1.0 and len(changes.get(u, [])) >= 3
                for changes in [by_url(postgres, pg_schema, "changes", "id")] for u in changing)  # fmt: skip

        wait_until(settled, 90, interval=0.5, message="the revisits did not settle")
        cluster.stop_all()  # before the site goes: what is read below is not still being written
    state = {r["url"]: r for r in rows(postgres, pg_schema, "revisits", "url")}
    assert pages.index_url not in state  # the policy's `pages` regex leaves the index out
    log = by_url(postgres, pg_schema, "crawl_log", "id")
    stored = {r["url"]: r for r in rows(postgres, pg_schema, "pages", "url")}
    changes = by_url(postgres, pg_schema, "changes", "id")
    for url in static:
        statuses = [r["status_code"] for r in log[url]]
        assert statuses[0] == 200
        assert set(statuses[1:]) == {304}, statuses  # every revisit one conditional GET, answered 304
        assert state[url]["interval_s"] == 4.0  # 1 -> 2 -> 4 -> 4 (max)
        assert stored[url]["last_changed"] == stored[url]["first_seen"]  # no new version
        assert stored[url]["body"].startswith("<!DOCTYPE html>")  # the 304's empty body was not stored
        assert url not in changes
    for url in changing:
        fetched = [r for r in log[url] if r["status_code"] == 200]
        assert len(changes[url]) == len(fetched) - 1  # stored once per change
        assert state[url]["interval_s"] == 1.0  # halved to the min
        assert stored[url]["last_changed"] == changes[url][-1]["changed_at"]
    for url, times in fetch_times(postgres, pg_schema).items():  # two revisit processes, no URL fed twice
        gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
        assert all(gap >= 0.9 for gap in gaps), (url, gaps)
    fed = ["Revisits fed" in component.log_tail(400) for component in cluster.components if "revisit" in component.name]
    assert fed == [True, True]  # both processes took part
    assert pages.answers[304] >= 9


@pytest.mark.parametrize("cluster", [FAST], indirect=True)
def test_kill_9_of_a_revisit_process_and_of_a_sink_loses_and_doubles_no_revisit(
    cluster: TestCluster, postgres: Postgres, pg_schema: str
) -> None:
    site = generate_site(hosts=1, pages_per_host=3, seed=32, base_ip_octet=132, port=free_port())
    pages = ChangingPages(site.hosts[0], [0.0] * 30 + [20.0] * 10)
    start(cluster, postgres, pg_schema, revisits=1)
    policy_max = 1  # every page every second: the most work in flight when the kills come
    with SiteServer(site, changing=pages):
        request = {"url": pages.index_url, "appid": "fresh", "crawlid": "k1", "maxdepth": 1,
                   "revisit": {**POLICY, "max": policy_max}}  # fmt: skip
        produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.incoming_topic, [request])
        wait_until(lambda: len(rows(postgres, pg_schema, "revisits", "url")) == 40, 60, interval=0.5)
        wait_until(lambda: len(rows(postgres, pg_schema, "revisit_log", "id")) >= 40, 30, interval=0.2)  # under way
        revisit, sink = cluster.components[-1], next(c for c in cluster.components if c.name == "sink-a")
        os.kill(revisit.pid, signal.SIGKILL)
        os.kill(sink.pid, signal.SIGKILL)
        killed = datetime.now().astimezone()
        cluster.start("sink", name="sink-b")
        cluster.start("revisit", name="revisit-b")

        def all_revisited_twice_since() -> bool:
            times = fetch_times(postgres, pg_schema)
            return all(sum(t > killed for t in times.get(pages.url(i), [])) >= 2 for i in range(40))

        wait_until(all_revisited_twice_since, 90, interval=0.5, message="a revisit was lost")
    state = rows(postgres, pg_schema, "revisits", "url")
    assert all(r["next_due"] is not None for r in state)  # every row still scheduled
    for url, times in fetch_times(postgres, pg_schema).items():
        gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
        assert all(gap >= 0.9 for gap in gaps), (url, gaps)  # none fed twice
    changes = by_url(postgres, pg_schema, "changes", "id")
    for url, found in changes.items():
        stamps = [r["changed_at"] for r in found]
        assert len(stamps) == len(set(stamps)), url  # a replayed batch recorded no change twice
