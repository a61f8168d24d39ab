"""Users' items to `<prefix>.items`, from Scrapy's item signals (connected for ShoalSpider subclasses).

An item reaches `item_scraped` once it passed every user pipeline; the signal carries the response
it came from, hence its crawl and its page's lease. The item ledger counts it until the broker
confirms it (the returned Deferred also holds Scrapy's item slot until then). A dropped item
(DropItem) is simply done; a user pipeline that raises, or an item that cannot be encoded or is too
big for Kafka, dead-letters its page; an item the broker does not take puts its page back.
"""

from __future__ import annotations

import logging
from typing import Any

import ujson
from twisted.internet import defer

from crawler.items import item_message, ledger_of
from crawler.meta import LEASE, ShoalMessage
from crawler.pipelines import KafkaPipeline
from utils.config.errors import last_line

log = logging.getLogger(__name__)


class ItemSender:
    def __init__(self, kafka: KafkaPipeline) -> None:
        self.kafka = kafka
        self.ledger = ledger_of(kafka.crawler)
        self.topic = kafka.settings.topic("items")

    def item_scraped(self, item: Any, response: Any, spider: Any = None, **_: Any) -> defer.Deferred[Any] | None:
        if type(item) is ShoalMessage:
            return None
        lease = _lease(response)
        try:
            message = item_message(item, response, getattr(spider, "item_key", None))
            value = encode_item(message)
        except Exception as exc:  # an item ujson cannot encode: the user's bug, dead-lettered
            self._failed(lease, last_line(exc), getattr(response, "url", None))
            return None
        if len(value) > self.kafka.max_size:
            self._failed(lease, f"ItemTooLarge: {len(value)} bytes", message["url"])
            return None
        key = (message.get("crawlid") or "").encode()
        done = self.kafka.send(self.topic, key, value)
        per_appid = self.kafka.settings.appid_topic("items", message.get("appid"))
        if per_appid is not None:
            more = self.kafka.send(per_appid, key, value)
            done = defer.gatherResults([done, more], consumeErrors=True)
        done.addCallbacks(self._sent, self._not_sent, callbackArgs=(lease,), errbackArgs=(lease, message))
        return done

    def item_dropped(self, item: Any, response: Any, **_: Any) -> None:
        lease = _lease(response)
        if lease is not None and type(item) is not ShoalMessage:
            self.ledger.done(lease.member)

    def item_error(self, item: Any, response: Any, failure: Any, **_: Any) -> None:
        if type(item) is not ShoalMessage:
            self._failed(_lease(response), last_line(failure.value), getattr(response, "url", None))

    def _failed(self, lease: Any, error: str, url: str | None) -> None:
        log.error("Item failed; its page is dead-lettered", extra={"url": url, "error": error})
        if lease is not None:
            self.ledger.fail(lease.member, error)
            self.ledger.done(lease.member)

    def _sent(self, _: Any, lease: Any) -> None:
        if lease is not None:
            self.ledger.done(lease.member)

    def _not_sent(self, failure: Any, lease: Any, message: dict[str, Any]) -> None:
        log.error("Failed to send an item to Kafka; its page will be crawled again",
                  extra={"url": message["url"], "error": str(failure.value)})  # fmt: skip
        if lease is not None:
            self.ledger.done(lease.member, lost=True)


def encode_item(message: dict[str, Any]) -> bytes:
    """JSON with sorted keys, as pages; values JSON has no type for (dates, ...) as their text."""
    return ujson.dumps(message, sort_keys=True, ensure_ascii=False, escape_forward_slashes=False,
                       default=str).encode()  # fmt: skip


def _lease(response: Any) -> Any:
    meta = getattr(response, "meta", None)
    return meta.get(LEASE) if meta else None
