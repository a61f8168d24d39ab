"""The per-domain escalation ladder (issue 33) in a real Redis: steps up after N detections in a
window, down after M clean pages, paused until reset by hand, every step kept in the history; and
the crawler's middleware on real Scrapy requests and responses stepping it, retrying blocks,
dead-lettering a paused domain's requests and moving level 3's to the render spider."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from scrapy import Request, Spider
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

from crawler.blocks import BlockDetector
from crawler.ladder import LADDER_OF, LEVEL, DomainPaused, LadderMiddleware, MovedToRender
from crawler.meta import LEASE, record_fields
from crawler.pipelines import dead_letter_reason
from crawler.proxies import POOL, ProxyPoolMiddleware
from crawler.retry import Blocked, RetryableStatus, RetryPolicy
from crawler.signals import connect_settled
from tests.integration.test_frontier import new
from tests.support.services import wait_until
from utils.cli.main import main
from utils.config.settings import Settings
from utils.frontier import Frontier, Lease, Retry, ThrottlePolicy, keys, throttle_state
from utils.frontier.block_config import LadderRules
from utils.frontier.domain_config import DomainConfig
from utils.frontier.ladder import Ladder
from utils.frontier.ladder_metrics import LadderCollector
from utils.frontier.types import SLOT_SLACK
from utils.proxies.pool import ProxyPool, parse_proxy_list

pytestmark = pytest.mark.integration
RULES = LadderRules((0, 1, 2, 3, 4), up_after=3, window=60.0, down_after=2)


@pytest.fixture
def ladder(redis_db: redis.Redis) -> Ladder:
    return Ladder(redis_db, history=5, ttl=600)


def test_steps_up_after_n_detections_and_down_after_m_clean_pages(ladder: Ladder) -> None:
    steps = [ladder.detect("link", "shop.test", "status_429", "c1", RULES).level for _ in range(7)]
    assert steps == [0, 0, 1, 1, 1, 2, 2]  # the window's detections are cleared by each step
    assert ladder.clean("link", "shop.test", 1, "c1", RULES).level == 2
    assert ladder.clean("link", "shop.test", 1, "c1", RULES).level == 1
    ladder.detect("link", "shop.test", "marker", "c1", RULES)  # a detection restarts the clean run
    assert ladder.clean("link", "shop.test", 1, "c1", RULES).level == 1
    assert ladder.clean("link", "shop.test", 1, "c1", RULES).level == 0
    state = ladder.state("link", "shop.test")
    assert [(s["from"], s["to"], s["reason"]) for s in state["history"]] == [
        (1, 0, "clean pages"), (2, 1, "clean pages"), (1, 2, "status_429"), (0, 1, "status_429")]
    assert state["detections"] == 8
    assert state["level"] == 0
    assert state["state"] == "configured"
    assert ladder.domains("link") == {"shop.test": 0}


def test_detections_older_than_the_window_do_not_count(ladder: Ladder) -> None:
    rules = LadderRules((0, 1), up_after=2, window=0.05, down_after=5)
    ladder.detect("link", "slow.test", "status_403", "c1", rules)
    time.sleep(0.1)  # past the 50 ms window
    assert ladder.detect("link", "slow.test", "status_403", "c1", rules).level == 0
    assert ladder.detect("link", "slow.test", "status_403", "c1", rules).level == 1


def test_rungs_the_domain_does_not_use_are_skipped_and_paused_waits_for_a_hand(ladder: Ladder) -> None:
    rules = LadderRules((0, 4), up_after=1, window=60.0, down_after=1)
    assert ladder.detect("link", "ban.test", "status_403", "c1", rules).level == 4
    assert ladder.clean("link", "ban.test", 10, "c1", rules).level == 4  # nothing leaves paused by itself
    assert ladder.state("link", "ban.test")["state"] == "paused"
    step = ladder.set_level("link", "ban.test", 0, reason="reset by hand")
    assert (step.before, step.level) == (4, 0)
    assert ladder.state("link", "ban.test")["history"][0] | {"at": 0} == \
        {"at": 0, "from": 4, "to": 0, "reason": "reset by hand", "by": "hand"}  # fmt: skip


def test_history_is_bounded(ladder: Ladder) -> None:
    for level in [1, 2, 3, 4, 0, 1, 2]:
        ladder.set_level("link", "h.test", level)
    history = ladder.state("link", "h.test")["history"]
    assert [step["to"] for step in history] == [2, 1, 0, 4, 3]  # LADDER_HISTORY 5, newest first


def test_a_level_that_does_not_exist_is_refused(ladder: Ladder) -> None:
    with pytest.raises(ValueError, match="not a level"):
        ladder.set_level("link", "shop.test", 5)


# --- The crawler's middleware ---------------------------------------------------------------------
class Spy(SimpleNamespace):
    """The scheduler's two hooks the middleware uses: enqueue (level 3) and the throttle delay."""

    def enqueue_request(self, request: Request) -> bool:
        self.enqueued.append(request)
        return True


