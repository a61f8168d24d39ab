"""A product catalogue for the demo site: listing pages with pagination, then product pages.

What user spiders are written for (docs/how-to/own-spider.md): `/shop/` and
`/shop/page/<n>.html` list product cards (some products on two listing pages), each product page
gives name, price, currency, SKU and availability. Some products miss a field (a spider's pipeline
should drop them), and a few write their price the European way (`1.234,50`), which a naive
`float()` chokes on: the example spider's deliberate bug. Deterministic from its seed, so a test
knows in advance every product a crawl must yield.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from html import escape

from utils.demosite.generator import HTML_TYPE, TEXT_TYPE, TITLE_WORDS, Page, Site

SHOP_HOST = "127.18.0.1"  # where `python -m utils.demosite --shop N` serves the catalogue
CURRENCIES = ("EUR", "USD", "GBP")
LISTING_ROOT = "/shop/"


@dataclass(frozen=True, slots=True)
class Product:
    """A product as its page shows it; None is a field the page leaves out."""

    sku: str
    name: str | None
    price: float | None
    currency: str | None
    available: bool | None
    comma_price: bool = False  # price written as "1.234,50"

    @property
    def path(self) -> str:
        return f"/shop/product/{self.sku}.html"

    @property
    def complete(self) -> bool:
        """Has every field a product record needs (availability is optional)."""
        return None not in (self.name, self.price, self.currency)


@dataclass
class Catalogue:
    host: str
    products: list[Product]
    listing_pages: int
    root: str = LISTING_ROOT  # the seed page's path

    def url(self, path: str) -> str:
        return f"http://{self.host}{path}"

    @property
    def seed_url(self) -> str:
        return self.url(self.root)

    def valid(self) -> list[Product]:
        """Products a correct spider with a validating pipeline yields."""
        return [p for p in self.products if p.complete and not p.comma_price]


def generate_catalogue(
    host: str, products: int = 120, per_page: int = 12, seed: int = 7, comma_prices: int = 1
) -> tuple[Site, Catalogue]:
    """A one-host site (host is `ip:port`) serving the catalogue, and the catalogue itself."""
    rng = random.Random(seed)
    items = [product(rng, n, n < comma_prices) for n in range(products)]
    rng.shuffle(items)
    listing = [items[i : i + per_page] for i in range(0, len(items), per_page)]
    for n in range(1, len(listing)):  # some products listed twice: on their page and the next
        listing[n].append(rng.choice(listing[n - 1]))
    catalogue = Catalogue(host=host, products=items, listing_pages=len(listing))
    pages = [_listing_page(catalogue, n, cards) for n, cards in enumerate(listing)]
    pages += [product_page(catalogue, p) for p in items]
    robots = Page(url=catalogue.url("/robots.txt"), status=200, content_type=TEXT_TYPE, body=b"User-agent: *\n")
    pages.append(robots)
    port = int(host.rsplit(":", 1)[1])
    site = Site(hosts=[host], port=port, seed=seed, crawl_delay=None, pages={p.url: p for p in pages})
    return site, catalogue


def with_catalogue(site: Site, shop: Site) -> Site:
    """One site serving both: the demo site's hosts and the catalogue's (same port)."""
    return Site(hosts=[*site.hosts, *shop.hosts], port=site.port, seed=site.seed, crawl_delay=site.crawl_delay,
                pages={**site.pages, **shop.pages})  # fmt: skip


def product(rng: random.Random, n: int, comma_price: bool) -> Product:
    """Product n; about a fifth miss a field, as real shops' pages do (the pipeline drops those)."""
    missing = rng.random()
    name = " ".join(rng.sample(TITLE_WORDS, 2)).title()
    price = round(rng.uniform(1000, 2000) if comma_price else rng.uniform(2, 500), 2)
    return Product(
        sku=f"SKU-{n:05d}",
        name=None if 0.05 <= missing < 0.1 else name,
        price=None if missing < 0.05 else price,
        currency=None if 0.1 <= missing < 0.13 else rng.choice(CURRENCIES),
        available=None if 0.13 <= missing < 0.2 else rng.random() < 0.8,
        comma_price=comma_price,
    )


def _listing_path(n: int) -> str:
    return LISTING_ROOT if n == 0 else f"/shop/page/{n + 1}.html"


def _listing_page(catalogue: Catalogue, n: int, cards: list[Product]) -> Page:
    links = [catalogue.url(p.path) for p in cards]
    html = [f'<div class="product-card"><a class="product" href="{p.path}">{escape(p.name or p.sku)}</a></div>'
            for p in cards]  # fmt: skip
    if n + 1 < catalogue.listing_pages:
        html.append(f'<a class="next" rel="next" href="{_listing_path(n + 1)}">Next page</a>')
        links.append(catalogue.url(_listing_path(n + 1)))
    body = document(f"Shop — page {n + 1}", "\n".join(html))
    return Page(catalogue.url(_listing_path(n)), 200, HTML_TYPE, body, links, [])


def product_page(catalogue: Catalogue, p: Product) -> Page:
    """A product's page: only the fields it has (and a link back to the shop)."""
    parts = [f'<span class="sku">{p.sku}</span>']
    if p.name is not None:
        parts.append(f'<h1 class="name">{escape(p.name)}</h1>')
    if p.price is not None:
        shown = f"{p.price:,.2f}".replace(",", " ").replace(".", ",").replace(" ", ".") if p.comma_price \
            else f"{p.price:.2f}"  # fmt: skip
        currency = f' data-currency="{p.currency}"' if p.currency is not None else ""
        parts.append(f'<span class="price"{currency}>{shown}</span>')
    if p.available is not None:
        parts.append(f'<p class="availability">{"in stock" if p.available else "out of stock"}</p>')
    parts.append(f'<a href="{LISTING_ROOT}">Back to the shop</a>')
    body = document(p.name or p.sku, "\n".join(parts))
    return Page(catalogue.url(p.path), 200, HTML_TYPE, body, [catalogue.seed_url], [])


def document(title: str, main: str) -> bytes:
    """A minimal HTML page around `main`."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title></head>\n'
            f"<body><main>\n{main}\n</main></body></html>\n").encode()  # fmt: skip
