"""The request meta of a Shoal crawl: which keys travel from a page to the links found on it,
and the private keys that carry a request's lease and its outcome through Scrapy."""

from __future__ import annotations

from typing import Any

LEASE = "shoal_lease"  # the Lease a request was popped under (never passed to children)

# Keys of an item that the pipeline strips before sending the page.
SILENT = "shoal_silent"  # an item that settles a lease without sending a page (robots, retry)
OUTCOME = "shoal_outcome"  # the progress counter the lease is settled under
DETAILS = "shoal_details"  # what settling needs besides: the retry record, the dead-letter record
HEADERS_CUT = "shoal_headers_cut"  # response meta: the response's headers passed the bounds and were cut
RAW_HEADERS = "shoal_raw_headers"  # response meta: [name, value] lines as they came off the network (for WARC)
REDIRECTS = "shoal_redirects"  # request meta: the answers of the redirects followed to it (page.hop_message)
FETCHED_AT = "shoal_fetched_at"  # request meta: epoch seconds the request went to the network
EXTRACTED = "shoal_extracted"  # request meta: the page message's extraction fields (crawler/extraction.py)
NO_FOLLOW = "shoal_no_follow"  # request meta: follow none of the page's links (a kept-out near-duplicate, a trap)


class ShoalMessage(dict[str, Any]):
    """A message of Shoal's own (page, failure, lease outcome): it goes straight to the Kafka
    pipeline, never through users' ITEM_PIPELINES, which see only their spiders' items."""

    __slots__ = ()


# Crawl-level fields every child inherits. Scrapy Cluster passes every meta key; Shoal passes the
# crawl's own fields only, so Scrapy's internal keys never reach Redis. `method`, `headers`, `body`
# and `dont_filter` apply to seeds only (API.md).
INHERITED = (
    "appid",
    "crawlid",
    "spiderid",
    "maxdepth",
    "domain_max_pages",
    "allowed_domains",
    "allow_regex",
    "deny_regex",
    "deny_extensions",
    "expires",
    "useragent",
    "cookie",
    "attrs",
    "proxy",
    "proxy_labels",  # the labels of the pool proxies the crawl goes through (crawler/proxies.py)
    "dupefilter",
    "priority",
    "curdepth",
    "revisit",  # issue 31: every page of a revisited crawl is revisited
    "sitemaps",  # issue 31: a page of the crawl that is a sitemap is read as one (crawler/sitemap_follow.py)
    "extract",  # a page's main content, Markdown and metadata (crawler/extraction.py)
    "near_duplicates",  # flag or skip pages whose main text is a near-duplicate (crawler/extraction.py)
    "weight",  # the crawl's fair-queuing weight (utils/frontier/weights.py)
    "ladder_of",  # issue 33: a request moved to the render spider and its children count on that spider's ladder
)
# Stored when the request itself sets them: the wandering spider's step; a sitemap poll's conditional
# headers and a listed page's revisit_hint (seconds, from changefreq; crawler/sitemap_follow.py).
OWN = ("step", "headers", "revisit_hint")


def passthrough(meta: dict[str, Any]) -> dict[str, Any]:
    """The keys of a page's meta that its children inherit."""
    return {key: meta[key] for key in INHERITED if key in meta}


def record_fields(meta: dict[str, Any]) -> dict[str, Any]:
    """What a yielded request stores in the frontier from its (filled-in) meta."""
    fields = passthrough(meta)
    fields.update((key, meta[key]) for key in OWN if key in meta)
    return fields
