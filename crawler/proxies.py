"""Downloader middleware of the proxy pool: rotation, ban detection, immediate retry, hold-back.

Each request without a `proxy` of its own goes out through a proxy that is not quarantined for its
domain, rotating over the healthy ones. A ban (a status of PROXY_BAN_CODES, a connection error or
timeout through the proxy, or the domain's `ban_pattern` from the ZooKeeper config) quarantines the
proxy cluster-wide and retries the request at once through another one, up to PROXY_RETRY_TIMES
(apart from RETRY_TIMES: `attempt` does not change). When every proxy is quarantined for a domain the
request goes back to the frontier unchanged and the domain's throttle key is held back until the
first quarantine ends, so the domain waits in the queue: never failed, never fetched directly.

A request is served by a group of the pool (utils/config/proxy_labels.py): the proxies with every label its
crawl's `proxy_labels` asks for, over its domain's `proxy_labels` in the ZooKeeper config; rotation,
bans and hold-back happen within that group. A request whose group has no proxy at all is
dead-lettered at once with that reason, never fetched directly.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from typing import NoReturn

from redis.exceptions import RedisError
from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response, TextResponse
from scrapy.utils.misc import load_object
from twisted.internet import task

from crawler.meta import LEASE
from crawler.signals import lease_settled
from utils.config.clients import redis_client
from utils.config.proxy_labels import Labels, asked_labels, group_name, merged
from utils.frontier.domain_config import DomainConfig
from utils.frontier.domains import url_domain
from utils.proxies.pool import ProxyPool, parse_proxy_list

log = logging.getLogger(__name__)

POOL = "shoal_pool_proxy"  # label of the pool proxy a request went out through
TRIED = "shoal_proxies_tried"  # labels banned during this lease (not tried again for it)
PROXY_RETRIES = "shoal_proxy_retries"  # immediate retries through another proxy (not RETRY_TIMES)
AUTH = b"Proxy-Authorization"
MIN_WAIT = 0.5  # seconds; shortest hold-back of a domain without a healthy proxy


class AllProxiesQuarantined(IgnoreRequest):
    """The request went back to the frontier to wait for a proxy; its lease is already settled."""


class NoProxyGroup(IgnoreRequest):
    """No proxy of PROXY_LIST has the labels the request asks for: it is dead-lettered at once
    (crawler/retry.py), never fetched directly."""

    dead_at_once = True


class ProxyPoolMiddleware:
    def __init__(self, crawler: Crawler, pool: ProxyPool, ban_codes: set[int], retry_times: int, refresh: float,
                 exceptions: tuple[type[BaseException], ...]) -> None:  # fmt: skip
        self.crawler, self.pool = crawler, pool
        self.urls = {proxy.label: proxy.url for proxy in pool.proxies}
        self.ban_codes, self.retry_times, self.refresh, self.exceptions = ban_codes, retry_times, refresh, exceptions
        self.cache: dict[str, tuple[float, dict[str, float]]] = {}  # domain -> (read at, label -> until)
        self.turn: Counter[tuple[str, Labels]] = Counter()  # (domain, labels asked) -> requests sent (rotation)
        self.pending: Counter[tuple[str, str, str]] = Counter()  # (label, domain, field) -> n, not yet in Redis
        self.patterns: dict[str, tuple[str, re.Pattern[str]]] = {}
        self.from_level = 0  # LADDER_PROXY_ONLY: 2, a domain goes through the pool from ladder level 2 (issue 33)
        self._loop: task.LoopingCall | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProxyPoolMiddleware:
        settings = crawler.settings["SHOAL"]
        if not parse_proxy_list(settings.get_str("PROXY_LIST")):
            raise NotConfigured("PROXY_LIST is empty")
        pool = ProxyPool.from_settings(settings, redis_client(settings, decode=True))
        exceptions = tuple(load_object(path) for path in crawler.settings.getlist("RETRY_EXCEPTIONS"))
        codes = {int(code) for code in settings.get_list("PROXY_BAN_CODES")}
        log.info("Proxy pool enabled", extra={"proxies": [proxy.label for proxy in pool.proxies]})
        middleware = cls(crawler, pool, codes, settings.get_int("PROXY_RETRY_TIMES"),
                         settings.get_float("PROXY_REFRESH"), exceptions)  # fmt: skip
        middleware.from_level = 2 if settings.get_bool("LADDER_PROXY_ONLY") else 0
        crawler.signals.connect(middleware.open, signal=signals.spider_opened)
        crawler.signals.connect(middleware.close, signal=signals.spider_closed)
        return middleware

    # --- Scrapy's downloader middleware interface --------------------------------------------------
    def process_request(self, request: Request) -> None:
        if request.meta.get("proxy") and POOL not in request.meta:
            return  # the crawl request's own proxy wins (a stored record has `proxy: null` otherwise)
        if request.meta.get("shoal_ladder_level", 0) < self.from_level:
            return  # crawler/ladder.py stamps the level; below 2 a domain goes direct
        domain = url_domain(request.url)
        try:
            asked = self.asked(request, domain)
        except ValueError as exc:
            self.no_group(request, domain, f"malformed proxy_labels: {exc}")
        group = self.pool.group(asked)
        if not group:
            self.no_group(request, domain, f"no proxy in PROXY_LIST has the labels {group_name(asked)}")
        label = self.choose(domain, request.meta.get(TRIED, []), group, asked)
        if label is None:
            self.hold_back(request, domain, group)
        request.meta["proxy"] = self.urls[label]
        request.meta[POOL] = label
        self.pending[(label, domain, "requests")] += 1
        self._stat("proxy/requests")

    def process_response(self, request: Request, response: Response) -> Request | Response:
        label = self._done(request)
        if label is None:
            return response
        domain = url_domain(request.url)
        reason = self.ban_reason(response, domain)
        if reason is None:
            self.pending[(label, domain, "successes")] += 1
            return response
        return self.banned(request, label, domain, reason) or response

    def process_exception(self, request: Request, exception: BaseException) -> Request | None:
        label = self._done(request)
        if label is None or not isinstance(exception, self.exceptions):
            return None
        return self.banned(request, label, url_domain(request.url), type(exception).__name__)

    # --- Choice, bans, hold-back ------------------------------------------------------------------
    def asked(self, request: Request, domain: str) -> Labels:
        """The labels the request asks for: its crawl's `proxy_labels` over its domain's. ValueError
        for a value the crawl schema refuses (a spider may set its own meta)."""
        config = _domain_config(self.crawler)
        domain_labels = config.proxy_labels(domain) if config is not None else ()
        return merged(domain_labels, asked_labels(request.meta.get("proxy_labels")))

    def no_group(self, request: Request, domain: str, reason: str) -> NoReturn:
        """No proxy may serve the request: dead-lettered with the reason, never fetched directly."""
        self._stat("proxy/no_group")
        log.warning("No proxy for the labels asked; dead-lettered",
                    extra={"domain": domain, "reason": reason, "url": request.url})  # fmt: skip
        raise NoProxyGroup(f"{reason} (asked for {domain})")

    def choose(self, domain: str, tried: list[str], group: list[str], asked: Labels) -> str | None:
        """The next healthy proxy of `group` for `domain` in rotation, or None when all are quarantined."""
        now = time.time()
        ends = self.quarantines(domain, now)
        healthy = [label for label in group if ends.get(label, 0.0) <= now and label not in tried]
        if not healthy:
            return None
        self.turn[(domain, asked)] += 1
        return healthy[self.turn[(domain, asked)] % len(healthy)]

    def quarantines(self, domain: str, now: float) -> dict[str, float]:
        read_at, ends = self.cache.get(domain, (0.0, {}))
        if now - read_at >= self.refresh:
            try:
                ends = self.pool.quarantines(domain)
            except RedisError as exc:  # keep the last view (all healthy before the first); Redis decides again later
                log.warning("Could not read proxy quarantines; using the last ones", extra={"error": str(exc)})
                ends = ends or dict.fromkeys(self.urls, 0.0)
            self.cache[domain] = (now, ends)
        return ends

    def ban_reason(self, response: Response, domain: str) -> str | None:
        if response.status in self.ban_codes:
            return f"status {response.status}"
        pattern = self._pattern(domain)
        if pattern is not None and isinstance(response, TextResponse) and pattern.search(response.text):
            return "ban_pattern"
        return None

    def banned(self, request: Request, label: str, domain: str, reason: str) -> Request | None:
        """Quarantine the proxy; the retry through another one, or None once PROXY_RETRY_TIMES are used."""
        until = self._quarantine(label, domain)
        self._stat("proxy/bans")
        log.warning("Proxy banned", extra={"proxy": label, "domain": domain, "reason": reason, "until": until})
        retries = int(request.meta.get(PROXY_RETRIES, 0))
        if retries >= self.retry_times:
            return None
        self._stat("proxy/retries")
        self.pending[(label, domain, "retries")] += 1
        meta = {**request.meta, TRIED: [*request.meta.get(TRIED, []), label], PROXY_RETRIES: retries + 1}
        return request.replace(meta=meta, dont_filter=True)

    def _quarantine(self, label: str, domain: str) -> float:
        """Ban in Redis (cluster-wide); this process stops using the proxy for the domain at once."""
        try:
            ban = self.pool.ban(label, domain)
            until = ban.until
            if ban.everywhere:
                log.warning("Proxy quarantined for every domain", extra={"proxy": label, "until": ban.everywhere})
        except RedisError as exc:
            until = time.time() + self.pool.cooldown
            log.warning("Could not record a proxy ban; quarantined here only", extra={"error": str(exc)})
        if domain in self.cache:
            self.cache[domain][1][label] = until
        return until

    def hold_back(self, request: Request, domain: str, group: list[str]) -> NoReturn:
        """No healthy proxy in its group: the request waits in the frontier (same attempt) until a
        quarantine in the group ends."""
        now = time.time()
        quarantines = self.quarantines(domain, now)
        ends = [until for until in (quarantines.get(label, 0.0) for label in group) if until > now]
        wait = max(min(ends, default=now) - now, MIN_WAIT)
        lease = request.meta.pop(LEASE, None)
        if lease is not None:
            lease_settled(self.crawler, lease, "retry", {"record": lease.record, "delay": wait, "pause": wait})
        log.warning("All proxies quarantined for domain; holding it back",
                    extra={"domain": domain, "wait": round(wait, 3), "url": request.url})  # fmt: skip
        raise AllProxiesQuarantined(f"all proxies quarantined for {domain}")

    def _done(self, request: Request) -> str | None:
        """After a download: the pool proxy used (if any); its credentials leave the request."""
        if AUTH in request.headers:
            del request.headers[AUTH]  # page messages carry the request headers
        label: str | None = request.meta.get(POOL)
        if label is not None:
            request.meta.pop("proxy", None)  # a pool proxy is not the crawl's: children must not inherit it
        return label

    def _pattern(self, domain: str) -> re.Pattern[str] | None:
        source = _ban_pattern(self.crawler, domain)
        if not source:
            return None
        cached = self.patterns.get(domain)
        if cached is None or cached[0] != source:
            cached = (source, re.compile(source))
            self.patterns[domain] = cached
        return cached[1]

    def _stat(self, name: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(name)

    def open(self) -> None:
        self._loop = task.LoopingCall(self.flush)
        self._loop.start(self.refresh, now=False)

    def flush(self) -> None:
        """Write the buffered request and success counters (one round trip); kept on a Redis error."""
        pending, self.pending = self.pending, Counter()
        try:
            self.pool.count(pending)
        except RedisError as exc:
            self.pending.update(pending)
            log.warning("Could not write proxy counters; will retry", extra={"error": str(exc)})

    def close(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.flush()


def _domain_config(crawler: Crawler) -> DomainConfig | None:
    """The ZooKeeper domain config the scheduler watches (None before the crawl starts)."""
    try:
        engine = crawler.engine
    except RuntimeError:  # Scrapy 2.13 raises before the crawl starts: no scheduler, no config yet
        return None
    slot = getattr(engine, "_slot", None)
    throttle = getattr(getattr(slot, "scheduler", None), "throttle", None)
    config = getattr(throttle, "config", None)
    return config if isinstance(config, DomainConfig) else None


def _ban_pattern(crawler: Crawler, domain: str) -> str:
    """The domain's `ban_pattern` from the ZooKeeper domain config ('' = none)."""
    config = _domain_config(crawler)
    entry = (config.extra.get(domain) if config is not None else None) or {}
    return str(entry.get("ban_pattern") or "")
