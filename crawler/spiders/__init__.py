"""Spiders of the Shoal crawler, by name."""

from __future__ import annotations

from crawler.spiders.link import LinkSpider
from crawler.spiders.render import RenderSpider
from crawler.spiders.wandering import WanderingSpider

SPIDERS = {LinkSpider.name: LinkSpider, WanderingSpider.name: WanderingSpider, RenderSpider.name: RenderSpider}
