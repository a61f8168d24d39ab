"""Lease-time quotas per app (lua/lib/app_limits.lua) on a real Redis and a Redis Cluster: an app over its
max_inflight or pages_per_minute waits where requests are leased; nothing of it is dropped."""

from __future__ import annotations

import time
from collections import Counter

import pytest
import redis
import ujson

from tests.support.frontier_keys import crawl_counters
from utils.frontier import Ack, Frontier, Lease, NewRequest, ThrottlePolicy, crawl_request, keys
from utils.frontier.fingerprint import fingerprint

pytestmark = pytest.mark.integration
OPEN = ThrottlePolicy(hits=0)


def new(appid: str, i: int, page: str = "p") -> NewRequest:
    url = f"http://{appid}{i}.com/{page}"
    record = crawl_request.to_record({"url": url, "appid": appid, "crawlid": "c", "spiderid": "link"})
    return NewRequest("link", f"{appid}{i}.com", 1, appid, "c", fingerprint=fingerprint(url),
                      **crawl_request.encode(record)._asdict())  # fmt: skip


def quotas(client: redis.Redis, **apps: dict[str, int]) -> None:
    client.delete(keys.APPS_QUOTAS)
    fields = {app.replace("DEFAULT", "\tdefault"): ujson.dumps(quota) for app, quota in apps.items()}
    client.hset(keys.APPS_QUOTAS, mapping=fields)


def leased(frontier: Frontier, n: int = 50) -> Counter[str]:
    return Counter(lease.record["appid"] for lease in frontier.pop("link", n, OPEN).leases)


def test_an_app_at_its_max_inflight_waits_until_a_lease_is_settled(redis_db: redis.Redis) -> None:
    quotas(redis_db, capped={"max_inflight": 2})
    frontier = Frontier(redis_db)
    assert frontier.enqueue([new("capped", i) for i in range(5)] + [new("free", i) for i in range(3)]) == ["queued"] * 8
    first = frontier.pop("link", 50, OPEN)
    got = Counter(lease.record["appid"] for lease in first.leases)
    # one shard holds the app's whole quota; on three each holds a third of it, rounded up
    most = 2 if not isinstance(redis_db, redis.RedisCluster) else 3
    assert 1 <= got["capped"] <= most
    assert got["free"] == 3
    assert first.denied >= 1
    assert leased(frontier)["capped"] == 0  # still at its quota: it waits
    assert crawl_counters(redis_db, "link", "capped", "c")["queued"] == 5 - got["capped"]  # nothing dropped
    capped = [lease for lease in first.leases if lease.record["appid"] == "capped"]
    assert frontier.ack([Ack.of(capped[0])]) == ["acked"]
    again: Counter[str] = Counter()
    for _ in range(20):  # the domain rechecks its app within half a second
        again += leased(frontier)
        if again:
            break
        time.sleep(0.1)
    assert again == Counter({"capped": 1})


def test_pages_per_minute_paces_an_app_and_the_default_entry_applies_to_unnamed_apps(redis_db: redis.Redis) -> None:
    quotas(redis_db, DEFAULT={"pages_per_minute": 3}, own={"max_queued": 100})
    frontier = Frontier(redis_db)
    assert set(frontier.enqueue([new("paced", i) for i in range(9)] + [new("own", i) for i in range(4)])) == {"queued"}
    got = leased(frontier) + leased(frontier)
    assert got["own"] == 4  # its own entry has no lease quota: the default's does not apply to it
    if isinstance(redis_db, redis.RedisCluster):
        assert 1 <= got["paced"] <= 3
    else:
        assert got["paced"] == 3
    assert crawl_counters(redis_db, "link", "paced", "c")["queued"] == 9 - got["paced"]


def test_a_quota_changed_in_the_copy_applies_to_the_next_pops(redis_db: redis.Redis) -> None:
    frontier = Frontier(redis_db)
    frontier.apps.refresh = 0.0  # re-read the copy at every call
    quotas(redis_db, app={"max_inflight": 0})
    assert frontier.enqueue([new("app", i) for i in range(3)]) == ["queued"] * 3
    assert leased(frontier)["app"] == 0
    quotas(redis_db, app={})
    total: Counter[str] = Counter()
    for _ in range(20):
        total += leased(frontier)
        if total["app"] == 3:
            break
        time.sleep(0.1)
    assert total["app"] == 3


def test_when_slots_are_the_bottleneck_apps_share_them_by_weight(redis_db: redis.Redis) -> None:
    quotas(redis_db, light={"weight": 1}, heavy={"weight": 4})
    frontier = Frontier(redis_db)
    requests = [new(app, i) for i in range(40) for app in ("light", "heavy")]  # the line alternates
    assert set(frontier.enqueue(requests)) == {"queued"}
    got: Counter[str] = Counter()
    while sum(got.values()) < 25:  # a crawler with 25 slots, each pop filling what is free
        got += leased(frontier, min(3, 25 - sum(got.values())))
    # arrival order gives 12-13 each; by weight, 5 and 20 (on a cluster: dealt out by the pop planner)
    assert got["heavy"] >= 17, got
    assert Frontier(redis_db, slot_shares=False).pop("link", 50, OPEN).leases  # the rest still leased


def test_without_competition_an_app_over_its_share_still_gets_every_due_domain(redis_db: redis.Redis) -> None:
    quotas(redis_db, light={"weight": 1}, heavy={"weight": 4})
    frontier = Frontier(redis_db)
    assert set(frontier.enqueue([new("light", 0)] + [new("heavy", i) for i in range(30)])) == {"queued"}
    got = leased(frontier, 50)  # `heavy` goes over its share after five leases; nobody else is due
    if isinstance(redis_db, redis.RedisCluster):  # a pop asks each shard holding work for at least one
        got += leased(frontier, 50)
    assert got == Counter({"light": 1, "heavy": 30})


def test_apps_on_disjoint_domains_share_the_slots_by_weight_over_every_shard(redis_db: redis.Redis) -> None:
    """A crawler of 35 slots, each step settling its 10 oldest leases and filling up again: its leases
    go to three apps on domains of their own 1:2:4, on a Redis Cluster too (the shards' pops decide at
    once, each seeing only its own few leases, so the caller deals each round out between the apps)."""
    weights = {"w1": 1, "w2": 2, "w4": 4}
    quotas(redis_db, **{app: {"weight": w} for app, w in weights.items()})
    frontier = Frontier(redis_db)
    requests = [new(app, d, str(i)) for i in range(30) for d in range(24) for app in weights]
    assert set(frontier.enqueue(requests)) == {"queued"}
    held: list[Lease] = []
    served: Counter[str] = Counter()
    for step in range(40):
        frontier.ack([Ack.of(lease) for lease in held[:10]])
        held = held[10:]
        while len(held) < 35:
            popped = frontier.pop("link", 35 - len(held), OPEN).leases
            assert popped
            held += popped
            if step >= 10:  # past the first fill, when every app starts level
                served.update(lease.record["appid"] for lease in popped)
    total = sum(served.values())
    shares = {app: round(served[app] / (total * w / 7), 2) for app, w in weights.items()}
    assert all(abs(share - 1) <= 0.15 for share in shares.values()), (shares, served)