class PacedFrontier(Frontier):
    """The real frontier, keeping the paces the ladder writes (domain, level, delay) for the test."""

    def __init__(self, client: redis.Redis) -> None:
        super().__init__(client, lease_timeout=30)
        self.delays: list[tuple[str, float]] = []
        self.levels: list[tuple[str, int]] = []

    def set_ladder_pace(self, spiderid: str, domain: str, throttle_key: str, level: int, seconds: float,
                        hold: int) -> None:  # fmt: skip
        self.delays.append((domain, seconds))
        self.levels.append((domain, level))
        super().set_ladder_pace(spiderid, domain, throttle_key, level, seconds, hold)


POLICY = ThrottlePolicy(key_prefix="link:", hits=0)  # unthrottled but for the ladder's delay and Retry-After


def ladder_middleware(redis_db: redis.Redis, **overrides: str) -> tuple[LadderMiddleware, Spider, list[Any], Spy]:
    """The middleware of a `link` crawler, its scheduler's real frontier under POLICY, at `overrides`."""
    settings = Settings.load(environ={}, overrides=overrides)
    crawler = get_crawler(settings_dict={"SHOAL": settings})
    frontier = PacedFrontier(redis_db)
    throttle = SimpleNamespace(policy=lambda: POLICY)
    scheduler = Spy(throttle=throttle, frontier=frontier, enqueued=[], delays=frontier.delays, crawl_delays={},
                    ladder_delays={})  # fmt: skip
    crawler.engine = SimpleNamespace(_slot=SimpleNamespace(scheduler=scheduler))  # type: ignore[assignment]
    settled: list[Any] = []
    connect_settled(crawler, lambda lease, outcome, details: settled.append((lease.request_id, outcome)))
    mw = LadderMiddleware(crawler, settings, Ladder(redis_db, 10, 600), BlockDetector.from_settings(settings))
    spider = Spider("link")
    crawler.spider = spider
    config = DomainConfig.parse("domains: {shop.test: {blocks: {markers: ['g-recaptcha']}}}")
    spider.domain_config = lambda: config  # type: ignore[attr-defined]
    return mw, spider, settled, scheduler


@pytest.fixture
def middleware(redis_db: redis.Redis) -> tuple[LadderMiddleware, Spider, list[Any], Spy]:
    return ladder_middleware(redis_db, LADDER_UP_AFTER="2", LADDER_DOWN_AFTER="2", LADDER_REFRESH="0")


def leased(n: int, domain: str = "shop.test") -> Request:
    record = {"appid": "a", "crawlid": "c", "url": f"http://{domain}/{n}", "spiderid": "link"}
    return Request(record["url"], meta={LEASE: Lease("link", domain, f"{n:016x}", record)})


def answer(request: Request, status: int = 200, body: bytes = b"<html><a href='/x'>x</a></html>",
           headers: dict[str, str] | None = None) -> HtmlResponse:  # fmt: skip
    return HtmlResponse(request.url, status=status, body=body, request=request, headers=headers)


def test_blocks_are_retried_and_step_the_domain_up_then_clean_pages_bring_it_down(
    middleware: tuple[LadderMiddleware, Spider, list[Any], Spy],
) -> None:
    mw, spider, _, scheduler = middleware
    for n, response in enumerate([dict(status=429), dict(body=b"<div class='g-recaptcha'></div>")]):
        request = leased(n)
        mw.process_request(request)
        assert request.meta[LEVEL] == 0
        with pytest.raises(RetryableStatus):
            mw.process_response(request, answer(request, **response))  # type: ignore[arg-type]
    assert mw.ladder.state("link", "shop.test")["level"] == 1
    assert scheduler.delays == [("shop.test", 5.0)]  # LADDER_SLOW_DELAY between hits, cluster-wide
    for n in (10, 11):
        request = leased(n)
        mw.process_request(request)
        assert request.meta[LEVEL] == 1
        mw.process_response(request, answer(request))
    state = mw.ladder.state("link", "shop.test")
    assert state["level"] == 0
    assert [s["to"] for s in state["history"]] == [0, 1]
    assert scheduler.delays[-1] == ("shop.test", 0.0)


