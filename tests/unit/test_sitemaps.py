"""Reading sitemaps within bounds (crawler/sitemaps.py, issue 31): the protocol's limits, and hostile
files (entity expansion, external entities, a 10 GiB gzip, other hosts, a lastmod in year 9999)
that end in a clear error or are bounded and counted, quickly."""

from __future__ import annotations

import gzip

from scrapy.http import Response

from crawler.blocks import BlockDetector
from crawler.sitemap_follow import _robots_sitemaps
from crawler.sitemaps import CHANGEFREQ_SECONDS, parse_lastmod, read_sitemap
from utils.demosite.sitemaps import SitemapSet

NOW = 1_750_000_000.0
NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def urlset(rows: str) -> bytes:
    return f'<?xml version="1.0"?><urlset xmlns="{NS}">{rows}</urlset>'.encode()


def test_an_index_and_its_gzip_parts_from_the_demo_site_read_whole() -> None:
    sitemaps = SitemapSet("127.0.0.1:8000", files=2, per_file=1000)
    index = read_sitemap(sitemaps.answer("/sitemap_index.xml")[2], sitemaps.index_url, now=NOW)  # type: ignore[index]
    assert index.kind == "sitemapindex"
    assert [e.url for e in index.entries] == [sitemaps.part_url(0), sitemaps.part_url(1)]
    part = read_sitemap(sitemaps.answer("/sitemaps/part-1.xml.gz")[2], sitemaps.part_url(1), now=NOW)  # type: ignore[index]
    assert part.kind == "urlset"
    assert len(part.entries) == 1000
    assert part.entries[0].url == sitemaps.url(1000)
    assert part.entries[0].lastmod == 1_700_000_000 + 1000
    assert part.entries[0].revisit_hint == CHANGEFREQ_SECONDS["daily"]


def test_the_first_50000_urls_are_kept_and_the_rest_counted() -> None:
    rows = "".join(f"<url><loc>http://h/p/{i}</loc><priority>0.8</priority></url>" for i in range(50_100))
    sitemap = read_sitemap(gzip.compress(urlset(rows)), "http://h/sitemap.xml.gz", now=NOW)
    assert len(sitemap.entries) == 50_000
    assert sitemap.entries[-1].url == "http://h/p/49999"
    assert sitemap.entries[0].priority == 0.8
    assert sitemap.over_limit == 100


def test_an_entity_expansion_bomb_ends_in_a_clear_error_at_once() -> None:
    levels = "".join(f'<!ENTITY l{n} "{f"&l{n - 1};" * 10}">' for n in range(1, 10))
    bomb = f'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY l0 "lol">{levels}]>'.encode()
    bomb += urlset("<url><loc>http://h/&l9;</loc></url>")[len('<?xml version="1.0"?>') :]
    sitemap = read_sitemap(bomb, "http://h/sitemap.xml", now=NOW)
    assert sitemap.entries == []
    assert sitemap.error.startswith("malformed XML")
    assert "amplification" in sitemap.error


def test_an_external_entity_is_never_read() -> None:
    body = b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    body += urlset("<url><loc>http://h/a&x;</loc></url><url><loc>http://h/b</loc></url>")[
        len('<?xml version="1.0"?>') :
    ]
    sitemap = read_sitemap(body, "http://h/sitemap.xml", now=NOW)
    assert [e.url for e in sitemap.entries] == ["http://h/a", "http://h/b"]
    assert "root:" not in repr(sitemap)


def test_a_10_gib_gzip_is_read_no_further_than_50_mib() -> None:
    member = gzip.compress(b"<url><loc>http://h/x</loc></url>" * (8 << 20 >> 5), 9)  # 8 MiB of XML each
    body = gzip.compress(urlset("")[:-9]) + member * 1280  # a multi-member gzip: 10 GiB of XML in ~31 MB
    sitemap = read_sitemap(body, "http://h/sitemap.xml.gz", max_urls=1000, now=NOW)
    assert sitemap.truncated
    assert len(sitemap.entries) == 1000
    # every entry of the first 50 MiB counted (less the root tag and the entry cut at the bound), none past it
    assert 0 <= (50 << 20) // 32 - 1000 - sitemap.over_limit <= 4


def test_urls_of_other_hosts_and_schemes_are_dropped_and_counted() -> None:
    rows = "".join(f"<url><loc>{u}</loc></url>" for u in (
        "http://h/ok", "http://H:80/case", "/relative", "http://evil.example/x", "https://h.evil/x", "ftp://h/x",
        "javascript:alert(1)"))  # fmt: skip
    sitemap = read_sitemap(urlset(rows), "http://h/sitemap.xml", now=NOW)
    assert [e.url for e in sitemap.entries] == ["http://h/ok", "http://H:80/case", "http://h/relative"]
    assert sitemap.other_host == 4


