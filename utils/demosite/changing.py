"""Demo pages that change over time (issue 31): each page's versions follow a Poisson process.

`ChangingPages` serves `/fresh/index.html` (links to every page, never changes) and
`/fresh/<i>.html`, whose content moves to a new version at the events of a Poisson process of
rate `rates[i]` (changes per second of site time). Site time runs `speed` times faster than the
clock, so a benchmark sees days of change in minutes. With `validators` each answer carries an
ETag (the version) and a Last-Modified (wall time of the last change, HTTP-date), and a request
whose If-None-Match names the current ETag (or, without one, whose If-Modified-Since is not
older than the last change) is answered 304 without a body (RFC 9110, 13.1.1-13.1.3).
"""

from __future__ import annotations

import bisect
import random
import threading
import time
from collections.abc import Callable, Sequence
from email.utils import formatdate, parsedate_to_datetime

HTML = "text/html; charset=utf-8"
PREFIX = "/fresh/"
INDEX_PATH = "/fresh/index.html"


class ChangingPages:
    def __init__(
        self, host: str, rates: Sequence[float], speed: float = 1.0, seed: int = 31, validators: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.host = host  # ip:port the pages' links name
        self.rates = list(rates)
        self.speed = speed
        self.validators = validators
        self.clock = clock
        self.start = clock()
        self._random = [random.Random(seed * 1_000_003 + i) for i in range(len(self.rates))]
        self._events: list[list[float]] = [[] for _ in self.rates]  # site times of each page's changes so far
        self._lock = threading.Lock()
        self.answers: dict[int, int] = {}  # status -> answers given (the bench's and tests' check)

    def url(self, index: int) -> str:
        return f"http://{self.host}{PREFIX}{index}.html"

    @property
    def index_url(self) -> str:
        return f"http://{self.host}{INDEX_PATH}"

    def site_time(self, now: float | None = None) -> float:
        return ((self.clock() if now is None else now) - self.start) * self.speed

    def version(self, index: int, now: float | None = None) -> int:
        """How many times page `index` has changed by `now` (wall clock)."""
        at = self.site_time(now)
        with self._lock:
            events = self._events_until(index, at)
            return bisect.bisect_right(events, at)

    def last_change(self, index: int, now: float | None = None) -> float:
        """Wall time of the page's last change (the start when it never changed)."""
        at = self.site_time(now)
        with self._lock:
            events = self._events_until(index, at)
            n = bisect.bisect_right(events, at)
        return self.start + (events[n - 1] / self.speed if n else 0.0)

    def body(self, index: int, version: int) -> bytes:
        return (f"<!DOCTYPE html>\n<html><head><title>Fresh {index}</title></head><body><h1>Product {index}</h1>"
                f"<p class=\"price\">{100 + version % 97}.{version % 100:02d}</p><p>version {version}</p>"
                f"<a href=\"{INDEX_PATH}\">all</a></body></html>\n").encode()  # fmt: skip

    def index_body(self) -> bytes:
        links = "".join(f'<li><a href="{PREFIX}{i}.html">product {i}</a></li>' for i in range(len(self.rates)))
        page = f"<!DOCTYPE html>\n<html><head><title>Fresh</title></head><body><ul>{links}</ul></body></html>\n"
        return page.encode()

    def answer(
        self, path: str, if_none_match: str = "", if_modified_since: str = ""
    ) -> tuple[int, str, bytes, str] | None:
        """(status, content type, body, extra header lines) for one of these paths, else None."""
        if not path.startswith(PREFIX):
            return None
        if path == INDEX_PATH:
            return self._answer(200, self.index_body(), "")
        name = path[len(PREFIX):]
        if not name.endswith(".html") or not name[:-5].isdigit() or int(name[:-5]) >= len(self.rates):
            return None
        index = int(name[:-5])
        now = self.clock()
        version, changed = self.version(index, now), self.last_change(index, now)
        if not self.validators:
            return self._answer(200, self.body(index, version), "")
        etag = f'"{index}-{version}"'
        headers = f"ETag: {etag}\r\nLast-Modified: {formatdate(changed, usegmt=True)}\r\n"
        if _current(etag, changed, if_none_match, if_modified_since):
            return self._answer(304, b"", headers)
        return self._answer(200, self.body(index, version), headers)

    def _answer(self, status: int, body: bytes, headers: str) -> tuple[int, str, bytes, str]:
        with self._lock:
            self.answers[status] = self.answers.get(status, 0) + 1
        return status, HTML, body, headers

    def _events_until(self, index: int, at: float) -> list[float]:
        """The page's change times up to past `at`, drawn once and kept (so every answer agrees)."""
        events, rate = self._events[index], self.rates[index]
        if rate <= 0:
            return events
        while not events or events[-1] <= at:
            events.append((events[-1] if events else 0.0) + self._random[index].expovariate(rate))
        return events


def _current(etag: str, changed: float, if_none_match: str, if_modified_since: str) -> bool:
    """Whether the client's copy is current: If-None-Match wins; else If-Modified-Since (whole seconds)."""
    if if_none_match:
        return etag in (tag.strip() for tag in if_none_match.split(",")) or if_none_match.strip() == "*"
    if not if_modified_since:
        return False
    try:
        since = parsedate_to_datetime(if_modified_since).timestamp()
    except (TypeError, ValueError):
        return False
    return int(changed) <= since
