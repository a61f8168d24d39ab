"""Quotas per app at the kafka monitor (refused by name, never queued, live from ZooKeeper), the per-app
figures the redis monitor refreshes, the edge's counting between refreshes, and API keys stored hashed."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from kazoo.client import KazooClient

from kafka_monitor.batch import Batch
from kafka_monitor.monitor import KafkaMonitor
from kafka_monitor.plugins.crawl import CrawlHandler
from redis_monitor.monitor import RedisMonitor
from tests.integration.test_kafka_monitor import drain, feed
from tests.integration.test_rest_helpers import write_progress
from tests.support.cluster import TestCluster
from tests.support.frontier_keys import progress_hash
from tests.support.services import wait_until
from tests.unit.test_kafka_monitor_dispatch import dispatcher, records
from utils.apps import api_keys, mirror
from utils.apps.gate import QuotaGate
from utils.apps.metrics import AppsCollector
from utils.apps.quotas import Quotas
from utils.apps.usage import Refresher, read_figures
from utils.apps.watch import quotas_path
from utils.cli.main import main
from utils.config.clients import redis_client
from utils.frontier import keys
from utils.frontier.shards import Shards

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def crawl(appid: str, i: int, **extra: Any) -> dict[str, Any]:
    return {"url": f"http://127.0.42.{i % 200 + 1}/p{i}", "appid": appid, "crawlid": f"{appid}-c", **extra}


def set_quotas(cluster: TestCluster, zk: KazooClient, text: str) -> None:
    path = quotas_path(cluster.settings)
    zk.ensure_path(path)
    zk.set(path, text.encode())


def wait_for_quota(cluster: TestCluster, appid: str, limit: int | None, rounds: RedisMonitor | None = None) -> None:
    """Until the copy in Redis the edge reads gives `appid` that quota (running the redis monitor's rounds)."""
    client = redis_client(cluster.settings)

    def copied() -> bool:
        if rounds is not None:
            rounds.run_once()
        return mirror.read(client, [appid]).of(appid).max_queued == limit

    wait_until(copied, timeout=30, message="the quota never reached Redis")


@pytest.fixture
def monitor(cluster: TestCluster):
    km = KafkaMonitor.from_settings(cluster.settings)
    yield km
    km.close()


def enqueued(cluster: TestCluster, appid: str) -> int:
    found = progress_hash(redis_client(cluster.settings), "link", appid, f"{appid}-c")
    return int(found.get(b"enqueued", 0))


def test_an_app_over_its_queued_quota_is_refused_by_name_while_another_is_queued(
    cluster: TestCluster, monitor: KafkaMonitor, zk_client: KazooClient, topic_reader
) -> None:
    mirror.write(redis_client(cluster.settings), Quotas.parse("apps: {flood: {max_queued: 5}}"))
    outbound = topic_reader("outbound_firehose")
    flood = [crawl("flood", i, uuid=f"f{i}") for i in range(8)] + [crawl("flood", 100 + i) for i in range(4)]
    other = [crawl("other", i, uuid=f"o{i}") for i in range(3)]
    feed(cluster, flood[:6] + other + flood[6:])
    assert drain(monitor, 15) == 15

    assert enqueued(cluster, "flood") == 5
    assert enqueued(cluster, "other") == 3
    flood_uuids = {f"f{i}" for i in range(8)}

    def refused_in(answers: list[Any]) -> int:  # each refused request is answered: by its uuid, or counted
        return sum(a.get("count", 1) for a in answers if a.get("status") == "refused")

    answers = outbound.wait_for(lambda m: refused_in(m) >= 7 and len(m) >= 11, 30)
    refused = [a for a in answers if a.get("status") == "refused"]
    assert refused_in(answers) == 7
    for answer in refused:
        assert (answer["action"], answer["appid"], answer["crawlid"]) == ("crawl", "flood", "flood-c")
        assert (answer["reason"], answer["quota"], answer["limit"]) == ("quota", "max_queued", 5)
        assert answer["used"] >= 5
    refused_uuids = {a["uuid"] for a in refused if "uuid" in a}
    queued = {a["uuid"] for a in answers if a.get("status") == "queued"}
    assert refused_uuids | (queued & flood_uuids) == flood_uuids
    assert not refused_uuids & queued
    assert {"o0", "o1", "o2"} <= queued
    assert all("uuid" not in a for a in refused if "count" in a)  # without a uuid: one answer per crawl and batch


def test_a_quota_changed_in_zookeeper_applies_without_a_restart(
    cluster: TestCluster, monitor: KafkaMonitor, zk_client: KazooClient
) -> None:
    set_quotas(cluster, zk_client, "default: {max_queued: 2}")
    rounds = RedisMonitor.from_settings(cluster.settings)
    try:
        wait_for_quota(cluster, "grow", 2, rounds)
        feed(cluster, [crawl("grow", i) for i in range(4)])
        assert drain(monitor, 4) == 4
        assert enqueued(cluster, "grow") == 2
        set_quotas(cluster, zk_client, "default: {max_queued: 2}\napps: {grow: {max_queued: 4}}")
        wait_for_quota(cluster, "grow", 4)  # the watch copies it at once: no round needed
        feed(cluster, [crawl("grow", 10 + i) for i in range(4)])
        assert drain(monitor, 4) == 4
        monitor.flush()
        assert enqueued(cluster, "grow") == 4

        def refreshed() -> dict[str, Any]:
            rounds.run_once()
            return read_figures(redis_client(cluster.settings), ["grow"]).get("grow") or {}

        wait_until(lambda: refreshed().get("queued") == 4, timeout=30, message="figures never refreshed")
        figures = refreshed()
        assert (figures["quota"], figures["quota_use"]) == ({"max_queued": 4}, {"max_queued": 1.0})
    finally:
        rounds.close()


def test_the_gate_counts_a_batch_in_memory_and_adds_it_when_the_next_begins(redis_db: Any) -> None:
    mirror.write(redis_db, Quotas.parse("apps: {news: {max_queued: 3}}"))
    gate = QuotaGate(redis_db)
    redis_db.hset(keys.APPS_QUEUED, "news", 1)
    gate.new_batch()
    assert [gate.admit("news") is None for _ in range(3)] == [True, True, False]
    assert gate.admit("price") is None  # no quota: nothing read, nothing counted
    gate.new_batch()
    assert int(redis_db.hget(keys.APPS_QUEUED, "news")) == 3
    refusal = gate.admit("news")
    assert refusal is not None
    assert (refusal.quota, refusal.limit, refusal.used) == ("max_queued", 3, 3)
    assert "max_queued" in refusal.cause
    assert gate.check("news") is not None


def test_a_flood_over_its_quota_is_refused_on_the_fields_that_name_it_before_any_schema(redis_db: Any) -> None:
    mirror.write(redis_db, Quotas.parse("apps: {flood: {max_queued: 2}}"))
    redis_db.hset(keys.APPS_QUEUED, "flood", 2)
    routes = dispatcher()
    (handler,) = [p for p in routes.plugins if isinstance(p, CrawlHandler)]
    handler.gate = QuotaGate(redis_db)
    flood = [crawl("flood", i) for i in range(3)]
    odd = crawl("flood", 3, uuid="f3", priority=500, bogus=True)  # refused whatever the rest of it holds
    unnamed = crawl("flood", 4, crawlid="not a crawl id")  # its answer could not name it: the schema answers
    batch = routes.process(records(*flood, odd, unnamed, crawl("steady", 5)), Batch())

    assert [r.appid for r in batch.requests] == ["steady"]
    counted, by_uuid, invalid = batch.answers
    assert (counted["status"], counted["quota"], counted["count"], counted["spiderid"]) == ("refused", "max_queued",
                                                                                             3, "link")  # fmt: skip
    assert "uuid" not in counted
    assert (by_uuid["uuid"], by_uuid["status"], by_uuid["quota"], by_uuid["used"]) == ("f3", "refused", "max_queued", 2)
    assert (invalid["action"], invalid["error"]["message"]) == ("error", "Did not find schema to validate request")
    assert len(batch.dead_letters) == 1
    assert batch.handled == {"ScraperHandler": 5}


def test_the_refresh_sums_each_apps_crawls_and_sets_the_exact_figure(redis_db: Any) -> None:
    now = [1000.0]
    write_progress(redis_db, "news", "c1", queued=10, retrying=2, inflight=3, crawled=0, enqueued=15, started=999.0)
    write_progress(redis_db, "news", "c2", queued=5, inflight=1, crawled=4, enqueued=10, started=900.0)
    write_progress(redis_db, "price", "p1", queued=1, crawled=0, enqueued=1, started=999.0)
    redis_db.hset(keys.APPS_QUEUED, mapping={"news": 999, "gone": 5})  # stale: the edge's counting, an old app
    refresher = Refresher(redis_db, Shards.for_client(redis_db), 10**9, 30.0, 2.0, clock=lambda: now[0])
    quotas = Quotas.parse("apps: {news: {max_queued: 34}}")
    first = refresher.refresh(quotas)
    assert (first["news"].queued, first["news"].inflight, first["news"].running) == (17, 4, 2)
    assert first["news"].quota_use == {"max_queued": 0.5}
    assert {k.decode(): int(v) for k, v in redis_db.hgetall(keys.APPS_QUEUED).items()} == {"news": 17, "price": 1}

    now[0] = 1002.0
    write_progress(redis_db, "news", "c1", queued=6, retrying=2, inflight=3, crawled=4, enqueued=15, started=999.0)
    second = refresher.refresh(quotas)
    assert second["news"].pages_per_sec == 2.0  # 4 more pages in 2 s
    assert (second["news"].share, second["price"].share) == (1.0, 0.0)
    assert second["news"].first_page_sec == 3.0  # c1 started at 999, its first page seen at 1002
    shown = read_figures(redis_db)
    assert (shown["news"]["queued"], shown["news"]["quota"]) == (13, {"max_queued": 34})


def test_an_api_key_is_stored_hashed_checked_and_revoked_at_once(redis_db: Any) -> None:
    key_id, key = api_keys.create(redis_db, "news", ["feed", "info"], note="team news")
    stored = redis_db.hget(keys.API_KEYS, key_id).decode()
    assert key.split("_", 2)[2] not in stored  # only the salted hash is kept
    checker = api_keys.KeyChecker(redis_db)
    found = checker.principal(key)
    assert found is not None
    assert (found.app, found.scopes) == ("news", {"feed", "info"})
    assert checker.principal(key + "x") is None
    assert checker.principal(f"shoal_{key_id}_wrong") is None
    assert checker.principal("not-a-key") is None
    assert [k["id"] for k in api_keys.listed(redis_db)] == [key_id]
    assert "hash" not in api_keys.listed(redis_db)[0]
    assert api_keys.revoke(redis_db, key_id)
    assert checker.principal(key) is None  # checked before, revoked now: refused at once


# --- By hand and by Prometheus: `shoal apps`, `shoal keys`, the per-app metrics -------------------
@pytest.mark.single_redis
def test_shoal_apps_and_keys_show_figures_set_quotas_and_keys(
    redis_db: Any, services: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    kwargs = redis_db.connection_pool.connection_kwargs
    path = f"/shoal-test/{uuid.uuid4().hex[:8]}/"
    where = [f"-sREDIS_{name.upper()}={kwargs[name]}" for name in ("host", "port", "db")]
    where += [f"-sZOOKEEPER_HOSTS={services.zookeeper.address}", f"-sZOOKEEPER_ASSIGN_PATH={path}"]
    write_progress(redis_db, "news", "c1", queued=4, inflight=1, enqueued=5)
    Refresher(redis_db, Shards.for_client(redis_db), 10**9, 30.0, 2.0).refresh(Quotas())
    assert main([*where, "apps"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:4] == ["appid", "running", "queued", "inflight"]
    assert table[1].split()[:4] == ["news", "1", "4", "1"]
    assert main([*where, "apps", "quota", "news", "--max-queued", "40"]) == 0
    assert main([*where, "apps", "quota", "default", "--max-queued", "9"]) == 0
    capsys.readouterr()
    assert main([*where, "apps", "quotas", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"default": {"max_queued": 9}, "apps": {"news": {"max_queued": 40}}}
    assert main([*where, "apps", "quota", "news"]) == 2  # neither a value nor --remove
    assert main([*where, "keys", "create", "news", "--scopes", "feed,delete"]) == 2  # no such scope
    assert main([*where, "keys", "create", "news", "--json"]) == 0
    created = json.loads(capsys.readouterr().out)
    assert api_keys.KeyChecker(redis_db).principal(created["key"]) is not None
    assert main([*where, "keys", "revoke", created["id"]]) == 0
    assert api_keys.KeyChecker(redis_db).principal(created["key"]) is None


def test_the_per_app_metrics_are_labelled_by_app_only(redis_db: Any) -> None:
    write_progress(redis_db, "news", "c1", queued=4, inflight=1, enqueued=5)
    write_progress(redis_db, "news", "c2", queued=6, enqueued=6)
    Refresher(redis_db, Shards.for_client(redis_db), 10**9, 30.0, 2.0).refresh(
        Quotas.parse("default: {max_queued: 20}")
    )
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in AppsCollector(redis_db).collect() for s in family.samples}  # fmt: skip
    assert samples[("shoal_app_queued", (("appid", "news"),))] == 10
    assert samples[("shoal_app_inflight", (("appid", "news"),))] == 1
    assert samples[("shoal_app_quota_use", (("appid", "news"), ("quota", "max_queued")))] == 0.5
    assert {label for _, labels in samples for label, _ in labels} == {"appid", "quota"}  # never a crawl
