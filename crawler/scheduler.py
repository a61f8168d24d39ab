"""The distributed scheduler: Scrapy's scheduler interface over the shared Redis frontier.

Requests are leased from Redis in small batches (one pop call hands out up to SCHEDULER_POP_BATCH);
found links, acks, retries and dead letters are buffered and written together every
SCHEDULER_FLUSH_INTERVAL, so the Redis round trips per page stay well under one. A spider with
nothing in flight blocks on its wake-up key (BLPOP, at most SCHEDULER_IDLE_WAIT seconds), which
every enqueue of its work pushes to (utils/frontier/lua/lib/wake.lua), and pops at once when woken:
an idle crawler costs ~0 CPU yet picks work up within milliseconds (issue 37: it polled 20 times
a second). On a sharded Redis Cluster it polls every SCHEDULER_IDLE_POLL seconds instead. It never
closes (the spider raises DontCloseSpider). Redis being away only pauses it: pops back off, and
buffered writes wait for the next flush.
"""

from __future__ import annotations

import logging
import socket
import time
import uuid
from collections import Counter, deque
from typing import Any

from redis.exceptions import RedisError
from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from twisted.internet import reactor, task

from crawler.conversion import UnstorableRequest, child_key, new_request, request_from_lease
from crawler.dupes import RecentFingerprints
from crawler.fetch import Fetch
from crawler.leases import LeaseBook
from crawler.meta import LEASE
from crawler.pacing import CRAWL_DELAY_TTL, hit_spacing
from crawler.signals import connect_fetched, connect_settled
from utils.config.clients import redis_client
from utils.config.settings import Settings
from utils.frontier import Frontier, Lease, Settlement, keys
from utils.frontier.domains import url_domain
from utils.frontier.throttle import ThrottleConfig
from utils.frontier.types import LATE_FETCH_SHARE
from utils.observability import stats
from utils.observability.metrics import (
    mark_loop,
    record_dropped,
    record_enqueued,
    record_leases_returned,
    record_throttle_denials,
    set_dependency_up,
)

log = logging.getLogger(__name__)

HEARTBEAT_EVERY = 5.0  # seconds between heartbeats (their TTL is HEARTBEAT_TIMEOUT)
REDIS_BACKOFF = 1.0  # seconds an unanswered pop waits before the next try
# Seconds between ticks while blocked for work: the heartbeat, a SIGTERM or a throttle change is
# seen within it. Ticking every flush interval (0.05 s) there cost an idle crawler 1.3 % of a core,
# 0.1 % at 1 s (issue 37, 30 s from /proc, load 1.3).
IDLE_TICK = 1.0


class MeteredLeaseBook(LeaseBook):
    """A LeaseBook that counts each flush's enqueue statuses (queued, duplicate, page_limit, ...)
    in the metrics: one Counter per flush, not per link."""

    def _learn(self, batch: Settlement, out: dict[str, list[str]]) -> None:
        super()._learn(batch, out)
        for status, n in Counter(out["requests"]).items():
            if status == "queued":
                record_enqueued(self.spiderid, n)
            elif status != "replayed":
                record_dropped(self.spiderid, status, n)
        duplicates = sum(batch.duplicates.values())  # found links dropped in process as known duplicates
        if duplicates:
            record_dropped(self.spiderid, "duplicate", duplicates)


