"""The spiders and request conversions on fixed pages, no sockets (reference §13.1 test_link_spider)."""

from __future__ import annotations

import base64
import json

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, Response
from scrapy.settings import Settings as ScrapySettings

from crawler.conversion import new_request, parse_cookie, request_from_lease
from crawler.meta import LEASE
from crawler.middlewares import MetaPassthroughMiddleware
from crawler.spiders.link import LinkSpider, page_links
from crawler.spiders.wandering import WanderingSpider
from utils.config.settings import Settings
from utils.frontier import Lease, crawl_request

BASE = "http://drudge.com/index.html"
PAGE = b"""<html><body>
<a href="http://www.foxnews.com/a.html">shock news</a>
<a href="http://video.foxnews.com/b">video</a>
<a href="http://www.cnn.com/c.html">cnn</a>
<a href="http://edition.cnn.com/d">edition</a>
<a href="http://example.org/report.pdf">report</a>
<a href="http://example.org/image.jpg">image</a>
<a href="http://example.org/page.html">page</a>
<a href="/relative/e.html">relative</a>
<a href="http://www.foxnews.com/shocking.html">more</a>
<a href="mailto:editor@drudge.com">mail</a>
</body></html>"""


def spider(cls: type = LinkSpider) -> LinkSpider:
    instance = cls()
    instance.settings = ScrapySettings({"SHOAL": Settings.load(environ={})})
    return instance


def crawl_page(meta: dict, cls: type = LinkSpider, body: bytes = PAGE) -> tuple[list[dict], list[Request]]:
    request = Request(BASE, meta={"appid": "app", "crawlid": "c1", "attrs": None, **meta})
    response = HtmlResponse(BASE, body=body, request=request, encoding="utf-8")
    output = list(spider(cls).parse(response))
    return [o for o in output if isinstance(o, dict)], [o for o in output if isinstance(o, Request)]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"maxdepth": 0}, 0),  # depth limit: the page only
        ({}, 7),  # pdf, jpg (Scrapy's IGNORED_EXTENSIONS) and mailto are never followed
        ({"allowed_domains": ["foxnews.com"]}, 3),  # subdomains included
        ({"allow_regex": [".*shock.*"]}, 1),  # matched against the URL, not the text
        ({"deny_regex": [".*cnn.*"]}, 5),
        ({"allow_regex": [".*foxnews.*"], "deny_regex": [".*shock.*"]}, 2),  # deny wins
        ({"deny_extensions": ["html"]}, 4),
        ({"deny_extensions": []}, 9),
    ],
)
def test_link_extraction_counts_on_a_fixed_page(filters: dict, expected: int) -> None:
    meta = {"curdepth": 0, "maxdepth": 1, "priority": 50, **filters}
    items, requests = crawl_page(meta)
    assert len(items) == 1
    assert len(requests) == expected
    assert [link["url"] for link in items[0]["links"]] == [r.url for r in requests]
    assert all(r.meta == {"curdepth": 1, "priority": 40} for r in requests)


def test_a_page_at_maxdepth_lists_no_links() -> None:
    items, requests = crawl_page({"curdepth": 2, "maxdepth": 2})
    assert requests == []
    assert items[0]["links"] == []


def test_the_wandering_spider_follows_one_random_link_and_counts_its_steps() -> None:
    items, requests = crawl_page({"step": 4, "attrs": {"k": "v"}}, WanderingSpider)
    assert len(items) == 1
    assert len(requests) == 1
    assert items[0]["attrs"] == {"k": "v", "step": 4}
    assert requests[0].meta == {"step": 5}
    empty_items, none = crawl_page({}, WanderingSpider, body=b"<html><body>no links</body></html>")
    assert none == []
    assert empty_items[0]["attrs"] == {"step": 0}


def test_meta_passthrough_fills_only_what_a_child_does_not_set() -> None:
    parent = Request(BASE, meta={"appid": "app", "crawlid": "c1", "spiderid": "link", "attrs": {"a": 1},
                                 "download_latency": 0.2, LEASE: object(), "priority": 5})  # fmt: skip
    response = HtmlResponse(BASE, body=b"", request=parent)
    child = Request("http://a.com/", meta={"spiderid": "wandering", "priority": 1})
    (out,) = MetaPassthroughMiddleware().process_spider_output(response, [child])
    assert out.meta == {"appid": "app", "crawlid": "c1", "spiderid": "wandering", "attrs": {"a": 1}, "priority": 1}


