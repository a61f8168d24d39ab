"""The page message's JSON: keys sorted, UTF-8 as is, `/` unescaped, whatever the encoder (no sockets)."""

from __future__ import annotations

import json

from crawler.pipelines import encode


def test_a_page_is_sorted_utf8_json_with_its_slashes_as_they_are() -> None:
    page = {"url": "http://site.test/a/b", "body": "Grüße, 世界\n\x01", "links": [{"text": "é", "url": "/x"}], "a": 1}
    raw = encode(page)
    assert raw.startswith(b'{"a":1,"body":"Gr\xc3\xbc\xc3\x9fe, ')
    assert b'"http://site.test/a/b"' in raw
    assert json.loads(raw) == page


def test_what_orjson_refuses_is_still_encoded() -> None:
    """Keys that are not text and integers past 64 bits: ujson writes them, as before."""
    raw = encode({"attrs": {2: "two", 1: "one"}, "url": "http://site.test/"})
    assert raw == b'{"attrs":{"1":"one","2":"two"},"url":"http://site.test/"}'
    assert json.loads(encode({"big": 2**70})) == {"big": 2**70}
