"""The demo site generator: deterministic, fully linked, and honest about what a crawler will fetch."""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest

from utils.demosite import DISALLOWED_PREFIX, PDF_PATH, Site, generate_site
from utils.demosite.generator import MAX_LINKS, MIN_LINKS


class _Anchors(HTMLParser):
    """Collects (href, text) of every <a> in document order, entities decoded."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.anchors: list[tuple[str, str]] = []
        self._open: list[str] | None = None
        self._href = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href") or ""
            self._open = []

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self.anchors.append((self._href, "".join(self._open)))
            self._open = None


@pytest.fixture(scope="module")
def site() -> Site:
    """Build the default `make run` shape once: 3 hosts × 200 pages."""
    return generate_site()


def _anchors(body: bytes) -> list[tuple[str, str]]:
    parser = _Anchors()
    parser.feed(body.decode("utf-8"))
    parser.close()
    return parser.anchors


def _html_urls(site: Site) -> list[str]:
    return [url for url, page in site.pages.items() if page.status == 200 and "html" in page.content_type]


def _robots_urls(site: Site) -> set[str]:
    return {f"http://{host}/robots.txt" for host in site.hosts}


def test_same_seed_gives_identical_site() -> None:
    """Tests and benchmarks compare runs, so a seed must pin every byte."""
    first, second = generate_site(seed=7), generate_site(seed=7)
    assert first.pages == second.pages


def test_other_seed_gives_other_pages() -> None:
    """The seed really drives the content."""
    assert generate_site(seed=1).pages != generate_site(seed=2).pages


def test_hosts_are_distinct_loopback_addresses() -> None:
    """Each host is its own domain for per-domain queues and throttles."""
    site = generate_site(hosts=4, pages_per_host=20, base_ip_octet=30, port=9000)
    assert site.hosts == ["127.0.0.30:9000", "127.0.0.31:9000", "127.0.0.32:9000", "127.0.0.33:9000"]
    assert site.seed_urls() == [f"http://{host}/" for host in site.hosts]


def test_every_url_reachable_at_high_depth_when_ignoring_robots(site: Site) -> None:
    """Every served or linked URL but robots.txt is found from the seeds."""
    found = site.reachable(site.seed_urls(), max_depth=len(site.pages), obey_robots=False)
    assert set(found) == set(site.pages) - _robots_urls(site)


def test_robots_obeyed_excludes_exactly_private(site: Site) -> None:
    """/private/ pages exist and are linked, but a polite crawler never requests them."""
    found = site.reachable(site.seed_urls(), max_depth=len(site.pages))
    private = {url for url in site.pages if urlsplit(url).path.startswith(DISALLOWED_PREFIX)}
    assert private
    assert all(site.pages[url].status == 200 for url in private)
    assert set(found) == set(site.pages) - _robots_urls(site) - private
    assert site.expected_page_count() == len(found)
    assert site.expected_page_count(obey_robots=False) == len(found) + len(private)


def test_one_seed_reaches_every_host(site: Site) -> None:
    """Cross-host links make a single seed enough to cover the whole site."""
    found = site.reachable(site.seed_urls()[:1], max_depth=len(site.pages))
    assert {urlsplit(url).netloc for url in found} == set(site.hosts)


def test_depth_semantics(site: Site) -> None:
    """Seeds are depth 0 and a page at depth d has its links followed iff d < max_depth."""
    seeds = site.seed_urls()
    assert site.reachable(seeds, max_depth=0) == dict.fromkeys(seeds, 0)
    first = site.reachable(seeds, max_depth=1)
    expected = set(seeds) | {link for seed in seeds for link in site.pages[seed].links}
    assert set(first) == expected
    deep = site.reachable(seeds, max_depth=3)
    assert max(deep.values()) == 3
    assert set(first) <= set(deep)
    for url, depth in deep.items():
        if depth:
            assert any(d == depth - 1 and url in site.pages[p].links for p, d in deep.items())


def test_allowed_hosts_and_deny_extensions(site: Site) -> None:
    """Filters mirror allowed_domains and LinkExtractor's deny_extensions."""
    host = site.hosts[0]
    same_host = site.reachable(site.seed_urls()[:1], max_depth=50, allowed_hosts=[host.split(":")[0]])
    assert {urlsplit(url).netloc for url in same_host} == {host}
    no_pdf = site.reachable(site.seed_urls(), max_depth=50, deny_extensions=["pdf"])
    assert not any(url.endswith(".pdf") for url in no_pdf)
    assert f"http://{host}{PDF_PATH}" in site.reachable(site.seed_urls(), max_depth=50)


def test_robots_txt_and_crawl_delay() -> None:
    """robots.txt disallows /private/ and carries Crawl-delay only when asked."""
    plain = generate_site(hosts=1, pages_per_host=10)
    robots = plain.pages[f"http://{plain.hosts[0]}/robots.txt"]
    assert robots.content_type.startswith("text/plain")
    assert b"Disallow: /private/" in robots.body
    assert b"Crawl-delay" not in robots.body
    slow = generate_site(hosts=1, pages_per_host=10, crawl_delay=2.5)
    assert b"Crawl-delay: 2.5" in slow.pages[f"http://{slow.hosts[0]}/robots.txt"].body


