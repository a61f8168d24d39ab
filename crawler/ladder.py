"""Downloader middleware of the block escalation ladder (issue 33): detect, step, fetch at the level.

A request is stamped with its domain's level by the pop that leases it (utils/frontier/lua/pop.lua
reads the level written with the domain's pace, utils/frontier/lua/ladder_pace.lua, so the stamp is
the level whose pace the lease's throttle hit was spent at) and finishes at that level whatever the
domain does while it waits or is fetched (a redirect keeps the stamp). Level 1 and above: the
domain's throttle holds LADDER_SLOW_DELAY between hits cluster-wide (set when it steps up, counted
from the step; lifted when it comes back to 0), and a 429/503's Retry-After holds it back as for any retry. Level 2: the
proxy pool takes the request (with LADDER_PROXY_ONLY, only from there). Level 3: the request moves
to the render spider's queue while render nodes report. Level 4: each request is dead-lettered.
A domain steps over 2 without a proxy pool (PROXY_LIST) and over 3 while no render node reports.
A request moved to the render spider carries `ladder_of` (its spider), and so do the requests found
on its pages: what their pages show, clean or a block, counts on that spider's ladder, so a domain
at 3 comes down after M clean rendered pages.

A response the detector calls a block counts against the domain (unless its try was stamped below the
domain's level: that step was already taken) and is retried through Redis (`Blocked`), so it is fetched
again at the level the domain has by then (a status only when RETRY_HTTP_CODES has it), on a budget of
its own: enough blocks for the domain to climb every rung it may use, not RETRY_TIMES. A clean page
of a domain above 0 counts towards its way down.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import replace
from typing import Any

from redis.exceptions import RedisError
from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response
from scrapy.utils.misc import load_object

from crawler.blocks import Detection, Detector
from crawler.meta import LEASE
from crawler.pacing import hit_spacing
from crawler.retry import Blocked
from crawler.signals import lease_settled
from utils.config.clients import redis_client
from utils.config.settings import Settings
from utils.frontier import keys
from utils.frontier.block_config import LEVEL_NAMES, LadderRules
from utils.frontier.ladder import Ladder, Step, rules_from_settings
from utils.observability.metrics import record_block
from utils.proxies.pool import parse_proxy_list

log = logging.getLogger(__name__)

LEVEL = "shoal_ladder_level"  # request meta: the level the request is fetched at
LADDER_OF = "ladder_of"  # request meta (inherited, crawler/meta.py): the spider whose ladder it counts on
SLOWER, PROXIED, RENDERED, PAUSED = 1, 2, 3, 4


_ATTRIBUTE = "_shoal_ladder"


def ladder_of(crawler: Any) -> LadderMiddleware | None:
    """The crawler's ladder middleware, None when block detection is off."""
    return getattr(crawler, _ATTRIBUTE, None)


class DomainPaused(IgnoreRequest):
    """The domain is at level 4: the request is dead-lettered at once (crawler/retry.py)."""

    dead_at_once = True


class MovedToRender(IgnoreRequest):
    """The request went to the render spider's queue; its lease is already settled."""


