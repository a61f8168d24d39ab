"""Gateway pieces that need no services: body validation, the waiter registry, envelopes, OpenAPI."""

from __future__ import annotations

import asyncio

import pytest

from rest import envelope, openapi
from rest.app import create_app
from rest.envelope import ApiError
from rest.pages import summary
from rest.validation import REQUEST_KINDS, match_request, parse_json, poll_id, request_kinds
from rest.waiters import Waiters
from utils import schemas
from utils.config.settings import Settings


@pytest.mark.parametrize("raw", [b"{nope", b"null", b"", b"\xff\xfe"])
def test_a_body_that_is_not_json_is_refused_with_scrapy_clusters_message(raw: bytes) -> None:
    with pytest.raises(ApiError) as caught:
        parse_json(raw)
    assert (caught.value.status_code, caught.value.message) == (400, envelope.MUST_JSON)


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ({"url": "http://a.com", "appid": "app", "crawlid": "c"}, "crawl"),
        ({"action": "info", "appid": "app", "uuid": "u", "spiderid": "link"}, "action"),
        ({"stats": "queue", "appid": "app", "uuid": "u"}, "stats"),
        (
            {"action": "domain-update", "appid": "app", "uuid": "u", "domain": "a.com", "hits": 5, "window": 6},
            "zookeeper",
        ),
    ],
)
def test_each_request_kind_is_recognised(message: dict, kind: str) -> None:
    if kind not in schemas.available():
        pytest.fail(f"utils/schemas/{kind}.json is missing")
    assert match_request(message) == kind


@pytest.mark.parametrize(
    ("message", "cause"),
    [
        ({"url": "http://a.com", "appid": "app", "crawlid": "c", "colour": "red"}, "colour"),
        ({"url": "http://a.com", "appid": "app", "crawlid": "c", "priority": 500}, "priority"),
        ({"appid": "app", "uuid": "u", "stats": "everything"}, "stats"),
        (["a list"], "JSON object"),
    ],
)
def test_a_request_matching_no_schema_is_refused_with_the_closest_cause(message: object, cause: str) -> None:
    with pytest.raises(ApiError) as caught:
        match_request(message)
    assert (caught.value.status_code, caught.value.message) == (400, envelope.BAD_SCHEMA)
    assert cause in (caught.value.cause or ""), caught.value.cause


def test_request_kinds_keep_the_kafka_monitors_order() -> None:
    kinds = request_kinds()
    assert kinds == [k for k in REQUEST_KINDS if k in kinds]
    assert kinds[0] == "crawl"


@pytest.mark.parametrize("body", [{}, {"poll_id": ""}, {"poll_id": "x" * 101}, {"poll_id": "a", "more": 1}, [1]])
def test_poll_bodies_follow_scrapy_clusters_poll_schema(body: object) -> None:
    with pytest.raises(ApiError) as caught:
        poll_id(body)
    assert (caught.value.status_code, caught.value.message) == (400, envelope.BAD_SCHEMA)
    assert caught.value.cause
    assert poll_id({"poll_id": "abc"}) == "abc"


def test_envelopes() -> None:
    assert envelope.body({"a": 1}) == {"status": "SUCCESS", "data": {"a": 1}, "error": None}
    assert envelope.body(None, "m", "c") == {"status": "FAILURE", "data": None, "error": {"message": "m", "cause": "c"}}
    assert envelope.body(None, "m") == {"status": "FAILURE", "data": None, "error": {"message": "m"}}


def test_an_answer_reaches_the_waiting_request() -> None:
    async def scenario() -> tuple[object, bool, int]:
        waiters = Waiters()
        waiter = waiters.register("u1")
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, lambda: waiters.deliver("u1", {"uuid": "u1", "n": 1}))
        answer = await waiters.wait("u1", waiter, timeout=5)
        return answer, waiters.deliver("u1", {"uuid": "u1"}), len(waiters)

    answer, late_taken, left = asyncio.run(scenario())
    assert answer == {"uuid": "u1", "n": 1}
    assert late_taken is False  # nobody waits any more: the caller keeps it for /poll
    assert left == 0


def test_a_wait_times_out_and_two_requests_with_one_uuid_share_the_answer() -> None:
    async def scenario() -> tuple[object, object, object]:
        waiters = Waiters()
        timed_out = await waiters.wait("u", waiters.register("u"), timeout=0.01)
        first, second = waiters.register("u2"), waiters.register("u2")
        assert first is second
        waiters.deliver("u2", {"uuid": "u2"})
        a = await waiters.wait("u2", first, timeout=5)
        b = await waiters.wait("u2", second, timeout=5)
        return timed_out, a, b

    timed_out, a, b = asyncio.run(scenario())
    assert timed_out is None
    assert a == b == {"uuid": "u2"}


def test_a_page_event_carries_no_body_and_counts_links() -> None:
    page = {"url": "u", "status_code": 200, "body": "x" * 100, "links": [{"url": "a"}, {"url": "b"}], "crawlid": "c"}
    assert summary(page) == {"url": "u", "status_code": 200, "crawlid": "c", "links": 2}


def test_the_openapi_document_names_every_request_schema() -> None:
    app = create_app(Settings.load(environ={}))
    document = openapi.build(app)
    components = document["components"]["schemas"]
    for kind in request_kinds():
        expected = {k: v for k, v in schemas.schema(kind).items() if k != "$schema"}
        assert components[openapi.component_name(kind)] == expected
    feed = document["paths"]["/feed"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert feed == {"anyOf": [{"$ref": f"#/components/schemas/{openapi.component_name(k)}"} for k in request_kinds()]}
    assert "poll_id" in components["PollRequest"]["properties"]
    for path in ("/", "/feed", "/poll", "/crawls/{appid}/{crawlid}", "/crawls/{appid}/{crawlid}/events",
                 "/crawls/{appid}/{crawlid}/stop", "/stats/{kind}", "/dead-letters/{appid}/{crawlid}",
                 "/dead-letters/{appid}/{crawlid}/replay", "/dashboard", "/dashboard/data"):  # fmt: skip
        assert path in document["paths"], path
