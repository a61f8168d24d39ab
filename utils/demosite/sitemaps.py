"""Sitemaps for the demo site (issue 31): an index of gzip sitemaps whose lastmods can be moved.

`SitemapSet` lists `files` x `per_file` page URLs of one host in `/sitemaps/part-<k>.xml.gz`, under
`/sitemap_index.xml` (each part's lastmod is its newest entry's) and a robots.txt naming the index.
Each file is answered with an ETag and a Last-Modified, and with 304 to a request whose
If-None-Match or If-Modified-Since still matches, as a well-kept server does. `move(n)` gives n
URLs spread over the parts a later lastmod and re-renders the parts and the index that changed, so
a re-poll finds exactly those n. The server (utils/demosite/server.py) asks `answer` first.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime

INDEX_PATH = "/sitemap_index.xml"
ROBOTS_PATH = "/robots.txt"
XML_TYPE = "application/xml"
GZIP_TYPE = "application/gzip"
NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
START = 1_700_000_000  # unix s: the first lastmod (Nov 2023); entry i has START + i


@dataclass(frozen=True)
class Served:
    """One file as the server answers it (the server builds the bytes on the wire)."""

    content_type: str
    body: bytes
    etag: str
    last_modified: str  # an HTTP date

    def answer(self, if_none_match: str, if_modified_since: str) -> tuple[int, str, bytes, str]:
        """(status, content type, body, extra header lines): 304 when the client's copy is current."""
        headers = f"ETag: {self.etag}\r\nLast-Modified: {self.last_modified}\r\n"
        if if_none_match == self.etag or (not if_none_match and if_modified_since == self.last_modified):
            return 304, self.content_type, b"", headers
        return 200, self.content_type, self.body, headers


class SitemapSet:
    """`files` gzip sitemaps of `per_file` URLs each on `host` (`ip:port`), their index and robots.txt."""

    def __init__(self, host: str, files: int = 5, per_file: int = 10_000, page_path: str = "/sm/{k}/{i}.html",
                 robots: bool = True) -> None:  # fmt: skip
        self.host, self.files, self.per_file, self.page_path = host, files, per_file, page_path
        self.robots = robots
        self.lastmods = [START + i for i in range(files * per_file)]
        self._lock = threading.Lock()
        self._served: dict[str, Served] = {}
        self._render(range(files))

    def url(self, index: int) -> str:
        """The page URL of entry `index` (0 .. files x per_file - 1)."""
        k, i = divmod(index, self.per_file)
        return f"http://{self.host}{self.page_path.format(k=k, i=i)}"

    def part_url(self, k: int) -> str:
        return f"http://{self.host}/sitemaps/part-{k}.xml.gz"

    @property
    def index_url(self) -> str:
        return f"http://{self.host}{INDEX_PATH}"

    def move(self, n: int, at: int | None = None) -> list[str]:
        """Give n entries, spread evenly over every part, the lastmod `at` (default: now); their URLs."""
        total = len(self.lastmods)
        chosen = sorted({(j * total) // n + (total // n) // 2 for j in range(n)})
        stamp = at if at is not None else int(datetime.now(UTC).timestamp())
        for index in chosen:
            self.lastmods[index] = stamp
        self._render(sorted({index // self.per_file for index in chosen}))
        return [self.url(index) for index in chosen]

    def answer(
        self, path: str, if_none_match: str = "", if_modified_since: str = ""
    ) -> tuple[int, str, bytes, str] | None:
        """The server's answer for `path`, or None when it is not one of these files."""
        served = self._served.get(path)
        return None if served is None else served.answer(if_none_match, if_modified_since)

    def _render(self, parts: range | list[int]) -> None:
        rendered = {f"/sitemaps/part-{k}.xml.gz": self._part(k) for k in parts}
        with self._lock:
            served = {**self._served, **rendered}
            served[INDEX_PATH] = self._index()
            if self.robots:
                text = f"User-agent: *\nAllow: /\nSitemap: {self.index_url}\n".encode()
                served[ROBOTS_PATH] = _served("text/plain", text, START)
            self._served = served

    def _part(self, k: int) -> Served:
        start = k * self.per_file
        rows = "".join(f"<url><loc>{self.url(start + i)}</loc><lastmod>{_w3c(self.lastmods[start + i])}</lastmod>"
                       f"<changefreq>daily</changefreq></url>\n" for i in range(self.per_file))  # fmt: skip
        xml = f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{NS}">\n{rows}</urlset>\n'
        newest = max(self.lastmods[start : start + self.per_file])
        return _served(GZIP_TYPE, gzip.compress(xml.encode(), 6, mtime=0), newest)

    def _index(self) -> Served:
        rows = "".join(
            f"<sitemap><loc>{self.part_url(k)}</loc>"
            f"<lastmod>{_w3c(max(self.lastmods[k * self.per_file : (k + 1) * self.per_file]))}</lastmod></sitemap>\n"
            for k in range(self.files)
        )
        xml = f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="{NS}">\n{rows}</sitemapindex>\n'
        return _served(XML_TYPE, xml.encode(), max(self.lastmods))


def _served(content_type: str, body: bytes, modified: int) -> Served:
    etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
    return Served(content_type, body, etag, format_datetime(datetime.fromtimestamp(modified, UTC), usegmt=True))


def _w3c(stamp: int) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")
