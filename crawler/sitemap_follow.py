"""A crawl's sitemaps (its `sitemaps` field, issue 31): found, read, and only what moved queued.

`"sitemaps": true` finds the seed host's sitemaps in the `Sitemap:` lines of its robots.txt (the
copy Scrapy's RobotsTxtMiddleware already fetched for the seed; fetched through the frontier when
robots.txt is not obeyed), else at /sitemap.xml; a URL names the sitemap itself. A sitemap (any
page of such a crawl whose body is one) is read within bounds (crawler/sitemaps.py); its entries
are compared with what the last poll of that sitemap saw, kept in one Redis hash per crawl and
sitemap (keys.sitemap_seen, SITEMAP_STATE_TTL), and only URLs that are new or whose lastmod moved
are queued: new ones through the dupefilter like any link, moved ones past it (a revisit is not a
duplicate). The listed pages go straight into the frontier in batches (the enqueue script every
link goes through), seeds of the crawl (depth 0, their links followed up to `maxdepth`) carrying
`revisit_hint` (seconds, from changefreq); the allowed_domains and regex filters, the address
policy and a robots.txt known here apply first (robots.txt again at the fetch). The state is
written after they are queued, so a crawler that dies in between queues them again next time.
An index's sitemaps are followed as requests of the crawl, SITEMAP_DEPTH_MAX levels deep at most,
each with the If-None-Match / If-Modified-Since of its last poll; the index remembers a sitemap's
lastmod once that sitemap was read. A 304, or a body that is no sitemap, queues nothing.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.robotstxt import ProtegoRobotParser
from scrapy.utils.httpobj import urlparse_cached

from crawler.meta import passthrough
from crawler.sitemaps import Entry, Sitemap, read_sitemap
from crawler.spider_output import crawl_filters_allow
from utils.config.address_policy import AddressPolicy, fetched_url
from utils.config.clients import redis_client
from utils.frontier import Frontier, NewRequest, crawl_request, keys
from utils.frontier.domains import host_domain
from utils.frontier.fingerprint import PLAIN_URL, fingerprint
from utils.observability.metrics import record_dropped, record_enqueued

log = logging.getLogger(__name__)

ETAG, LAST_MODIFIED = "\tetag", "\tlast_modified"  # the sitemap's own validators in its state hash
CHUNK = 10_000  # fields per HMGET/HSET command
ROBOTS_KEPT = 10_000  # hosts whose parsed robots.txt this process keeps for discovery
ENQUEUE_BATCH = 2_000  # listed pages per enqueue call: Redis is never held long by one sitemap


class SitemapFollower:
    """One per link spider; `requests(response, item, kwargs)` is called for pages of sitemap crawls."""

    def __init__(
        self, frontier: Frontier, policy: AddressPolicy, limits: tuple[int, int, int, int], agent: str
    ) -> None:
        self.frontier, self.client, self.policy = frontier, frontier.client, policy
        self.max_urls, self.max_bytes, self.max_depth, self.ttl = limits
        self.agent = agent
        self.robots: dict[str, Any] = {}  # netloc -> Scrapy robots parser

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SitemapFollower:
        shoal = crawler.settings["SHOAL"]
        limits = tuple(shoal.get_int(f"SITEMAP_{name}") for name in ("URLS_MAX", "BYTES_MAX", "DEPTH_MAX", "STATE_TTL"))
        follower = cls(Frontier.from_settings(shoal, redis_client(shoal)), AddressPolicy.from_settings(shoal),
                       limits, crawler.settings.get("ROBOTSTXT_USER_AGENT") or shoal.get_str("USER_AGENT"))  # type: ignore[arg-type]  # fmt: skip
        crawler.signals.connect(follower.on_robots, signal=signals.robots_parsed)
        return follower

    def on_robots(self, robotparser: Any, request: Request, **_: Any) -> None:
        """Keep the robots.txt Scrapy parsed for a host: its Sitemap lines and its rules."""
        if len(self.robots) >= ROBOTS_KEPT:
            self.robots.clear()
        self.robots[urlparse_cached(request).netloc] = robotparser

    def requests(self, response: Response, item: dict[str, Any], kwargs: dict[str, Any]) -> Iterator[Request]:
        meta = response.meta
        if kwargs.get("sitemap_robots"):
            yield from self._sitemaps(response, _robots_sitemaps(response))
            return
        depth = kwargs.get("sitemap_depth")
        sitemap = Sitemap()
        if response.status == 200 and response.body:
            sitemap = read_sitemap(response.body, response.url, self.max_urls, self.max_bytes)
        if sitemap.kind:
            yield from self._poll(response, sitemap, int(depth or 0), item)
            self._read_for_index(response, kwargs)
        elif depth is not None:
            outcome = "not_modified" if response.status == 304 else "not_a_sitemap"
            item["sitemap"] = {"kind": "", "queued": 0, "outcome": outcome}
        elif response.status == 200 and int(meta.get("curdepth", 0)) == 0:  # a seed (a 304 finds nothing new)
            yield from self._discover(response)

    # --- discovery ---------------------------------------------------------------------------------
    def _discover(self, response: Response) -> Iterator[Request]:
        named = response.meta.get("sitemaps")
        if isinstance(named, str):
            yield from self._sitemaps(response, [named])
            return
        parts = urlsplit(response.url)
        parser = self.robots.get(parts.netloc)
        if parser is None:  # robots.txt not obeyed here (or not parsed yet): read it as a page of the crawl
            yield self._request(response, f"{parts.scheme}://{parts.netloc}/robots.txt", {"sitemap_robots": True})
            return
        found = list(getattr(getattr(parser, "rp", None), "sitemaps", ()) or ())
        yield from self._sitemaps(response, found or [f"{parts.scheme}://{parts.netloc}/sitemap.xml"])

    def _sitemaps(self, response: Response, urls: list[str]) -> Iterator[Request]:
        """The sitemaps found, each with the validators of its last poll (a revisit of the seed, once
        the dupefilter forgot them, polls them again with conditional GETs)."""
        found = dict.fromkeys(response.urljoin(u.strip()) for u in urls[: self.max_urls] if u.strip())
        wanted = [url for url in found if url.startswith(("http://", "https://"))]
        for url, headers in zip(wanted, self._conditional(response, wanted), strict=True):
            yield self._request(response, url, {"sitemap_depth": 1}, headers=headers)

    def _request(self, response: Response, url: str, cb_kwargs: dict[str, Any], dont_filter: bool = False,
                 headers: dict[str, str] | None = None) -> Request:  # fmt: skip
        """A sitemap (or robots.txt) to read: at the crawl's own priority, ahead of the pages it lists."""
        meta: dict[str, Any] = {"priority": int(response.meta.get("priority", 1)), "curdepth": 0}
        if headers:
            meta["headers"] = headers
        return Request(url, meta=meta, cb_kwargs=cb_kwargs, dont_filter=dont_filter)

    # --- a poll ------------------------------------------------------------------------------------
    def _poll(self, response: Response, sitemap: Sitemap, depth: int, item: dict[str, Any]) -> Iterator[Request]:
        meta = response.meta
        spiderid = str(meta.get("spiderid") or "")
        key = keys.sitemap_seen(spiderid, str(meta.get("appid")), str(meta.get("crawlid")), _id(_own_url(response)))
        entries = list({entry.url: entry for entry in reversed(sitemap.entries)}.values())[::-1]  # a URL once
        seen = self._seen(key, [entry.url for entry in entries])
        fresh: list[tuple[Entry, bool]] = []  # (entry, moved)
        for entry, before in zip(entries, seen, strict=True):
            if before is None:
                fresh.append((entry, False))
            elif entry.lastmod and int(before) != entry.lastmod:
                fresh.append((entry, True))
        counts = {**sitemap.summary(), "unchanged": len(entries) - len(fresh), "queued": 0,
                  "moved": sum(moved for _, moved in fresh), "filtered": 0}  # fmt: skip
        if sitemap.kind == "sitemapindex":  # a child is remembered once it was read (_read_for_index)
            yield from self._children(response, fresh, depth, key, counts)
            fresh = []
        else:
            self._queue_pages(response, fresh, counts)
        self._remember(key, fresh, response)
        item["sitemap"] = counts
        self._count(spiderid, response.url, counts)

    def _queue_pages(self, response: Response, fresh: list[tuple[Entry, bool]], counts: dict[str, Any]) -> None:
        """The listed pages straight into the frontier, ENQUEUE_BATCH a call, before the sitemap's
        state is written and its page sent: yielded one by one as Scrapy requests they cost ~0.5 ms
        each in spider middlewares and signals (50,000 took 26 s; issue 31's target is 20 s)."""
        entries, statuses = [], Counter[str]()
        origins: dict[str, tuple[str | None, str]] = {}
        for entry, moved in fresh:
            new = self._new_request(response, entry, moved, origins)
            if new is None:
                counts["filtered"] += 1
            else:
                entries.append(new)
        for start in range(0, len(entries), ENQUEUE_BATCH):
            statuses.update(self.frontier.enqueue(entries[start : start + ENQUEUE_BATCH]))
        spiderid = str(response.meta.get("spiderid") or "")
        counts["queued"] = statuses.pop("queued", 0)
        record_enqueued(spiderid, counts["queued"])
        for status, n in statuses.items():
            counts[status] = n
            if status != "replayed":
                record_dropped(spiderid, status, n)

    def _new_request(
        self, response: Response, entry: Entry, moved: bool, origins: dict[str, tuple[str | None, str]]
    ) -> NewRequest | None:
        """A listed page as the frontier stores it (what the scheduler makes of a yielded link), or
        None when the crawl's filters, the address policy or a known robots.txt refuse it. A moved
        page goes past the dupefilter (a revisit is not a duplicate). `origins` keeps the policy's
        verdict and the queue domain per scheme://host:port: every entry of a sitemap shares them."""
        meta, url = response.meta, entry.url
        robots = self.robots.get(urlparse_cached(response).netloc)
        if (robots is not None and not robots.allowed(url, self.agent)) or not crawl_filters_allow(meta, url):
            return None
        try:
            url = url if PLAIN_URL.match(url) else fetched_url(url)  # as Scrapy will fetch it
        except ValueError:
            return None
        cut = url.find("/", url.find("://") + 3)
        origin = url if cut < 0 else url[:cut]
        if origin not in origins:
            origins[origin] = (self.policy.url_refusal(origin + "/"), host_domain(urlsplit(url).hostname or ""))
        refusal, domain = origins[origin]
        if refusal or (self.policy.max_url_length and len(url) > self.policy.max_url_length):
            return None
        weight = 0.5 if entry.priority is None else entry.priority  # the protocol's default
        priority = int(meta.get("priority", 1)) - 10 + round((weight - 0.5) * 10)
        record: dict[str, Any] = {**passthrough(meta), "url": url, "curdepth": 0, "priority": priority}
        record["sitemaps"] = None  # a listed page is no sitemap to read
        if entry.revisit_hint is not None:
            record["revisit_hint"] = entry.revisit_hint
        record = crawl_request.to_record(record)
        return NewRequest(
            spiderid=record["spiderid"], domain=domain, priority=record["priority"],
            appid=str(record["appid"]), crawlid=str(record["crawlid"]),
            **crawl_request.encode(record)._asdict(),
            fingerprint=None if moved else fingerprint(url), max_pages=int(record.get("domain_max_pages") or 0),
            expires=int(record.get("expires") or 0), dupefilter=str(record.get("dupefilter") or ""),
        )  # fmt: skip

    def _children(self, response: Response, fresh: list[tuple[Entry, bool]], depth: int, index_key: str,
                  counts: dict[str, Any]) -> Iterator[Request]:  # fmt: skip
        if depth >= self.max_depth:
            counts["too_deep"] = len(fresh)
            return
        meta = response.meta
        allowed = [(entry, moved) for entry, moved in fresh if crawl_filters_allow(meta, entry.url)]
        counts["filtered"], fresh = len(fresh) - len(allowed), allowed
        conditional = self._conditional(response, [entry.url for entry, _ in fresh])
        for (entry, moved), headers in zip(fresh, conditional, strict=True):
            counts["queued"] += 1
            cb_kwargs = {"sitemap_depth": depth + 1, "sitemap_index": index_key, "sitemap_lastmod": entry.lastmod}
            yield self._request(response, entry.url, cb_kwargs, moved, headers)

    # --- state -------------------------------------------------------------------------------------
    def _seen(self, key: str, urls: list[str]) -> list[Any]:
        """The lastmod each URL had at the last poll (None: never listed), a few commands for 50,000."""
        pipe = self.client.pipeline(transaction=False)
        for start in range(0, len(urls), CHUNK):
            pipe.hmget(key, urls[start : start + CHUNK])
        return [value for part in pipe.execute() for value in part]

    def _conditional(self, response: Response, urls: list[str]) -> list[dict[str, str]]:
        """If-None-Match / If-Modified-Since for each sitemap, from its last poll (one round trip)."""
        if not urls:
            return []
        meta = response.meta
        crawl = (str(meta.get("spiderid") or ""), str(meta.get("appid")), str(meta.get("crawlid")))
        pipe = self.client.pipeline(transaction=False)
        for url in urls:
            pipe.hmget(keys.sitemap_seen(*crawl, _id(url)), [ETAG, LAST_MODIFIED])
        return [{name: _text(value) for name, value in zip(("If-None-Match", "If-Modified-Since"), pair, strict=True)
                 if value} for pair in pipe.execute()]  # fmt: skip

    def _read_for_index(self, response: Response, kwargs: dict[str, Any]) -> None:
        """A sitemap of an index was read: the index's state now holds its lastmod. Until then (its
        fetch failed, the crawler died) every poll of the index queues it again."""
        index_key = kwargs.get("sitemap_index")
        if isinstance(index_key, str) and index_key.startswith(f"{response.meta.get('spiderid')}:crawl:"):
            pipe = self.client.pipeline(transaction=False)
            pipe.hset(index_key, _own_url(response), int(kwargs.get("sitemap_lastmod") or 0))
            pipe.expire(index_key, self.ttl)  # every key expires, this one too if the index's had
            pipe.execute()

    def _remember(self, key: str, fresh: list[tuple[Entry, bool]], response: Response) -> None:
        validators = {ETAG: _header(response, b"ETag"), LAST_MODIFIED: _header(response, b"Last-Modified")}
        pipe = self.client.pipeline(transaction=False)
        for start in range(0, len(fresh), CHUNK):
            pipe.hset(key, mapping={entry.url: entry.lastmod for entry, _ in fresh[start : start + CHUNK]})
        pipe.hset(key, mapping=validators)
        pipe.expire(key, self.ttl)
        pipe.execute()

    @staticmethod
    def _count(spiderid: str, url: str, counts: dict[str, Any]) -> None:
        for reason in ("over_limit", "other_host", "bad_lastmod", "filtered", "too_deep"):
            if counts.get(reason):
                record_dropped(spiderid, f"sitemap_{reason}", int(counts[reason]))
        if counts["error"] or counts["truncated"] or counts["over_limit"] or counts.get("too_deep"):
            log.warning("Sitemap read in part", extra={"url": url[:200], **counts})
        log.info("Sitemap polled", extra={"url": url[:200], "kind": counts["kind"], "queued": counts["queued"],
                                          "moved": counts["moved"], "unchanged": counts["unchanged"]})  # fmt: skip


def _robots_sitemaps(response: Response) -> list[str]:
    """The Sitemap lines of a robots.txt read as a page, else /sitemap.xml."""
    body = response.body[:524288] if response.status == 200 else b""
    found = list(ProtegoRobotParser(body, None).rp.sitemaps) if body else []
    return found or [response.urljoin("/sitemap.xml")]


def _own_url(response: Response) -> str:
    """The URL the sitemap was asked for (its state's name), whatever redirects it went through."""
    chain = response.meta.get("redirect_urls") or ()
    return str(chain[0]) if chain else (response.request.url if response.request is not None else response.url)


def _id(url: str) -> str:
    return fingerprint(url).hex()


def _header(response: Response, name: bytes) -> str:
    value = response.headers.get(name)
    return value.decode("latin-1")[:200] if value else ""


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value or "")
