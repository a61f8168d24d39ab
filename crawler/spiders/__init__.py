"""Spiders of the Shoal crawler: the built-in ones by name, and the base class of users' spiders."""

from __future__ import annotations

from crawler.spiders.link import LinkSpider
from crawler.spiders.render import RenderSpider
from crawler.spiders.shoal import ShoalSpider
from crawler.spiders.wandering import WanderingSpider

SPIDERS = {LinkSpider.name: LinkSpider, WanderingSpider.name: WanderingSpider, RenderSpider.name: RenderSpider}

__all__ = ["SPIDERS", "ShoalSpider"]
