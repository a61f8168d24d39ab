"""Proxies by kind and place: the middleware picks within the group a request's labels ask for.

Driven directly on real Scrapy requests, state in a real Redis, the domain config the real parser's
output (as tests/integration/test_proxy_middleware.py); the e2e test runs it against tinyproxy.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import redis
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler
from twisted.internet.error import ConnectionRefusedError as Refused
from twisted.python.failure import Failure

from crawler.proxies import POOL, AllProxiesQuarantined, NoProxyGroup, ProxyPoolMiddleware
from crawler.retry import RetryPolicy
from utils.config.settings import Settings
from utils.frontier.domain_config import DomainConfig
from utils.proxies.metrics import ProxyCollector
from utils.proxies.pool import ProxyPool, group_health, parse_proxy_list

pytestmark = pytest.mark.integration
DE1, DE2, FR, PLAIN1, PLAIN2 = (f"http://127.0.0.1:{port}" for port in (1, 2, 3, 4, 5))
POOL_LIST = (f"{DE1}#region=de,type=residential,{DE2}#region=de,type=datacenter,{FR}#region=fr,type=residential,"
             f"{PLAIN1},{PLAIN2}")  # fmt: skip
CONFIG = ("domains:\n  hard.com: {proxy_labels: {type: residential}}\n"
          "  german.com: {proxy_labels: 'region=de'}\n")  # fmt: skip


@pytest.fixture
def middleware(redis_db: redis.Redis) -> ProxyPoolMiddleware:
    crawler = get_crawler()
    throttle = SimpleNamespace(config=DomainConfig.parse(CONFIG))
    crawler.engine = SimpleNamespace(_slot=SimpleNamespace(scheduler=SimpleNamespace(throttle=throttle)))  # type: ignore[assignment]
    pool = ProxyPool(redis_db, parse_proxy_list(POOL_LIST), 60.0, 600.0, 3, 3600)
    return ProxyPoolMiddleware(crawler, pool, {403, 407, 429, 503}, 5, 0.0, (Refused,))


def used(mw: ProxyPoolMiddleware, url: str, n: int = 8, **meta: Any) -> set[str]:
    labels = set()
    for i in range(n):
        request = Request(f"{url}/{i}", meta=dict(meta))
        mw.process_request(request)
        labels.add(request.meta[POOL])
    return labels


def test_a_request_goes_only_through_proxies_with_the_labels_it_asks_for(middleware: ProxyPoolMiddleware) -> None:
    assert used(middleware, "http://easy.com") == {PLAIN1, PLAIN2}  # no labels: the default group
    assert used(middleware, "http://easy.com", proxy_labels={"region": "de"}) == {DE1, DE2}
    assert used(middleware, "http://easy.com", proxy_labels={"type": "residential"}) == {DE1, FR}
    assert used(middleware, "http://easy.com", proxy_labels={"region": "de", "type": "residential"}) == {DE1}


def test_the_domain_entry_asks_too_and_the_request_wins_key_by_key(middleware: ProxyPoolMiddleware) -> None:
    assert used(middleware, "http://www.hard.com") == {DE1, FR}  # the ladder's proxy rung: the domain's labels
    assert used(middleware, "http://german.com") == {DE1, DE2}
    assert used(middleware, "http://www.hard.com", proxy_labels={"region": "fr"}) == {FR}  # and type=residential
    assert used(middleware, "http://german.com", proxy_labels={"region": "fr"}) == {FR}


def test_a_group_without_any_proxy_dead_letters_the_request_and_never_sends_it(
    middleware: ProxyPoolMiddleware,
) -> None:
    request = Request("http://easy.com/x", meta={"proxy_labels": {"region": "jp"}})
    with pytest.raises(NoProxyGroup, match="no proxy in PROXY_LIST has the labels region=jp") as caught:
        middleware.process_request(request)
    assert "proxy" not in request.meta
    policy = RetryPolicy.from_settings(Settings.load(environ={}), [])
    decision = policy.decide(Failure(caught.value), 0)
    assert decision.outcome == "dead"  # at once, whatever RETRY_TIMES
    assert "region=jp" in decision.error
    with pytest.raises(NoProxyGroup, match="malformed proxy_labels"):  # a spider's own meta: never the default group
        middleware.process_request(Request("http://easy.com/y", meta={"proxy_labels": ["region=de"]}))


def test_bans_and_waits_stay_within_the_group(middleware: ProxyPoolMiddleware) -> None:
    request = Request("http://easy.com/a", meta={"proxy_labels": {"region": "de"}})
    middleware.process_request(request)
    first = request.meta[POOL]
    retry = middleware.process_response(request, HtmlResponse(request.url, status=403, request=request))
    assert isinstance(retry, Request)
    middleware.process_request(retry)
    assert retry.meta[POOL] == ({DE1, DE2} - {first}).pop()  # the other German proxy, not the plain ones
    middleware.pool.ban(retry.meta[POOL], "easy.com")
    middleware.cache.clear()
    with pytest.raises(AllProxiesQuarantined):  # every German proxy quarantined: it waits
        middleware.process_request(Request("http://easy.com/b", meta={"proxy_labels": {"region": "de"}}))
    assert used(middleware, "http://easy.com") == {PLAIN1, PLAIN2}  # the default group is unaffected


def test_group_health_in_the_state_the_collector_and_the_overview_read(middleware: ProxyPoolMiddleware) -> None:
    pool = middleware.pool
    pool.ban(DE1, "a.com")
    for domain in ("a.com", "b.com", "c.com"):  # PROXY_GLOBAL_BAN_DOMAINS: FR goes everywhere
        pool.ban(FR, domain)
    rows = pool.state()
    assert {row["proxy"]: row["group"] for row in rows}[DE1] == "region=de,type=residential"
    assert {row["proxy"]: row["labels"] for row in rows}[FR] == {"region": "fr", "type": "residential"}
    groups = {g["group"]: g for g in group_health(rows)}
    assert list(groups) == ["region=de,type=residential", "region=de,type=datacenter",
                            "region=fr,type=residential", "default"]  # fmt: skip
    assert (groups["default"]["proxies"], groups["default"]["healthy"]) == (2, 2)
    assert (groups["region=fr,type=residential"]["healthy"], groups["region=fr,type=residential"]["bans"]) == (0, 3)
    assert groups["region=de,type=residential"]["quarantined_domains"] == 1
    samples = {(m.name, s.labels.get("group")): s.value for m in ProxyCollector(pool).collect() for s in m.samples}
    assert samples[("shoal_proxy_group_healthy", "region=fr,type=residential")] == 0
    assert samples[("shoal_proxy_group_proxies", "default")] == 2
    assert samples[("shoal_proxy_group_bans", "region=de,type=residential")] == 1
