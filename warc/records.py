"""Page messages to WARC/1.1 records (warcio): request + response, revisits, metadata.

The payload is the body as the page message carries it: after content decoding (gzip, br, zstd,
deflate) and de-chunking, because that is what the crawler keeps; a text body is written in its
`encoding` after its byte-order mark (`body_bom`), so the payload is the bytes served. The HTTP
header block keeps every line the crawler received, except those that would describe the payload
falsely: `Content-Encoding`/`Content-Length` of a decoded body (and a `Transfer-Encoding`, which
the crawler never receives) are kept renamed `X-Archive-Orig-<name>` (pywb's own prefix) and a true
`Content-Length` is added, so `WARC-Payload-Digest` is the digest of the bytes written and every
reader replays them as they are. Header values are written as the bytes received (Latin-1, RFC 9110
obs-text), never percent-encoded. The answers of the redirects the crawler followed (`redirects`)
come first, each a response and its request.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from io import BytesIO
from typing import Any, cast
from urllib.parse import urlsplit

from warcio.recordbuilder import RecordBuilder
from warcio.statusandheaders import StatusAndHeaders

from utils.schemas.page import PageMessage

Record = Any  # warcio's ArcWarcRecord (untyped)
NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
IDENTICAL = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
ORIG = "X-Archive-Orig-"
DROPPED_WHEN_DECODED = ("content-encoding", "content-length")


@dataclass(frozen=True)
class Stored:
    """The last payload stored for a URL: what a revisit record refers to."""

    digest: str
    date: str


class LastPayloads:
    """The last payload digest and date stored per URL, the `capacity` most recent URLs (LRU).

    Per process: a URL whose earlier fetch another warc process stored is written in full again
    (never a revisit that points at nothing)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(capacity, 0)
        self._last: OrderedDict[str, Stored] = OrderedDict()

    def get(self, url: str) -> Stored | None:
        found = self._last.get(url)
        if found is not None:
            self._last.move_to_end(url)
        return found

    def put(self, url: str, stored: Stored) -> None:
        if not self.capacity:
            return
        self._last[url] = stored
        self._last.move_to_end(url)
        while len(self._last) > self.capacity:
            self._last.popitem(last=False)


def warc_date(page: PageMessage) -> str:
    """WARC-Date: when the request went to the network (else when the page was sent), UTC, microseconds."""
    when = page.get("fetch_time") or page.get("timestamp") or datetime.now(UTC).replace(tzinfo=None).isoformat()
    return (when if "." in when else when + ".000000")[:26] + "Z"


def payload(page: PageMessage) -> bytes:
    """The body's bytes (empty when the message carries none)."""
    body = page.get("body")
    if not body:
        return b""
    if page.get("body_encoding") == "base64":
        return _base64(body) or body.encode("utf-8")
    try:
        text = body.encode(page.get("encoding") or "utf-8")
    except (LookupError, UnicodeEncodeError):
        text = body.encode("utf-8")
    return _base64(page.get("body_bom") or "") + text


def _base64(data: str) -> bytes:
    """`data`'s bytes, b"" when it is not base64."""
    try:
        return base64.b64decode(data)
    except (binascii.Error, ValueError):
        return b""


def sha1_digest(data: bytes) -> str:
    """WARC's payload digest: `sha1:` and base32 (what warcio writes and pywb compares)."""
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")


class ServedHeaders(StatusAndHeaders):  # type: ignore[misc]
    """A header block written as the bytes received: the crawler reads header bytes as Latin-1, so
    Latin-1 gives them back (RFC 9110 obs-text), where warcio would percent-encode a non-ASCII value."""

    def to_ascii_bytes(self, filter_func: Any = None) -> bytes:
        try:
            return bytes(self.to_str(filter_func).encode("latin-1")) + b"\r\n"
        except UnicodeEncodeError:  # not from a crawler (a character past U+00FF): warcio's way
            return bytes(super().to_ascii_bytes(filter_func))


def header_lines(page: PageMessage) -> list[tuple[str, str]]:
    lines = page.get("raw_response_headers")
    if lines:
        return [(str(name), str(value)) for name, value in lines]
    return [(name, value) for name, values in (page.get("response_headers") or {}).items() for value in values]


def response_headers(page: PageMessage, length: int, truncated: bool) -> StatusAndHeaders:
    """The status line and the header lines, made true of the payload written (module docstring)."""
    decoded_names = {name.lower() for name in (page.get("response_headers") or {})}
    lines = header_lines(page)
    decoded = any(n.lower() == "content-encoding" for n, _ in lines) and "content-encoding" not in decoded_names
    out: list[tuple[str, str]] = []
    length_named = False
    for name, value in lines:
        low = name.lower()
        wrong_length = low == "content-length" and not truncated and value.strip() != str(length)
        if low == "transfer-encoding" or (decoded and low == "content-encoding") or wrong_length:
            out.append((ORIG + name, value))
            continue
        length_named = length_named or low == "content-length"
        out.append((name, value))
    if not length_named and not truncated:
        out.append(("Content-Length", str(length)))
    status = page.get("status_code") or 200
    return ServedHeaders(f"{status} {page.get('status_msg') or ''}".strip(), out,
                         protocol=page.get("http_version") or "HTTP/1.1")  # fmt: skip


def request_headers(page: PageMessage) -> StatusAndHeaders:
    """`<method> <target> <version>` and the header lines sent (warcio takes a request's version only
    from the status line: its `protocol=` holds the method)."""
    url = page.get("response_url") or page.get("url") or ""
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [(name, value) for name, values in (page.get("request_headers") or {}).items() for value in values]
    if not any(name.lower() == "host" for name, _ in lines):
        lines.insert(0, ("Host", parts.netloc))
    method = str(page.get("method") or "GET")
    return ServedHeaders(f"{method} {target} {page.get('http_version') or 'HTTP/1.1'}", lines,
                         is_http_request=True)  # fmt: skip


