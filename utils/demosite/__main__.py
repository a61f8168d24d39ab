"""Serve the demo site: ``python -m utils.demosite --hosts 3 --pages 200 --port 8181``.

Prints one JSON line per seed URL, then one with the page count a full crawl that obeys robots.txt
requests, so scripts can read what to crawl and what to expect; serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from pathlib import Path

from utils.demosite.catalogue import SHOP_HOST, generate_catalogue, with_catalogue
from utils.demosite.changing import ChangingPages
from utils.demosite.generator import Site, generate_site
from utils.demosite.server import SiteServer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line of the demo site; defaults match `make run`."""
    parser = argparse.ArgumentParser(prog="python -m utils.demosite", description=__doc__)
    parser.add_argument("--hosts", type=int, default=3, help="number of loopback hosts")
    parser.add_argument("--pages", type=int, default=200, help="pages per host")
    parser.add_argument("--port", type=int, default=8181)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--base-octet", type=int, default=10, help="first host is 127.0.0.<this>")
    parser.add_argument("--crawl-delay", type=float, default=None, help="Crawl-delay in robots.txt, seconds")
    parser.add_argument("--delay", type=float, default=0.0, help="added latency per response, seconds")
    parser.add_argument("--access-log", type=Path, default=None, help="append one line per request here")
    parser.add_argument("--shop", type=int, default=0, metavar="PRODUCTS",
                        help="also serve a product catalogue of this many products on 127.18.0.1")  # fmt: skip
    parser.add_argument("--changing", type=int, default=0, metavar="PAGES",
                        help="also serve PAGES pages under /fresh/ (first host) that change over time")  # fmt: skip
    parser.add_argument("--change-rate", type=float, default=1 / 60, metavar="PER_S",
                        help="changes per second of odd /fresh/ pages (even ones never change)")  # fmt: skip
    return parser.parse_args(argv)


def announce(site: Site) -> None:
    """Print the seed URLs and the expected page count as JSON lines."""
    for url in site.seed_urls():
        print(json.dumps({"seed_url": url}), flush=True)
    summary = {
        "expected_pages": site.expected_page_count(),
        "expected_pages_ignoring_robots": site.expected_page_count(obey_robots=False),
        "hosts": site.hosts,
    }
    print(json.dumps(summary), flush=True)


async def serve(server: SiteServer) -> None:
    """Serve until SIGTERM or SIGINT, then close every socket."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await server.start()
    announce(server.site)
    try:
        await stop.wait()
    finally:
        await server.close()


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m utils.demosite``."""
    args = parse_args(argv)
    site = generate_site(
        hosts=args.hosts,
        pages_per_host=args.pages,
        seed=args.seed,
        base_ip_octet=args.base_octet,
        port=args.port,
        crawl_delay=args.crawl_delay,
    )
    if args.shop:
        shop, catalogue = generate_catalogue(f"{SHOP_HOST}:{args.port}", products=args.shop, seed=args.seed)
        site = with_catalogue(site, shop)
        print(json.dumps({"shop_seed_url": catalogue.seed_url, "valid_products": len(catalogue.valid())}), flush=True)
    changing = None
    if args.changing:  # issue 31: every other page changes (Poisson, --change-rate), the others never
        rates = [args.change_rate if i % 2 else 0.0 for i in range(args.changing)]
        changing = ChangingPages(site.hosts[0], rates, seed=args.seed)
        print(json.dumps({"changing_index_url": changing.index_url, "changing_pages": args.changing}), flush=True)
    asyncio.run(serve(SiteServer(site, delay=args.delay, access_log=args.access_log, changing=changing)))


if __name__ == "__main__":
    main()
