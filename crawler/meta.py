"""The request meta of a Shoal crawl: which keys travel from a page to the links found on it."""

from __future__ import annotations

from typing import Any

LEASE = "shoal_lease"  # the Lease a request was popped under (never passed to children)

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
    "dupefilter",
    "priority",
    "curdepth",
)


def passthrough(meta: dict[str, Any]) -> dict[str, Any]:
    """The keys of a page's meta that its children inherit."""
    return {key: meta[key] for key in INHERITED if key in meta}
