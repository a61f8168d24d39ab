"""The REST gateway as a real process against the real broker, Redis and a real kafka monitor.

Scrapy Cluster's rest list (reference §13.1): health, feed with and without uuid, the wait and the
poll_id fallback, poll once, the error envelope with its messages; plus Shoal's endpoints.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

from rest import envelope
from tests.integration.test_rest_helpers import (
    client_of,
    envelope_error,
    gateway_cluster,
    redis_of,
    success_data,
    write_progress,
)
from tests.support.cluster import TestCluster
from tests.support.kafka import TopicReader, produce
from tests.support.services import wait_until
from utils.frontier import dead_letters, keys
from utils.frontier.ladder import Ladder
from utils.observability import stats
from utils.observability.stats import StatsCollector, StatsConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

WAIT = 3.0  # WAIT_FOR_RESPONSE_TIME of this module's gateway
POLL_TTL = 600


@pytest.fixture(scope="module")
def rest_cluster(services, tmp_path_factory) -> Iterator[TestCluster]:
    with gateway_cluster(
        services, tmp_path_factory.mktemp("rest-api"), "kafka-monitor",
        WAIT_FOR_RESPONSE_TIME=WAIT, REST_POLL_RESULT_TTL=POLL_TTL, REST_SAMPLE_INTERVAL=0.5,
    ) as cluster:  # fmt: skip
        yield cluster


@pytest.fixture(scope="module")
def http(rest_cluster: TestCluster) -> Iterator[httpx.Client]:
    client = client_of(rest_cluster)
    yield client
    client.close()


@pytest.fixture(scope="module")
def r(rest_cluster: TestCluster) -> Iterator[redis.Redis]:
    client = redis_of(rest_cluster)
    yield client
    client.close()


@pytest.fixture(scope="module")
def incoming(rest_cluster: TestCluster) -> Iterator[TopicReader]:
    reader = TopicReader(rest_cluster.settings.get_list("KAFKA_HOSTS")[0], rest_cluster.settings.incoming_topic)
    wait_until(lambda: reader.poll(0.2) >= 0 and reader.consumer.assignment(), timeout=30)  # joined its group
    yield reader
    reader.close()


def answer(cluster: TestCluster, message: dict[str, Any]) -> None:
    """Put an answer on the outbound firehose, as a redis monitor would."""
    produce(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.topic("outbound_firehose"), [message])


def new_uuid() -> str:
    return uuid.uuid4().hex[:16]


# --- health --------------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_health_is_unwrapped_and_green(http: httpx.Client, method: str) -> None:
    health = http.request(method, "/").json()
    assert set(health) == {"kafka_connected", "redis_connected", "uptime_sec", "my_id", "node_health"}
    assert (health["kafka_connected"], health["redis_connected"], health["node_health"]) == (True, True, "GREEN")
    assert isinstance(health["uptime_sec"], int)
    assert len(health["my_id"]) == 12


def test_the_gateway_beats_in_redis_with_a_ttl(http: httpx.Client, r: redis.Redis, rest_cluster: TestCluster) -> None:
    my_id = http.get("/").json()["my_id"]
    ttl = rest_cluster.settings.get_int("HEARTBEAT_TIMEOUT")
    hosts = wait_until(lambda: stats.live_processes(r, "rest", ttl), timeout=15)
    ((host, ids),) = hosts.items()
    assert ids == [my_id]
    assert 0 < r.ttl(keys.heartbeat("rest", host, my_id)) <= ttl


# --- feed ----------------------------------------------------------------------------------------
def test_feed_without_uuid_answers_at_once_and_the_crawl_is_queued(http: httpx.Client) -> None:
    request = {"url": "http://127.0.0.250:9/a", "appid": "restapp", "crawlid": "noid1"}
    assert success_data(http.post("/feed", json=request)) is None
    crawl = wait_until(lambda: http.get("/crawls/restapp/noid1").json()["data"], timeout=20)
    assert (crawl["enqueued"], crawl["queued"], crawl["spiderid"], crawl["finished"]) == (1, 1, "link", False)


def test_feed_with_uuid_returns_the_kafka_monitors_acknowledgement(http: httpx.Client) -> None:
    request = {"url": "http://127.0.0.250:9/b", "appid": "restapp", "crawlid": "ack1", "uuid": new_uuid()}
    started = time.monotonic()
    data = success_data(http.post("/feed", json=request))
    assert time.monotonic() - started < WAIT
    assert data["action"] == "crawl"
    assert (data["status"], data["uuid"], data["appid"], data["crawlid"]) == (
        "queued",
        request["uuid"],
        "restapp",
        "ack1",
    )


def test_a_request_the_kafka_monitor_refuses_returns_its_error_answer(http: httpx.Client) -> None:
    request = {"url": "http://", "appid": "restapp", "crawlid": "bad1", "uuid": new_uuid()}
    data = success_data(http.post("/feed", json=request))
    assert (data["action"], data["uuid"]) == ("error", request["uuid"])
    assert "url" in data["error"]["cause"]
    assert data["data"]["url"] == "http://"


@pytest.mark.parametrize("body", [b"{not json", b"null", b""])
def test_feed_refuses_a_body_that_is_not_json(http: httpx.Client, body: bytes) -> None:
    response = http.post("/feed", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert envelope_error(response) == {"message": envelope.MUST_JSON}


@pytest.mark.parametrize(
    ("body", "cause"),
    [
        ({"url": "http://a.com", "appid": "restapp", "crawlid": "c", "colour": "red"}, "colour"),
        ({"url": "http://a.com", "appid": "restapp", "crawlid": "c", "priority": 500}, "priority"),
        ({"action": "explode", "appid": "restapp", "uuid": "u", "spiderid": "link"}, "action"),
        ([1, 2], "JSON object"),
    ],
)
def test_feed_refuses_what_matches_no_schema_with_the_cause(http: httpx.Client, body: Any, cause: str) -> None:
    response = http.post("/feed", json=body)
    assert response.status_code == 400
    error = envelope_error(response)
    assert error["message"] == envelope.BAD_SCHEMA
    assert cause in error["cause"]


# --- the wait, then /poll -----------------------------------------------------------------------
def test_an_answer_later_than_the_wait_is_kept_for_poll_and_fetched_once(
    http: httpx.Client, r: redis.Redis, rest_cluster: TestCluster
) -> None:
    request_id = new_uuid()
    request = {"action": "info", "appid": "restapp", "crawlid": "late1", "uuid": request_id, "spiderid": "link"}
    started = time.monotonic()
    assert success_data(http.post("/feed", json=request)) == {"poll_id": request_id}
    assert WAIT - 0.1 <= time.monotonic() - started < WAIT + 5
    assert envelope_error(http.post("/poll", json={"poll_id": request_id})) == {"message": envelope.NO_POLL}

    late = {"action": "info", "appid": "restapp", "crawlid": "late1", "uuid": request_id, "total_pending": 0}
    answer(rest_cluster, late)
    key = f"rest:poll:{request_id}"
    wait_until(lambda: r.exists(key), timeout=15)
    assert 0 < r.ttl(key) <= POLL_TTL
    assert success_data(http.post("/poll", json={"poll_id": request_id})) == late
    second = http.post("/poll", json={"poll_id": request_id})
    assert second.status_code == 404
    assert envelope_error(second) == {"message": envelope.NO_POLL}


def test_answers_nobody_waits_for_are_kept_for_poll(
    http: httpx.Client, r: redis.Redis, rest_cluster: TestCluster
) -> None:
    stray = {"action": "stop", "uuid": new_uuid(), "appid": "other", "total_purged": 3}
    outbound = rest_cluster.settings.topic("outbound_firehose")
    produce(rest_cluster.settings.get_list("KAFKA_HOSTS")[0], outbound, [b"{garbage", b"[1, 2]", {"no": "uuid"}])
    answer(rest_cluster, stray)  # garbage on the firehose is skipped, not fatal
    wait_until(lambda: r.exists(f"rest:poll:{stray['uuid']}"), timeout=15)
    assert success_data(http.post("/poll", json={"poll_id": stray["uuid"]})) == stray


@pytest.mark.parametrize("body", [{}, {"poll_id": ""}, {"poll_id": "a", "extra": 1}, {"poll_id": 5}])
def test_poll_refuses_a_body_outside_its_schema(http: httpx.Client, body: Any) -> None:
    response = http.post("/poll", json=body)
    assert response.status_code == 400
    error = envelope_error(response)
    assert error["message"] == envelope.BAD_SCHEMA
    assert error["cause"]


def test_poll_refuses_a_body_that_is_not_json(http: httpx.Client) -> None:
    response = http.post("/poll", content=b"poll_id=1", headers={"Content-Type": "application/json"})
    assert (response.status_code, envelope_error(response)) == (400, {"message": envelope.MUST_JSON})


def test_a_stored_result_that_is_not_json_is_a_500_and_is_dropped(http: httpx.Client, r: redis.Redis) -> None:
    r.set("rest:poll:garbled", "{not json")
    response = http.post("/poll", json={"poll_id": "garbled"})
    assert (response.status_code, envelope_error(response)) == (500, {"message": envelope.BAD_REDIS_JSON})
    assert not r.exists("rest:poll:garbled")


@pytest.mark.parametrize(("method", "path"), [("GET", "/nowhere"), ("POST", "/nowhere/else"), ("GET", "/feed"),
                                              ("GET", "/poll"), ("PUT", "/")])  # fmt: skip
def test_unknown_endpoints_answer_404_in_the_envelope(http: httpx.Client, method: str, path: str) -> None:
    response = http.request(method, path)
    assert response.status_code == 404
    assert envelope_error(response) == {"message": envelope.DOES_NOT_EXIST}


# --- crawls, dead letters, actions ---------------------------------------------------------------
def test_a_crawls_progress_with_rate_eta_and_drops(http: httpx.Client, r: redis.Redis) -> None:
    write_progress(r, "restapp", "prog1", started=time.time() - 10, queued=5, inflight=2, retrying=1, enqueued=20,
                   crawled=10, failed=1, dead=1, dropped_duplicate=7)  # fmt: skip
    data = success_data(http.get("/crawls/restapp/prog1"))
    assert {k: data[k] for k in ("queued", "inflight", "retrying", "enqueued", "crawled", "failed", "dead")} == {
        "queued": 5, "inflight": 2, "retrying": 1, "enqueued": 20, "crawled": 10, "failed": 1, "dead": 1,
    }  # fmt: skip
    assert (data["pending"], data["done"], data["percent"], data["finished"]) == (8, 12, 60.0, False)
    assert data["dropped"] == {"duplicate": 7}
    assert data["pages_per_sec"] == pytest.approx(1.2, rel=0.2)
    assert data["eta_sec"] == pytest.approx(8 / 1.2, rel=0.2)


def test_a_finished_crawl_and_the_crawl_list(http: httpx.Client, r: redis.Redis) -> None:
    write_progress(r, "restapp", "done1", enqueued=3, crawled=3, updated=int(time.time()))
    write_progress(r, "restapp", "busy1", enqueued=3, crawled=1, queued=2)
    done = success_data(http.get("/crawls/restapp/done1", params={"spiderid": "link"}))
    assert (done["finished"], done["eta_sec"], done["percent"]) == (True, 0.0, 100.0)
    listed = {c["crawlid"]: c for c in success_data(http.get("/crawls"))}
    assert {"done1", "busy1"} <= set(listed)
    running = {c["crawlid"] for c in success_data(http.get("/crawls", params={"running": "true"}))}
    assert "busy1" in running
    assert "done1" not in running


def test_an_unknown_crawl_is_404(http: httpx.Client) -> None:
    response = http.get("/crawls/restapp/never-fed")
    assert response.status_code == 404
    assert envelope_error(response)["message"] == envelope.NO_CRAWL


def test_a_crawls_dead_letters_newest_first_with_paging(http: httpx.Client, r: redis.Redis) -> None:
    pipe = r.pipeline()
    for n in range(3):
        request = {"url": f"http://127.0.0.250:9/dead{n}", "appid": "restapp", "crawlid": "dl1", "spiderid": "link"}
        dead_letters.store(pipe, dead_letters.record(request, f"error {n}", 503, 4, "crawler"))
    pipe.execute()
    data = success_data(http.get("/dead-letters/restapp/dl1"))
    assert (data["total"], data["spiderid"]) == (3, "link")
    assert [d["error"] for d in data["dead_letters"]] == ["error 2", "error 1", "error 0"]
    page = success_data(http.get("/dead-letters/restapp/dl1", params={"start": 1, "count": 1}))
    assert [d["url"] for d in page["dead_letters"]] == ["http://127.0.0.250:9/dead1"]


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        (
            "POST",
            "/crawls/restapp/act1/stop",
            {"action": "stop", "appid": "restapp", "crawlid": "act1", "spiderid": "link"},
        ),
        ("POST", "/dead-letters/restapp/act1/replay", {"action": "replay-dead-letters", "crawlid": "act1"}),
        ("DELETE", "/dead-letters/restapp/act1", {"action": "purge-dead-letters", "crawlid": "act1"}),
        ("GET", "/stats/queue", {"stats": "queue", "appid": "shoal-rest"}),
    ],
)
def test_actions_and_stats_go_to_the_cluster_and_return_its_answer(
    http: httpx.Client, incoming: TopicReader, rest_cluster: TestCluster, method: str, path: str, expected: dict
) -> None:
    result: dict[str, httpx.Response] = {}
    caller = threading.Thread(target=lambda: result.setdefault("r", http.request(method, path)))
    caller.start()

    def sent(messages: list[Any]) -> bool:
        return any(isinstance(m, dict) and expected.items() <= m.items() for m in messages)

    messages = incoming.wait_for(sent, timeout=15, message=f"{expected} never reached the incoming topic")
    request = next(m for m in messages if isinstance(m, dict) and expected.items() <= m.items())
    reply = {**expected, "uuid": request["uuid"], "server_time": int(time.time()), "note": "answered by the test"}
    answer(rest_cluster, reply)
    caller.join(timeout=30)
    data = success_data(result["r"])
    if data == {"poll_id": request["uuid"]}:  # a loaded machine: the answer came after the wait
        data = wait_until(lambda: http.post("/poll", json=data).json()["data"], timeout=15)
    assert data == reply


def test_an_action_with_an_appid_outside_the_schema_is_400(http: httpx.Client) -> None:
    response = http.post("/crawls/ab/c1/stop")
    assert response.status_code == 400
    assert envelope_error(response)["message"] == envelope.BAD_SCHEMA


# --- dashboard and documentation -----------------------------------------------------------------
def test_the_dashboard_page_its_files_and_its_data(http: httpx.Client, r: redis.Redis) -> None:
    page = http.get("/dashboard")
    assert page.status_code == 200
    assert "Shoal dashboard" in page.text
    for name in ("dashboard.js", "dashboard.css"):
        assert http.get(f"/dashboard/static/{name}").status_code == 200
    write_progress(r, "restapp", "dash1", enqueued=9, crawled=4, queued=5)

    def shown() -> dict[str, Any] | None:
        data = success_data(http.get("/dashboard/data"))
        return data if any(c["crawlid"] == "dash1" for c in data["crawls"]) else None

    data = wait_until(shown, timeout=15)
    assert data["health"]["node_health"] == "GREEN"
    assert data["processes"]["rest"]["count"] == 1
    assert data["processes"]["kafka-monitor"]["count"] >= 1
    assert len(data["chart"]) >= 1
    assert {"running", "pages_per_sec", "queued", "crawled", "failed"} <= set(data["totals"])
    assert data["memory"]["used"] > 0 and data["memory"]["policy"] == "noeviction"  # noqa: PT018
    assert {"limit", "bytes_per_request"} <= set(data["memory"])


def test_the_dashboard_shows_live_render_processes_only(http: httpx.Client, r: redis.Redis) -> None:
    now = time.time()
    for member, seen, rate in (("render-host:41", now, 2.5), ("render-host:42", now - 10_000, 9.0)):
        r.hset(keys.render_figures(*member.split(":")), mapping={"pages": 40, "pages_per_sec": rate,
               "browser_memory": 300 * 2**20, "browser_restarts": 1})  # fmt: skip
        r.zadd(keys.RENDERERS, {member: seen})
    shown = success_data(http.get("/dashboard/data"))["renderers"]
    assert [(row["process"], row["pages_per_sec"], row["browser_memory"]) for row in shown] == [
        ("render-host:41", 2.5, 300 * 2**20)
    ]  # the one that stopped reporting is gone


def test_the_dashboard_shows_sites_pushing_back_and_the_conditions_firing(http: httpx.Client, r: redis.Redis) -> None:
    """Issue 33: domains above level 0 and, from Redis alone, a paused domain and queued work without a crawler."""
    spider = f"s{uuid.uuid4().hex[:8]}"
    r.sadd(keys.SPIDERS, spider)
    try:
        r.zadd(keys.heads(spider), {"example.net": -1})
        r.zadd(keys.queue(spider, "example.net"), {"0000000000000001a": -1})
        ladder = Ladder(r, 10, 600)
        ladder.set_level(spider, "example.org", 1, "ops", "429s")
        ladder.set_level(spider, "example.com", 4, "ops", "banned")
        shown = success_data(http.get("/dashboard/data"))["pushback"]
        mine = [(d["domain"], d["level"], d["state"], d["reason"]) for d in shown["domains"] if d["spiderid"] == spider]
        assert mine == [("example.com", 4, "paused", "banned"), ("example.org", 1, "slower", "429s")]
        firing = {(c["alert"], c["spiderid"]) for c in shown["conditions"]}
        assert {("ShoalDomainPaused", spider), ("ShoalNoLiveSpider", spider)} <= firing
        ladder.set_level(spider, "example.com", 0)
        r.delete(keys.heads(spider), keys.queue(spider, "example.net"))
        shown = success_data(http.get("/dashboard/data"))["pushback"]
        firing = {(c["alert"], c["spiderid"]) for c in shown["conditions"]}
        assert not {("ShoalDomainPaused", spider), ("ShoalNoLiveSpider", spider)} & firing
    finally:
        r.srem(keys.SPIDERS, spider)


def test_the_dashboard_shows_a_spider_with_work_that_crawled_nothing_for_15_minutes(
    http: httpx.Client, r: redis.Redis,
) -> None:
    """Issue 33: ShoalCrawlNoProgress from the crawlers' response counters in Redis (crawler/stats.py)."""
    spider = f"s{uuid.uuid4().hex[:8]}"
    base = f"stats:crawler:host-9:{spider}:200"
    r.sadd(keys.SPIDERS, spider)
    try:
        r.zadd(keys.heads(spider), {"example.net": -1})
        r.zadd(keys.queue(spider, "example.net"), {"0000000000000001a": -1})

        def firing() -> set[tuple[str, str]]:
            shown = success_data(http.get("/dashboard/data"))["pushback"]
            return {(c["alert"], c["spiderid"]) for c in shown["conditions"]}

        assert ("ShoalCrawlNoProgress", spider) not in firing()  # never crawled: its first pages may be coming
        config = StatsConfig([900], 60, 600)
        earlier = StatsCollector(r, config, clock=lambda: time.time() - 1200)  # 20 minutes ago
        earlier.incr(base, 5)
        earlier.flush()
        assert ("ShoalCrawlNoProgress", spider) in firing()
        now = StatsCollector(r, config)
        now.incr(base)
        now.flush()
        assert ("ShoalCrawlNoProgress", spider) not in firing()
    finally:
        r.srem(keys.SPIDERS, spider)
        r.delete(keys.heads(spider), keys.queue(spider, "example.net"), f"{base}:buckets", f"{base}:lifetime")
        r.zrem(stats.INDEX, base)


