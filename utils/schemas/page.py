"""The crawled-page message on `<prefix>.crawled_firehose`, as its readers (the sink, the warc
component, clients) may rely on it: Scrapy Cluster's fields, then Shoal's (docs/reference/answers.md).

A message is JSON with sorted keys; any field may be missing from an older or a failure message,
so readers use `.get`. The crawler builds it (crawler/page.py); a test checks that every key it
builds is named here.
"""

from __future__ import annotations

from typing import Any, TypedDict


class Link(TypedDict):
    url: str
    text: str


class PageMessage(TypedDict, total=False):
    # Scrapy Cluster 1.3
    url: str  # the URL requested (the first of a redirect chain)
    response_url: str  # the URL that answered
    status_code: int | None
    status_msg: str
    response_headers: dict[str, list[str]]  # names as Scrapy spells them, after content decoding
    request_headers: dict[str, list[str]]  # as sent, never Proxy-Authorization
    body: str | None  # text, or base64 with body_encoding
    encoding: str | None
    links: list[Link]
    appid: str
    crawlid: str
    attrs: dict[str, Any] | None
    timestamp: str  # UTC ISO-8601, no zone: when the message was sent
    # Shoal
    spiderid: str
    request_id: str | None
    attempt: int
    curdepth: int
    worker: str  # <host>:<pid> of the crawler process
    success: bool
    exception: str  # with success false
    body_encoding: str  # "base64"
    body_dropped: bool  # the body was over KAFKA_PRODUCER_MAX_REQUEST_SIZE and left out
    body_bytes: int  # with body_dropped: the size of the body that was left out
    response_headers_truncated: bool
    # Issue 35: what an archive needs
    # [name, value] lines in the order received, before decoding; absent when response_headers in order say it
    raw_response_headers: list[list[str]]
    http_version: str | None  # "HTTP/1.1"; None when no HTTP client fetched it (render spider)
    remote_address: str | None  # the peer's IP address
    fetch_time: str | None  # UTC ISO-8601, no zone: when the request went to the network
    # Issue 44: every fetch in the archive, as served
    redirects: list[dict[str, Any]]  # the answers of the redirects followed to this page, first first (answers.md)
    redirects_dropped: bool  # with body_dropped: `redirects` were over 1 MiB and left out too
    body_bom: str  # base64 of the byte-order mark served before a text body (its `encoding` leaves it out)
    method: str  # the request's method when not GET; always in a `redirects` entry and a robots.txt message
    # Issue 31: keeping data fresh
    not_modified: bool  # a 304 answering a revisit's validators: no body, the stored version stands
    revisit: dict[str, Any]  # the page's revisit policy (crawler/revisit.py) and the request fields to send again
    fingerprint: str  # a user's change fingerprint (e.g. price and stock): compared instead of the body
    sitemap: dict[str, Any]  # a sitemap's poll (crawler/sitemap_follow.py): kind, entries, queued, moved, counts
    revisit_hint: int  # seconds: the changefreq a sitemap gave the page (0 = never); a hint for the revisit loop
    # Pages ready for search and LLM pipelines: with a crawl's `extract` / `near_duplicates` (crawler/extraction.py)
    text: str  # the main content as plain text (navigation, footers, ads, cookie banners dropped)
    markdown: str  # the main content as Markdown: headings, lists, links, tables, code kept
    metadata: dict[str, Any]  # title, language, published, modified, authors, canonical_url, description, ...
    simhash: str  # 16 hex digits: the 64-bit SimHash of `text`
    extract_error: str  # extraction failed (timeout, memory, the extractor's error): the page arrives without it
    extract_truncated: bool  # the page was longer than EXTRACT_BYTES_MAX: only its start was extracted
    near_duplicate: bool  # the text is within NEAR_DUPLICATE_DISTANCE bits of a page the app already got
    duplicate_of: str  # with near_duplicate: the URL of the first page of its cluster
    cluster_id: str  # the SimHash of the first page of the cluster (its own for a first page)
    kept_out: bool  # a near-duplicate of a crawl with near_duplicates "skip": no sink row, no links followed


PAGE_FIELDS = frozenset(PageMessage.__annotations__)
