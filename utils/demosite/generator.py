"""Build the deterministic demo website that `make run`, the tests and the benchmarks crawl.

Everything comes from one ``random.Random(seed)``, so the same arguments give byte-identical pages
and :meth:`Site.reachable` can tell a test in advance exactly which URLs a crawler will request.
The site spans several loopback hosts (127.0.0.0/8 is all loopback on Linux), each a distinct domain
for per-domain queues and throttling.
"""

from __future__ import annotations

import posixpath
import random
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from html import escape
from typing import NamedTuple
from urllib.parse import urlsplit

DISALLOWED_PREFIX = "/private/"
PDF_PATH = "/files/report.pdf"
ROBOTS_PATH = "/robots.txt"
HTML_TYPE = "text/html; charset=utf-8"
TEXT_TYPE = "text/plain; charset=utf-8"
PDF_TYPE = "application/pdf"
NOT_FOUND_BODY = (
    b'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>404 Not Found</title>'
    b"</head><body><h1>Not Found</h1><p>The requested page does not exist.</p></body></html>\n"
)
PRIVATE_PAGES = 3
MIN_LINKS, MAX_LINKS = 5, 12
CROSS_HOST_SHARE = 0.2  # share of a page's random links that point at another host of the site

# Accents and "R&D" make charset handling and entity decoding matter to the crawler under test.
_VOCABULARY = (
    "harbour tide current reef shoal anchor vessel crew signal lantern chart compass drift wave "
    "river delta estuary channel buoy beacon keel hull sail mast rope knot net catch market "
    "trade route ledger archive index report survey season weather storm calm breeze morning "
    "evening village town city coast island cape bay inlet lagoon sand stone cliff lighthouse "
    "keeper record journal notice bulletin review summary analysis method result figure table "
    "sample measure count estimate growth decline stable rapid slow careful open public local "
    "regional national annual quarterly early late northern southern eastern western green blue "
    "grey silver golden quiet busy ancient modern new old small large long short deep shallow "
    "café naïve façade rôle déjà R&D über señor "
    "the a of and to in on for with from by about under over between during after before"
)
WORDS = _VOCABULARY.split()
TITLE_WORDS = [word for word in WORDS if len(word) > 3 and "&" not in word]
CONNECTIVES = ("See also", "Read more in", "Compare with", "Background:", "Related:", "Continue with")


@dataclass(frozen=True, slots=True)
class Page:
    """One URL of the site as the server answers it; ``links`` are resolved, in document order."""

    url: str
    status: int
    content_type: str
    body: bytes
    links: list[str] = field(default_factory=list)
    link_texts: list[str] = field(default_factory=list)


@dataclass
class Site:
    """The generated site: ``pages`` holds every URL it serves or links to, 404s included."""

    hosts: list[str]
    port: int
    seed: int
    crawl_delay: float | None
    pages: dict[str, Page]

    def seed_urls(self) -> list[str]:
        """Index URL of every host, the usual crawl seeds."""
        return [f"http://{host}/" for host in self.hosts]

    def reachable(
        self,
        start_urls: Iterable[str],
        max_depth: int,
        obey_robots: bool = True,
        allowed_hosts: Iterable[str] | None = None,
        deny_extensions: Iterable[str] = (),
    ) -> dict[str, int]:
        """URLs a link-following crawler requests, each with its depth, found breadth first.

        Seeds have depth 0; a page at depth d has its links followed iff d < max_depth (Scrapy's
        DEPTH_LIMIT and Scrapy Cluster's ``maxdepth``). The 404 targets and the PDF are included,
        robots.txt is not. ``obey_robots`` drops /private/ URLs, seeds too; ``allowed_hosts`` (host
        or host:port) and ``deny_extensions`` (e.g. Scrapy's IGNORED_EXTENSIONS, which lists pdf)
        filter followed links only. The set is exact for a breadth-first crawler, or for any order
        once max_depth exceeds the site's depth; a depth-first crawler with a dupefilter can
        otherwise reach a page first by a longer path and stop short of some of its links.
        """
        allowed = None if allowed_hosts is None else frozenset(allowed_hosts)
        denied = tuple("." + ext.lower().lstrip(".") for ext in deny_extensions)
        depths = {url: 0 for url in start_urls if not (obey_robots and _disallowed(url))}
        queue = deque(depths)
        while queue:
            url = queue.popleft()
            page = self.pages.get(url)
            if page is None or depths[url] >= max_depth:
                continue
            for link in page.links:
                if link not in depths and _follows(link, obey_robots, allowed, denied):
                    depths[link] = depths[url] + 1
                    queue.append(link)
        return depths

    def expected_page_count(self, obey_robots: bool = True) -> int:
        """URLs a full, unlimited-depth crawl from :meth:`seed_urls` requests."""
        return len(self.reachable(self.seed_urls(), max_depth=len(self.pages), obey_robots=obey_robots))


def _disallowed(url: str) -> bool:
    return urlsplit(url).path.startswith(DISALLOWED_PREFIX)


