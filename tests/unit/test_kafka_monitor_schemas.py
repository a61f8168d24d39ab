"""The action, stats and zookeeper schemas: Scrapy Cluster's fields, limits and defaults exactly.

Also: each plugin's TypedDict has the keys of its schema, and the monitor's validators (no deep
copy) never change the caller's message.
"""

from __future__ import annotations

import typing

import pytest

from kafka_monitor.plugins.action import ActionRequest
from kafka_monitor.plugins.crawl import CrawlRequest
from kafka_monitor.plugins.stats import StatsRequest
from kafka_monitor.plugins.zookeeper import ZookeeperRequest
from utils import schemas
from utils.config.errors import InvalidMessage
from utils.schemas.matching import _nested_defaults, checker

ACTION = {"action": "info", "appid": "testapp", "crawlid": "ABC123", "uuid": "abc12333", "spiderid": "link"}
STATS = {"appid": "testapp", "uuid": "hij1", "stats": "spider"}
CRAWL = {"url": "http://a.com/", "appid": "testapp", "crawlid": "c1"}
ZOOKEEPER = {"uuid": "abc123", "appid": "madisonTest", "action": "domain-update", "domain": "dmoztools.net",
             "hits": 60, "window": 60, "scale": 0.9}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "typed"),
    [("crawl", CrawlRequest), ("action", ActionRequest), ("stats", StatsRequest), ("zookeeper", ZookeeperRequest)],
)
def test_each_typed_dict_has_the_keys_of_its_schema(name: str, typed: type) -> None:
    assert set(typing.get_type_hints(typed)) == set(schemas.schema(name)["properties"])


@pytest.mark.parametrize("name", ["crawl", "action", "stats", "zookeeper"])
def test_every_schema_refuses_unknown_fields(name: str) -> None:
    assert schemas.schema(name)["additionalProperties"] is False


def test_action_fields_and_limits_are_scrapy_clusters() -> None:
    assert checker("action")(ACTION) == ACTION  # nothing to fill in
    assert checker("action")({k: v for k, v in ACTION.items() if k != "crawlid"})  # app-level info
    for action in ("info", "stop", "dead-letters", "replay-dead-letters", "purge-dead-letters"):
        checker("action")({**ACTION, "action": action})
    assert schemas.schema("action")["required"] == ["uuid", "appid", "spiderid", "action"]


def test_stats_default_is_all_and_every_kind_is_accepted() -> None:
    assert checker("stats")({"appid": "testapp", "uuid": "u1"})["stats"] == "all"
    for kind in ("kafka-monitor", "redis-monitor", "crawler", "spider", "machine", "queue", "rest", "all"):
        assert checker("stats")({**STATS, "stats": kind})["stats"] == kind


def test_zookeeper_defaults_are_scrapy_clusters() -> None:
    filled = checker("zookeeper")({k: ZOOKEEPER[k] for k in ("uuid", "appid", "action", "domain")})
    assert (filled["hits"], filled["window"], filled["scale"]) == (0, 0, 1.0)
    assert checker("zookeeper")(ZOOKEEPER) == ZOOKEEPER


@pytest.mark.parametrize(
    ("name", "message", "field"),
    [
        ("action", {**ACTION, "uuid": ""}, "uuid"),
        ("action", {**ACTION, "uuid": "u" * 41}, "uuid"),
        ("action", {**ACTION, "appid": "ab"}, "appid"),
        ("action", {**ACTION, "appid": "a" * 41}, "appid"),
        ("action", {**ACTION, "crawlid": ""}, "crawlid"),
        ("action", {**ACTION, "crawlid": "c" * 41}, "crawlid"),
        ("action", {**ACTION, "action": "expire"}, "action"),  # internal only in Scrapy Cluster
        ("action", {**ACTION, "spiderid": 5}, "spiderid"),
        ("action", {**ACTION, "colour": "red"}, "colour"),
        ("stats", {**STATS, "stats": "everything"}, "stats"),
        ("stats", {**STATS, "appid": "ab"}, "appid"),
        ("stats", {**STATS, "uuid": "u" * 41}, "uuid"),
        ("stats", {**STATS, "crawlid": "x"}, "crawlid"),
        ("zookeeper", {**ZOOKEEPER, "action": "update"}, "action"),
        ("zookeeper", {**ZOOKEEPER, "hits": 1.5}, "hits"),
        ("zookeeper", {**ZOOKEEPER, "window": "60"}, "window"),
        ("zookeeper", {**ZOOKEEPER, "scale": 1.5}, "scale"),
        ("zookeeper", {**ZOOKEEPER, "scale": -0.1}, "scale"),
        ("zookeeper", {**ZOOKEEPER, "domain": None}, "domain"),
        ("crawl", {**CRAWL, "weight": 0}, "weight"),
        ("crawl", {**CRAWL, "weight": 101}, "weight"),
        ("crawl", {**CRAWL, "weight": "2"}, "weight"),
    ],
)
def test_values_out_of_scrapy_clusters_limits_are_refused_naming_the_field(
    name: str, message: dict, field: str
) -> None:
    with pytest.raises(InvalidMessage) as info:
        checker(name)(message)
    assert field in (info.value.cause or "")


@pytest.mark.parametrize(("name", "message"), [("action", ACTION), ("stats", STATS), ("zookeeper", ZOOKEEPER)])
def test_missing_required_fields_are_refused(name: str, message: dict) -> None:
    for field in schemas.schema(name)["required"]:
        with pytest.raises(InvalidMessage):
            checker(name)({k: v for k, v in message.items() if k != field})


def test_a_failed_attempt_leaves_the_message_as_it_was() -> None:
    message = {"uuid": "u1", "appid": "testapp"}  # a stats request: the crawl schema fails first
    with pytest.raises(InvalidMessage):
        checker("crawl")(message)
    assert message == {"uuid": "u1", "appid": "testapp"}  # no crawl defaults left behind
    assert checker("stats")(message) == {"uuid": "u1", "appid": "testapp", "stats": "all"}
    assert message == {"uuid": "u1", "appid": "testapp"}


def test_nested_defaults_are_detected_so_those_schemas_get_a_deep_copy() -> None:
    flat = {"type": "object", "properties": {"a": {"type": "integer", "default": 1}}}
    nested = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"default": 1}}}}}
    assert not _nested_defaults(flat)
    assert _nested_defaults(nested)
    for name in ("crawl", "action", "stats", "zookeeper"):
        assert not _nested_defaults(schemas.schema(name)), name


def test_a_crawl_may_carry_a_weight_and_leave_it_out() -> None:
    assert checker("crawl")({**CRAWL, "weight": 2.5})["weight"] == 2.5
    assert "weight" not in checker("crawl")(dict(CRAWL))  # unset: its app's, else CRAWL_WEIGHT
