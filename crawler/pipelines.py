"""The Kafka pipeline: page messages to the firehose; the lease is settled once Kafka confirms.

A dead-lettered request also goes to `<prefix>.dead_letter`; both sends are confirmed before the
lease is settled, so a crash in between leaves the lease to the reaper instead of losing the page.
A page whose items are still on their way (crawler.items) waits for them before its lease is settled.
A page the broker refuses as too large is sent again without its body (flagged, as one over
KAFKA_PRODUCER_MAX_REQUEST_SIZE); an error a retry cannot mend dead-letters the request; only a
broker that stayed unreachable (a retriable error) releases it to be fetched again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson
import ujson
from kafka.errors import InvalidTopicError, MessageSizeTooLargeError, RecordListTooLargeError
from scrapy.crawler import Crawler
from twisted.internet import defer, reactor, task

from crawler.items import ledger_of
from crawler.meta import DETAILS, LEASE, OUTCOME, SILENT
from crawler.page import timestamp
from crawler.signals import connect_robots, lease_settled
from utils.config.clients import kafka_producer
from utils.config.log import PER_PAGE
from utils.config.settings import Settings
from utils.frontier import dead_letters
from utils.observability.metrics import record_dead_letter, record_produced, set_dependency_up

log = logging.getLogger(__name__)

TOO_LARGE = (MessageSizeTooLargeError, RecordListTooLargeError)  # the broker's or topic's size limit
STOCK_MESSAGE_MAX_BYTES = 1024 * 1024  # bytes; below Kafka's default message.max.bytes (1048588)
# A send unconfirmed this long means the broker does not answer: the producer retries for up to its
# delivery timeout (2 minutes) before failing the send, and health would stay green all that time.
# Two thirds of the producer's 15 s request timeout; a broker on a working link confirms in milliseconds.
STALLED_AFTER = 10.0  # seconds
WATCH_EVERY = 1.0  # seconds between checks for a stalled send


def encode(message: dict[str, Any]) -> bytes:
    """JSON with sorted keys, as Scrapy Cluster's pipeline, in UTF-8 with `/` unescaped.

    orjson writes a page of ~30 KB of HTML in ~20 us, ujson in ~300 us (its text then encoded
    again): ~2 % of the crawler's samples on pages like the real web's. What orjson refuses
    (keys that are not text, integers past 64 bits) goes through ujson as before. A NaN becomes
    null (ujson wrote NaN, which is not JSON).
    """
    try:
        return orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return ujson.dumps(message, sort_keys=True, ensure_ascii=False, escape_forward_slashes=False).encode()


def dead_letter_reason(letter: dict[str, Any]) -> str:
    """A bounded label for a dead letter: "blocked" (crawler.retry.Blocked), its HTTP status, else its
    exception's class name."""
    if str(letter.get("error") or "").startswith("Blocked:"):
        return "blocked"
    if letter.get("status_code"):
        return str(letter["status_code"])
    return str(letter.get("error") or "error").split(":", 1)[0]


def _page_event(message: str, item: dict[str, Any], action: str) -> None:
    """Scrapy Cluster's per-page events ("Scraped page"/emit, "Sent page to Kafka"/ack; ELK
    dashboards count them). Successful pages' lines may wait in the log buffer (utils.log.PER_PAGE)."""
    success = item.get("success", True)
    extra = {"url": item["url"], "appid": item.get("appid"), "crawlid": item.get("crawlid"),
             "spiderid": item.get("spiderid"), "status_code": item.get("status_code"), "action": action,
             "success": success}  # fmt: skip
    if action == "emit":
        extra["request_id"] = item.get("request_id")
    if success:
        extra.update(PER_PAGE)
    log.info(message, extra=extra)


REDIRECTS_KEPT_MAX = 1024 * 1024  # bytes of `redirects` a page sent without its body still carries


def without_body(item: dict[str, Any], size: int) -> bytes:
    """The page reported without its body, flagged, with the size it had (API.md, fix 8); without its
    redirects' answers too when they are large (hostile hops: 20 of 256 KiB of headers each)."""
    smaller = {**item, "body": None, "body_dropped": True, "body_bytes": size}
    if item.get("redirects") and len(encode({"r": item["redirects"]})) > REDIRECTS_KEPT_MAX:
        smaller.update(redirects=[], redirects_dropped=True)
    return encode(smaller)