class LadderMiddleware:
    def __init__(self, crawler: Crawler, settings: Settings, ladder: Ladder, detector: Detector) -> None:
        self.crawler, self.ladder, self.detector = crawler, ladder, detector
        self.rules = rules_from_settings(settings)
        self.enabled = settings.get_bool("LADDER_ENABLED")
        self.refresh = settings.get_float("LADDER_REFRESH")
        self.slow_delay = settings.get_float("LADDER_SLOW_DELAY")
        self.state_ttl = settings.get_int("LADDER_STATE_TTL")
        self.render_spider = settings.get_str("LADDER_RENDER_SPIDER")
        self.render_alive = settings.get_float("HEARTBEAT_TIMEOUT")
        self.retry_codes = {int(code) for code in settings.get_list("RETRY_HTTP_CODES")}
        self.retry_times = settings.get_int("RETRY_TIMES")
        self.has_proxies = bool(parse_proxy_list(settings.get_str("PROXY_LIST")))
        self.by = f"{socket.gethostname()}:{os.getpid()}"
        self.cache: dict[str, tuple[float, int]] = {}  # domain -> (read at, level)
        self.renderers: tuple[float, bool] = (0.0, False)
        setattr(crawler, _ATTRIBUTE, self)  # found by crawler/items_vanished.py

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LadderMiddleware:
        settings: Settings = crawler.settings["SHOAL"]
        signs = (settings.get_list("BLOCK_STATUSES"), settings.get_list("BLOCK_MARKERS"),
                 settings.get_float("BLOCK_SMALL_RATIO"), settings.get_bool("BLOCK_LINKS_VANISHED"),
                 settings.get_bool("BLOCK_ITEMS_VANISHED"), settings.get_bool("LADDER_ENABLED"))  # fmt: skip
        if not any(signs):
            raise NotConfigured("block detection is off")
        detector = load_object(settings.get_str("BLOCK_DETECTOR")).from_settings(settings)
        ladder = Ladder.from_settings(settings, redis_client(settings, decode=True))
        return cls(crawler, settings, ladder, detector)

    # --- Scrapy's downloader middleware interface --------------------------------------------------
    def process_request(self, request: Request) -> None:
        lease, spider = request.meta.get(LEASE), self.crawler.spider
        if lease is None or spider is None or not self.enabled:
            return
        if LEVEL not in request.meta:
            request.meta[LEVEL] = self.stamp(spider, lease)
        level = request.meta[LEVEL]
        if level >= PAUSED:
            raise DomainPaused(f"domain {lease.domain} is paused (ladder level 4)")
        if level < self.cache.get(lease.domain, (0.0, 0))[1] < PAUSED:
            self.fetched_below(lease)
        if level == RENDERED and spider.name != self.render_spider and self.render_nodes():
            self.move_to_render(request, spider, lease)

    def process_response(self, request: Request, response: Response) -> Response:
        lease, spider = request.meta.get(LEASE), self.crawler.spider
        if lease is None or spider is None:
            return response
        blocks = self.domain_blocks(spider, lease.domain)
        found = self.detector.detect(response, lease.domain, blocks.markers if blocks else ())
        level, owner = int(request.meta.get(LEVEL, 0)), request.meta.get(LADDER_OF)
        counted_here = not owner or owner == spider.name
        if found is not None:
            self.count_block(spider, lease.domain, request.meta, response.url, found)
            if self.retried(request, response):
                raise Blocked(response, found.reason, level, self.block_budget(spider, lease.domain))
        elif not counted_here or level > 0 or self.cache.get(lease.domain, (0.0, 0))[1] > 0:
            self.step(spider, lease.domain, self.clean, "clean", owner if not counted_here else None)
        return response

    def count_block(self, spider: Spider, domain: str, meta: dict[str, Any], url: str, found: Detection) -> None:
        """A detection on a response of a leased request (`meta`: its request's), here or by
        crawler/items_vanished.py: counted, logged, and a step up unless its try was stamped below."""
        level, owner = int(meta.get(LEVEL, 0)), meta.get(LADDER_OF)
        record_block(spider.name, found.reason)
        log.warning("Block detected", extra={"spiderid": spider.name, "domain": domain, "url": url,
                                             "reason": found.reason, "detail": found.detail, "ladder_level": level})
        if owner and owner != spider.name:  # rendered for another spider's ladder: a block there climbs it (to 4)
            self.step(spider, domain, self.ladder.detect, found.reason, owner)
        elif level >= self.cache.get(domain, (0.0, 0))[1]:  # a try stamped below: already answered
            self.step(spider, domain, self.ladder.detect, found.reason)

    def clean(self, spiderid: str, domain: str, reason: str, by: str, rules: LadderRules) -> Step:
        return self.ladder.clean(spiderid, domain, 1, by, rules)

    def stamp(self, spider: Spider, lease: Any) -> int:
        """The level a leased request is fetched at: pinned in ZooKeeper, else the one its pop stamped
        (the level whose pace its throttle hit was spent at: only fetches made at a rung's own pace
        count against it), else (a lease no pop made) the domain's level now."""
        now = self.level(spider, lease.domain)  # also keeps the pops' copy current (a level set by hand)
        blocks = self.domain_blocks(spider, lease.domain)
        if lease.level is None or (blocks is not None and blocks.pinned is not None):
            return now
        return int(lease.level)

    def block_budget(self, spider: Spider, domain: str) -> int:
        """Blocks a request may meet before it is dead-lettered as blocked: enough for its domain to
        climb every rung it may use on this request's detections alone (RETRY_TIMES with the ladder off)."""
        if not self.enabled:
            return self.retry_times
        blocks = self.domain_blocks(spider, domain)
        rules = self.usable(blocks.rules_over(self.rules) if blocks is not None else self.rules)
        return max(rules.up_after * len(rules.levels), self.retry_times)

    def retried(self, request: Request, response: Response) -> bool:
        """A block is tried again through Redis, at the domain's level by then: a 200 (CAPTCHA, shell)
        always; a status when it is one of RETRY_HTTP_CODES (else it stays a page, as before)."""
        if request.meta.get("dont_retry"):
            return False
        return response.status == 200 or response.status in self.retry_codes

    # --- Levels -----------------------------------------------------------------------------------
    def level(self, spider: Spider, domain: str) -> int:
        """The domain's level: pinned in ZooKeeper, else Redis' (re-read every LADDER_REFRESH)."""
        blocks = self.domain_blocks(spider, domain)
        if blocks is not None and blocks.pinned is not None:
            return blocks.pinned
        read_at, level = self.cache.get(domain, (-self.refresh, 0))
        if time.monotonic() - read_at >= self.refresh:
            self.read_levels(spider, [domain])
            level = self.cache[domain][1]
        return level

    def read_levels(self, spider: Spider, domains: list[str]) -> None:
        """Redis' levels of `domains` into the cache, in one round trip; a level changed elsewhere (by
        hand, `shoal domain`, or another crawler) changes the domain's throttle here too."""
        last = {domain: self.cache.get(domain, (0.0, 0))[1] for domain in domains}
        try:
            levels = self.ladder.levels(spider.name, domains)
        except RedisError as exc:  # keep the last view; Redis decides again at the next read
            log.warning("Could not read ladder levels", extra={"domains": domains[:10], "error": str(exc)})
            levels = last
        now = time.monotonic()
        for domain, level in levels.items():
            self.cache[domain] = (now, level)
            if level != last[domain]:
                self.pace(spider, domain, level)

    def step(self, spider: Spider, domain: str, event: Any, reason: str, owner: str | None = None) -> None:
        """One event on the domain's ladder (of `owner`, a spider that moved it here, else this
        spider's); a step is logged and, on this spider's own ladder, its throttle changed."""
        if not self.enabled:
            return
        blocks = self.domain_blocks(spider, domain)
        rules = self.usable(blocks.rules_over(self.rules) if blocks is not None else self.rules)
        try:
            step: Step = event(owner or spider.name, domain, reason, self.by, rules)
        except RedisError as exc:
            log.warning("Could not record a ladder event", extra={"domain": domain, "error": str(exc)})
            return
        if owner is not None:  # the owner's crawlers read the step at their next LADDER_REFRESH
            if step.changed:
                log.warning("Domain ladder step", extra={
                    "spiderid": owner, "domain": domain, "from": step.before, "to": step.level,
                    "state": LEVEL_NAMES[step.level], "reason": reason, "rendered_by": spider.name})  # fmt: skip
            return
        self.cache[domain] = (time.monotonic(), step.level)
        if step.changed:
            self.stepped(spider, domain, step, reason)

    def usable(self, rules: LadderRules) -> LadderRules:
        """The rungs that can work here: 2 only with a proxy pool, 3 only while render nodes report."""
        gone = ({PROXIED} if not self.has_proxies else set()) | ({RENDERED} if not self.render_nodes() else set())
        if not gone & set(rules.levels):
            return rules
        return replace(rules, levels=tuple(level for level in rules.levels if level not in gone))

    def stepped(self, spider: Spider, domain: str, step: Step, reason: str) -> None:
        log.warning("Domain ladder step", extra={
            "spiderid": spider.name, "domain": domain, "from": step.before, "to": step.level,
            "state": LEVEL_NAMES[step.level], "reason": reason})  # fmt: skip
        self.pace(spider, domain, step.level)

    def pace(self, spider: Spider, domain: str, level: int) -> None:
        """The domain's level for the pops to stamp, with its pace: LADDER_SLOW_DELAY between two hits,
        cluster-wide, at levels 1-3 (from now on: the first slow fetch too comes that long after the
        step); lifted at 0 and at 4 (paused: its requests are dead-lettered as they come)."""
        scheduler = self.scheduler()
        if scheduler is None:
            return
        slow = self.slow_delay if 0 < level < PAUSED else 0.0
        if slow:
            scheduler.ladder_delays[domain] = slow
        else:
            scheduler.ladder_delays.pop(domain, None)
        delay, hold = hit_spacing(scheduler.crawl_delays.get(domain, 0.0), slow, self.state_ttl if level else 1)
        try:
            key = scheduler.throttle.policy().key(domain)
            scheduler.frontier.set_ladder_pace(spider.name, domain, key, level, delay, hold)
        except RedisError as exc:
            log.warning("Could not change a domain's throttle delay", extra={"domain": domain, "error": str(exc)})

    def fetched_below(self, lease: Any) -> None:
        """A request leased before its domain stepped to a slower rung, fetched after the step: the
        slow pace counts from this fetch too (less SLOT_SLACK), so the first fetch at the new rung
        keeps LADDER_SLOW_DELAY from it (utils/frontier/lua/fetched.lua)."""
        scheduler = self.scheduler()
        if scheduler is None:
            return
        try:
            scheduler.frontier.fetched_late(lease, scheduler.throttle.policy().key(lease.domain), time.time(), 0.0)
        except RedisError as exc:
            log.warning("Could not record a fetch below the domain's level",
                        extra={"domain": lease.domain, "error": str(exc)})  # fmt: skip

    def scheduler(self) -> Any:
        """The crawl's distributed scheduler (its frontier and throttle), None before the crawl starts."""
        try:
            engine = self.crawler.engine
        except RuntimeError:  # Scrapy 2.13 raises before the crawl starts: no scheduler, no throttle yet
            return None
        scheduler = getattr(getattr(engine, "_slot", None), "scheduler", None)
        return scheduler if scheduler is not None and hasattr(scheduler, "throttle") else None

    def render_nodes(self) -> bool:
        """Whether a render process reported within HEARTBEAT_TIMEOUT (read at most every LADDER_REFRESH)."""
        now = time.monotonic()
        if now - self.renderers[0] >= self.refresh:
            try:
                alive = bool(self.ladder.client.zcount(keys.RENDERERS, time.time() - self.render_alive, "+inf"))
            except RedisError:
                alive = self.renderers[1]
            self.renderers = (now, alive)
        return self.renderers[1]

    def move_to_render(self, request: Request, spider: Spider, lease: Any) -> None:
        """Queue the request for the render spider (its own dupefilter) and settle this lease."""
        scheduler = self.crawler.engine._slot.scheduler  # type: ignore[union-attr]
        meta = {k: v for k, v in request.meta.items() if k not in (LEASE, LEVEL) and not k.startswith("download_")}
        moved = request.replace(meta={**meta, "spiderid": self.render_spider, LADDER_OF: spider.name},
                                dont_filter=True)
        scheduler.enqueue_request(moved)
        lease_settled(self.crawler, request.meta.pop(LEASE), "rerouted", {})
        log.info("Moved a request to the render spider",
                 extra={"spiderid": spider.name, "domain": lease.domain, "url": request.url})  # fmt: skip
        raise MovedToRender(f"{request.url} moved to {self.render_spider}")

    def domain_blocks(self, spider: Spider, domain: str) -> Any:
        config = getattr(spider, "domain_config", None)
        return config().domain_blocks(domain) if config is not None else None
