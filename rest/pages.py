"""Pages of watched crawls, from the crawled firehose to the event streams that asked for them.

One consumer per gateway, with no group, and only while a stream is open: with no subscriber the
thread stops polling, and on the next subscription it skips to the end of the topic, so an idle
gateway reads no page bodies. A subscription is `ready` once the consumer is positioned: every
page sent after that reaches it. Each subscriber gets a bounded asyncio queue; a slow client
loses pages (counted), never the gateway's memory.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import ujson
from kafka import KafkaConsumer

from rest.kafka_io import consumer_at_end, seek_to_end
from utils.config.settings import Settings

log = logging.getLogger(__name__)

QUEUE_SIZE = 1000  # page events buffered per subscriber
SUMMARY_FIELDS = ("url", "response_url", "status_code", "success", "exception", "timestamp", "crawlid", "appid")


@dataclass(eq=False)
class Subscription:
    appid: str
    crawlid: str
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue[dict[str, Any]] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    lost: int = 0

    def offer(self, page: dict[str, Any]) -> None:
        """Runs on the event loop."""
        try:
            self.queue.put_nowait(page)
        except asyncio.QueueFull:
            self.lost += 1


def summary(page: dict[str, Any]) -> dict[str, Any]:
    """What a stream sends of a page: no body, no headers."""
    short = {name: page.get(name) for name in SUMMARY_FIELDS if name in page}
    short["links"] = len(page.get("links") or [])
    return short


class PageHub:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.topic = settings.topic("crawled_firehose")
        self._lock = threading.Lock()
        self._subs: dict[tuple[str, str], list[Subscription]] = {}
        self._wanted = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: KafkaConsumer | None = None
        self._positioned = False  # the consumer reads the topic live (guarded by _lock)

    def subscribe(self, appid: str, crawlid: str) -> Subscription:
        """Called on the event loop; await `ready` before relying on seeing every page."""
        sub = Subscription(appid, crawlid, asyncio.get_running_loop())
        with self._lock:
            self._subs.setdefault((appid, crawlid), []).append(sub)
            if self._positioned:
                sub.ready.set()
            self._wanted.set()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="page-stream", daemon=True)
                self._thread.start()
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            subs = self._subs.get((sub.appid, sub.crawlid), [])
            if sub in subs:
                subs.remove(sub)
            if not subs:
                self._subs.pop((sub.appid, sub.crawlid), None)

    def close(self) -> None:
        self._stop.set()
        self._wanted.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wanted.wait()
            if self._stop.is_set():
                break
            try:
                self._consume_while_wanted()
            except Exception:
                log.exception("Page stream consumer failed; starting again")
                with self._lock:
                    self._positioned = False
                self._drop_consumer()
                self._stop.wait(1.0)
        self._drop_consumer()

    def _consume_while_wanted(self) -> None:
        if self._consumer is None:
            self._consumer = consumer_at_end(self.settings, self.topic)
        else:
            seek_to_end(self._consumer)
        with self._lock:
            self._positioned = True
            waiting = [sub for subs in self._subs.values() for sub in subs]
        for sub in waiting:
            sub.loop.call_soon_threadsafe(sub.ready.set)
        while not self._stop.is_set():
            with self._lock:
                if not self._subs:
                    self._positioned = False
                    self._wanted.clear()
                    return
            polled = self._consumer.poll(timeout_ms=500)
            for record in (r for part in polled.values() for r in part):
                self._route(record.value)

    def _route(self, value: bytes | None) -> None:
        try:
            page = ujson.loads(value or b"")
        except ValueError:
            return
        if not isinstance(page, dict):
            return
        with self._lock:
            subs = list(self._subs.get((str(page.get("appid")), str(page.get("crawlid"))), []))
        if subs:
            short = summary(page)
            for sub in subs:
                sub.loop.call_soon_threadsafe(sub.offer, short)

    def _drop_consumer(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()
