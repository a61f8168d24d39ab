"""How the pop planner deals a round's leases out to the apps and the shards of a Redis Cluster
(utils/frontier/pop_planner.py, the slot shares of lib/app_limits.lua)."""

from __future__ import annotations

from collections import Counter

import ujson

from utils.frontier.pop_planner import PopPlanner
from utils.frontier.types import Lease, Popped

WEIGHTS = {"w1": 1.0, "w2": 2.0, "w4": 4.0}


def dealt(deals: dict[str, str]) -> Counter[str]:
    total: Counter[str] = Counter()
    for deal in deals.values():
        total.update({app: n for app, (n, _) in ujson.loads(deal).items()})
    return +total


def lease(appid: str, tag: str) -> Lease:
    return Lease("link", "a.com", "m", {"appid": appid, "crawlid": "c"}, tag)


def test_one_redis_gets_no_deal() -> None:
    assert PopPlanner([""]).deals({"": 10}, WEIGHTS.__getitem__) == {"": ""}


def test_a_round_goes_to_the_apps_below_their_share_not_all_to_the_furthest() -> None:
    tags = [f"{{{i}}}" for i in range(12)]
    planner = PopPlanner(tags)
    for tag in tags:  # every shard has work of every app; w1 is furthest below its share
        planner.app_leases[tag] = {"w1": 0, "w2": 1, "w4": 2}
    deals = planner.deals(dict.fromkeys(tags, 1), WEIGHTS.__getitem__)
    # 36 in flight + 12 dealt = 48: by weight about 7, 14 and 27 of them
    assert dealt(deals) == Counter({"w1": 7, "w2": 2, "w4": 3}), deals
    assert all(sum(n for n, _ in ujson.loads(deal).values()) == 1 for deal in deals.values())


def test_an_app_is_dealt_only_to_shards_with_work_of_it_and_forgotten_where_a_deal_missed() -> None:
    planner = PopPlanner(["{0}", "{1}"])
    planner.app_leases = {"{0}": {"w4": 3}, "{1}": {"w1": 1, "w4": 0}}
    deals = planner.deals({"{0}": 2, "{1}": 2}, WEIGHTS.__getitem__)
    assert {app: n for app, (n, _) in ujson.loads(deals["{0}"]).items()} == {"w1": 0, "w4": 2}
    one = {app: n for app, (n, _) in ujson.loads(deals["{1}"]).items()}
    assert one["w4"] >= 1  # its domains there are due: w4 is below its share
    # shard {1} had no due domain of w4 after all: it leased w1 instead and reported only w1
    planner.learn({"{1}": Popped([lease("w1", "{1}")] * 2, None, app_leases={"w1": 3})})
    assert planner.app_leases["{1}"] == {"w1": 3}
    assert ujson.loads(planner.deals({"{1}": 1}, WEIGHTS.__getitem__)["{1}"])["w4"][0] == 0
