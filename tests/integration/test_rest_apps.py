"""Keys per app at the REST gateway: each key sees and stops its own app's crawls only, within its
scopes; the shared key stays the admin's; a revoked key stops at once. Quotas answered by name at
`/feed` (429), and every app's figures at `/apps` and on the dashboard's data."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

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
from utils.apps import api_keys, mirror
from utils.apps.quotas import Quotas
from utils.apps.usage import Refresher
from utils.frontier import keys
from utils.frontier.shards import Shards

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ADMIN_KEY = "shared-admin-key"


@pytest.fixture(scope="module")
def gateway(services, tmp_path_factory) -> Iterator[TestCluster]:
    with gateway_cluster(services, tmp_path_factory.mktemp("rest-apps"), REST_API_KEY=ADMIN_KEY,
                         WAIT_FOR_RESPONSE_TIME=0.2) as cluster:  # fmt: skip
        redis = redis_of(cluster)
        write_progress(redis, "news", "n1", queued=3, enqueued=3)
        write_progress(redis, "price", "p1", queued=7, enqueued=7)
        yield cluster


@pytest.fixture(scope="module")
def http(gateway: TestCluster) -> Iterator[httpx.Client]:
    client = client_of(gateway)
    yield client
    client.close()


@pytest.fixture(scope="module")
def news_key(gateway: TestCluster) -> str:
    return api_keys.create(redis_of(gateway), "news", ["feed", "info", "stop"])[1]


def as_key(key: str) -> dict[str, str]:
    return {"X-API-Key": key}


def crawl(appid: str, **extra: Any) -> dict[str, Any]:
    return {"url": "http://127.0.42.1/", "appid": appid, "crawlid": "c1", **extra}


def test_an_apps_key_lists_and_reads_its_own_crawls_only(http: httpx.Client, news_key: str) -> None:
    listed = success_data(http.get("/crawls", headers=as_key(news_key)))
    assert {c["appid"] for c in listed} == {"news"}
    assert {c["appid"] for c in success_data(http.get("/crawls", headers=as_key(ADMIN_KEY)))} == {"news", "price"}
    assert success_data(http.get("/crawls/news/n1", headers=as_key(news_key)))["queued"] == 3
    other = http.get("/crawls/price/p1", headers=as_key(news_key))
    assert other.status_code == 403
    assert envelope_error(other)["message"] == envelope.FORBIDDEN


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/crawls/price/p1/stop", None),
    ("DELETE", "/dead-letters/price/p1", None),
    ("POST", "/feed", crawl("price")),
    ("POST", "/feed", {"action": "stop", "appid": "price", "crawlid": "p1", "uuid": "s1", "spiderid": "link"}),
    ("POST", "/feed", {"appid": "news", "uuid": "st1", "stats": "all"}),  # cluster-wide: the admin's
    ("GET", "/stats/all", None),
    ("GET", "/dashboard/data", None),
    ("GET", "/domains/link", None),
])  # fmt: skip
def test_an_apps_key_cannot_reach_another_app_or_the_cluster(
    http: httpx.Client, news_key: str, method: str, path: str, body: Any
) -> None:
    response = http.request(method, path, json=body, headers=as_key(news_key))
    assert response.status_code == 403, response.text
    assert envelope_error(response)["message"] == envelope.FORBIDDEN


def test_an_apps_key_feeds_and_stops_its_own_crawls(http: httpx.Client, news_key: str) -> None:
    assert success_data(http.post("/feed", json=crawl("news"), headers=as_key(news_key))) is None
    assert "poll_id" in success_data(http.post("/crawls/news/n1/stop", headers=as_key(news_key)))


def test_a_key_without_a_scope_is_refused_that_route(gateway: TestCluster, http: httpx.Client) -> None:
    _, reader = api_keys.create(redis_of(gateway), "news", ["info"])
    assert success_data(http.get("/crawls/news/n1", headers=as_key(reader)))["appid"] == "news"
    assert http.post("/crawls/news/n1/stop", headers=as_key(reader)).status_code == 403
    assert http.post("/feed", json=crawl("news"), headers=as_key(reader)).status_code == 403


def test_a_revoked_key_is_refused_at_once(gateway: TestCluster, http: httpx.Client) -> None:
    key_id, key = api_keys.create(redis_of(gateway), "news", ["info"])
    assert http.get("/crawls", headers=as_key(key)).status_code == 200
    api_keys.revoke(redis_of(gateway), key_id)
    refused = http.get("/crawls", headers=as_key(key))
    assert refused.status_code == 401
    assert envelope_error(refused)["message"] == envelope.NEED_KEY


def test_feed_over_the_quota_is_answered_429_naming_it(gateway: TestCluster, http: httpx.Client, news_key: str) -> None:
    redis = redis_of(gateway)
    mirror.write(redis, Quotas.parse("apps: {news: {max_queued: 3}}"))
    redis.hset(keys.APPS_QUEUED, "news", 3)
    try:
        refused = http.post("/feed", json=crawl("news"), headers=as_key(news_key))
        assert refused.status_code == 429
        error = envelope_error(refused)
        assert error["message"] == envelope.OVER_QUOTA
        assert error["cause"].startswith("max_queued:")
        redis.hset(keys.APPS_QUEUED, "news", 2)
        assert success_data(http.post("/feed", json=crawl("news"), headers=as_key(news_key))) is None
    finally:
        mirror.write(redis, Quotas())


def test_apps_shows_each_apps_figures_and_quota(gateway: TestCluster, http: httpx.Client, news_key: str) -> None:
    redis = redis_of(gateway)
    mirror.write(redis, Quotas.parse("apps: {news: {max_queued: 30}}"))
    try:
        Refresher(redis, Shards.for_client(redis), 10**9, 30.0, 2.0).refresh(mirror.read(redis))
        every = success_data(http.get("/apps", headers=as_key(ADMIN_KEY)))["apps"]
        assert {a["appid"]: a["queued"] for a in every} == {"news": 3, "price": 7}
        own = success_data(http.get("/apps", headers=as_key(news_key)))["apps"]
        assert [(a["appid"], a["quota"], a["quota_use"]) for a in own] == [("news", {"max_queued": 30},
                                                                            {"max_queued": 0.1})]  # fmt: skip
        assert http.get("/apps/price", headers=as_key(news_key)).status_code == 403
        dashboard = success_data(http.get("/dashboard/data", headers=as_key(ADMIN_KEY)))
        assert {a["appid"] for a in dashboard["apps"]} == {"news", "price"}
    finally:
        mirror.write(redis, Quotas())
