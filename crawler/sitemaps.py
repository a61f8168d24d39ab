"""Sitemaps (sitemaps.org 0.9) read within bounds: XML, gzip-compressed XML, or plain text.

A sitemap is untrusted input. It is parsed by lxml's pull parser with entities left unresolved,
no network, no DTD loading and huge_tree off (libxml2 refuses entity amplification itself: a
"billion laughs" file ends in an XMLSyntaxError after microseconds). A gzip body is decompressed
in bounded steps, never past `max_bytes` of XML (a 10 GiB gzip stops at 50 MiB). At most
`max_urls` entries are kept; the rest of the file is still counted (`over_limit`), so a larger
file yields its first entries and says how many it dropped. Each entry's `lastmod` is a unix time;
one that does not parse, or lies more than a day in the future (year 9999), is dropped and counted.
URLs on another host than the sitemap's are not the site's to announce (the protocol's rule) and
are counted too.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urljoin, urlsplit

from lxml import etree

CHUNK = 256 * 1024  # bytes of XML fed to the parser at a time
GZIP_INPUT = 64 * 1024  # bytes of gzip handed to zlib at a time
FUTURE_SLACK = 86400  # seconds; a lastmod further ahead than this is not believed
GZIP_MAGIC = b"\x1f\x8b"
KINDS = ("urlset", "sitemapindex")
ENTRY_TAGS = ("{*}url", "{*}sitemap", "url", "sitemap")
ROOT_TAGS = ("{*}urlset", "{*}sitemapindex", "urlset", "sitemapindex")

# changefreq as a revisit interval hint, in seconds; "never" (archived) is 0: do not revisit.
CHANGEFREQ_SECONDS = {
    "always": 60,
    "hourly": 3600,
    "daily": 86400,
    "weekly": 7 * 86400,
    "monthly": 30 * 86400,
    "yearly": 365 * 86400,
    "never": 0,
}

ROOT_WITHIN = 64 * 1024  # bytes; a sitemap's root element starts within them
_TAG = re.compile(rb"<([!?/]?)([A-Za-z_][\w.:-]*)")
ENTRY_ENDS = (b"</url>", b"</sitemap>", b":url>", b":sitemap>")  # entries past the limit, counted in the raw XML
_W3C = re.compile(
    r"^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?"
    r"(Z|z|[+-]\d{2}:?\d{2})?)?)?)?$"
)


@dataclass(frozen=True, slots=True)
class Entry:
    """One `<url>` (or `<sitemap>` of an index): lastmod in unix seconds (0 = none given)."""

    url: str
    lastmod: int = 0
    revisit_hint: int | None = None  # seconds, from changefreq; None = none given
    priority: float | None = None  # 0.0 .. 1.0


@dataclass(slots=True)
class Sitemap:
    """What a body held: `kind` is urlset, sitemapindex, text, or '' (not a sitemap)."""

    kind: str = ""
    entries: list[Entry] = field(default_factory=list)
    over_limit: int = 0  # entries past max_urls, counted not kept
    other_host: int = 0  # entries on another host (or not http/https), dropped
    bad_lastmod: int = 0  # lastmods unreadable or in the future, ignored
    truncated: bool = False  # the XML went past max_bytes: the rest was not read
    error: str = ""  # why reading stopped early (malformed XML, a corrupt gzip)

    def summary(self) -> dict[str, object]:
        """The counts as the sitemap's page message carries them."""
        return {"kind": self.kind, "entries": len(self.entries), "over_limit": self.over_limit,
                "other_host": self.other_host, "bad_lastmod": self.bad_lastmod, "truncated": self.truncated,
                "error": self.error}  # fmt: skip


def read_sitemap(body: bytes, url: str, max_urls: int = 50_000, max_bytes: int = 50 * 1024 * 1024,
                 now: float | None = None) -> Sitemap:  # fmt: skip
    """The sitemap in `body` (fetched from `url`), within the bounds; never raises on bad input."""
    reader = _Reader(url, max_urls, now if now is not None else datetime.now(UTC).timestamp())
    chunks = _bounded(body, max_bytes, reader.sitemap)
    first = next(chunks, b"")
    head = first.lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"<"):
        if _root(first[:ROOT_WITHIN]) in KINDS:  # an HTML page of the crawl is not parsed as XML at all
            reader.xml(first, chunks)
    elif head[:8].lower().startswith((b"http://", b"https://")):
        reader.text(first, chunks)
    return reader.sitemap


def _bounded(body: bytes, max_bytes: int, sitemap: Sitemap) -> Iterator[bytes]:
    """The XML in pieces: the body itself, or its gzip members decompressed, never past max_bytes."""
    if not body.startswith(GZIP_MAGIC):
        if len(body) > max_bytes:
            sitemap.truncated = True
        for start in range(0, min(len(body), max_bytes), CHUNK):
            yield body[start : min(start + CHUNK, max_bytes)]
        return
    view, pos, left = memoryview(body), 0, max_bytes
    pending: bytes | memoryview = b""
    inflater = zlib.decompressobj(wbits=31)
    try:
        while left > 0:
            if not pending:
                if pos >= len(body):
                    return
                pending, pos = view[pos : pos + GZIP_INPUT], pos + GZIP_INPUT  # small inputs: no copy of the rest
            piece = inflater.decompress(pending, min(CHUNK, left))
            pending = inflater.unconsumed_tail
            if inflater.eof:  # the next member of a multi-member gzip
                pending, inflater = inflater.unused_data, zlib.decompressobj(wbits=31)
            left -= len(piece)
            if piece:
                yield piece
    except zlib.error as exc:
        sitemap.error = f"corrupt gzip: {exc}"
        return
    sitemap.truncated = bool(pending) or pos < len(body)


