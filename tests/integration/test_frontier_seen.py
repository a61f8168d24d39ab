"""The self-sizing dupefilter (DUPEFILTER_MODE auto): exact while small, then Bloom stages, by itself."""

from __future__ import annotations

import pytest
import redis

from redis_monitor.crawl_info import dupefilter_view
from utils.frontier import Frontier, NewRequest, keys
from utils.frontier.fingerprint import fingerprint, stage_shape
from utils.frontier.progress import CrawlRef
from utils.frontier.shards import Shards

pytestmark = pytest.mark.integration
EXACT_MAX = 50


def links(n: int, start: int = 0) -> list[NewRequest]:
    urls = [f"http://a.com/p/{i}" for i in range(start, start + n)]
    return [NewRequest("link", "a.com", 1, "app", "big", " 1 1 0 //x", fingerprint(url)) for url in urls]


def test_a_crawl_switches_to_bloom_stages_past_its_exact_part_and_forgets_nothing(redis_db: redis.Redis) -> None:
    frontier = Frontier(redis_db, exact_max=EXACT_MAX, false_drop=1e-6)
    first = [s for i in range(0, 2000, 500) for s in frontier.enqueue(links(500, i))]
    assert first.count("queued") == 2000  # no false drop among 2,000 new URLs (bound 1e-6 each)
    again = [s for i in range(0, 2000, 500) for s in frontier.enqueue(links(500, i))]
    assert again == ["duplicate"] * 2000  # a Bloom filter never forgets: no URL queued twice
    tag = Shards.for_client(redis_db).tag("a.com")
    assert redis_db.scard(tag + keys.dupefilter("link", "big")) == EXACT_MAX
    state = {k.decode(): int(v) for k, v in redis_db.hgetall(tag + keys.dupefilter_stages("link", "big")).items()}
    assert state["n"] == 6  # 50 exact, then stages of 50, 100, 200, 400, 800 and 1,600 (part full)
    assert state["a"] == 1950 - (50 + 100 + 200 + 400 + 800)
    for i in range(state["n"]):
        assert (state[f"m{i}"], state[f"k{i}"], state[f"c{i}"]) == stage_shape(EXACT_MAX, 1e-6, i)  # Lua = Python
        assert redis_db.strlen(tag + keys.dupefilter_stage("link", "big", i)) == (state[f"m{i}"] + 7) // 8
    view = dupefilter_view(redis_db, CrawlRef("link", "app", "big"))
    assert (view["mode"], view["seen"]) == ("bloom", 2000)
    assert 0 < view["false_drop_rate"] <= 1e-6


def test_a_small_crawl_stays_exact(redis_db: redis.Redis) -> None:
    frontier = Frontier(redis_db, exact_max=EXACT_MAX)
    assert frontier.enqueue(links(EXACT_MAX)) == ["queued"] * EXACT_MAX
    assert frontier.enqueue(links(3)) == ["duplicate"] * 3
    assert dupefilter_view(redis_db, CrawlRef("link", "app", "big")) == {"mode": "exact", "seen": EXACT_MAX,
                                                                          "false_drop_rate": 0.0}  # fmt: skip