def test_each_host_links_a_pdf_and_missing_pages(site: Site) -> None:
    """Every host offers a non-HTML file and broken links for error-path tests."""
    linked = {link for page in site.pages.values() for link in page.links}
    for host in site.hosts:
        pdf = site.pages[f"http://{host}{PDF_PATH}"]
        assert pdf.url in linked
        assert pdf.content_type == "application/pdf"
        assert pdf.body.startswith(b"%PDF")
        assert b"\x00" in pdf.body
        missing = [url for url, page in site.pages.items() if page.status == 404 and host in url]
        assert missing
        assert all(url in linked for url in missing)


def test_content_pages_have_5_to_12_distinct_links(site: Site) -> None:
    """Link counts stay in the documented range and never repeat within a page."""
    for url in _html_urls(site):
        page = site.pages[url]
        assert len(page.links) == len(set(page.links)) == len(page.link_texts)
        if "/page/" in url:
            assert MIN_LINKS <= len(page.links) <= MAX_LINKS, url


def test_hrefs_resolve_to_page_links(site: Site) -> None:
    """What a crawler extracts and resolves from the HTML is exactly what reachable() follows."""
    for url in _html_urls(site):
        page = site.pages[url]
        anchors = _anchors(page.body)
        assert [urljoin(url, href) for href, _ in anchors] == page.links
        assert [text for _, text in anchors] == page.link_texts


def test_links_are_canonical_and_mix_forms(site: Site) -> None:
    """No fragments or queries; same-host links are partly relative, cross-host ones absolute."""
    hrefs = [(url, href) for url in _html_urls(site) for href, _ in _anchors(site.pages[url].body)]
    assert not any("#" in href or "?" in href for _, href in hrefs)
    assert any(not href.startswith(("/", "http")) for _, href in hrefs)
    assert any(href.startswith("/") for _, href in hrefs)
    cross = [(url, href) for url, href in hrefs if urlsplit(urljoin(url, href))[1] != urlsplit(url)[1]]
    assert cross
    assert all(href.startswith("http://") for _, href in cross)


def test_pages_are_realistic_html(site: Site) -> None:
    """Doctype, charset, title and real text, UTF-8 encoded."""
    page = site.pages[f"http://{site.hosts[0]}/page/0.html"]
    text = page.body.decode("utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert '<meta charset="utf-8">' in text
    assert "<title>" in text
    assert "<nav>" in text
    assert page.content_type == "text/html; charset=utf-8"
    assert len(page.body) > 1000


def test_larger_site_still_fully_linked() -> None:
    """Shapes beyond the default (more hosts, more pages) keep every page reachable."""
    site = generate_site(hosts=5, pages_per_host=300, seed=3)
    found = site.reachable(site.seed_urls(), max_depth=len(site.pages))
    pages = [url for url in site.pages if "/page/" in url and site.pages[url].status == 200]
    assert len(pages) == 1500
    assert set(pages) <= set(found)


@pytest.mark.parametrize(("hosts", "pages", "octet"), [(0, 10, 10), (2, 0, 10), (3, 10, 254)])
def test_bad_shapes_rejected(hosts: int, pages: int, octet: int) -> None:
    """Impossible shapes fail loudly instead of producing a half site."""
    with pytest.raises(ValueError, match="bad site shape"):
        generate_site(hosts=hosts, pages_per_host=pages, base_ip_octet=octet)


def test_the_catalogue_has_pagination_twice_listed_incomplete_and_comma_priced_products() -> None:
    from utils.demosite import generate_catalogue

    site, catalogue = generate_catalogue("127.18.0.1:8190", products=120, per_page=12, comma_prices=2)
    again, _ = generate_catalogue("127.18.0.1:8190", products=120, per_page=12, comma_prices=2)
    assert {u: p.body for u, p in site.pages.items()} == {u: p.body for u, p in again.pages.items()}
    assert catalogue.listing_pages == 10
    listed = [link for url, page in site.pages.items() if "/shop/product/" not in url for link in page.links
              if "/shop/product/" in link]  # fmt: skip
    assert set(listed) == {catalogue.url(p.path) for p in catalogue.products}  # every product is listed
    assert len(listed) == 120 + 9  # one product of each listing page but the first is listed twice
    incomplete = [p for p in catalogue.products if not p.complete]
    assert 0 < len(incomplete) < 30
    comma = [p for p in catalogue.products if p.comma_price]
    assert len(comma) == 2
    body = site.pages[catalogue.url(comma[0].path)].body.decode()
    assert f'data-currency="{comma[0].currency}">{comma[0].price:,.2f}'.replace(",", "#").replace(".", ",") \
        .replace("#", ".") in body  # fmt: skip
    assert len(catalogue.valid()) == 120 - len(incomplete) - len([p for p in comma if p.complete])
