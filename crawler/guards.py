"""Downloader and spider middlewares that keep hostile sites and hostile requests in bounds.

The address policy (utils/config/address_policy.py) is checked on every request the downloader sees
(seeds, found links, redirect targets, robots.txt) and on the crawl's own proxy (one the operator
allows, at an address the policy allows: children inherit it and are checked too), on every address
a host name resolves to (no connection is made to a refused one, a proxy's name included), and again
on the address each response actually came from, so DNS that answers with an internal address is
refused too. A refused request is never handed to the
download handler; a response from a refused address is dropped before any spider or pipeline sees
it. All end as `dropped_address` in the crawl's progress.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, Self
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import CannotResolveHostError, IgnoreRequest
from scrapy.http import Response
from scrapy.resolver import CachingThreadedResolver
from twisted.internet.defer import Deferred
from twisted.internet.error import DNSLookupError

from crawler.proxies import POOL
from utils.config.address_policy import AddressPolicy
from utils.observability.metrics import record_dropped

log = logging.getLogger(__name__)


class AddressRefused(IgnoreRequest):
    """A request (or the address it reached) the address policy refuses; `reason` says which rule."""

    def __init__(self, reason: str, url: str) -> None:
        super().__init__(f"refused by the address policy ({reason}): {url[:200]}")
        self.reason = reason


def _refused(request: Request, reason: str) -> AddressRefused:
    spiderid = str(request.meta.get("spiderid") or "")
    record_dropped(spiderid, f"address_{reason}")
    meta = request.meta
    log.warning("Refused by address policy", extra={"url": request.url[:200], "reason": reason,
                "spiderid": spiderid, "appid": meta.get("appid"), "crawlid": meta.get("crawlid")})  # fmt: skip
    return AddressRefused(reason, request.url)


REFUSED_NAMES: dict[str, str] = {}  # host name -> the refused address it resolved to (this process)


class PolicyResolver(CachingThreadedResolver):
    """Scrapy's DNS resolver that refuses a host name whose address the policy denies, before any
    connection is made (the response check below still catches what this cannot see)."""

    policy: AddressPolicy

    @classmethod
    def from_crawler(cls, crawler: Crawler, reactor: Any) -> Self:
        resolver = super().from_crawler(crawler, reactor)
        resolver.policy = AddressPolicy.from_settings(crawler.settings["SHOAL"])
        return resolver

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> Deferred[str]:  # noqa: N802 - Twisted's name
        return super().getHostByName(name, timeout).addCallback(self._checked, name)

    def _checked(self, address: str, name: str) -> str:
        reason = self.policy.address_refusal(address)
        if reason:
            if len(REFUSED_NAMES) > 10_000:
                REFUSED_NAMES.clear()
            REFUSED_NAMES[name] = address
            # Twisted turns any resolver error into "no results"; the middleware names the reason
            raise DNSLookupError(f"refused by the address policy: {name} ({address})")
        return address


class AddressPolicyMiddleware:
    """Downloader middleware: refuse before the fetch by URL, after it by the connected address."""

    def __init__(self, policy: AddressPolicy, robots_maxsize: int) -> None:
        self.policy = policy
        self.robots_maxsize = robots_maxsize

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AddressPolicyMiddleware:
        shoal = crawler.settings["SHOAL"]
        return cls(AddressPolicy.from_settings(shoal), shoal.get_int("ROBOTSTXT_MAXSIZE"))

    def process_request(self, request: Request) -> None:
        reason = self.policy.url_refusal(request.url)
        proxy = request.meta.get("proxy")
        if reason is None and proxy and POOL not in request.meta:  # the crawl's own, inherited by its links
            reason = self.policy.proxy_refusal(str(proxy))
        if reason:
            raise _refused(request, reason)
        if self.robots_maxsize and request.meta.get("dont_obey_robotstxt") and _is_robots(request.url):
            request.meta.setdefault("download_maxsize", self.robots_maxsize)

    def process_exception(self, request: Request, exception: Exception) -> None:
        """A lookup the resolver refused arrives as CannotResolveHostError: counted as refused, not retried."""
        if isinstance(exception, CannotResolveHostError) and urlsplit(request.url).hostname in REFUSED_NAMES:
            raise _refused(request, "address")

    def process_response(self, request: Request, response: Response) -> Response:
        """The address connected to: the target's, or the request's own proxy's (a name may rebind).
        A PROXY_LIST proxy is the operator's: its address is not judged."""
        address = response.ip_address
        if address is None or POOL in request.meta:
            return response
        reason = self.policy.address_refusal(address)
        if reason:
            raise _refused(request, reason)
        return response


def _is_robots(url: str) -> bool:
    return urlsplit(url).path == "/robots.txt"


class LinkPolicyMiddleware:
    """Spider middleware: found links the policy refuses are dropped before they reach Redis."""

    def __init__(self, policy: AddressPolicy) -> None:
        self.policy = policy

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LinkPolicyMiddleware:
        return cls(AddressPolicy.from_settings(crawler.settings["SHOAL"]))

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterable[Any]:
        for entry in result:
            if self._allowed(response, entry):
                yield entry

    async def process_spider_output_async(self, response: Response, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for entry in result:
            if self._allowed(response, entry):
                yield entry

    def _allowed(self, response: Response, entry: Any) -> bool:
        if not isinstance(entry, Request):
            return True
        reason = self.policy.url_refusal(entry.url)
        if reason:
            record_dropped(str(response.meta.get("spiderid") or ""), f"address_{reason}")
            return False
        return True
