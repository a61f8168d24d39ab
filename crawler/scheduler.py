"""The distributed scheduler: Scrapy's scheduler interface over the shared Redis frontier.

Requests are leased from Redis in small batches (one pop call hands out up to SCHEDULER_POP_BATCH),
found links and acks are buffered and written together every SCHEDULER_FLUSH_INTERVAL, so the
Redis round trips per page stay small. An idle spider polls every SCHEDULER_IDLE_POLL seconds and
wakes the engine as soon as work arrives; it never closes (the spider raises DontCloseSpider).
"""

from __future__ import annotations

import logging
import socket
import time
import uuid
from collections import deque
from typing import Any

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from twisted.internet import task

from crawler.conversion import new_request, request_from_lease
from crawler.meta import LEASE
from crawler.signals import lease_settled
from utils import keys
from utils.clients import redis_client
from utils.frontier import Ack, Frontier, Lease, NewRequest
from utils.settings import Settings
from utils.throttle import ThrottleConfig

log = logging.getLogger(__name__)

HEARTBEAT_EVERY = 5.0  # seconds between heartbeats (their TTL is HEARTBEAT_TIMEOUT)


class DistributedScheduler:
    def __init__(
        self, crawler: Crawler, settings: Settings, frontier: Frontier, throttle: ThrottleConfig
    ) -> None:
        self.crawler = crawler
        self.settings = settings
        self.frontier = frontier
        self.throttle = throttle
        self.pop_batch = settings.get_int("SCHEDULER_POP_BATCH")
        self.scan_limit = settings.get_int("SCHEDULER_SCAN_LIMIT")
        self.idle_poll = settings.get_float("SCHEDULER_IDLE_POLL")
        self.leased: deque[Lease] = deque()  # popped from Redis, not yet handed to the engine
        self.local: deque[Request] = deque()  # redirects and in-process retries of leased requests
        self.pending_requests: list[NewRequest] = []
        self.pending_acks: list[Ack] = []
        self.next_pop_at = 0.0  # monotonic time before which an empty frontier is not asked again
        self._wake_call: Any = None
        self.last_heartbeat = 0.0
        self.process_id = uuid.uuid4().hex[:12]
        self.host = socket.gethostname()
        self.spider: Spider | None = None
        self._loop: task.LoopingCall | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DistributedScheduler:
        settings: Settings = crawler.settings["SHOAL"]
        frontier = Frontier.from_settings(settings, redis_client(settings))
        scheduler = cls(crawler, settings, frontier, ThrottleConfig.from_settings(settings))
        crawler.signals.connect(scheduler.ack, signal=lease_settled)
        return scheduler

    # --- Scrapy's scheduler interface -------------------------------------------------------------
    def open(self, spider: Spider) -> None:
        self.spider = spider
        self.throttle.start(spider.name)
        self._loop = task.LoopingCall(self._tick)
        self._loop.start(min(self.idle_poll, self.settings.get_float("SCHEDULER_FLUSH_INTERVAL")), now=True)
        log.info("Scheduler opened", extra={"spiderid": spider.name, "process_id": self.process_id})

    def close(self, reason: str) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.flush()
        self.throttle.stop()
        log.info("Scheduler closed", extra={"reason": reason, "unreturned_leases": len(self.leased)})

    def has_pending_requests(self) -> bool:
        return bool(self.leased or self.local)

    def enqueue_request(self, request: Request) -> bool:
        if LEASE in request.meta:
            self.local.append(request)  # still under its original lease (redirect, Scrapy retry)
            return True
        assert self.spider is not None
        entry = new_request(request, self.spider)
        if entry is None:
            log.warning("Dropped a request without a host", extra={"url": request.url})
            return False
        self.pending_requests.append(entry)
        return True

    def next_request(self) -> Request | None:
        if self.local:
            return self.local.popleft()
        if not self.leased and time.monotonic() >= self.next_pop_at:
            self._pop()
        if not self.leased:
            return None
        assert self.spider is not None
        return request_from_lease(self.leased.popleft(), self.spider)

    # --- Shoal's additions ------------------------------------------------------------------------
    def ack(self, lease: Lease, outcome: str = "crawled", **_: Any) -> None:
        """Called by the pipeline once a page is confirmed on Kafka (or finally failed)."""
        self.pending_acks.append(Ack.of(lease, outcome))

    def flush(self) -> None:
        """Write buffered links and acks: one round trip for everything since the last flush."""
        if not self.pending_requests and not self.pending_acks:
            return
        requests, acks = self.pending_requests, self.pending_acks
        self.pending_requests, self.pending_acks = [], []
        self.frontier.flush(requests, acks)

    def _pop(self) -> None:
        assert self.spider is not None
        popped = self.frontier.pop(self.spider.name, self.pop_batch, self.throttle.policy(), self.scan_limit)
        self.leased.extend(popped.leases)
        if popped.leases:
            return
        # Nothing to hand out: ask again when the first throttled domain opens, or after the idle poll.
        wait = self.idle_poll if popped.retry_after is None else min(popped.retry_after, self.idle_poll)
        self.next_pop_at = time.monotonic() + wait
        if popped.retry_after is not None and popped.retry_after < self.idle_poll:
            self._schedule_wake(popped.retry_after)

    def _schedule_wake(self, delay: float) -> None:
        from twisted.internet import reactor

        if self._wake_call is None or not self._wake_call.active():
            self._wake_call = reactor.callLater(delay, self._wake_engine)  # type: ignore[attr-defined,arg-type]

    def _tick(self) -> None:
        try:
            self.flush()
            self._heartbeat()
        except Exception:
            log.exception("Scheduler tick failed; will retry")
        if not self.has_pending_requests():
            self._wake_engine()

    def _wake_engine(self) -> None:
        # Scrapy only asks the scheduler again after a response or its 5 s heartbeat; waking it
        # here is what brings an idle cluster's pickup latency down to SCHEDULER_IDLE_POLL.
        slot = getattr(self.crawler.engine, "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()

    def _heartbeat(self) -> None:
        now = time.time()
        if now - self.last_heartbeat < HEARTBEAT_EVERY or self.spider is None:
            return
        self.last_heartbeat = now
        key = keys.crawler_heartbeat(self.host, self.spider.name, self.process_id)
        self.frontier.client.set(key, now, ex=self.settings.get_int("HEARTBEAT_TIMEOUT"))
