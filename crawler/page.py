"""The crawled-page message of API.md (Scrapy Cluster's §3.6 plus Shoal's fields)."""

from __future__ import annotations

import base64
import codecs
import os
import re
import socket
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any

from scrapy.http import Headers, Request, Response, TextResponse

from crawler.meta import FETCHED_AT, HEADERS_CUT, LEASE, RAW_HEADERS, REDIRECTS, ShoalMessage

SECRET_REQUEST_HEADERS = frozenset({b"proxy-authorization"})  # a proxy's credentials, never on the firehose
HOP_BODY_MAX = 64 * 1024  # bytes of a redirect's own body carried in `redirects` (they are a few hundred)


def header_dict(headers: Headers) -> dict[str, list[str]]:
    """Scrapy headers as `{name: [values]}` text (Scrapy Cluster's reconstruct_headers)."""
    return {
        name.decode("latin-1"): [value.decode("latin-1") for value in values]
        for name, values in headers.items()
        if name.lower() not in SECRET_REQUEST_HEADERS
    }


_PHRASES = {status.value: status.phrase for status in HTTPStatus}


def status_message(status: int) -> str:
    return _PHRASES.get(status, "")


def page_message(response: Response, base64_bodies: bool = False) -> ShoalMessage:
    """Every field of the page message but `links` and `timestamp` (set by spider and pipeline)."""
    request = response.request
    meta = response.meta
    message = ShoalMessage({
        "url": request.url if request is not None else response.url,
        "response_url": response.url,
        "status_code": response.status,
        "status_msg": status_message(response.status),
        "response_headers": header_dict(response.headers),
        "request_headers": header_dict(request.headers) if request is not None else {},
        "links": [],
        **identity(meta),
        "success": True,
    })  # fmt: skip
    if meta.get(HEADERS_CUT):
        message["response_headers_truncated"] = True
    if meta.get(REDIRECTS):
        message["redirects"] = meta[REDIRECTS]
    if request is not None and request.method != "GET":  # the archive's request line (most pages: GET, not sent)
        message["method"] = request.method
    message.update(capture_fields(response, meta))
    message.update(body_fields(response, base64_bodies))
    return message


def hop_message(request: Request, response: Response, body_max: int = HOP_BODY_MAX) -> dict[str, Any]:
    """One answer of a redirect chain that the crawler followed (a 3xx, or a page with a meta refresh),
    for the final page message's `redirects`: what its WARC records need, the body as its exact bytes."""
    hop: dict[str, Any] = {
        "url": request.url,
        "method": request.method,
        "status_code": response.status,
        "status_msg": status_message(response.status),
        "response_headers": header_dict(response.headers),
        "request_headers": header_dict(request.headers),
        **capture_fields(response, request.meta),
    }
    if len(response.body) > body_max:
        hop.update(body=None, body_dropped=True, body_bytes=len(response.body))
    else:
        hop.update(body=base64.b64encode(response.body).decode("ascii"), body_encoding="base64")
    return hop


def robots_message(request: Request, response: Response, body_max: int) -> dict[str, Any]:
    """A robots.txt fetch for `<prefix>.robots_firehose`: the archive keeps what a crawl obeyed. Shaped as
    a page message's answer fields (hop_message's, with `url` the URL asked for and `response_url` the one
    that answered, `redirects` its own), never on the crawled firehose, whose readers expect crawl pages."""
    chain = request.meta.get("redirect_urls") or ()
    message = hop_message(request, response, body_max)
    message.update(url=chain[0] if chain else request.url, response_url=request.url, success=True, worker=worker_id(),
                   timestamp=timestamp())  # fmt: skip
    if request.meta.get(REDIRECTS):
        message["redirects"] = request.meta[REDIRECTS]
    return message


def capture_fields(response: Response, meta: dict[str, Any]) -> dict[str, Any]:
    """What an archive (WARC, issue 35) needs beyond Scrapy Cluster's fields: the HTTP version, the
    peer's IP address, when the request went to the network (None where no HTTP client fetched the
    page: the render spider's browser), and the header lines in the order received (Content-Encoding
    included, names as Scrapy spells them). `meta` is the request's that `response` answers."""
    fetched = meta.get(FETCHED_AT)
    fields: dict[str, Any] = {
        "http_version": response.protocol,
        "remote_address": str(response.ip_address) if response.ip_address is not None else None,
        "fetch_time": iso_utc(fetched) if fetched is not None else None,
    }
    lines = meta.get(RAW_HEADERS)
    # Sent only when they say more than response_headers read in order (a header decoding removed,
    # repeats interleaved with others): the headers are bounded once, not carried twice (issue 30).
    if lines is not None and lines != header_lines(response.headers):
        fields["raw_response_headers"] = lines
    return fields


def header_lines(headers: Headers) -> list[list[str]]:
    """`response_headers` as [name, value] lines, in order."""
    return [[name, value] for name, values in header_dict(headers).items() for value in values]


def iso_utc(epoch: float) -> str:
    """Epoch seconds as `timestamp()` spells a time (UTC ISO-8601, no zone)."""
    return datetime.fromtimestamp(epoch, UTC).replace(tzinfo=None).isoformat()