def test_a_forbidden_page_moves_the_ladder_and_stays_a_page_unless_403_is_retried(
    middleware: tuple[LadderMiddleware, Spider, list[Any], Spy],
) -> None:
    mw, spider, _, _ = middleware
    request = leased(1)
    mw.process_request(request)
    assert mw.process_response(request, answer(request, 403)).status == 403  # not in RETRY_HTTP_CODES
    mw.retry_codes.add(403)
    with pytest.raises(RetryableStatus):
        mw.process_response(request, answer(request, 403))
    assert mw.ladder.state("link", "shop.test")["detections"] == 2


def test_without_proxies_or_render_nodes_the_domain_steps_over_levels_2_and_3(
    middleware: tuple[LadderMiddleware, Spider, list[Any], Spy],
) -> None:
    mw, _, _, _ = middleware
    levels = []
    for n in range(4):
        request = leased(n)
        mw.process_request(request)
        with pytest.raises(RetryableStatus):
            mw.process_response(request, answer(request, 429))
        levels.append(mw.ladder.state("link", "shop.test")["level"])
    assert levels == [0, 1, 1, 4]  # LADDER_UP_AFTER 2: 0 -> 1 -> (no pool, no browser) paused


def test_a_paused_domains_request_is_dead_lettered(middleware: tuple[LadderMiddleware, Spider, list[Any], Spy]) -> None:
    mw, spider, _, _ = middleware
    mw.ladder.set_level("link", "shop.test", 4)
    request = leased(1)
    with pytest.raises(DomainPaused) as raised:
        mw.process_request(request)
    failure = Failure(raised.value)
    policy = RetryPolicy(3, 1.0, 60.0, 600.0, -1, ())
    assert policy.decide(failure, 0).outcome == "dead"


def test_level_3_moves_the_request_to_the_render_spider_while_render_nodes_report(
    middleware: tuple[LadderMiddleware, Spider, list[Any], Spy], redis_db: redis.Redis,
) -> None:
    mw, spider, settled, scheduler = middleware
    mw.ladder.set_level("link", "shop.test", 3)
    mw.ladder.client = redis_db
    request = leased(1)
    mw.process_request(request)  # no render node: fetched here (through the pool, slower)
    assert request.meta[LEVEL] == 3
    assert not scheduler.enqueued
    redis_db.zadd(keys.RENDERERS, {"host:1": time.time()})
    mw.renderers = (0.0, False)
    request = leased(2)
    with pytest.raises(MovedToRender):
        mw.process_request(request)
    moved = scheduler.enqueued[0]
    assert moved.meta["spiderid"] == "render"
    assert record_fields(moved.meta)[LADDER_OF] == "link"  # stored with it: its pages count on link's ladder
    assert LEASE not in moved.meta
    assert moved.url == request.url
    assert settled == [(f"{2:016x}", "rerouted")]


def from_lease(lease: Lease) -> Request:
    return Request(lease.record["url"], meta={LEASE: lease})


def blocked(mw: LadderMiddleware, request: Request, **response: Any) -> Blocked:
    """The request fetched and answered `response` (a block): what the middleware raises."""
    mw.process_request(request)
    with pytest.raises(Blocked) as raised:
        mw.process_response(request, answer(request, **response))
    return raised.value


