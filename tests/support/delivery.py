"""The delivery rules a crawl under faults must keep (the ones tests/e2e/test_chaos.py set):
every expected page arrives and nothing else, each request is counted once in its crawl's
progress, and every duplicate is an at-least-once one a lease explains: the copies of a URL share
the request id and differ in `attempt` (sent, not acknowledged, reaped, crawled again)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any


def explain_duplicates(pages: list[dict[str, Any]]) -> tuple[int, list[str]]:
    """(duplicates explained by a re-queued lease, descriptions of the unexplained ones)."""
    by_url: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for page in pages:
        by_url[page["url"]].append(page)
    explained, unexplained = 0, []
    for url, copies in by_url.items():
        if len(copies) == 1:
            continue
        ids = {p["request_id"] for p in copies}
        attempts = [p["attempt"] for p in copies]
        if len(ids) == 1 and len(set(attempts)) == len(attempts):
            explained += len(copies) - 1  # one lease each: sent, not acknowledged, reaped, crawled again
        else:
            unexplained.append(f"{url}: request ids {sorted(ids)}, attempts {attempts}")
    return explained, unexplained


def check_delivery(pages: list[dict[str, Any]], expected: set[str], counts: dict[str, int]) -> str:
    """Assert the rules for one crawl's `pages` (its firehose messages) against the URLs `expected`
    and its final progress `counts`; returns a one-line summary."""
    assert {p["url"] for p in pages} == expected, {p["url"] for p in pages} ^ expected  # every page, nothing else
    assert counts.get("crawled", 0) == len(expected), counts  # each request counted once
    assert (counts.get("inflight", 0), counts.get("queued", 0)) == (0, 0), counts
    assert counts.get("dead", 0) == 0, counts  # no dead letter from a healed fault
    explained, unexplained = explain_duplicates(pages)
    assert not unexplained, unexplained
    return (f"{len(expected)} pages, lost 0, duplicates {explained} (all re-queued leases), "
            f"reaped {counts.get('reaped', 0)}")  # fmt: skip