def first_error(failure: Any) -> BaseException:
    """The error of a failed send, out of the FirstError of a page sent to several topics."""
    error: BaseException = failure.value
    while isinstance(error, defer.FirstError) and error.subFailure.value is not None:
        error = error.subFailure.value
    return error


def _robots_not_sent(failure: Any, url: str) -> None:
    log.warning("robots.txt answer not sent to Kafka", extra={"url": url[:200], "error": str(first_error(failure))})


class Deliveries:
    """Broker confirmations, handed from kafka-python's sender thread to the reactor in batches.

    The producer completes a batch's futures one after the other on its thread; one
    `callFromThread` per message woke the reactor (a pipe write) once per page. Here the first
    confirmation schedules one call that fires every Deferred confirmed until it runs, and the
    produced-messages metric is counted once per topic and batch.
    """

    def __init__(self, call_from_thread: Callable[[Callable[[], None]], Any] | None = None) -> None:
        self.call_from_thread = call_from_thread or reactor.callFromThread  # type: ignore[attr-defined]
        self.kafka_up: bool | None = None  # last reported to the metrics; set again only on a change
        self._lock = threading.Lock()
        self._done: list[tuple[defer.Deferred[Any], str, bool, Any]] = []
        self._scheduled = False
        self._waiting: dict[int, float] = {}  # id of a send's Deferred -> when it was sent (monotonic s)

    def sent(self, d: defer.Deferred[Any], now: float | None = None) -> None:
        """A send is on its way (its confirmation is awaited from now)."""
        with self._lock:
            self._waiting[id(d)] = time.monotonic() if now is None else now

    def forget(self, d: defer.Deferred[Any]) -> None:
        """A send that never left (refused at once): nothing to wait for."""
        with self._lock:
            self._waiting.pop(id(d), None)

    def stalled(self, now: float | None = None) -> bool:
        """Whether a send has waited more than STALLED_AFTER for the broker."""
        with self._lock:
            oldest = min(self._waiting.values(), default=None)
        now = time.monotonic() if now is None else now
        return oldest is not None and now - oldest > STALLED_AFTER

    def watch(self) -> None:
        """On the reactor, every WATCH_EVERY: a stalled send reports Kafka down (a confirmation, up)."""
        if self.stalled():
            self._kafka_answers(False)

    def delivered(self, d: defer.Deferred[Any], topic: str, meta: Any) -> None:
        self._add(d, topic, True, meta)

    def undelivered(self, d: defer.Deferred[Any], topic: str, exc: Exception) -> None:
        self._add(d, topic, False, exc)

    def _add(self, d: defer.Deferred[Any], topic: str, ok: bool, result: Any) -> None:
        """On the producer's thread (or the reactor's, for a send that failed at once)."""
        with self._lock:
            self._waiting.pop(id(d), None)
            self._done.append((d, topic, ok, result))
            if self._scheduled:
                return
            self._scheduled = True
        self.call_from_thread(self.fire)

    def fire(self) -> None:
        """On the reactor: count, then fire every Deferred confirmed since the last call."""
        with self._lock:
            done, self._done = self._done, []
            self._scheduled = False
        if not done:
            return
        counts = Counter((topic, ok) for _, topic, ok, _ in done)
        for (topic, ok), n in counts.items():
            record_produced(topic, sent=ok, n=n)
        self._kafka_answers(done[-1][2])
        for d, _, ok, result in done:
            if ok:
                d.callback(result)
            else:
                d.errback(result)

    def _kafka_answers(self, up: bool) -> None:
        if up is not self.kafka_up:
            self.kafka_up = up
            set_dependency_up("kafka", up)


PERMANENT = (MessageSizeTooLargeError, RecordListTooLargeError, InvalidTopicError)  # no retry can succeed


class _Failed:
    """What a Deferred's errback gets (a Failure's `value`), for an error raised before any Deferred."""

    def __init__(self, value: BaseException) -> None:
        self.value = value


