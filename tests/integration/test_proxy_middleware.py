"""The proxy middleware's decisions on real Scrapy requests and responses, state in a real Redis.

No network: the middleware is driven directly (the e2e test runs it inside a crawler against
tinyproxy). The domain config is the real parser's output, as the scheduler's watcher holds it.
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

from crawler.meta import LEASE
from crawler.proxies import POOL, PROXY_RETRIES, AllProxiesQuarantined, ProxyPoolMiddleware
from crawler.signals import connect_settled
from utils.frontier.domain_config import DomainConfig
from utils.proxies.pool import ProxyPool, parse_proxy_list

pytestmark = pytest.mark.integration
POOL_LIST = "http://u:pw1@127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3"
CONFIG = "domains:\n  shop.com: {ban_pattern: 'captcha-[0-9]+'}\n"


@pytest.fixture
def middleware(redis_db: redis.Redis) -> ProxyPoolMiddleware:
    crawler = get_crawler()
    throttle = SimpleNamespace(config=DomainConfig.parse(CONFIG))
    crawler.engine = SimpleNamespace(_slot=SimpleNamespace(scheduler=SimpleNamespace(throttle=throttle)))  # type: ignore[assignment]
    pool = ProxyPool(redis_db, parse_proxy_list(POOL_LIST), 60.0, 600.0, 3, 3600)
    return ProxyPoolMiddleware(crawler, pool, {403, 407, 429, 503}, 2, 0.0, (Refused,))


def sent(mw: ProxyPoolMiddleware, url: str, **meta: Any) -> Request:
    request = Request(url, meta=meta)
    mw.process_request(request)
    return request


def test_requests_of_a_domain_rotate_over_the_pool(middleware: ProxyPoolMiddleware) -> None:
    used = [sent(middleware, f"http://www.shop.com/{i}").meta[POOL] for i in range(6)]
    assert set(used) == {"http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"}
    assert all(used.count(label) == 2 for label in set(used))


def test_the_crawl_requests_own_proxy_wins(middleware: ProxyPoolMiddleware) -> None:
    request = sent(middleware, "http://www.shop.com/", proxy="http://own.test:8080")
    assert request.meta["proxy"] == "http://own.test:8080"
    assert POOL not in request.meta
    assert sent(middleware, "http://www.shop.com/", proxy=None).meta[POOL]  # a stored `proxy: null`


def test_ban_status_retries_at_once_through_another_proxy(middleware: ProxyPoolMiddleware) -> None:
    request = sent(middleware, "http://www.shop.com/a")
    first = request.meta[POOL]
    request.headers[b"Proxy-Authorization"] = b"Basic dTpwdzE="
    retry = middleware.process_response(request, HtmlResponse(request.url, status=403, request=request))
    assert isinstance(retry, Request)
    assert retry.meta[PROXY_RETRIES] == 1
    assert retry.dont_filter
    assert b"Proxy-Authorization" not in request.headers  # page messages carry request headers
    assert "proxy" not in request.meta  # children never inherit a pool proxy
    middleware.process_request(retry)
    assert retry.meta[POOL] != first
    assert middleware.pool.quarantines("shop.com")[first] > 0
    assert middleware.pool.quarantines("other.com")[first] == 0


def test_ban_pattern_from_the_domain_config(middleware: ProxyPoolMiddleware) -> None:
    request = sent(middleware, "http://www.shop.com/b")
    body = b"<html>solve captcha-12 first</html>"
    assert isinstance(
        middleware.process_response(request, HtmlResponse(request.url, body=body, request=request)), Request
    )
    other = sent(middleware, "http://www.else.com/b")
    page = HtmlResponse(other.url, body=body, request=other)
    assert middleware.process_response(other, page) is page  # the pattern is shop.com only


def test_connection_errors_ban_and_retries_are_bounded(middleware: ProxyPoolMiddleware) -> None:
    request = sent(middleware, "http://www.shop.com/c")
    retry = middleware.process_exception(request, Refused())
    assert isinstance(retry, Request)
    middleware.process_request(retry)
    again = middleware.process_exception(retry, Refused())
    assert isinstance(again, Request)
    assert again.meta[PROXY_RETRIES] == 2
    middleware.process_request(again)
    assert middleware.process_exception(again, Refused()) is None  # PROXY_RETRIES used: normal retry path
    assert middleware.process_exception(sent(middleware, "http://www.x.com/"), ValueError()) is None


def test_no_healthy_proxy_sends_the_request_back_unchanged(middleware: ProxyPoolMiddleware) -> None:
    settled: list[tuple[Any, str, dict[str, Any]]] = []
    connect_settled(middleware.crawler, lambda lease, outcome, details: settled.append((lease, outcome, details)))
    for label in ("http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"):
        middleware.pool.ban(label, "shop.com")
    lease = SimpleNamespace(record={"url": "http://www.shop.com/d", "attempt": 1})
    request = Request("http://www.shop.com/d", meta={LEASE: lease})
    with pytest.raises(AllProxiesQuarantined):
        middleware.process_request(request)
    assert LEASE not in request.meta  # settled here, so the errback settles nothing
    [(got, outcome, details)] = settled
    assert (got, outcome, details["record"]) == (lease, "retry", lease.record)  # same attempt
    assert 55 < details["delay"] == details["pause"] <= 60
