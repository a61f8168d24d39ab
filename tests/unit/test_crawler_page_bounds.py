"""Issue 30, findings 12 and 13: what a hostile response can make of its page message (no sockets)."""

from __future__ import annotations

import base64
import random

from scrapy import Request
from scrapy.http import Headers, HtmlResponse, Response, TextResponse

from crawler.downloader import ResponseHeaderBoundMiddleware
from crawler.page import failure_message, page_message
from crawler.pipelines import encode

URL = "http://hostile.test/page"
MiB = 1024 * 1024


def downloaded(response: Response, count: int = 500, size: int = 256 * 1024) -> Response:
    return ResponseHeaderBoundMiddleware(count, size).process_response(response.request, response)


def test_twenty_thousand_headers_of_two_kib_are_cut_to_the_bounds_and_the_page_flagged() -> None:
    """Issue 30: they made a 41 MB page message that Kafka refused (the page became a dead letter)."""
    headers = Headers({"Content-Type": "text/html; charset=utf-8"})
    for i in range(20_000):
        headers.appendlist(f"X-Junk-{i % 50}", "v" * 2048)
    headers.appendlist("Location", "/elsewhere")
    request = Request(URL)
    response = downloaded(HtmlResponse(URL, headers=headers, body=b"<p>hi</p>", request=request))
    message = page_message(response)
    assert message["response_headers_truncated"] is True
    assert message["response_headers"]["Content-Type"] == ["text/html; charset=utf-8"]  # needed ones first
    assert message["response_headers"]["Location"] == ["/elsewhere"]
    assert sum(len(v) for v in message["response_headers"].values()) <= 500
    assert len(encode(message)) < 300 * 1024
    assert message["body"] == "<p>hi</p>"


def test_headers_within_the_bounds_pass_untouched_and_unflagged() -> None:
    headers = Headers({"Content-Type": "text/html", "Set-Cookie": ["a=1", "b=2"]})
    response = HtmlResponse(URL, headers=headers, body=b"<p>hi</p>", request=Request(URL))
    assert downloaded(response, count=3, size=64) is response
    assert "response_headers_truncated" not in page_message(response)
    cut = page_message(downloaded(response, count=2, size=64))
    assert cut["response_headers"] == {"Content-Type": ["text/html"], "Set-Cookie": ["a=1"]}
    assert cut["response_headers_truncated"] is True


def test_a_binary_body_served_as_text_travels_base64_at_a_third_over_its_size() -> None:
    """Issue 30: 5 MiB of random bytes served as text/html became a 12.4 MB message (~2.4x)."""
    body = random.Random(30).randbytes(5 * MiB)
    response = HtmlResponse(URL, headers={"Content-Type": "text/html"}, body=body, request=Request(URL))
    message = page_message(response)
    assert message["body_encoding"] == "base64"
    assert base64.b64decode(message["body"]) == body
    assert len(encode(message)) < 1.34 * len(body)


def test_a_latin1_body_of_random_bytes_is_binary_too_and_honest_text_stays_text() -> None:
    body = random.Random(31).randbytes(64 * 1024)  # every byte decodes in latin-1: the control characters tell
    latin = TextResponse(URL, headers={"Content-Type": "text/plain; charset=latin-1"}, body=body, request=Request(URL))
    assert page_message(latin)["body_encoding"] == "base64"
    text = "Grüße, 世界\tand a form feed\f\r\n" * 1000
    honest = HtmlResponse(URL, body=text.encode(), encoding="utf-8", request=Request(URL))
    message = page_message(honest)
    assert message["body"] == text
    assert "body_encoding" not in message


def test_a_failed_redirect_chain_names_the_requested_url_and_its_last_url_apart() -> None:
    """Issue 30: "max redirections reached" named the chain's last URL in `url`."""
    chain = [f"http://hostile.test/chain/{i}" for i in range(21)]
    last = Request(chain[-1], meta={"redirect_urls": chain[:-1], "crawlid": "c1"})
    message = failure_message(last, "IgnoreRequest: max redirections reached")
    assert message["url"] == chain[0]
    assert message["response_url"] == chain[-1]
    plain = failure_message(Request(chain[0]), "TimeoutError")
    assert plain["url"] == plain["response_url"] == chain[0]