class KafkaPipeline:
    def __init__(self, crawler: Crawler, settings: Settings, producer: Any) -> None:
        self.crawler = crawler
        self.settings = settings
        self.producer = producer
        self.firehose = settings.topic("crawled_firehose")
        self.robots_topic = settings.topic("robots_firehose")
        self.dead_letter_topic = settings.topic("dead_letter")
        self.max_size = settings.get_int("KAFKA_PRODUCER_MAX_REQUEST_SIZE")
        self.deliveries = Deliveries()
        self.ledger = ledger_of(crawler)
        connect_robots(crawler, self.send_robots)
        self.watcher = task.LoopingCall(self.deliveries.watch)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> KafkaPipeline:
        settings: Settings = crawler.settings["SHOAL"]
        return cls(crawler, settings, kafka_producer(settings))

    def open_spider(self) -> None:
        self.watcher.start(WATCH_EVERY, now=False)

    def close_spider(self) -> None:
        if self.watcher.running:
            self.watcher.stop()
        self.producer.flush(timeout=30)
        self.producer.close(timeout=30)

    def process_item(self, item: dict[str, Any]) -> Any:
        lease = item.pop(LEASE, None)
        outcome = item.pop(OUTCOME, "crawled")
        details = item.pop(DETAILS, None) or {}
        if item.pop(SILENT, False):
            self._settle(lease, outcome, details)
            return item
        item["timestamp"] = timestamp()
        _page_event("Scraped page", item, "emit")
        value = self._encode(item)
        key = (item.get("crawlid") or "").encode()
        try:
            done = self.send(self.firehose, key, value, item)
            more = []
            per_appid = self.settings.appid_topic("crawled", item.get("appid"))
            if per_appid is not None:
                more.append(self.send(per_appid, key, value, item))
            if "dead_letter" in details:
                more.append(self.send(self.dead_letter_topic, key, encode(details["dead_letter"])))
        except PERMANENT as exc:  # refused by the producer itself (e.g. still too large without its body)
            self._not_sent(_Failed(exc), item, lease)
            return item
        if more:  # the common page has one send: no DeferredList for it
            done = defer.gatherResults([done, *more], consumeErrors=True)
        done.addCallbacks(self._sent, self._not_sent, callbackArgs=(item, lease, outcome, details),
                          errbackArgs=(item, lease))  # fmt: skip
        return done

    def send_robots(self, message: dict[str, Any]) -> None:
        """A robots.txt answer (crawler/robots.py), for the archive; no lease waits on it, so a send
        that fails is logged and left (the next crawler process to read that host's robots.txt sends it)."""
        url = str(message.get("url"))
        done = self.send(self.robots_topic, url.encode(), encode(message))
        done.addErrback(_robots_not_sent, url)

    def _encode(self, item: dict[str, Any]) -> bytes:
        value = encode(item)
        if len(value) <= self.max_size:
            return value
        log.warning("Page too large for Kafka; sent without body", extra={"url": item["url"], "bytes": len(value)})
        return without_body(item, len(value))

    def send(self, topic: str, key: bytes, value: bytes, page: dict[str, Any] | None = None) -> defer.Deferred[Any]:
        """One message; the Deferred fires when the broker confirms it (or gives up). A `page` the
        broker refuses as too large goes again without its body."""
        d: defer.Deferred[Any] = defer.Deferred()
        self.deliveries.sent(d)  # before the send: its confirmation may come on the producer's thread at once
        try:
            future = self.producer.send(topic, key=key, value=value)
        except Exception as exc:  # refused before sending: an illegal topic name, metadata not found in time
            self.deliveries.forget(d)
            d.errback(exc)
            return d
        future.add_callback(self.deliveries.delivered, d, topic)
        future.add_errback(self.deliveries.undelivered, d, topic)
        if page is not None:
            d.addErrback(self._refused_as_too_large, topic, key, page, len(value))
        return d

    def _refused_as_too_large(
        self, failure: Any, topic: str, key: bytes, page: dict[str, Any], size: int
    ) -> defer.Deferred[Any]:
        """Refused as too large (a topic whose max.message.bytes is below KAFKA_PRODUCER_MAX_REQUEST_SIZE):
        sent again once, without its body when it exceeds Kafka's stock limit. kafka-python's idempotent
        producer aborts every batch in flight with the same error and stays broken: it is replaced
        first, and a small page aborted alongside goes again as it was. Other failures pass on."""
        failure.trap(*TOO_LARGE)
        self._replace_broken_producer()
        if size <= STOCK_MESSAGE_MAX_BYTES:
            return self.send(topic, key, encode(page))
        log.warning(
            "Kafka refused page as too large; sent without body",
            extra={"url": page["url"], "topic": topic, "bytes": size},
        )
        return self.send(topic, key, without_body(page, size))

    def _sent(self, _: Any, item: dict[str, Any], lease: Any, outcome: str, details: dict[str, Any]) -> dict[str, Any]:
        _page_event("Sent page to Kafka", item, "ack")
        if "dead_letter" in details:
            record_dead_letter(dead_letter_reason(details["dead_letter"]))
        self._settle(lease, outcome, details)
        return item

    def _not_sent(self, failure: Any, item: dict[str, Any], lease: Any) -> dict[str, Any]:
        error = first_error(failure)
        if getattr(error, "retriable", False):
            # The broker stayed unreachable for delivery_timeout_ms: the request goes back to its queue.
            log.error("Failed to send page to Kafka", extra={"url": item["url"], "error": str(error)})
            self._settle(lease, "release", {})
            return item
        # A retry would fail the same way (authorization, invalid topic, a body-less page refused):
        # the request ends here, with the error in its dead letter.
        reason = f"{type(error).__name__}: {error}"
        log.error("Kafka refused page for good; request dead-lettered", extra={"url": item["url"], "error": reason})
        self._replace_broken_producer()
        if lease is None:
            return item
        letter = dead_letters.record(lease.record, reason, None, int(lease.record.get("attempt", 0)) + 1, "crawler")
        record_dead_letter(dead_letter_reason(letter))
        self._settle(lease, "dead", {"dead_letter": letter})
        return item

    def _replace_broken_producer(self) -> None:
        """kafka-python's idempotent producer fails every later send once in its fatal state (an
        unknown producer id, a sequence gap): such a producer is closed and a new one made."""
        manager = getattr(self.producer, "_transaction_manager", None)
        if manager is None or not manager.has_fatal_error():
            return
        log.error("Kafka producer in a fatal state; replacing it")
        broken, self.producer = self.producer, kafka_producer(self.settings)
        reactor.callInThread(broken.close, 5)  # type: ignore[attr-defined]

    def _settle(self, lease: Any, outcome: str, details: dict[str, Any]) -> None:
        if lease is None:
            return
        if lease.member not in self.ledger.pages:  # no items, no user error: the common page
            lease_settled(self.crawler, lease, outcome, details)
        elif outcome == "release":
            self.ledger.forget(lease.member)  # crawled again: its items will be sent again
            lease_settled(self.crawler, lease, outcome, details)
        else:
            self.ledger.when_done(lease.member, lambda error, lost: self._finish(lease, outcome, details, error, lost))

    def _finish(self, lease: Any, outcome: str, details: dict[str, Any], error: str | None, lost: bool) -> None:
        """Every item of the page is settled: ack it, crawl it again (an item was not sent), or
        dead-letter it (user code failed on it) once the dead letter is on Kafka."""
        if lost:
            lease_settled(self.crawler, lease, "release", {})
            return
        if error is None or "dead_letter" in details:
            lease_settled(self.crawler, lease, outcome, details)
            return
        attempts = int(lease.record.get("attempt", 0)) + 1
        letter = dead_letters.record(lease.record, error, None, attempts, "spider")
        key = str(lease.record.get("crawlid") or "").encode()
        done = self.send(self.dead_letter_topic, key, encode(letter))
        done.addCallbacks(self._dead_lettered, self._dead_letter_not_sent, callbackArgs=(lease, letter),
                          errbackArgs=(lease,))  # fmt: skip

    def _dead_lettered(self, _: Any, lease: Any, letter: dict[str, Any]) -> None:
        record_dead_letter(dead_letter_reason(letter))
        lease_settled(self.crawler, lease, "dead", {"dead_letter": letter})

    def _dead_letter_not_sent(self, failure: Any, lease: Any) -> None:
        log.error("Failed to send a dead letter to Kafka", extra={"error": str(failure.value)})
        lease_settled(self.crawler, lease, "release", {})