class _Reader:
    def __init__(self, url: str, max_urls: int, now: float) -> None:
        parts = urlsplit(url)
        self.base, self.host = url, (parts.hostname or "").lower()
        self.same_host = tuple(f"{scheme}://{parts.netloc}{end}" for scheme in ("http", "https") for end in "/?")
        self.max_urls, self.now = max_urls, now
        self.lastmods: dict[str, int] = {}  # lastmod text -> unix s (0 = refused): most files repeat a few
        self.sitemap = Sitemap()

    def xml(self, first: bytes, rest: Iterator[bytes]) -> None:
        parser = etree.XMLPullParser(
            events=("start", "end"), tag=ROOT_TAGS + ENTRY_TAGS, resolve_entities=False, huge_tree=False,
            no_network=True, load_dtd=False, remove_comments=True, remove_pis=True,
        )  # fmt: skip
        try:
            for chunk in _chain(first, rest):
                parser.feed(chunk)
                if not self._events(parser):
                    return
                if len(self.sitemap.entries) >= self.max_urls:  # full: the rest is only counted
                    self.sitemap.over_limit += sum(piece.count(end) for piece in rest for end in ENTRY_ENDS)
                    return
            parser.close()
            self._events(parser)
        except etree.XMLSyntaxError as exc:
            self._events(parser)
            self.sitemap.error = f"malformed XML: {str(exc)[:200]}"

    def _events(self, parser: etree.XMLPullParser) -> bool:
        """Entries of the events so far; False when the root says this is no sitemap."""
        sitemap = self.sitemap
        for event, element in parser.read_events():
            name = element.tag.rpartition("}")[2]
            if event == "start":
                if not sitemap.kind:
                    if name not in KINDS:
                        return False
                    sitemap.kind = name
                continue
            if name in KINDS or not sitemap.kind:
                continue
            if len(sitemap.entries) >= self.max_urls:
                sitemap.over_limit += 1  # counted without a look inside
            else:
                self._entry({child.tag.rpartition("}")[2]: (child.text or "") for child in element
                             if isinstance(child.tag, str)})  # fmt: skip
            element.clear()
            parent = element.getparent()
            while parent is not None and element.getprevious() is not None:
                del parent[0]
        return True

    def text(self, first: bytes, rest: Iterator[bytes]) -> None:
        """A text sitemap: one URL per line (UTF-8)."""
        self.sitemap.kind = "text"
        tail = b""
        for chunk in _chain(first, rest):
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            for line in lines:
                self._line(line)
        self._line(tail)

    def _line(self, line: bytes) -> None:
        url = line.strip().decode("utf-8", "replace")
        if url:
            self._entry({"loc": url})

    def _entry(self, fields: dict[str, str]) -> None:
        sitemap = self.sitemap
        url = fields.get("loc", "").strip()
        if not url.startswith(self.same_host):
            url = self._on_host(url)
            if not url:
                sitemap.other_host += 1
                return
        if len(sitemap.entries) >= self.max_urls:
            sitemap.over_limit += 1
            return
        lastmod, text = 0, fields.get("lastmod", "").strip()
        if text:
            lastmod = self.lastmods.get(text, -1)
            if lastmod < 0:
                lastmod = self.lastmods[text] = parse_lastmod(text, self.now) or 0
            sitemap.bad_lastmod += not lastmod
        sitemap.entries.append(Entry(url.partition("#")[0], lastmod,
                                     CHANGEFREQ_SECONDS.get(fields.get("changefreq", "").strip().lower()),
                                     _priority(fields.get("priority", ""))))  # fmt: skip

    def _on_host(self, url: str) -> str:
        """The slow path: a relative URL, or another spelling of the host (case, default port);
        '' when the URL is on another host or not http(s)."""
        url = urljoin(self.base, url)
        parts = urlsplit(url)
        return url if parts.scheme in ("http", "https") and (parts.hostname or "").lower() == self.host else ""


def _root(head: bytes) -> str:
    """The local name of the first element in `head` (after the XML declaration, comments and a
    DOCTYPE), or ''."""
    for match in _TAG.finditer(head):
        if not match.group(1):
            return match.group(2).rpartition(b":")[2].decode("ascii", "replace")
    return ""


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _priority(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0.0 <= value <= 1.0 else None


def parse_lastmod(text: str, now: float) -> int | None:
    """A W3C datetime (YYYY, YYYY-MM, YYYY-MM-DD, with time and zone) as unix seconds; None when it
    does not parse or lies more than FUTURE_SLACK ahead of `now`."""
    match = _W3C.match(text.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second, zone = match.groups()
    try:
        moment = datetime(int(year), int(month or 1), int(day or 1), int(hour or 0), int(minute or 0),
                          int(second or 0), tzinfo=UTC)  # fmt: skip
    except ValueError:
        return None
    stamp = int(moment.timestamp()) - _offset(zone)
    return stamp if 0 < stamp <= now + FUTURE_SLACK else None


def _offset(zone: str | None) -> int:
    """Seconds east of UTC of a W3C zone designator (Z, +hh:mm, -hhmm)."""
    if not zone or zone in "Zz":
        return 0
    digits = zone[1:].replace(":", "")
    seconds = int(digits[:2]) * 3600 + int(digits[2:4]) * 60
    return seconds if zone[0] == "+" else -seconds