def failure_message(request: Request, error: str, status: int | None = None) -> ShoalMessage:
    """The page message of a request that finally failed: `success` false and the `exception`.

    `url` is the URL the client asked for, also when its redirect chain failed ("max redirections
    reached", issue 30); `response_url` is the last URL the chain reached; `redirects`, the answers
    the chain followed before it failed (received, so archived).
    """
    chain = request.meta.get("redirect_urls") or ()
    message = ShoalMessage({
        "url": chain[0] if chain else request.url,
        "response_url": request.url,
        "status_code": status,
        "status_msg": status_message(status) if status else "",
        "response_headers": {},
        "request_headers": header_dict(request.headers),
        "body": None,
        "encoding": None,
        "links": [],
        **identity(request.meta),
        "success": False,
        "exception": error,
    })  # fmt: skip
    if request.meta.get(REDIRECTS):
        message["redirects"] = request.meta[REDIRECTS]
    return message


def identity(meta: dict[str, Any]) -> dict[str, Any]:
    """The fields that tie a page to its crawl and request."""
    lease = meta.get(LEASE)
    return {
        "appid": meta.get("appid"),
        "crawlid": meta.get("crawlid"),
        "spiderid": meta.get("spiderid"),
        "attrs": meta.get("attrs"),
        "request_id": meta.get("request_id") or (lease.request_id if lease else None),
        "attempt": meta.get("attempt", 0),
        "curdepth": meta.get("curdepth", 0),
        "worker": worker_id(),
    }


def worker_id() -> str:
    """`<host>:<pid>` of the crawler process that fetched the page (the sink's crawl log keeps it)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def body_fields(response: Response, base64_bodies: bool) -> dict[str, Any]:
    """Text bodies as text; binary bodies (and every body with KAFKA_BASE_64_ENCODE) as base64.

    A body served as text that is not (bytes its encoding refuses, or control characters: random
    bytes served as text/html) is binary too: as text it became ~2.4x its size in JSON (replacement
    characters and escapes), as base64 it is 1.33x. A text body is sent only when the text in its
    encoding, after the byte-order mark that decoding removed (`body_bom`), is the bytes served:
    an archive (WARC) writes those bytes back, and so does any reader that needs them.
    """
    if isinstance(response, TextResponse) and not base64_bodies and is_text(response):
        text = response.text
        bom = text_bom(text, response.encoding, response.body)
        if bom == b"":
            return {"body": text, "encoding": response.encoding}
        if bom is not None:
            return {"body": text, "encoding": response.encoding, "body_bom": base64.b64encode(bom).decode("ascii")}
    encoding = response.encoding if isinstance(response, TextResponse) else None
    return {
        "body": base64.b64encode(response.body).decode("ascii"),
        "body_encoding": "base64",
        "encoding": encoding,
    }


BOMS = (b"\xef\xbb\xbf", b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff", b"\xff\xfe", b"\xfe\xff")  # UTF-8, -32, -16


def text_bom(text: str, encoding: str, served: bytes) -> bytes | None:
    """b"" when `text` in `encoding` is `served` exactly; the byte-order mark when it is `served` after
    one (Scrapy's `text` drops it); None when the text does not give the bytes back. Called on a
    body that decoded strictly (is_text): UTF-8 without a BOM gives its bytes back, unchecked (the
    check costs ~3 us per KiB of non-ASCII text)."""
    try:
        if codecs.lookup(encoding).name == "utf-8" and not served.startswith(codecs.BOM_UTF8):
            return b""
        written = text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return None
    if written == served:
        return b""
    bom = served[: len(served) - len(written)]
    return bom if bom in BOMS and served.endswith(written) else None


_CONTROLS = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f]")  # never in text (tab, LF, FF and CR are)
_CONTROL_BYTES = bytes([*range(0x09), 0x0B, *range(0x0E, 0x20), 0x7F])  # the same characters as bytes
# Encodings in which a byte below 0x80 is always the character of that code, and such a character
# always that byte (UTF-8's other bytes are all >= 0x80): their control characters are counted in
# the body's bytes, in C, in ~3 us per 30 KB instead of the regex's ~150 us.
_ASCII_SAFE = frozenset({"utf-8", "ascii", "iso8859-1", "cp1252"})
CONTROLS_WINDOW = 1 << 20  # characters of a body in which control characters are counted


def is_text(response: TextResponse) -> bool:
    """Whether the body decodes in its encoding without error, with (almost) no control characters."""
    body = response.body
    try:
        text = body.decode(response.encoding)
        ascii_safe = len(body) <= CONTROLS_WINDOW and codecs.lookup(response.encoding).name in _ASCII_SAFE
    except (UnicodeDecodeError, LookupError):
        return False
    if ascii_safe:  # the whole text is in the window: the bytes hold exactly its control characters
        controls = len(body) - len(body.translate(None, _CONTROL_BYTES))
    else:
        controls = sum(1 for _ in _CONTROLS.finditer(text, 0, CONTROLS_WINDOW))
    return controls * 1000 <= min(len(text), CONTROLS_WINDOW)  # at most one in a thousand (a stray NUL or ESC)


def timestamp() -> str:
    """UTC ISO-8601 without zone, as Scrapy Cluster's `datetime.utcnow().isoformat()`."""
    return datetime.now(UTC).replace(tzinfo=None).isoformat()