def _follows(url: str, obey_robots: bool, allowed: frozenset[str] | None, denied: tuple[str, ...]) -> bool:
    parts = urlsplit(url)
    if obey_robots and parts.path.startswith(DISALLOWED_PREFIX):
        return False
    if allowed is not None and parts.netloc not in allowed and parts.hostname not in allowed:
        return False
    return not (denied and parts.path.lower().endswith(denied))


class _Link(NamedTuple):
    url: str
    href: str
    text: str


@dataclass
class _Host:
    """What page builders of one host need: its name, its neighbours and every page title."""

    name: str
    others: list[str]
    size: int
    titles: dict[str, list[str]]
    specials: dict[int, list[str]] = field(default_factory=dict)

    def url(self, path: str, host: str | None = None) -> str:
        return f"http://{host or self.name}{path}"


def generate_site(
    hosts: int = 3,
    pages_per_host: int = 200,
    seed: int = 1,
    base_ip_octet: int = 10,
    port: int = 8181,
    crawl_delay: float | None = None,
    ip_prefix: str = "127.0.0",
) -> Site:
    """Build the site; ``crawl_delay`` (seconds) adds a Crawl-delay line to every robots.txt.

    Hosts are ``<ip_prefix>.<base_ip_octet + i>``: tests that run beside others pick their own
    loopback range, so no two sites ever share an address."""
    if hosts < 1 or pages_per_host < 1 or not 1 <= base_ip_octet <= 255 - hosts:
        raise ValueError(f"bad site shape: hosts={hosts} pages={pages_per_host} octet={base_ip_octet}")
    rng = random.Random(seed)
    names = [f"{ip_prefix}.{base_ip_octet + i}:{port}" for i in range(hosts)]
    titles = {name: [_title(rng) for _ in range(pages_per_host)] for name in names}
    pages: dict[str, Page] = {}
    for name in names:
        host = _Host(name, [other for other in names if other != name], pages_per_host, titles)
        _plan_specials(rng, host)
        for page in _host_pages(rng, host, crawl_delay):
            pages[page.url] = page
    return Site(hosts=names, port=port, seed=seed, crawl_delay=crawl_delay, pages=pages)