def test_a_lease_keeps_the_level_its_pop_spent_its_hit_at_and_only_its_rungs_fetches_count(
    redis_db: redis.Redis,
) -> None:
    """Default settings. Leases made at full speed stay at 0 when the domain steps to 1 while they
    wait (as a pop thread's answer does on its way to the reactor): fetched as leased, and their
    blocks do not count at the slow rung, so it takes LADDER_UP_AFTER fetches at its own pace."""
    mw, _, _, scheduler = ladder_middleware(redis_db)
    frontier = scheduler.frontier
    frontier.enqueue([new(f"http://shop.test/{i}", "shop.test") for i in range(8)])
    early = [from_lease(lease) for lease in frontier.pop("link", 5, POLICY).leases]
    assert [r.meta[LEASE].level for r in early] == [0] * 5
    for request in early[:3]:  # LADDER_UP_AFTER (3) refusals at full speed
        blocked(mw, request, status=429)
    assert mw.ladder.state("link", "shop.test")["level"] == 1
    time.sleep(1.0)
    for request in early[3:]:  # leased before the step, fetched a second after it
        fetched = time.time()
        blocked(mw, request, status=429)
        assert request.meta[LEVEL] == 0
    state = mw.ladder.state("link", "shop.test")
    assert (state["level"], state["recent_detections"]) == (1, 0)  # not counted against "slower"
    slow, at = [], []
    for _ in range(3):  # fetched at the slow rung's own pace: these count, and the third steps it up
        (lease,) = wait_until(lambda: frontier.pop("link", 1, POLICY).leases, timeout=15)
        at.append(time.time())
        slow.append(from_lease(lease))
        blocked(mw, slow[-1], status=429)
    assert [r.meta[LEVEL] for r in slow] == [1, 1, 1]
    assert at[0] - fetched >= (1 - SLOT_SLACK) * mw.slow_delay  # the first slow fetch, from the last fetch
    assert mw.ladder.state("link", "shop.test")["level"] == 4  # no proxy pool, no render node: paused
    assert scheduler.frontier.levels == [("shop.test", 1), ("shop.test", 4)]


def test_the_first_slow_fetch_comes_a_slow_delay_after_the_step_though_a_retry_after_ends_sooner(
    redis_db: redis.Redis,
) -> None:
    """Default settings (LADDER_SLOW_DELAY 5 s); 429s with Retry-After 1 step the domain to 1."""
    mw, _, _, scheduler = ladder_middleware(redis_db)
    frontier, slow = scheduler.frontier, mw.slow_delay
    policy = RetryPolicy.from_settings(mw.crawler.settings["SHOAL"], [])
    frontier.enqueue([new(f"http://shop.test/{i}", "shop.test") for i in range(4)])
    requests = [from_lease(lease) for lease in frontier.pop("link", 3, POLICY).leases]
    for n, request in enumerate(requests):
        if n == 2:
            stepping = time.time()
        raised = blocked(mw, request, status=429, headers={"Retry-After": "1"})
        decision = policy.decide(Failure(raised), 0, 0)
        assert (decision.outcome, decision.pause) == ("retry", 1.0)
        lease = request.meta[LEASE]
        frontier.retry([Retry(lease, policy.next_record(lease.record, True), decision.delay,
                              POLICY.key("shop.test"), decision.pause)])  # fmt: skip
    assert mw.ladder.state("link", "shop.test")["level"] == 1
    (first,) = wait_until(lambda: frontier.pop("link", 1, POLICY).leases, timeout=15)
    waited = time.time() - stepping
    assert first.level == 1
    assert waited >= slow, f"the first fetch at level 1 came {waited:.2f} s after the step"
    fetched = time.time() + 1.0  # it waited a second in its crawler before it was fetched
    frontier.fetched_late(first, POLICY.key("shop.test"), fetched, 0.0)
    (second,) = wait_until(lambda: frontier.pop("link", 1, POLICY).leases, timeout=15)
    assert time.time() - fetched >= (1 - SLOT_SLACK) * slow  # counted from the fetch, less the slack


def test_a_level_set_by_hand_reaches_the_next_pop_and_a_crawlers_read_brings_its_pace(redis_db: redis.Redis) -> None:
    mw, _, _, scheduler = ladder_middleware(redis_db)
    frontier = scheduler.frontier
    frontier.enqueue([new(f"http://shop.test/{i}", "shop.test") for i in range(3)])
    mw.ladder.set_level("link", "shop.test", 4, reason="banned us")  # `shoal domain set`
    (lease,) = frontier.pop("link", 1, POLICY).leases
    assert lease.level == 4
    with pytest.raises(DomainPaused):
        mw.process_request(from_lease(lease))
    mw.ladder.set_level("link", "shop.test", 1, reason="try it slower")
    first = from_lease(frontier.pop("link", 1, POLICY).leases[0])
    assert first.meta[LEASE].level == 1
    mw.cache.clear()  # LADDER_REFRESH later
    mw.process_request(first)  # the crawler reads the level: its pace joins it
    assert scheduler.frontier.levels == [("shop.test", 4), ("shop.test", 1)]
    assert frontier.pop("link", 1, POLICY).leases == []  # LADDER_SLOW_DELAY from now