def test_the_openapi_document_and_docs_page(http: httpx.Client) -> None:
    document = http.get("/openapi.json").json()
    assert "CrawlRequest" in document["components"]["schemas"]
    assert "anyOf" in document["paths"]["/feed"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    docs = http.get("/docs")
    assert docs.status_code == 200
    assert "swagger" in docs.text.lower()


def test_cors_is_off_by_default(http: httpx.Client) -> None:
    response = http.options(
        "/feed", headers={"Origin": "http://elsewhere.test", "Access-Control-Request-Method": "POST"}
    )
    assert "access-control-allow-origin" not in response.headers


def test_a_domains_ladder_with_its_history_is_shown(http: httpx.Client, r: redis.Redis) -> None:
    """Issue 33: `GET /domains/{spider}/{domain}` shows the level, its state and every step."""
    ladder = Ladder(r, 10, 600)
    spider = f"s{uuid.uuid4().hex[:8]}"
    ladder.set_level(spider, "example.com", 2, "ops", "proxies first")
    ladder.set_level(spider, "example.com", 4, "ops", "banned")
    data = success_data(http.get(f"/domains/{spider}/WWW.Example.com."))  # read as the queue domain
    assert (data["level"], data["state"], data["reason"]) == (4, "paused", "banned")
    assert [(s["from"], s["to"], s["by"]) for s in data["history"]] == [(2, 4, "ops"), (0, 2, "ops")]
    listed = success_data(http.get(f"/domains/{spider}"))["domains"]
    assert listed == [{"domain": "example.com", "level": 4, "state": "paused"}]
    fresh = success_data(http.get(f"/domains/{spider}/example.org"))
    assert (fresh["level"], fresh["state"], fresh["history"]) == (0, "configured", [])