def test_a_lastmod_in_year_9999_or_unreadable_is_ignored_and_counted() -> None:
    rows = (
        "<url><loc>http://h/a</loc><lastmod>9999-12-31</lastmod></url>"
        "<url><loc>http://h/b</loc><lastmod>yesterday</lastmod></url>"
        "<url><loc>http://h/c</loc><lastmod>2024-02-30</lastmod></url>"
        "<url><loc>http://h/d</loc><lastmod>2024-05-01T10:00:00+02:00</lastmod></url>"
    )
    sitemap = read_sitemap(urlset(rows), "http://h/sitemap.xml", now=NOW)
    assert [e.lastmod for e in sitemap.entries] == [0, 0, 0, 1714550400]
    assert sitemap.bad_lastmod == 3


def test_lastmod_forms_of_the_w3c_datetime_note() -> None:
    assert parse_lastmod("2024", NOW) == 1704067200
    assert parse_lastmod("2024-03", NOW) == 1709251200
    assert parse_lastmod("2024-03-01T00:00Z", NOW) == 1709251200
    assert parse_lastmod("2024-03-01T01:30:00.5+01:30", NOW) == 1709251200
    assert parse_lastmod("2024-03-01T00:00:00-0100", NOW) == 1709254800
    assert parse_lastmod(" 2025-06-15 ", NOW) == 1749945600
    assert parse_lastmod("2025-06-17", NOW) is None  # more than a day ahead of NOW


def test_a_text_sitemap_a_page_that_is_no_sitemap_and_a_cut_file() -> None:
    text = read_sitemap(b"http://h/a\r\nhttp://h/b\n\nhttp://x/c\n", "http://h/sitemap.txt", now=NOW)
    assert (text.kind, [e.url for e in text.entries], text.other_host) == ("text", ["http://h/a", "http://h/b"], 1)
    assert read_sitemap(b"<!DOCTYPE html><html><body>404</body></html>", "http://h/sitemap.xml").kind == ""
    assert read_sitemap(b"\x1f\x8bnot gzip at all", "http://h/sitemap.xml.gz").error.startswith("corrupt gzip")
    cut = read_sitemap(urlset("<url><loc>http://h/a</loc></url><url><loc>http://h/b</loc></url>")[:-30], "http://h/s")
    assert [e.url for e in cut.entries] == ["http://h/a"]
    assert cut.error.startswith("malformed XML")


def test_an_index_listing_itself_is_read_as_any_index() -> None:
    body = f'<sitemapindex xmlns="{NS}"><sitemap><loc>http://h/index.xml</loc></sitemap></sitemapindex>'.encode()
    sitemap = read_sitemap(body, "http://h/index.xml", now=NOW)
    assert sitemap.kind == "sitemapindex"
    assert [e.url for e in sitemap.entries] == ["http://h/index.xml"]  # the follower's state and depth bound it


def test_a_small_sitemap_index_after_large_gzip_sitemaps_is_no_block() -> None:
    """The block detector (issue 33) judges the size of HTML pages only: an index of a few hundred
    bytes after 40 KB gzip parts is a sitemap, not a site pushing back."""
    detector = BlockDetector(frozenset({403, 429, 503}), (), 0.1, 3)
    for k in range(5):
        part = Response(
            f"http://h/part-{k}.xml.gz", body=b"\x1f\x8b" * 20_000, headers={"Content-Type": "application/gzip"}
        )
        assert detector.detect(part, "h") is None
    index = Response("http://h/index.xml", body=b"<sitemapindex/>", headers={"Content-Type": "application/xml"})
    assert detector.detect(index, "h") is None


def test_robots_txt_read_as_a_page_names_its_sitemaps_else_sitemap_xml() -> None:
    """Without ROBOTSTXT_OBEY the crawl fetches robots.txt itself; its Sitemap lines are the sitemaps."""
    robots = b"User-agent: *\nDisallow: /x/\nSitemap: https://h.test/a.xml\nsitemap: /b.xml.gz\n"
    assert _robots_sitemaps(Response("https://h.test/robots.txt", body=robots)) == [
        "https://h.test/a.xml",
        "/b.xml.gz",  # joined to the robots.txt's URL when followed
    ]
    assert _robots_sitemaps(Response("https://h.test/robots.txt", body=b"User-agent: *\n")) == [
        "https://h.test/sitemap.xml"
    ]
    assert _robots_sitemaps(Response("https://h.test/robots.txt", status=404, body=robots)) == [
        "https://h.test/sitemap.xml"
    ]