def test_a_ladder_step_keeps_a_longer_robots_crawl_delay_and_a_step_back_to_0_keeps_it_too(
    redis_db: redis.Redis,
) -> None:
    """robots.txt says 8 s; the ladder's slow pace is 5 s: level 1 spaces hits by 8 s, not 5, and the
    step back to 0 leaves the 8 s in place (it used to write 5, then 0)."""
    mw, spider, _, scheduler = ladder_middleware(redis_db, LADDER_REFRESH="0")
    frontier, key = scheduler.frontier, POLICY.key("shop.test")
    frontier.enqueue([new("http://shop.test/1", "shop.test")])
    scheduler.crawl_delays["shop.test"] = 8.0
    frontier.set_throttle_delay("shop.test", key, 8.0, 86400)  # what the scheduler writes on robots.txt

    def delay() -> tuple[float, float]:
        state = throttle_state.read(redis_db, key, "shop.test", frontier.shards.tag("shop.test"))
        assert state is not None
        return state.delay, state.delay_until - time.time()

    mw.ladder.set_level("link", "shop.test", 1, reason="slower")
    mw.level(spider, "shop.test")  # the crawler reads the level: its pace joins it
    assert mw.slow_delay == 5.0
    assert delay()[0] == 8.0
    mw.ladder.set_level("link", "shop.test", 0, reason="clean")
    mw.level(spider, "shop.test")
    spacing, holds = delay()
    assert spacing == 8.0  # still the site's Crawl-delay,
    assert holds > 3600  # for as long as it holds


def test_a_challenge_site_with_markers_alone_reaches_the_browser_rung_at_default_settings(
    redis_db: redis.Redis,
) -> None:
    """Every non-browser answer is a 200 challenge page: the request is retried on the ladder's own
    budget (not RETRY_TIMES) until its domain reaches the render nodes, 0 -> 1 -> 3."""
    mw, _, _, _ = ladder_middleware(redis_db)
    redis_db.zadd(keys.RENDERERS, {"host:1": time.time()})
    policy = RetryPolicy.from_settings(mw.crawler.settings["SHOAL"], [])
    record: dict[str, Any] = {"appid": "a", "crawlid": "c", "url": "http://shop.test/", "spiderid": "link"}
    for _ in range(20):
        request = from_lease(Lease("link", "shop.test", f"{1:016x}", record))
        try:
            raised = blocked(mw, request, body=b"<div class='g-recaptcha'></div>")
        except MovedToRender:
            break
        decision = policy.decide(Failure(raised), int(record.get("attempt", 0)), int(record.get("blocks", 0)))
        assert decision.outcome == "retry", decision
        record = policy.next_record(record, blocked=True)
    else:
        pytest.fail("never moved to the render spider")
    history = mw.ladder.state("link", "shop.test")["history"]
    assert [(s["from"], s["to"], s["reason"]) for s in history] == [(1, 3, "marker"), (0, 1, "marker")]
    assert (record.get("attempt", 0), record["blocks"]) == (0, 6)  # RETRY_TIMES (3) untouched


def test_a_request_blocked_past_its_budget_is_dead_lettered_as_blocked(redis_db: redis.Redis) -> None:
    mw, _, _, _ = ladder_middleware(redis_db, LADDER_LEVELS="[0, 1]")
    policy = RetryPolicy.from_settings(mw.crawler.settings["SHOAL"], [])
    record: dict[str, Any] = {"appid": "a", "crawlid": "c", "url": "http://shop.test/", "spiderid": "link"}
    outcomes = []
    for _ in range(10):
        raised = blocked(mw, from_lease(Lease("link", "shop.test", f"{1:016x}", record)), body=b"g-recaptcha")
        decision = policy.decide(Failure(raised), 0, int(record.get("blocks", 0)))
        outcomes.append(decision.outcome)
        if decision.outcome == "dead":
            break
        record = policy.next_record(record, blocked=True)
    assert outcomes == ["retry"] * 6 + ["dead"]  # LADDER_UP_AFTER (3) x its 2 rungs
    assert decision.error == "Blocked: ladder level 1 (slower), marker, 200 OK"
    assert dead_letter_reason({"error": decision.error, "status_code": 200}) == "blocked"


