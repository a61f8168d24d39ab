"""Between Scrapy requests and the frontier's stored requests."""

from __future__ import annotations

import re
from typing import Any

from scrapy import Request, Spider
from scrapy.utils.httpobj import urlparse_cached

from crawler.meta import INHERITED, LEASE, OWN, record_fields
from utils.frontier import Lease, NewRequest, crawl_request
from utils.frontier.domains import host_domain
from utils.frontier.fingerprint import fingerprint

_COOKIE_PAIR = re.compile(r"([^=;\s][^=;]*)=([^;]*)")


class UnstorableRequest(ValueError):
    """A yielded request the frontier cannot store (its cb_kwargs are not JSON)."""


def parse_cookie(cookie: str | dict[str, str] | None) -> dict[str, str]:
    """Scrapy Cluster's cookie string `k=v; k2=v2` as a dict (a dict is taken as it is)."""
    if not cookie:
        return {}
    if isinstance(cookie, dict):
        return dict(cookie)
    return {k.strip(): v.strip() for k, v in _COOKIE_PAIR.findall(cookie)}


def request_from_lease(lease: Lease, spider: Spider) -> Request:
    """The Scrapy request of a leased record; the lease rides along in meta until settled."""
    rec = crawl_request.from_record(lease.record)
    headers = dict(rec.get("headers") or {})
    if rec.get("useragent"):
        headers["User-Agent"] = rec["useragent"]
    meta: dict[str, Any] = {key: rec[key] for key in INHERITED if key in rec}
    meta.update(request_id=rec["request_id"], attempt=rec.get("attempt", 0), url=rec["url"], ts=rec.get("ts"))
    meta.update((key, rec[key]) for key in OWN if key in rec)
    meta[LEASE] = lease
    if rec.get("proxy"):
        meta["proxy"] = rec["proxy"]
    callback = getattr(spider, rec.get("callback") or "parse")
    return Request(
        rec["url"],
        method=rec.get("method") or "GET",
        headers=headers,
        body=rec.get("body"),
        cookies=dict(parse_cookie(rec.get("cookie"))),  # type: ignore[arg-type]
        meta=meta,
        callback=callback,
        cb_kwargs=rec.get("cb_kwargs") or {},
        errback=getattr(spider, "errback", None),
        dont_filter=True,  # the frontier's dupefilter already ran
    )


def child_key(request: Request, spider: Spider) -> tuple[str, str, str, bytes] | None:
    """(spiderid, appid, crawlid, fingerprint) of a yielded request; None when it is not dupefiltered."""
    if request.dont_filter:
        return None
    meta = request.meta
    spiderid = meta.get("spiderid") or spider.name
    return (
        spiderid,
        str(meta.get("appid")),
        str(meta.get("crawlid")),
        fingerprint(request.url, request.method, request.body),
    )


def new_request(
    request: Request, spider: Spider, drop_domains: frozenset[str] = frozenset(), fp: bytes | None = None
) -> NewRequest | None:
    """The frontier entry of a request a spider yielded; None if it has no host to queue under.

    A request for a domain in `drop_domains` (ZooKeeper blacklist, when the backlog may not hold
    it) is refused by the enqueue script and counted as `dropped_blacklist`. `fp` is its
    fingerprint when already computed.
    """
    meta = request.meta
    domain = host_domain(urlparse_cached(request).hostname or "")  # the parse Scrapy caches anyway
    if not domain:
        return None
    record: dict[str, Any] = record_fields(meta)
    record.update(url=request.url, spiderid=meta.get("spiderid") or spider.name)
    record.setdefault("priority", 1)
    record.setdefault("curdepth", 0)
    if request.method != "GET":
        record["method"] = request.method
        if request.body:
            record["body"] = request.body.decode("utf-8", "replace")
    if request.callback is not None and getattr(request.callback, "__name__", "parse") != "parse":
        record["callback"] = request.callback.__name__
    if request.cb_kwargs:
        record["cb_kwargs"] = request.cb_kwargs
    record = crawl_request.to_record(record)
    try:
        stored = crawl_request.encode(record)
    except (TypeError, ValueError, OverflowError) as exc:
        raise UnstorableRequest(f"{request.url}: cb_kwargs and meta must be JSON values ({exc})") from None
    if fp is None and not request.dont_filter:
        fp = fingerprint(request.url, request.method, request.body)
    return NewRequest(
        spiderid=record["spiderid"],
        domain=domain,
        priority=int(record["priority"]),
        appid=str(record["appid"]),
        crawlid=str(record["crawlid"]),
        payload=stored.payload,
        profile=stored.profile,
        fingerprint=fp,
        max_pages=int(record.get("domain_max_pages") or 0),
        expires=int(record.get("expires") or 0),
        dupefilter=str(record.get("dupefilter") or ""),
        drop="blacklist" if domain in drop_domains else "",
    )
