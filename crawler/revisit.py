"""The revisit block of a page message (issue 31): the 304 flag, and the policy the sink schedules by.

A 304 answers a revisit's If-None-Match/If-Modified-Since: it goes to the sink as a page flagged
`not_modified`, without a body, so the stored version stays and only the schedule moves. A page
whose request carries `revisit` (the crawl's, inherited by every child) gets the policy resolved
for it: settings < the domain's ZooKeeper `revisit` < the crawl's < the spider's `revisit_policy`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from scrapy.http import Response
from scrapy.utils.httpobj import urlparse_cached

from utils.frontier.domain_config import DomainConfig
from utils.frontier.revisit_policy import RevisitPolicy

# The crawl's fields a revisit request carries again (with the URL and its validators).
REQUEST_FIELDS = ("spiderid", "maxdepth", "allowed_domains", "allow_regex", "deny_regex", "deny_extensions",
                  "useragent", "cookie", "attrs", "proxy", "proxy_labels", "dupefilter", "priority", "curdepth",
                  "sitemaps", "extract", "near_duplicates")  # fmt: skip


class RevisitHook(Protocol):
    """A user spider's override: the policy for this response, or None to never revisit it."""

    def __call__(self, response: Response, policy: RevisitPolicy) -> RevisitPolicy | None: ...


def revisit_fields(
    response: Response, url: str, base: RevisitPolicy, hook: RevisitHook | None = None,
    domain_config: Callable[[], DomainConfig] | None = None,
) -> dict[str, Any]:
    """`not_modified` for a 304; `revisit` (policy and request fields) for a page its crawl revisits."""
    fields: dict[str, Any] = {}
    if response.status == 304:
        fields.update(not_modified=True, body=None, encoding=None)
        fields.pop("body_encoding", None)
    meta = response.meta
    requested = meta.get("revisit")
    if requested is None:
        return fields
    host = urlparse_cached(response).hostname or ""
    policy: RevisitPolicy | None = base.merged(domain_config().revisit(host) if domain_config else None)
    policy = policy.merged(requested) if policy else None
    hint = meta.get("revisit_hint")  # a sitemap's changefreq, seconds (crawler/sitemaps.py); 0 = never
    if policy is not None and isinstance(hint, int | float) and "interval" not in requested:
        policy = policy.merged({"interval": float(hint)}) if hint > 0 else None
    if policy is not None and hook is not None:
        policy = hook(response, policy)
    if policy is None or not policy.covers(url):
        return fields
    request = {name: meta[name] for name in REQUEST_FIELDS if meta.get(name) is not None}
    fields["revisit"] = {**policy.as_message(), "request": request}
    return fields