def test_clean_rendered_pages_bring_the_moving_spiders_domain_down_from_3(
    middleware: tuple[LadderMiddleware, Spider, list[Any], Spy], redis_db: redis.Redis,
) -> None:
    mw, link, _, _ = middleware
    mw.ladder.set_level("link", "shop.test", 3)
    redis_db.zadd(keys.RENDERERS, {"host:1": time.time()})
    render = Spider("render")
    render.domain_config = link.domain_config  # type: ignore[attr-defined]
    mw.crawler.spider = render  # the same middleware on a render node
    for n in (1, 2):  # LADDER_DOWN_AFTER 2
        request = leased(n)
        request.meta[LADDER_OF] = "link"
        mw.process_request(request)
        mw.process_response(request, answer(request))
    state = mw.ladder.state("link", "shop.test")
    assert state["level"] == 1  # 3 -> the rung below that works here (no proxy pool: not 2)
    assert state["history"][0]["reason"] == "clean pages"
    assert mw.ladder.state("render", "shop.test")["level"] == 0  # render's own ladder untouched


# --- By hand: `shoal domain`; seen by Prometheus ---------------------------------------------------
@pytest.mark.single_redis
def test_shoal_domain_sets_shows_and_resets_a_level(redis_db: redis.Redis, capsys: pytest.CaptureFixture[str]) -> None:
    kwargs = redis_db.connection_pool.connection_kwargs
    where = [f"-sREDIS_{name.upper()}={kwargs[name]}" for name in ("host", "port", "db")]
    assert main([*where, "domain", "set", "link", "www.example.com", "4", "--reason", "banned us"]) == 0
    assert "level 4 paused" in capsys.readouterr().out
    assert main([*where, "domain", "set", "link", "example.com", "7"]) == 2  # no such level: refused
    assert main([*where, "domain", "list", "link"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "example.com  4 paused"
    assert main([*where, "domain", "reset", "link", "example.com", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["level"] == 0
    assert [(s["from"], s["to"], s["reason"]) for s in shown["history"]] == [
        (4, 0, "set by hand"), (0, 4, "banned us")]


@pytest.mark.single_redis
def test_the_collector_exports_levels_above_0_and_redis_memory(redis_db: redis.Redis) -> None:
    redis_db.sadd(keys.SPIDERS, "link")
    ladder = Ladder(redis_db, 10, 600)
    ladder.set_level("link", "example.com", 4)
    ladder.set_level("link", "example.org", 0)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in LadderCollector(redis_db).collect() for s in family.samples}  # fmt: skip
    assert samples[("shoal_domain_ladder_level", (("domain", "example.com"), ("spiderid", "link")))] == 4
    assert not any(labels == (("domain", "example.org"), ("spiderid", "link")) for _, labels in samples)
    assert samples[("shoal_redis_memory_used_bytes", ())] > 0
    assert ("shoal_redis_memory_max_bytes", ()) in samples


def test_a_level_pinned_in_zookeeper_wins_over_redis(
    middleware: tuple[LadderMiddleware, Spider, list[Any], Spy],
) -> None:
    mw, spider, _, _ = middleware
    mw.ladder.set_level("link", "shop.test", 1)
    pinned = DomainConfig.parse("domains: {shop.test: {blocks: {level: 4}}}")
    spider.domain_config = lambda: pinned  # type: ignore[attr-defined]
    with pytest.raises(DomainPaused):
        mw.process_request(leased(1))
    spider.domain_config = lambda: DomainConfig.parse("")  # type: ignore[attr-defined]  # the pin removed
    request = leased(2)
    mw.process_request(request)
    assert request.meta[LEVEL] == 1


@pytest.mark.single_redis
def test_with_ladder_proxy_only_a_domain_goes_through_the_pool_from_level_2(redis_db: redis.Redis) -> None:
    crawler = get_crawler()
    pool = ProxyPool(redis_db, parse_proxy_list("http://127.0.0.1:1,http://127.0.0.1:2"), 60.0, 600.0, 3, 3600)
    proxies = ProxyPoolMiddleware(crawler, pool, {403}, 2, 0.0, ())
    proxies.from_level = 2  # LADDER_PROXY_ONLY
    sent = {level: Request("http://shop.test/", meta={LEVEL: level}) for level in (0, 1, 2, 3)}
    for request in sent.values():
        proxies.process_request(request)
    assert {level: POOL in r.meta for level, r in sent.items()} == {0: False, 1: False, 2: True, 3: True}
    assert "proxy" not in sent[1].meta
