"""Scrapy's item processor for Shoal: its own messages straight to Kafka, users' items through
their ITEM_PIPELINES first.

Shoal's page and outcome messages (`ShoalMessage`) are not items: a user's pipeline must never see
or drop them. Users' items pass ITEM_PIPELINES (in their order) and are then sent to Kafka by the
`item_scraped` handler (crawler/item_sender.py), which has the response the item came from, hence its crawl and lease.
"""

from __future__ import annotations

from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.pipelines import ItemPipelineManager
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from crawler.item_sender import ItemSender
from crawler.meta import ShoalMessage
from crawler.pipelines import KafkaPipeline
from crawler.spiders.shoal import ShoalSpider


class ShoalItemProcessor(ItemPipelineManager):
    kafka: KafkaPipeline
    sender: ItemSender | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ShoalItemProcessor:
        manager = super().from_crawler(crawler)
        manager.kafka = KafkaPipeline.from_crawler(crawler)
        if crawler.spidercls is not None and issubclass(crawler.spidercls, ShoalSpider):
            sender = manager.sender = ItemSender(manager.kafka)  # kept: signals hold weak references
            crawler.signals.connect(sender.item_scraped, signal=signals.item_scraped)
            crawler.signals.connect(sender.item_dropped, signal=signals.item_dropped)
            crawler.signals.connect(sender.item_error, signal=signals.item_error)
        return manager

    async def process_item_async(self, item: Any) -> Any:
        if type(item) is ShoalMessage:
            result = self.kafka.process_item(item)
            if isinstance(result, Deferred):
                return await maybe_deferred_to_future(result)
            return result
        return await super().process_item_async(item)

    async def open_spider_async(self) -> None:
        await super().open_spider_async()
        self.kafka.open_spider()

    async def close_spider_async(self) -> None:
        await super().close_spider_async()
        self.kafka.close_spider()
