"""Block detection (issue 33): is this response a site pushing back, and why?

`BlockDetector.detect` looks at one response of a leased request and answers a `Detection` (a
reason) or None. Signs: a status of BLOCK_STATUSES (403, 429, 503; a Retry-After is kept), a body
matching a marker (BLOCK_MARKERS and the domain's `blocks.markers` in ZooKeeper, on RE2), and, when
switched on (they suit domains of alike pages), a 200 HTML page far smaller than the domain's usual
HTML pages (BLOCK_SMALL_RATIO of their running mean) and an HTML page without links where the
domain's pages usually have some (BLOCK_LINKS_VANISHED). Users add signs by subclassing
and naming their class in BLOCK_DETECTOR (docs/how-to/sites-that-push-back.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from scrapy.http import Response

from utils.config.safe_regex import pattern_set
from utils.config.settings import Settings

LINK = b"<a "  # a cheap link count: the detector runs on every page, before any parse
MEAN_WEIGHT = 0.1  # weight of a new clean page in the running means (about the last 10 pages)


@dataclass(frozen=True)
class Detection:
    reason: str  # status_403, status_429, marker, small_page, links_vanished, or a subclass's own
    detail: str = ""


@dataclass
class DomainShape:
    """The running mean size and link count of a domain's clean pages."""

    pages: int = 0
    size: float = 0.0
    links: float = 0.0

    def add(self, size: int, links: int) -> None:
        weight = 1.0 if self.pages == 0 else max(MEAN_WEIGHT, 1.0 / (self.pages + 1))
        self.size += (size - self.size) * weight
        self.links += (links - self.links) * weight
        self.pages += 1


class Detector(Protocol):
    def detect(self, response: Response, domain: str, markers: tuple[str, ...]) -> Detection | None: ...


class BlockDetector:
    def __init__(self, statuses: frozenset[int], markers: tuple[str, ...], small_ratio: float,
                 min_samples: int, links_vanished: bool = True) -> None:  # fmt: skip
        self.statuses, self.markers = statuses, markers
        self.small_ratio, self.min_samples, self.links_vanished = small_ratio, min_samples, links_vanished
        self.shapes: dict[str, DomainShape] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> BlockDetector:
        return cls(frozenset(int(s) for s in settings.get_list("BLOCK_STATUSES")),
                   tuple(settings.get_list("BLOCK_MARKERS")), settings.get_float("BLOCK_SMALL_RATIO"),
                   settings.get_int("BLOCK_MIN_SAMPLES"), settings.get_bool("BLOCK_LINKS_VANISHED"))  # fmt: skip

    def detect(self, response: Response, domain: str, markers: tuple[str, ...] = ()) -> Detection | None:
        """The first sign found, else None (and the page joins the domain's usual shape)."""
        found = self.by_status(response) or self.by_marker(response, self.markers + markers)
        if found is not None or response.status != 200 or not (self.small_ratio or self.links_vanished):
            return found
        return self.by_shape(response, domain)

    def by_status(self, response: Response) -> Detection | None:
        if response.status not in self.statuses:
            return None
        after = response.headers.get(b"Retry-After")
        return Detection(f"status_{response.status}", f"Retry-After: {after.decode('latin-1')}" if after else "")

    def by_marker(self, response: Response, markers: tuple[str, ...]) -> Detection | None:
        if not markers:
            return None
        text = response.body[:1 << 20].decode("utf-8", "replace")  # markers sit near the top of a challenge page
        return Detection("marker") if pattern_set(markers).search(text) else None

    def by_shape(self, response: Response, domain: str) -> Detection | None:
        size, html = len(response.body), b"html" in (response.headers.get(b"Content-Type") or b"html").lower()
        if not html:  # a sitemap, feed or PDF is judged by status and markers only: its size says nothing (issue 31)
            return None
        links = response.body.count(LINK)
        shape = self.shapes.setdefault(domain, DomainShape())
        if shape.pages >= self.min_samples:
            if size < self.small_ratio * shape.size:
                return Detection("small_page", f"{size} bytes, usually {shape.size:.0f}")
            if self.links_vanished and html and links == 0 and shape.links >= 1:
                return Detection("links_vanished", f"no links, usually {shape.links:.1f}")
        shape.add(size, links)
        return None
