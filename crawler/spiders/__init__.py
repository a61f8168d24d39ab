"""Spiders of the Shoal crawler, by name."""

from __future__ import annotations

from crawler.spiders.link import LinkSpider

SPIDERS = {LinkSpider.name: LinkSpider}