def lease_of(**fields) -> Lease:
    record = crawl_request.to_record({"appid": "app", "crawlid": "c1", "spiderid": "link", "priority": 7, **fields})
    member = "0005e4a1b2c3d0001"  # a 16-digit request id, then crawl code 1
    stored = crawl_request.encode(record)
    restored = crawl_request.restore("1" + stored.payload, stored.profile, "link", "app", "c1", member)
    return Lease("link", "a.com", member, restored)


def test_a_seed_keeps_its_method_headers_body_proxy_cookie_and_useragent() -> None:
    lease = lease_of(
        url="http://a.com/form", method="POST", headers={"X-Token": "t1"}, body="q=1",
        proxy="http://127.0.0.1:3128", cookie="session=abc; theme=dark", useragent="ShoalTest/1.0",
    )  # fmt: skip
    request = request_from_lease(lease, spider())
    assert (request.method, request.body) == ("POST", b"q=1")
    assert request.headers[b"X-Token"] == b"t1"
    assert request.headers[b"User-Agent"] == b"ShoalTest/1.0"
    assert request.cookies == {"session": "abc", "theme": "dark"}
    assert request.meta["proxy"] == "http://127.0.0.1:3128"
    assert request.meta[LEASE] is lease
    assert request.meta["request_id"] == lease.request_id[:16]
    assert request.errback is not None


def test_a_child_stores_the_crawl_fields_its_step_and_the_reason_to_refuse_it() -> None:
    child = Request("http://www.b.com/x", meta={"appid": "app", "crawlid": "c1", "priority": 3, "curdepth": 2,
                                                 "expires": 1999999999, "dupefilter": "bloom", "step": 2,
                                                 "download_latency": 1.0})  # fmt: skip
    entry = new_request(child, spider(), drop_domains=frozenset({"b.com"}))
    assert entry is not None
    assert (entry.domain, entry.priority, entry.expires, entry.dupefilter, entry.drop) == (
        "b.com", 3, 1999999999, "bloom", "blacklist",
    )  # fmt: skip
    stored = crawl_request.decode(entry.payload, entry.profile)
    assert (stored["step"], stored["expires"], stored["curdepth"]) == (2, 1999999999, 2)
    assert json.loads(entry.profile) == {"dupefilter": "bloom", "expires": 1999999999}  # the crawl's, kept once
    assert "download_latency" not in stored
    assert new_request(Request("http://b.com/y", meta={"appid": "a", "crawlid": "c"}, dont_filter=True),
                       spider()).fingerprint is None  # fmt: skip


def test_cookie_strings_parse_as_scrapy_clusters() -> None:
    assert parse_cookie("blah=stuff; expires=Thu, 01 Jan 1970; path=/; Domain=.domain.com") == {
        "blah": "stuff", "expires": "Thu, 01 Jan 1970", "path": "/", "Domain": ".domain.com",
    }  # fmt: skip


def test_a_binary_body_is_sent_base64() -> None:
    request = Request("http://a.com/f.pdf", meta={"appid": "app", "crawlid": "c1"})
    response = Response("http://a.com/f.pdf", body=b"%PDF\x00\xff", request=request)
    (item,) = [o for o in spider().parse(response) if isinstance(o, dict)]
    assert item["body_encoding"] == "base64"
    assert base64.b64decode(item["body"]) == b"%PDF\x00\xff"


def test_a_page_of_many_links_is_parsed_only_up_to_the_cap() -> None:
    anchors = "".join(f'<A href="/p{i}">{i}</A><area href="/m{i}">' for i in range(500))
    html = f"<html><body>{anchors}</body></html>"
    response = HtmlResponse("http://capped.test/", body=html.encode(), request=Request("http://capped.test/"))
    kept = page_links(response, limit=30)
    assert [link.url for link in kept] == [f"http://capped.test/{k}{i}" for i in range(15) for k in "pm"]
    assert len(page_links(response)) == 1000
    assert len(page_links(response, limit=5000)) == 1000
