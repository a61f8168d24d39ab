"""Issue 35: the page message carries what a WARC record needs (header lines as received, HTTP
version, peer address, fetch time), and keeps every field it had."""

from __future__ import annotations

import ipaddress
from datetime import datetime

from scrapy import Request
from scrapy.http import Headers, HtmlResponse

from crawler.downloader import FetchTimeMiddleware, ResponseHeaderBoundMiddleware
from crawler.page import page_message
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
