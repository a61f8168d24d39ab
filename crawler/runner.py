"""Runs one spider process: `shoal crawl --spider link`."""

from __future__ import annotations

import logging

from scrapy.crawler import CrawlerProcess

from crawler.registry import SpiderRegistryError, spider_class
from utils.config.settings import Settings


def scrapy_settings(settings: Settings) -> dict[str, object]:
    """The Scrapy settings of a Shoal crawler: the add-on derives everything from `SHOAL`, but the
    reactor's resolver is set up from the process's settings, before any add-on runs."""
    return {"ADDONS": {"crawler.addon.ShoalAddon": 0}, "SHOAL": settings, "LOG_INSTALL_ROOT_HANDLER": False,
            "TWISTED_DNS_RESOLVER": "crawler.guards.PolicyResolver"}  # fmt: skip


def run(settings: Settings, spider: str = "link") -> None:
    """Crawl until SIGTERM/SIGINT (a second signal forces the stop)."""
    try:
        cls = spider_class(settings, spider)
    except SpiderRegistryError as exc:
        raise SystemExit(f"shoal crawl: {exc}") from None
    process = CrawlerProcess(scrapy_settings(settings))
    # Scrapy's default logging config puts its own loggers at DEBUG; Shoal's LOG_LEVEL rules.
    logging.getLogger("scrapy").setLevel(settings.get_str("LOG_LEVEL").upper())
    process.crawl(cls)
    process.start()