def _plan_specials(rng: random.Random, host: _Host) -> None:
    """Pick the pages that link to the PDF, to /private/ and to missing pages (each at least once)."""
    size = host.size
    targets = [PDF_PATH] * max(1, size // 25)
    targets += [f"{DISALLOWED_PREFIX}{k % PRIVATE_PAGES}.html" for k in range(max(1, size // 40))]
    targets += [f"/page/{size + k}.html" for k in range(max(1, size // 50))]
    for path in targets:
        chosen = host.specials.setdefault(rng.randrange(size), [])
        if path not in chosen:
            chosen.append(path)


def _host_pages(rng: random.Random, host: _Host, crawl_delay: float | None) -> list[Page]:
    pages = [_index_page(rng, host)]
    pages += [_content_page(rng, host, n) for n in range(host.size)]
    pages += [_private_page(rng, host, k) for k in range(PRIVATE_PAGES)]
    pages += [
        not_found_page(host.url(path))
        for paths in host.specials.values()
        for path in paths
        if path.startswith("/page/")
    ]
    pages.append(_pdf_page(rng, host))
    pages.append(_robots_page(host, crawl_delay))
    return pages


def not_found_page(url: str) -> Page:
    """Build the 404 answer for a URL the site does not have."""
    return Page(url=url, status=404, content_type=HTML_TYPE, body=NOT_FOUND_BODY)


def _index_page(rng: random.Random, host: _Host) -> Page:
    picks = rng.sample(range(1, host.size), min(host.size - 1, rng.randint(4, 7)))
    body = [_link(rng, host, "/", _page_path(0), "Start reading: " + host.titles[host.name][0])]
    body += [_link(rng, host, "/", _page_path(n), host.titles[host.name][n]) for n in picks]
    partners = [host.url("/", other) for other in host.others]
    nav = [_Link(url, url, f"Partner site {other}") for url, other in zip(partners, host.others, strict=True)]
    return _html_page(rng, host, "/", f"Shoal demo — {host.name}", nav, body)


def _content_page(rng: random.Random, host: _Host, n: int) -> Page:
    path = _page_path(n)
    nav = [_link(rng, host, path, "/", "Home")]
    if n + 1 < host.size:
        nav.append(_link(rng, host, path, _page_path(n + 1), "Next page"))
    body = [_special_link(rng, host, path, target) for target in host.specials.get(n, [])]
    _fill_links(rng, host, path, nav, body, rng.randint(MIN_LINKS, MAX_LINKS))
    return _html_page(rng, host, path, host.titles[host.name][n], nav, body)


def _fill_links(
    rng: random.Random, host: _Host, path: str, nav: list[_Link], body: list[_Link], total: int
) -> None:
    """Append random page links to ``body``, mostly same-host, until the page has ``total`` targets."""
    seen = {link.url for link in nav + body} | {host.url(path)}
    for _ in range(4 * total):
        if len(nav) + len(body) >= total:
            return
        other = bool(host.others) and rng.random() < CROSS_HOST_SHARE
        target_host = rng.choice(host.others) if other else host.name
        n = rng.randrange(host.size)
        url = host.url(_page_path(n), target_host)
        if url not in seen:
            seen.add(url)
            text = host.titles[target_host][n]
            body.append(_Link(url, url, text) if other else _link(rng, host, path, _page_path(n), text))


def _special_link(rng: random.Random, host: _Host, path: str, target: str) -> _Link:
    if target == PDF_PATH:
        return _link(rng, host, path, target, "Annual report (PDF)")
    if target.startswith(DISALLOWED_PREFIX):
        return _link(rng, host, path, target, "Members area")
    return _link(rng, host, path, target, "Archived story")


def _private_page(rng: random.Random, host: _Host, k: int) -> Page:
    path = f"{DISALLOWED_PREFIX}{k}.html"
    nav = [_link(rng, host, path, "/", "Home")]
    if k + 1 < PRIVATE_PAGES:
        nav.append(_link(rng, host, path, f"{DISALLOWED_PREFIX}{k + 1}.html", "Next private page"))
    return _html_page(rng, host, path, f"Members area {k}", nav, [])


def _pdf_page(rng: random.Random, host: _Host) -> Page:
    stream = b"\x00\xff" + rng.randbytes(510)
    body = (
        b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n"
        b"2 0 obj\n<< /Length 512 >>\nstream\n" + stream + b"\nendstream\nendobj\n"
        b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"
    )
    return Page(url=host.url(PDF_PATH), status=200, content_type=PDF_TYPE, body=body)


def _robots_page(host: _Host, crawl_delay: float | None) -> Page:
    lines = ["User-agent: *", f"Disallow: {DISALLOWED_PREFIX}"]
    if crawl_delay is not None:
        lines.append(f"Crawl-delay: {crawl_delay:g}")
    body = ("\n".join(lines) + "\n").encode()
    return Page(url=host.url(ROBOTS_PATH), status=200, content_type=TEXT_TYPE, body=body)


def _page_path(n: int) -> str:
    return f"/page/{n}.html"


def _link(rng: random.Random, host: _Host, from_path: str, path: str, text: str) -> _Link:
    """Same-host link written in one of the forms a crawler must resolve: relative, rooted, absolute."""
    form = rng.random()
    if form < 0.4:
        href = posixpath.relpath(path, posixpath.dirname(from_path)) if path != "/" else "/"
    elif form < 0.9:
        href = path
    else:
        href = host.url(path)
    return _Link(host.url(path), href, text)


def _title(rng: random.Random) -> str:
    return _capitalize(" ".join(rng.sample(TITLE_WORDS, rng.randint(2, 5))))


def _sentence(rng: random.Random) -> str:
    return _capitalize(" ".join(rng.choices(WORDS, k=rng.randint(6, 16)))) + "."


def _capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def _paragraph(rng: random.Random, links: list[_Link]) -> str:
    """Sentences with the links woven in between them, keeping the links' order."""
    parts = [escape(_sentence(rng)) for _ in range(rng.randint(2, 5))]
    positions = sorted(rng.randint(1, len(parts)) for _ in links)
    for offset, (position, link) in enumerate(zip(positions, links, strict=True)):
        anchor = f'<a href="{escape(link.href)}">{escape(link.text)}</a>'
        parts.insert(position + offset, f"{rng.choice(CONNECTIVES)} {anchor}.")
    return "<p>" + " ".join(parts) + "</p>"


def _html_page(
    rng: random.Random, host: _Host, path: str, title: str, nav: list[_Link], body: list[_Link]
) -> Page:
    """Render a page; link order in ``Page.links`` is the order of the anchors in the document."""
    count = rng.randint(3, 6)
    slots = sorted(rng.randrange(count) for _ in body)
    runs = [[link for link, slot in zip(body, slots, strict=True) if slot == p] for p in range(count)]
    paragraphs = [_paragraph(rng, run) for run in runs]
    nav_html = " | ".join(f'<a href="{escape(link.href)}">{escape(link.text)}</a>' for link in nav)
    ordered = nav + body  # slots are sorted, so paragraph p holds the next run of ``body``
    html = (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{escape(title)}</title>\n'
        f'<meta name="description" content="{escape(_sentence(rng))}">\n</head>\n<body>\n'
        f"<header><h1>{escape(title)}</h1>\n<nav>{nav_html}</nav></header>\n"
        f"<main><article>\n" + "\n".join(paragraphs) + "\n</article></main>\n"
        f"<footer><p>Shoal demo site · {host.name} · {path}</p></footer>\n</body>\n</html>\n"
    )
    return Page(
        url=host.url(path),
        status=200,
        content_type=HTML_TYPE,
        body=html.encode(),
        links=[link.url for link in ordered],
        link_texts=[link.text for link in ordered],
    )
