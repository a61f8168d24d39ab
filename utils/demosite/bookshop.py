"""A bookshop of paginated shelves: the deep-pagination case of the example `shop` spider (issue 37).

`/books/` lists the shelves (`a.shelf`); each shelf is a chain of listing pages in the catalogue's
markup (`a.product` cards, one `a.next`), so reaching a shelf's last books takes one "next page"
hop per page: with 3,000 books on 5 shelves of 23 a page, 26 hops in a row per shelf. A crawl's
critical path is those chains, not the width of a page; a crawler's per-hop latency shows in its
items/s here where a wide catalogue hides it (bench/items_vs_scrapy.py). Book pages are the
catalogue's product pages (same fields, same missing ones), so the shop spider and its validating
pipeline crawl both sites unchanged.
"""

from __future__ import annotations

import random
from html import escape

from utils.demosite.catalogue import Catalogue, Product, document, product, product_page
from utils.demosite.generator import HTML_TYPE, TEXT_TYPE, Page, Site

BOOKS_ROOT = "/books/"


def generate_bookshop(
    host: str, books: int = 3000, shelves: int = 5, per_page: int = 23, seed: int = 37
) -> tuple[Site, Catalogue]:
    """A one-host site (host is `ip:port`) of `shelves` chains of listing pages, and its catalogue
    (`seed_url` is the shelf index; `listing_pages` counts every shelf's pages)."""
    rng = random.Random(seed)
    items = [product(rng, n, False) for n in range(books)]
    rng.shuffle(items)
    per_shelf = -(-books // shelves)
    catalogue = Catalogue(host=host, products=items, listing_pages=0, root=BOOKS_ROOT)
    pages: list[Page] = []
    for s in range(shelves):
        shelf = items[s * per_shelf : (s + 1) * per_shelf]
        listing = [shelf[i : i + per_page] for i in range(0, len(shelf), per_page)]
        pages += [_shelf_page(catalogue, s, n, len(listing), cards) for n, cards in enumerate(listing)]
    catalogue.listing_pages = len(pages)
    index = [f'<li><a class="shelf" href="{_shelf_path(s, 0)}">Shelf {s + 1}</a></li>' for s in range(shelves)]
    pages.append(Page(catalogue.seed_url, 200, HTML_TYPE, document("Bookshop", "<ul>" + "".join(index) + "</ul>"),
                      [catalogue.url(_shelf_path(s, 0)) for s in range(shelves)], []))  # fmt: skip
    pages += [product_page(catalogue, p) for p in items]
    pages.append(Page(catalogue.url("/robots.txt"), 200, TEXT_TYPE, b"User-agent: *\n", [], []))
    port = int(host.rsplit(":", 1)[1])
    site = Site(hosts=[host], port=port, seed=seed, crawl_delay=None, pages={p.url: p for p in pages})
    return site, catalogue


def _shelf_path(shelf: int, n: int) -> str:
    return f"/books/shelf/{shelf + 1}/page/{n + 1}.html"


def _shelf_page(catalogue: Catalogue, shelf: int, n: int, count: int, cards: list[Product]) -> Page:
    links = [catalogue.url(p.path) for p in cards]
    html = [f'<div class="product-card"><a class="product" href="{p.path}">{escape(p.name or p.sku)}</a></div>'
            for p in cards]  # fmt: skip
    if n + 1 < count:
        html.append(f'<a class="next" rel="next" href="{_shelf_path(shelf, n + 1)}">Next page</a>')
        links.append(catalogue.url(_shelf_path(shelf, n + 1)))
    body = document(f"Shelf {shelf + 1} — page {n + 1}", "\n".join(html))
    return Page(catalogue.url(_shelf_path(shelf, n)), 200, HTML_TYPE, body, links, [])