def redirects(page: PageMessage) -> list[PageMessage]:
    """The answers of the redirects followed to the page, first first (each shaped as a page message)."""
    hops = page.get("redirects")
    if not isinstance(hops, list):
        return []
    return [cast(PageMessage, hop) for hop in hops
            if isinstance(hop, dict) and hop.get("url") and hop.get("status_code") is not None]  # fmt: skip


class RecordMaker:
    """Records of one page message, and the last payloads they refer back to."""

    def __init__(self, builder: RecordBuilder, last: LastPayloads, dom_spiders: Iterable[str]) -> None:
        self.builder = builder
        self.last = last
        self.dom_spiders = frozenset(dom_spiders)

    def records(self, page: PageMessage) -> list[Record]:
        """The records in the order to write them; a failed fetch has none but its redirects' (it
        has no response of its own)."""
        hops = [record for hop in redirects(page) for record in self._exchange(hop)]
        if not page.get("success", True) or page.get("status_code") is None:
            return hops
        url = page.get("response_url") or page.get("url") or ""
        date = warc_date(page)
        if page.get("spiderid") in self.dom_spiders:
            return [*hops, *self._rendered(page, url, date)]
        main, request = self._exchange(page)
        return [*hops, main, request, *self._outlinks(page, url, date, main)]

    def _exchange(self, page: PageMessage) -> tuple[Record, Record]:
        """The response (or revisit) record of one HTTP answer, and its request record."""
        url = page.get("response_url") or page.get("url") or ""
        base = {"WARC-Date": warc_date(page)}
        if page.get("remote_address"):
            base["WARC-IP-Address"] = str(page.get("remote_address"))
        request = self.builder.create_warc_record(url, "request", http_headers=request_headers(page),
                                                  warc_headers_dict=dict(base))  # fmt: skip
        main = self._main(page, url, base)
        request.rec_headers.add_header("WARC-Concurrent-To", main.rec_headers.get_header("WARC-Record-ID"))
        return main, request

    def _main(self, page: PageMessage, url: str, base: dict[str, str]) -> Record:
        """The response record, or a revisit record when there is nothing new to store."""
        body = payload(page)
        truncated = bool(page.get("body_dropped"))
        http = response_headers(page, len(body), truncated)
        before = self.last.get(url)
        if page.get("status_code") == 304:
            record = self.builder.create_warc_record(url, "revisit", http_headers=http, warc_headers_dict=dict(base))
            record.rec_headers.add_header("WARC-Profile", NOT_MODIFIED)
            record.rec_headers.add_header("WARC-Refers-To-Target-URI", url)
            if before is not None:
                record.rec_headers.add_header("WARC-Refers-To-Date", before.date)
                record.rec_headers.add_header("WARC-Payload-Digest", before.digest)
            return record
        digest = sha1_digest(body)
        if before is not None and before.digest == digest and not truncated and page.get("status_code") == 200:
            record = self.builder.create_revisit_record(url, digest, url, before.date, http_headers=http,
                                                        warc_headers_dict=dict(base))  # fmt: skip
            record.rec_headers.replace_header("WARC-Profile", IDENTICAL)
            return record
        headers = dict(base)
        headers["WARC-Payload-Digest"] = digest  # computed above for the revisit check: warcio does not again
        if truncated:
            headers["WARC-Truncated"] = "length"
        record = self.builder.create_warc_record(url, "response", payload=BytesIO(body), length=None,
                                                 http_headers=http, warc_headers_dict=headers)  # fmt: skip
        if not truncated:
            self.last.put(url, Stored(record.rec_headers.get_header("WARC-Payload-Digest"), base["WARC-Date"]))
        return record

    def _outlinks(self, page: PageMessage, url: str, date: str, main: Record) -> list[Record]:
        """The page's metadata record (warc-fields): its outlinks and, when its crawl extracted it, the
        digest of its main text (`extracted-text-digest`, sha1 of the UTF-8 text, as payload digests are
        spelled) and its SimHash, so an archive can be matched to the text a search index holds."""
        links = [link.get("url", "") for link in page.get("links") or [] if isinstance(link, dict)]
        lines = [f"outlink: {link}" for link in links if link]
        text = page.get("text")
        if isinstance(text, str):
            lines.append(f"extracted-text-digest: {sha1_digest(text.encode('utf-8', 'surrogatepass'))}")
        if isinstance(page.get("simhash"), str):
            lines.append(f"extracted-text-simhash: {page.get('simhash')}")
        if not lines:
            return []
        fields = "".join(f"{line}\r\n" for line in lines).encode("utf-8")
        return [self._metadata(url, date, fields, "application/warc-fields", main)]

    def _rendered(self, page: PageMessage, url: str, date: str) -> list[Record]:
        """A browser's page: the message holds the DOM it rendered, not the bytes a server sent, so it is
        stored as metadata (never as a response that would replay the DOM as if served)."""
        dom = self.builder.create_warc_record(url, "metadata", payload=BytesIO(payload(page)),
                                              warc_content_type="text/html; charset=utf-8",
                                              warc_headers_dict={"WARC-Date": date})  # fmt: skip
        return [dom, *self._outlinks(page, url, date, dom)]

    def _metadata(self, url: str, date: str, data: bytes, content_type: str, about: Record) -> Record:
        record = self.builder.create_warc_record(url, "metadata", payload=BytesIO(data),
                                                 warc_content_type=content_type,
                                                 warc_headers_dict={"WARC-Date": date})  # fmt: skip
        record.rec_headers.add_header("WARC-Concurrent-To", about.rec_headers.get_header("WARC-Record-ID"))
        return record
