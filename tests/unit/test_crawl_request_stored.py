"""The stored form of a request: crawl-level fields once per crawl, the rest as short as it goes."""

from __future__ import annotations

import ujson

from utils.frontier import crawl_request

CRAWL = {
    "appid": "app", "crawlid": "c1", "spiderid": "link", "priority": 40, "maxdepth": 3, "expires": 1999999999,
    "allowed_domains": ["a.com", "b.com"], "allow_regex": [rf"^https?://a\.com/s{i}/.*" for i in range(20)],
    "cookie": "session=9f8e7d6c; consent=yes", "attrs": {"customer": "acme", "tags": ["x", "y"], "job": 7},
}  # fmt: skip


def stored_and_back(record: dict, pid: str = "1") -> dict:
    stored = crawl_request.encode(record)
    return crawl_request.decode(pid + stored.payload, stored.profile or None)


def test_a_child_stores_only_what_differs_and_its_crawls_fields_once() -> None:
    first = crawl_request.encode(crawl_request.to_record({**CRAWL, "url": "http://a.com/s1/p", "curdepth": 1}))
    second = crawl_request.encode(crawl_request.to_record({**CRAWL, "url": "https://b.com/s2/q", "curdepth": 2}))
    whole = ujson.dumps(crawl_request.to_record({**CRAWL, "url": "http://a.com/s1/p", "curdepth": 1}))
    assert first.profile == second.profile  # one profile for the crawl
    assert (first.payload, second.payload) == (" 1 40 0 //a.com/s1/p", " 2 40 0 ///b.com/s2/q")
    assert len(first.payload) < 25 < 800 < len(whole)
    assert ujson.loads(first.profile)["attrs"] == CRAWL["attrs"]


def test_every_field_comes_back_as_it_was_stored() -> None:
    seed = {**CRAWL, "url": "https://a.com/s1/p?q=1", "curdepth": 0, "uuid": "u-1", "method": "POST",
            "headers": {"X-Api": "1"}, "body": "q=1", "dont_filter": True, "attempt": 2}  # fmt: skip
    child = {**CRAWL, "url": "http://a.com/s1/x", "curdepth": 2, "callback": "parse_item",
             "cb_kwargs": {"rank": 2}, "not_before": 5.5}  # fmt: skip
    for record in (seed, child, {**CRAWL, "url": "http://a.com/a b\tc", "curdepth": 1}, {"url": "ftp://x/y"}):
        expected = {k: v for k, v in crawl_request.to_record(record).items() if k not in crawl_request.KEPT_BY_KEYS}
        assert stored_and_back(crawl_request.to_record(record)) == expected


def test_an_older_shoals_json_payload_is_read_as_it_is() -> None:
    legacy = '{"url":"http://a.com/","priority":3,"curdepth":1,"attrs":{"k":"v"},"attempt":1}'
    assert crawl_request.decode(legacy) == ujson.loads(legacy)
    assert crawl_request.profile_id(legacy) == ""
    assert crawl_request.profile_id("1f 0 1 0 //a.com/") == "1f"
    record = crawl_request.restore(legacy, None, "link", "app", "c1", "0005e4a1b2c3d0011")
    assert (record["crawlid"], record["attrs"], record["request_id"]) == ("c1", {"k": "v"}, "0005e4a1b2c3d001")
