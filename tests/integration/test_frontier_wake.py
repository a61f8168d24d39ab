"""An idle crawler's wake-up key on a real Redis (issue 37): what gives a spider work leaves one
token for a crawler blocked on it, a pop that leaves work ready leaves one for the next crawler,
and a wait with nothing to take times out."""

from __future__ import annotations

import threading
import time

import pytest
import redis

from tests.integration.test_frontier import OPEN, new
from tests.support.frontier_keys import in_shard
from utils.frontier import Frontier, keys

pytestmark = pytest.mark.integration


@pytest.fixture
def frontier(redis_db: redis.Redis) -> Frontier:
    return Frontier(redis_db, lease_timeout=30)


def test_an_enqueue_leaves_one_token_in_its_shard_and_a_pop_leaving_work_ready_another(
    frontier: Frontier, redis_db: redis.Redis
) -> None:
    wake = in_shard(redis_db, keys.wake("link"), "a.test")
    frontier.enqueue([new(f"http://a.test/{i}", "a.test") for i in range(3)])
    frontier.enqueue([new("http://a.test/3", "a.test")])
    assert redis_db.llen(wake) == 1  # at most one, however many enqueues
    assert 0 < redis_db.ttl(wake) <= 60
    redis_db.delete(wake)
    assert len(frontier.pop("link", 2, OPEN).leases) == 2  # a whole batch, two more ready: the next crawler
    assert redis_db.llen(wake) == 1
    redis_db.delete(wake)
    assert len(frontier.pop("link", 8, OPEN).leases) == 2  # the queue emptied: nobody to wake
    assert redis_db.llen(wake) == 0


def test_a_blocked_wait_returns_as_soon_as_work_is_queued_and_times_out_without(
    frontier: Frontier, redis_db: redis.Redis
) -> None:
    if not frontier.can_wait:  # sharded cluster: crawlers poll (one BLPOP cannot watch every shard)
        assert frontier.shards.count > 1
        return
    started = time.monotonic()
    assert frontier.wait_for_work("link", 0.3) is False
    assert 0.25 < time.monotonic() - started < 2
    woken: list[float] = []
    waiter = threading.Thread(target=lambda: frontier.wait_for_work("link", 5) and woken.append(time.monotonic()))
    waiter.start()
    time.sleep(0.2)
    queued_at = time.monotonic()
    frontier.enqueue([new("http://a.test/x", "a.test")])
    waiter.join(6)
    assert woken and woken[0] - queued_at < 0.5  # noqa: PT018 - well inside the 5 s timeout
    frontier.wake("link")  # a crawler ending its own wait
    assert frontier.wait_for_work("link", 2) is True