class DistributedScheduler:
    def __init__(self, crawler: Crawler, settings: Settings, frontier: Frontier, throttle: ThrottleConfig) -> None:
        self.crawler = crawler
        self.settings = settings
        self.frontier = frontier
        self.throttle = throttle
        self.book = MeteredLeaseBook(frontier, RecentFingerprints(settings.get_int("DUPEFILTER_TIMEOUT") / 2))
        self.pop_batch = settings.get_int("SCHEDULER_POP_BATCH")
        self.prefetch_at = self.pop_batch // 2  # leases left when the next pop starts
        self.fetch = Fetch()
        self.scan_limit = settings.get_int("SCHEDULER_SCAN_LIMIT")
        self.idle_poll = settings.get_float("SCHEDULER_IDLE_POLL")
        # BLPOP's timeout stays well inside the socket timeout, or the client would take it for a dead Redis
        self.idle_wait = min(settings.get_float("SCHEDULER_IDLE_WAIT"), settings.get_float("REDIS_SOCKET_TIMEOUT") / 2)
        self.backlog_blacklist = settings.get_bool("SCHEDULER_BACKLOG_BLACKLIST")
        self.slow_delay = settings.get_float("LADDER_SLOW_DELAY")
        self.leased: deque[Lease] = deque()  # popped from Redis, not yet handed to the engine
        self.local: deque[Request] = deque()  # redirects of leased requests (still under their lease)
        self.next_pop_at = 0.0  # monotonic time before which the frontier is not asked again
        self.crawl_delays: dict[str, float] = {}  # domain -> robots.txt Crawl-delay (s)
        self.ladder_delays: dict[str, float] = {}  # domain -> the ladder's pace (s), set by crawler/ladder.py
        self.last_heartbeat = 0.0
        self.last_delay_write = 0.0
        self.process_id = uuid.uuid4().hex[:12]
        self.host = socket.gethostname()
        self.spider: Spider | None = None
        self._wake_call: Any = None
        self._loops: list[task.LoopingCall] = []
        self._tick_loop: task.LoopingCall | None = None
        self._tick_every = 0.0
        self._redis_up: bool | None = None  # last reported to the metrics
        self.stopping = False  # the engine is stopping (SIGTERM): nothing more is leased
        self.returned = False  # the leases waiting here went back when it began to stop
        self.waiting = False  # the pop thread is blocked on the wake-up key (nothing in flight)
        self.interrupted = False  # a token was pushed to end that wait early
        self._wait_policy: Any = None  # the throttle policy the waiting pop will apply

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DistributedScheduler:
        settings: Settings = crawler.settings["SHOAL"]
        frontier = Frontier.from_settings(settings, redis_client(settings))
        scheduler = cls(crawler, settings, frontier, ThrottleConfig.from_settings(settings))
        connect_settled(crawler, scheduler.on_settled)
        connect_fetched(crawler, scheduler.on_fetched)
        crawler.signals.connect(scheduler.on_robots, signal=signals.robots_parsed)
        return scheduler

    # --- Scrapy's scheduler interface -------------------------------------------------------------
    def open(self, spider: Spider) -> None:
        self.spider = spider
        self.book.spiderid = spider.name
        self.throttle.on_change = lambda: reactor.callFromThread(self._policy_changed)  # type: ignore[attr-defined]
        self.throttle.start(spider.name)
        # a crawl's per-domain `revisit` (crawler/revisit.py) reads the config this scheduler watches
        setattr(spider, "domain_config", lambda: self.throttle.config)  # noqa: B010
        self._tick_every = min(self.idle_poll, self.settings.get_float("SCHEDULER_FLUSH_INTERVAL"))
        self._tick_loop = self._every(self._tick_every, self._tick)
        self._every(self.frontier.lease_timeout / 3, self._extend)
        log.info("Scheduler opened", extra={"spiderid": spider.name, "process_id": self.process_id})

    def close(self, reason: str) -> None:
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self.stopping = True  # a pop answering below starts no wait
        self._interrupt_wait()
        self.fetch.finish_now()  # a pop still running: its leases are held, then returned below
        local = [r.meta[LEASE] for r in self.local if r.meta.get(LEASE) is not None]
        released = 0
        try:
            self.book.flush()
            released = self.book.release_all([*self.leased, *local])
        except RedisError:
            log.exception("Could not return leases on close; the reaper will re-queue them")
        record_leases_returned(getattr(self.spider, "name", ""), released)
        self.throttle.stop()
        log.info(
            "Scheduler closed",
            extra={"reason": reason, "released_leases": released, "settled": self.book.settled,
                   "round_trips": self.frontier.round_trips, "spiderid": getattr(self.spider, "name", None)},
        )  # fmt: skip

    def has_pending_requests(self) -> bool:
        return bool(self.leased or self.local)

    def enqueue_request(self, request: Request) -> bool:
        if LEASE in request.meta:
            self.local.append(request)  # still under its original lease (a redirect)
            return True
        assert self.spider is not None
        policy = self.throttle.policy()
        drop = frozenset() if self.backlog_blacklist else policy.blacklist
        key = child_key(request, self.spider)
        self._interrupt_wait()  # (a late callback of an idle crawler) its link is written at once
        if key is not None and key in self.book.recent:
            self.book.count_duplicate(key)  # Redis already holds it: no record, no payload, no Lua
            return True  # accounted for (as Redis' duplicates are); False would cost a signal per link
        try:
            entry = new_request(request, self.spider, drop, key[3] if key else None)
        except UnstorableRequest as exc:
            log.error("Dropped a request the frontier cannot store", extra={"url": request.url, "error": str(exc)})
            return False
        if entry is None:
            log.warning("Dropped a request without a host", extra={"url": request.url})
            return False
        self.book.add_request(entry)
        return True

    def next_request(self) -> Request | None:
        if self.local:
            return self.local.popleft()
        # Found links waiting in the buffer are work too: they are written in the pop's round trip.
        due = time.monotonic() >= self.next_pop_at or bool(self.book.pending.requests)
        if len(self.leased) <= self.prefetch_at and due and self.throttle.ready and not self.fetch.running \
                and not self.stopping:  # fmt: skip
            self._start_pop()
        assert self.spider is not None
        while self.leased:
            lease = self.leased.popleft()
            if _expired(lease.record):
                self.book.settle(lease, "dropped_expired")
                continue
            return request_from_lease(lease, self.spider)
        return None

    # --- Shoal's additions ------------------------------------------------------------------------
    def on_settled(
        self, lease: Lease, outcome: str = "crawled", details: dict[str, Any] | None = None, **_: Any
    ) -> None:
        """Called by the pipeline once a page is confirmed on Kafka, or a try ended without one."""
        self.book.settle(lease, outcome, details, self.throttle.policy().key(lease.domain))
        self._interrupt_wait()  # the last page's items confirmed while idle: its ack goes at once

    def on_fetched(self, lease: Lease, at: float) -> None:
        """A lease fetched well after it was handed out (robots.txt first, a busy downloader): its
        domain's next moderated slot, and the pause of a delay spacing its hits, count from the
        fetch, so no two fetches of a domain come closer than the throttle allows, whatever this
        process's own queueing."""
        policy = self.throttle.policy()
        hits, window = policy.overrides.get(lease.domain, (policy.hits, policy.window))
        interval = window / hits if policy.moderated and hits > 1 else 0.0
        # a delay spaces the domain's hits too: its Crawl-delay, the ladder's at levels 1-3 (crawler/ladder.py)
        slow = self.slow_delay if lease.level is not None and 0 < lease.level < 4 else 0.0
        spacing = max(interval, slow, self.crawl_delays.get(lease.domain, 0.0))
        if not spacing or not lease.received or at - lease.received < LATE_FETCH_SHARE * spacing:
            return
        try:
            self.frontier.fetched_late(lease, policy.key(lease.domain), at, interval)
        except RedisError as exc:
            log.warning("Could not record a late fetch", extra={"domain": lease.domain, "error": str(exc)})

    def on_robots(self, robotparser: Any, request: Request, **_: Any) -> None:
        """A robots.txt Crawl-delay becomes the minimum gap between hits of that domain, cluster-wide."""
        agent = self.crawler.settings.get("ROBOTSTXT_USER_AGENT") or request.headers.get(
            b"User-Agent", self.settings.get_str("USER_AGENT")
        )
        delay = robotparser.crawl_delay(agent)
        if not delay:
            return
        domain = url_domain(request.url)
        self.crawl_delays[domain] = min(float(delay), self.settings.get_float("THROTTLE_PAUSE_MAX"))
        log.info("Applying robots.txt Crawl-delay", extra={"domain": domain, "delay": self.crawl_delays[domain]})
        self._write_crawl_delays({domain: self.crawl_delays[domain]})

    def flush(self) -> None:
        """Write buffered links, retries, dead letters and acks: one round trip (unless a pop
        thread is writing: then they go with the next pop, in order)."""
        if not self.fetch.running:
            self.book.flush()

    def _start_pop(self) -> None:
        """Write what is buffered and lease new work in a thread, so the reactor keeps crawling.

        It starts while leases are still waiting (SCHEDULER_POP_BATCH / 2 or fewer), so the next
        batch is usually there before the engine asks. One runs at a time; meanwhile the tick
        writes nothing, so writes reach Redis in the order they were made (a page's links before
        its ack: the crawl never looks finished in between).
        """
        assert self.spider is not None
        batch, name, policy = self.book.take(), self.spider.name, self.throttle.policy()
        self.fetch.start(lambda: self.frontier.settle_and_pop(batch, name, self.pop_batch, policy, self.scan_limit),
                         batch, self._popped)  # fmt: skip

    def _popped(self, batch: Settlement, result: Any, error: BaseException | None) -> None:
        """In the reactor: the pop thread's answer."""
        if self.waiting:
            self._set_tick(self._tick_every)
        self.waiting = self.interrupted = False
        if error is not None:
            self.book.put_back(batch)
            if not isinstance(error, RedisError):
                log.error("Pop failed; will retry", extra={"error": repr(error)})
            else:
                log.warning("Could not pop from Redis; backing off", extra={"error": str(error)})
            self.next_pop_at = time.monotonic() + REDIS_BACKOFF
            self._redis_answers(False)
            return
        out, popped = result
        self.book.popped(batch, out, popped)
        self._redis_answers(True)
        if popped.denied:
            record_throttle_denials(self.book.spiderid, popped.denied)
        self.leased.extend(popped.leases)
        if popped.leases or self.book.pending.requests:
            self._wake_engine()  # links found while the pop ran are written by the next one, at once
            return
        if popped.retry_after is None and self._idle():
            self._start_wait()  # nothing queued at all (throttled work is polled for, as before)
            return
        # Nothing to hand out: ask again when the first throttled domain or retry is ready, or after the idle poll.
        wait = self.idle_poll if popped.retry_after is None else min(popped.retry_after, self.idle_poll)
        self.next_pop_at = time.monotonic() + wait
        if popped.retry_after is not None and popped.retry_after < self.idle_poll:
            self._schedule_wake(popped.retry_after)

    def _idle(self) -> bool:
        """Nothing leased, in flight or left to write: a blocking wait delays nothing."""
        if self.idle_wait <= 0 or not self.frontier.can_wait or self.stopping:
            return False
        if self.leased or self.local or self.book.pending or self.book.releases or self.book.held:
            return False
        slot = getattr(self.crawler.engine, "_slot", None)
        return not getattr(slot, "inprogress", True)

    def _start_wait(self) -> None:
        """In a thread: block on the spider's wake-up key until work arrives (or SCHEDULER_IDLE_WAIT
        passes), then pop; answered by `_popped`."""
        assert self.spider is not None
        timeout = self.idle_wait
        batch, name, policy = self.book.take(), self.spider.name, self.throttle.policy()

        def wait_then_pop() -> Any:
            self.frontier.wait_for_work(name, timeout)
            return self.frontier.settle_and_pop(batch, name, self.pop_batch, policy, self.scan_limit)

        self.waiting, self._wait_policy = True, policy
        self._set_tick(IDLE_TICK)
        self.fetch.start(wait_then_pop, batch, self._popped)

    def _interrupt_wait(self) -> None:
        """End a blocking wait now (something to write, or closing): push our own wake-up token."""
        if not self.waiting or self.interrupted or self.spider is None:
            return
        self.interrupted = True
        try:
            self.frontier.wake(self.spider.name)
        except RedisError as exc:
            log.warning("Could not end the idle wait; it ends by itself", extra={"error": str(exc)})

    def _every(self, seconds: float, func: Any) -> task.LoopingCall:
        loop = task.LoopingCall(func)
        loop.start(seconds, now=True)
        self._loops.append(loop)
        return loop

    def _set_tick(self, seconds: float) -> None:
        """Tick every `seconds` from now on (not once closing has stopped the loops)."""
        loop = self._tick_loop
        if loop is not None and loop.running and loop.interval != seconds:
            loop.stop()
            loop.start(seconds, now=False)

    def _schedule_wake(self, delay: float) -> None:
        if self._wake_call is None or not self._wake_call.active():
            self._wake_call = reactor.callLater(delay, self._wake_engine)  # type: ignore[attr-defined,arg-type]

    def _policy_changed(self) -> None:
        """A ZooKeeper override or blacklist (or the public IP) changed: an idle wait ends, so the
        next pop applies it at once."""
        if self.waiting and self.throttle.policy() is not self._wait_policy:
            self._interrupt_wait()

    def _tick(self) -> None:
        mark_loop()
        if not self.returned and getattr(self.crawler.engine, "_stopping", False):
            self._return_waiting()
        try:
            self.flush()
            self._heartbeat()
            self._redis_answers(True)
        except RedisError as exc:
            log.warning("Could not write to Redis; will retry", extra={"error": str(exc)})
            self._redis_answers(False)
        except Exception:
            log.exception("Scheduler tick failed; will retry")
        if not self.has_pending_requests() and not self.fetch.running:
            self._wake_engine()  # (a pop running wakes it when it answers)

    def _return_waiting(self) -> None:
        """SIGTERM (a scale-down): lease nothing more, and give back at once the leases that wait
        here, instead of after the downloads under way (Scrapy closes the scheduler only when they
        are done); those finish, and their pages are sent, before the process exits (issue 32)."""
        self.stopping = True
        if self.fetch.running:
            self._interrupt_wait()
            return  # a pop in flight: its leases arrive first, the next tick returns them
        waiting = [*self.leased, *(r.meta[LEASE] for r in self.local if r.meta.get(LEASE) is not None)]
        try:
            self.book.flush()
            released = self.book.release(waiting)
        except RedisError as exc:
            log.warning("Could not return leases on stopping; will retry", extra={"error": str(exc)})
            return
        self.leased.clear()
        self.local.clear()
        self.returned = True
        record_leases_returned(getattr(self.spider, "name", ""), released)
        log.info("Returned waiting leases on stopping",
                 extra={"released_leases": released, "spiderid": getattr(self.spider, "name", None)})  # fmt: skip

    def _redis_answers(self, up: bool) -> None:
        if up is not self._redis_up:
            self._redis_up = up
            set_dependency_up("redis", up)

    def _extend(self) -> None:
        try:
            self.book.extend()
        except RedisError as exc:
            log.warning("Could not extend leases; will retry", extra={"error": str(exc)})

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
        name = self.spider.name
        key = keys.crawler_heartbeat(self.host, name, self.process_id)
        ttl = self.settings.get_int("HEARTBEAT_TIMEOUT")
        stats.beat(self.frontier.client, "crawler", self.host, f"{name}:{self.process_id}", ttl, key)
        self.frontier.round_trips += 1
        if self.crawl_delays and now - self.last_delay_write > CRAWL_DELAY_TTL / 24:
            self._write_crawl_delays(self.crawl_delays)

    def _write_crawl_delays(self, delays: dict[str, float]) -> None:
        policy = self.throttle.policy()
        for domain, delay in delays.items():
            spacing, hold = hit_spacing(delay, self.ladder_delays.get(domain, 0.0), CRAWL_DELAY_TTL)
            self.frontier.set_throttle_delay(domain, policy.key(domain), spacing, hold)
        self.last_delay_write = time.time()


def _expired(record: dict[str, Any]) -> bool:
    expires = record.get("expires") or 0
    return bool(expires) and time.time() >= float(expires)
