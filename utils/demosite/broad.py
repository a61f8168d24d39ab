"""A broad site for the broad-crawl benchmark (issue 16): one hub page linking to thousands of hosts.

The hub lives on 127.2.0.1; host i is 127.1.<i // 250>.<i % 250 + 1> (so up to 64,000 hosts, each
its own domain for the frontier and the throttle). A host's index page links to its other pages,
which link back to the index only: a crawl seeded at the hub with maxdepth 2 fetches every page
once and never leaves the site. robots.txt allows everything.
"""

from __future__ import annotations

from html import escape

from utils.demosite.generator import HTML_TYPE, TEXT_TYPE, Page, Site

HUB = "127.2.0.1"
ROBOTS = b"User-agent: *\nDisallow:\n"


def host_address(i: int) -> str:
    return f"127.1.{i // 250}.{i % 250 + 1}"


def _html(title: str, links: list[str]) -> bytes:
    items = "".join(f'<li><a href="{escape(url)}">{escape(url)}</a></li>' for url in links)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f"</head><body><h1>{escape(title)}</h1><ul>{items}</ul></body></html>\n").encode()


def _page(url: str, title: str, links: list[str]) -> Page:
    return Page(url, 200, HTML_TYPE, _html(title, links), links)


def broad_site(hosts: int, pages_per_host: int, port: int, part: int = 0, parts: int = 1) -> Site:
    """The hub plus `hosts` hosts of `pages_per_host` pages each (the index included); with `parts`
    above 1 only every `parts`-th host from `part` on (the hub with part 0), for one of several
    server processes that each stay under the open-files limit (one listening socket per host)."""
    pages: dict[str, Page] = {}
    indexes = [f"http://{host_address(i)}:{port}/" for i in range(hosts)]
    mine = [i for i in range(hosts) if i % parts == part]
    for i in mine:
        base = f"http://{host_address(i)}:{port}"
        index = f"{base}/"
        children = [f"{base}/page/{n}.html" for n in range(1, pages_per_host)]
        pages[index] = _page(index, f"Host {i}", children)
        for child in children:
            pages[child] = _page(child, f"Host {i} {child.rsplit('/', 1)[1]}", [index])
        pages[f"{base}/robots.txt"] = Page(f"{base}/robots.txt", 200, TEXT_TYPE, ROBOTS)
    addresses = [host_address(i) for i in mine]
    if part == 0:
        hub = f"http://{HUB}:{port}/"
        pages[hub] = _page(hub, "Hub", indexes)
        pages[f"http://{HUB}:{port}/robots.txt"] = Page(f"http://{HUB}:{port}/robots.txt", 200, TEXT_TYPE, ROBOTS)
        addresses.insert(0, HUB)
    return Site(hosts=[f"{a}:{port}" for a in addresses], port=port, seed=0, crawl_delay=None, pages=pages)
