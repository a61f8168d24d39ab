"""A claimed revisit as a crawl request: the crawl's fields again, the validators, `refetch`, a lower priority."""

from __future__ import annotations

from typing import Any

from revisit.claims import Due
from utils import schemas

# Set here, whatever the page's request said; every other field of the crawl schema is carried again.
DECIDED = frozenset({"url", "appid", "crawlid", "spiderid", "priority", "maxdepth", "curdepth", "headers", "revisit",
                     "refetch", "uuid", "expires", "method", "body", "dont_filter"})  # fmt: skip


def crawl_request(row: Due, priority_drop: int) -> dict[str, Any]:
    """The request fed to `<prefix>.incoming`: its crawl's rules apply again (address policy, filters).

    Without `follow` it fetches the page only (maxdepth 0); with it, the depth the page had left.
    Its priority is the policy's, else its crawl's minus REVISIT_PRIORITY_DROP (never below 1).
    """
    known = row.request
    fields = schemas.schema("crawl")["properties"]
    request: dict[str, Any] = {k: v for k, v in known.items() if k in fields and k not in DECIDED and v is not None}
    policy = {k: v for k, v in row.policy.items() if v is not None or k == "pages"}
    depth_left = max(int(known.get("maxdepth") or 0) - int(known.get("curdepth") or 0), 0)
    priority = policy.get("priority") or max(int(known.get("priority") or 1) - priority_drop, 1)
    headers = {}
    if row.etag:
        headers["If-None-Match"] = row.etag
    if row.last_modified:
        headers["If-Modified-Since"] = row.last_modified
    request.update(
        url=row.url, appid=row.appid, crawlid=row.crawlid, spiderid=row.spiderid or "link", refetch=True,
        revisit=policy, priority=int(priority), maxdepth=depth_left if policy.get("follow") else 0,
    )  # fmt: skip
    if headers:
        request["headers"] = headers
    return request
