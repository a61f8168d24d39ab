"""The dispatcher with the real plugins, on records built in memory (no broker, no Redis).

A message goes to the first plugin (by rank) whose schema it satisfies, defaults filled in; every
message that cannot be handled is answered with API.md's error shape and dead-lettered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from kafka_monitor.batch import Batch, Origin
from kafka_monitor.dispatch import Dispatcher
from kafka_monitor.plugins.crawl import CrawlHandler
from utils.config.errors import InvalidMessage
from utils.config.plugins import load_plugins
from utils.config.settings import Settings
from utils.frontier import crawl_request

CRAWL = {"url": "http://127.0.37.11/", "appid": "testapp", "crawlid": "abc123", "maxdepth": 2, "priority": 90}
INFO = {"action": "info", "appid": "testapp", "crawlid": "ABC123", "uuid": "abc12333", "spiderid": "link"}
STATS = {"appid": "testapp", "uuid": "hij1", "stats": "spider"}
ZOOKEEPER = {"uuid": "abc123", "appid": "madisonTest", "action": "domain-update", "domain": "dmoztools.net",
             "hits": 60, "window": 60, "scale": 0.9}  # fmt: skip


@dataclass
class Record:
    """The fields of a kafka-python ConsumerRecord the dispatcher reads."""

    topic: str
    partition: int
    offset: int
    value: bytes | None
    timestamp: int = 1_700_000_000_000  # milliseconds, as the broker stamps it
    key: bytes | None = None


def records(*values: Any) -> list[Record]:
    raw = [v if isinstance(v, bytes | None) else json.dumps(v).encode() for v in values]
    return [Record("demo.incoming", 0, offset, value) for offset, value in enumerate(raw)]


def dispatcher(**plugins: int | None) -> Dispatcher:
    settings = Settings.load(environ={"SHOAL_PROXY_REQUEST_ALLOWED": "http://proxy:3128"})  # a request's own proxy
    spec = {**settings.get_dict("KAFKA_MONITOR_PLUGINS"), **plugins}
    loaded = load_plugins(spec, settings)
    for plugin in loaded:
        if isinstance(plugin, CrawlHandler):
            plugin.gate = None  # quotas need Redis: tests/integration/test_apps_quotas.py
    return Dispatcher(loaded)


def run(*values: Any, verbose: bool = True, detailed: bool = False, **plugins: int | None) -> Batch:
    return dispatcher(**plugins).process(records(*values), Batch(verbose=verbose, detailed=detailed))


def test_the_default_plugins_load_in_scrapy_clusters_rank_order() -> None:
    assert dispatcher().stat_names == ["ScraperHandler", "ActionHandler", "StatsHandler", "ZookeeperHandler"]
    assert [p.rank for p in dispatcher().plugins] == [100, 200, 300, 400]


def test_none_disables_a_plugin_and_its_requests_match_no_schema() -> None:
    batch = run(STATS, **{"kafka_monitor.plugins.stats.StatsHandler": None})
    assert batch.failed == 1
    assert batch.answers[0]["error"]["message"] == "Did not find schema to validate request"


def test_a_re_ranked_plugin_is_tried_first() -> None:
    reranked = dispatcher(**{"kafka_monitor.plugins.zookeeper.ZookeeperHandler": 50})
    assert reranked.stat_names[0] == "ZookeeperHandler"


def test_a_crawl_request_becomes_one_stored_request_with_defaults() -> None:
    batch = run(CRAWL)
    (request,) = batch.requests
    record = crawl_request.from_record(crawl_request.decode(request.payload, request.profile))
    assert (request.spiderid, request.domain, request.priority) == ("link", "127.0.37.11", 90)
    assert record["maxdepth"] == 2 and record["spiderid"] == "link" and record["expires"] == 0  # noqa: PT018
    assert request.offset == 0 and request.seed and request.fingerprint  # noqa: PT018
    assert batch.handled == {"ScraperHandler": 1} and not batch.answers and not batch.commands  # noqa: PT018


def test_a_crawl_request_with_uuid_is_acknowledged_and_expires_adds_the_timeout_write() -> None:
    batch = run({**CRAWL, "uuid": "ack-1", "expires": 1999999999})
    (ack,) = batch.answers
    assert ack["action"] == "crawl" and ack["status"] == "queued" and ack["uuid"] == "ack-1"  # noqa: PT018
    assert len(batch.commands) == 1  # the timeout key


def test_the_stored_request_leaves_out_what_the_frontier_keys_say() -> None:
    (entry,) = run(CRAWL).requests
    stored = crawl_request.decode(entry.payload, entry.profile)
    assert not set(stored) & crawl_request.KEPT_BY_KEYS  # crawl, request id and ts: named by keys
    assert (entry.appid, entry.crawlid, entry.spiderid, stored["url"]) == ("testapp", "abc123", "link", CRAWL["url"])


@pytest.mark.parametrize(("message", "plugin"), [(INFO, "ActionHandler"), (STATS, "StatsHandler"),
                                                 (ZOOKEEPER, "ZookeeperHandler")])  # fmt: skip
def test_action_stats_and_zookeeper_requests_each_become_one_job_command(message: dict, plugin: str) -> None:
    batch = run(message)
    assert batch.handled == {plugin: 1}
    assert len(batch.commands) == 1 and not batch.answers and not batch.requests  # noqa: PT018


def test_identical_requests_stay_two_jobs() -> None:
    assert len(run(STATS, STATS).commands) == 2


ERRORS = [
    (b"{not json", "Unparseable JSON Received", None),
    (None, "Unparseable JSON Received", "empty"),
    (b"\xff\xfe", "Unparseable JSON Received", None),
    (["a list"], "Did not find schema to validate request", "object"),
    ({**CRAWL, "uuid": "u1", "colour": "red"}, "Did not find schema to validate request", "colour"),
    ({**CRAWL, "uuid": "u2", "priority": 500}, "Did not find schema to validate request", "priority"),
    ({**INFO, "uuid": "u3", "spiderid": 5}, "Did not find schema to validate request", "spiderid"),
    ({**CRAWL, "uuid": "u4", "url": "http://"}, "invalid crawl request", "url"),
    ({**CRAWL, "uuid": "u4a", "url": "http://169.254.169.254/latest/meta-data/"}, "refused crawl request",
     "address policy (address)"),
    ({**CRAWL, "uuid": "u4b", "url": "gopher://127.0.0.1:6379/_INFO"}, "Did not find schema to validate request",
     "url"),  # the schema takes http(s) URLs only
    ({**INFO, "uuid": "u5", "action": "stop", "crawlid": None}, "Did not find schema", "crawlid"),
    ({k: v for k, v in {**INFO, "uuid": "u6", "action": "stop"}.items() if k != "crawlid"},
     "Stop requests need a crawlid and appid", "crawlid"),
    ({k: v for k, v in {**INFO, "uuid": "u7", "action": "dead-letters"}.items() if k != "crawlid"},
     "dead-letters requests need a crawlid", "crawlid"),
    ({k: v for k, v in {**INFO, "uuid": "u8", "action": "replay-dead-letters"}.items() if k != "crawlid"},
     "replay-dead-letters requests need a crawlid", "crawlid"),
    ({k: v for k, v in {**INFO, "uuid": "u9", "action": "purge-dead-letters"}.items() if k != "crawlid"},
     "purge-dead-letters requests need a crawlid", "crawlid"),
    ({**ZOOKEEPER, "uuid": "u10", "hits": 0}, "'hits' and 'window' not set for domain update", "hits"),
    ({k: v for k, v in {**ZOOKEEPER, "uuid": "u11"}.items() if k != "window"},
     "'hits' and 'window' not set for domain update", "window"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "message", "cause"), ERRORS)
def test_every_error_is_answered_with_the_api_error_shape_and_dead_lettered(
    value: Any, message: str, cause: str | None
) -> None:
    batch = run(value)
    assert batch.failed == 1 and batch.total == 1 and not batch.commands and not batch.requests  # noqa: PT018
    (answer,) = batch.answers
    (letter,) = batch.dead_letters
    assert answer["action"] == "error" and answer["error"]["message"].startswith(message)  # noqa: PT018
    assert isinstance(answer["server_time"], int) and "data" in answer  # noqa: PT018
    if cause:
        assert cause in answer["error"]["cause"]
    if isinstance(value, dict):
        assert (answer["uuid"], answer["appid"]) == (value["uuid"], value["appid"])
    assert letter["source"] == "kafka-monitor" and message in letter["error"]  # noqa: PT018
    assert (letter["topic"], letter["partition"], letter["offset"]) == ("demo.incoming", 0, 0)


class Exploding:
    """A plugin that fails on every message (what a bug in a plugin looks like)."""

    schema = "stats"
    rank = 0

    def handle(self, message: dict[str, Any], origin: Origin, batch: Batch) -> None:
        raise RuntimeError("boom")


class Refusing(Exploding):
    def handle(self, message: dict[str, Any], origin: Origin, batch: Batch) -> None:
        raise InvalidMessage("refused", cause="because")


def test_a_handler_failure_is_answered_and_the_next_message_still_handled() -> None:
    batch = Dispatcher([Exploding(), *dispatcher().plugins]).process(records(STATS, CRAWL), Batch())
    (answer,) = batch.answers
    assert answer["error"]["message"] == "Handler failed" and "RuntimeError: boom" in answer["error"]["cause"]  # noqa: PT018
    assert answer["uuid"] == "hij1"
    assert batch.failed == 1 and len(batch.requests) == 1  # noqa: PT018


def test_a_handler_may_refuse_a_message_with_its_own_reason() -> None:
    batch = Dispatcher([Refusing()]).process(records(STATS), Batch())
    assert batch.answers[0]["error"] == {"message": "refused", "cause": "because"}


def test_success_events_are_counted_at_info_and_detailed_only_at_debug() -> None:
    assert [event[:3] for event in run(CRAWL, INFO, STATS, ZOOKEEPER).log_events] == [
        ("Added crawl to Redis", "testapp", "abc123"), ("Added action to Redis", "testapp", "ABC123"),
        ("Added stat request to Redis", "testapp", None), ("Added zookeeper action to Redis", "madisonTest", None),
    ]  # fmt: skip
    assert run(CRAWL).log_events[0][3] is None  # INFO: no per-message fields are built
    fields = run(CRAWL, detailed=True).log_events[0][3]
    assert fields is not None
    assert fields["parsed"] is True and fields["valid"] is True and fields["url"] == CRAWL["url"]  # noqa: PT018
    assert not run(CRAWL, INFO, verbose=False).log_events


def test_shoals_crawl_additions_are_stored_and_dont_filter_skips_the_dupefilter() -> None:
    extra = {"method": "POST", "headers": {"X-Api": "1"}, "body": "q=1", "proxy": "http://proxy:3128",
             "dont_filter": True, "attrs": {"k": "v"}}  # fmt: skip
    (request,) = run({**CRAWL, **extra}).requests
    record = crawl_request.decode(request.payload, request.profile)
    assert {k: record[k] for k in extra} == extra
    assert request.fingerprint is None


class Ping:
    """A custom plugin with its own schema file, as a Scrapy Cluster plugin with PLUGIN_DIR."""

    rank = 0

    def __init__(self, schema: str) -> None:
        self.schema = schema

    def handle(self, message: dict[str, Any], origin: Origin, batch: Batch) -> None:
        batch.answers.append({"action": "pong", **message})


def test_a_plugin_may_bring_its_own_schema_file_with_defaults(tmp_path) -> None:
    path = tmp_path / "ping.json"
    path.write_text(json.dumps({
        "type": "object", "properties": {"ping": {"type": "string"}, "n": {"type": "integer", "default": 7}},
        "required": ["ping"], "additionalProperties": False,
    }))  # fmt: skip
    batch = Dispatcher([Ping(str(path)), *dispatcher().plugins]).process(records({"ping": "x"}, {"ping": 1}), Batch())
    assert batch.answers[0] == {"action": "pong", "ping": "x", "n": 7}
    assert batch.answers[1]["action"] == "error" and "ping" in batch.answers[1]["error"]["cause"]  # noqa: PT018
