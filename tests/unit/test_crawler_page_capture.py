"""Issue 35: the page message carries what a WARC record needs (header lines as received, HTTP
version, peer address, fetch time), and keeps every field it had. Issue 44: the byte-order mark of a
text body, the answers of the redirects followed, robots.txt answers."""

from __future__ import annotations

import base64
import ipaddress
import json
from datetime import datetime

import pytest
from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Headers, HtmlResponse, Response
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.test import get_crawler

from crawler.downloader import FetchTimeMiddleware, ResponseHeaderBoundMiddleware
from crawler.meta import REDIRECTS
from crawler.page import failure_message, page_message
from crawler.pipelines import without_body
from crawler.redirects import ArchivedRedirectMiddleware
from crawler.robots import RobotsArchiveMiddleware, is_robots_fetch
from crawler.signals import connect_robots
from utils.schemas.page import PAGE_FIELDS

URL = "http://127.0.0.1:8181/page"
CAPTURE = ("raw_response_headers", "http_version", "remote_address", "fetch_time")


class _NoCrawler:
    pass


def fetched(headers: Headers) -> HtmlResponse:
    """A response as the downloader middlewares hand it on: fetch time stamped, header lines recorded."""
    request = Request(URL)
    FetchTimeMiddleware(_NoCrawler()).process_request(request)  # type: ignore[arg-type]
    response = HtmlResponse(URL, headers=headers, body=b"<p>hi</p>", request=request, protocol="HTTP/1.1",
                            ip_address=ipaddress.ip_address("127.0.0.1"))
    return ResponseHeaderBoundMiddleware(500, 256 * 1024).process_response(request, response)  # type: ignore[return-value]


def test_the_header_lines_keep_their_order_and_repeats_and_survive_content_decoding() -> None:
    headers = Headers()
    for name, value in (("Server", "demo"), ("Set-Cookie", "a=1"), ("Content-Encoding", "gzip"),
                        ("Set-Cookie", "b=2"), ("Content-Type", "text/html")):
        headers.appendlist(name, value)
    response = fetched(headers)
    del response.headers["Content-Encoding"]  # what HttpCompressionMiddleware does after decoding
    message = page_message(response)
    assert message["raw_response_headers"] == [["Server", "demo"], ["Set-Cookie", "a=1"], ["Set-Cookie", "b=2"],
                                               ["Content-Encoding", "gzip"], ["Content-Type", "text/html"]]
    assert "Content-Encoding" not in message["response_headers"]  # the Scrapy Cluster field is unchanged
    assert message["http_version"] == "HTTP/1.1"
    assert message["remote_address"] == "127.0.0.1"
    assert abs((datetime.utcnow() - datetime.fromisoformat(message["fetch_time"])).total_seconds()) < 5


def test_every_field_the_message_had_is_still_there_and_the_new_ones_are_in_the_typed_dict() -> None:
    message = page_message(fetched(Headers({"Content-Type": "text/html"})))
    for name in ("url", "response_url", "status_code", "status_msg", "response_headers", "request_headers", "body",
                 "encoding", "links", "appid", "crawlid", "attrs", "success", "request_id", "attempt", "worker"):
        assert name in message
    assert set(CAPTURE) - {"raw_response_headers"} <= set(message)
    assert set(CAPTURE) <= PAGE_FIELDS
    assert message["response_headers"] == {"Content-Type": ["text/html"]}
    assert "raw_response_headers" not in message  # response_headers in order say it all: not carried twice


def test_a_response_no_http_client_made_has_no_version_address_or_fetch_time() -> None:
    """The render spider's browser answers with a DOM: nothing on the wire to describe."""
    response = HtmlResponse(URL, headers={"Content-Type": "text/html"}, body=b"<p/>", request=Request(URL))
    message = page_message(response)
    assert (message["http_version"], message["remote_address"], message["fetch_time"]) == (None, None, None)
    assert "raw_response_headers" not in message


def served(body: bytes, content_type: str) -> HtmlResponse:
    return HtmlResponse(URL, headers={"Content-Type": content_type}, body=body, request=Request(URL))


def test_a_text_body_keeps_the_byte_order_mark_its_text_leaves_out() -> None:
    """Scrapy's `text` drops a BOM: the message says which bytes came first, so the bytes served can be rebuilt."""
    utf8 = b"\xef\xbb\xbf<p>caf\xc3\xa9</p>"
    utf16 = "\ufeff<p>naïve</p>".encode("utf-16-le")
    for body, content_type in ((utf8, "text/html; charset=utf-8"), (utf16, "text/html; charset=utf-16"),
                               (utf16, "text/html")):  # fmt: skip
        message = page_message(served(body, content_type))
        assert "body_encoding" not in message  # still text for the clients that read it as text
        rebuilt = base64.b64decode(message["body_bom"]) + message["body"].encode(message["encoding"])
        assert rebuilt == body, content_type
    plain = page_message(served(b"<p>plain</p>", "text/html; charset=utf-8"))
    assert "body_bom" not in plain
    assert {"body_bom", "redirects", "method"} <= PAGE_FIELDS


