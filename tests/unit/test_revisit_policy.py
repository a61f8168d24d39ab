"""Issue 31: the revisit policy's layers and adaptive rule, and the crawl request fields that carry it."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy.http import HtmlResponse, Request

from crawler.revisit import revisit_fields
from kafka_monitor.batch import Batch, Origin
from kafka_monitor.plugins.crawl import CrawlHandler
from kafka_monitor.sink_check import SinkCheck
from utils import schemas
from utils.config.errors import InvalidMessage
from utils.config.settings import Settings
from utils.frontier.domain_config import DomainConfig
from utils.frontier.revisit_policy import RevisitPolicy, next_interval, outcome_of

URL = "http://shop.example/product/1"
BASE = {"url": URL, "appid": "app", "crawlid": "c1"}


def test_settings_then_domain_then_crawl_then_spider() -> None:
    settings = Settings.load(environ={"SHOAL_REVISIT_MAX": "7200", "SHOAL_REVISIT_INC": "3"})
    base = RevisitPolicy.from_settings(settings)
    assert (base.max, base.inc, base.min) == (7200.0, 3.0, 3600.0)
    domain = DomainConfig.parse("domains:\n  shop.example: {revisit: {inc: 2, min: 60}}\n")
    policy = base.merged(domain.revisit("SHOP.example.")).merged({"interval": 100, "pages": "/product/"})
    assert (policy.inc, policy.min, policy.max, policy.interval) == (2, 60, 7200.0, 100)
    assert policy.covers(URL)
    assert not policy.covers("http://shop.example/about")


def test_bounds_stay_consistent_when_a_layer_sets_only_one() -> None:
    policy = RevisitPolicy().merged({"min": 50_000, "interval": 10})
    assert policy.min <= policy.interval <= policy.max


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [("not_modified", 150.0), ("unchanged", 150.0), ("changed", 60.0), ("error", 100.0), ("gone", None)],
)
def test_the_interval_grows_unchanged_and_shrinks_changed_within_the_bounds(outcome: str, expected: Any) -> None:
    policy = RevisitPolicy(min=60, max=1000, inc=1.5, dec=0.5)
    assert next_interval(policy, 100.0, outcome) == expected
    assert next_interval(policy, 900.0, "unchanged") == 1000
    assert next_interval(RevisitPolicy(gone_interval=5000), 100.0, "gone") == 5000


def test_outcomes_by_status() -> None:
    assert outcome_of(304, False, True) == "not_modified"
    assert [outcome_of(s, False, False) for s in (200, 404, 410, 503, None)] == [
        "unchanged", "gone", "gone", "error", "error"]  # fmt: skip
    assert outcome_of(200, False, True) == "changed"


def test_the_schema_takes_a_revisit_policy_and_refuses_a_bad_one() -> None:
    filled = schemas.validate("crawl", {**BASE, "revisit": {"min": 60, "max": 600}, "refetch": True})
    assert filled["revisit"] == {"min": 60, "max": 600}
    with pytest.raises(InvalidMessage):
        schemas.validate("crawl", {**BASE, "revisit": {"dec": 2}})
    with pytest.raises(InvalidMessage):
        schemas.validate("crawl", {**BASE, "revisit": {"every": 1}})


def handle(handler: CrawlHandler, message: dict[str, Any]) -> Batch:
    batch = Batch()
    handler.handle(schemas.validate("crawl", message), Origin("demo.incoming", 0, 1), batch)
    return batch


def test_revisit_without_a_live_sink_is_refused_with_a_clear_cause() -> None:
    refused = CrawlHandler(sink_alive=SinkCheck(lambda: False, every=60))
    with pytest.raises(InvalidMessage) as caught:
        handle(refused, {**BASE, "revisit": {}})
    assert "no sink is running" in str(caught.value.cause)
    assert len(handle(refused, BASE).requests) == 1  # a crawl without revisit needs no sink
    assert len(handle(CrawlHandler(sink_alive=SinkCheck(lambda: True, every=60)), {**BASE, "revisit": {}}).requests)
    with pytest.raises(InvalidMessage):
        handle(CrawlHandler(), {**BASE, "revisit": {"pages": "("}})


def test_a_refetch_skips_the_dupefilter_and_the_page_limit() -> None:
    (plain,) = handle(CrawlHandler(), {**BASE, "domain_max_pages": 5}).requests
    (again,) = handle(CrawlHandler(), {**BASE, "domain_max_pages": 5, "refetch": True}).requests
    assert plain.fingerprint
    assert plain.max_pages == 5
    assert again.fingerprint is None
    assert again.max_pages == 0


def response(status: int, meta: dict[str, Any]) -> HtmlResponse:
    request = Request(URL, meta=meta)
    return HtmlResponse(URL, status=status, body=b"" if status == 304 else b"<p>x</p>", request=request)


def test_a_304_is_flagged_not_modified_without_a_body_and_keeps_its_policy() -> None:
    fields = revisit_fields(response(304, {"revisit": {"max": 600}, "appid": "app"}), URL, RevisitPolicy())
    assert fields["not_modified"] is True
    assert fields["body"] is None
    assert fields["revisit"]["max"] == 600
    assert "not_modified" not in revisit_fields(response(200, {}), URL, RevisitPolicy())


def test_a_spider_may_decide_per_response() -> None:
    def never(_: Any, policy: RevisitPolicy) -> RevisitPolicy | None:
        return None

    def hourly(_: Any, policy: RevisitPolicy) -> RevisitPolicy | None:
        return policy.merged({"max": 3600})

    meta = {"revisit": {}, "maxdepth": 2, "spiderid": "link"}
    assert "revisit" not in revisit_fields(response(200, meta), URL, RevisitPolicy(), never)
    fields = revisit_fields(response(200, meta), URL, RevisitPolicy(), hourly)
    assert fields["revisit"]["max"] == 3600
    assert fields["revisit"]["request"] == {"maxdepth": 2, "spiderid": "link"}


def test_a_sitemaps_changefreq_sets_the_first_interval_unless_the_crawl_does() -> None:
    meta = {"revisit": {"min": 60}, "revisit_hint": 3600}
    assert revisit_fields(response(200, meta), URL, RevisitPolicy())["revisit"]["interval"] == 3600
    meta = {"revisit": {"interval": 120, "min": 60}, "revisit_hint": 3600}
    assert revisit_fields(response(200, meta), URL, RevisitPolicy())["revisit"]["interval"] == 120
    assert "revisit" not in revisit_fields(response(200, {"revisit": {}, "revisit_hint": 0}), URL, RevisitPolicy())
