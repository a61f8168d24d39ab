"""The redis monitor's pure parts: ZooKeeper config changes, answer shapes, periods, parsing."""

from __future__ import annotations

import pytest

from redis_monitor.plugins.base import Every, action_answer, is_action
from redis_monitor.plugins.expire import _as_time
from redis_monitor.plugins.zookeeper import apply_change
from redis_monitor.stats_report import spider_of
from utils.jobs.stream import Job


def request(action: str, domain: str = "ebay.com", **extra) -> dict:
    return {"uuid": "u1", "appid": "app", "action": action, "domain": domain, "hits": 0, "window": 0,
            "scale": 1.0, **extra}  # fmt: skip


def test_zookeeper_changes_follow_scrapy_clusters_yaml_format() -> None:
    config = apply_change(None, request("domain-update", "dmoztools.net", hits=60, window=60, scale=0.9))
    assert config == {"domains": {"dmoztools.net": {"window": 60, "hits": 60, "scale": 0.9}}, "blacklist": []}
    config = apply_change(config, request("blacklist-update"))
    assert apply_change(config, request("blacklist-update"))["blacklist"] == ["ebay.com"]  # no duplicates
    config = apply_change(config, request("domain-remove", "dmoztools.net"))
    assert config == {"domains": {}, "blacklist": ["ebay.com"]}
    assert apply_change(config, request("blacklist-remove")) == {"domains": {}, "blacklist": []}
    assert apply_change(config, request("domain-remove", "unknown.com")) == config


def test_zookeeper_changes_keep_unknown_keys_and_survive_a_broken_node() -> None:
    kept = apply_change({"extra": 1, "domains": None}, request("blacklist-update"))
    assert kept == {"extra": 1, "domains": {}, "blacklist": ["ebay.com"]}
    assert apply_change(["not", "a", "mapping"], request("blacklist-update"))["blacklist"] == ["ebay.com"]


def job(request: dict, kind: str = "action") -> Job:
    return Job("1-0", kind, request["uuid"], request["appid"], request, "t/0/1", 0.0)


def test_action_answers_carry_the_common_keys_and_crawlid_only_when_asked() -> None:
    base = {"action": "stop", "appid": "app", "spiderid": "link", "uuid": "u1"}
    answer = action_answer(job({**base, "crawlid": "c1"}), total_purged=3)
    assert set(answer) == {"action", "appid", "spiderid", "uuid", "server_time", "crawlid", "total_purged"}
    assert "crawlid" not in action_answer(job(base))
    assert is_action(job(base), "stop", "info")
    assert not is_action(job(base, kind="stats"), "stop")


def test_every_is_due_once_per_interval_unless_asked_again() -> None:
    now = [100.0]
    every = Every(1.0, lambda: now[0])
    assert every.due()
    assert not every.due()
    now[0] += 1.0
    assert every.due()
    every.again_now()
    assert every.due()


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1999999999", 1999999999.0), ("1.5", 1.5), (None, None), ("0", None), ("soon", None)],
)
def test_timeout_values_are_read_as_times(value: str | None, expected: float | None) -> None:
    assert _as_time(value) == expected


def test_crawler_heartbeat_ids_name_their_spider() -> None:
    assert spider_of("link:1a2b3c4d5e6f") == "link"
    assert spider_of("1a2b3c4d5e6f") == "unknown"