def test_a_text_whose_encoding_does_not_give_the_bytes_back_travels_as_base64() -> None:
    body = "<p>x</p>".encode("utf-16-be")  # "utf-16" without a BOM: Python reads it little-endian, writes a BOM
    message = page_message(served(body, "text/html; charset=utf-16"))
    assert message["body_encoding"] == "base64"
    assert base64.b64decode(message["body"]) == body


def test_the_answers_a_redirect_chain_followed_ride_on_to_the_page_in_order() -> None:
    crawler = get_crawler(Spider, {"REDIRECT_ENABLED": True})
    redirects = ArchivedRedirectMiddleware.from_crawler(crawler)
    seed = Request("http://127.0.0.1:8181/seed", meta={"dont_obey_robotstxt": True})
    FetchTimeMiddleware(_NoCrawler()).process_request(seed)  # type: ignore[arg-type]
    moved = Response(seed.url, status=301, headers={"Location": "/moved"}, body=b"gone", protocol="HTTP/1.1",
                     ip_address=ipaddress.ip_address("127.0.0.1"))
    second = redirects.process_response(seed, ResponseHeaderBoundMiddleware(500, 1 << 18).process_response(seed, moved))
    assert isinstance(second, Request)
    again = Response(second.url, status=308, headers={"Location": URL}, body=b"")
    page = redirects.process_response(second, again)
    assert isinstance(page, Request)
    hops = page.meta[REDIRECTS]
    assert [(h["url"], h["status_code"]) for h in hops] == [(seed.url, 301), ("http://127.0.0.1:8181/moved", 308)]
    assert hops[0]["response_headers"]["Location"] == ["/moved"]
    assert base64.b64decode(hops[0]["body"]) == b"gone"
    assert (hops[0]["http_version"], hops[0]["remote_address"]) == ("HTTP/1.1", "127.0.0.1")
    assert hops[0]["fetch_time"]
    final = HtmlResponse(URL, headers={"Content-Type": "text/html"}, body=b"<p/>", request=page)
    message = page_message(final)
    assert message["redirects"] == hops
    assert set(hops[0]) <= PAGE_FIELDS
    assert redirects.process_response(page, final) is final  # not followed: nothing added
    assert failure_message(page, "max redirections reached")["redirects"] == hops  # received, so archived
    tired = Request(URL, meta={"redirect_ttl": 0, REDIRECTS: hops})
    with pytest.raises(IgnoreRequest):
        redirects.process_response(tired, Response(URL, status=302, headers={"Location": "/again"}))
    assert [h["status_code"] for h in tired.meta[REDIRECTS]] == [301, 308, 302]


def test_a_robots_txt_answer_goes_to_the_pipeline_and_a_spiders_own_request_for_it_does_not() -> None:
    crawler = get_crawler(Spider)
    sent: list[dict[str, object]] = []
    connect_robots(crawler, sent.append)
    middleware = RobotsArchiveMiddleware.from_crawler(crawler)
    robots = Request("http://127.0.0.1:8181/robots.txt", meta={"dont_obey_robotstxt": True}, callback=NO_CALLBACK)
    answer = Response(robots.url, status=200, body=b"User-agent: *\n", request=robots)
    assert middleware.process_response(robots, answer) is answer
    own = Request("http://127.0.0.1:8181/robots.txt", meta={"dont_obey_robotstxt": True})
    middleware.process_response(own, answer)
    (message,) = sent
    assert message["url"] == message["response_url"] == robots.url
    assert base64.b64decode(str(message["body"])) == b"User-agent: *\n"
    assert set(message) <= PAGE_FIELDS
    moved = {"dont_obey_robotstxt": True, "redirect_urls": [robots.url]}
    assert is_robots_fetch(robots.replace(url="http://127.0.0.1:8181/elsewhere.txt", meta=moved))


def test_a_page_too_large_for_kafka_keeps_small_redirects_and_drops_huge_ones() -> None:
    small = [{"url": URL, "status_code": 301, "response_headers": {"Location": ["/"]}}]
    huge = [{"url": URL, "status_code": 302, "response_headers": {"X-Junk": ["x" * 200_000]}}] * 6
    kept = json.loads(without_body({"url": URL, "body": "b", "redirects": small}, 12 << 20))
    assert kept["redirects"] == small
    assert "redirects_dropped" not in kept
    dropped = json.loads(without_body({"url": URL, "body": "b", "redirects": huge}, 12 << 20))
    assert (dropped["redirects"], dropped["redirects_dropped"], dropped["body"]) == ([], True, None)
    assert "redirects_dropped" in PAGE_FIELDS
