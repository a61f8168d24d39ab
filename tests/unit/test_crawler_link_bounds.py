"""Issue 30, findings 5 and 14: a page's links count after canonicalisation, cost bounded time and bytes,
and a crawl's thousands of regexes are matched as one RE2 set (no sockets)."""

from __future__ import annotations

import time

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.settings import Settings as ScrapySettings

from crawler.spider_output import crawl_filters_allow
from crawler.spiders.link import LinkBounds, LinkSpider, page_links
from utils import schemas
from utils.config.errors import InvalidMessage
from utils.config.safe_regex import InvalidRegex, any_search, check_regexes
from utils.config.settings import Settings

CONTENTS = "http://docs.test/contents.html"


def contents_page(anchors: int = 10_000, pages: int = 400) -> bytes:
    """The Python docs' contents.html shape: most anchors are fragments of a few hundred pages."""
    rows = "".join(f'<li><a href="library/p{i % pages}.html#sec-{i}">section {i}</a></li>\n' for i in range(anchors))
    return f"<html><head><title>Contents</title></head><body><ul>{rows}</ul></body></html>".encode()


def response_of(body: bytes, url: str = CONTENTS, **meta: object) -> HtmlResponse:
    request = Request(url, meta={"crawlid": "c1", "spiderid": "link", "maxdepth": 1, **meta})
    return HtmlResponse(url, body=body, request=request, encoding="utf-8")


def link_spider() -> LinkSpider:
    spider = LinkSpider()
    spider.settings = ScrapySettings({"SHOAL": Settings.load(environ={})})
    return spider


def test_every_distinct_page_of_a_contents_page_is_followed_once() -> None:
    """10,000 anchors of 400 pages under a 300-link cap: 300 pages followed, none twice, no fragment."""
    response = response_of(contents_page())
    links = page_links(response, LinkBounds(links=300))
    assert len(links) == 300
    assert len({link.url for link in links}) == 300
    assert all("#" not in link.url for link in links)
    assert links[0].url == "http://docs.test/library/p0.html"
    assert links[0].text == "section 0"


def test_the_link_spider_follows_every_page_of_a_big_honest_page_with_the_default_settings() -> None:
    """LINKS_PER_PAGE_MAX (10,000) is not spent on anchors: 12,000 anchors of 600 pages give 600 requests."""
    spider = link_spider()
    output = list(spider.parse(response_of(contents_page(anchors=12_000, pages=600))))
    followed = [entry.url for entry in output if isinstance(entry, Request)]
    assert sorted(followed) == sorted(f"http://docs.test/library/p{i}.html" for i in range(600))


def test_the_parse_stops_at_its_byte_bound_and_counts_the_anchors_left_out() -> None:
    body = contents_page(anchors=10_000, pages=10_000)
    cut = body.index(b'<li><a href="library/p5000.html')
    links = page_links(response_of(body), LinkBounds(parse_bytes=cut))
    assert len(links) == 5000


def test_a_hostile_page_of_one_repeated_anchor_costs_no_more_than_the_time_bound() -> None:
    body = b"<html><body>" + b'<a href="/same#x">s</a>' * 400_000  # 9 MB, one link
    started = time.process_time()  # CPU seconds: the bound holds on a loaded machine too
    links = page_links(response_of(body), LinkBounds(links=10_000, parse_seconds=0.3))
    assert time.process_time() - started < 1.5  # the whole body takes ~4 s to parse here
    assert [link.url for link in links] == ["http://docs.test/same"]


def test_links_resolve_against_the_pages_base_in_every_piece() -> None:
    """The page is parsed in 256 KiB pieces: a <base href> in its head applies to the last piece too."""
    rows = "".join(f'<a href="p{i}.html">{i}</a>' for i in range(30_000))  # ~600 KB
    body = f'<html><head><base href="http://mirror.test/docs/"></head><body>{rows}</body></html>'.encode()
    links = page_links(response_of(body), LinkBounds(links=0))
    assert len(links) == 30_000
    assert links[-1].url == "http://mirror.test/docs/p29999.html"


SIX_THOUSAND = [f"/p{i}x/" for i in range(6000)]


def test_six_thousand_patterns_cost_one_pass_per_link() -> None:
    """Issue 30: 6,000 allow_regex patterns took 116-158 ms per link tried one by one."""
    rows = "".join(f'<a href="/p{i}x/">{i}</a>' for i in range(0, 12_000, 3))
    response = response_of(f"<html><body>{rows}</body></html>".encode(), allow_regex=SIX_THOUSAND)
    started = time.process_time()
    links = page_links(response)
    assert time.process_time() - started < 2.0  # 4,000 links; ~8 minutes pattern by pattern
    assert len(links) == 2000  # /p0x/ ... /p5997x/ by threes


def test_a_set_keeps_each_patterns_search_semantics_and_deny_wins() -> None:
    response = response_of(
        b'<a href="/a/1">1</a><a href="/b/2">2</a><a href="/c/3">3</a><a href="/a/secret">s</a>',
        allow_regex=["^http://docs\\.test/a/", "/b/"], deny_regex=["secret", "(?i)NOPE"],
    )
    assert [link.url for link in page_links(response)] == ["http://docs.test/a/1", "http://docs.test/b/2"]
    assert any_search(["x", "[0-9]+$"], "abc123")
    assert not any_search(["^b"], "abc")
    assert not any_search([], "abc")


@pytest.mark.parametrize("bad", ["(a", "(a)\\1", "(?=x)"])
def test_a_list_with_one_pattern_re2_refuses_is_refused_with_re2s_reason(bad: str) -> None:
    with pytest.raises(InvalidRegex, match="missing|invalid"):
        check_regexes(["ok", bad])


def test_users_spiders_filter_with_the_same_sets() -> None:
    """FollowPolicyMiddleware's filters: RE2 sets too (Python's re froze on `(a+)+$`)."""
    meta = {"allow_regex": ["(a+)+$", "keep"], "deny_regex": SIX_THOUSAND}
    started = time.process_time()
    assert not crawl_filters_allow(meta, "http://a.test/" + "a" * 5000 + "b")
    assert crawl_filters_allow(meta, "http://a.test/keep")
    assert not crawl_filters_allow(meta, "http://a.test/keep/p42x/")
    assert time.process_time() - started < 1.0
    assert not crawl_filters_allow({"allow_regex": ["(a)\\1"]}, "http://a.test/aa")


@pytest.mark.parametrize("field", ["allow_regex", "deny_regex"])
def test_the_crawl_schema_bounds_a_regex_list_by_count_and_pattern_length(field: str) -> None:
    """Issue 30: 6,000 patterns were accepted; now at most 1,000 of at most 256 characters (256,000 in all)."""
    base = {"url": "http://a.test/", "appid": "testapp", "crawlid": "c1"}
    most = [f"/p{i}/" + "x" * 240 for i in range(1000)]
    assert schemas.validate("crawl", {**base, field: most})[field] == most
    check_regexes(most)  # and the largest list the schema lets through compiles as one set
    for refused in (SIX_THOUSAND, [*most[:999], "/p/" + "x" * 254], [f"/p{i}x/" for i in range(1001)]):
        with pytest.raises(InvalidMessage) as info:
            schemas.validate("crawl", {**base, field: refused})
        assert field in (info.value.cause or "")
