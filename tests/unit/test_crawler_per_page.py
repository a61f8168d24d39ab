"""The crawler's per-page path made cheap (issue 4): batched Kafka confirmations, per-page log
events, inherited meta computed once per page, cached fingerprints. No sockets, no reactor."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from twisted.internet import defer

from crawler.middlewares import MetaPassthroughMiddleware
from crawler.pipelines import STALLED_AFTER, Deliveries, _page_event
from utils.config.log import PER_PAGE
from utils.frontier import fingerprint as fingerprints

PAGE_META = {"appid": "app", "crawlid": "c1", "spiderid": "link", "attrs": {"a": 1}, "maxdepth": 3, "curdepth": 1}


class Scheduled:
    """Stands in for reactor.callFromThread: keeps the calls to run them when the test says."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def __call__(self, func: Any) -> None:
        self.calls.append(func)

    def run(self) -> None:
        calls, self.calls = self.calls, []
        for func in calls:
            func()


def test_a_batch_of_confirmations_costs_one_reactor_call_and_fires_in_order() -> None:
    scheduled = Scheduled()
    deliveries = Deliveries(scheduled)
    fired: list[tuple[str, Any]] = []
    ds: list[defer.Deferred[Any]] = [defer.Deferred() for _ in range(4)]
    for i, d in enumerate(ds):
        d.addCallbacks(lambda r, i=i: fired.append((f"ok{i}", r)), lambda f, i=i: fired.append((f"err{i}", f.value)))
    sender = threading.Thread(target=lambda: [
        deliveries.delivered(ds[0], "t", "m0"), deliveries.delivered(ds[1], "t", "m1"),
        deliveries.undelivered(ds[2], "t", ValueError("gone")), deliveries.delivered(ds[3], "dl", "m3"),
    ])  # fmt: skip
    sender.start()
    sender.join()
    assert len(scheduled.calls) == 1  # the producer's thread woke the reactor once for the four
    assert not fired  # nothing runs on the producer's thread
    scheduled.run()
    assert [name for name, _ in fired] == ["ok0", "ok1", "err2", "ok3"]
    assert fired[0][1] == "m0"
    assert isinstance(fired[2][1], ValueError)
    deliveries.delivered(defer.Deferred(), "t", "m4")  # after a batch ran, the next one schedules again
    assert len(scheduled.calls) == 1


def test_successful_page_events_may_wait_in_the_log_buffer_failures_do_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    page = {"url": "http://a.com/", "appid": "app", "crawlid": "c1", "spiderid": "link", "status_code": 200,
            "request_id": "r1"}  # fmt: skip
    with caplog.at_level(logging.INFO, logger="crawler.pipelines"):
        _page_event("Scraped page", page, "emit")
        _page_event("Sent page to Kafka", {**page, "success": False}, "ack")
    emit, ack = caplog.records
    assert (emit.getMessage(), emit.action, emit.success, emit.request_id) == ("Scraped page", "emit", True, "r1")
    assert all(getattr(emit, key) for key in PER_PAGE)
    assert (ack.getMessage(), ack.action, ack.success) == ("Sent page to Kafka", "ack", False)
    assert not any(hasattr(ack, key) for key in PER_PAGE)


def page_response() -> HtmlResponse:
    request = Request("http://a.com/", meta=dict(PAGE_META))
    return HtmlResponse("http://a.com/", body=b"<html></html>", request=request, encoding="utf-8")


def children() -> list[Any]:
    return [Request("http://a.com/1", meta={"curdepth": 2}), {"url": "item"},
            Request("http://a.com/2", meta={"curdepth": 2, "spiderid": "wandering", "attrs": None})]  # fmt: skip


def check_children(out: list[Any]) -> None:
    first, item, second = out
    assert item == {"url": "item"}
    assert first.meta == {**PAGE_META, "curdepth": 2}
    assert second.meta == {**PAGE_META, "curdepth": 2, "spiderid": "wandering", "attrs": None}  # own values win
    assert first.meta["attrs"] is not None


def test_meta_passthrough_fills_every_request_sync_and_async() -> None:
    check_children(list(MetaPassthroughMiddleware().process_spider_output(page_response(), children())))

    async def run() -> list[Any]:
        async def result() -> Any:
            for entry in children():
                yield entry

        return [e async for e in MetaPassthroughMiddleware().process_spider_output_async(page_response(), result())]

    check_children(asyncio.run(run()))


def test_cached_fingerprints_equal_computed_ones_and_the_cache_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fingerprints, "RECENT_GETS_MAX", 3)
    monkeypatch.setattr(fingerprints, "_RECENT_GETS", {})
    urls = [f"http://a.com/p{i}.html?b=2&a=1#frag" for i in range(5)] + ["http://a.com/p0.html?b=2&a=1#frag"]
    for url in urls:
        assert fingerprints.fingerprint(url) == fingerprints.canonical_fingerprint(url)
        assert fingerprints.fingerprint(url) == fingerprints.canonical_fingerprint(url)  # from the cache
        assert len(fingerprints._RECENT_GETS) <= 3
    assert fingerprints.fingerprint("http://a.com/x", "POST", b"q=1") == fingerprints.canonical_fingerprint(
        "http://a.com/x", "POST", b"q=1"
    )


def test_a_send_the_broker_leaves_unconfirmed_reports_kafka_down_before_the_producer_gives_up() -> None:
    """The producer retries an unanswered send for its whole delivery timeout (2 minutes); health must
    name Kafka as soon as one send has waited STALLED_AFTER, and clear once confirmations come again."""
    scheduled = Scheduled()
    deliveries = Deliveries(scheduled)
    reported: list[bool] = []
    deliveries._kafka_answers = lambda up: reported.append(up)  # type: ignore[method-assign]
    early, late = defer.Deferred(), defer.Deferred()
    deliveries.sent(early, now=100.0)
    deliveries.sent(late, now=105.0)
    assert not deliveries.stalled(now=100.0 + STALLED_AFTER)
    assert deliveries.stalled(now=100.1 + STALLED_AFTER)
    deliveries.delivered(early, "t", "m")  # the oldest confirmed: the next one has not waited long enough
    assert not deliveries.stalled(now=100.1 + STALLED_AFTER)
    deliveries.forget(late)
    assert not deliveries.stalled(now=1000.0)
    scheduled.run()
    deliveries.sent(defer.Deferred(), now=time.monotonic() - STALLED_AFTER - 1)
    deliveries.watch()  # what the pipeline's reactor loop calls every WATCH_EVERY
    assert reported == [True, False]
